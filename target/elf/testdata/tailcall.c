/* Test program for TailCalls (callsite_test.go), built with
 * tailcall2.c. Lines marked LINE:name are looked up by the tests. At -O2
 * gcc turns each "return f(...);" of the noinline functions below into a
 * jump (a tail call) and describes it with a DW_TAG_call_site with
 * DW_AT_call_tail_call. main calls top (in tailcall2.c, so main's call
 * site names top's declaration), which jumps to mid, which jumps to leaf;
 * main calls amb, which jumps to amb_a or amb_b, which both jump to
 * leaf2. The asm labels mark addresses inside leaf and leaf2. */
volatile int sink;

extern int top(int x); /* defined in tailcall2.c */

__attribute__((noinline, noclone)) int leaf(int x)
{
	sink = x;
	__asm__ volatile(".globl leaf_mark\nleaf_mark: nop");
	return sink + 1;
}

__attribute__((noinline, noclone)) int mid(int x)
{
	sink = x * 3;
	return leaf(x + 1); /* LINE:mid_tail */
}

/* Two tail-call paths from amb to leaf2: through amb_a and through
 * amb_b. */
__attribute__((noinline, noclone)) int leaf2(int x)
{
	sink = x;
	__asm__ volatile(".globl leaf2_mark\nleaf2_mark: nop");
	return sink + 2;
}

__attribute__((noinline, noclone)) int amb_a(int x)
{
	sink = x + 5;
	return leaf2(x);
}

__attribute__((noinline, noclone)) int amb_b(int x)
{
	sink = x * 7;
	return leaf2(x - 1);
}

__attribute__((noinline, noclone)) int amb(int x)
{
	if (x & 1)
		return amb_a(x + 2); /* LINE:amb_a_tail */
	return amb_b(x + 4);
}

int main(void)
{
	int r = top(sink); /* LINE:main_top */
	r += amb(sink); /* LINE:main_amb */
	r += leaf(sink); /* LINE:main_leaf */
	return r;
}
