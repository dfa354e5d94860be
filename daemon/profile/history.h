/* SPDX-License-Identifier: MIT */
/*
 * history.h - one process's retained profile: time windows, finer when
 * recent, coarser when old.
 *
 * Samples land in the window of their second (CLOCK_MONOTONIC).  Windows
 * are rolled up as they age, so an hour costs a few hundred windows per
 * process, not 3,600:
 *
 *   younger than HISTORY_FINE_AGE_S (2 min)    1 s windows
 *   younger than HISTORY_MEDIUM_AGE_S (30 min) 10 s windows
 *   older                                      60 s windows
 *
 * A roll-up merges the windows that fall in one aligned coarser window
 * (their entries merge: a stack seen every second of a minute costs one
 * entry for that minute).  Windows past the retention are dropped; the
 * store (aggregate.c) evicts the oldest windows of all processes first
 * when it needs memory.  A query merges the windows that lie at least half
 * inside the asked range, so a range is answered to the window: to the
 * second for the last two minutes, to the minute after half an hour.
 *
 * Each window also keeps the RSS readings that fell in it (the last and the
 * highest): the process's RSS timeline, at the same resolution as its
 * profile, rolled up with it (the newer last, the higher peak).
 *
 * Samples from the BPF ring buffer come nearly in time order; one older
 * than the newest window goes to the window that holds its second, or to
 * the newest one when that second has no window (the gap of an idle
 * process), so none is lost.
 */
#ifndef PERFD_HISTORY_H
#define PERFD_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "perfd/sample.h"
#include "profile/profile.h"

#define HISTORY_FINE_AGE_S 120
#define HISTORY_MEDIUM_AGE_S 1800

/* The resident set over a window: the last reading in it and the highest,
 * in pages of page_size (page_size 0: no reading in this window). */
struct window_rss {
	uint64_t last_pages[PERFD_RSS_COUNTERS];
	uint64_t max_pages; /* of file + anon + shmem */
	uint32_t page_size;
};

struct window {
	uint64_t start_s; /* CLOCK_MONOTONIC seconds */
	uint32_t span_s;  /* 1, 10 or 60 */
	struct profile prof;
	struct window_rss rss;
	struct window *newer, *older;
};

struct history {
	struct window *newest, *oldest;
	size_t n_windows;
	size_t bytes; /* of the windows and their maps */
	uint64_t rolled_s; /* when history_maintain last rolled windows up */
};

/* What maintenance or eviction dropped, for the store's counters. */
struct history_dropped {
	uint64_t windows;
	uint64_t values[PROFILE_KINDS];
};

void history_init(struct history *h);
void history_release(struct history *h, struct stacktab *stacks);

/* Adds value under key at time ts_ns.  Returns 0 or -ENOMEM. */
int history_add(struct history *h, struct stacktab *stacks, uint64_t ts_ns, uint64_t key,
		uint64_t value);

/* Notes an RSS reading at ts_ns in the window of its second (the RSS
 * timeline).  Returns 0 or -ENOMEM. */
int history_note_rss(struct history *h, struct stacktab *stacks, uint64_t ts_ns,
		     const __u64 pages[PERFD_RSS_COUNTERS], uint32_t page_size);

/* Rolls windows up by age and drops those that ended more than
 * retention_s before now_s. */
void history_maintain(struct history *h, struct stacktab *stacks, uint64_t now_s,
		      uint64_t retention_s, struct history_dropped *dropped);

/* Drops the oldest window.  Returns false when there is none. */
bool history_drop_oldest(struct history *h, struct stacktab *stacks,
			 struct history_dropped *dropped);

/* Start of the oldest window in seconds, UINT64_MAX when empty. */
uint64_t history_oldest_s(const struct history *h);

/* Merges into out the windows at least half inside [from_ns, to_ns), and
 * widens [*first_ns, *end_ns) to cover them (the caller starts them at
 * UINT64_MAX and 0).  Returns 0, or -ENOMEM. */
int history_query(const struct history *h, struct stacktab *stacks, uint64_t from_ns,
		  uint64_t to_ns, struct profile *out, uint64_t *first_ns, uint64_t *end_ns);

#endif
