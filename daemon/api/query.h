/* SPDX-License-Identifier: MIT */
/*
 * query.h - the answers to "status" and "ps", built as JSON objects from
 * the daemon's state (see include/perfd/protocol.h for their fields).
 * Separate from the loop so they can be built from synthetic state in tests.
 */
#ifndef PERFD_QUERY_H
#define PERFD_QUERY_H

#include <json-c/json.h>
#include <stdint.h>

#include "collect/drain.h"
#include "export/exporter.h"
#include "profile/aggregate.h"
#include "perfd/sample.h"
#include "interp/python/python.h"
#include "symbols/symbolize.h"
#include "unwind/unwinder.h"

struct status_info {
	double uptime_seconds;
	unsigned frequency_hz;
	unsigned cpus;
	uint64_t period_ns;       /* the mean period a sample stands for */
	uint64_t timer_period_ns; /* of the timer whose ticks sample */
	bool fixed_period;
	uint64_t ringbuf_bytes;
	uint64_t memory_sample_bytes; /* 0: memory growth not sampled */
	uint64_t bpf[PERFD_CNT_MAX];
	struct aggregator_stats agg;
	struct symbolizer_stats sym;
	bool unwind_tables;
	struct unwinder_stats unwind;
	struct python_stats python;
	struct drain_stats drain;
	struct aggregator_limits limits;
	uint64_t daemon_rss_bytes;
	size_t clients, snapshots;
	json_object *config; /* the effective configuration, borrowed; NULL: none */
	struct exporter_stats exporter;
};

/* New reference; NULL when out of memory. */
json_object *query_status(const struct status_info *info);

struct perfd_peer;

/* The processes peer may see (api/auth.h) with samples in the last
 * interval_seconds whole seconds before now_ns, or whose RSS changed then
 * (all: every live one too), most samples first, each with its RSS trend
 * over the interval (profile/rss.h); never before start_ns, when the
 * daemon started (CLOCK_MONOTONIC ns). */
json_object *query_ps(struct aggregator *a, const struct perfd_peer *peer, uint64_t now_ns,
		      unsigned interval_seconds, bool all, uint64_t start_ns, unsigned frequency_hz);

/* The whole seconds [first_second, end_second) of CLOCK_MONOTONIC an
 * answer about the last interval counts, and how long they are: the last
 * interval whole seconds before now_ns, never before start_ns (the
 * daemon's start), or the partial second since then in its first one. */
struct query_window {
	uint64_t first_second, end_second;
	double seconds; /* covered, > 0 */
};
void query_window_last(uint64_t now_ns, unsigned interval, uint64_t start_ns,
		       struct query_window *ret);
/* Whether p belongs in an answer about window w, as ps lists processes:
 * it was on CPU then (*ret_samples of its samples fell in it), or its RSS
 * moved then, or all and it lives. */
bool query_process_active(const struct process *p, const struct query_window *w, bool all,
			  uint64_t *ret_samples);

/* p's RSS trend over window w (profile/rss.h), of at most
 * QUERY_MAX_TREND_SECONDS seconds (of a longer one, the oldest points). */
#define QUERY_MAX_TREND_SECONDS 64
struct rss_trend;
void query_rss_trend(const struct process *p, const struct query_window *w,
		     struct rss_trend *ret);

/* {"version":1,"ok":true} to which the caller adds fields. */
json_object *query_ok(void);
json_object *query_error(const char *code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
