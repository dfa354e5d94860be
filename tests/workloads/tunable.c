/*
 * tunable.c - burns CPU in two functions in a proportion given on the
 * command line: work_hot() does HOT work units a round and work_other()
 * OTHER units, both called from main(), so a run with 4 1 and one with
 * 1 1 are the same program whose hot function got 4x cheaper.
 *
 * Proves: `perfctl diff` of two runs shows the change of each function's
 * share: work_hot 80 % -> 50 % of the samples, work_other 20 % -> 50 %.
 * Both run the very same WORK_UNITS (workload.h), so the split is in work,
 * not in wall time, and the slices cycle through 1..5 times the units so
 * they cannot phase-lock with a periodic sampling timer (as in split.c).
 *
 * usage: tunable CPU_SECONDS HOT OTHER  (HOT, OTHER: 0..100 units; stops
 * once the process used that much CPU)
 * output: "ROUNDS rounds" at the end.
 */
#include <stdint.h>
#include <stdio.h>

#include "workload.h"

/* noipa: each a frame of its own, never inlined, cloned or merged. */
__attribute__((noipa)) static uint64_t work_hot(unsigned units)
{
	return WORK_UNITS(workload_sink, units);
}

__attribute__((noipa)) static uint64_t work_other(unsigned units)
{
	return WORK_UNITS(workload_sink, units);
}

int main(int argc, char **argv)
{
	unsigned long round = 0;
	long hot, other;
	double target;

	if (argc != 4 || parse_seconds(argv[1], &target) < 0 || !(target > 0) ||
	    parse_long(argv[2], 0, 100, &hot) < 0 || parse_long(argv[3], 0, 100, &other) < 0 ||
	    hot + other == 0) {
		fprintf(stderr, "usage: %s CPU_SECONDS HOT OTHER\n", argv[0]);
		return 2;
	}
	while (cpu_seconds() < target) {
		unsigned m = 1 + round++ % 5;

		workload_sink = work_hot((unsigned)hot * m);
		workload_sink = work_other((unsigned)other * m);
	}
	printf("%lu rounds\n", round);
	return 0;
}
