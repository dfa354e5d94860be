/*
 * coordinator.c - a function that spends almost nothing itself and all of
 * its callees' time: coordinator() calls leaf_a() for 3 work units and
 * leaf_b() for 1, over and over, from main().
 *
 * Proves: a profile report tells self from total.  coordinator() has a high
 * total (all the burning happens below it) and a self near zero (a loop
 * counter and two calls per round); leaf_a() is the hot leaf, with about
 * 3/4 of the samples as its self, leaf_b() the other 1/4, and each is
 * called from coordinator() alone.  Both leaves run the very same work
 * (WORK_UNITS of workload.h), so the split is 3:1 in work, not in wall
 * time, and the slices cycle through 1..5 units so they cannot phase-lock
 * with a periodic sampling timer (as in split.c).
 *
 * usage: coordinator CPU_SECONDS  (stops once the process used that much CPU)
 * output: "ROUNDS rounds" at the end.
 */
#include <stdint.h>
#include <stdio.h>

#include "workload.h"

/* noipa: each a frame of its own, never inlined, cloned or merged. */
__attribute__((noipa)) static uint64_t leaf_a(unsigned units)
{
	return WORK_UNITS(workload_sink, units);
}

__attribute__((noipa)) static uint64_t leaf_b(unsigned units)
{
	return WORK_UNITS(workload_sink, units);
}

/* Its own work is a few instructions a round: its self stays near zero. */
__attribute__((noipa)) static unsigned long coordinator(double target)
{
	unsigned long round = 0;

	while (cpu_seconds() < target) {
		unsigned m = 1 + round++ % 5;

		workload_sink = leaf_a(3 * m);
		workload_sink = leaf_b(m);
	}
	return round;
}

int main(int argc, char **argv)
{
	double target;

	if (argc != 2 || parse_seconds(argv[1], &target) < 0 || !(target > 0)) {
		fprintf(stderr, "usage: %s CPU_SECONDS\n", argv[0]);
		return 2;
	}
	printf("%lu rounds\n", coordinator(target));
	return 0;
}
