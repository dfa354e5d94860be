/* SPDX-License-Identifier: MIT */
/*
 * rss.h - a process's resident set over time, and whether it grows.
 *
 * The timeline is read from the process's history windows (history.h: the
 * last and the highest RSS reading of each window), so it has the store's
 * resolution: a point a second for the last two minutes, then one per 10 s
 * and per minute.  Readings come from every CPU sample and, for processes
 * that do not run, from the BPF side's RSS updates (at most one a second
 * while the counters change).
 *
 * "Growing" is a steady rise, not a spike: the least-squares slope of the
 * points is at least RSS_GROWING_MIN_RATE, the line explains most of the
 * variation (r^2 >= RSS_GROWING_MIN_R2), and the rise over the window is at
 * least RSS_GROWING_MIN_BYTES, so that a process that allocated once and
 * stays flat, or one that breathes up and down, is not a leak suspect.
 */
#ifndef PERFD_RSS_H
#define PERFD_RSS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfd/sample.h"
#include "profile/aggregate.h"

#define RSS_GROWING_MIN_RATE (64.0 * 1024)      /* bytes per second */
#define RSS_GROWING_MIN_R2 0.7
#define RSS_GROWING_MIN_BYTES (2u << 20)
#define RSS_GROWING_MIN_POINTS 4

struct rss_point {
	uint64_t start_ns, end_ns;              /* of the window */
	uint64_t bytes[PERFD_RSS_COUNTERS];     /* the last reading in it */
	uint64_t total_bytes;                   /* ... file + anon + shmem */
	uint64_t max_bytes;                     /* the highest reading in it */
};

/* The points of p's windows that overlap [from_ns, to_ns), hold a
 * reading and were taken under an owner owners takes (NULL: all; as a
 * profile query, history.h), oldest first: at most cap into out.  Returns
 * the count. */
size_t rss_timeline(const struct process *p, uint64_t from_ns, uint64_t to_ns,
		    const struct owner_filter *owners, struct rss_point *out, size_t cap);

struct rss_trend {
	size_t points;
	double bytes_per_second; /* the least-squares slope; 0 with < 2 points */
	double r2;
	int64_t rise_bytes;      /* last reading - first */
	bool growing;
};

void rss_trend(const struct rss_point *points, size_t n, struct rss_trend *ret);

/* Whether p's RSS changed between two readings in [from_ns, to_ns), of
 * the windows owners takes (NULL: all). */
bool rss_changed(const struct process *p, uint64_t from_ns, uint64_t to_ns,
		 const struct owner_filter *owners);

#endif
