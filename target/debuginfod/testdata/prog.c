/* A program whose debug file the debuginfod tests serve. */
#include <stdio.h>

static int debuginfod_probe(int x) { return x * 3 + 1; }

int main(int argc, char **argv)
{
	(void)argv;
	printf("%d\n", debuginfod_probe(argc));
	return 0;
}
