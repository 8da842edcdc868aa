/*
 * sigframe.c: a thread interrupted by a signal whose handler never
 * returns, for unwinding through the sigreturn trampoline.
 *
 * The main thread spins in interrupted() (called by main). A second
 * thread, the killer, sends it SIGUSR1 once it spins. The handler runs on
 * an alternate signal stack (sigaltstack, SA_ONSTACK): handler() calls
 * in_handler(), which prints READY and then sleeps in nanosleep() forever,
 * or, with the argument "abort", calls abort().
 *
 * Threads, at READY:
 *   main    nanosleep <- in_handler <- handler <- <signal handler called>
 *           <- interrupted <- main
 *   killer  asleep in nanosleep() in killer_main()
 *
 * READY pid=PID main=TID killer=TID
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long counter;
static volatile int killer_tid;
static int abort_mode;
static pthread_t main_thread;

__attribute__((noinline)) static void in_handler(void) {
  char buf[128];
  int n = snprintf(buf, sizeof buf, "READY pid=%d main=%d killer=%d\n", getpid(),
                   getpid(), killer_tid);
  if (write(1, buf, (size_t)n) != n)
    _exit(3);
  if (abort_mode)
    abort();
  const struct timespec nap = {0, 20 * 1000 * 1000L};
  for (;;)
    nanosleep(&nap, NULL);
}

__attribute__((noinline)) static void handler(int sig) {
  (void)sig;
  in_handler();
}

__attribute__((noinline)) static void interrupted(void) {
  for (;;)
    counter++;
}

static void *killer_main(void *arg) {
  (void)arg;
  killer_tid = (int)syscall(SYS_gettid);
  while (counter < 1000000)
    ;
  pthread_kill(main_thread, SIGUSR1);
  const struct timespec nap = {0, 20 * 1000 * 1000L};
  for (;;)
    nanosleep(&nap, NULL);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "abort") == 0) {
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_CORE, &rl);
    abort_mode = 1;
  }
  stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
  if (ss.ss_sp == NULL || sigaltstack(&ss, NULL) != 0)
    return 3;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_ONSTACK;
  if (sigaction(SIGUSR1, &sa, NULL) != 0)
    return 3;
  main_thread = pthread_self();
  pthread_t th;
  if (pthread_create(&th, NULL, killer_main, NULL) != 0)
    return 3;
  interrupted();
  return 0;
}
