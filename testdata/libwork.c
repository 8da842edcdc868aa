/* libwork.c: the OpenMP library late.c loads with dlopen. */
#include <omp.h>

long work(int loops) {
  long sum = 0;
  for (int i = 0; i < loops; i++) {
#pragma omp parallel num_threads(2) reduction(+ : sum) /* LINE:work */
    sum += omp_get_thread_num() + 1;
  }
  return sum;
}
