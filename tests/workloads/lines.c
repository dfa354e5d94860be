/*
 * lines.c - proves source lines and inlined frames (perfctl snapshot --lines):
 * nearly all CPU goes to one line of mix_step(), a helper always inlined
 * into hot_function().  With --lines the profile shows
 * "hot_function (lines.c:CALL)" then "mix_step (lines.c:HOT)", the lines
 * marked below (the test reads the markers, not numbers).
 *
 * usage: lines CPU_SECONDS
 */
#include <stdint.h>
#include <stdio.h>

#include "workload.h"

static inline __attribute__((always_inline)) uint64_t mix_step(uint64_t x, int rounds)
{
	for (int i = 0; i < rounds; i++)
		x = x * 6364136223846793005ULL + (x >> 29) + 1442695040888963407ULL; /* HOT LINE */
	return x;
}

__attribute__((noinline)) static uint64_t hot_function(uint64_t seed)
{
	uint64_t x = mix_step(seed | 1, 200000); /* CALL LINE */

	workload_sink = x;
	return x;
}

int main(int argc, char **argv)
{
	double seconds, until;
	uint64_t x = 1;

	if (argc != 2 || parse_seconds(argv[1], &seconds) < 0) {
		fprintf(stderr, "usage: %s CPU_SECONDS\n", argv[0]);
		return 2;
	}
	until = cpu_seconds() + seconds;
	while (cpu_seconds() < until)
		x = hot_function(x);
	printf("%llu\n", (unsigned long long)x);
	return 0;
}
