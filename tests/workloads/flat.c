/*
 * flat.c - the contrast to leak.c: allocates MIB MiB once, touches all of
 * it, then keeps exactly that much for SECONDS seconds.
 *
 * Proves: a process with a large but constant resident set is not taken for
 * a growing one.  allocate_once() takes the memory from malloc (above
 * glibc's mmap threshold, so it is one anonymous mapping of its own) and
 * fills it; after that nothing in the process allocates: it sleeps in steps
 * of 100 ms.  With --touch it rewrites all of its memory at every step
 * instead of only sleeping (use_memory(), a few percent of a CPU for 64
 * MiB), so it also takes CPU samples, every one with the same RSS - a busy
 * process whose memory is flat.  Rewriting resident pages faults nothing in.
 *
 * usage: flat MIB SECONDS [--touch] [--pause SECONDS]
 * output, one line each, flushed at once:
 *   "ready"             - at start; then it sleeps --pause seconds (default 1)
 *   "allocated BYTES"   - all of it is resident; flat from here on
 *   "done"              - SECONDS later, about to exit (status 0)
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workload.h"

#define MIB (1024UL * 1024)
#define STEP_SECONDS 0.1

/* noipa: frames of their own; both call memset, so neither is a leaf. */
__attribute__((noipa)) static char *allocate_once(size_t bytes)
{
	char *p = malloc(bytes);

	if (!p) {
		perror("malloc");
		return NULL;
	}
	memset(p, 0x5a, bytes);
	return p;
}

__attribute__((noipa)) static void use_memory(char *p, size_t bytes, unsigned step)
{
	memset(p, (int)(step % 255) + 1, bytes);
}

/* CLOCK_MONOTONIC, in seconds. */
static double wall_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s MIB SECONDS [--touch] [--pause SECONDS]\n", argv0);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "touch", no_argument, NULL, 't' },
		{ "pause", required_argument, NULL, 'p' },
		{}
	};
	double seconds, pause = 1, start;
	int c, touch = 0;
	long mib;
	size_t bytes;
	char *p;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 't':
			touch = 1;
			break;
		case 'p':
			if (parse_seconds(optarg, &pause) < 0)
				return usage(argv[0]);
			break;
		default:
			return usage(argv[0]);
		}
	}
	if (argc - optind != 2 || parse_long(argv[optind], 1, 1L << 20, &mib) < 0 ||
	    parse_seconds(argv[optind + 1], &seconds) < 0)
		return usage(argv[0]);
	bytes = (size_t)mib * MIB;

	printf("ready\n");
	fflush(stdout);
	if (pause_seconds(pause) < 0)
		return 1;

	p = allocate_once(bytes);
	if (!p)
		return 1;
	printf("allocated %zu\n", bytes);
	fflush(stdout);
	start = wall_seconds();

	for (unsigned step = 0;; step++) {
		double left = start + seconds - wall_seconds();

		if (left <= 0)
			break;
		if (touch)
			use_memory(p, bytes, step);
		if (pause_seconds(left < STEP_SECONDS ? left : STEP_SECONDS) < 0)
			return 1;
	}
	/* Not freed: the memory stays until the process is gone. */
	printf("done\n");
	return fflush(stdout) == 0 ? 0 : 1;
}
