/*
 * trace.c: a program that runs a known number of OpenMP constructs and
 * exits, for `ompd-inspect run` and `attach --trace` (it does not use the
 * READY protocol of the other fixtures).
 *
 *   - LOOP (5) regions of 3 threads (LINE:loop);
 *   - one region of 2 threads (LINE:outer) whose threads each fork a
 *     region of 2 (LINE:inner): 1 + 2 regions;
 *   - one region of 4 threads (LINE:tasks) in which one thread creates
 *     TASKS (7) tasks (LINE:task) and one untied task (LINE:untied), then
 *     waits for them (LINE:taskwait);
 *   - one region with if(0), run serialized by the initial thread
 *     (LINE:serial).
 *
 * It prints "sum=<n>" and exits with status 3, so that a test can tell the
 * program's exit code from ompd-inspect's.
 *
 * Modes (first argument):
 *   signals  before the constructs, it sends itself SIGUSR1 three times
 *            (handled: counted) and ignores a SIGUSR2; it prints
 *            "usr1=3" before the sum.
 *   fork     after the constructs, it forks a child that runs LOOP more
 *            regions of 3 (LINE:child) and exits with status 5; the parent
 *            prints "child=5" (the child's exit status).
 *   regions N  only N regions of 2 threads (LINE:bench), for benchmarks;
 *            prints "regions=<N>" and exits 0.
 *   hold     between the constructs and the exit it prints "HOLD pid=<pid>"
 *            and runs regions (LINE:hold) until it receives SIGUSR1; then
 *            it prints "held=<regions>" (used by tests that interrupt a
 *            trace).
 */
#define _GNU_SOURCE
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOOP 5
#define TASKS 7

static volatile sig_atomic_t usr1;
static volatile sig_atomic_t stop_hold;

static void on_usr1(int sig) {
  (void)sig;
  usr1++;
  stop_hold = 1;
}

static long constructs(void) {
  long sum = 0;
  for (int i = 0; i < LOOP; i++) {
#pragma omp parallel num_threads(3) reduction(+ : sum) /* LINE:loop */
    sum += omp_get_thread_num() + 1;
  }

  omp_set_max_active_levels(2);
#pragma omp parallel num_threads(2) reduction(+ : sum) /* LINE:outer */
  {
#pragma omp parallel num_threads(2) reduction(+ : sum) /* LINE:inner */
    sum += 10;
  }

#pragma omp parallel num_threads(4) /* LINE:tasks */
  {
#pragma omp single
    {
      for (int i = 0; i < TASKS; i++) {
#pragma omp task shared(sum) /* LINE:task */
        {
#pragma omp atomic
          sum += 100;
        }
      }
#pragma omp task untied shared(sum) /* LINE:untied */
      {
#pragma omp atomic
        sum += 1000;
      }
#pragma omp taskwait /* LINE:taskwait */
    }
  }

  int zero = 0;
#pragma omp parallel if (zero) reduction(+ : sum) /* LINE:serial */
  sum += omp_get_num_threads() * 10000;
  return sum;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);

  if (strcmp(mode, "regions") == 0 && argc > 2) {
    long n = atol(argv[2]), done = 0;
    for (long i = 0; i < n; i++) {
      long s = 0;
#pragma omp parallel num_threads(2) reduction(+ : s) /* LINE:bench */
      s += 1;
      done += s == 2;
    }
    printf("regions=%ld\n", done);
    return 0;
  }

  if (strcmp(mode, "signals") == 0) {
    signal(SIGUSR2, SIG_IGN);
    for (int i = 0; i < 3; i++)
      raise(SIGUSR1);
    raise(SIGUSR2);
    printf("usr1=%d\n", (int)usr1);
  }

  long sum = constructs();

  if (strcmp(mode, "fork") == 0) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
      long s = 0;
      for (int i = 0; i < LOOP; i++) {
#pragma omp parallel num_threads(3) reduction(+ : s) /* LINE:child */
        s += 1;
      }
      _exit(s == 3 * LOOP ? 5 : 6);
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("child=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }

  if (strcmp(mode, "hold") == 0) {
    usr1 = 0;
    stop_hold = 0;
    printf("HOLD pid=%d\n", (int)getpid());
    fflush(stdout);
    long held = 0;
    while (!stop_hold) {
      long s = 0;
#pragma omp parallel num_threads(2) reduction(+ : s) /* LINE:hold */
      s += 1;
      held += s == 2;
      usleep(1000);
    }
    printf("held=%s\n", held > 0 ? "yes" : "no");
  }

  printf("sum=%ld\n", sum);
  return 3;
}
