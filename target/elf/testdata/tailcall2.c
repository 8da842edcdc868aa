/* The second file of the tailcall test program: top, called from
 * tailcall.c, tail-calls mid there. */
extern volatile int sink;
extern int mid(int x);

__attribute__((noinline, noclone)) int top(int x)
{
	sink = x * 2;
	return mid(x + 2); /* LINE:top_tail */
}
