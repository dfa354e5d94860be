/*
 * threads.c - proves that every thread's stack is unwound to the thread
 * entry (libc's start_thread and clone3), without frame pointers.
 *
 * Built with -O2 -fomit-frame-pointer.  Two threads burn CPU in
 * thread_alpha and thread_beta for the given CPU seconds each (measured
 * per thread); the main thread only waits.
 *
 * usage: threads CPU_SECONDS_PER_THREAD
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "workload.h"

static double per_thread_seconds;

static double thread_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t spin(uint64_t x)
{
	volatile uint64_t scratch[4];

	for (int i = 0; i < 100000; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		scratch[i & 3] = x;
	}
	return x ^ scratch[2];
}

__attribute__((noinline)) static void *thread_alpha(void *arg)
{
	double until = thread_cpu_seconds() + per_thread_seconds;
	uint64_t x = 1;

	while (thread_cpu_seconds() < until)
		x = spin(x);
	workload_sink = x;
	return arg;
}

__attribute__((noinline)) static void *thread_beta(void *arg)
{
	double until = thread_cpu_seconds() + per_thread_seconds;
	uint64_t x = 2;

	while (thread_cpu_seconds() < until)
		x = spin(x) + 1;
	workload_sink = x;
	return arg;
}

int main(int argc, char **argv)
{
	pthread_t a, b;

	if (argc != 2 || parse_seconds(argv[1], &per_thread_seconds) < 0) {
		fprintf(stderr, "usage: %s CPU_SECONDS_PER_THREAD\n", argv[0]);
		return 2;
	}
	if (pthread_create(&a, NULL, thread_alpha, NULL) ||
	    pthread_create(&b, NULL, thread_beta, NULL)) {
		fprintf(stderr, "pthread_create failed\n");
		return 1;
	}
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return 0;
}
