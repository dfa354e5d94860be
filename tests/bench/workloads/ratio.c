/*
 * ratio.c - burns CPU in two functions in a fixed 75/25 proportion of work.
 *
 * The benchmark's attribution check: a profiler should put 75% of this
 * process's samples under hot_75() and 25% under cold_25().  Both run the
 * same burst of dependent multiply-adds, so one unit costs the same in either,
 * and every round gives hot_75() three units for each unit of cold_25(): the
 * split holds in work, whatever the machine's speed or load.  Round sizes
 * cycle through 1..7 units so rounds cannot phase-lock with a periodic
 * sampling timer.  A pause comes first, so a profiler can start watching
 * before any CPU is spent.
 *
 * usage: ratio CPU_SECONDS [PAUSE_SECONDS]
 * output: the CPU seconds used (user + system, getrusage), 3 decimals.
 */
#include <stdint.h>
#include <stdio.h>

#include "../../workloads/workload.h"

/* ~40 us per unit on a 3 GHz core. */
#define UNIT_ITERS 30000UL

static volatile uint64_t sink;

__attribute__((noipa)) static void publish(uint64_t x)
{
	sink = x;
}

__attribute__((noipa)) static void burst(unsigned long units)
{
	uint64_t x = sink | 1;

	for (unsigned long i = 0; i < units * UNIT_ITERS; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	publish(x);
}

/* The two callers are what the profile must tell apart: burst() is shared,
 * so the split shows in the frame above the leaf, as in real programs. */
__attribute__((noipa)) static void hot_75(unsigned long units)
{
	burst(units);
}

__attribute__((noipa)) static void cold_25(unsigned long units)
{
	burst(units);
}

int main(int argc, char **argv)
{
	double target, pause = 0;
	unsigned long round = 0;

	if (argc < 2 || argc > 3 || parse_seconds(argv[1], &target) < 0 ||
	    (argc == 3 && parse_seconds(argv[2], &pause) < 0)) {
		fprintf(stderr, "usage: %s CPU_SECONDS [PAUSE_SECONDS]\n", argv[0]);
		return 2;
	}
	if (pause_seconds(pause) < 0)
		return 1;

	while (cpu_seconds() < target) {
		unsigned long m = 1 + round++ % 7;

		hot_75(3 * m);
		cold_25(m);
	}
	return print_cpu_used() < 0 ? 1 : 0;
}
