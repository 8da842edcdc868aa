/*
 * barrier.c: a barrier that one thread never reaches.
 *
 * A parallel region of 4 threads (LINE:parallel). Final state, thread by
 * thread:
 *   threads 0, 1, 2  wait in the explicit barrier at LINE:barrier in
 *                    team_body(); thread 0 is the initial thread.
 *   thread 3         never arrives: spins in stuck_worker() at
 *                    LINE:stuck_spin; prints READY (and aborts in abort
 *                    mode, LINE:abort).
 *
 * READY keys:
 *   threads=4 t0=TID t1=TID t2=TID t3=TID (by thread number)
 *   waiting=T0,T1,T2 (the threads in the barrier) stuck=TID stuck_num=3
 *   line_barrier=N (the barrier's source line)
 */
#include <omp.h>

#include "fixture.h"

enum { NTHREADS = 4, STUCK = 3 };

static struct fx_slot member[NTHREADS];
static atomic_int line_barrier;

static void stuck_worker(void) {
  fx_record(&member[STUCK]);
  struct fx_slot *waiting[] = {&member[0], &member[1], &member[2]};
  fx_settle(waiting, 3);

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", omp_get_num_threads());
  fx_add(&l, "t0", "%d", fx_tid(&member[0]));
  fx_add(&l, "t1", "%d", fx_tid(&member[1]));
  fx_add(&l, "t2", "%d", fx_tid(&member[2]));
  fx_add(&l, "t3", "%d", fx_tid(&member[3]));
  fx_add_tids(&l, "waiting", waiting, 3);
  fx_add(&l, "stuck", "%d", fx_tid(&member[STUCK]));
  fx_add(&l, "stuck_num", "%d", omp_get_thread_num());
  fx_add(&l, "line_barrier", "%d", atomic_load(&line_barrier));
  fx_emit(&l);
  FX_MAYBE_ABORT(); /* LINE:abort */

  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:stuck_spin */
}

static void team_body(void) {
  int me = omp_get_thread_num();
  if (omp_get_num_threads() != NTHREADS)
    fx_fail("team of %d threads, want %d", omp_get_num_threads(), NTHREADS);
  if (me == STUCK)
    stuck_worker();
  atomic_store(&line_barrier, __LINE__ + 2);
  fx_record(&member[me]);
#pragma omp barrier /* LINE:barrier */
  fx_fail("barrier completed without thread %d", STUCK);
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
#pragma omp parallel num_threads(NTHREADS) /* LINE:parallel */
  team_body();
  fx_fail("parallel region ended");
  return 1;
}
