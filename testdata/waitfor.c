/*
 * waitfor.c: whom a waiting thread waits for, three scenarios at once, each
 * in the parallel region (a team of 2) of its own pthread, plus a pthread
 * outside any region that holds a lock.
 *
 * (a) A lock held by a thread that runs (LINE:region_a):
 *   busy_holder  thread 0, takes busy_lock (LINE:busy_take) and spins in
 *                user code forever (LINE:busy_spin): it waits for nothing.
 *   busy_waiter  thread 1, waits in omp_set_lock(&busy_lock) at
 *                LINE:busy_wait.
 *
 * (b) A deadlock through a barrier (LINE:region_b):
 *   bar_holder   thread 0, takes bar_lock (LINE:bar_take), then waits in
 *                the explicit barrier at LINE:bar_wait.
 *   straggler    thread 1, waits in omp_set_lock(&bar_lock) at
 *                LINE:straggler_wait: it cannot reach the barrier until
 *                bar_holder lets the lock go, which bar_holder cannot do
 *                until the straggler reaches the barrier.
 *
 * (c) A taskwait with a child that stays queued (LINE:region_c):
 *   taskwaiter   thread 0, its implicit task creates three children:
 *                  D (LINE:task_d) depend(mutexinoutset: dep_m)
 *                    depend(out: dep_x),
 *                  C (LINE:task_c) depend(mutexinoutset: dep_m),
 *                  E (LINE:task_e) depend(in: dep_x),
 *                and waits in the taskwait at LINE:taskwait.
 *   runner       thread 1, waits in the explicit barrier at
 *                LINE:runner_barrier, where it takes D from the taskwaiter's
 *                deque (the taskwaiter creates C and E only once D has
 *                started) and runs it: D waits in omp_set_lock(&ext_lock)
 *                at LINE:ext_wait.
 *   ext_holder   a pthread outside any parallel region: takes ext_lock
 *                (LINE:ext_take; libomp registers it as a root) and sleeps
 *                in user code (LINE:park).
 *
 *   Why C stays queued. libomp's taskwait (__kmpc_omp_taskwait in
 *   kmp_tasking.cpp) runs its own children itself when it can: a queued
 *   child never waits for another thread unless the runtime forbids the
 *   waiting thread to start it. __kmp_task_is_allowed forbids it in two
 *   cases: the task scheduling constraint (a tied task may start only if
 *   it descends from the thread's last suspended tied task; a taskwait's
 *   own children always do), and mutexinoutset: a task with a
 *   mutexinoutset dependence may start only once it has taken the
 *   dependence's mutex (__kmp_test_lock on the dephash entry's mtx_lock).
 *   Tasks of the same mutexinoutset set do not depend on each other (C is
 *   ready, and pushed to the taskwaiter's deque at once), but D holds the
 *   mutex of dep_m from the moment the runner took it until D completes,
 *   which it never does. So __kmp_remove_my_task finds C at the tail of
 *   the taskwaiter's deque, __kmp_task_is_allowed fails to take the mutex,
 *   and C stays queued: created, ready, in a deque, never started, behind
 *   a thread (the runner) that is blocked on a lock whose holder is
 *   parked. E depends on D (dep_x) and is in no deque: blocked.
 *
 * The announcer is the main thread (it initialized the locks, so libomp
 * knows it as a root too): it waits until every thread above is in its
 * final state, prints READY and sleeps (LINE:park; aborts in abort mode,
 * LINE:abort).
 *
 * libomp's default lock is a queuing lock: its waiters spin and yield, and
 * busy_holder and the taskwaiter spin too, so this program keeps about
 * five cores busy.
 *
 * READY keys: one per role with its tid (busy_holder, busy_waiter,
 * bar_holder, straggler, taskwaiter, runner, ext_holder), busy_lock,
 * bar_lock, ext_lock (addresses of the omp_lock_t variables, as printed by
 * %p).
 */
#include <omp.h>

#include "fixture.h"

enum {
  BUSY_HOLDER,
  BUSY_WAITER,
  BAR_HOLDER,
  STRAGGLER,
  TASKWAITER,
  RUNNER,
  EXT_HOLDER,
  NROLES
};

static const char *const role_name[NROLES] = {
    "busy_holder", "busy_waiter", "bar_holder", "straggler",
    "taskwaiter",  "runner",      "ext_holder"};

static omp_lock_t busy_lock, bar_lock, ext_lock;
static struct fx_slot member[NROLES];
static atomic_int busy_taken, bar_taken, ext_taken, d_started;
static volatile unsigned long spins;
static char dep_m, dep_x;

static void wait_for(atomic_int *v) {
  while (!atomic_load(v))
    nanosleep(&fx_nap, NULL);
}

static void park(void) {
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:park */
}

static void check_team(const char *name) {
  if (omp_get_num_threads() != 2)
    fx_fail("%s: team of %d threads, want 2", name, omp_get_num_threads());
}

/* (a) */
static void *scenario_a(void *arg) {
  (void)arg;
#pragma omp parallel num_threads(2) /* LINE:region_a */
  {
    check_team("region_a");
    if (omp_get_thread_num() == 0) {
      omp_set_lock(&busy_lock); /* LINE:busy_take */
      atomic_store(&busy_taken, 1);
      fx_record(&member[BUSY_HOLDER]);
      for (;;) spins++; /* LINE:busy_spin */
    } else {
      wait_for(&busy_taken);
      fx_record(&member[BUSY_WAITER]);
      omp_set_lock(&busy_lock); /* LINE:busy_wait */
      fx_fail("busy_waiter acquired busy_lock");
    }
  }
  return NULL;
}

/* (b) */
static void *scenario_b(void *arg) {
  (void)arg;
#pragma omp parallel num_threads(2) /* LINE:region_b */
  {
    check_team("region_b");
    if (omp_get_thread_num() == 0) {
      omp_set_lock(&bar_lock); /* LINE:bar_take */
      atomic_store(&bar_taken, 1);
      fx_record(&member[BAR_HOLDER]);
#pragma omp barrier /* LINE:bar_wait */
      fx_fail("bar_holder left the barrier");
    } else {
      wait_for(&bar_taken);
      fx_record(&member[STRAGGLER]);
      omp_set_lock(&bar_lock); /* LINE:straggler_wait */
      fx_fail("straggler acquired bar_lock");
    }
  }
  return NULL;
}

/* (c) */
static void run_d(void) {
  atomic_store(&d_started, 1);
  wait_for(&ext_taken);
  fx_record(&member[RUNNER]);
  omp_set_lock(&ext_lock); /* LINE:ext_wait */
  fx_fail("runner acquired ext_lock");
}

static void *scenario_c(void *arg) {
  (void)arg;
#pragma omp parallel num_threads(2) /* LINE:region_c */
  {
    check_team("region_c");
    if (omp_get_thread_num() == 0) {
#pragma omp task depend(mutexinoutset : dep_m) depend(out : dep_x) /* LINE:task_d */
      run_d();
      wait_for(&d_started);
#pragma omp task depend(mutexinoutset : dep_m) /* LINE:task_c */
      fx_fail("the queued child C ran");
#pragma omp task depend(in : dep_x) /* LINE:task_e */
      fx_fail("the blocked child E ran");
      fx_record(&member[TASKWAITER]);
#pragma omp taskwait /* LINE:taskwait */
      fx_fail("the taskwait returned");
    } else {
#pragma omp barrier /* LINE:runner_barrier */
      fx_fail("the runner left the barrier");
    }
  }
  return NULL;
}

static void *ext_holder(void *arg) {
  (void)arg;
  omp_set_lock(&ext_lock); /* LINE:ext_take */
  atomic_store(&ext_taken, 1);
  fx_record(&member[EXT_HOLDER]);
  park();
  return NULL;
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  omp_init_lock(&busy_lock);
  omp_init_lock(&bar_lock);
  omp_init_lock(&ext_lock);
  void *(*const start[])(void *) = {ext_holder, scenario_a, scenario_b,
                                    scenario_c};
  for (size_t i = 0; i < sizeof start / sizeof start[0]; i++) {
    pthread_t th;
    int err = pthread_create(&th, NULL, start[i], NULL);
    if (err != 0)
      fx_fail("pthread_create: %s", strerror(err));
  }

  struct fx_slot *all[NROLES];
  for (int i = 0; i < NROLES; i++)
    all[i] = &member[i];
  fx_settle(all, NROLES);

  struct fx_line l;
  fx_begin(&l);
  for (int i = 0; i < NROLES; i++)
    fx_add(&l, role_name[i], "%d", fx_tid(&member[i]));
  fx_add(&l, "busy_lock", "%p", (void *)&busy_lock);
  fx_add(&l, "bar_lock", "%p", (void *)&bar_lock);
  fx_add(&l, "ext_lock", "%p", (void *)&ext_lock);
  fx_emit(&l);
  FX_MAYBE_ABORT(); /* LINE:abort */
  park();
  return 1;
}
