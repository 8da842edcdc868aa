/* Test program for package elf. Lines marked LINE:name are looked up by the
 * tests; keep each marker on the line it names. */
#include <stdio.h>

#ifndef VARIANT
#define VARIANT 1
#endif

int global_counter = 42;
static int local_counter = 7;
__thread int tls_first = 5;
__thread long tls_second = 0x1234;
const char message[] = "rodata message";
int zeroed[16];

static int helper(int x) /* LINE:helper */
{ /* LINE:helper_brace */
	return x + local_counter + zeroed[x & 15]; /* LINE:helper_body */
}

int add_one(int x) { /* LINE:add_one */
	return helper(x) + 1;
}

int main(void)
{
	printf("%d %d %ld %s %d\n", add_one(global_counter), tls_first, tls_second, message, VARIANT);
	return 0;
}
