/* Test program for FramesAt (inline_test.go). Lines marked LINE:name are
 * looked up by the tests; keep each marker on the line it names. inner is
 * inlined into middle, middle into outer; the asm labels mark addresses
 * inside the inlined bodies. */
volatile int sink;

static inline __attribute__((always_inline)) void inner(int x)
{
	sink = x + 1;
	__asm__ volatile(".globl inner_mark\ninner_mark: nop"); /* LINE:inner_mark */
	sink = x + 2;
}

static inline __attribute__((always_inline)) void middle(int x)
{
	sink = x * 2;
	inner(x + 3); /* LINE:middle_call */
	__asm__ volatile(".globl middle_mark\nmiddle_mark: nop"); /* LINE:middle_mark */
	sink = x * 5;
}

__attribute__((noinline)) void outer(int x)
{
	sink = x;
	middle(x); /* LINE:outer_call */
	__asm__ volatile(".globl outer_mark\nouter_mark: nop"); /* LINE:outer_mark */
	sink = x - 1;
}

static inline __attribute__((always_inline)) int twice(int x)
{
	return x * 7 + sink;
}

/* Calls of rare are cold: gcc moves the block calling it, with its
 * inlined twice, to several.cold. */
__attribute__((cold, noinline)) void rare(int x)
{
	sink = x;
}

__attribute__((noinline)) int several(int x)
{
	if (x == 12345) {
		sink = twice(x + 9);
		rare(sink);
	}
	int a = twice(x);
	int b = twice(a + 1);
	for (int i = 0; i < x; i++)
		b += twice(b) ^ i;
	return a + b;
}

int main(void)
{
	outer(sink);
	return several(sink);
}
