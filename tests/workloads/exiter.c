/*
 * exiter.c - burns CPU in busy_until_exit() for a while, then exits.
 *
 * Proves: a snapshot that outlives its process ends early with what was
 * sampled, and the samples are still symbolized although the process (and
 * its /proc/PID/maps) is gone by the time the snapshot answers.
 *
 * usage: exiter CPU_SECONDS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

static double cpu_seconds(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) < 0) {
		perror("clock_gettime");
		exit(1);
	}
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noipa)) static void busy_until_exit(double seconds)
{
	double until = cpu_seconds() + seconds;

	while (cpu_seconds() < until) {
		uint64_t x = sink | 1;

		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		sink = x;
	}
}

int main(int argc, char **argv)
{
	char *end;
	double seconds;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CPU_SECONDS\n", argv[0]);
		return 2;
	}
	seconds = strtod(argv[1], &end);
	if (end == argv[1] || *end != '\0' || !(seconds >= 0)) {
		fprintf(stderr, "%s: bad CPU_SECONDS '%s'\n", argv[0], argv[1]);
		return 2;
	}
	busy_until_exit(seconds);
	return 0;
}
