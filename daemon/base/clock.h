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

static inline uint64_t now_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

#endif
