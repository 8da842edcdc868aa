/*
 * blocked.c (gcc-12, libgomp): threads blocked on every kind of object
 * libgomp lets a thread wait for, at once, for BlockedOn's tests. Run with
 * OMP_WAIT_POLICY=passive (waiters sleep in futex(2) at once).
 *
 * Five pthreads each start a region of their own (each is the root of its
 * team and has its own thread pool):
 *   L (4 threads): thread 0 sets lock_a and waits for lock_b, thread 1
 *     sets lock_b and waits for lock_a (a deadlock); threads 2 and 3 sleep
 *     in an explicit barrier the other two never reach.
 *   N (2 threads): thread 0 sets the nest lock twice, then parks in an
 *     undeferred task (its current task is the task's, whose parent
 *     acquired the lock); thread 1 waits for the nest lock.
 *   C (6 threads): thread 0 parks inside critical(blocked_x), thread 1
 *     waits for it; thread 2 parks inside the unnamed critical section,
 *     thread 3 waits for it; thread 4 parks holding libgomp's atomic lock
 *     (GOMP_atomic_start, called directly), thread 5 waits for it.
 *   T (4 threads): thread 0 waits in taskwait for a child that runs,
 *     parked, on another thread; thread 2 waits at the end of a taskgroup
 *     for a child that runs, parked, on another thread; threads 1 and 3
 *     are in an explicit barrier, where they picked up the two children.
 *   O (2 threads): in an ordered loop (schedule(static,1)), thread 0 parks
 *     inside iteration 0's ordered region, thread 1 waits to enter
 *     iteration 1's.
 * The main thread waits until every role is recorded and settled, prints
 * READY and parks (in abort mode it aborts there).
 *
 * READY: lock_a, lock_b, nest, crit_x (the addresses of the two
 * omp_lock_t, the omp_nest_lock_t and the named critical section's
 * .gomp_critical_user_blocked_x, %p) and the tid of each role:
 *   lock_ab (holds lock_a, waits for lock_b), lock_ba (holds lock_b,
 *   waits for lock_a), barrier (two tids), nest_holder, nest_waiter,
 *   crit_holder, crit_waiter, ucrit_holder, ucrit_waiter, atomic_holder,
 *   atomic_waiter, taskwait, taskgroup, runners (two tids),
 *   ordered_holder, ordered_waiter.
 */
#include "../fixture.h"
#include <omp.h>

extern void GOMP_atomic_start(void);

/* The named critical section's lock: the compiler's common symbol. */
extern char crit_x_sym[] __asm__(".gomp_critical_user_blocked_x");

enum {
  LOCK_AB, LOCK_BA, BARRIER0, BARRIER1, NEST_HOLDER, NEST_WAITER,
  CRIT_HOLDER, CRIT_WAITER, UCRIT_HOLDER, UCRIT_WAITER, ATOMIC_HOLDER,
  ATOMIC_WAITER, TASKWAIT, TASKGROUP, RUNNER0, RUNNER1, ORDERED_HOLDER,
  ORDERED_WAITER, NROLES
};

static struct fx_slot slots[NROLES];
static atomic_int runners;
static omp_lock_t lock_a, lock_b;
static omp_nest_lock_t nest;
static atomic_int locked, nest_held, crit_held, ucrit_held, atomic_held,
    child1, child2;

static void park(void) {
  for (;;)
    nanosleep(&fx_nap, NULL);
}

static void until(atomic_int *flag, int n) {
  while (atomic_load(flag) < n)
    nanosleep(&fx_nap, NULL);
}

static void check(int n) {
  if (omp_get_num_threads() != n)
    fx_fail("a region has %d threads, want %d", omp_get_num_threads(), n);
}

static void *team_l(void *arg) {
#pragma omp parallel num_threads(4)
  {
    check(4);
    int me = omp_get_thread_num();
    if (me < 2) {
      omp_set_lock(me == 0 ? &lock_a : &lock_b);
      atomic_fetch_add(&locked, 1);
      until(&locked, 2);
      fx_record(&slots[me == 0 ? LOCK_AB : LOCK_BA]);
      omp_set_lock(me == 0 ? &lock_b : &lock_a); /* LINE:set_lock */
      fx_fail("a deadlocked thread got its lock");
    }
    fx_record(&slots[me == 2 ? BARRIER0 : BARRIER1]);
#pragma omp barrier /* LINE:barrier */
    fx_fail("a barrier the deadlocked threads never reach was passed");
  }
  return arg;
}

static void *team_n(void *arg) {
#pragma omp parallel num_threads(2)
  {
    check(2);
    if (omp_get_thread_num() == 0) {
      omp_set_nest_lock(&nest);
      omp_set_nest_lock(&nest);
#pragma omp task if (0)
      {
        atomic_store(&nest_held, 1);
        fx_record(&slots[NEST_HOLDER]);
        park();
      }
    } else {
      until(&nest_held, 1);
      fx_record(&slots[NEST_WAITER]);
      omp_set_nest_lock(&nest); /* LINE:set_nest */
      fx_fail("the nest lock was acquired twice");
    }
  }
  return arg;
}

static void *team_c(void *arg) {
#pragma omp parallel num_threads(6)
  {
    check(6);
    switch (omp_get_thread_num()) {
    case 0:
#pragma omp critical(blocked_x)
      {
        atomic_store(&crit_held, 1);
        fx_record(&slots[CRIT_HOLDER]);
        park();
      }
      break;
    case 1:
      until(&crit_held, 1);
      fx_record(&slots[CRIT_WAITER]);
#pragma omp critical(blocked_x) /* LINE:crit_x */
      fx_fail("entered a critical section that is never left");
      break;
    case 2:
#pragma omp critical
      {
        atomic_store(&ucrit_held, 1);
        fx_record(&slots[UCRIT_HOLDER]);
        park();
      }
      break;
    case 3:
      until(&ucrit_held, 1);
      fx_record(&slots[UCRIT_WAITER]);
#pragma omp critical /* LINE:ucrit */
      fx_fail("entered a critical section that is never left");
      break;
    case 4:
      GOMP_atomic_start();
      atomic_store(&atomic_held, 1);
      fx_record(&slots[ATOMIC_HOLDER]);
      park();
      break;
    case 5:
      until(&atomic_held, 1);
      fx_record(&slots[ATOMIC_WAITER]);
      GOMP_atomic_start(); /* LINE:atomic */
      fx_fail("got the atomic lock that is never released");
    }
  }
  return arg;
}

/* runner: the body of a child task, on the barrier thread that took it. */
static void runner(atomic_int *started) {
  fx_record(&slots[RUNNER0 + atomic_fetch_add(&runners, 1)]);
  atomic_store(started, 1);
  park();
}

static void *team_t(void *arg) {
#pragma omp parallel num_threads(4)
  {
    check(4);
    int me = omp_get_thread_num();
    if (me == 0) {
#pragma omp task
      runner(&child1);
      until(&child1, 1);
      fx_record(&slots[TASKWAIT]);
#pragma omp taskwait /* LINE:taskwait */
      fx_fail("a taskwait whose child never ends ended");
    } else if (me == 2) {
#pragma omp taskgroup
      {
#pragma omp task
        runner(&child2);
        until(&child2, 1);
        fx_record(&slots[TASKGROUP]);
      }
      fx_fail("a taskgroup whose child never ends ended");
    } else {
#pragma omp barrier
      fx_fail("passed a barrier threads 0 and 2 never reach");
    }
  }
  return arg;
}

static void *team_o(void *arg) {
#pragma omp parallel num_threads(2)
  {
    check(2);
#pragma omp for ordered schedule(static, 1)
    for (int i = 0; i < 2; i++) {
      if (i == 1)
        fx_record(&slots[ORDERED_WAITER]);
#pragma omp ordered
      {
        if (i != 0)
          fx_fail("entered iteration %d's ordered region", i);
        fx_record(&slots[ORDERED_HOLDER]);
        park();
      }
    }
  }
  return arg;
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  struct fx_line line;
  fx_begin(&line);
  omp_init_lock(&lock_a);
  omp_init_lock(&lock_b);
  omp_init_nest_lock(&nest);
  void *(*teams[])(void *) = {team_l, team_n, team_c, team_t, team_o};
  for (unsigned i = 0; i < sizeof teams / sizeof teams[0]; i++) {
    pthread_t th;
    if (pthread_create(&th, NULL, teams[i], NULL) != 0)
      fx_fail("pthread_create failed");
  }
  struct fx_slot *all[NROLES];
  for (int i = 0; i < NROLES; i++) {
    all[i] = &slots[i];
    while (fx_tid(all[i]) == 0)
      nanosleep(&fx_nap, NULL);
  }
  fx_settle(all, NROLES);
  fx_add(&line, "lock_a", "%p", (void *)&lock_a);
  fx_add(&line, "lock_b", "%p", (void *)&lock_b);
  fx_add(&line, "nest", "%p", (void *)&nest);
  fx_add(&line, "crit_x", "%p", (void *)crit_x_sym);
  static const char *keys[] = {"lock_ab", "lock_ba", "nest_holder",
                               "nest_waiter", "crit_holder", "crit_waiter",
                               "ucrit_holder", "ucrit_waiter",
                               "atomic_holder", "atomic_waiter", "taskwait",
                               "taskgroup", "ordered_holder",
                               "ordered_waiter"};
  static const int roles[] = {LOCK_AB, LOCK_BA, NEST_HOLDER, NEST_WAITER,
                              CRIT_HOLDER, CRIT_WAITER, UCRIT_HOLDER,
                              UCRIT_WAITER, ATOMIC_HOLDER, ATOMIC_WAITER,
                              TASKWAIT, TASKGROUP, ORDERED_HOLDER,
                              ORDERED_WAITER};
  for (unsigned i = 0; i < sizeof roles / sizeof roles[0]; i++)
    fx_add(&line, keys[i], "%d", fx_tid(&slots[roles[i]]));
  struct fx_slot *two[2] = {&slots[BARRIER0], &slots[BARRIER1]};
  fx_add_tids(&line, "barrier", two, 2);
  two[0] = &slots[RUNNER0];
  two[1] = &slots[RUNNER1];
  fx_add_tids(&line, "runners", two, 2);
  fx_emit(&line);
  FX_MAYBE_ABORT();
  park();
  return 0;
}
