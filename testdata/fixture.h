/*
 * fixture.h: helpers shared by the ompd-inspect fixture programs.
 *
 * Every fixture reaches a known state, announces it with exactly one line
 *
 *     READY pid=<pid> key=value key=value ...
 *
 * on stdout (flushed), and then stays in that state until it is killed.
 * Given the single argument "abort", it raises RLIMIT_CORE to unlimited at
 * start-up and one chosen thread calls abort() right after printing READY,
 * so that the kernel writes a core file of exactly that state.
 *
 * Readiness: a thread that will end up waiting calls fx_record() as the last
 * thing before its wait. The announcing thread then waits in fx_settle()
 * until every recorded thread is either asleep in the kernel (state S in
 * /proc/self/task/TID/stat) or has used at least FX_SETTLE_CPU_NS of CPU
 * time since it recorded itself (it is spinning, for example in a libomp
 * barrier or lock). Either way it has left the few instructions between
 * fx_record() and its wait, so READY is never printed while a thread is
 * still on its way.
 *
 * This header does not include omp.h so that plain.c can use it too.
 */
#ifndef OMPD_INSPECT_FIXTURE_H
#define OMPD_INSPECT_FIXTURE_H

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* CPU time a spinning thread must have used after fx_record() to count as
 * settled in its wait. */
#define FX_SETTLE_CPU_NS (2 * 1000 * 1000L)

/* Nonzero when the program was started with the argument "abort". Written
 * once by fx_init() before any other thread exists. */
static int fx_abort_mode __attribute__((unused));

/* The pause of every user-level wait loop: long enough to cost no CPU. */
static const struct timespec fx_nap __attribute__((unused)) = {
    0, 20 * 1000 * 1000L};

/* fx_fail reports a broken assumption of the fixture on stderr and ends the
 * process with status 3 (no core), so that a test fails with a clear reason
 * instead of waiting for a READY line that never comes. */
static inline void fx_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stderr);
  _exit(3);
}

/* fx_init parses the command line: no argument, or "abort". */
static inline void fx_init(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "abort") == 0) {
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    if (setrlimit(RLIMIT_CORE, &rl) != 0)
      fx_fail("setrlimit(RLIMIT_CORE, unlimited): %s", strerror(errno));
    fx_abort_mode = 1;
  } else if (argc != 1) {
    fprintf(stderr, "usage: %s [abort]\n", argv[0]);
    exit(2);
  }
}

/* fx_gettid returns the calling thread's kernel thread id. */
static inline int fx_gettid(void) { return (int)syscall(SYS_gettid); }

/* One thread a fixture reports on. */
struct fx_slot {
  atomic_int tid;        /* 0 until fx_record() */
  clockid_t cpuclock;    /* the thread's CPU-time clock */
  struct timespec cpu0;  /* its CPU time when it recorded itself */
};

/* fx_record stores the calling thread's tid in s; call it as the last thing
 * before the thread's final wait. */
static inline void fx_record(struct fx_slot *s) {
  if (pthread_getcpuclockid(pthread_self(), &s->cpuclock) != 0)
    fx_fail("pthread_getcpuclockid failed");
  if (clock_gettime(s->cpuclock, &s->cpu0) != 0)
    fx_fail("clock_gettime(thread cpu clock): %s", strerror(errno));
  atomic_store(&s->tid, fx_gettid());
}

/* fx_tid returns the tid recorded in s, 0 if none yet. */
static inline int fx_tid(struct fx_slot *s) { return atomic_load(&s->tid); }

/* fx_task_state returns the scheduler state letter of thread tid of this
 * process, or 0 when it cannot be read. */
static inline char fx_task_state(int tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ')
    return 0;
  return p[2];
}

/* fx_settled reports whether the thread recorded in s has reached its wait
 * (see the comment at the top of this file). */
static inline int fx_settled(struct fx_slot *s) {
  int tid = fx_tid(s);
  if (tid == 0)
    return 0;
  if (fx_task_state(tid) == 'S')
    return 1;
  struct timespec now;
  if (clock_gettime(s->cpuclock, &now) != 0)
    fx_fail("clock_gettime(thread cpu clock): %s", strerror(errno));
  long long used = (now.tv_sec - s->cpu0.tv_sec) * 1000000000LL +
                   (now.tv_nsec - s->cpu0.tv_nsec);
  return used >= FX_SETTLE_CPU_NS;
}

/* fx_settle blocks until every slot in slots[0..n) is recorded and settled.
 * NULL entries are skipped. */
static inline void fx_settle(struct fx_slot **slots, int n) {
  const struct timespec poll = {0, 2 * 1000 * 1000L};
  for (;;) {
    int all = 1;
    for (int i = 0; i < n && all; i++)
      if (slots[i] && !fx_settled(slots[i]))
        all = 0;
    if (all)
      return;
    nanosleep(&poll, NULL);
  }
}

/* fx_line accumulates the READY line. */
struct fx_line {
  char buf[8192];
  size_t len;
};

/* fx_add appends " key=value" with value formatted by fmt. Values must not
 * contain spaces. */
static inline void fx_add(struct fx_line *l, const char *key,
                          const char *fmt, ...) {
  va_list ap;
  int n = snprintf(l->buf + l->len, sizeof l->buf - l->len, " %s=", key);
  if (n < 0 || (size_t)n >= sizeof l->buf - l->len)
    fx_fail("READY line too long");
  l->len += (size_t)n;
  va_start(ap, fmt);
  n = vsnprintf(l->buf + l->len, sizeof l->buf - l->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof l->buf - l->len)
    fx_fail("READY line too long");
  l->len += (size_t)n;
}

/* fx_add_tids appends " key=tid,tid,..." for the slots in order. */
static inline void fx_add_tids(struct fx_line *l, const char *key,
                        struct fx_slot **slots, int n) {
  char v[1024];
  size_t len = 0;
  v[0] = 0;
  for (int i = 0; i < n; i++) {
    int w = snprintf(v + len, sizeof v - len, "%s%d", i ? "," : "",
                     fx_tid(slots[i]));
    if (w < 0 || (size_t)w >= sizeof v - len)
      fx_fail("tid list too long");
    len += (size_t)w;
  }
  fx_add(l, key, "%s", v);
}

/* fx_begin_running starts a READY line with the pid, for an announcing
 * thread that keeps running after READY (busy.c). */
static inline void fx_begin_running(struct fx_line *l) {
  l->len = 0;
  l->buf[0] = 0;
  int n = snprintf(l->buf, sizeof l->buf, "READY");
  l->len = (size_t)n;
  fx_add(l, "pid", "%d", (int)getpid());
}

/* fx_begin starts a READY line with the pid and "announcer=TID", the
 * calling thread, which must go to sleep in the kernel right after
 * fx_emit() (a nanosleep loop, a join) unless it aborts. The test harness
 * waits for that sleep before it uses the process, so that no test sees the
 * announcer still on its way back from printing READY. */
static inline void fx_begin(struct fx_line *l) {
  fx_begin_running(l);
  fx_add(l, "announcer", "%d", fx_gettid());
}

/* fx_emit prints the READY line and flushes stdout. */
static inline void fx_emit(struct fx_line *l) {
  printf("%s\n", l->buf);
  fflush(stdout);
}

/* FX_MAYBE_ABORT is placed right after fx_emit() in the announcing thread:
 * in abort mode that thread aborts there, on the line of the macro. */
#define FX_MAYBE_ABORT()                                                       \
  do {                                                                         \
    if (fx_abort_mode)                                                         \
      abort();                                                                 \
  } while (0)

#endif
