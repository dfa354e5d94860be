/*
 * tiny.c - the smallest shared object with code of its own: manymaps
 * copies it thousands of times (each copy another file) and runs
 * tiny_burn in each, so that the profiler sees thousands of binaries.
 * Leaf code, no libc: it runs wherever the file is mapped.
 */
void tiny_burn(unsigned long n);

__attribute__((noinline)) void tiny_burn(unsigned long n)
{
	for (volatile unsigned long i = 0; i < n; i++)
		;
}
