/*
 * nested.c: three levels of nested parallel regions with distinct team sizes.
 *
 *   level 1 "outer":     parallel num_threads(2), encountered by the initial
 *                        thread (LINE:outer)
 *   level 2 "middle":    parallel num_threads(3), encountered by each outer
 *                        thread (LINE:middle); team "middle_a" belongs to
 *                        outer thread 0, team "middle_b" to outer thread 1
 *   level 3 "innermost": parallel num_threads(4), encountered by thread 1 of
 *                        middle_a (LINE:inner)
 *
 * Nine OS threads. Final state, thread by thread:
 *
 *   innermost 0..3  spin in innermost_work() at LINE:innermost_spin (a
 *                   nanosleep loop). innermost 0 is middle_a thread 1; it
 *                   prints READY (and aborts in abort mode, LINE:abort).
 *   middle_a 0      the initial thread (also outer 0): waits in the implicit
 *                   barrier at the end of middle_a, inside the runtime's join
 *                   of the region forked at LINE:middle by outer_body().
 *   middle_a 2      waits in the same implicit barrier (a libomp worker, no
 *                   user frame on its stack).
 *   middle_b 0, 1   wait in the explicit barrier at LINE:middle_barrier in
 *                   middle_body(). middle_b 0 is outer thread 1.
 *   middle_b 2      never reaches that barrier: spins in middle_straggler()
 *                   at LINE:straggler_spin.
 *
 * READY keys (tid lists are ordered by thread number):
 *   threads=9 initial=TID
 *   outer=T0,T1 middle_a=T0,T1,T2 middle_b=T0,T1,T2 innermost=T0,T1,T2,T3
 *   outer_master, middle_a_master, middle_b_master, innermost_master: the
 *     encountering thread of each region (its thread 0)
 *   innermost_encounter_num=1 (thread number of the innermost region's
 *     encountering thread in middle_a)
 *   outer_size=2 middle_size=3 innermost_size=4 (omp_get_team_size)
 *   innermost_level=3 innermost_active_level=3 (omp_get_level,
 *     omp_get_active_level as seen in innermost_work)
 *   spinning=tids in innermost_work, straggler=TID,
 *   implicit_barrier=middle_a 0,2  explicit_barrier=middle_b 0,1
 */
#include <omp.h>

#include "fixture.h"

enum { OUTER = 2, MIDDLE = 3, INNER = 4, NTHREADS = 9 };

/* Team membership, written by each thread when it enters a team. */
static atomic_int outer_tid[OUTER], middle_a_tid[MIDDLE], middle_b_tid[MIDDLE];

/* Final positions. */
static struct fx_slot innermost[INNER];  /* innermost_work() */
static struct fx_slot a_waiter[MIDDLE];  /* [0], [2]: implicit barrier */
static struct fx_slot b_waiter[MIDDLE];  /* [0], [1]: explicit barrier */
static struct fx_slot straggler;         /* middle_b thread 2 */

/* check_position verifies that the calling thread sits at the given level
 * with the given ancestor thread numbers and team sizes (one per level). */
static void check_position(int level, const int *nums, const int *sizes) {
  if (omp_get_level() != level || omp_get_active_level() != level)
    fx_fail("thread %d: level %d active level %d, want %d", fx_gettid(),
            omp_get_level(), omp_get_active_level(), level);
  for (int l = 1; l <= level; l++) {
    if (omp_get_ancestor_thread_num(l) != nums[l - 1] ||
        omp_get_team_size(l) != sizes[l - 1])
      fx_fail("thread %d: at level %d thread %d of %d, want %d of %d",
              fx_gettid(), l, omp_get_ancestor_thread_num(l),
              omp_get_team_size(l), nums[l - 1], sizes[l - 1]);
  }
}

static void announce(void) {
  struct fx_slot *others[] = {&innermost[1], &innermost[2], &innermost[3],
                              &a_waiter[0],  &a_waiter[2],  &b_waiter[0],
                              &b_waiter[1],  &straggler};
  fx_settle(others, (int)(sizeof others / sizeof others[0]));

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", NTHREADS);
  fx_add(&l, "initial", "%d", atomic_load(&outer_tid[0]));
  fx_add(&l, "outer", "%d,%d", atomic_load(&outer_tid[0]),
         atomic_load(&outer_tid[1]));
  fx_add(&l, "middle_a", "%d,%d,%d", atomic_load(&middle_a_tid[0]),
         atomic_load(&middle_a_tid[1]), atomic_load(&middle_a_tid[2]));
  fx_add(&l, "middle_b", "%d,%d,%d", atomic_load(&middle_b_tid[0]),
         atomic_load(&middle_b_tid[1]), atomic_load(&middle_b_tid[2]));
  struct fx_slot *inner[] = {&innermost[0], &innermost[1], &innermost[2],
                             &innermost[3]};
  fx_add_tids(&l, "innermost", inner, INNER);
  fx_add(&l, "outer_master", "%d", atomic_load(&outer_tid[0]));
  fx_add(&l, "middle_a_master", "%d", atomic_load(&middle_a_tid[0]));
  fx_add(&l, "middle_b_master", "%d", atomic_load(&middle_b_tid[0]));
  fx_add(&l, "innermost_master", "%d", fx_tid(&innermost[0]));
  fx_add(&l, "innermost_encounter_num", "%d", omp_get_ancestor_thread_num(2));
  fx_add(&l, "outer_size", "%d", omp_get_team_size(1));
  fx_add(&l, "middle_size", "%d", omp_get_team_size(2));
  fx_add(&l, "innermost_size", "%d", omp_get_team_size(3));
  fx_add(&l, "innermost_level", "%d", omp_get_level());
  fx_add(&l, "innermost_active_level", "%d", omp_get_active_level());
  fx_add_tids(&l, "spinning", inner, INNER);
  fx_add(&l, "straggler", "%d", fx_tid(&straggler));
  struct fx_slot *implicit[] = {&a_waiter[0], &a_waiter[2]};
  fx_add_tids(&l, "implicit_barrier", implicit, 2);
  struct fx_slot *explicit_[] = {&b_waiter[0], &b_waiter[1]};
  fx_add_tids(&l, "explicit_barrier", explicit_, 2);
  fx_emit(&l);
}

static void innermost_work(int me) {
  const int nums[] = {0, 1, me}, sizes[] = {OUTER, MIDDLE, INNER};
  check_position(3, nums, sizes);
  fx_record(&innermost[me]);
  if (me == 0) {
    announce();
    FX_MAYBE_ABORT(); /* LINE:abort */
  }
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:innermost_spin */
}

static void innermost_region(void) {
#pragma omp parallel num_threads(INNER) /* LINE:inner */
  innermost_work(omp_get_thread_num());
}

static void middle_straggler(void) {
  fx_record(&straggler);
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:straggler_spin */
}

static void middle_body(int outer_num) {
  int me = omp_get_thread_num();
  const int nums[] = {outer_num, me}, sizes[] = {OUTER, MIDDLE};
  check_position(2, nums, sizes);
  if (outer_num == 0) {
    atomic_store(&middle_a_tid[me], fx_gettid());
    if (me == 1) {
      innermost_region();
      fx_fail("innermost region ended");
    }
    /* Threads 0 and 2 return to the implicit barrier of middle_a. */
    fx_record(&a_waiter[me]);
    return;
  }
  atomic_store(&middle_b_tid[me], fx_gettid());
  if (me == 2)
    middle_straggler();
  fx_record(&b_waiter[me]);
#pragma omp barrier /* LINE:middle_barrier */
  fx_fail("explicit barrier of middle_b completed");
}

static void outer_body(void) {
  int me = omp_get_thread_num();
  const int nums[] = {me}, sizes[] = {OUTER};
  check_position(1, nums, sizes);
  atomic_store(&outer_tid[me], fx_gettid());
#pragma omp parallel num_threads(MIDDLE) /* LINE:middle */
  middle_body(me);
  fx_fail("middle region ended");
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  omp_set_max_active_levels(3);
#pragma omp parallel num_threads(OUTER) /* LINE:outer */
  outer_body();
  fx_fail("outer region ended");
  return 1;
}
