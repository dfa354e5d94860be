/* SPDX-License-Identifier: MIT */
/*
 * clock.h - the daemon's one clock: CLOCK_MONOTONIC, the clock of
 * bpf_ktime_get_ns(), so sample timestamps and the daemon's own times
 * compare directly.
 */
#ifndef PERFD_CLOCK_H
#define PERFD_CLOCK_H

#include <stdint.h>
#include <time.h>

#define NSEC_PER_SEC 1000000000ULL
#define NSEC_PER_USEC 1000ULL

static inline uint64_t now_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* The CPU time the calling thread has used: what a budget for work on a
 * thread that shares the machine is counted in (wall time also counts
 * the time slices others took). */
static inline uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC ns as seconds since the epoch (as the realtime clock
 * says now), and back. */
static inline double monotonic_to_unix(uint64_t mono_ns)
{
	struct timespec rt, mt;

	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	return (double)rt.tv_sec + rt.tv_nsec / 1e9 - (mt.tv_sec + mt.tv_nsec / 1e9) +
	       (double)mono_ns / NSEC_PER_SEC;
}

static inline uint64_t unix_to_monotonic(double unix_s)
{
	double mono = unix_s - monotonic_to_unix(0);

	return mono <= 0 ? 0 : (uint64_t)(mono * NSEC_PER_SEC);
}

#endif
