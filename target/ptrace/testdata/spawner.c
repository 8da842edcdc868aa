/* spawner.c: threads that create and join threads in a tight loop, so that
 * threads appear and exit while the tests attach. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void *noop(void *arg) { return arg; }

static void *churn(void *arg) {
	for (;;) {
		pthread_t t;
		if (pthread_create(&t, NULL, noop, NULL) == 0)
			pthread_join(t, NULL);
	}
	return arg;
}

int main(void) {
	pthread_t t;
	int i;
	for (i = 0; i < 3; i++)
		pthread_create(&t, NULL, churn, NULL);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
