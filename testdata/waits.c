/*
 * waits.c: threads waiting in the ways the other fixtures do not cover, for
 * the differential backtrace tests against gdb.
 *
 * Every OpenMP root calls kmp_set_blocktime(0) before its region, so that
 * a thread waiting in the runtime (in a barrier, idle in the pool) goes to
 * sleep at once in pthread_cond_wait instead of spinning first; each
 * region checks that it took effect.
 *
 * Nine OS threads. Final state, thread by thread:
 *   main            the initial thread. Its region of 3 threads
 *                   (LINE:pool_parallel) has ended; it starts the other
 *                   threads, prints READY (and aborts in abort mode,
 *                   LINE:abort), then sleeps in nanosleep() at
 *                   LINE:main_sleep.
 *   idle 1, 2       the two workers of that region: idle in the thread
 *                   pool, asleep in the runtime's fork barrier, no user
 *                   frame on their stacks.
 *   holder          a second OpenMP root, a pthread (crit_root), forks a
 *                   region of 3 threads (LINE:crit_parallel). As its thread
 *                   0 it holds the critical section `waits_crit`
 *                   (LINE:critical_hold) and sleeps inside it at
 *                   LINE:holder_sleep.
 *   critical_waiter thread 1 of that region: waits to enter the same
 *                   critical section at LINE:critical_wait (spinning and
 *                   yielding in the runtime's lock).
 *   barrier_waiter  thread 2 of that region: asleep in the explicit barrier
 *                   at LINE:barrier, which the others never reach.
 *   sleeper         a pthread asleep in usleep() at LINE:usleep.
 *   handler         a pthread that spun in interrupted() (LINE:spin) until
 *                   main sent it SIGUSR1; the handler, on the thread's own
 *                   stack, sleeps in nanosleep() at LINE:handler_sleep and
 *                   never returns.
 *   vdso            a pthread calling clock_gettime() in a loop in
 *                   poll_clock() (LINE:poll); main sends it SIGUSR2 until
 *                   the signal interrupts it inside the vDSO (the handler
 *                   returns at once otherwise); that handler sleeps in
 *                   nanosleep() at LINE:vdso_sleep and never returns, so
 *                   the interrupted frame stays inside the vDSO.
 *
 * READY keys:
 *   threads=9 main=TID idle=T1,T2 holder=TID critical_waiter=TID
 *   barrier_waiter=TID sleeper=TID handler=TID vdso=TID
 *   vdso_lo=0xADDR vdso_hi=0xADDR (the vDSO's mapping, from
 *   /proc/self/maps) vdso_pc=0xADDR (the interrupted pc inside it)
 *   vdso_signals=N (how many SIGUSR2 it took)
 */
/* fixture.h first: it defines _GNU_SOURCE, which REG_RIP needs. */
#include "fixture.h"

#include <dirent.h>
#include <omp.h>
#include <stdint.h>
#include <ucontext.h>

enum { NTHREADS = 9, POOL = 3, CRIT = 3, MAX_VDSO_SIGNALS = 100000 };

static struct fx_slot idle[POOL - 1], holder, critical_waiter, barrier_waiter,
    sleeper, handler, vdso;
static atomic_int crit_held;

/* The signal handlers' state. */
static atomic_ulong spins;
static atomic_int vdso_handled; /* SIGUSR2 handled so far */
static atomic_int vdso_caught;  /* the vdso thread waits in its handler */
static uintptr_t vdso_lo, vdso_hi;
static atomic_uintptr_t vdso_pc;

static void check_blocktime(void) {
  if (kmp_get_blocktime() != 0)
    fx_fail("thread %d: blocktime %d, want 0", omp_get_thread_num(),
            kmp_get_blocktime());
}

/* find_vdso sets vdso_lo and vdso_hi from /proc/self/maps. */
static void find_vdso(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f)
    fx_fail("opening /proc/self/maps: %s", strerror(errno));
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (!strstr(line, "[vdso]"))
      continue;
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
      fx_fail("bad maps line %s", line);
    vdso_lo = lo;
    vdso_hi = hi;
  }
  fclose(f);
  if (vdso_lo == 0)
    fx_fail("no [vdso] mapping");
}

/* count_threads returns the number of threads of this process. */
static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d)
    fx_fail("opening /proc/self/task: %s", strerror(errno));
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

/* ---- the critical section team ---- */

static void crit_team_body(void) {
  if (omp_get_num_threads() != CRIT)
    fx_fail("team of %d threads, want %d", omp_get_num_threads(), CRIT);
  check_blocktime();
  switch (omp_get_thread_num()) {
  case 0:
#pragma omp critical(waits_crit) /* LINE:critical_hold */
    {
      atomic_store(&crit_held, 1);
      fx_record(&holder);
      for (;;)
        nanosleep(&fx_nap, NULL); /* LINE:holder_sleep */
    }
    break;
  case 1:
    while (!atomic_load(&crit_held))
      nanosleep(&fx_nap, NULL);
    fx_record(&critical_waiter);
#pragma omp critical(waits_crit) /* LINE:critical_wait */
    fx_fail("entered a critical section that is never left");
    break;
  default:
    fx_record(&barrier_waiter);
#pragma omp barrier /* LINE:barrier */
    fx_fail("barrier completed without threads 0 and 1");
  }
}

static void *crit_root(void *arg) {
  (void)arg;
  kmp_set_blocktime(0);
#pragma omp parallel num_threads(CRIT) /* LINE:crit_parallel */
  crit_team_body();
  fx_fail("the critical section team ended");
  return NULL;
}

/* ---- the plain threads ---- */

static void *sleeper_main(void *arg) {
  (void)arg;
  fx_record(&sleeper);
  for (;;)
    usleep(20 * 1000); /* LINE:usleep */
  return NULL;
}

__attribute__((noinline)) static void wait_in_handler(void) {
  fx_record(&handler);
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:handler_sleep */
}

static void on_usr1(int sig) {
  (void)sig;
  wait_in_handler();
}

__attribute__((noinline)) static void interrupted(void) {
  for (;;)
    spins++; /* LINE:spin */
}

static void *handler_main(void *arg) {
  (void)arg;
  interrupted();
  return NULL;
}

__attribute__((noinline)) static void wait_in_vdso_handler(void) {
  fx_record(&vdso);
  atomic_store(&vdso_caught, 1);
  atomic_fetch_add(&vdso_handled, 1);
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:vdso_sleep */
}

static void on_usr2(int sig, siginfo_t *si, void *ctx) {
  (void)sig;
  (void)si;
  uintptr_t pc = (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
  if (pc >= vdso_lo && pc < vdso_hi) {
    atomic_store(&vdso_pc, pc);
    wait_in_vdso_handler();
  }
  atomic_fetch_add(&vdso_handled, 1);
}

__attribute__((noinline)) static void poll_clock(void) {
  struct timespec ts;
  for (;;)
    clock_gettime(CLOCK_MONOTONIC, &ts); /* LINE:poll */
}

static void *vdso_main(void *arg) {
  (void)arg;
  poll_clock();
  return NULL;
}

static pthread_t start(void *(*fn)(void *)) {
  pthread_t th;
  int err = pthread_create(&th, NULL, fn, NULL);
  if (err != 0)
    fx_fail("pthread_create: %s", strerror(err));
  return th;
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  find_vdso();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  if (sigaction(SIGUSR1, &sa, NULL) != 0)
    fx_fail("sigaction SIGUSR1: %s", strerror(errno));
  sa.sa_sigaction = on_usr2;
  sa.sa_flags = SA_SIGINFO;
  if (sigaction(SIGUSR2, &sa, NULL) != 0)
    fx_fail("sigaction SIGUSR2: %s", strerror(errno));

  kmp_set_blocktime(0);
#pragma omp parallel num_threads(POOL) /* LINE:pool_parallel */
  {
    if (omp_get_num_threads() != POOL)
      fx_fail("team of %d threads, want %d", omp_get_num_threads(), POOL);
    check_blocktime();
    int me = omp_get_thread_num();
    if (me != 0)
      fx_record(&idle[me - 1]);
  }

  start(crit_root);
  start(sleeper_main);
  pthread_t ht = start(handler_main);
  pthread_t vt = start(vdso_main);

  /* The handler thread is interrupted in interrupted(), once it spins. */
  while (atomic_load(&spins) == 0)
    nanosleep(&fx_nap, NULL);
  int err = pthread_kill(ht, SIGUSR1);
  if (err != 0)
    fx_fail("pthread_kill SIGUSR1: %s", strerror(err));

  /* The vdso thread is signalled until the signal finds it in the vDSO;
   * each signal is sent once the previous one has been handled. */
  const struct timespec brief = {0, 100 * 1000L};
  int sent = 0;
  while (!atomic_load(&vdso_caught)) {
    if (sent == MAX_VDSO_SIGNALS)
      fx_fail("%d signals never found the vdso thread in the vDSO", sent);
    int handled = atomic_load(&vdso_handled);
    err = pthread_kill(vt, SIGUSR2);
    if (err != 0)
      fx_fail("pthread_kill SIGUSR2: %s", strerror(err));
    sent++;
    while (atomic_load(&vdso_handled) == handled)
      nanosleep(&brief, NULL);
  }

  struct fx_slot *all[] = {&idle[0],          &idle[1], &holder,
                           &critical_waiter,  &barrier_waiter,
                           &sleeper,          &handler, &vdso};
  fx_settle(all, 8);
  if (count_threads() != NTHREADS)
    fx_fail("%d threads, want %d", count_threads(), NTHREADS);

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", NTHREADS);
  fx_add(&l, "main", "%d", fx_gettid());
  struct fx_slot *idles[] = {&idle[0], &idle[1]};
  fx_add_tids(&l, "idle", idles, 2);
  fx_add(&l, "holder", "%d", fx_tid(&holder));
  fx_add(&l, "critical_waiter", "%d", fx_tid(&critical_waiter));
  fx_add(&l, "barrier_waiter", "%d", fx_tid(&barrier_waiter));
  fx_add(&l, "sleeper", "%d", fx_tid(&sleeper));
  fx_add(&l, "handler", "%d", fx_tid(&handler));
  fx_add(&l, "vdso", "%d", fx_tid(&vdso));
  fx_add(&l, "vdso_lo", "%#lx", (unsigned long)vdso_lo);
  fx_add(&l, "vdso_hi", "%#lx", (unsigned long)vdso_hi);
  fx_add(&l, "vdso_pc", "%#lx", (unsigned long)atomic_load(&vdso_pc));
  fx_add(&l, "vdso_signals", "%d", sent);
  fx_emit(&l);
  FX_MAYBE_ABORT(); /* LINE:abort */

  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:main_sleep */
}
