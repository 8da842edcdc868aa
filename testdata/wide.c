/*
 * wide.c: many OpenMP threads, for benchmarks (backtraces of every thread).
 *
 * One team of WIDE threads (LINE:parallel): 256, or the environment's
 * FX_WIDE (2 to MAX_WIDE). Threads 1..WIDE-1 wait in the
 * explicit barrier at LINE:barrier; thread 0 (the initial thread) waits
 * until they are all there, prints READY (aborts in abort mode,
 * LINE:abort), then spins at LINE:spin, never reaching the barrier.
 *
 * FX_BALLAST=N (MiB) makes the process allocate and write N MiB first,
 * so that a core of it is large (benchmarks of large cores).
 *
 * READY keys: threads=WIDE
 */
#include <omp.h>

#include "fixture.h"

enum { MAX_WIDE = 1024 };

static struct fx_slot slot[MAX_WIDE];

int main(int argc, char **argv) {
  fx_init(argc, argv);
  int WIDE = 256;
  const char *env = getenv("FX_WIDE");
  if (env != NULL) {
    WIDE = atoi(env);
    if (WIDE < 2 || WIDE > MAX_WIDE)
      fx_fail("FX_WIDE=%s: want 2 to %d", env, MAX_WIDE);
  }
  const char *ballast = getenv("FX_BALLAST");
  if (ballast != NULL) {
    size_t mib = strtoul(ballast, NULL, 10);
    char *b = malloc(mib << 20);
    if (b == NULL)
      fx_fail("FX_BALLAST=%s: cannot allocate it", ballast);
    for (size_t i = 0; i < mib << 20; i += 4096)
      b[i] = (char)(i >> 12 | 1); /* written: a core holds every page */
  }
#pragma omp parallel num_threads(WIDE) /* LINE:parallel */
  {
    int me = omp_get_thread_num();
    if (omp_get_num_threads() != WIDE)
      fx_fail("team of %d threads, not %d", omp_get_num_threads(), WIDE);
    if (me != 0) {
      fx_record(&slot[me]);
#pragma omp barrier /* LINE:barrier */
      fx_fail("the barrier completed");
    }
    struct fx_slot *others[MAX_WIDE - 1];
    for (int i = 1; i < WIDE; i++)
      others[i - 1] = &slot[i];
    fx_settle(others, WIDE - 1);
    struct fx_line l;
    fx_begin(&l);
    fx_add(&l, "threads", "%d", WIDE);
    fx_emit(&l);
    FX_MAYBE_ABORT(); /* LINE:abort */
    for (;;)
      nanosleep(&fx_nap, NULL); /* LINE:spin */
  }
  return 1;
}
