/*
 * vdso.c: a thread that spends its time in the vDSO, which is mapped
 * without a file and so is no module of the target.
 *
 * The main thread calls poll_clock(), which calls clock_gettime() (the
 * vDSO's) in a loop forever. It prints READY first.
 *
 * READY pid=PID
 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noinline)) static void poll_clock(void) {
  struct timespec ts;
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sink += ts.tv_nsec;
  }
}

int main(void) {
  printf("READY pid=%d\n", getpid());
  fflush(stdout);
  poll_clock();
  return 0;
}
