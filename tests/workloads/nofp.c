/*
 * nofp.c - proves that perfd unwinds code built without frame pointers.
 *
 * Built with -O2 -fomit-frame-pointer, like most distribution code, and so
 * is its shared library (lib/nofplib.c).  The call chain is
 *   main -> drive -> stage_outer -> stage_inner -> lib_stage (library)
 *        -> lib_hot_three_quarters (library: 3 units of work)
 *        -> exe_cold_one_quarter (back in the executable: 1 unit),
 * both doing their work in one leaf, lib_work_units, so 75% of the CPU is
 * under lib_hot_three_quarters and 25% under exe_cold_one_quarter, by
 * construction, deep under main.  A frame-pointer walk loses
 * everything above the leaf; a table unwinder reaches main and _start.
 *
 * usage: nofp CPU_SECONDS
 */
#include <stdint.h>
#include <stdio.h>

#include "workload.h"

uint64_t lib_stage(uint64_t seed, unsigned units, uint64_t (*callback)(uint64_t, unsigned));
uint64_t lib_work_units(uint64_t seed, unsigned units);

__attribute__((noinline)) static uint64_t exe_cold_one_quarter(uint64_t seed, unsigned units)
{
	return lib_work_units(seed, units) + 1;
}

__attribute__((noinline)) static uint64_t stage_inner(uint64_t seed)
{
	volatile uint32_t depth[16];

	depth[seed & 15] = (uint32_t)seed;
	/* Rounds of 1 to 5 units (3 to 15 hot), so the loop's period never
	 * stays in step with the sampling period.  "+ 1": not a tail call, so
	 * this frame stays on the stack. */
	return lib_stage(seed + depth[seed & 15], 1 + (unsigned)(seed >> 33) % 5,
			 exe_cold_one_quarter) + 1;
}

__attribute__((noinline)) static uint64_t stage_outer(uint64_t seed)
{
	volatile uint64_t frame[32];

	frame[seed & 31] = seed;
	return stage_inner(frame[seed & 31] + 1) + 1;
}

__attribute__((noinline)) static uint64_t drive(double seconds)
{
	double until = cpu_seconds() + seconds;
	uint64_t seed = 42;

	while (cpu_seconds() < until)
		seed = stage_outer(seed);
	return seed;
}

int main(int argc, char **argv)
{
	double seconds;

	if (argc != 2 || parse_seconds(argv[1], &seconds) < 0) {
		fprintf(stderr, "usage: %s CPU_SECONDS\n", argv[0]);
		return 2;
	}
	workload_sink = drive(seconds);
	return 0;
}
