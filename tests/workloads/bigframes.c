/*
 * bigframes.c - a stack many pages deep, in code without frame pointers.
 *
 *   bigframes CPU_SECONDS
 *
 * main -> descend(DEPTH) -> descend(DEPTH - 1) -> ... -> descend(0), whose
 * leaf burns the CPU.  Each descend() frame holds a 600-byte array, so the
 * 48 frames span about 29 KiB of stack: 7 pages, and frames that straddle
 * a page boundary.  Built with -O2 -fomit-frame-pointer, so every frame is
 * walked with the unwind tables, reading the stack page after page.  By
 * construction every sample of the leaf has exactly DEPTH + 1 descend
 * frames between main and burn_leaf.
 */
#include <stdint.h>
#include <stdio.h>

#include "workload.h"

#define DEPTH 47
#define FRAME_BYTES 600

static double budget;

__attribute__((noinline)) static void burn_leaf(void)
{
	burn_until(budget);
}

__attribute__((noinline)) static uint64_t descend(int depth)
{
	volatile uint8_t pad[FRAME_BYTES];
	uint64_t r;

	pad[depth % FRAME_BYTES] = (uint8_t)depth;
	if (depth == 0)
		burn_leaf();
	else
		descend(depth - 1);
	/* "+ pad": not a tail call, so this frame stays on the stack */
	r = (uint64_t)depth + pad[depth % FRAME_BYTES];
	return r;
}

int main(int argc, char **argv)
{
	if (argc != 2 || parse_seconds(argv[1], &budget) < 0) {
		fprintf(stderr, "usage: bigframes CPU_SECONDS\n");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	workload_sink += descend(DEPTH);
	return print_cpu_used();
}
