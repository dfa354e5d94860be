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

#include "workload.h"

__attribute__((noipa)) static void busy_until_exit(double seconds)
{
	burn_until(cpu_seconds() + seconds);
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
