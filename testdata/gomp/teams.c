/*
 * teams.c (gcc-12, libgomp): nested teams, idle pool workers, ICVs set by
 * the environment and by the API at two levels, explicit tasks running and
 * queued. Run with OMP_WAIT_POLICY=passive (threads sleep at once) and the
 * ICV environment the test sets.
 *
 * Region A (level 1, 4 threads) ends first: its threads 1 to 3 stay idle
 * in the main thread's pool (key idle=TID,TID,TID). The main thread then
 * records itself (level 0) and announces READY from serial code.
 * Region B (level 1, 2 threads) runs on a pthread of its own (a root with
 * its own pool; a level-1 region of the main thread would end the idle
 * workers, as libgomp lets surplus pool threads exit): thread 0 sets nthreads-var 3 and
 * run-sched-var guided,5, thread 1 sets nthreads-var 2, max-active-levels-var 2 and
 * default-device-var 1; each
 * forks a level-2 team:
 *   team B0 (3 threads): thread 0 sets run-sched-var static,7 and parks
 *     in user code; thread 1 parks in user code; thread 2
 *     waits in an explicit barrier (asleep on the team barrier).
 *   team B1 (2 threads): thread 0 creates task X, which thread 1 runs from
 *     the team barrier and parks in (recorded from inside X); then thread 0
 *     creates tasks Y and a final Z that stay queued, and parks in user
 *     code.
 * READY: idle=TID,TID,TID queued=2 and one t<TID> record per recorded thread
 * (record.h); the idle workers' records are those of region A.
 */
#include "record.h"

static atomic_int x_started;
static int idle_tids[3];

static void park_task(void) {
  atomic_store(&x_started, 1);
  rec_me();
  rec_park();
}

static void noop_task(int i) { (void)i; }

static struct fx_line line;

/* region_b runs on a pthread of its own: a root thread with its own thread
 * pool, so that the main thread's pool keeps its idle workers. */
static void *region_b(void *arg) {
  (void)arg;
#pragma omp parallel num_threads(2)
  {
    int b = omp_get_thread_num();
    if (omp_get_num_threads() != 2)
      fx_fail("region B has %d threads", omp_get_num_threads());
    if (b == 0) {
      omp_set_num_threads(3);
      omp_set_schedule(omp_sched_guided, 5);
    } else {
      omp_set_num_threads(2);
      omp_set_max_active_levels(2);
      omp_set_default_device(1);
    }
#pragma omp parallel
    {
      int i = omp_get_thread_num();
      if (omp_get_num_threads() != 3 - b)
        fx_fail("team B%d has %d threads", b, omp_get_num_threads());
      if (b == 0) {
        if (i == 0) {
          omp_set_schedule(omp_sched_static, 7);
          rec_me();
          rec_park();
        } else if (i == 1) {
          rec_me();
          rec_park();
        } else {
          rec_me();
#pragma omp barrier
        }
      } else {
        if (i == 0) {
#pragma omp task
          park_task();
          while (!atomic_load(&x_started))
            nanosleep(&fx_nap, NULL);
#pragma omp task
          noop_task(1);
#pragma omp task final(1)
          noop_task(2);
          rec_me();
          rec_park();
        } else {
#pragma omp barrier
        }
      }
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  fx_begin(&line);

#pragma omp parallel num_threads(4)
  {
    int me = omp_get_thread_num();
    if (omp_get_num_threads() != 4)
      fx_fail("region A has %d threads", omp_get_num_threads());
    if (me >= 1)
      idle_tids[me - 1] = fx_gettid();
  }
  pthread_t p;
  if (pthread_create(&p, NULL, region_b, NULL) != 0)
    fx_fail("pthread_create");
  struct fx_slot *self = rec_me();
  fx_add(&line, "idle", "%d,%d,%d", idle_tids[0], idle_tids[1], idle_tids[2]);
  fx_add(&line, "queued", "%d", 2);
  /* This thread, B0.0, B0.1, B0.2, X and B1.0. */
  rec_announce(&line, 6, self);
  rec_park();
}
