/*
 * tasks.c: explicit tasks in every interesting condition.
 *
 * A parallel region of 3 threads (LINE:parallel). Thread 0, in a masked
 * construct (LINE:single; masked rather than single, so that which thread
 * produces is never the scheduler's choice), "the producer", creates these
 * tasks, all children of its implicit task unless said otherwise, in this
 * order:
 *
 *   dep_out        task untied depend(out: x)           LINE:task_dep_out
 *                  runs on one of the two other threads ("the dep_out
 *                  thread"); it creates queued_child and then spins in
 *                  dep_out_wait() at LINE:dep_out_spin.
 *   dep_in         task depend(in: x)                   LINE:task_dep_in
 *                  never becomes ready: dep_out never finishes.
 *   final          task final(1)                        LINE:task_final
 *                  runs on the remaining thread ("the final thread"); it
 *                  creates child and is suspended under it.
 *   child          task, created by final               LINE:task_child
 *                  included (undeferred) because its parent is final: runs
 *                  at once on the final thread, in final_child_wait() at
 *                  LINE:child_spin.
 *   queued_child   task, created by dep_out             LINE:task_queued_child
 *                  queued in the dep_out thread's deque, never started.
 *   queued 0..2    task (a loop)                        LINE:task_queued
 *   queued_untied  task untied                          LINE:task_queued_untied
 *                  queued in the producer's deque, never started.
 *
 * Nine tasks in all. A queued task that starts anyway fails the program.
 *
 * The two other threads skip the masked construct, wait in
 * wait_for_tasks() until the producer has created dep_out, and then wait
 * in the explicit barrier at LINE:barrier, which the producer never
 * reaches; there each of them takes one task that never ends. (They enter
 * the barrier only once a task exists because libomp then keeps them
 * spinning for more tasks, whatever KMP_BLOCKTIME says; a thread already
 * asleep in a barrier may not be woken when a task is created. For the
 * same reason the program needs the default, active, wait policy: with
 * OMP_WAIT_POLICY=passive the barrier waiters sleep and may never take the
 * tasks.)
 * The producer creates each task the two must run only after the previous
 * one has started, and the queued tasks only when both are busy: then no
 * thread is at a task scheduling point any more, so they stay queued.
 *
 * Final state, thread by thread:
 *   producer        in its implicit task, inside the masked construct,
 *                   spinning in producer_wait() at LINE:producer_spin; prints
 *                   READY (and aborts in abort mode, LINE:abort).
 *   dep_out thread  executing dep_out, in dep_out_wait() at
 *                   LINE:dep_out_spin, on top of its implicit task, which
 *                   waits in the explicit barrier at LINE:barrier.
 *   final thread    executing child, nested in final, in final_child_wait()
 *                   at LINE:child_spin, on top of its implicit task, which
 *                   waits in the same barrier.
 *
 * READY keys:
 *   threads=3 producer=TID producer_num=N dep_out=TID dep_out_num=N
 *   final=TID final_num=N (final also runs child)
 *   created=9 running=3 (dep_out, final, child: final is suspended under
 *   its included child) queued=6 queued_ready=5 queued_dep=1 (dep_in)
 *   line_parallel line_single line_dep_out line_dep_in line_final line_child
 *   line_queued_child line_queued line_queued_untied line_barrier: source
 *   lines of the constructs (the LINE markers)
 */
#include <omp.h>

#include "fixture.h"

enum { NTHREADS = 3, NQUEUED = 3 };

/* The storage the dependences name. */
static int x;

static struct fx_slot producer, dep_out_runner, child_runner;
static atomic_int final_tid, final_num, dep_out_num;
static atomic_int dep_out_created, dep_out_started, all_busy,
    queued_child_created;

/* Source lines of the constructs, set right before each one. */
static atomic_int line_parallel, line_single, line_dep_out, line_dep_in,
    line_final, line_child, line_queued_child, line_queued, line_queued_untied,
    line_barrier;

static void wait_flag(atomic_int *flag) {
  while (!atomic_load(flag))
    nanosleep(&fx_nap, NULL);
}

static void queued_body(const char *which) {
  fx_fail("task %s started but should stay queued", which);
}

static void dep_out_wait(void) {
  fx_record(&dep_out_runner);
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:dep_out_spin */
}

static void dep_out_body(void) {
  atomic_store(&dep_out_num, omp_get_thread_num());
  atomic_store(&dep_out_started, 1);
  /* Create the child only when no thread is free to steal it. */
  wait_flag(&all_busy);
  atomic_store(&line_queued_child, __LINE__ + 1);
#pragma omp task /* LINE:task_queued_child */
  queued_body("queued_child");
  atomic_store(&queued_child_created, 1);
  dep_out_wait();
}

static void final_child_wait(void) {
  if (!omp_in_final())
    fx_fail("child of a final task is not final");
  fx_record(&child_runner);
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:child_spin */
}

static void final_body(void) {
  atomic_store(&final_tid, fx_gettid());
  atomic_store(&final_num, omp_get_thread_num());
  if (!omp_in_final())
    fx_fail("final(1) task is not final");
  atomic_store(&line_child, __LINE__ + 1);
#pragma omp task /* LINE:task_child */
  final_child_wait();
  fx_fail("included child task returned");
}

static void announce(void) {
  struct fx_slot *others[] = {&dep_out_runner, &child_runner};
  fx_settle(others, 2);

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", omp_get_num_threads());
  fx_add(&l, "producer", "%d", fx_tid(&producer));
  fx_add(&l, "producer_num", "%d", omp_get_thread_num());
  fx_add(&l, "dep_out", "%d", fx_tid(&dep_out_runner));
  fx_add(&l, "dep_out_num", "%d", atomic_load(&dep_out_num));
  fx_add(&l, "final", "%d", atomic_load(&final_tid));
  fx_add(&l, "final_num", "%d", atomic_load(&final_num));
  fx_add(&l, "created", "%d", 6 + NQUEUED);
  fx_add(&l, "running", "%d", 3);
  fx_add(&l, "queued", "%d", 3 + NQUEUED);
  fx_add(&l, "queued_ready", "%d", 2 + NQUEUED);
  fx_add(&l, "queued_dep", "%d", 1);
  fx_add(&l, "line_parallel", "%d", atomic_load(&line_parallel));
  fx_add(&l, "line_single", "%d", atomic_load(&line_single));
  fx_add(&l, "line_dep_out", "%d", atomic_load(&line_dep_out));
  fx_add(&l, "line_dep_in", "%d", atomic_load(&line_dep_in));
  fx_add(&l, "line_final", "%d", atomic_load(&line_final));
  fx_add(&l, "line_child", "%d", atomic_load(&line_child));
  fx_add(&l, "line_queued_child", "%d", atomic_load(&line_queued_child));
  fx_add(&l, "line_queued", "%d", atomic_load(&line_queued));
  fx_add(&l, "line_queued_untied", "%d", atomic_load(&line_queued_untied));
  fx_add(&l, "line_barrier", "%d", atomic_load(&line_barrier));
  fx_emit(&l);
}

static void producer_wait(void) {
  fx_record(&producer);
  announce();
  FX_MAYBE_ABORT(); /* LINE:abort */
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:producer_spin */
}

static void produce(void) {
  atomic_store(&line_dep_out, __LINE__ + 1);
#pragma omp task untied depend(out : x) /* LINE:task_dep_out */
  dep_out_body();
  atomic_store(&dep_out_created, 1);
  wait_flag(&dep_out_started);

  atomic_store(&line_dep_in, __LINE__ + 1);
#pragma omp task depend(in : x) /* LINE:task_dep_in */
  queued_body("dep_in");

  atomic_store(&line_final, __LINE__ + 1);
#pragma omp task final(1) /* LINE:task_final */
  final_body();
  wait_flag(&child_runner.tid);

  /* Both other threads are now inside tasks that never end. */
  atomic_store(&all_busy, 1);
  wait_flag(&queued_child_created);

  atomic_store(&line_queued, __LINE__ + 2);
  for (int i = 0; i < NQUEUED; i++) {
#pragma omp task /* LINE:task_queued */
    queued_body("queued");
  }
  atomic_store(&line_queued_untied, __LINE__ + 1);
#pragma omp task untied /* LINE:task_queued_untied */
  queued_body("queued_untied");

  producer_wait();
}

/* wait_for_tasks returns once the producer has created the first task. */
static void wait_for_tasks(void) { wait_flag(&dep_out_created); }

int main(int argc, char **argv) {
  fx_init(argc, argv);
  atomic_store(&line_parallel, __LINE__ + 1);
#pragma omp parallel num_threads(NTHREADS) /* LINE:parallel */
  {
    if (omp_get_num_threads() != NTHREADS)
      fx_fail("team of %d threads, want %d", omp_get_num_threads(), NTHREADS);
    atomic_store(&line_single, __LINE__ + 1);
#pragma omp masked /* LINE:single */
    produce();
    wait_for_tasks();
    atomic_store(&line_barrier, __LINE__ + 1);
#pragma omp barrier /* LINE:barrier */
  }
  fx_fail("parallel region ended");
  return 1;
}
