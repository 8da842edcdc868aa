/* Test program for package core: three worker threads park in park_one,
 * park_two and park_three; the main thread prints what the test checks and
 * then either aborts (argument "abort") or waits to be killed. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef VARIANT
#define VARIANT 1
#endif
#define STR2(x) #x
#define STR(x) STR2(x)

unsigned long long answer_global;
const char greeting[] = "greeting from .rodata, variant " STR(VARIANT);
static atomic_int parked;

static void report(const char *who)
{
	printf("thread %s tid=%ld self=%#lx\n", who, (long)syscall(SYS_gettid), (unsigned long)pthread_self());
}

/* Each park function counts itself in before it blocks, so once parked is 3
 * every worker is inside its park function. */
__attribute__((noinline)) void park_one(void) { atomic_fetch_add(&parked, 1); for (;;) pause(); }
__attribute__((noinline)) void park_two(void) { atomic_fetch_add(&parked, 1); for (;;) pause(); }
__attribute__((noinline)) void park_three(void) { atomic_fetch_add(&parked, 1); for (;;) pause(); }

static void *worker(void *arg)
{
	long i = (long)arg;
	char name[8];
	snprintf(name, sizeof name, "w%ld", i);
	report(name);
	if (i == 1)
		park_one();
	if (i == 2)
		park_two();
	park_three();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[3];

	setvbuf(stdout, NULL, _IOLBF, 0);
	answer_global = 0x1122334455667700ULL + VARIANT;
	printf("pid=%ld\n", (long)getpid());
	printf("global=%p value=%#llx\n", (void *)&answer_global, answer_global);
	printf("greeting=%p\n", (void *)greeting);
	report("main");
	for (long i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, worker, (void *)(i + 1));
	while (atomic_load(&parked) < 3)
		sched_yield();
	printf("ready\n");
	if (argc > 1 && strcmp(argv[1], "abort") == 0)
		abort();
	for (;;)
		pause();
}
