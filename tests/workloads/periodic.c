/*
 * periodic.c - rounds on the clock: a workload that a fixed-period sampler
 * sees at one phase.
 *
 *   periodic SECONDS THREADS PERIOD_NS
 *
 * Each thread runs rounds that start at fixed instants of CLOCK_MONOTONIC,
 * t0 + n x PERIOD_NS (clock_nanosleep TIMER_ABSTIME to the next start; a
 * round that overran skips the starts it missed).  Within a round it burns
 * 67.5% of a period of its own CPU time (CLOCK_THREAD_CPUTIME_ID) in
 * round_first() and then 22.5% in round_second(), and sleeps the last 10%:
 * the two functions split the process's CPU 3:1 by construction, whatever
 * the load, and each sits at the same phase of every round.  All threads
 * share t0, so their rounds are in step.  With PERIOD_NS at (or near) a
 * sampler's period, a sampler that ticks at that period samples the same
 * phase of every round: one function, or nothing.  Prints "ready" when the
 * threads run and the process's CPU seconds at the end.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "workload.h"

struct round_spec {
	struct timespec t0;
	long long period_ns;
	long long rounds;
};

static long long thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0) {
		perror("clock_gettime");
		exit(1);
	}
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Burns until this thread's CPU clock reads `until` ns.  always_inline:
 * the samples belong to the named function that calls it. */
static inline __attribute__((always_inline)) void burn_thread_until(long long until)
{
	while (thread_cpu_ns() < until) {
		uint64_t x = workload_sink | 1;

		for (int i = 0; i < 2000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		workload_sink = x;
	}
}

__attribute__((noinline)) void round_first(long long until)
{
	burn_thread_until(until);
}

__attribute__((noinline)) void round_second(long long until)
{
	burn_thread_until(until);
}

static void *run_rounds(void *arg)
{
	const struct round_spec *spec = arg;
	long long t0 = spec->t0.tv_sec * 1000000000LL + spec->t0.tv_nsec;
	long long first = spec->period_ns * 675 / 1000, second = spec->period_ns * 225 / 1000;

	for (long long n = 0; n < spec->rounds;) {
		long long start = t0 + n * spec->period_ns, cpu;
		struct timespec at = { .tv_sec = start / 1000000000LL, .tv_nsec = start % 1000000000LL };

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) != 0)
			;
		cpu = thread_cpu_ns();
		round_first(cpu + first);
		round_second(cpu + first + second);
		/* the next start still ahead: a round late by more than its idle
		 * tenth skips the starts it missed, keeping the phase */
		n = (monotonic_ns() - t0) / spec->period_ns + 1;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct round_spec spec;
	pthread_t threads[64];
	double seconds;
	long threads_n;
	long period;

	if (argc != 4 || parse_seconds(argv[1], &seconds) < 0 ||
	    parse_long(argv[2], 1, 64, &threads_n) < 0 ||
	    parse_long(argv[3], 100000, 1000000000, &period) < 0) {
		fprintf(stderr, "usage: periodic SECONDS THREADS(1-64) PERIOD_NS(1e5-1e9)\n");
		return 2;
	}
	spec.period_ns = period;
	spec.rounds = (long long)(seconds * 1e9 / period);
	clock_gettime(CLOCK_MONOTONIC, &spec.t0);
	for (long i = 0; i < threads_n; i++) {
		int r = pthread_create(&threads[i], NULL, run_rounds, &spec);

		if (r) {
			fprintf(stderr, "pthread_create: %s\n", strerror(r));
			return 1;
		}
	}
	printf("ready\n");
	fflush(stdout);
	for (long i = 0; i < threads_n; i++)
		pthread_join(threads[i], NULL);
	return print_cpu_used() < 0 ? 1 : 0;
}
