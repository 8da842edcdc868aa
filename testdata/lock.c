/*
 * lock.c: threads blocked on an OpenMP lock held by another thread.
 *
 * A parallel region of 3 threads (LINE:parallel). Final state, thread by
 * thread:
 *   thread 0  (the initial thread) holds `lock` (acquired at LINE:acquire)
 *            and `nest_lock` (set at LINE:acquire_nest, then set again by
 *            omp_test_nest_lock, so its nesting count is 2), and sleeps
 *            forever in hold_lock() at
 *            LINE:hold_spin; prints READY (and aborts in abort mode,
 *            LINE:abort).
 *   threads 1, 2  wait in omp_set_lock(&lock) at LINE:wait_lock in
 *            wait_lock(). libomp's default (queuing) lock waits by spinning
 *            and yielding, so these two threads use CPU while they wait.
 *
 * READY keys:
 *   threads=3 holder=TID waiters=T1,T2 (by thread number) t0=TID t1=TID
 *   t2=TID lock=ADDR nest_lock=ADDR (addresses of the omp_lock_t and
 *   omp_nest_lock_t variables, as printed by %p) nest_depth=2
 */
#include <omp.h>

#include "fixture.h"

enum { NTHREADS = 3 };

static omp_lock_t lock;
static omp_nest_lock_t nest_lock;
static struct fx_slot member[NTHREADS];
static atomic_int held;

static void hold_lock(void) {
  fx_record(&member[0]);
  struct fx_slot *waiters[] = {&member[1], &member[2]};
  fx_settle(waiters, 2);

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", omp_get_num_threads());
  fx_add(&l, "holder", "%d", fx_tid(&member[0]));
  fx_add_tids(&l, "waiters", waiters, 2);
  fx_add(&l, "t0", "%d", fx_tid(&member[0]));
  fx_add(&l, "t1", "%d", fx_tid(&member[1]));
  fx_add(&l, "t2", "%d", fx_tid(&member[2]));
  fx_add(&l, "lock", "%p", (void *)&lock);
  fx_add(&l, "nest_lock", "%p", (void *)&nest_lock);
  fx_add(&l, "nest_depth", "%d", 2);
  fx_emit(&l);
  FX_MAYBE_ABORT(); /* LINE:abort */

  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:hold_spin */
}

static void wait_lock(int me) {
  while (!atomic_load(&held))
    nanosleep(&fx_nap, NULL);
  fx_record(&member[me]);
  omp_set_lock(&lock); /* LINE:wait_lock */
  fx_fail("thread %d acquired a lock that is never released", me);
}

static void team_body(void) {
  int me = omp_get_thread_num();
  if (omp_get_num_threads() != NTHREADS)
    fx_fail("team of %d threads, want %d", omp_get_num_threads(), NTHREADS);
  if (me != 0)
    wait_lock(me);
  omp_set_lock(&lock); /* LINE:acquire */
  omp_set_nest_lock(&nest_lock); /* LINE:acquire_nest */
  if (omp_test_nest_lock(&nest_lock) != 2)
    fx_fail("nest lock count is not 2");
  atomic_store(&held, 1);
  hold_lock();
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  omp_init_lock(&lock);
  omp_init_nest_lock(&nest_lock);
#pragma omp parallel num_threads(NTHREADS) /* LINE:parallel */
  team_body();
  fx_fail("parallel region ended");
  return 1;
}
