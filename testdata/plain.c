/*
 * plain.c: a pthread program without OpenMP (no libomp is loaded), for the
 * "not an OpenMP program" errors.
 *
 * Final state, thread by thread:
 *   main       prints READY (and aborts in abort mode, LINE:abort), then
 *              blocks in pthread_join() at LINE:join in main().
 *   worker 1, 2  sleep forever in plain_worker() at LINE:worker_spin.
 *
 * READY keys: threads=3 main=TID workers=T1,T2
 */
#include "fixture.h"

enum { WORKERS = 2 };

static struct fx_slot worker_slot[WORKERS];

static void *plain_worker(void *arg) {
  fx_record(arg);
  for (;;)
    nanosleep(&fx_nap, NULL); /* LINE:worker_spin */
  return NULL;
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  pthread_t th[WORKERS];
  for (int i = 0; i < WORKERS; i++) {
    int err = pthread_create(&th[i], NULL, plain_worker, &worker_slot[i]);
    if (err != 0)
      fx_fail("pthread_create: %s", strerror(err));
  }
  struct fx_slot *w[] = {&worker_slot[0], &worker_slot[1]};
  fx_settle(w, WORKERS);

  struct fx_line l;
  fx_begin(&l);
  fx_add(&l, "threads", "%d", WORKERS + 1);
  fx_add(&l, "main", "%d", fx_gettid());
  fx_add_tids(&l, "workers", w, WORKERS);
  fx_emit(&l);
  FX_MAYBE_ABORT(); /* LINE:abort */

  pthread_join(th[0], NULL); /* LINE:join */
  fx_fail("worker returned");
  return 1;
}
