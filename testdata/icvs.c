/*
 * icvs.c: internal control variables set through the API and the
 * environment, read back by the program itself.
 *
 * Before the region, the initial thread calls
 *   omp_set_num_threads(5)                   LINE:set_num_threads
 *   omp_set_dynamic(1)                       LINE:set_dynamic
 *   omp_set_schedule(omp_sched_guided, 5)    LINE:set_schedule
 *   omp_set_max_active_levels(2)             LINE:set_max_active_levels
 * Everything else comes from the environment the test gives it, for example
 *   OMP_NUM_THREADS=6,3 OMP_PROC_BIND=spread,close OMP_THREAD_LIMIT=12
 *   OMP_STACKSIZE=4M OMP_CANCELLATION=true OMP_MAX_TASK_PRIORITY=7
 *   OMP_DISPLAY_AFFINITY=false OMP_DEFAULT_DEVICE=0
 * Then it opens `#pragma omp parallel` without a num_threads clause
 * (LINE:parallel). With dyn-var true the runtime may give the team fewer
 * than 5 threads: team_size says how many it got.
 *
 * Final state, thread by thread:
 *   thread 0        (the initial thread) spins in icv_wait() at
 *                   LINE:icv_spin; it reads the ICVs back, prints READY (and
 *                   aborts in abort mode, LINE:abort).
 *   threads 1..n-1  wait in the explicit barrier at LINE:barrier in
 *                   team_body().
 *
 * READY keys, all read by thread 0 inside the region unless prefixed seq_
 * (read by the initial thread before the region):
 *   threads=N (= team_size) t0..t<N-1>=TID members=T0,...
 *   max_threads (omp_get_max_threads: nthreads-var of the region's implicit
 *     task, i.e. the next level's entry of OMP_NUM_THREADS)
 *   dynamic schedule_kind (numeric omp_sched_t, monotonic modifier masked
 *     off) schedule_kind_name schedule_chunk thread_limit max_active_levels
 *   cancellation max_task_priority proc_bind (numeric omp_proc_bind_t)
 *   proc_bind_name num_procs level active_level team_size thread_num
 *   default_device num_places stacksize (kmp_get_stacksize_s, bytes)
 *   blocktime (kmp_get_blocktime, ms) in_parallel
 *   seq_max_threads seq_proc_bind seq_proc_bind_name seq_level
 */
#include <omp.h>

#include "fixture.h"

enum { MAX_TEAM = 64 };

static struct fx_slot member[MAX_TEAM];
static int seq_max_threads, seq_level;
static omp_proc_bind_t seq_proc_bind;

static const char *sched_name(omp_sched_t kind) {
  switch ((int)kind & ~(int)omp_sched_monotonic) {
  case omp_sched_static:
    return "static";
  case omp_sched_dynamic:
    return "dynamic";
  case omp_sched_guided:
    return "guided";
  case omp_sched_auto:
    return "auto";
  default:
    return "other";
  }
}

static const char *bind_name(omp_proc_bind_t bind) {
  switch (bind) {
  case omp_proc_bind_false:
    return "false";
  case omp_proc_bind_true:
    return "true";
  case omp_proc_bind_master: /* "primary" since OpenMP 5.1 */
    return "primary";
  case omp_proc_bind_close:
    return "close";
  case omp_proc_bind_spread:
    return "spread";
  default:
    return "other";
  }
}

static void icv_wait(void) {
  int n = omp_get_num_threads();
  fx_record(&member[0]);
  struct fx_slot *all[MAX_TEAM];
  for (int i = 0; i < n; i++)
    all[i] = &member[i];
  fx_settle(all + 1, n - 1);

  omp_sched_t kind;
  int chunk;
  omp_get_schedule(&kind, &chunk);
  omp_proc_bind_t bind = omp_get_proc_bind();

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", n);
  for (int i = 0; i < n; i++) {
    char key[16];
    snprintf(key, sizeof key, "t%d", i);
    fx_add(&l, key, "%d", fx_tid(&member[i]));
  }
  fx_add_tids(&l, "members", all, n);
  fx_add(&l, "max_threads", "%d", omp_get_max_threads());
  fx_add(&l, "dynamic", "%d", omp_get_dynamic());
  fx_add(&l, "schedule_kind", "%d", (int)kind & ~(int)omp_sched_monotonic);
  fx_add(&l, "schedule_kind_name", "%s", sched_name(kind));
  fx_add(&l, "schedule_chunk", "%d", chunk);
  fx_add(&l, "thread_limit", "%d", omp_get_thread_limit());
  fx_add(&l, "max_active_levels", "%d", omp_get_max_active_levels());
  fx_add(&l, "cancellation", "%d", omp_get_cancellation());
  fx_add(&l, "max_task_priority", "%d", omp_get_max_task_priority());
  fx_add(&l, "proc_bind", "%d", (int)bind);
  fx_add(&l, "proc_bind_name", "%s", bind_name(bind));
  fx_add(&l, "num_procs", "%d", omp_get_num_procs());
  fx_add(&l, "level", "%d", omp_get_level());
  fx_add(&l, "active_level", "%d", omp_get_active_level());
  fx_add(&l, "team_size", "%d", omp_get_team_size(omp_get_level()));
  fx_add(&l, "thread_num", "%d", omp_get_thread_num());
  fx_add(&l, "default_device", "%d", omp_get_default_device());
  fx_add(&l, "num_places", "%d", omp_get_num_places());
  fx_add(&l, "stacksize", "%zu", kmp_get_stacksize_s());
  fx_add(&l, "blocktime", "%d", kmp_get_blocktime());
  fx_add(&l, "in_parallel", "%d", omp_in_parallel());
  fx_add(&l, "seq_max_threads", "%d", seq_max_threads);
  fx_add(&l, "seq_proc_bind", "%d", (int)seq_proc_bind);
  fx_add(&l, "seq_proc_bind_name", "%s", bind_name(seq_proc_bind));
  fx_add(&l, "seq_level", "%d", seq_level);
  fx_emit(&l);
  FX_MAYBE_ABORT(); /* LINE:abort */

  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:icv_spin */
}

static void team_body(void) {
  int me = omp_get_thread_num();
  if (omp_get_num_threads() > MAX_TEAM)
    fx_fail("team of %d threads, at most %d supported", omp_get_num_threads(),
            MAX_TEAM);
  if (me == 0)
    icv_wait();
  fx_record(&member[me]);
#pragma omp barrier /* LINE:barrier */
  fx_fail("barrier completed without thread 0");
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  omp_set_num_threads(5);                  /* LINE:set_num_threads */
  omp_set_dynamic(1);                      /* LINE:set_dynamic */
  omp_set_schedule(omp_sched_guided, 5);   /* LINE:set_schedule */
  omp_set_max_active_levels(2);            /* LINE:set_max_active_levels */
  seq_max_threads = omp_get_max_threads();
  seq_proc_bind = omp_get_proc_bind();
  seq_level = omp_get_level();
#pragma omp parallel /* LINE:parallel */
  team_body();
  fx_fail("parallel region ended");
  return 1;
}
