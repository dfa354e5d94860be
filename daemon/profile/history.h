/* SPDX-License-Identifier: MIT */
/*
 * history.h - one process's retained profile: time windows, finer when
 * recent, coarser when old, packed once they close.
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
 * store (proctab.c) evicts the oldest windows of all processes first
 * when it needs memory.  A query merges the windows that lie at least half
 * inside the asked range (of the window in progress: half of what has
 * passed of it), so a range is answered to the window: to the second for
 * the last two minutes, to the minute after half an hour.
 *
 * Each window also keeps the RSS readings that fell in it (the last and the
 * highest): the process's RSS timeline, at the same resolution as its
 * profile, rolled up with it (the newer last, the higher peak).
 *
 * Two forms.  The newest windows are *open*: a struct window holding a
 * struct profile_values (a hash map), so a sample costs one lookup.  Once a window
 * ended HISTORY_SEAL_AFTER_S ago, history_maintain *seals* it: appends it
 * to the log, one byte buffer per process of packed windows, oldest first:
 *
 *   record  := varint body_len, body
 *   body    := varint gap_s      (start - the previous record's end; 0 first)
 *              varint span_s
 *              varint n << 1 | has_rss
 *              [varint page_size, last_pages[PERFD_RSS_COUNTERS], max_pages]
 *              n x (varint key - previous key, varint value), keys ascending
 *
 * An open window costs ~150 bytes and 32 an entry; a sealed one a few bytes
 * and ~5 an entry (stack ids within one process are near each other), which
 * is what lets 500 processes keep an hour in a few MiB.  What happens to
 * old windows happens on the log, in passes over sorted data: a roll-up
 * merge-joins neighbouring records' entries (no hashing), retention and
 * eviction drop head records, a query decodes the records in its range.
 * The log's buffer is kept within an eighth of its live bytes (plus 64),
 * so `bytes` is what the process's history really holds.
 *
 * Samples from the BPF ring buffer come nearly in time order; one older
 * than the newest window goes to the open window that holds its second,
 * or to the newest one when that second has no window (the gap of an idle
 * process, or a second already sealed: later than HISTORY_SEAL_AFTER_S,
 * which takes a loop stalled that long), so none is lost.
 *
 * Every entry, open or sealed, holds one reference on its stack.
 *
 * Each window, open or sealed, keeps the owner its values were taken under
 * (struct perfd_sample's owner_uid: who could ptrace the process then;
 * varint owner + 1 after span_s in a record, so PERFD_OWNER_NONE costs a
 * byte).  A window that got values of two owners (the second in which a
 * process changed uid, or a roll-up over it) is PERFD_OWNER_NONE's: root
 * only.  A query takes only the windows its owner_filter takes, so a user
 * sees a process's past only for the time it could have traced it.
 */
#ifndef PERFD_HISTORY_H
#define PERFD_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfd/sample.h"
#include "profile/profile.h"

#define HISTORY_FINE_AGE_S 120
#define HISTORY_MEDIUM_AGE_S 1800
#define HISTORY_SEAL_AFTER_S 2

/* The resident set over a window: the last reading in it and the highest,
 * in pages of page_size (page_size 0: no reading in this window). */
struct window_rss {
	uint64_t last_pages[PERFD_RSS_COUNTERS];
	uint64_t max_pages; /* of file + anon + shmem */
	uint32_t page_size;
};


/* The owner of a window that holds values of owners a and b. */
static inline uint32_t history_owner_meet(uint32_t a, uint32_t b)
{
	return a == b ? a : PERFD_OWNER_NONE;
}

/* Which owners' windows a query takes: those takes() accepts; all when the
 * filter or takes is NULL. */
struct owner_filter {
	bool (*takes)(void *userdata, uint32_t owner);
	void *userdata;
};

static inline bool owner_filter_takes(const struct owner_filter *f, uint32_t owner)
{
	return !f || !f->takes || f->takes(f->userdata, owner);
}

/* An open window. */
struct window {
	uint64_t start_s; /* CLOCK_MONOTONIC seconds */
	uint32_t span_s;  /* 1 (only sealed windows are rolled up) */
	uint32_t owner;   /* what its values were taken under (see above) */
	struct profile_values prof;
	struct window_rss rss;
	struct window *newer, *older;
};

/* The sealed windows, packed (the layout above). */
struct history_log {
	uint8_t *buf;
	size_t head;           /* offset of the oldest record */
	size_t len, cap;       /* bytes used (from 0, head included) and allocated */
	size_t n;              /* records */
	uint64_t head_start_s; /* start of the record at head */
	uint64_t end_s;        /* end of the newest record; 0 when empty */
};

struct history {
	struct window *newest, *oldest_open; /* the open windows, all newer than the log */
	struct history_log log;
	size_t n_windows;  /* open and sealed */
	size_t bytes;      /* of the open windows, their maps and the log */
	uint64_t rolled_s; /* when history_maintain last rolled windows up */
	/* No roll-up can change a record before this second (a lower bound,
	 * exact after a pass): what lets maintenance skip a history that has
	 * nothing due without parsing its log. */
	uint64_t roll_due_s;
};

/* One window as the iterator shows it, open or sealed. */
struct history_window {
	uint64_t start_s;
	uint32_t span_s;
	uint32_t owner;
	bool sealed;
	struct window_rss rss;
	/* private: where the entries are */
	const struct window *open;
	const uint8_t *entries;
	uint64_t n_entries;
};

struct history_iter {
	const struct history *h;
	const uint8_t *p;         /* the next record in the log */
	uint64_t prev_end_s;      /* end of the record before it */
	const struct window *open; /* the next open window, after the log */
	bool first;
};

/* What maintenance or eviction dropped, for the store's counters. */
struct history_dropped {
	uint64_t windows;
	uint64_t values[PROFILE_KINDS];
};

void history_init(struct history *h);
void history_release(struct history *h, struct stacktab *stacks);

/* Adds value under key at time ts_ns, taken while the process's owner was
 * owner.  Returns 0 or -ENOMEM. */
int history_add(struct history *h, struct stacktab *stacks, uint64_t ts_ns, uint32_t owner,
		uint64_t key, uint64_t value);

/* Notes an RSS reading at ts_ns in the window of its second (the RSS
 * timeline).  Returns 0 or -ENOMEM. */
int history_note_rss(struct history *h, uint64_t ts_ns, uint32_t owner,
		     const __u64 pages[PERFD_RSS_COUNTERS], uint32_t page_size);

/* Rolls windows up by age and drops those that ended more than
 * retention_s before now_s. */
void history_maintain(struct history *h, struct stacktab *stacks, uint64_t now_s,
		      uint64_t retention_s, struct history_dropped *dropped);

/* The first second at which history_maintain can change h (a window to
 * seal, roll up or drop past the retention), UINT64_MAX when none can;
 * never later than that, so a caller may skip h until then.  O(1): the
 * roll-ups' time is kept, and the head record's header is read.  Valid
 * until h changes: a new window can fall due sooner. */
uint64_t history_due_s(const struct history *h, uint64_t retention_s);

/* A sealed window read back from the state directory (state/persist.h):
 * n entries, keys on stacks of the caller's table. */
struct history_restored {
	uint64_t start_s;
	uint32_t span_s;
	uint32_t owner;
	struct window_rss rss;
	const uint64_t *keys, *values;
	size_t n;
};

/* Appends w as the newest sealed window, taking a reference on each
 * entry's stack (entries of value 0 are left out).  Only before any open
 * window, and after the newest sealed one.  Returns 0, -EINVAL (out of
 * order, or a key twice) or -ENOMEM. */
int history_restore(struct history *h, struct stacktab *stacks, const struct history_restored *w);

/* Drops the oldest window.  Returns false when there is none. */
bool history_drop_oldest(struct history *h, struct stacktab *stacks,
			 struct history_dropped *dropped);

/* Every value of a kind counted in sampling periods (kindtab.h's
 * kind_in_periods) x num / den, at random rounding (profile_scale_value):
 * the CPU samples of a new sampling period.  Entries that come to 0 go.
 * Returns 0, or -ENOMEM with nothing changed. */
int history_scale_periods(struct history *h, struct stacktab *stacks, uint64_t num, uint64_t den,
			  uint64_t *rng);
/* Start of the oldest window in seconds, UINT64_MAX when empty. */
uint64_t history_oldest_s(const struct history *h);
bool history_empty(const struct history *h);

/* Walks every window, oldest first.  The history must not change during
 * the walk. */
void history_iter_init(struct history_iter *it, const struct history *h);
bool history_iter_next(struct history_iter *it, struct history_window *ret);

/* Adds the window's entries into out.  Returns 0, or -ENOMEM (out holds
 * part of them, as profile_merge leaves it). */
int history_window_merge(const struct history_window *w, struct stacktab *stacks,
			 struct profile_values *out);
/* Calls fn on each entry of w, in no particular order, until it returns
 * < 0 (returned). */
int history_window_foreach(const struct history_window *w,
			   int (*fn)(void *userdata, uint64_t key, uint64_t value), void *userdata);
/* The window's total of one kind, its entries and the value under key. */
uint64_t history_window_total(const struct history_window *w, enum profile_kind kind);
/* The window's total over the kinds whose samples count (kindtab.h's
 * kind_counts_samples), in one pass over its entries. */
uint64_t history_window_samples(const struct history_window *w);
uint64_t history_window_entries(const struct history_window *w);
uint64_t history_window_value(const struct history_window *w, uint64_t key);

/* Merges into out the windows at least half inside [from_ns, to_ns) whose
 * owner owners takes (NULL: all), and widens [*first_ns, *end_ns) to cover
 * them (the caller starts them at UINT64_MAX and 0).  A window still in
 * progress at now_ns counts only the part of it that has passed (and the
 * span ends at now_ns): "the last 2 s" asked 0.3 s into a second takes
 * that second's window, which holds the newest samples, where its whole
 * length would leave it out.  Returns 0, or -ENOMEM. */
int history_query(const struct history *h, struct stacktab *stacks, uint64_t now_ns,
		  uint64_t from_ns, uint64_t to_ns, const struct owner_filter *owners, struct profile_values *out,
		  uint64_t *first_ns, uint64_t *end_ns);

#endif
