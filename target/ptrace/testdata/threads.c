/* threads.c: a target for the ptrace tests. The main thread and four
 * threads that each spin or block in a known way; it prints the thread ids
 * and the addresses the tests read, then runs until killed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

volatile uint64_t the_global = 0x1122334455667788ULL;
volatile uint64_t counter;    /* incremented by the spinning thread */
volatile uint64_t usr1_count; /* SIGUSR1 deliveries */

/* A region at a fixed address, followed by an unmapped page. */
#define REGION_ADDR ((void *)0x100000000000ULL)
#define REGION_SIZE (5 << 20)

static pthread_barrier_t started;
static pid_t tids[5];
static int block_pipe[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static pid_t my_tid(void) { return (pid_t)syscall(SYS_gettid); }

static void on_usr1(int sig) { (void)sig; usr1_count++; }

static void *spinner(void *arg) {
	(void)arg;
	tids[1] = my_tid();
	pthread_barrier_wait(&started);
	for (;;)
		counter++;
	return NULL;
}

static void *pipe_reader(void *arg) {
	char c;
	(void)arg;
	tids[2] = my_tid();
	pthread_barrier_wait(&started);
	for (;;)
		if (read(block_pipe[0], &c, 1) == 0)
			pause();
	return NULL;
}

static void *sleeper(void *arg) {
	(void)arg;
	tids[3] = my_tid();
	pthread_barrier_wait(&started);
	for (;;) {
		struct timespec ts = {1000, 0};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *cond_waiter(void *arg) {
	(void)arg;
	tids[4] = my_tid();
	pthread_barrier_wait(&started);
	pthread_mutex_lock(&mu);
	for (;;)
		pthread_cond_wait(&cv, &mu);
	return NULL;
}

int main(void) {
	struct sigaction sa;
	pthread_t t;
	unsigned char *region;
	int i;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	if (pipe(block_pipe) != 0)
		return 1;
	region = mmap(REGION_ADDR, REGION_SIZE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (region != REGION_ADDR)
		return 2;
	for (i = 0; i < REGION_SIZE; i++)
		region[i] = (unsigned char)(i * 7 + 3);

	pthread_barrier_init(&started, NULL, 5);
	tids[0] = my_tid();
	pthread_create(&t, NULL, spinner, NULL);
	pthread_create(&t, NULL, pipe_reader, NULL);
	pthread_create(&t, NULL, sleeper, NULL);
	pthread_create(&t, NULL, cond_waiter, NULL);
	pthread_barrier_wait(&started);

	printf("tids %d %d %d %d %d\n", tids[0], tids[1], tids[2], tids[3], tids[4]);
	printf("global %p %llx\n", (void *)&the_global, (unsigned long long)the_global);
	printf("counter %p\n", (void *)&counter);
	printf("usr1 %p\n", (void *)&usr1_count);
	printf("region %p %d\n", (void *)region, REGION_SIZE);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
