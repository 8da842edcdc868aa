/* leaderexit.c: the main thread calls pthread_exit while another thread
 * runs on, leaving a zombie main thread in a live process. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

volatile uint64_t the_global = 0x1122334455667788ULL;
volatile uint64_t counter;

static void *spinner(void *arg) {
	for (;;)
		counter++;
	return arg;
}

int main(void) {
	pthread_t t;
	pthread_create(&t, NULL, spinner, NULL);
	printf("global %p\n", (void *)&the_global);
	printf("counter %p\n", (void *)&counter);
	printf("ready\n");
	fflush(stdout);
	pthread_exit(NULL);
}
