/*
 * prio.c (gcc-12, libgomp): explicit tasks with priority clauses that stay
 * queued, so that the team's task queue and the creating task's children
 * queue are priority splay trees. Run with OMP_MAX_TASK_PRIORITY=9 (and
 * OMP_WAIT_POLICY=passive).
 *
 * libgomp (task.c, priority_queue.h) keeps a queue as one list while only
 * priority-0 tasks were queued in it; the first task of priority > 0 moves
 * that list into a splay tree of lists, one per priority, and every later
 * insertion goes to the tree. GOMP_task clamps priorities to
 * max-task-priority-var (0 by default, hence OMP_MAX_TASK_PRIORITY).
 *
 * One level-1 team of 2 threads. Thread 1 records itself and parks in user
 * code: it never reaches a scheduling point, so it runs no task. Thread 0
 * creates four deferred tasks, of priorities 0, 3, 3 and 7 in that order
 * (the priority-0 one first, so that the tree takes over a list), each
 * from a function of its own (spawn_pN, whose outlined task function is
 * spawn_pN._omp_fn.0: the test tells a task's priority from its function's
 * name), then announces READY and parks in user code: no task ever runs.
 *
 * READY: creator=TID (thread 0) worker=TID (thread 1) queued=4
 * prios=0,3,3,7 (the priorities in creation order).
 */
#include "../fixture.h"
#include <omp.h>

static atomic_int ran;

static void body(int p) { atomic_fetch_add(&ran, p + 1); }

__attribute__((noinline)) void spawn_p0(void) {
#pragma omp task priority(0)
  body(0);
}

__attribute__((noinline)) void spawn_p3(void) {
#pragma omp task priority(3)
  body(3);
}

__attribute__((noinline)) void spawn_p7(void) {
#pragma omp task priority(7)
  body(7);
}

static struct fx_slot worker;
static struct fx_line line;

static void park(void) {
  for (;;)
    nanosleep(&fx_nap, NULL);
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  if (omp_get_max_task_priority() != 9)
    fx_fail("max-task-priority-var is %d, want 9 (OMP_MAX_TASK_PRIORITY=9)",
            omp_get_max_task_priority());
#pragma omp parallel num_threads(2)
  {
    if (omp_get_num_threads() != 2)
      fx_fail("the team has %d threads", omp_get_num_threads());
    if (omp_get_thread_num() == 1) {
      fx_record(&worker);
      park();
    }
    struct fx_slot *slots[1] = {&worker};
    fx_settle(slots, 1);
    spawn_p0();
    spawn_p3();
    spawn_p3();
    spawn_p7();
    if (atomic_load(&ran) != 0)
      fx_fail("a task ran");
    fx_begin(&line);
    fx_add(&line, "creator", "%d", fx_gettid());
    fx_add(&line, "worker", "%d", fx_tid(&worker));
    fx_add(&line, "queued", "%d", 4);
    fx_add(&line, "prios", "%s", "0,3,3,7");
    fx_emit(&line);
    FX_MAYBE_ABORT();
    park();
  }
  return 0;
}
