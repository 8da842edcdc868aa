/*
 * nocfi.c: code without call frame information, for the frame-pointer
 * fallback. Built with -O0 -fno-asynchronous-unwind-tables
 * -fno-unwind-tables -fno-omit-frame-pointer and without -g, so that the
 * program's own functions have neither .eh_frame nor .debug_frame entries
 * but all keep the rbp chain.
 *
 * Threads, at READY:
 *   main     main -> level1 -> level2 -> level3, asleep in nanosleep()
 *            (libc, which has CFI). With the argument "abort" it calls
 *            abort() from level3 instead, after READY.
 *   spinner  spinner_main -> spin_outer -> spin, spinning in spin() (no
 *            CFI at the innermost frame: the walk starts with the frame
 *            pointer).
 *
 * READY pid=PID main=TID spinner=TID
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long counter;
static volatile int spinner_tid;
static int abort_mode;

__attribute__((noinline)) static void spin(void) {
  for (;;)
    counter++;
}

__attribute__((noinline)) static void spin_outer(void) {
  spin();
}

static void *spinner_main(void *arg) {
  (void)arg;
  spinner_tid = (int)syscall(SYS_gettid);
  spin_outer();
  return NULL;
}

__attribute__((noinline)) void level3(void) {
  printf("READY pid=%d main=%d spinner=%d\n", getpid(), getpid(), spinner_tid);
  fflush(stdout);
  if (abort_mode)
    abort();
  const struct timespec nap = {0, 20 * 1000 * 1000L};
  for (;;)
    nanosleep(&nap, NULL);
}

__attribute__((noinline)) void level2(void) { level3(); }

__attribute__((noinline)) void level1(void) { level2(); }

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "abort") == 0) {
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &rl);
    abort_mode = 1;
  }
  pthread_t th;
  if (pthread_create(&th, NULL, spinner_main, NULL) != 0)
    return 3;
  /* Wait until the spinner is in spin() (it counts). */
  while (spinner_tid == 0 || counter < 1000000)
    ;
  level1();
  return 0;
}
