/*
 * waits.c (gcc-12, libgomp): a thread blocked in omp_set_lock on a lock
 * another thread holds, and a thread waiting to enter an unnamed critical
 * section that a parked thread holds. Run with OMP_WAIT_POLICY=passive
 * (the waiters sleep in the kernel at once).
 *
 * One region of 3 threads (LINE:parallel), created by main:
 *   thread 0 (the initial thread) sets `lock` (LINE:set), enters the
 *     unnamed critical section (LINE:critical), records itself, waits for
 *     the other two records, prints READY and parks inside the critical
 *     section in hold() (LINE:announce; in abort mode it aborts there).
 *   thread 1 waits in omp_set_lock(&lock) at LINE:wait_lock in
 *     wait_lock().
 *   thread 2 waits to enter the unnamed critical section at
 *     LINE:wait_critical in wait_critical().
 * The waiters block only once thread 0 holds both.
 *
 * READY: lock=ADDR (the omp_lock_t's address, %p) and one t<TID> record
 * per thread (record.h), whose thread numbers tell the roles.
 */
#include "record.h"

static omp_lock_t lock;
static atomic_int held;
static struct fx_line line;

static __attribute__((noinline)) void hold(void) {
  atomic_store(&held, 1);
  struct fx_slot *self = rec_me();
  fx_add(&line, "lock", "%p", (void *)&lock);
  rec_announce(&line, 3, self); /* LINE:announce */
  rec_park();
}

static __attribute__((noinline)) void wait_lock(void) {
  omp_set_lock(&lock); /* LINE:wait_lock */
  fx_fail("thread 1 acquired a lock that is never released");
}

static __attribute__((noinline)) void wait_critical(void) {
#pragma omp critical /* LINE:wait_critical */
  fx_fail("thread 2 entered a critical section that is never left");
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  fx_begin(&line);
  omp_init_lock(&lock);
#pragma omp parallel num_threads(3) /* LINE:parallel */
  {
    int me = omp_get_thread_num();
    if (omp_get_num_threads() != 3)
      fx_fail("the region has %d threads", omp_get_num_threads());
    if (me == 0) {
      omp_set_lock(&lock); /* LINE:set */
#pragma omp critical /* LINE:critical */
      hold();
    } else {
      while (!atomic_load(&held))
        nanosleep(&fx_nap, NULL);
      rec_me();
      if (me == 1)
        wait_lock();
      else
        wait_critical();
    }
  }
  fx_fail("the region ended");
  return 1;
}
