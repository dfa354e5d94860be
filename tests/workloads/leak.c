/*
 * leak.c - a slow, steady leak: a cache that is only ever inserted into
 * grows the process by MIB_PER_SECOND MiB every second for SECONDS seconds.
 *
 * Proves: the profiler tells a process whose resident memory keeps growing
 * (a possible leak) from one whose memory is large but flat (flat.c), and
 * names the function that grows it.  Growth comes in small steps, ten a
 * second, each one a few cache entries of 64 KiB that
 * leaky_cache_insert() takes from malloc (so from the brk heap, below
 * glibc's mmap threshold) and fills, so every page of them is resident as
 * soon as it is inserted; in between, the process sleeps.  Steps are timed
 * against the clock from the start (absolute deadlines), so the rate holds
 * however late a wake-up comes, and the total after t seconds is
 * MIB_PER_SECOND x t MiB, rounded up to whole entries.  The CPU it uses is
 * the filling, a fraction of a percent.
 *
 * usage: leak MIB_PER_SECOND SECONDS [--hold SECONDS] [--pause SECONDS]
 * output, one line each, flushed at once:
 *   "ready"          - at start; then it sleeps --pause seconds (default 1)
 *   "leaked BYTES"   - once a second, the bytes the cache holds so far
 *                      (entries x 64 KiB); the last one is the total
 *   "done"           - after --hold more seconds (default 0) asleep,
 *                      holding it all; about to exit (status 0)
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workload.h"

#define MIB (1024UL * 1024)
#define ENTRY_BYTES (64UL * 1024)
#define STEPS_PER_SECOND 10

/* The cache: a list of entries nobody ever looks up or frees. */
struct entry {
	struct entry *next;
	char payload[ENTRY_BYTES - sizeof(struct entry *)];
};

static struct entry *cache;
static size_t cache_entries;

/* Inserts one entry, filled with nonzero bytes so each of its pages is
 * written (resident, private).  noipa: a frame of its own; it calls malloc
 * and memset, so it is no leaf either.  Returns 0, or -1 when malloc fails
 * (said on stderr). */
__attribute__((noipa)) static int leaky_cache_insert(uint64_t key)
{
	struct entry *e = malloc(sizeof(*e));

	if (!e) {
		perror("malloc");
		return -1;
	}
	memset(e->payload, (int)(key % 255) + 1, sizeof(e->payload));
	e->next = cache;
	cache = e;
	cache_entries++;
	return 0;
}

/* Sleeps until the absolute CLOCK_MONOTONIC time t.  Returns 0, or -1 after
 * saying why on stderr. */
static int sleep_until(const struct timespec *t)
{
	int r;

	while ((r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, NULL)) == EINTR)
		;
	if (r) {
		errno = r;
		perror("clock_nanosleep");
		return -1;
	}
	return 0;
}

static void add_seconds(struct timespec *t, const struct timespec *start, double seconds)
{
	long long ns = start->tv_nsec + (long long)(seconds * 1e9);

	t->tv_sec = start->tv_sec + ns / 1000000000LL;
	t->tv_nsec = ns % 1000000000LL;
}

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s MIB_PER_SECOND SECONDS [--hold SECONDS] [--pause SECONDS]\n",
		argv0);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "hold", required_argument, NULL, 'h' },
		{ "pause", required_argument, NULL, 'p' },
		{}
	};
	double rate, seconds, hold = 0, pause = 1;
	struct timespec start, next;
	long steps;
	int c;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'h':
			if (parse_seconds(optarg, &hold) < 0)
				return usage(argv[0]);
			break;
		case 'p':
			if (parse_seconds(optarg, &pause) < 0)
				return usage(argv[0]);
			break;
		default:
			return usage(argv[0]);
		}
	}
	if (argc - optind != 2 || parse_seconds(argv[optind], &rate) < 0 ||
	    parse_seconds(argv[optind + 1], &seconds) < 0 || rate > 1024)
		return usage(argv[0]);

	printf("ready\n");
	fflush(stdout);
	if (pause_seconds(pause) < 0)
		return 1;

	if (clock_gettime(CLOCK_MONOTONIC, &start) < 0) {
		perror("clock_gettime");
		return 1;
	}
	steps = (long)(seconds * STEPS_PER_SECOND + 0.5);
	for (long s = 1; s <= steps; s++) {
		double t = (double)s / STEPS_PER_SECOND;
		/* Entries due by time t: rate x t MiB, in whole entries. */
		size_t due = (size_t)((rate * t * MIB + ENTRY_BYTES - 1) / ENTRY_BYTES);

		add_seconds(&next, &start, t);
		if (sleep_until(&next) < 0)
			return 1;
		while (cache_entries < due)
			if (leaky_cache_insert(cache_entries) < 0)
				return 1;
		if (s % STEPS_PER_SECOND == 0 || s == steps) {
			printf("leaked %zu\n", cache_entries * ENTRY_BYTES);
			fflush(stdout);
		}
	}

	if (pause_seconds(hold) < 0)
		return 1;
	printf("done\n");
	return fflush(stdout) == 0 ? 0 : 1;
}
