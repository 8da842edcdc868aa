/*
 * demo.c: the program of the README demo. Three workers share a job:
 *
 *   worker 0 (the initial thread) starts a nested team of two solvers
 *            (LINE:solvers); both spin in solve() at LINE:solve_spin.
 *   worker 1 creates three compression tasks (LINE:compress_task), waits
 *            until worker 2 has taken chunk 0, and then waits for its tasks
 *            in a taskwait (LINE:taskwait). There it runs the last one it
 *            created, chunk 2, in compress() at LINE:compress_spin.
 *            Chunk 1 stays queued.
 *   worker 2 waits for the others in a barrier (LINE:barrier) they never
 *            reach; waiting there it runs chunk 0, also in compress() at
 *            LINE:compress_spin.
 *
 * The outer team is created at LINE:workers. Worker 0 prints READY (and
 * aborts in abort mode, LINE:abort) once everyone is in place.
 *
 * READY keys:
 *   threads=4 workers=W0,W1,W2 solvers=S0,S1 (S0 is W0)
 *   chunk0=TID chunk2=TID (threads running those tasks: W2 and W1)
 *   tasks=3 running=2 queued=1
 */
#include <omp.h>

#include "fixture.h"

enum { WORKERS = 3, SOLVERS = 2, CHUNKS = 3 };

static struct fx_slot worker[WORKERS], solver[SOLVERS], chunk_runner[CHUNKS];
static atomic_int chunk_started[CHUNKS];

static void compress(int chunk) {
  atomic_store(&chunk_started[chunk], 1);
  if (chunk == 1)
    fx_fail("chunk 1 should stay queued");
  fx_record(&chunk_runner[chunk]);
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:compress_spin */
}

static void announce(void) {
  struct fx_slot *others[] = {&solver[1], &chunk_runner[0], &chunk_runner[2]};
  fx_settle(others, 3);

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", WORKERS + SOLVERS - 1);
  struct fx_slot *w[] = {&worker[0], &worker[1], &worker[2]};
  fx_add_tids(&l, "workers", w, WORKERS);
  struct fx_slot *s[] = {&solver[0], &solver[1]};
  fx_add_tids(&l, "solvers", s, SOLVERS);
  fx_add(&l, "chunk0", "%d", fx_tid(&chunk_runner[0]));
  fx_add(&l, "chunk2", "%d", fx_tid(&chunk_runner[2]));
  fx_add(&l, "tasks", "%d", CHUNKS);
  fx_add(&l, "running", "%d", 2);
  fx_add(&l, "queued", "%d", 1);
  fx_emit(&l);
}

static void solve(int part) {
  fx_record(&solver[part]);
  if (part == 0) {
    announce();
    FX_MAYBE_ABORT(); /* LINE:abort */
  }
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:solve_spin */
}

static void produce(void) {
  for (int chunk = 0; chunk < CHUNKS; chunk++) {
#pragma omp task firstprivate(chunk) /* LINE:compress_task */
    compress(chunk);
    /* Let worker 2 take chunk 0, so that every run looks the same. */
    while (chunk == 0 && !atomic_load(&chunk_started[0]))
      nanosleep(&fx_nap, NULL);
  }
#pragma omp taskwait /* LINE:taskwait */
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  omp_set_max_active_levels(2);
#pragma omp parallel num_threads(WORKERS) /* LINE:workers */
  {
    int me = omp_get_thread_num();
    atomic_store(&worker[me].tid, fx_gettid());
    if (me == 0) {
#pragma omp parallel num_threads(SOLVERS) /* LINE:solvers */
      solve(omp_get_thread_num());
    } else if (me == 1) {
      produce();
    } else {
#pragma omp barrier /* LINE:barrier */
    }
  }
  fx_fail("the demo ended");
  return 1;
}
