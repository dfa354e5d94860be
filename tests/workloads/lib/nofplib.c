/*
 * nofplib.c - the shared-library half of the nofp workload, built like it
 * with -O2 -fomit-frame-pointer: frames here can only be unwound with the
 * library's .eh_frame.  lib_hot_three_quarters is the hot caller of the
 * leaf lib_work_units.
 */
#include <stdint.h>

#include "../workload.h"

uint64_t lib_stage(uint64_t seed, unsigned units, uint64_t (*callback)(uint64_t, unsigned));
uint64_t lib_work_units(uint64_t seed, unsigned units);
uint64_t lib_hot_three_quarters(uint64_t seed, unsigned units);

/* The leaf every sample lands in: the split is told by its caller, so the
 * cost of a unit is the same for both by construction. */
__attribute__((noinline)) uint64_t lib_work_units(uint64_t seed, unsigned units)
{
	return WORK_UNITS(seed, units);
}

__attribute__((noinline)) uint64_t lib_hot_three_quarters(uint64_t seed, unsigned units)
{
	/* "+ 1": not a tail call, so this frame stays on the stack */
	return lib_work_units(seed, units) + 1;
}

/* One level in the library between the executable's stages and the hot
 * function, and a call back into the executable. */
__attribute__((noinline)) uint64_t lib_stage(uint64_t seed, unsigned units,
					     uint64_t (*callback)(uint64_t, unsigned))
{
	volatile char pad[64];

	pad[0] = (char)seed;
	seed = lib_hot_three_quarters(seed + pad[0], 3 * units);
	return callback(seed, units) + 1;
}
