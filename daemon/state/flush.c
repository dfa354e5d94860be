/* SPDX-License-Identifier: MIT */
/* flush.c - the windows sealed since the last flush written to the
 * current segment, in slices on the loop, and handed to the writer thread
 * (persist.h, persist_internal.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/u64map.h"
#include "perfd/macro.h"
#include "profile/stacktab.h"
#include "state/statefile.h"
#include "state/writer.h"
#include "state/persist_internal.h"

/* ---- flush ---- */

/* What one flush writes, in order, into one buffer. */
struct writing {
	struct persist *ps;
	struct aggregator *a;
	struct stacktab *stacks;
	const struct persist_names *names;
	uint64_t period_ns, now_ns;
	struct sbuf buf;
	bool final;
	/* a window's entries, gathered before its record */
	uint64_t *keys, *values;
	size_t n, cap;
	uint64_t windows_in_buf; /* what a refusal of buf loses */
	bool process_written;    /* of the process flush_process is at */
	uint64_t until_ns;       /* PERSIST_FLUSH_SLICE_NS: then the rest waits */
	bool wrote, cut;
	int error;
};

/* Starts a new segment (the next record goes to a new file). */
static void segment_start(struct writing *wr)
{
	struct persist *ps = wr->ps;
	size_t at;

	ps->seq = ps->next_seq++;
	ps->seq_started_s = wr->now_ns / NSEC_PER_SEC;
	u64map_done(&ps->frames_written);
	u64map_done(&ps->strings_written);
	ps->n_strings = 0;
	u64map_done(&ps->owner_bytes);
	if (!persist_segment_add(ps, ps->seq, 0)) {
		wr->error = -ENOMEM;
		return;
	}
	statefile_put_header(&wr->buf, ps->boot_id);
	at = statefile_begin_record(&wr->buf, REC_SEGMENT);
	sbuf_put_varint(&wr->buf, (uint64_t)time(NULL) * NSEC_PER_SEC);
	sbuf_put_varint(&wr->buf, wr->now_ns);
	sbuf_put_varint(&wr->buf, wr->period_ns);
	statefile_end_record(&wr->buf, at);
}

static struct segment *current(struct persist *ps)
{
	return ps->n_segments && ps->segments[ps->n_segments - 1].seq == ps->seq ?
		       &ps->segments[ps->n_segments - 1] : NULL;
}

/* The id of s in this segment, writing its STRING record first. */
static uint64_t string_id(struct writing *wr, const char *s)
{
	struct persist *ps = wr->ps;
	size_t len = s ? strlen(s) : 0;
	uint64_t h = hash_text(s ? s : "", len);
	bool added;
	uint64_t *slot = u64map_upsert(&ps->strings_written, h, &added);
	size_t at;

	if (!slot) {
		wr->error = -ENOMEM;
		return 0;
	}
	if (!added)
		return *slot - 1;
	*slot = ++ps->n_strings;
	at = statefile_begin_record(&wr->buf, REC_STRING);
	sbuf_put_str(&wr->buf, len > MAX_NAME ? "[name too long]" : s);
	statefile_end_record(&wr->buf, at);
	return *slot - 1;
}

/* Writes frame's FRAME record unless this segment has it. */
static void write_frame(struct writing *wr, uint64_t frame)
{
	struct persist *ps = wr->ps;
	struct frame_record rec[FRAME_MAX_INLINE];
	uint64_t fn[FRAME_MAX_INLINE], file[FRAME_MAX_INLINE];
	uint64_t path[FRAME_MAX_INLINE], build_id[FRAME_MAX_INLINE];
	uint8_t module_kind[FRAME_MAX_INLINE];
	char scratch[PATH_MAX + 64];
	uint16_t module = frame_module(frame);
	bool added;
	uint64_t *slot;
	size_t n, at;

	if (module == FRAME_MODULE_NONE || module == FRAME_MODULE_SPECIAL)
		return;
	slot = u64map_upsert(&ps->frames_written, frame, &added);
	if (!slot) {
		wr->error = -ENOMEM;
		return;
	}
	if (!added)
		return;
	*slot = 1;
	/* Without source lines: opening a binary's DWARF (decompressing it,
	 * indexing its line table) takes up to seconds, and the first flush
	 * meets every binary of every process sampled; symbol tables are the
	 * cheap part, the one every query reads anyway. */
	n = wr->names->resolve(wr->names->ctx, frame, false, rec, ELEMENTSOF(rec), scratch,
			       sizeof(scratch));
	n = MAX(MIN(n, ELEMENTSOF(rec)), (size_t)1);
	/* strings first: the resolver's are valid until its next call, and
	 * the describer's are the module's */
	for (size_t i = 0; i < n; i++) {
		const char *p, *b;

		fn[i] = string_id(wr, rec[i].function);
		file[i] = rec[i].file ? string_id(wr, rec[i].file) + 1 : 0;
		module_kind[i] = 0;
		if (rec[i].module == FRAME_MODULE_KERNEL) {
			module_kind[i] = 1;
		} else if (rec[i].module != FRAME_MODULE_NONE &&
			   wr->names->describe(wr->names->ctx, rec[i].module, &p, &b)) {
			module_kind[i] = 2;
			path[i] = string_id(wr, p);
			build_id[i] = string_id(wr, b);
		}
	}
	at = statefile_begin_record(&wr->buf, REC_FRAME);
	sbuf_put_varint(&wr->buf, frame);
	sbuf_put_varint(&wr->buf, n);
	for (size_t i = 0; i < n; i++) {
		sbuf_put_varint(&wr->buf, rec[i].kind);
		sbuf_put_varint(&wr->buf, fn[i]);
		sbuf_put_varint(&wr->buf, file[i]);
		sbuf_put_varint(&wr->buf, rec[i].line);
		sbuf_put_varint(&wr->buf, rec[i].start_line);
		sbuf_put_varint(&wr->buf, module_kind[i]);
		sbuf_put_varint(&wr->buf, rec[i].offset);
		sbuf_put_varint(&wr->buf, rec[i].symbol_offset);
		if (module_kind[i] == 2) {
			sbuf_put_varint(&wr->buf, path[i]);
			sbuf_put_varint(&wr->buf, build_id[i]);
		}
	}
	statefile_end_record(&wr->buf, at);
	ps->stats.frames_written++;
}

/* Writes the stack's STACK record (and its frames') unless this segment
 * has it. */
static void write_stack(struct writing *wr, uint32_t id)
{
	const struct stack *s = stacktab_get(wr->stacks, id);
	size_t at;

	if (!s || s->mark == (uint32_t)wr->ps->seq)
		return;
	for (size_t i = 0; i < s->depth; i++)
		write_frame(wr, s->frames[i]);
	at = statefile_begin_record(&wr->buf, REC_STACK);
	sbuf_put_varint(&wr->buf, id);
	sbuf_put_varint(&wr->buf, s->depth);
	sbuf_put_varint(&wr->buf, s->kernel_depth);
	for (size_t i = 0; i < s->depth; i++)
		sbuf_put_varint(&wr->buf, s->frames[i]);
	statefile_end_record(&wr->buf, at);
	stacktab_set_mark(wr->stacks, id, (uint32_t)wr->ps->seq);
	wr->ps->stats.stacks_written++;
}

static void write_process(struct writing *wr, struct process *p)
{
	size_t at = statefile_begin_record(&wr->buf, REC_PROCESS);
	struct sbuf *b = &wr->buf;

	sbuf_put_varint(b, p->pid);
	sbuf_put_varint(b, p->start_time_ns);
	sbuf_put_varint(b, p->owner_uid);
	sbuf_put_varint(b, p->ns_pid);
	sbuf_put_str(b, p->comm);
	sbuf_put_str(b, p->cgroup && strlen(p->cgroup) <= MAX_PATH_READ ? p->cgroup : "");
	sbuf_put_str(b, p->runtime);
	sbuf_put_varint(b, p->kthread);
	sbuf_put_varint(b, p->exec_ns);
	sbuf_put_varint(b, p->first_sample_ns);
	sbuf_put_varint(b, p->last_sample_ns);
	sbuf_put_varint(b, p->total_samples);
	sbuf_put_varint(b, p->page_size);
	sbuf_put_varint(b, p->peak_rss_bytes);
	sbuf_put_varint(b, p->peak_rss_ns);
	sbuf_put_varint(b, p->hiwater_rss_bytes);
	sbuf_put_varint(b, p->memory_sampled_bytes);
	sbuf_put_varint(b, p->owner_samples);
	statefile_end_record(b, at);
	p->persisted_segment = wr->ps->seq;
	wr->process_written = true;
	wr->ps->stats.processes_written++;
}

static int gather(void *userdata, uint64_t key, uint64_t value)
{
	struct writing *wr = userdata;

	if (wr->n == wr->cap) {
		size_t cap = wr->cap ? wr->cap * 2 : 256;
		uint64_t *k = realloc(wr->keys, cap * sizeof(*k)), *v;

		if (!k)
			return -ENOMEM;
		wr->keys = k;
		v = realloc(wr->values, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		wr->values = v;
		wr->cap = cap;
	}
	wr->keys[wr->n] = key;
	wr->values[wr->n++] = value;
	return 0;
}

/* Whether the owner of w may write it to this segment: while a quarter of
 * the segment's budget is free, any owner; past that only an owner that
 * has not yet written its share, the budget divided among the owners that
 * wrote to the segment (itself counted), so that the last quarter is left
 * to the owners that wrote little; none once the budget is spent.  A
 * refusal is counted by cause.  What is checked is what was written
 * before: one window's bytes are the most by which an owner or the
 * segment goes past. */
static bool owner_may_write(struct writing *wr, const struct history_window *w)
{
	struct persist *ps = wr->ps;
	uint64_t *mine = u64map_get(&ps->owner_bytes, w->owner);
	size_t owners = ps->owner_bytes.count + !mine;
	struct segment *seg = current(ps);
	uint64_t used = (seg ? seg->bytes : 0) + wr->buf.len;

	if (used >= ps->segment_budget) {
		ps->stats.windows_refused_segment_full++;
		return false;
	}
	if (used >= ps->segment_budget - ps->segment_budget / 4 && mine &&
	    *mine >= ps->segment_budget / owners) {
		ps->stats.windows_refused_owner_share++;
		return false;
	}
	return true;
}

/* Counts len bytes as w's owner's in this segment. */
static void owner_wrote(struct writing *wr, const struct history_window *w, size_t len)
{
	struct persist *ps = wr->ps;
	bool added;
	uint64_t *mine = u64map_upsert(&ps->owner_bytes, w->owner, &added);

	if (!mine)
		return; /* out of memory: that owner is not held back */
	*mine += len; /* an owner new to the segment starts at 0 */
}

static void write_window(struct writing *wr, struct process *p, const struct history_window *w)
{
	struct sbuf *b = &wr->buf;
	size_t at;

	wr->n = 0;
	if (history_window_foreach(w, gather, wr) < 0) {
		wr->error = -ENOMEM;
		return;
	}
	/* once a segment for its definition, and once a flush for its counts
	 * (the last record read back says them) */
	if (p->persisted_segment != wr->ps->seq || !wr->process_written)
		write_process(wr, p);
	for (size_t i = 0; i < wr->n; i++)
		write_stack(wr, profile_key_stack(wr->keys[i]));
	at = statefile_begin_record(b, REC_WINDOW);
	sbuf_put_varint(b, p->pid);
	sbuf_put_varint(b, p->start_time_ns);
	sbuf_put_varint(b, w->start_s);
	sbuf_put_varint(b, w->span_s);
	sbuf_put_varint(b, w->owner);
	sbuf_put_varint(b, w->rss.page_size);
	if (w->rss.page_size) {
		for (int i = 0; i < PERFD_RSS_COUNTERS; i++)
			sbuf_put_varint(b, w->rss.last_pages[i]);
		sbuf_put_varint(b, w->rss.max_pages);
	}
	sbuf_put_varint(b, wr->n);
	for (size_t i = 0; i < wr->n; i++) {
		sbuf_put_varint(b, profile_key_stack(wr->keys[i]));
		sbuf_put_varint(b, profile_key_tid(wr->keys[i]));
		sbuf_put_varint(b, profile_key_kind(wr->keys[i]));
		sbuf_put_varint(b, wr->values[i]);
	}
	statefile_end_record(b, at);
	p->persisted_end_s = w->start_s + w->span_s;
	if (current(wr->ps))
		current(wr->ps)->newest_end_s = MAX(current(wr->ps)->newest_end_s, p->persisted_end_s);
	wr->ps->stats.windows_written++;
	wr->windows_in_buf++;
}

/* Hands the buffer to the writer; a refusal cuts the segment short (the
 * next flush starts another, with every definition again). */
static void hand_over(struct writing *wr)
{
	struct persist *ps = wr->ps;
	struct segment *seg = current(ps);
	size_t len = wr->buf.len;

	if (!len)
		return;
	if (wr->buf.failed || !state_writer_append(ps->writer, ps->seq, &wr->buf)) {
		sbuf_done(&wr->buf);
		ps->seq = 0;
		ps->stats.windows_unwritten += wr->windows_in_buf;
		ps->stats.windows_written -= wr->windows_in_buf;
		wr->windows_in_buf = 0;
		return;
	}
	wr->windows_in_buf = 0;
	if (seg)
		seg->bytes += len;
}

/* Whether a name that w's record would write to this segment (its frames
 * not written yet) waits for a table being built off the loop
 * (persist_names.pending, which starts building it): a frame goes to disk
 * named as it is then, for good.  Asks of every such frame, so that each
 * table is started at once. */
static bool names_pending(struct writing *wr, const struct history_window *w)
{
	struct persist *ps = wr->ps;
	bool pending = false;

	wr->n = 0;
	if (!wr->names->pending || history_window_foreach(w, gather, wr) < 0)
		return false;
	for (size_t i = 0; i < wr->n; i++) {
		const struct stack *s = stacktab_get(wr->stacks, profile_key_stack(wr->keys[i]));

		if (!s || s->mark == (uint32_t)ps->seq)
			continue;
		for (size_t k = 0; k < s->depth; k++) {
			uint16_t module = frame_module(s->frames[k]);

			if (module != FRAME_MODULE_NONE && module != FRAME_MODULE_SPECIAL &&
			    !u64map_get(&ps->frames_written, s->frames[k]) &&
			    wr->names->pending(wr->names->ctx, s->frames[k], false))
				pending = true;
		}
	}
	return pending;
}

static void flush_process(struct process *p, void *userdata)
{
	struct writing *wr = userdata;
	struct history_iter it;
	struct history_window w;
	size_t at;

	if (wr->error)
		return;
	if (!wr->final && p->history.log.end_s <= p->persisted_end_s)
		return;
	if (wr->cut || (!wr->final && wr->wrote && now_monotonic_ns() >= wr->until_ns)) {
		wr->cut = true; /* this one and the rest at the next flush */
		return;
	}
	wr->wrote = true;
	wr->process_written = false;
	history_iter_init(&it, &p->history);
	while (history_iter_next(&it, &w) && !wr->error) {
		if (w.start_s < p->persisted_end_s)
			continue;
		if (!w.sealed && !wr->final)
			break;
		if (!wr->ps->seq)
			segment_start(wr);
		if (wr->error)
			break;
		/* it and the process's later windows wait for their names, a
		 * while at most; at the last flush nothing waits */
		if (!wr->final && wr->now_ns / NSEC_PER_SEC < w.start_s + w.span_s + PERSIST_NAMES_WAIT_S &&
		    names_pending(wr, &w)) {
			wr->ps->stats.windows_waited_for_names++;
			break;
		}
		if (!owner_may_write(wr, &w)) {
			/* dropped from the disk, kept in memory */
			p->persisted_end_s = w.start_s + w.span_s;
			continue;
		}
		at = wr->buf.len;
		write_window(wr, p, &w);
		owner_wrote(wr, &w, wr->buf.len - at);
		/* a burst of one process's windows is cut too (a window's new
		 * frames are named as it is written); its next window first */
		if (!wr->final && now_monotonic_ns() >= wr->until_ns) {
			wr->cut = true;
			break;
		}
	}
	/* no buffer of one flush grows without bound */
	if (wr->buf.len >= (4u << 20))
		hand_over(wr);
}

/* Deletes segments past the retention, and the oldest past max_bytes. */
static void prune(struct persist *ps, uint64_t now_s)
{
	uint64_t total = 0;
	size_t keep = 0;

	for (size_t i = 0; i < ps->n_segments; i++)
		total += ps->segments[i].bytes;
	for (size_t i = 0; i < ps->n_segments; i++) {
		struct segment *s = &ps->segments[i];
		bool is_current = s->seq == ps->seq;
		bool old = s->newest_end_s + ps->retention_s <= now_s;

		if (!is_current && (old || total > ps->max_bytes)) {
			state_writer_remove(ps->writer, s->seq);
			total -= s->bytes;
			ps->stats.segments_removed++;
			continue;
		}
		ps->segments[keep++] = *s;
	}
	ps->n_segments = keep;
}

void persist_forget_module(struct persist *ps, uint16_t module)
{
	if (module > FRAME_MODULE_LAST)
		return;
	ps->forgotten[module / 64] |= 1ULL << (module % 64);
	ps->any_forgotten = true;
}

/* Drops from frames_written the frames of the modules given back. */
static void forget_modules(struct persist *ps)
{
	struct u64map kept;
	bool added;

	if (!ps->any_forgotten)
		return;
	u64map_init(&kept);
	U64MAP_FOREACH(slot, &ps->frames_written) {
		uint16_t m = frame_module(slot->key);
		uint64_t *to;

		if (m <= FRAME_MODULE_LAST && (ps->forgotten[m / 64] >> (m % 64) & 1))
			continue;
		to = u64map_upsert(&kept, slot->key, &added);
		if (!to) {
			/* out of memory: a new segment writes every frame again */
			u64map_done(&kept);
			ps->seq = 0;
			break;
		}
		*to = 1;
	}
	if (ps->seq) {
		u64map_done(&ps->frames_written);
		ps->frames_written = kept;
	}
	memset(ps->forgotten, 0, sizeof(ps->forgotten));
	ps->any_forgotten = false;
}

void persist_flush(struct persist *ps, struct aggregator *a, const struct persist_names *names,
		   uint64_t period_ns, uint64_t now_ns, bool final)
{
	struct writing wr = { .ps = ps, .a = a, .stacks = aggregator_stacks(a), .names = names,
			      .period_ns = period_ns, .now_ns = now_ns, .final = final };

	uint64_t t0 = now_monotonic_ns();
	double ms;

	if (!ps->writer)
		return; /* read_only */
	wr.until_ns = t0 + PERSIST_FLUSH_SLICE_NS;

	/* every PERSIST_FLUSH_S, not at every call: each batch wakes the
	 * writer and syncs the disk, which a daemon at rest should not do
	 * every second */
	if (!final && now_ns / NSEC_PER_SEC < ps->next_flush_s)
		return;
	ps->next_flush_s = now_ns / NSEC_PER_SEC + PERSIST_FLUSH_S;
	ps->stats.flushes++;
	if (ps->seq && now_ns / NSEC_PER_SEC >= ps->seq_started_s + PERSIST_SEGMENT_S)
		ps->seq = 0; /* the next record starts a new segment */
	if (ps->seq)
		forget_modules(ps);
	memset(ps->forgotten, 0, sizeof(ps->forgotten));
	ps->any_forgotten = false;
	aggregator_foreach_process(a, flush_process, &wr);
	if (wr.error) {
		/* out of memory part way: the buffer may hold a record that
		 * names what it could not write; its windows are lost, counted,
		 * and the next flush starts a new segment */
		wr.buf.failed = true;
	}
	hand_over(&wr);
	free(wr.keys);
	free(wr.values);
	sbuf_done(&wr.buf);
	if (wr.cut) { /* the rest at the next maintenance */
		ps->next_flush_s = now_ns / NSEC_PER_SEC + 1;
		ps->stats.flushes_cut++;
	}
	prune(ps, now_ns / NSEC_PER_SEC);
	stored_trim(ps, a);
	ms = (now_monotonic_ns() - t0) / 1e6;
	ps->stats.longest_flush_ms = MAX(ps->stats.longest_flush_ms, ms);
	if (final)
		state_writer_wait(ps->writer, true);
}
