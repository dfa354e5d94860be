/* SPDX-License-Identifier: MIT */
/*
 * rates.h - how fast the daemon's own counters move: its CPU time, the CPU
 * samples it profiled and the samples it lost, read once a second into a
 * ring, so that an answer ("top") can give them per second over its
 * interval, where "status" can only give totals since the start.
 *
 * The ring holds RATES_SECONDS readings (more than the longest interval a
 * request may ask for), 32 bytes each; a reading is a handful of counter
 * reads, taken on the maintenance timer, never on the sampling path.  Pure:
 * the caller reads the counters (daemon.c) and says when.
 */
#ifndef PERFD_RATES_H
#define PERFD_RATES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RATES_SECONDS 64

struct rates_reading {
	uint64_t ns;      /* CLOCK_MONOTONIC, when it was read */
	uint64_t cpu_ns;  /* the daemon's CPU time, all its threads */
	uint64_t samples; /* CPU samples profiled (idle ones excluded) */
	uint64_t lost;    /* samples lost, every cause */
};

struct rates {
	struct rates_reading ring[RATES_SECONDS];
	size_t n, next; /* readings held; where the next one goes */
};

/* Keeps reading, dropping the oldest when the ring is full. */
void rates_note(struct rates *r, const struct rates_reading *reading);

/* The change from the newest reading taken at least seconds before
 * now->ns (the oldest one held when none is that old) to now: every field
 * of *ret is now's minus that reading's (ns: the time between).  Returns
 * false, *ret untouched, when no reading older than now is held. */
bool rates_over(const struct rates *r, const struct rates_reading *now, double seconds,
		struct rates_reading *ret);

#endif
