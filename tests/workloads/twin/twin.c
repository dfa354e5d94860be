/*
 * twin.c - built twice with one GNU build-id (-Wl,--build-id=0x...) and
 * hot functions of other names (-DHOT=..., names of one length, so the
 * code is laid out alike): a user's modified copy that claims to be the
 * real binary (issue 27).  The profiler must name each from its own file.
 *
 * usage: twin CPU_SECONDS [SLEEP_SECONDS]
 * output: "ready" before burning, then the CPU seconds used.
 */
#include <stdio.h>

#include "../workload.h"

#ifndef HOT
#error "build with -DHOT=name"
#endif

__attribute__((noipa)) void HOT(double seconds);
__attribute__((noipa)) void HOT(double seconds)
{
	burn_until(cpu_seconds() + seconds);
}

int main(int argc, char **argv)
{
	double burn, pause = 0.5;

	if (argc < 2 || argc > 3 || parse_seconds(argv[1], &burn) < 0 ||
	    (argc == 3 && parse_seconds(argv[2], &pause) < 0)) {
		fprintf(stderr, "usage: %s CPU_SECONDS [SLEEP_SECONDS]\n", argv[0]);
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	if (pause_seconds(pause) < 0)
		return 1;
	HOT(burn);
	return print_cpu_used() < 0;
}
