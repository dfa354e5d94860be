/* SPDX-License-Identifier: MIT */
/* stored.c - the restored frames' table (persist.h, persist_internal.h):
 * what FRAME_MODULE_STORED frames resolve to, interned once, and freed or
 * compacted as the stacks naming them go. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/u64map.h"
#include "perfd/macro.h"
#include "profile/stacktab.h"
#include "state/persist_internal.h"

/* ---- the stored table ---- */

int stored_intern(struct stored *st, const char *s, uint32_t *ret)
{
	size_t len = strlen(s);
	uint64_t h = hash_text(s, len);
	uint64_t *slot = u64map_get(&st->pool_index, h);
	bool added;

	if (slot && strcmp(st->pool + *slot - 1, s) == 0) {
		*ret = (uint32_t)(*slot - 1);
		return 0;
	}
	if (!st->pool_len) {
		if (array_grow((void **)&st->pool, &st->pool_cap, 1, 1, 64) < 0)
			return -ENOMEM;
		st->pool[st->pool_len++] = 0;
	}
	if (!len) {
		*ret = 0;
		return 0;
	}
	if (st->pool_len + len + 1 > UINT32_MAX ||
	    array_grow((void **)&st->pool, &st->pool_cap, st->pool_len + len + 1, 1, 64) < 0)
		return -ENOMEM;
	memcpy(st->pool + st->pool_len, s, len + 1);
	*ret = (uint32_t)st->pool_len;
	st->pool_len += len + 1;
	if (!slot) {
		slot = u64map_upsert(&st->pool_index, h, &added);
		if (slot)
			*slot = *ret + 1ULL;
	}
	return 0;
}

uint16_t stored_module(struct stored *st, uint32_t path, uint32_t build_id)
{
	size_t cap = FRAME_MODULE_RESTORED_LAST - FRAME_MODULE_RESTORED_FIRST + 1;
	struct stored_module *m;

	for (size_t i = 0; i < st->n_modules; i++)
		if (st->modules[i].path == path && st->modules[i].build_id == build_id)
			return (uint16_t)(FRAME_MODULE_RESTORED_FIRST + i);
	if (st->n_modules == cap)
		return FRAME_MODULE_NONE;
	if (!st->modules && !(st->modules = calloc(cap, sizeof(*st->modules))))
		return FRAME_MODULE_NONE;
	m = &st->modules[st->n_modules++];
	m->path = path;
	m->build_id = build_id;
	return (uint16_t)(FRAME_MODULE_RESTORED_FIRST + st->n_modules - 1);
}

static uint64_t lines_hash(const struct stored_line *l, size_t n)
{
	uint64_t h = n;

	for (size_t i = 0; i < n; i++) {
		h = hash_u64(h ^ l[i].kind ^ (uint64_t)l[i].function << 8 ^ (uint64_t)l[i].file << 36);
		h = hash_u64(h ^ l[i].line ^ (uint64_t)l[i].start_line << 32);
		h = hash_u64(h ^ l[i].module ^ l[i].offset ^ l[i].symbol_offset << 17);
	}
	return h;
}

/* Field by field: a struct's padding is no part of what it says. */
static bool lines_equal(const struct stored_line *a, const struct stored_line *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].kind != b[i].kind || a[i].function != b[i].function || a[i].file != b[i].file ||
		    a[i].line != b[i].line || a[i].start_line != b[i].start_line ||
		    a[i].module != b[i].module || a[i].offset != b[i].offset ||
		    a[i].symbol_offset != b[i].symbol_offset)
			return false;
	return true;
}

int stored_frame(struct stored *st, size_t n, uint32_t *ret)
{
	struct stored_line *l = st->lines + st->n_lines;
	uint64_t h = lines_hash(l, n);
	uint64_t *slot = u64map_get(&st->frame_index, h);
	struct stored_frame *f;
	bool added;

	if (slot) {
		f = &st->frames[*slot - 1];
		if (f->n == n && lines_equal(st->lines + f->first, l, n)) {
			*ret = (uint32_t)(*slot - 1);
			return 0;
		}
	}
	if (st->n_frames >= FRAME_ADDRESS_MASK ||
	    array_grow((void **)&st->frames, &st->cap_frames, st->n_frames + 1, sizeof(*st->frames), 64) < 0)
		return -ENOMEM;
	f = &st->frames[st->n_frames];
	*f = (struct stored_frame){ .first = (uint32_t)st->n_lines, .n = (uint32_t)n, .hash = h };
	st->n_lines += n;
	*ret = (uint32_t)st->n_frames++;
	if (!slot && (slot = u64map_upsert(&st->frame_index, h, &added)))
		*slot = *ret + 1ULL;
	return 0;
}

void stored_done(struct stored *st)
{
	free(st->pool);
	u64map_done(&st->pool_index);
	free(st->lines);
	free(st->frames);
	u64map_done(&st->frame_index);
	free(st->modules);
	*st = (struct stored){ 0 };
}

size_t stored_memory(const struct stored *st)
{
	return st->pool_cap + u64map_memory(&st->pool_index) + st->cap_lines * sizeof(*st->lines) +
	       st->cap_frames * sizeof(*st->frames) + u64map_memory(&st->frame_index) +
	       (st->modules ? (FRAME_MODULE_RESTORED_LAST - FRAME_MODULE_RESTORED_FIRST + 1) *
				      sizeof(*st->modules) : 0);
}

/* A copy of what st holds for the frames whose bit is set in used, under
 * the same ids (the stacks name them by id); the others keep their id and
 * resolve to nothing, no stack naming them.  Without the indexes, which
 * only reading segments needs.  Returns 0 or -ENOMEM (st untouched). */
static int stored_compact(struct stored *st, const uint64_t *used)
{
	size_t cap = FRAME_MODULE_RESTORED_LAST - FRAME_MODULE_RESTORED_FIRST + 1;
	_cleanup_(stored_done) struct stored nt = { 0 };

	if (st->n_modules && !(nt.modules = calloc(cap, sizeof(*nt.modules))))
		return -ENOMEM;
	for (size_t i = 0; i < st->n_modules; i++)
		if (stored_intern(&nt, st->pool + st->modules[i].path, &nt.modules[i].path) < 0 ||
		    stored_intern(&nt, st->pool + st->modules[i].build_id, &nt.modules[i].build_id) < 0)
			return -ENOMEM;
	nt.n_modules = st->n_modules;
	if (st->n_frames && !(nt.frames = calloc(st->n_frames, sizeof(*nt.frames))))
		return -ENOMEM;
	nt.n_frames = nt.cap_frames = st->n_frames;
	for (size_t id = 0; id < st->n_frames; id++) {
		const struct stored_frame *f = &st->frames[id];

		if (!(used[id / 64] >> (id % 64) & 1))
			continue;
		if (array_grow((void **)&nt.lines, &nt.cap_lines, nt.n_lines + f->n, sizeof(*nt.lines), 64) < 0)
			return -ENOMEM;
		for (size_t i = 0; i < f->n; i++) {
			const struct stored_line *l = &st->lines[f->first + i];
			struct stored_line *to = &nt.lines[nt.n_lines + i];

			*to = *l;
			if (stored_intern(&nt, st->pool + l->function, &to->function) < 0 ||
			    (l->file && stored_intern(&nt, st->pool + l->file, &to->file) < 0))
				return -ENOMEM;
		}
		nt.frames[id] = (struct stored_frame){ .first = (uint32_t)nt.n_lines, .n = f->n,
						       .hash = f->hash };
		nt.n_lines += f->n;
	}
	u64map_done(&nt.pool_index);
	stored_done(st);
	*st = nt;
	nt = (struct stored){ 0 };
	return 0;
}

size_t persist_resolve(const struct persist *ps, uint64_t frame, bool lines,
		       struct frame_record *out, size_t cap)
{
	const struct stored *st = &ps->stored;
	uint64_t id = frame_address(frame);
	const struct stored_frame *f;
	size_t n;

	if (cap < 1)
		return 0;
	if (id >= st->n_frames || !st->frames[id].n) {
		out[0] = (struct frame_record){ .kind = FRAME_KIND_SPECIAL, .function = "[unknown]" };
		return 1;
	}
	f = &st->frames[id];
	n = MIN((size_t)f->n, cap);
	for (size_t i = 0; i < n; i++) {
		const struct stored_line *l = &st->lines[f->first + i];

		out[i] = (struct frame_record){
			.kind = (enum frame_kind)l->kind,
			.function = st->pool + l->function,
			.file = l->file ? st->pool + l->file : NULL,
			.line = l->line,
			.start_line = l->start_line,
			.module = l->module,
			.offset = l->offset,
			.symbol_offset = l->symbol_offset,
		};
	}
	/* Without lines a native frame is what its symbol table names: the
	 * outermost record, as the symbolizer gives it. */
	if (!lines && out[0].kind == FRAME_KIND_NATIVE) {
		out[0].file = NULL;
		out[0].line = out[0].start_line = 0;
		return 1;
	}
	return n;
}

bool persist_describe_module(const struct persist *ps, uint16_t module, const char **ret_path,
			     const char **ret_build_id)
{
	const struct stored *st = &ps->stored;
	size_t i = (size_t)module - FRAME_MODULE_RESTORED_FIRST;

	if (module < FRAME_MODULE_RESTORED_FIRST || i >= st->n_modules)
		return false;
	*ret_path = st->pool + st->modules[i].path;
	*ret_build_id = st->pool + st->modules[i].build_id;
	return true;
}

void stored_trim(struct persist *ps, struct aggregator *a)
{
	struct stacktab *stacks = aggregator_stacks(a);
	size_t refs = stacktab_stored_frames(stacks);
	_cleanup_free_ uint64_t *used = NULL;

	if (!ps->stored.n_frames || refs > ps->stored_refs / 2)
		return;
	if (!refs) {
		stored_done(&ps->stored);
		ps->stats.restored_table_freed++;
	} else if ((used = calloc((ps->stored.n_frames + 63) / 64, sizeof(*used)))) {
		stacktab_mark_stored(stacks, used, ps->stored.n_frames);
		if (stored_compact(&ps->stored, used) == 0)
			ps->stats.restored_table_compacted++;
	}
	ps->stored_refs = refs;
	aggregator_set_restored_table_bytes(a, stored_memory(&ps->stored));
}
