/* SPDX-License-Identifier: MIT */
/*
 * offloadbench.c - how long the event loop's side of base/offload.c
 * (offload_submit, offload_bump) takes while its lanes are starved.
 *
 * Starts HOGS threads spinning at nice 0 (more than the CPUs of a 2-CPU
 * host) and a pool like the unwind builder's (two lanes at nice 10, one of
 * them small), then, as the loop does, submits a short job every 200 us
 * and bumps one of the recent ones every tenth time, for SECONDS.  A lane
 * preempted while it holds a lock the loop needs shows here as a call
 * that slept (a voluntary context switch of the calling thread during it;
 * the hogs also preempt the caller, which is not the lanes' doing and is
 * counted apart).  Prints one JSON object: calls, their total, longest and
 * how many took over 1 ms; the calls that slept, their total and longest;
 * and the jobs run.
 *
 * usage: offloadbench SECONDS HOGS
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/offload.h"

static atomic_bool stop_hogs;
static atomic_ulong ran;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long voluntary_switches(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nvcsw;
}

static void *hog(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop_hogs, memory_order_relaxed))
		;
	return NULL;
}

static void job_run(struct offload_job *j)
{
	uint64_t until = now_ns() + 50000;

	(void)j;
	while (now_ns() < until)
		;
	atomic_fetch_add(&ran, 1);
}

static void job_free(struct offload_job *j)
{
	free(j);
}

int main(int argc, char **argv)
{
	unsigned seconds = argc > 1 ? (unsigned)atoi(argv[1]) : 10;
	unsigned hogs = argc > 2 ? (unsigned)atoi(argv[2]) : 3;
	uint64_t calls = 0, total = 0, longest = 0, over_1ms = 0, end, key = 0;
	uint64_t slept = 0, slept_total = 0, slept_longest = 0;
	pthread_t threads[64];
	struct offload *o = NULL;
	int r;

	if (hogs > 64)
		hogs = 64;
	r = offload_new(&(struct offload_opts){ .lanes = 2, .small_lanes = 1,
						.background = true },
			&o);
	if (r < 0) {
		fprintf(stderr, "offload_new: %d\n", r);
		return 1;
	}
	for (unsigned i = 0; i < hogs; i++)
		pthread_create(&threads[i], NULL, hog, NULL);
	end = now_ns() + (uint64_t)seconds * 1000000000u;
	while (now_ns() < end) {
		struct offload_job *j = calloc(1, sizeof(*j));
		uint64_t t0, took;
		long sw;

		if (!j)
			return 1;
		j->run = job_run;
		j->free = job_free;
		j->key = ++key;
		j->big = key % 4 == 0;
		sw = voluntary_switches();
		t0 = now_ns();
		if (offload_submit(o, j) < 0)
			free(j);
		if (key % 10 == 0)
			offload_bump(o, key - 5);
		took = now_ns() - t0;
		calls++;
		total += took;
		longest = took > longest ? took : longest;
		over_1ms += took > 1000000;
		if (voluntary_switches() != sw) {
			slept++;
			slept_total += took;
			slept_longest = took > slept_longest ? took : slept_longest;
		}
		usleep(200);
	}
	atomic_store(&stop_hogs, true);
	for (unsigned i = 0; i < hogs; i++)
		pthread_join(threads[i], NULL);
	(void)offload_wait_idle(o, 60000);
	printf("{\"calls\": %" PRIu64 ", \"total_ms\": %.1f, \"longest_ms\": %.3f, "
	       "\"over_1ms\": %" PRIu64 ", \"slept\": %" PRIu64 ", \"slept_total_ms\": %.1f, "
	       "\"slept_longest_ms\": %.3f, \"jobs_run\": %lu}\n",
	       calls, total / 1e6, longest / 1e6, over_1ms, slept, slept_total / 1e6,
	       slept_longest / 1e6, (unsigned long)atomic_load(&ran));
	offload_free(o);
	return 0;
}
