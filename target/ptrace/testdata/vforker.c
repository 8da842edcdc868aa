/* vforker.c: the main thread waits in vfork, in uninterruptible sleep,
 * until the child (which just pauses) is killed; then it prints "resumed". */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
	pid_t child;
	printf("pid %d\n", getpid());
	fflush(stdout);
	child = vfork();
	if (child == 0) {
		char buf[32];
		int n = snprintf(buf, sizeof buf, "child %d\n", getpid());
		write(1, buf, n);
		pause();
		_exit(0);
	}
	printf("resumed\n");
	fflush(stdout);
	for (;;)
		pause();
}
