/*
 * demo.c: the program of the README demo. Two workers share a job:
 *
 *   worker 0 (the initial thread) starts a nested team of two solvers
 *            (LINE:solvers). Solver 0 (worker 0 itself) keeps solving in
 *            solve() at LINE:solve_spin; solver 1 is done and waits for it
 *            in the barrier at LINE:barrier.
 *   worker 1 creates three compression tasks (LINE:compress_task) and
 *            waits for them in a taskwait (LINE:taskwait). There it runs the
 *            last one it created, chunk 2, in compress() at
 *            LINE:compress_spin; chunks 0 and 1 stay queued (no other thread
 *            of the workers' team is free to take them).
 *
 * The workers' team is created at LINE:workers. Solver 0 prints READY (and
 * aborts in abort mode, LINE:abort) once everyone is in place.
 *
 * READY keys:
 *   threads=3 workers=W0,W1 solvers=S0,S1 (S0 is W0) barrier=S1
 *   chunk2=W1 (the thread running chunk 2) tasks=3 running=1 queued=2
 */
#include <omp.h>

#include "fixture.h"

enum { WORKERS = 2, SOLVERS = 2, CHUNKS = 3 };

static struct fx_slot solver[SOLVERS], compressor;
static atomic_int worker_tid[WORKERS];

static void compress(int chunk) {
  if (chunk != CHUNKS - 1)
    fx_fail("chunk %d should stay queued", chunk);
  fx_record(&compressor);
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:compress_spin */
}

static void announce(void) {
  struct fx_slot *others[] = {&solver[1], &compressor};
  fx_settle(others, 2);

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", WORKERS + SOLVERS - 1);
  fx_add(&l, "workers", "%d,%d", atomic_load(&worker_tid[0]),
         atomic_load(&worker_tid[1]));
  struct fx_slot *s[] = {&solver[0], &solver[1]};
  fx_add_tids(&l, "solvers", s, SOLVERS);
  fx_add(&l, "barrier", "%d", fx_tid(&solver[1]));
  fx_add(&l, "chunk2", "%d", fx_tid(&compressor));
  fx_add(&l, "tasks", "%d", CHUNKS);
  fx_add(&l, "running", "%d", 1);
  fx_add(&l, "queued", "%d", CHUNKS - 1);
  fx_emit(&l);
}

static void solve(int part) {
  fx_record(&solver[part]);
  if (part == 1) {
    /* This part is done: wait for the other one. */
#pragma omp barrier /* LINE:barrier */
    fx_fail("the solvers' barrier completed");
  }
  announce();
  FX_MAYBE_ABORT(); /* LINE:abort */
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:solve_spin */
}

static void produce(void) {
  for (int chunk = 0; chunk < CHUNKS; chunk++) {
#pragma omp task firstprivate(chunk) /* LINE:compress_task */
    compress(chunk);
  }
#pragma omp taskwait /* LINE:taskwait */
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  omp_set_max_active_levels(2);
#pragma omp parallel num_threads(WORKERS) /* LINE:workers */
  {
    int me = omp_get_thread_num();
    atomic_store(&worker_tid[me], fx_gettid());
    if (me == 0) {
#pragma omp parallel num_threads(SOLVERS) /* LINE:solvers */
      solve(omp_get_thread_num());
    } else {
      produce();
    }
  }
  fx_fail("the demo ended");
  return 1;
}
