/*
 * paths.c - a workload with a very large number of distinct call paths.
 *
 * Used by the benchmark to fill the profiler with unique stacks: the memory
 * held per unique stack, and how long a snapshot of 10k or 100k unique stacks
 * takes to encode.  A path is a number below 2^DEPTH read bit by bit: at
 * level i the walk calls branch_left() when bit i is clear and branch_right()
 * when it is set, so every number is its own sequence of DEPTH frames, and
 * the two functions have separate call sites for each side, so the return
 * addresses differ too.  Each thread visits its own numbers in order
 * (thread t of T takes t, t + T, t + 2T, ...), spending a short burst at the
 * leaf of each, and wraps around after 2^DEPTH / T paths.
 *
 * The burst is much shorter than a sampling period, so consecutive samples of
 * one thread land many paths apart; with 2^DEPTH far above the number of
 * samples taken, nearly every sample is a stack never seen before.  Nothing
 * is random: the same arguments give the same sequence of paths.
 *
 * usage: paths [-d DEPTH] [-T THREADS] [-p PAUSE_SECONDS] -s SECONDS
 *   pauses first (so a profiler can start watching), then walks for SECONDS
 *   of wall time; prints the number of paths walked.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../workloads/workload.h"

/* The leaf burst: about 1-2 us, far below a 100 us sampling period. */
#define LEAF_ITERS 1000UL

static volatile uint64_t sink;
static int depth = 20;
static int n_threads = 1;
static double run_seconds;

__attribute__((noipa)) static void publish(uint64_t x)
{
	sink = x;
}

__attribute__((noipa)) static void path_leaf(uint64_t path)
{
	uint64_t x = sink | path | 1;

	for (unsigned long i = 0; i < LEAF_ITERS; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	publish(x);
}

__attribute__((noipa)) static void branch_left(uint64_t path, int level);
__attribute__((noipa)) static void branch_right(uint64_t path, int level);

/* Descends one level; which function comes next is bit `level` of path. */
#define BRANCH(name)                                                           \
	__attribute__((noipa)) static void name(uint64_t path, int level)      \
	{                                                                      \
		if (level >= depth)                                            \
			path_leaf(path);                                       \
		else if (path >> level & 1)                                    \
			branch_right(path, level + 1);                         \
		else                                                           \
			branch_left(path, level + 1);                          \
		publish(sink ^ (uint64_t)level);                               \
	}

BRANCH(branch_left)
BRANCH(branch_right)

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct walker {
	int id;
	double until;
	uint64_t walked;
};

static void *walk(void *arg)
{
	struct walker *w = arg;
	uint64_t n_paths = 1ULL << depth, path = (uint64_t)w->id;

	/* The clock is read once per 256 paths: the walk, not the clock,
	 * should be what the samples see. */
	for (;;) {
		for (int i = 0; i < 256; i++) {
			branch_left(path, 0);
			path += (uint64_t)n_threads;
			if (path >= n_paths)
				path = (uint64_t)w->id;
			w->walked++;
		}
		if (now_seconds() >= w->until)
			return NULL;
	}
}

int main(int argc, char **argv)
{
	double pause = 0;
	struct walker *walkers;
	pthread_t *threads;
	uint64_t total = 0;
	int c;

	while ((c = getopt(argc, argv, "d:T:p:s:")) != -1) {
		switch (c) {
		case 'd':
			depth = atoi(optarg);
			if (depth < 1 || depth > 40)
				goto usage;
			break;
		case 'T':
			n_threads = atoi(optarg);
			if (n_threads < 1 || n_threads > 256)
				goto usage;
			break;
		case 'p':
			if (parse_seconds(optarg, &pause) < 0)
				goto usage;
			break;
		case 's':
			if (parse_seconds(optarg, &run_seconds) < 0 || !(run_seconds > 0))
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc || !(run_seconds > 0))
		goto usage;

	if (pause_seconds(pause) < 0)
		return 1;

	walkers = calloc((size_t)n_threads, sizeof(*walkers));
	threads = calloc((size_t)n_threads, sizeof(*threads));
	if (!walkers || !threads) {
		perror("calloc");
		return 1;
	}
	for (int i = 0; i < n_threads; i++) {
		walkers[i].id = i;
		walkers[i].until = now_seconds() + run_seconds;
		if (pthread_create(&threads[i], NULL, walk, &walkers[i]) != 0) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	}
	for (int i = 0; i < n_threads; i++) {
		pthread_join(threads[i], NULL);
		total += walkers[i].walked;
	}
	printf("%llu paths walked\n", (unsigned long long)total);
	free(walkers);
	free(threads);
	return fflush(stdout) == 0 ? 0 : 1;
usage:
	fprintf(stderr, "usage: %s [-d DEPTH] [-T THREADS] [-p PAUSE_SECONDS] -s SECONDS\n", argv[0]);
	return 2;
}
