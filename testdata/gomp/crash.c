/*
 * crash.c (gcc-12, libgomp): a NULL dereference inside an explicit task
 * that runs in a level-2 region. Run with OMP_WAIT_POLICY=passive and
 * OMP_MAX_ACTIVE_LEVELS=2.
 *
 *   outer team of 2 (LINE:outer), created by main in run_outer()
 *   (LINE:call_outer).
 *     outer thread 0 (the initial thread) creates the inner team of 2
 *       (LINE:inner) in start_inner() (LINE:call_inner).
 *       inner thread 0 (the initial thread) waits until the task has
 *         started, records itself and waits in the explicit barrier at
 *         LINE:inner_barrier.
 *       inner thread 1 ("the crasher") creates one task (LINE:task) in
 *         produce() (LINE:call_produce) and waits for it in the taskwait
 *         at LINE:taskwait, where it runs the task itself: the task calls
 *         explode() (LINE:call_explode), which records the thread, waits
 *         for the other records and prints READY (LINE:announce). In
 *         abort mode it then stores through a NULL pointer at LINE:fault;
 *         the SIGSEGV handler aborts (the test harness's kernel cores are
 *         of SIGABRT), so the core shows the handler's frames, the signal
 *         frame and the faulting frame. Otherwise it parks (record.h).
 *     outer thread 1 records itself and waits in the explicit barrier at
 *       LINE:outer_barrier.
 *
 * READY: crasher=TID initial=TID and one t<TID> record per thread
 * (record.h).
 */
#include "record.h"

static atomic_int task_started;
static int *volatile nowhere;
static struct fx_line line;
static int initial_tid;

static void on_segv(int sig) {
  (void)sig;
  abort(); /* LINE:handler_abort */
}

static __attribute__((noinline)) void explode(void) {
  atomic_store(&task_started, 1);
  struct fx_slot *self = rec_me();
  while (atomic_load(&nrecs) < 3)
    nanosleep(&fx_nap, NULL);
  struct fx_slot *slots[3];
  for (int i = 0; i < 3; i++) {
    slots[i] = &recs[i].slot == self ? NULL : &recs[i].slot;
    while (slots[i] && fx_tid(slots[i]) == 0)
      nanosleep(&fx_nap, NULL);
  }
  fx_settle(slots, 3);
  fx_begin(&line);
  fx_add(&line, "initial", "%d", initial_tid);
  fx_add(&line, "crasher", "%d", fx_tid(self));
  for (int i = 0; i < 3; i++) {
    char key[32];
    snprintf(key, sizeof key, "t%d", fx_tid(&recs[i].slot));
    fx_add(&line, key, "%s", recs[i].text);
  }
  fx_emit(&line); /* LINE:announce */
  if (fx_abort_mode)
    *nowhere = 1; /* LINE:fault */
  rec_park(); /* LINE:park */
}

static __attribute__((noinline)) void produce(void) {
#pragma omp task /* LINE:task */
  explode(); /* LINE:call_explode */
#pragma omp taskwait /* LINE:taskwait */
  fx_fail("the taskwait completed");
}

static __attribute__((noinline)) void start_inner(void) { /* LINE:fork_inner */
#pragma omp parallel num_threads(2) /* LINE:inner */
  {
    if (omp_get_thread_num() == 1) {
      produce(); /* LINE:call_produce */
    } else {
      /* Enter the barrier only once the crasher runs the task, so that
       * this thread cannot take the task there. */
      while (!atomic_load(&task_started))
        nanosleep(&fx_nap, NULL);
      rec_me();
#pragma omp barrier /* LINE:inner_barrier */
      fx_fail("the inner barrier completed");
    }
  }
}

/* The region's code has no line of its own in GCC's line table: the call
 * that forks the team is at the line before the construct, here the
 * function's first line (as gdb shows it too). */
static __attribute__((noinline)) void run_outer(void) { /* LINE:fork_outer */
#pragma omp parallel num_threads(2) /* LINE:outer */
  {
    if (omp_get_thread_num() == 0) {
      start_inner(); /* LINE:call_inner */
    } else {
      rec_me();
#pragma omp barrier /* LINE:outer_barrier */
      fx_fail("the outer barrier completed");
    }
  }
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  initial_tid = fx_gettid();
  if (fx_abort_mode) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    if (sigaction(SIGSEGV, &sa, NULL) != 0)
      fx_fail("sigaction: %s", strerror(errno));
  }
  run_outer(); /* LINE:call_outer */
  fx_fail("the program ended");
  return 1;
}
