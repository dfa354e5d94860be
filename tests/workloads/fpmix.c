/*
 * fpmix.c - proves that perfd's frame-pointer shortcut (bpf/unwind.bpf.h,
 * "Frames in code that keeps frame pointers") stops where frame pointers
 * stop being true.
 *
 * This executable keeps frame pointers (the workloads' flags); its library
 * (lib/fpmixlib.c) is built without, and while it calls back into the
 * executable its rbp points at a decoy frame on its own stack: a frame
 * pointer walk through it ends at fpmix_decoy, one with the library's
 * table goes on to main.  The call chain, every sample, by construction:
 *   main -> outer x OUTER_LEVELS -> fpmix_hop (library, rbp = decoy)
 *        -> inner x INNER_LEVELS -> leaf (all the CPU)
 *
 * usage: fpmix CPU_SECONDS
 */
#include <stdint.h>

#include "workload.h"

#define OUTER_LEVELS 20
#define INNER_LEVELS 20

uint64_t fpmix_hop(uint64_t seed, uint64_t (*callback)(uint64_t));

static double fpmix_until;

__attribute__((noinline)) static uint64_t leaf(uint64_t seed)
{
	burn_until(fpmix_until);
	return seed ^ workload_sink;
}

/* "+ 1" after each call: no tail calls, every frame stays on the stack */
__attribute__((noinline)) static uint64_t inner(uint64_t seed, int level)
{
	return (level > 1 ? inner(seed + 1, level - 1) : leaf(seed)) + 1;
}

__attribute__((noinline)) static uint64_t inner_start(uint64_t seed)
{
	return inner(seed, INNER_LEVELS - 1) + 1;
}

__attribute__((noinline)) static uint64_t outer(uint64_t seed, int level)
{
	return (level > 1 ? outer(seed + 1, level - 1) : fpmix_hop(seed, inner_start)) + 1;
}

int main(int argc, char **argv)
{
	double seconds;

	if (argc != 2 || parse_seconds(argv[1], &seconds) < 0) {
		fprintf(stderr, "usage: %s CPU_SECONDS\n", argv[0]);
		return 2;
	}
	fpmix_until = cpu_seconds() + seconds;
	workload_sink = outer(1, OUTER_LEVELS);
	return 0;
}
