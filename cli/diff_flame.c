/* SPDX-License-Identifier: MIT */
/*
 * diff_flame.c - `perfctl diff --format html|svg`: the differential flame
 * graph of two profiles, drawn by the daemon's flame graph writers
 * (daemon/encode/flame.h: the page of `snapshot --format html`, the SVG of
 * `--format svg`), so it reads, zooms and searches as every perfd flame
 * graph does.
 *
 * Design: the graph is AFTER's call tree, each frame coloured by the
 * change of its total share since BEFORE (flame.h).  Frames are matched
 * as diff.c matches functions: by name and side of the kernel boundary (a
 * folded file knows no files), along the path from the root, so a node is
 * "f called from g called from main" on both sides.  Frames only BEFORE
 * has must not vanish, as they would in a graph of AFTER alone: the tree
 * is the union of both, so they are nodes of width 0 at AFTER's widths,
 * counted in the header, named in their callers' figures, and drawn (in
 * blue) when the page is switched to BEFORE's widths - what Brendan
 * Gregg's differential graphs offer as the "negated" graph of BEFORE, and
 * Pyroscope's diff view by drawing the union.  Widths stay AFTER's by
 * default, as in Gregg's: the graph shows the program as it is now,
 * what changed painted on it.  Memory profiles leave kernel frames out,
 * as diff does.
 *
 * Frames are named as in diff's table, a kernel one "name_[k]": the
 * colours say the change, not the kind.  A frame's key in the tree is its function's string id in AFTER (ids
 * are unique per text), or, for a name AFTER lacks, AFTER's text length
 * plus its id in BEFORE, doubled with the kernel bit: one number per name
 * and side, no second string table.  Cost: one pass over each profile's
 * frames, and the tree (~40 bytes a node) with 16 bytes of BEFORE's
 * values a node.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/u64map.h"
#include "diff.h"
#include "encode/flame.h"
#include "perfd/macro.h"

enum { KIND_USER, KIND_KERNEL, N_KINDS };
static const char *const kind_names[N_KINDS] = { "user", "kernel" };

struct builder {
	const struct profile *before, *after;
	bool skip_kernel;
	struct calltree t;
	struct flame_before *values; /* BEFORE's, per node */
	size_t n_values, cap_values;
	uint32_t *key[2]; /* per frame of before (0) and after (1) */
};

/* The tree key of every frame of p: after's own string ids, or past them
 * for names only before has. */
static int make_keys(struct builder *b, const struct profile *p, bool after, uint32_t **ret)
{
	uint32_t *keys = malloc((p->n_frames ? p->n_frames : 1) * sizeof(*keys));

	if (!keys)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_frames; i++) {
		const struct profile_frame *fr = &p->frames[i];
		int64_t id = fr->function;

		if (!after) {
			const char *name = profile_string(p, fr->function);

			id = profile_find_string(b->after, name, strlen(name));
			if (id < 0)
				id = (int64_t)b->after->text_len + fr->function;
		}
		if (id >= (int64_t)1 << 30) {
			free(keys);
			return -E2BIG;
		}
		keys[i] = (uint32_t)id << 1 | fr->kernel;
	}
	*ret = keys;
	return 0;
}

/* BEFORE's values of every node so far, the new ones zero. */
static int cover_nodes(struct builder *b)
{
	if (b->t.n <= b->n_values)
		return 0;
	if (array_grow((void **)&b->values, &b->cap_values, b->t.n, sizeof(*b->values), 1024) < 0)
		return -ENOMEM;
	memset(b->values + b->n_values, 0, (b->t.n - b->n_values) * sizeof(*b->values));
	b->n_values = b->t.n;
	return 0;
}

/* Adds p's stacks: to the nodes' values for after, to BEFORE's for before. */
static int add_stacks(struct builder *b, const struct profile *p, bool after)
{
	const uint32_t *keys = b->key[after];

	for (size_t i = 0; i < p->n_stacks; i++) {
		const struct profile_stack *s = &p->stacks[i];
		int64_t at = CALLTREE_NO_PARENT;

		for (uint32_t k = 0; k < s->depth; k++) {
			uint32_t frame = p->pool[s->first + k];

			if (b->skip_kernel && p->frames[frame].kernel)
				continue;
			at = calltree_node(&b->t, (uint32_t)at, keys[frame]);
			if (at < 0 || cover_nodes(b) < 0)
				return -ENOMEM;
			if (after)
				b->t.nodes[at].total += s->value;
			else
				b->values[at].total += s->value;
		}
		if (at == CALLTREE_NO_PARENT)
			continue; /* no frame left: the value stays in "all" */
		if (after)
			b->t.nodes[at].self += s->value;
		else
			b->values[at].self += s->value;
	}
	return 0;
}

/* The text of a tree key. */
static const char *key_text(const struct builder *b, uint32_t key)
{
	uint32_t id = key >> 1;

	if (id < b->after->text_len)
		return profile_string(b->after, id);
	return profile_string(b->before, (uint32_t)(id - b->after->text_len));
}

/* Names the kept nodes, one name per key. */
static int name_nodes(struct builder *b, struct flame *f)
{
	struct u64map names;
	int r = 0;

	u64map_init(&names);
	for (uint32_t i = 0; i < b->t.n && r == 0; i++) {
		uint32_t key = b->t.nodes[i].frame;
		const char *text;
		uint64_t *v;
		bool fresh;
		int64_t k;

		if (!flame_kept(f, i))
			continue;
		v = u64map_upsert(&names, key, &fresh);
		if (!v) {
			r = -ENOMEM;
			break;
		}
		if (!fresh) {
			f->node_name[i] = (uint32_t)*v;
			continue;
		}
		text = key_text(b, key);
		r = flame_text(f, text, strlen(text));
		if (r == 0 && (key & 1))
			r = flame_text(f, "_[k]", 4); /* as folded output and diff's table name it */
		k = r < 0 ? r : flame_name_end(f, key & 1 ? KIND_KERNEL : KIND_USER, 0);
		if (k < 0) {
			u64map_remove(&names, key);
			r = (int)k;
			break;
		}
		*v = (uint64_t)k;
		f->node_name[i] = (uint32_t)k;
	}
	u64map_done(&names);
	return r < 0 ? r : flame_finish(f);
}

struct buffer {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void put_buffer(void *ctx, const char *s, size_t n)
{
	struct buffer *o = ctx;

	if (o->oom || n == 0)
		return;
	if (array_grow((void **)&o->buf, &o->cap, o->len + n, 1, 1 << 16) < 0) {
		o->oom = true;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

static bool reserve_buffer(void *ctx, size_t n)
{
	struct buffer *o = ctx;

	if (!o->oom && array_grow((void **)&o->buf, &o->cap, o->len + n, 1, 1 << 16) < 0)
		o->oom = true;
	return !o->oom;
}

int diff_flame(const struct profile *before, const struct profile *after,
	       const struct diff_flame_opts *o, char **ret, size_t *ret_len)
{
	struct builder b = { .before = before, .after = after, .skip_kernel = o->skip_kernel };
	struct flame f = { 0 };
	struct buffer out = { 0 };
	int r;

	calltree_init(&b.t);
	r = make_keys(&b, after, true, &b.key[1]);
	if (r == 0)
		r = make_keys(&b, before, false, &b.key[0]);
	if (r == 0)
		r = add_stacks(&b, after, true);
	if (r == 0)
		r = add_stacks(&b, before, false);
	if (r == 0)
		r = calltree_link(&b.t) ?: cover_nodes(&b);
	if (r == 0)
		r = flame_init(&f, &b.t, &(struct flame_opts){
			.kind = profile_string(after, after->kind),
			.unit = profile_string(after, after->unit),
			/* time only where both sides' samples stand for the same */
			.period_ns = before->period_ns == after->period_ns ? after->period_ns : 0,
			.total = after->total,
			.kinds = kind_names,
			.n_kinds = N_KINDS,
			.min_share = o->svg ? FLAME_SVG_MIN_SHARE : FLAME_PAGE_MIN_SHARE,
			.before = b.values,
			.before_total = before->total,
			.before_source = o->before_source,
			.after_source = o->after_source,
		});
	if (r == 0)
		r = name_nodes(&b, &f);
	if (r == 0)
		r = o->svg ? flame_svg_write(&f, &(struct flame_out){ put_buffer, &out, reserve_buffer })
			   : flame_page_write(&f, &(struct flame_out){ put_buffer, &out, reserve_buffer });
	if (r == 0 && out.oom)
		r = -ENOMEM;
	flame_done(&f);
	calltree_done(&b.t);
	free(b.values);
	free(b.key[0]);
	free(b.key[1]);
	if (r < 0) {
		free(out.buf);
		return r;
	}
	*ret = out.buf;
	*ret_len = out.len;
	return 0;
}
