/*
 * split.c - burns CPU in two functions in a fixed 3:1 proportion.
 *
 * Proves: the profiler attributes CPU to the functions that spent it, in the
 * right proportion, under the right caller.  hot_three_quarters() and
 * cold_one_quarter() are both called straight from main() and run the very
 * same loop body (BURN below), so one work unit costs the same in either;
 * main() gives the hot one 3 units for every 1 unit of the cold one.  The
 * split is therefore 3:1 in work, not in wall time, and holds under
 * preemption, frequency scaling or a slow machine.  Slices are short (about a
 * millisecond) and their length cycles through 1..5 units, so they cannot
 * phase-lock with a periodic sampling timer.
 *
 * usage: split CPU_SECONDS     (stops once the process has used that much CPU)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "workload.h"

/* About 0.1 ms per unit on a 3 GHz core: a multiply-add chain, each step
 * depending on the previous one, so its cost does not depend on what the
 * compiler or the CPU can overlap. */
#define UNIT_ITERS 100000UL

#define BURN(units)                                                            \
	do {                                                                   \
		uint64_t x_ = workload_sink | 1;                                        \
		for (unsigned long i_ = 0; i_ < (units) * UNIT_ITERS; i_++)   \
			x_ = x_ * 6364136223846793005ULL + 1442695040888963407ULL; \
		publish(x_);                                                   \
	} while (0)

/* Written by both burners so that their loops cannot be optimised away. */
/* Stores a burner's result.  It is a call, not a plain store, for a reason:
 * GCC drops the frame pointer of a leaf function that uses no stack, even
 * with -fno-omit-frame-pointer (ix86_finalize_stack_frame_flags), and a
 * frame-pointer unwinder sampling such a leaf skips its caller - here, main.
 * Calling publish() keeps the burners non-leaf, with a frame of their own. */
__attribute__((noipa)) static void publish(uint64_t x)
{
	workload_sink = x;
}

/* noipa: keep both functions separate frames; never inlined, cloned or
 * folded into one identical function. */
__attribute__((noipa)) static void hot_three_quarters(unsigned long units)
{
	BURN(units);
}

__attribute__((noipa)) static void cold_one_quarter(unsigned long units)
{
	BURN(units);
}

int main(int argc, char **argv)
{
	char *end;
	double target;
	unsigned long round = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CPU_SECONDS\n", argv[0]);
		return 2;
	}
	target = strtod(argv[1], &end);
	if (end == argv[1] || *end != '\0' || !(target > 0)) {
		fprintf(stderr, "%s: bad CPU_SECONDS '%s'\n", argv[0], argv[1]);
		return 2;
	}

	while (cpu_seconds() < target) {
		unsigned long m = 1 + round++ % 5;

		hot_three_quarters(3 * m);
		cold_one_quarter(m);
	}
	printf("%lu rounds\n", round);
	return 0;
}
