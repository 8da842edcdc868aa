/*
 * record.h: what the OpenMP API says about the calling thread, recorded
 * from inside it, for the ompd/gomp tests (which compare what they read
 * from libgomp's memory with this record exactly).
 *
 * A record is one READY value: the key is "t<TID>", the value
 *   num,level,active,sizes,ancestors,nthreads,sched,chunk,dyn,tlimit,
 *   maxactive,bind,device,cancel,maxprio,final
 * where sizes and ancestors are "/"-separated for levels 1..level
 * (omp_get_team_size, omp_get_ancestor_thread_num) and sched is the
 * omp_sched_t value with the monotonic bit.
 */
#ifndef GOMP_RECORD_H
#define GOMP_RECORD_H
#include "../fixture.h"
#include <omp.h>

#define REC_MAX 32

struct rec {
  struct fx_slot slot;
  char text[256];
};

static struct rec recs[REC_MAX];
static atomic_int nrecs;

/* rec_me records the calling thread and returns its slot; call it as the
 * last thing before the thread's final wait. */
static inline struct fx_slot *rec_me(void) {
  int i = atomic_fetch_add(&nrecs, 1);
  if (i >= REC_MAX)
    fx_fail("too many records");
  struct rec *r = &recs[i];
  char sizes[64] = "", anc[64] = "";
  int level = omp_get_level();
  for (int l = 1; l <= level; l++) {
    size_t n = strlen(sizes), m = strlen(anc);
    snprintf(sizes + n, sizeof sizes - n, "%s%d", l > 1 ? "/" : "",
             omp_get_team_size(l));
    snprintf(anc + m, sizeof anc - m, "%s%d", l > 1 ? "/" : "",
             omp_get_ancestor_thread_num(l));
  }
  omp_sched_t kind;
  int chunk;
  omp_get_schedule(&kind, &chunk);
  snprintf(r->text, sizeof r->text,
           "%d,%d,%d,%s,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d",
           omp_get_thread_num(), level, omp_get_active_level(),
           sizes[0] ? sizes : "-", anc[0] ? anc : "-", omp_get_max_threads(),
           (int)kind, chunk, omp_get_dynamic(), omp_get_thread_limit(),
           omp_get_max_active_levels(), (int)omp_get_proc_bind(),
           omp_get_default_device(), omp_get_cancellation(),
           omp_get_max_task_priority(), omp_in_final());
  fx_record(&r->slot);
  return &r->slot;
}

/* rec_park: the caller's final wait, in user code. */
static inline void rec_park(void) {
  for (;;)
    nanosleep(&fx_nap, NULL);
}

/* rec_announce waits until n records exist (the caller's, self, among
 * them) and the other recorded threads are settled, adds every record to l
 * and prints READY; the caller then parks. */
static inline void rec_announce(struct fx_line *l, int n, struct fx_slot *self) {
  while (atomic_load(&nrecs) < n)
    nanosleep(&fx_nap, NULL);
  struct fx_slot *slots[REC_MAX];
  for (int i = 0; i < n; i++) {
    slots[i] = &recs[i].slot == self ? NULL : &recs[i].slot;
    while (slots[i] && fx_tid(slots[i]) == 0)
      nanosleep(&fx_nap, NULL);
  }
  fx_settle(slots, n);
  for (int i = 0; i < atomic_load(&nrecs); i++) {
    char key[32];
    snprintf(key, sizeof key, "t%d", fx_tid(&recs[i].slot));
    fx_add(l, key, "%s", recs[i].text);
  }
  fx_emit(l);
  FX_MAYBE_ABORT();
}
#endif
