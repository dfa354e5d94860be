/* SPDX-License-Identifier: MIT */
/* history.c - see history.h for the design and the log's layout. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/kindtab.h"
#include "base/varint.h"
#include "perfd/macro.h"
#include "profile/history.h"
#include "profile/stacktab.h"

struct entry {
	uint64_t key, value;
};

/* One record of the log, decoded up to its entries. */
struct rec {
	uint64_t start_s;
	uint32_t span_s;
	uint32_t owner;
	struct window_rss rss;
	uint64_t n;
	const uint8_t *after_gap; /* the body from span_s on */
	const uint8_t *entries;
	const uint8_t *next;      /* the record after this one */
};

/* ---- open windows ---- */

static size_t window_bytes(const struct window *w)
{
	return sizeof(*w) + profile_memory(&w->prof);
}

void history_init(struct history *h)
{
	*h = (struct history){ .roll_due_s = UINT64_MAX };
}

/* Unlinks open window w and frees it; its entries' references go with it
 * unless they moved to the log (keep_refs). */
static void unlink_open(struct history *h, struct window *w, struct stacktab *stacks,
			bool keep_refs)
{
	if (w->newer)
		w->newer->older = w->older;
	else
		h->newest = w->older;
	if (w->older)
		w->older->newer = w->newer;
	else
		h->oldest_open = w->newer;
	h->n_windows--;
	h->bytes -= window_bytes(w);
	if (keep_refs)
		u64map_done(&w->prof.values);
	else
		profile_release(&w->prof, stacks);
	free(w);
}

static void drop_open(struct history *h, struct window *w, struct stacktab *stacks,
		      struct history_dropped *dropped)
{
	if (dropped) {
		dropped->windows++;
		for (int k = 0; k < PROFILE_KINDS; k++)
			dropped->values[k] += w->prof.totals[k];
	}
	unlink_open(h, w, stacks, false);
}

static struct window *push_newest(struct history *h, uint64_t second, uint32_t owner)
{
	struct window *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->start_s = second;
	w->span_s = 1;
	w->owner = owner;
	profile_init(&w->prof);
	w->older = h->newest;
	if (h->newest)
		h->newest->newer = w;
	else
		h->oldest_open = w;
	h->newest = w;
	h->n_windows++;
	h->bytes += window_bytes(w);
	return w;
}

/* The window a sample of this second, taken under owner, goes to; a new
 * newest one for a second past the newest window.  A second the log covers
 * already counts as the first one after it.  A window that gets values of
 * two owners is nobody's (history_owner_meet). */
static struct window *window_for(struct history *h, uint64_t second, uint32_t owner)
{
	struct window *w = h->newest;

	second = MAX(second, h->log.end_s);
	if (!w || second >= w->start_s + w->span_s)
		return push_newest(h, second, owner);
	for (; w; w = w->older)
		if (second >= w->start_s)
			break;
	if (!w || second >= w->start_s + w->span_s)
		w = h->newest; /* in a gap, or older than every open window: the newest */
	w->owner = history_owner_meet(w->owner, owner);
	return w;
}

int history_add(struct history *h, struct stacktab *stacks, uint64_t ts_ns, uint32_t owner,
		uint64_t key, uint64_t value)
{
	struct window *w = window_for(h, ts_ns / NSEC_PER_SEC, owner);
	size_t before;
	int r;

	if (!w)
		return -ENOMEM;
	before = profile_memory(&w->prof);
	r = profile_add(&w->prof, stacks, key, value);
	h->bytes += profile_memory(&w->prof) - before;
	return r;
}

static void note(struct window_rss *r, const __u64 pages[PERFD_RSS_COUNTERS], uint32_t page_size)
{
	uint64_t total = pages[PERFD_RSS_FILE] + pages[PERFD_RSS_ANON] + pages[PERFD_RSS_SHMEM];

	memcpy(r->last_pages, pages, sizeof(r->last_pages));
	r->max_pages = r->page_size ? MAX(r->max_pages, total) : total;
	r->page_size = page_size;
}

int history_note_rss(struct history *h, uint64_t ts_ns, uint32_t owner,
		     const __u64 pages[PERFD_RSS_COUNTERS], uint32_t page_size)
{
	struct window *w = window_for(h, ts_ns / NSEC_PER_SEC, owner);

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

/* ---- records ---- */

static const uint8_t *rec_parse(const uint8_t *p, uint64_t prev_end_s, bool first,
				uint64_t head_start_s, struct rec *r)
{
	uint64_t body_len, gap, span, n;

	p = varint_get(p, &body_len);
	r->next = p + body_len;
	p = varint_get(p, &gap);
	r->start_s = first ? head_start_s : prev_end_s + gap;
	r->after_gap = p;
	p = varint_get(p, &span);
	r->span_s = (uint32_t)span;
	p = varint_get(p, &n);
	r->owner = (uint32_t)(n - 1); /* stored + 1: PERFD_OWNER_NONE is 0, one byte */
	p = varint_get(p, &n);
	r->n = n >> 1;
	r->rss = (struct window_rss){ 0 };
	if (n & 1) {
		uint64_t v;

		p = varint_get(p, &v);
		r->rss.page_size = (uint32_t)v;
		for (int k = 0; k < PERFD_RSS_COUNTERS; k++)
			p = varint_get(p, &r->rss.last_pages[k]);
		p = varint_get(p, &r->rss.max_pages);
	}
	r->entries = p;
	return r->next;
}

/* Reads the next entry at *p; key is the previous key on entry. */
static inline void entry_next(const uint8_t **p, uint64_t *key, uint64_t *value)
{
	uint64_t delta;

	*p = varint_get(*p, &delta);
	*key += delta;
	*p = varint_get(*p, value);
}

static size_t rss_size(const struct window_rss *rss)
{
	size_t n = 0;

	if (!rss->page_size)
		return 0;
	n += varint_size(rss->page_size);
	for (int k = 0; k < PERFD_RSS_COUNTERS; k++)
		n += varint_size(rss->last_pages[k]);
	return n + varint_size(rss->max_pages);
}

static uint8_t *rss_write(uint8_t *p, const struct window_rss *rss)
{
	if (!rss->page_size)
		return p;
	p = varint_put(p, rss->page_size);
	for (int k = 0; k < PERFD_RSS_COUNTERS; k++)
		p = varint_put(p, rss->last_pages[k]);
	return varint_put(p, rss->max_pages);
}

static size_t entries_size(const struct entry *e, size_t n)
{
	size_t bytes = 0;
	uint64_t prev = 0;

	for (size_t i = 0; i < n; i++) {
		bytes += varint_size(e[i].key - prev) + varint_size(e[i].value);
		prev = e[i].key;
	}
	return bytes;
}

static size_t body_size(uint64_t gap, uint32_t span, uint32_t owner,
			const struct window_rss *rss, const struct entry *e, size_t n)
{
	return varint_size(gap) + varint_size(span) + varint_size((uint32_t)(owner + 1)) +
	       varint_size((uint64_t)n << 1 | 1) +
	       rss_size(rss) + entries_size(e, n);
}

static size_t record_size(uint64_t gap, uint32_t span, uint32_t owner,
			  const struct window_rss *rss, const struct entry *e, size_t n)
{
	size_t body = body_size(gap, span, owner, rss, e, n);

	return varint_size(body) + body;
}

static uint8_t *record_write(uint8_t *p, uint64_t gap, uint32_t span, uint32_t owner,
			     const struct window_rss *rss, const struct entry *e, size_t n)
{
	uint64_t prev = 0;

	p = varint_put(p, body_size(gap, span, owner, rss, e, n));
	p = varint_put(p, gap);
	p = varint_put(p, span);
	p = varint_put(p, (uint32_t)(owner + 1));
	p = varint_put(p, (uint64_t)n << 1 | (rss->page_size ? 1 : 0));
	p = rss_write(p, rss);
	for (size_t i = 0; i < n; i++) {
		p = varint_put(p, e[i].key - prev);
		p = varint_put(p, e[i].value);
		prev = e[i].key;
	}
	return p;
}

/* The size of r written again with another gap, and the header of that
 * (the body from span_s on stays as it is: the caller moves it). */
static size_t copy_size(const struct rec *r, uint64_t gap)
{
	size_t body = varint_size(gap) + (size_t)(r->next - r->after_gap);

	return varint_size(body) + body;
}

static void copy_header_write(uint8_t *p, const struct rec *r, uint64_t gap)
{
	p = varint_put(p, varint_size(gap) + (size_t)(r->next - r->after_gap));
	varint_put(p, gap);
}

/* ---- the log's buffer ---- */

static size_t log_live(const struct history_log *log)
{
	return log->len - log->head;
}

/* Reallocates the buffer to the live bytes plus room, at offset 0. */
static int log_resize(struct history *h, size_t room)
{
	struct history_log *log = &h->log;
	size_t live = log_live(log), cap = live + room;
	uint8_t *buf;

	if (log->head)
		memmove(log->buf, log->buf + log->head, live);
	log->len = live;
	log->head = 0;
	buf = realloc(log->buf, cap);
	if (!buf)
		return -ENOMEM; /* moved, not resized: still consistent */
	h->bytes += cap - log->cap;
	log->buf = buf;
	log->cap = cap;
	return 0;
}

static size_t log_slack(size_t live)
{
	return live / 8 + 64;
}

/* Makes room for need more bytes. */
static int log_reserve(struct history *h, size_t need)
{
	struct history_log *log = &h->log;

	if (log->cap - log->len >= need)
		return 0;
	return log_resize(h, need + log_slack(log_live(log) + need));
}

/* After records went from the head: gives the dead bytes and the excess
 * room back, so that bytes stays what the log really needs. */
static void log_trim(struct history *h)
{
	struct history_log *log = &h->log;
	size_t live = log_live(log);

	if (!log->n) {
		h->bytes -= log->cap;
		free(log->buf);
		log->buf = NULL;
		log->head = log->len = log->cap = 0;
		log->end_s = 0;
		return;
	}
	if (log->cap > live + 2 * log_slack(live))
		(void)log_resize(h, log_slack(live));
}

/* Drops the head record: its references, and its values into dropped. */
static void log_drop_head(struct history *h, struct stacktab *stacks,
			  struct history_dropped *dropped)
{
	struct history_log *log = &h->log;
	const uint8_t *p;
	struct rec r, next;
	uint64_t key = 0, value;

	rec_parse(log->buf + log->head, 0, true, log->head_start_s, &r);
	p = r.entries;
	for (uint64_t i = 0; i < r.n; i++) {
		entry_next(&p, &key, &value);
		stacktab_unref(stacks, profile_key_stack(key));
		if (dropped)
			dropped->values[profile_key_kind(key)] += value;
	}
	if (dropped)
		dropped->windows++;
	log->head = (size_t)(r.next - log->buf);
	log->n--;
	h->n_windows--;
	if (log->n) {
		rec_parse(r.next, r.start_s + r.span_s, false, 0, &next);
		log->head_start_s = next.start_s;
	}
}

/* The first second at which a roll-up can change the record at start_s
 * of span_s (see span_for): a 1 s window becomes a 10 s one first, a 10 s
 * window a 60 s one; a 60 s window stays. */
static uint64_t record_roll_due(uint64_t start_s, uint32_t span_s)
{
	if (span_s == 1)
		return start_s - start_s % 10 + 10 + HISTORY_FINE_AGE_S;
	if (span_s == 10)
		return start_s - start_s % 60 + 60 + HISTORY_MEDIUM_AGE_S;
	return UINT64_MAX;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

/* Appends a window of n entries (keys ascending) after the log's newest
 * record, which must end by start_s.  Returns 0 or -ENOMEM (nothing
 * changed); the entries' references are the caller's to move. */
static int log_append(struct history *h, uint64_t start_s, uint32_t span_s, uint32_t owner,
		      const struct window_rss *rss, const struct entry *e, size_t n)
{
	struct history_log *log = &h->log;
	uint64_t gap = log->n ? start_s - log->end_s : 0;
	size_t need = record_size(gap, span_s, owner, rss, e, n);
	int r = log_reserve(h, need);

	if (r < 0)
		return r;
	record_write(log->buf + log->len, gap, span_s, owner, rss, e, n);
	log->len += need;
	if (!log->n++) {
		log->head_start_s = start_s;
		h->roll_due_s = UINT64_MAX;
	}
	log->end_s = start_s + span_s;
	h->roll_due_s = MIN(h->roll_due_s, record_roll_due(start_s, span_s));
	h->n_windows++;
	return 0;
}

/* Appends open window w (the oldest open one) to the log; its references
 * move there.  Returns 0 or -ENOMEM (w stays open). */
static int seal(struct history *h, struct stacktab *stacks, struct window *w)
{
	size_t n = 0;
	struct entry *e;
	int r;

	if (w->prof.values.count == 0 && !w->rss.page_size) {
		unlink_open(h, w, stacks, false); /* nothing in it */
		return 0;
	}
	e = malloc(MAX(w->prof.values.count, 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	U64MAP_FOREACH(slot, &w->prof.values)
		e[n++] = (struct entry){ slot->key, slot->value };
	qsort(e, n, sizeof(*e), entry_cmp);
	r = log_append(h, w->start_s, w->span_s, w->owner, &w->rss, e, n);
	if (r == 0)
		unlink_open(h, w, stacks, true); /* the sealed one counts instead */
	free(e);
	return r;
}

int history_restore(struct history *h, struct stacktab *stacks, const struct history_restored *w)
{
	struct entry *e;
	size_t n = 0;
	int r;

	if (h->newest || (h->log.n && w->start_s < h->log.end_s) || !w->span_s)
		return -EINVAL;
	e = malloc(MAX(w->n, 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < w->n; i++)
		if (w->values[i])
			e[n++] = (struct entry){ w->keys[i], w->values[i] };
	qsort(e, n, sizeof(*e), entry_cmp);
	for (size_t i = 1; i < n; i++)
		if (e[i].key == e[i - 1].key) {
			free(e);
			return -EINVAL; /* one key twice: not a window */
		}
	r = log_append(h, w->start_s, w->span_s, w->owner, &w->rss, e, n);
	if (r == 0)
		for (size_t i = 0; i < n; i++)
			stacktab_ref(stacks, profile_key_stack(e[i].key));
	free(e);
	return r;
}

/* ---- maintenance ---- */

/* history_maintain rolls up only when a span can change: at multiples of
 * the spans, which the ages must therefore be. */
_Static_assert(HISTORY_FINE_AGE_S % 10 == 0 && HISTORY_MEDIUM_AGE_S % 60 == 0,
	       "a tier's age is a multiple of its span");
_Static_assert(HISTORY_SEAL_AFTER_S < HISTORY_FINE_AGE_S,
	       "windows are sealed before they are rolled up");

/* The span a window starting at start_s takes now: the coarsest whose
 * whole aligned span is past its tier's age, so a rolled-up window never
 * overlaps a finer, younger one. */
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

/* A window being rolled up: the records merged into it so far. */
struct pending {
	bool active;
	uint64_t start_s;
	uint32_t span_s;
	uint32_t owner;
	struct window_rss rss;
	struct entry *e, *scratch; /* both sized for every entry of the pass */
	size_t n;
};

/* Merge-joins r's entries into p's (both sorted by key): an entry both
 * hold keeps one of its two stack references. */
static void pending_take(struct pending *p, const struct rec *r, struct stacktab *stacks)
{
	const uint8_t *q = r->entries;
	uint64_t key = 0, value = 0, left = r->n;
	size_t i = 0, n = 0;
	struct entry *tmp;
	bool have = false;

	for (;;) {
		if (!have && left) {
			entry_next(&q, &key, &value);
			left--;
			have = true;
		}
		if (!have && i == p->n)
			break;
		if (have && (i == p->n || key < p->e[i].key)) {
			p->scratch[n++] = (struct entry){ key, value };
			have = false;
		} else if (have && key == p->e[i].key) {
			p->scratch[n++] = (struct entry){ key, value + p->e[i++].value };
			stacktab_unref(stacks, profile_key_stack(key));
			have = false;
		} else {
			p->scratch[n++] = p->e[i++];
		}
	}
	tmp = p->e;
	p->e = p->scratch;
	p->scratch = tmp;
	p->n = n;
	p->owner = history_owner_meet(p->owner, r->owner);
	/* r is the newer: its last reading, the higher peak of the two */
	{
		struct window_rss rss = r->rss;

		merge_rss(&rss, &p->rss);
		p->rss = rss;
	}
}

/* The output of a roll-up pass, written over the log's own buffer: the
 * writer stays behind the reader (see pending_emit), so no second buffer is
 * needed (one per process every 10 s would fragment the heap). */
struct out {
	uint8_t *base;
	size_t len, n;
	uint64_t first_start_s, end_s;
	uint64_t roll_due_s; /* of the records written (record_roll_due) */
};

static void out_note(struct out *o, uint64_t start_s, uint32_t span_s)
{
	if (!o->n++)
		o->first_start_s = start_s;
	o->end_s = start_s + span_s;
	o->roll_due_s = MIN(o->roll_due_s, record_roll_due(start_s, span_s));
}

/* Writes the pending window out, below limit (the offset of the first
 * byte not yet read).  A merged record is never longer than its parts
 * (fewer entries, key deltas no larger, a gap no wider, varints of sums no
 * longer than the varints summed), and those parts lie below limit, so it
 * always fits; were that ever wrong, the window's values would be dropped
 * and counted rather than written over unread records. */
static void pending_emit(struct pending *p, struct out *o, size_t limit, struct stacktab *stacks,
			 struct history_dropped *dropped)
{
	uint64_t gap;
	size_t need;

	if (!p->active)
		return;
	p->active = false;
	gap = o->n ? p->start_s - o->end_s : 0;
	need = record_size(gap, p->span_s, p->owner, &p->rss, p->e, p->n);
	if (need > limit - o->len) {
		for (size_t i = 0; i < p->n; i++) {
			stacktab_unref(stacks, profile_key_stack(p->e[i].key));
			if (dropped)
				dropped->values[profile_key_kind(p->e[i].key)] += p->e[i].value;
		}
		if (dropped)
			dropped->windows++;
		return;
	}
	record_write(o->base + o->len, gap, p->span_s, p->owner, &p->rss, p->e, p->n);
	o->len += need;
	out_note(o, p->start_s, p->span_s);
}

static void pending_start(struct pending *p, const struct rec *r, uint64_t start_s, uint32_t span_s)
{
	const uint8_t *q = r->entries;
	uint64_t key = 0;

	p->active = true;
	p->start_s = start_s;
	p->span_s = span_s;
	p->owner = r->owner;
	p->rss = r->rss;
	p->n = 0;
	for (uint64_t i = 0; i < r->n; i++, p->n++) {
		entry_next(&q, &key, &p->e[p->n].value);
		p->e[p->n].key = key;
	}
}

/* Rolls the log's records up to the spans their ages call for, in one
 * pass from the first record that changes: each record either merges
 * into the window being built (same aligned span), starts a new one, or,
 * when its span stays, is moved down as it is. */
static void roll_up(struct history *h, struct stacktab *stacks, uint64_t now_s, bool every,
		    struct history_dropped *dropped)
{
	struct history_log *log = &h->log;
	const uint8_t *p = log->buf + log->head, *end = log->buf + log->len, *change = NULL;
	uint64_t prev_end = 0, change_prev_end = 0, entries = 0, kept_due = UINT64_MAX;
	struct pending pend = { 0 };
	struct out o = { .base = log->buf };
	size_t kept = 0;
	struct rec r;
	bool first = true;

	/* Find the first record that changes, and count the entries from it
	 * on; and when the next pass is due, should none change now. */
	h->roll_due_s = UINT64_MAX;
	for (; p < end; first = false) {
		const uint8_t *at = p;

		uint64_t due;

		p = rec_parse(p, prev_end, first, log->head_start_s, &r);
		due = record_roll_due(r.start_s, r.span_s);
		h->roll_due_s = MIN(h->roll_due_s, due);
		if (!change && !every && r.span_s > 1) {
			prev_end = r.start_s + r.span_s;
			kept++;
			kept_due = MIN(kept_due, due);
			continue; /* between minute marks only 1 s windows change */
		}
		if (!change && span_for(r.start_s, now_s) > r.span_s) {
			change = at;
			change_prev_end = prev_end;
		}
		if (change) {
			entries += r.n;
		} else {
			kept++;
			kept_due = MIN(kept_due, due);
		}
		prev_end = r.start_s + r.span_s;
	}
	if (!change)
		return;

	pend.e = malloc(MAX(entries, 1) * sizeof(*pend.e));
	pend.scratch = malloc(MAX(entries, 1) * sizeof(*pend.scratch));
	if (!pend.e || !pend.scratch)
		goto out; /* nothing changed yet: try again at the next pass */

	/* the records before the change stay where they are */
	o.len = (size_t)(change - log->buf);
	o.n = kept;
	o.roll_due_s = kept_due;
	o.first_start_s = log->head_start_s;
	o.end_s = change_prev_end;

	first = change == log->buf + log->head;
	for (p = change, prev_end = change_prev_end; p < end; first = false) {
		const uint8_t *at = p;
		uint32_t span;
		uint64_t aligned;

		p = rec_parse(p, prev_end, first, log->head_start_s, &r);
		prev_end = r.start_s + r.span_s;
		span = MAX(span_for(r.start_s, now_s), r.span_s);
		aligned = r.start_s - r.start_s % span;
		if (pend.active && pend.span_s == span && pend.start_s == aligned) {
			pending_take(&pend, &r, stacks);
			continue;
		}
		pending_emit(&pend, &o, (size_t)(at - log->buf), stacks, dropped);
		if (span == r.span_s) {
			uint64_t gap = o.n ? r.start_s - o.end_s : 0;
			size_t need = copy_size(&r, gap), rest = (size_t)(r.next - r.after_gap);

			if (need <= (size_t)(r.next - log->buf) - o.len) {
				/* the body first (it moves down), then its header */
				memmove(o.base + o.len + need - rest, r.after_gap, rest);
				copy_header_write(o.base + o.len, &r, gap);
				o.len += need;
				out_note(&o, r.start_s, r.span_s);
				continue;
			}
			/* cannot happen (a gap never widens); if it did, the
			 * pending path counts what it cannot keep */
		}
		pending_start(&pend, &r, aligned, span);
	}
	pending_emit(&pend, &o, log->len, stacks, dropped);

	h->n_windows -= log->n - o.n;
	log->len = o.len;
	log->n = o.n;
	log->head_start_s = o.first_start_s;
	log->end_s = o.n ? o.end_s : 0;
	log_trim(h);
	h->roll_due_s = o.roll_due_s;
out:
	free(pend.e);
	free(pend.scratch);
}

void history_maintain(struct history *h, struct stacktab *stacks, uint64_t now_s,
		      uint64_t retention_s, struct history_dropped *dropped)
{
	bool every, dropped_some = false;

	/* Past the retention: oldest first, until one is young enough. */
	while (h->log.n) {
		struct rec r;

		rec_parse(h->log.buf + h->log.head, 0, true, h->log.head_start_s, &r);
		if (r.start_s + r.span_s + retention_s > now_s)
			break;
		log_drop_head(h, stacks, dropped);
		dropped_some = true;
	}
	if (dropped_some)
		log_trim(h);
	while (h->oldest_open && h->oldest_open->start_s + h->oldest_open->span_s + retention_s <= now_s)
		drop_open(h, h->oldest_open, stacks, dropped);

	/* Seal the open windows that ended long enough ago. */
	while (h->oldest_open &&
	       h->oldest_open->start_s + h->oldest_open->span_s + HISTORY_SEAL_AFTER_S <= now_s)
		if (seal(h, stacks, h->oldest_open) < 0)
			break; /* out of memory: it stays open until the next pass */

	/* A span changes only at roll_due_s, a multiple of 10 (1 s -> 10 s:
	 * span_for's bound, aligned + 10 + HISTORY_FINE_AGE_S, is one) or of 60
	 * (10 s -> 60 s): before it nothing is due, and unless a minute mark
	 * passed since the last pass only the 1 s windows can change.  A pass
	 * walks the log's record headers (a few hundred, in one buffer) and
	 * rewrites it from the first record that changes. */
	if (!h->log.n || now_s < h->roll_due_s)
		return;
	every = now_s / 60 != h->rolled_s / 60;
	h->rolled_s = now_s;
	roll_up(h, stacks, now_s, every, dropped);
}

uint64_t history_due_s(const struct history *h, uint64_t retention_s)
{
	uint64_t due = UINT64_MAX;

	if (h->log.n) {
		struct rec r;

		rec_parse(h->log.buf + h->log.head, 0, true, h->log.head_start_s, &r);
		due = MIN(h->roll_due_s, r.start_s + r.span_s + retention_s);
	}
	if (h->oldest_open)
		due = MIN(due, h->oldest_open->start_s + h->oldest_open->span_s +
				       MIN(retention_s, (uint64_t)HISTORY_SEAL_AFTER_S));
	return due;
}

int history_scale_periods(struct history *h, struct stacktab *stacks, uint64_t num, uint64_t den,
			  uint64_t *rng)
{
	struct history_log *log = &h->log;
	_cleanup_free_ struct entry *e = NULL;
	_cleanup_free_ uint8_t *out = NULL;
	size_t entries = 0, cap_e = 0, len = 0, cap;
	uint64_t prev_end = 0;
	const uint8_t *p;

	/* The new log is written whole before the old one goes, so running out
	 * of memory changes nothing: room for every value at its widest. */
	p = log->buf + log->head;
	for (size_t i = 0; i < log->n; i++) {
		struct rec r;

		p = rec_parse(p, 0, true, 0, &r);
		entries += r.n;
		cap_e = MAX(cap_e, (size_t)r.n);
	}
	cap = log_live(log) + entries * 10 + log->n * 2;
	if (log->n && (!(out = malloc(cap)) || !(e = malloc(MAX(cap_e, 1) * sizeof(*e)))))
		return -ENOMEM;

	p = log->buf + log->head;
	for (size_t i = 0; i < log->n; i++) {
		struct rec r;
		const uint8_t *q;
		uint64_t key = 0, gap;
		size_t n = 0;

		p = rec_parse(p, prev_end, i == 0, log->head_start_s, &r);
		q = r.entries;
		for (uint64_t j = 0; j < r.n; j++) {
			entry_next(&q, &key, &e[n].value);
			e[n].key = key;
			if (kind_in_periods(profile_key_kind(key)))
				e[n].value = profile_scale_value(e[n].value, num, den, rng);
			if (e[n].value)
				n++;
			else
				stacktab_unref(stacks, profile_key_stack(key));
		}
		gap = i == 0 ? 0 : r.start_s - prev_end;
		record_write(out + len, gap, r.span_s, r.owner, &r.rss, e, n);
		len += record_size(gap, r.span_s, r.owner, &r.rss, e, n);
		prev_end = r.start_s + r.span_s;
	}
	if (log->n) {
		h->bytes += cap - log->cap;
		free(log->buf);
		log->buf = TAKE_PTR(out);
		log->head = 0;
		log->len = len;
		log->cap = cap;
		log_trim(h);
	}
	for (struct window *w = h->newest; w; w = w->older)
		profile_scale_periods(&w->prof, stacks, num, den, rng);
	return 0;
}

void history_release(struct history *h, struct stacktab *stacks)
{
	while (h->log.n)
		log_drop_head(h, stacks, NULL);
	log_trim(h);
	while (h->newest)
		drop_open(h, h->newest, stacks, NULL);
}

bool history_drop_oldest(struct history *h, struct stacktab *stacks,
			 struct history_dropped *dropped)
{
	if (h->log.n) {
		log_drop_head(h, stacks, dropped);
		log_trim(h);
		return true;
	}
	if (!h->oldest_open)
		return false;
	drop_open(h, h->oldest_open, stacks, dropped);
	return true;
}

uint64_t history_oldest_s(const struct history *h)
{
	if (h->log.n)
		return h->log.head_start_s;
	return h->oldest_open ? h->oldest_open->start_s : UINT64_MAX;
}

bool history_empty(const struct history *h)
{
	return !h->log.n && !h->newest;
}

/* ---- reading ---- */

void history_iter_init(struct history_iter *it, const struct history *h)
{
	*it = (struct history_iter){
		.h = h,
		.p = h->log.n ? h->log.buf + h->log.head : NULL,
		.open = h->oldest_open,
		.first = true,
	};
}

bool history_iter_next(struct history_iter *it, struct history_window *ret)
{
	const struct history_log *log = &it->h->log;

	if (it->p && it->p < log->buf + log->len) {
		struct rec r;

		it->p = rec_parse(it->p, it->prev_end_s, it->first, log->head_start_s, &r);
		it->first = false;
		it->prev_end_s = r.start_s + r.span_s;
		*ret = (struct history_window){ .start_s = r.start_s, .span_s = r.span_s,
						.owner = r.owner, .sealed = true, .rss = r.rss,
						.entries = r.entries, .n_entries = r.n };
		return true;
	}
	if (!it->open)
		return false;
	*ret = (struct history_window){ .start_s = it->open->start_s, .span_s = it->open->span_s,
					.owner = it->open->owner, .rss = it->open->rss, .open = it->open,
					.n_entries = it->open->prof.values.count };
	it->open = it->open->newer;
	return true;
}

/* Runs body with key and value set to each entry of w. */
#define WINDOW_FOREACH(w, key, value, body)                                    \
	do {                                                                   \
		if ((w)->open) {                                               \
			U64MAP_FOREACH(slot_, &(w)->open->prof.values) {       \
				uint64_t key = slot_->key, value = slot_->value; \
				body;                                          \
			}                                                      \
		} else {                                                       \
			const uint8_t *q_ = (w)->entries;                      \
			uint64_t key = 0, value;                               \
			for (uint64_t i_ = 0; i_ < (w)->n_entries; i_++) {     \
				entry_next(&q_, &key, &value);                 \
				body;                                          \
			}                                                      \
		}                                                              \
	} while (0)

int history_window_merge(const struct history_window *w, struct stacktab *stacks,
			 struct profile_values *out)
{
	WINDOW_FOREACH(w, key, value, {
		if (profile_add(out, stacks, key, value) < 0)
			return -ENOMEM;
	});
	return 0;
}

int history_window_foreach(const struct history_window *w,
			   int (*fn)(void *userdata, uint64_t key, uint64_t value), void *userdata)
{
	WINDOW_FOREACH(w, key, value, {
		int r = fn(userdata, key, value);

		if (r < 0)
			return r;
	});
	return 0;
}

uint64_t history_window_samples(const struct history_window *w)
{
	uint64_t n = 0;

	if (w->open)
		return kind_samples_of(w->open->prof.totals);
	WINDOW_FOREACH(w, key, value, {
		if (kind_counts_samples(profile_key_kind(key)))
			n += value;
	});
	return n;
}

uint64_t history_window_total(const struct history_window *w, enum profile_kind kind)
{
	uint64_t n = 0;

	if (w->open)
		return w->open->prof.totals[kind];
	WINDOW_FOREACH(w, key, value, {
		if (profile_key_kind(key) == kind)
			n += value;
	});
	return n;
}

uint64_t history_window_entries(const struct history_window *w)
{
	return w->n_entries;
}

uint64_t history_window_value(const struct history_window *w, uint64_t want)
{
	WINDOW_FOREACH(w, key, value, {
		if (key == want)
			return value;
	});
	return 0;
}

int history_query(const struct history *h, struct stacktab *stacks, uint64_t now_ns,
		  uint64_t from_ns, uint64_t to_ns, const struct owner_filter *owners, struct profile_values *out,
		  uint64_t *first_ns, uint64_t *end_ns)
{
	struct history_iter it;
	struct history_window w;

	history_iter_init(&it, h);
	while (history_iter_next(&it, &w)) {
		uint64_t ws = w.start_s * NSEC_PER_SEC, we = ws + w.span_s * NSEC_PER_SEC;
		uint64_t lo = MAX(ws, from_ns), hi = MIN(we, to_ns);
		/* the part of the window that has passed */
		uint64_t passed_end = now_ns > ws ? MIN(we, now_ns) : we, passed = passed_end - ws;

		if (ws >= to_ns)
			break; /* every newer window starts after the range */
		if (hi <= lo || 2 * (hi - lo) < passed || !owner_filter_takes(owners, w.owner))
			continue;
		if (history_window_merge(&w, stacks, out) < 0)
			return -ENOMEM;
		*first_ns = MIN(*first_ns, ws);
		*end_ns = MAX(*end_ns, passed_end);
	}
	return 0;
}
