/*
 * deep.c - a CPU-bound workload whose every sample has a deep user stack.
 *
 * Used by the benchmark to measure what one sample costs the kernel when the
 * frame-pointer walk is long: each worker recurses DEPTH frames through four
 * distinct functions (so the stack is deep *and* not one repeated frame) and
 * only then burns CPU in a leaf.  Almost all the time is spent at full depth,
 * so nearly every sample walks DEPTH + a few frames.
 *
 * Two ways to stop, for two uses:
 *   -t SECONDS  each worker stops after that much CPU time (profiler cost
 *               phases: keep every CPU busy for a known time);
 *   -n ROUNDS   each worker does exactly ROUNDS descents (slowdown phase: a
 *               fixed amount of work, whose wall time grows with any overhead
 *               the profiler adds; a CPU-time budget would hide that overhead,
 *               since time spent in the BPF program is charged to us).
 *
 * usage: deep [-d DEPTH] [-w WORKERS] (-t CPU_SECONDS | -n ROUNDS)
 * output: one line per worker: "worker N: ROUNDS rounds, CPU_SECONDS s"
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../workloads/workload.h"

/* One leaf burst: a dependent multiply-add chain, ~50 us on a 3 GHz core,
 * long next to the descent so the time at full depth dominates. */
#define LEAF_ITERS 150000UL

static volatile uint64_t sink;

/* A call, not a store: keeps the leaf from being a true leaf function,
 * whose frame pointer GCC may drop even with -fno-omit-frame-pointer. */
__attribute__((noipa)) static void publish(uint64_t x)
{
	sink = x;
}

__attribute__((noipa)) static void leaf_burn(void)
{
	uint64_t x = sink | 1;

	for (unsigned long i = 0; i < LEAF_ITERS; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	publish(x);
}

/* Four mutually recursive levels; noipa keeps each a real frame. */
__attribute__((noipa)) static void level_a(int depth);
__attribute__((noipa)) static void level_b(int depth);
__attribute__((noipa)) static void level_c(int depth);
__attribute__((noipa)) static void level_d(int depth);

#define LEVEL(name, next)                                                      \
	__attribute__((noipa)) static void name(int depth)                     \
	{                                                                      \
		if (depth <= 0)                                                \
			leaf_burn();                                           \
		else                                                           \
			next(depth - 1);                                       \
		publish(sink + (uint64_t)depth);                               \
	}

LEVEL(level_a, level_b)
LEVEL(level_b, level_c)
LEVEL(level_c, level_d)
LEVEL(level_d, level_a)

static int worker(int id, int depth, double cpu_budget, unsigned long rounds)
{
	unsigned long done = 0;

	if (rounds > 0) {
		for (; done < rounds; done++)
			level_a(depth);
	} else {
		while (cpu_seconds() < cpu_budget) {
			level_a(depth);
			done++;
		}
	}
	printf("worker %d: %lu rounds, %.3f s\n", id, done, cpu_seconds());
	return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	long depth = 60, workers = 1, rounds = 0;
	double budget = 0;
	char *end;
	int c, failed = 0;

	while ((c = getopt(argc, argv, "d:w:t:n:")) != -1) {
		switch (c) {
		case 'd':
			if (parse_long(optarg, 0, 120, &depth) < 0)
				goto usage;
			break;
		case 'w':
			if (parse_long(optarg, 1, 256, &workers) < 0)
				goto usage;
			break;
		case 'n':
			if (parse_long(optarg, 1, 1000000000L, &rounds) < 0)
				goto usage;
			break;
		case 't':
			budget = strtod(optarg, &end);
			if (end == optarg || *end || !(budget > 0))
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc || (rounds > 0) == (budget > 0))
		goto usage;

	for (long i = 0; i < workers; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			_exit(worker((int)i, (int)depth, budget, (unsigned long)rounds));
	}
	failed = wait_children(workers);
	return failed < 0 ? 1 : failed;
usage:
	fprintf(stderr, "usage: %s [-d DEPTH] [-w WORKERS] (-t CPU_SECONDS | -n ROUNDS)\n", argv[0]);
	return 2;
}
