/*
 * thread_storm.c - one process with many threads: THREADS threads, each
 * burning BURN_MS of its own CPU time in storm_burn, then waiting in
 * storm_rest; HOLD seconds after the last one has burnt, all exit.
 *
 * Proves: a process of 10,000 threads costs perfd a bounded amount (its
 * per-thread names are capped, its samples go to one process), and
 * leaves nothing behind when it exits.  Thread stacks are 64 KiB, so
 * 10,000 of them take 640 MiB of address space, little of it resident.
 *
 * usage: thread_storm THREADS BURN_MS HOLD_SECONDS
 * prints "started N" once every thread runs, "burnt N" once every one has
 * burnt (all N alive), then "done N" when they have all exited.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "workload.h"

static double burn_seconds, hold_seconds;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_burnt = PTHREAD_COND_INITIALIZER; /* main waits on it */
static pthread_cond_t release = PTHREAD_COND_INITIALIZER;   /* the threads do */
static long burnt;
static int released;

static double thread_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static __attribute__((noinline)) void storm_burn(void)
{
	double until = thread_cpu_seconds() + burn_seconds;
	uint64_t x = workload_sink | 1;

	while (thread_cpu_seconds() < until)
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	workload_sink = x;
}

static __attribute__((noinline)) void storm_rest(void)
{
	pthread_mutex_lock(&lock);
	burnt++;
	pthread_cond_signal(&all_burnt);
	while (!released)
		pthread_cond_wait(&release, &lock);
	pthread_mutex_unlock(&lock);
}

static void *run(void *arg)
{
	storm_burn();
	storm_rest();
	return arg;
}

int main(int argc, char **argv)
{
	long n, ms;
	pthread_attr_t attr;
	pthread_t *t;

	if (argc != 4 || parse_long(argv[1], 1, 100000, &n) < 0 ||
	    parse_long(argv[2], 0, 60000, &ms) < 0 || parse_seconds(argv[3], &hold_seconds) < 0) {
		fprintf(stderr, "usage: %s THREADS BURN_MS HOLD_SECONDS\n", argv[0]);
		return 2;
	}
	burn_seconds = ms / 1000.0;
	t = calloc(n, sizeof(*t));
	if (!t || pthread_attr_init(&attr) || pthread_attr_setstacksize(&attr, 64 << 10)) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (long i = 0; i < n; i++) {
		int r = pthread_create(&t[i], &attr, run, NULL);

		if (r) {
			fprintf(stderr, "pthread_create %ld of %ld: error %d\n", i + 1, n, r);
			return 1;
		}
	}
	printf("started %ld\n", n);
	fflush(stdout);
	pthread_mutex_lock(&lock);
	while (burnt < n)
		pthread_cond_wait(&all_burnt, &lock);
	pthread_mutex_unlock(&lock);
	printf("burnt %ld\n", n);
	fflush(stdout);
	if (pause_seconds(hold_seconds) < 0)
		return 1;
	pthread_mutex_lock(&lock);
	released = 1;
	pthread_cond_broadcast(&release);
	pthread_mutex_unlock(&lock);
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("done %ld\n", n);
	free(t);
	return 0;
}
