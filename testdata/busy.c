/*
 * busy.c: OpenMP work that never stops, for attach/detach stress tests.
 *
 * Every iteration n forks an outer team of 2 (LINE:outer); each outer
 * thread forks an inner team of 2 (LINE:inner); each inner thread creates
 * TASKS tasks (LINE:task) that each sum a slice of a sequence depending on
 * n, and waits for them (LINE:taskwait). The iteration compares the result
 * with the same sum computed sequentially and stops the program with
 * "FAIL ..." on stderr and exit status 1 on a mismatch.
 *
 * Output on stdout:
 *   READY pid=PID after the first iteration checked out (the main thread
 *     aborts there in abort mode, LINE:abort),
 *   then about once a second "OK <iterations> <checksum>": iterations is
 *   the number of checked iterations so far and checksum a running hash of
 *   their results.
 *
 * The checksum is a deterministic function of the iteration count, so that
 * a test can recompute it: with S(n) the sum of term(n, k) for k from 0 to
 * OUTER*INNER*TASKS*SLICE-1 (see term below), checksum(0) = 0 and
 * checksum(n) = checksum(n-1) * 31 + S(n), in unsigned 64-bit arithmetic.
 *
 * The threads are never in a fixed state: at any moment they may be forking,
 * joining, in a barrier, creating or running tasks; the inner teams' threads
 * go back to the runtime's thread pool at every join and leave it at every
 * fork.
 *
 * Environment (all optional; unset, the program runs as described above):
 *   BUSY_REPORT_MS=M  print the OK line every M milliseconds instead of
 *     every second.
 *   BUSY_EXIT_MS=M    after M milliseconds, print "DONE <iterations>
 *     <checksum>" and call exit(0) between two iterations, while the
 *     runtime's threads still exist (its exit handler shuts them down).
 *   BUSY_EXECS=K, BUSY_EXEC_MS=M  when K > 0, after M milliseconds (default
 *     20) print "EXEC <iterations> <checksum> <K>" and execute
 *     /proc/self/exe again with BUSY_EXECS=K-1: with K odd the main thread
 *     does it between two iterations, with K even the last thread of the
 *     last inner team does it in the middle of a parallel region (the
 *     kernel then kills every other thread and the pid passes to the
 *     execing thread). Every new image starts from iteration 1 and prints
 *     READY again; the one with BUSY_EXECS=0 runs on for good.
 *   BUSY_EXIT_MS and BUSY_EXECS are not meant to be combined.
 */
#include <omp.h>

#include "fixture.h"

enum { OUTER = 2, INNER = 2, TASKS = 4, SLICE = 2000 };

/* The state the EXEC line reports, written by the main thread between
 * iterations and read by the thread that executes the program again. */
static long checked;             /* iterations checked so far */
static unsigned long checksum;   /* their checksum */
static long execs_left;          /* BUSY_EXECS */
static char **program_argv;      /* argv, to execute the program again */

/* exec_from_worker tells the last thread of the last inner team to execute
 * the program again (BUSY_EXECS even). */
static atomic_int exec_from_worker;

/* exec_again prints the EXEC line and executes /proc/self/exe with the
 * same arguments; BUSY_EXECS has been set to execs_left-1 already. */
static void exec_again(void) {
  printf("EXEC %ld %lu %ld\n", checked, checksum, execs_left);
  fflush(stdout);
  execv("/proc/self/exe", program_argv);
  fx_fail("execv(/proc/self/exe): %s", strerror(errno));
}

/* term is the k-th element of iteration n's sequence. */
static long term(long n, long k) { return (n * 7919 + k * k) % 10007; }

static long slice_sum(long n, int slice) {
  long s = 0;
  for (long k = (long)slice * SLICE; k < (long)(slice + 1) * SLICE; k++)
    s += term(n, k);
  return s;
}

static long parallel_sum(long n) {
  long total = 0;
#pragma omp parallel num_threads(OUTER) reduction(+ : total) /* LINE:outer */
  {
    int o = omp_get_thread_num();
#pragma omp parallel num_threads(INNER) reduction(+ : total) /* LINE:inner */
    {
      int i = omp_get_thread_num();
      if (o == OUTER - 1 && i == INNER - 1 && atomic_load(&exec_from_worker))
        exec_again();
      long part[TASKS];
      for (int t = 0; t < TASKS; t++) {
        int slice = (o * INNER + i) * TASKS + t;
#pragma omp task shared(part) firstprivate(t, slice) /* LINE:task */
        part[t] = slice_sum(n, slice);
      }
#pragma omp taskwait /* LINE:taskwait */
      for (int t = 0; t < TASKS; t++)
        total += part[t];
    }
  }
  return total;
}

static long sequential_sum(long n) {
  long s = 0;
  for (int slice = 0; slice < OUTER * INNER * TASKS; slice++)
    s += slice_sum(n, slice);
  return s;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* env_long returns the non-negative decimal value of environment variable
 * name, or def when it is unset. */
static long env_long(const char *name, long def) {
  const char *v = getenv(name);
  if (!v || !*v)
    return def;
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (errno || *end || n < 0)
    fx_fail("%s=%s is not a non-negative number", name, v);
  return n;
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  program_argv = argv;
  double report = env_long("BUSY_REPORT_MS", 1000) / 1e3;
  long exit_ms = env_long("BUSY_EXIT_MS", -1);
  execs_left = env_long("BUSY_EXECS", 0);
  double exec_after = env_long("BUSY_EXEC_MS", 20) / 1e3;
  omp_set_max_active_levels(2);
  double start = now(), last = start;
  for (long n = 1;; n++) {
    long got = parallel_sum(n), want = sequential_sum(n);
    if (got != want) {
      fprintf(stderr, "FAIL iteration %ld: got %ld, want %ld\n", n, got, want);
      return 1;
    }
    checksum = checksum * 31 + (unsigned long)got;
    checked = n;
    if (n == 1) {
      struct fx_line l;
      fx_begin_running(&l);
      fx_emit(&l);
      FX_MAYBE_ABORT(); /* LINE:abort */
    }
    if (now() - last >= report) {
      last = now();
      printf("OK %ld %lu\n", n, checksum);
      fflush(stdout);
    }
    if (exit_ms >= 0 && now() - start >= exit_ms / 1e3) {
      printf("DONE %ld %lu\n", n, checksum);
      fflush(stdout);
      exit(0);
    }
    if (execs_left > 0 && !atomic_load(&exec_from_worker) &&
        now() - start >= exec_after) {
      char left[32];
      snprintf(left, sizeof left, "%ld", execs_left - 1);
      if (setenv("BUSY_EXECS", left, 1) != 0)
        fx_fail("setenv(BUSY_EXECS): %s", strerror(errno));
      if (execs_left % 2 == 1)
        exec_again();
      atomic_store(&exec_from_worker, 1);
    }
  }
}
