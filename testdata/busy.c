/*
 * busy.c: OpenMP work that never stops, for attach/detach stress tests.
 *
 * Every iteration n forks an outer team of 2 (LINE:outer); each outer
 * thread forks an inner team of 2 (LINE:inner); each inner thread creates
 * TASKS tasks (LINE:task) that each sum a slice of a sequence depending on
 * n, and waits for them (LINE:taskwait). The iteration compares the result
 * with the same sum computed sequentially and stops the program with
 * "FAIL ..." on stderr and exit status 1 on a mismatch.
 *
 * Output on stdout:
 *   READY pid=PID after the first iteration checked out (the main thread
 *     aborts there in abort mode, LINE:abort),
 *   then about once a second "OK <iterations> <checksum>": iterations is
 *   the number of checked iterations so far and checksum a running hash of
 *   their results (it only grows in iterations; its value is not meant to
 *   be compared across runs).
 *
 * The threads are never in a fixed state: at any moment they may be forking,
 * joining, in a barrier, creating or running tasks.
 */
#include <omp.h>

#include "fixture.h"

enum { OUTER = 2, INNER = 2, TASKS = 4, SLICE = 2000 };

/* term is the k-th element of iteration n's sequence. */
static long term(long n, long k) { return (n * 7919 + k * k) % 10007; }

static long slice_sum(long n, int slice) {
  long s = 0;
  for (long k = (long)slice * SLICE; k < (long)(slice + 1) * SLICE; k++)
    s += term(n, k);
  return s;
}

static long parallel_sum(long n) {
  long total = 0;
#pragma omp parallel num_threads(OUTER) reduction(+ : total) /* LINE:outer */
  {
    int o = omp_get_thread_num();
#pragma omp parallel num_threads(INNER) reduction(+ : total) /* LINE:inner */
    {
      int i = omp_get_thread_num();
      long part[TASKS];
      for (int t = 0; t < TASKS; t++) {
        int slice = (o * INNER + i) * TASKS + t;
#pragma omp task shared(part) firstprivate(t, slice) /* LINE:task */
        part[t] = slice_sum(n, slice);
      }
#pragma omp taskwait /* LINE:taskwait */
      for (int t = 0; t < TASKS; t++)
        total += part[t];
    }
  }
  return total;
}

static long sequential_sum(long n) {
  long s = 0;
  for (int slice = 0; slice < OUTER * INNER * TASKS; slice++)
    s += slice_sum(n, slice);
  return s;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  fx_init(argc, argv);
  omp_set_max_active_levels(2);
  unsigned long checksum = 0;
  double last = now();
  for (long n = 1;; n++) {
    long got = parallel_sum(n), want = sequential_sum(n);
    if (got != want) {
      fprintf(stderr, "FAIL iteration %ld: got %ld, want %ld\n", n, got, want);
      return 1;
    }
    checksum = checksum * 31 + (unsigned long)got;
    if (n == 1) {
      struct fx_line l;
      fx_begin_running(&l);
      fx_emit(&l);
      FX_MAYBE_ABORT(); /* LINE:abort */
    }
    if (now() - last >= 1.0) {
      last = now();
      printf("OK %ld %lu\n", n, checksum);
      fflush(stdout);
    }
  }
}
