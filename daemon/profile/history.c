/* SPDX-License-Identifier: MIT */
/* history.c - see history.h for the design. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "perfd/macro.h"
#include "profile/history.h"

static size_t window_bytes(const struct window *w)
{
	return sizeof(*w) + profile_memory(&w->prof);
}

void history_init(struct history *h)
{
	*h = (struct history){ 0 };
}

/* Unlinks w, drops its stack references and frees it. */
static void drop(struct history *h, struct window *w, struct stacktab *stacks,
		 struct history_dropped *dropped)
{
	if (dropped) {
		dropped->windows++;
		for (int k = 0; k < PROFILE_KINDS; k++)
			dropped->values[k] += w->prof.totals[k];
	}
	if (w->newer)
		w->newer->older = w->older;
	else
		h->newest = w->older;
	if (w->older)
		w->older->newer = w->newer;
	else
		h->oldest = w->newer;
	h->n_windows--;
	h->bytes -= window_bytes(w);
	profile_release(&w->prof, stacks);
	free(w);
}

void history_release(struct history *h, struct stacktab *stacks)
{
	while (h->newest)
		drop(h, h->newest, stacks, NULL);
}

static struct window *push_newest(struct history *h, uint64_t second)
{
	struct window *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->start_s = second;
	w->span_s = 1;
	profile_init(&w->prof);
	w->older = h->newest;
	if (h->newest)
		h->newest->newer = w;
	else
		h->oldest = w;
	h->newest = w;
	h->n_windows++;
	h->bytes += window_bytes(w);
	return w;
}

/* The window a sample of this second goes to; a new newest one for a
 * second past the newest window. */
static struct window *window_for(struct history *h, uint64_t second)
{
	struct window *w = h->newest;

	if (!w || second >= w->start_s + w->span_s)
		return push_newest(h, second);
	for (; w; w = w->older)
		if (second >= w->start_s)
			return second < w->start_s + w->span_s ? w : h->newest;
	return h->newest; /* older than everything kept: keep it with the newest */
}

int history_add(struct history *h, struct stacktab *stacks, uint64_t ts_ns, uint64_t key,
		uint64_t value)
{
	struct window *w = window_for(h, ts_ns / NSEC_PER_SEC);
	size_t before;
	int r;

	if (!w)
		return -ENOMEM;
	before = profile_memory(&w->prof);
	r = profile_add(&w->prof, stacks, key, value);
	h->bytes += profile_memory(&w->prof) - before;
	return r;
}

/* history_maintain rolls up only when a span can change: at multiples of
 * the spans, which the ages must therefore be. */
_Static_assert(HISTORY_FINE_AGE_S % 10 == 0 && HISTORY_MEDIUM_AGE_S % 60 == 0,
	       "a tier's age is a multiple of its span");

/* The span a window starting at start_s takes now: the coarsest whose
 * whole aligned span is past its tier's age, so a rolled-up window never
 * overlaps a finer, younger one. */
static void note(struct window_rss *r, const __u64 pages[PERFD_RSS_COUNTERS], uint32_t page_size)
{
	uint64_t total = pages[PERFD_RSS_FILE] + pages[PERFD_RSS_ANON] + pages[PERFD_RSS_SHMEM];

	memcpy(r->last_pages, pages, sizeof(r->last_pages));
	r->max_pages = r->page_size ? MAX(r->max_pages, total) : total;
	r->page_size = page_size;
}

int history_note_rss(struct history *h, struct stacktab *stacks, uint64_t ts_ns,
		     const __u64 pages[PERFD_RSS_COUNTERS], uint32_t page_size)
{
	struct window *w = window_for(h, ts_ns / NSEC_PER_SEC);

	if (!w)
		return -ENOMEM;
	note(&w->rss, pages, page_size);
	return 0;
}

/* Merges the RSS of older window w into newer window n. */
static void merge_rss(struct window_rss *n, const struct window_rss *w)
{
	if (!w->page_size)
		return;
	if (!n->page_size) {
		*n = *w;
		return;
	}
	n->max_pages = MAX(n->max_pages, w->max_pages);
}

static uint32_t span_for(uint64_t start_s, uint64_t now_s)
{
	static const struct {
		uint32_t span_s, age_s;
	} tiers[] = { { 60, HISTORY_MEDIUM_AGE_S }, { 10, HISTORY_FINE_AGE_S } };

	for (size_t i = 0; i < ELEMENTSOF(tiers); i++) {
		uint64_t aligned = start_s - start_s % tiers[i].span_s;

		if (aligned + tiers[i].span_s + tiers[i].age_s <= now_s)
			return tiers[i].span_s;
	}
	return 1;
}

void history_maintain(struct history *h, struct stacktab *stacks, uint64_t now_s,
		      uint64_t retention_s, struct history_dropped *dropped)
{
	struct window *w, *older;
	bool every;

	/* Past the retention: oldest first, until one is young enough. */
	while (h->oldest && h->oldest->start_s + h->oldest->span_s + retention_s <= now_s)
		drop(h, h->oldest, stacks, dropped);

	/* A span changes only when now_s reaches a multiple of 10 (1 s -> 10 s:
	 * span_for's bound, aligned + 10 + HISTORY_FINE_AGE_S, is one) or of 60
	 * (10 s -> 60 s): in between nothing is due, and at a 10 s mark that
	 * is no 60 s mark only the 1 s windows, the newest ones, can change.
	 * So the walk over every window, a cache miss each (with 500
	 * processes, ~90k windows and 9 ms: about 1% of a core when it ran
	 * every second), happens once a minute; the short one over the 1 s
	 * windows every 10 s.  A window an allocation failure left finer than
	 * a newer one waits for the next whole walk. */
	if (now_s / 10 == h->rolled_s / 10)
		return;
	every = now_s / 60 != h->rolled_s / 60;
	h->rolled_s = now_s;

	/* Roll up, newest to oldest: each window takes the span its age
	 * calls for, and merges into the coarser window just newer than it
	 * when both fall in the same aligned span. */
	for (w = h->newest; w; w = older) {
		uint32_t span;
		struct window *n = w->newer;
		uint64_t aligned;
		size_t before;

		if (!every && w->span_s > 1)
			break;
		span = span_for(w->start_s, now_s);
		older = w->older;
		if (span <= w->span_s)
			continue;
		aligned = w->start_s - w->start_s % span;
		if (n && n->span_s == span && n->start_s == aligned) {
			before = profile_memory(&n->prof);
			if (profile_merge(&n->prof, stacks, &w->prof) < 0) {
				/* out of memory: what merged is counted there,
				 * the rest stays in w until the next try */
				h->bytes += profile_memory(&n->prof) - before;
				continue;
			}
			h->bytes += profile_memory(&n->prof) - before;
			merge_rss(&n->rss, &w->rss);
			drop(h, w, stacks, NULL);
			continue;
		}
		w->start_s = aligned;
		w->span_s = span;
	}
}

bool history_drop_oldest(struct history *h, struct stacktab *stacks,
			 struct history_dropped *dropped)
{
	if (!h->oldest)
		return false;
	drop(h, h->oldest, stacks, dropped);
	return true;
}

uint64_t history_oldest_s(const struct history *h)
{
	return h->oldest ? h->oldest->start_s : UINT64_MAX;
}

int history_query(const struct history *h, struct stacktab *stacks, uint64_t from_ns,
		  uint64_t to_ns, struct profile *out, uint64_t *first_ns, uint64_t *end_ns)
{
	for (const struct window *w = h->newest; w; w = w->older) {
		uint64_t ws = w->start_s * NSEC_PER_SEC, we = ws + w->span_s * NSEC_PER_SEC;
		uint64_t lo = MAX(ws, from_ns), hi = MIN(we, to_ns);

		if (we <= from_ns)
			break; /* every older window ends before the range */
		if (hi <= lo || 2 * (hi - lo) < we - ws)
			continue;
		if (profile_merge(out, stacks, &w->prof) < 0)
			return -ENOMEM;
		*first_ns = MIN(*first_ns, ws);
		*end_ns = MAX(*end_ns, we);
	}
	return 0;
}
