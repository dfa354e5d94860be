/*
 * deeprec.c - a native recursion for a Python process to call through
 * ctypes (tests/workloads/python/deep_native.py): deep_recurse(depth, cb)
 * recurses depth frames down in C, then calls cb (a Python function) at
 * the bottom.  A depth past the unwinder's limit (127 frames) makes a
 * stack cut in the middle of the C recursion, with Python frames on both
 * sides of it.
 */
#include "../workload.h"

typedef int (*deeprec_callback)(int);

/* The volatile local keeps a frame per level: no tail call, no folding. */
__attribute__((noinline)) int deep_recurse(int depth, deeprec_callback cb)
{
	volatile int level = depth;

	if (depth <= 0)
		return cb(0);
	return deep_recurse(depth - 1, cb) + (level & 0);
}
