/*
 * deadlock.c: threads blocked on locks and critical sections whose holders
 * are known, and two threads deadlocked on two locks.
 *
 * A parallel region of 8 threads (LINE:parallel). Final state, by role:
 *   dl_a        holds lock_a (LINE:dl_a_take) and waits in
 *               omp_set_lock(&lock_b) at LINE:dl_a_wait.
 *   dl_b        holds lock_b (LINE:dl_b_take) and waits in
 *               omp_set_lock(&lock_a) at LINE:dl_b_wait: dl_a and dl_b are
 *               deadlocked.
 *   nest_holder holds nest_lock with nesting count 2 (LINE:nest_take, then
 *               LINE:nest_again) and sleeps in user code (LINE:park).
 *   nest_waiter waits in omp_set_nest_lock(&nest_lock) at LINE:nest_wait.
 *   crit_holder is inside the unnamed critical section (LINE:crit_take) and
 *               sleeps there (LINE:park).
 *   crit_waiter waits to enter it at LINE:crit_wait.
 *   named_holder is inside critical(fx_named) (LINE:named_take) and sleeps
 *               there (LINE:park).
 *   named_waiter waits to enter it at LINE:named_wait.
 * The announcer is nest_holder: it waits until every other thread is in
 * its wait, prints READY and sleeps (aborts in abort mode, LINE:abort).
 *
 * libomp's default lock is a queuing lock: waiters spin and yield, so they
 * use CPU while they wait.
 *
 * READY keys: threads=8, one key per role with its tid (dl_a, dl_b,
 * nest_holder, nest_waiter, crit_holder, crit_waiter, named_holder,
 * named_waiter), lock_a, lock_b, nest_lock (addresses of the omp_lock_t and
 * omp_nest_lock_t variables, as printed by %p), nest_depth=2.
 */
#include <omp.h>

#include "fixture.h"

enum {
  DL_A,
  DL_B,
  NEST_HOLDER,
  NEST_WAITER,
  CRIT_HOLDER,
  CRIT_WAITER,
  NAMED_HOLDER,
  NAMED_WAITER,
  NTHREADS
};

static const char *const role_name[NTHREADS] = {
    "dl_a",        "dl_b",        "nest_holder",  "nest_waiter",
    "crit_holder", "crit_waiter", "named_holder", "named_waiter"};

static omp_lock_t lock_a, lock_b;
static omp_nest_lock_t nest_lock;
static struct fx_slot member[NTHREADS];
static atomic_int taken;     /* holders that hold what they will hold */
static atomic_int dl_taken;  /* dl_a and dl_b hold their first lock */

enum { HOLDERS = 5 }; /* dl_a, dl_b, nest_holder, crit_holder, named_holder */

static void wait_for(atomic_int *v, int n) {
  while (atomic_load(v) < n)
    nanosleep(&fx_nap, NULL);
}

static void park(void) {
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:park */
}

static void announce(void) {
  struct fx_slot *others[NTHREADS - 1];
  int n = 0;
  for (int i = 0; i < NTHREADS; i++)
    if (i != NEST_HOLDER)
      others[n++] = &member[i];
  fx_settle(others, n);

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", omp_get_num_threads());
  for (int i = 0; i < NTHREADS; i++)
    fx_add(&l, role_name[i], "%d", fx_tid(&member[i]));
  fx_add(&l, "lock_a", "%p", (void *)&lock_a);
  fx_add(&l, "lock_b", "%p", (void *)&lock_b);
  fx_add(&l, "nest_lock", "%p", (void *)&nest_lock);
  fx_add(&l, "nest_depth", "%d", 2);
  fx_emit(&l);
  FX_MAYBE_ABORT(); /* LINE:abort */
  park();
}

static void team_body(void) {
  int me = omp_get_thread_num();
  if (omp_get_num_threads() != NTHREADS)
    fx_fail("team of %d threads, want %d", omp_get_num_threads(), NTHREADS);
  switch (me) {
  case DL_A:
    omp_set_lock(&lock_a); /* LINE:dl_a_take */
    atomic_fetch_add(&dl_taken, 1);
    atomic_fetch_add(&taken, 1);
    wait_for(&dl_taken, 2);
    fx_record(&member[me]);
    omp_set_lock(&lock_b); /* LINE:dl_a_wait */
    fx_fail("dl_a acquired lock_b");
    break;
  case DL_B:
    omp_set_lock(&lock_b); /* LINE:dl_b_take */
    atomic_fetch_add(&dl_taken, 1);
    atomic_fetch_add(&taken, 1);
    wait_for(&dl_taken, 2);
    fx_record(&member[me]);
    omp_set_lock(&lock_a); /* LINE:dl_b_wait */
    fx_fail("dl_b acquired lock_a");
    break;
  case NEST_HOLDER:
    omp_set_nest_lock(&nest_lock); /* LINE:nest_take */
    omp_set_nest_lock(&nest_lock); /* LINE:nest_again */
    atomic_fetch_add(&taken, 1);
    fx_record(&member[me]);
    wait_for(&taken, HOLDERS);
    announce();
    break;
  case NEST_WAITER:
    wait_for(&taken, HOLDERS);
    fx_record(&member[me]);
    omp_set_nest_lock(&nest_lock); /* LINE:nest_wait */
    fx_fail("nest_waiter acquired nest_lock");
    break;
  case CRIT_HOLDER:
#pragma omp critical /* LINE:crit_take */
    {
      atomic_fetch_add(&taken, 1);
      fx_record(&member[me]);
      park();
    }
    break;
  case CRIT_WAITER:
    wait_for(&taken, HOLDERS);
    fx_record(&member[me]);
#pragma omp critical /* LINE:crit_wait */
    fx_fail("crit_waiter entered the critical section");
    break;
  case NAMED_HOLDER:
#pragma omp critical(fx_named) /* LINE:named_take */
    {
      atomic_fetch_add(&taken, 1);
      fx_record(&member[me]);
      park();
    }
    break;
  case NAMED_WAITER:
    wait_for(&taken, HOLDERS);
    fx_record(&member[me]);
#pragma omp critical(fx_named) /* LINE:named_wait */
    fx_fail("named_waiter entered the critical section");
    break;
  }
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  omp_init_lock(&lock_a);
  omp_init_lock(&lock_b);
  omp_init_nest_lock(&nest_lock);
#pragma omp parallel num_threads(NTHREADS) /* LINE:parallel */
  team_body();
  fx_fail("parallel region ended");
  return 1;
}
