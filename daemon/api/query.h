/* SPDX-License-Identifier: MIT */
/*
 * query.h - the answers to "status" and "ps", built from the daemon's
 * state (see include/perfd/protocol.h for their fields), and what "top"
 * shares with ps: the window of the last seconds, and the list of the
 * processes active in it, collected, sorted and written one row each by
 * one piece of code, so the two commands cannot drift apart.
 * Separate from the loop so they can be built from synthetic state in tests.
 */
#ifndef PERFD_QUERY_H
#define PERFD_QUERY_H

#include <stdarg.h>
#include <stdint.h>

#include "base/loopturn.h"
#include "collect/drain.h"
#include "collect/tiers.h"
#include "api/httpd.h"
#include "api/command.h"
#include "api/encode_lane.h"
#include "export/exporter.h"
#include "profile/aggregate.h"
#include "perfd/sample.h"
#include "profile/rss.h"
#include "interp/python/python.h"
#include "base/heap.h"
#include "state/persist.h"
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
	uint64_t offcpu_rate;         /* 0: off-CPU time not recorded */
	uint64_t bpf[PERFD_CNT_MAX];
	struct aggregator_stats agg;
	struct symbolizer_stats sym;
	bool unwind_tables;
	struct unwinder_stats unwind;
	struct python_stats python;
	struct drain_stats drain;
	struct loop_stats loop;
	struct model_slices_stats models;
	struct encode_lane_stats answers; /* written off the loop (api/encode_lane.h) */
	struct aggregator_limits limits;
	uint64_t daemon_rss_bytes;
	struct heap_stats heap;   /* malloc's figures, of daemon_rss_bytes */
	uint64_t heap_age_ns;     /* how old they are (base/heap.h: taken off the loop) */
	size_t clients, snapshots;
	uint64_t accept_backoffs;
	uint64_t client_idle_timeout_s;
	bool root;           /* the asker: else no exporter paths, queries or errors */
	const char *config;  /* the effective configuration as JSON text, borrowed; NULL: none */
	const struct sampler_load_report *load; /* the BPF load; NULL: not told */
	struct exporter_stats exporter;
	bool metrics;             /* /metrics is served */
	struct http_server_stats metrics_http;
	bool state;               /* a state directory is in use */
	struct persist_stats persist;
};

struct perfd_peer;
struct jsonw;

/* The whole answer to "status", written into w (initialized here); 0 or
 * -ENOMEM.  The exporters' targets are shown whole to root only, to
 * others as scheme://host:port (a files target, a directory, not at
 * all), and their last errors to root only. */
int query_status(struct jsonw *w, const struct status_info *info);

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
 * moved then, or all and it lives; of what was taken under an owner
 * owners takes (NULL: all): a user is told only of the time it could
 * have traced p, as a profile query tells it (history.h). */
bool query_process_active(const struct process *p, const struct query_window *w, bool all,
			  const struct owner_filter *owners, uint64_t *ret_samples);

/* p's RSS trend over window w (profile/rss.h), of at most
 * QUERY_MAX_TREND_SECONDS seconds (of a longer one, the oldest points),
 * of the windows owners takes (NULL: all). */
#define QUERY_MAX_TREND_SECONDS 64
void query_rss_trend(const struct process *p, const struct query_window *w,
		     const struct owner_filter *owners, struct rss_trend *ret);

/* The orders of a process list, largest first; ties go to the most
 * samples, then the lowest pid.  ps's is QUERY_SORT_CPU. */
enum query_sort { QUERY_SORT_CPU, QUERY_SORT_RSS, QUERY_SORT_PEAK, QUERY_SORT_GROWTH, QUERY_SORTS };
extern const char *const query_sort_names[QUERY_SORTS]; /* "cpu", "rss", "peak", "growth" */

/* Which processes a list takes, and how it orders and writes them. */
struct query_list_opts {
	const struct perfd_peer *peer;       /* only those it may see */
	const struct query_window *window;   /* active in it (query_process_active) */
	const struct query_window *growth;   /* the RSS trends' window */
	bool all;                            /* every live one too */
	enum query_sort sort;
	unsigned frequency_hz;               /* of the samples: the CPU share's unit */
	const struct aggregator *aggregator; /* its off-CPU time's (NULL: not written) */
	/* more filters: false leaves p out; NULL takes every one */
	bool (*takes)(void *userdata, const struct process *p);
	void *userdata;
};

struct query_process_row {
	struct process *p;      /* borrowed from the aggregator */
	uint64_t samples;       /* in the window */
	uint64_t rss_bytes, peak_rss_bytes; /* when listed: what the sort saw,
					     * written however late (top's model) */
	double key;             /* what the sort says */
	struct rss_trend trend; /* over the growth window, when trend_known */
	bool trend_known;
};

/* The processes o takes, in o->sort's order, into *ret (freed by the
 * caller) and their number into *ret_n; 0 or -ENOMEM.  A process's RSS
 * trend is read here only when the sort needs it. */
int query_list_processes(struct aggregator *a, const struct query_list_opts *o,
			 struct query_process_row **ret, size_t *ret_n);

/* Writes into the open object w the fields ps and top share of row: pid,
 * ns_pid, start_time_ns, comm, cgroup and unit, runtime, exited, samples,
 * cpu_percent (of one CPU over o->window), rss_bytes, peak_rss_bytes,
 * rss_growth_bytes_per_second and growing (over o->growth: the trend is
 * read now when the list did not); with o->aggregator, wait_percent (its
 * off-CPU time over o->window, of one thread's time: threads waiting
 * together add up, as cpu_percent's do) and waits ({class: percent} of the
 * classes it waited for, the most first). */
void query_write_process_fields(struct jsonw *w, const struct query_list_opts *o,
				struct query_process_row *row);

/* The processes peer may see (api/auth.h) with samples in the last
 * interval_seconds whole seconds before now_ns, or whose RSS changed then
 * (all: every live one too), most samples first, each with its RSS trend
 * over the interval (profile/rss.h); never before start_ns, when the
 * daemon started (CLOCK_MONOTONIC ns).  Written into w after
 * query_ok_begin(); 0 or -ENOMEM. */
int query_ps(struct jsonw *w, struct aggregator *a, const struct perfd_peer *peer,
	     uint64_t now_ns, unsigned interval_seconds, bool all, uint64_t start_ns,
	     unsigned frequency_hz);

/* Every answer is written with base/jsonw.h, the one JSON writer of the
 * daemon.  query_ok_begin initializes w and opens the answer's object
 * with {"version":1,"ok":true}; the caller adds its own fields and closes
 * it.  query_error writes a whole error answer into w (initialized here):
 * {"version":1,"ok":false,"error":{"code":code,"message":...}}. */
void query_ok_begin(struct jsonw *w);
void query_error(struct jsonw *w, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void query_verror(struct jsonw *w, const char *code, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

#endif
