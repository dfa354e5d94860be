/*
 * unique_stacks.c - makes a new stack at nearly every sample, without end.
 *
 * Proves: the profile store stays under its memory cap whatever a workload
 * does, letting its oldest data go first.  Each thread descends DEPTH
 * levels, choosing at each level one of eight distinct functions from the
 * bits of a random number, and burns a little at the bottom: 8^DEPTH
 * stacks, so two samples almost never share one.
 *
 * usage: unique_stacks THREADS CPU_SECONDS_PER_THREAD
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "workload.h"

#define DEPTH 100

static double per_thread;

static __attribute__((noipa)) void descend(uint64_t seed, int level);

#define STEP(n)                                                                \
	static __attribute__((noipa)) void step##n(uint64_t seed, int level)   \
	{                                                                      \
		descend(seed * 6364136223846793005ULL + n, level + 1);         \
		workload_sink += n;                                            \
	}
STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)

static void (*const steps[8])(uint64_t, int) = { step0, step1, step2, step3,
						  step4, step5, step6, step7 };

static __attribute__((noipa)) void bottom(uint64_t seed)
{
	uint64_t x = seed | 1;

	for (int i = 0; i < 20000; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	workload_sink = x;
}

static __attribute__((noipa)) void descend(uint64_t seed, int level)
{
	if (level >= DEPTH) {
		bottom(seed);
		return;
	}
	steps[(seed >> 59) & 7](seed, level);
}

static double thread_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
	uint64_t seed = (uintptr_t)arg * 0x9e3779b97f4a7c15ULL + (uint64_t)time(NULL);

	while (thread_cpu_seconds() < per_thread) {
		seed = seed * 2862933555777941757ULL + 3037000493ULL;
		descend(seed, 0);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[64];
	long n;

	if (argc != 3 || (n = strtol(argv[1], NULL, 10)) < 1 || n > 64 ||
	    parse_seconds(argv[2], &per_thread) < 0) {
		fprintf(stderr, "usage: %s THREADS CPU_SECONDS_PER_THREAD\n", argv[0]);
		return 2;
	}
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, run, (void *)(uintptr_t)i) != 0) {
			perror("pthread_create");
			return 1;
		}
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("%.3f\n", cpu_seconds());
	return 0;
}
