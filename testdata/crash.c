/*
 * crash.c: a crash inside an explicit task of a nested parallel region.
 *
 *   outer team of 2 (LINE:outer), created by main.
 *     outer thread 0 (the initial thread) creates the inner team of 2
 *       (LINE:inner) in start_inner().
 *       inner thread 0 (the initial thread) waits until the task has
 *         started, then in the explicit barrier at LINE:inner_barrier.
 *       inner thread 1 ("the crasher") creates one task (LINE:task) in
 *         produce() and waits for it in the taskwait at LINE:taskwait,
 *         where it runs the task itself: the task calls explode(), which
 *         prints READY and, in abort mode, aborts at LINE:abort; otherwise
 *         it spins there at LINE:spin.
 *     outer thread 1 waits in the explicit barrier at LINE:outer_barrier.
 *
 * READY keys:
 *   threads=3 initial=TID crasher=TID outer_worker=TID
 *   (the crasher is thread 1 of the inner team, whose thread 0 is initial)
 */
#include <omp.h>

#include "fixture.h"

static struct fx_slot initial, crasher, outer_worker;
static atomic_int task_started;

static void explode(void) {
  atomic_store(&task_started, 1);
  fx_record(&crasher);
  struct fx_slot *others[] = {&initial, &outer_worker};
  fx_settle(others, 2);

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", 3);
  fx_add(&l, "initial", "%d", fx_tid(&initial));
  fx_add(&l, "crasher", "%d", fx_tid(&crasher));
  fx_add(&l, "outer_worker", "%d", fx_tid(&outer_worker));
  fx_emit(&l);
  FX_MAYBE_ABORT(); /* LINE:abort */
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:spin */
}

static void produce(void) {
#pragma omp task /* LINE:task */
  explode(); /* LINE:call_explode */
#pragma omp taskwait /* LINE:taskwait */
  fx_fail("the taskwait completed");
}

static void start_inner(void) {
#pragma omp parallel num_threads(2) /* LINE:inner */
  {
    if (omp_get_thread_num() == 1) {
      produce(); /* LINE:call_produce */
    } else {
      /* Enter the barrier only once the crasher runs the task, so that
       * this thread cannot take the task there. */
      while (!atomic_load(&task_started))
        nanosleep(&fx_nap, NULL);
      fx_record(&initial);
#pragma omp barrier /* LINE:inner_barrier */
      fx_fail("the inner barrier completed");
    }
  }
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  omp_set_max_active_levels(2);
#pragma omp parallel num_threads(2) /* LINE:outer */
  {
    if (omp_get_thread_num() == 0) {
      start_inner(); /* LINE:call_inner */
    } else {
      fx_record(&outer_worker);
#pragma omp barrier /* LINE:outer_barrier */
      fx_fail("the outer barrier completed");
    }
  }
  fx_fail("the program ended");
  return 1;
}
