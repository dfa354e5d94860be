/* SPDX-License-Identifier: MIT */
/*
 * json.c - the resolved call tree as JSON, for scripts.
 *
 *   { "kind": "cpu", "unit": "samples", "period_ns": N, "total": T,
 *     "frames": [ { "kind", "function", "file", "line", "module",
 *                   "build_id", "offset", "inlined_by" }, ... ],
 *     "processes": [ { "pid", "ns_pid", "comm", "start_time_ns", "cgroup",
 *                      "unit", "exited", "total",
 *                      "tree": { "total", "self", "children": [ NODE ] } } ] }
 *   NODE = { "frame": index in frames, "self", "total", "children": [...] }
 *        | { "thread": { "tid", "comm" }, "self": 0, "total", "children" }
 *
 * Each function inlined at an address is a frame of its own, "inlined_by"
 * naming the frame it was inlined into, so a node is one function at one
 * line and a function's self and total time are sums over its nodes.
 * Children come largest total first.  Strings absent from a frame (no
 * file, no module) are left out rather than empty.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "encode/encode.h"
#include "perfd/macro.h"

#define NO_PARENT UINT32_MAX
#define THREAD_FRAME (1u << 31) /* a node's frame that names a thread */

struct node {
	uint32_t parent;
	uint32_t frame; /* index in the frames table, or THREAD_FRAME | sample */
	uint64_t self, total;
	uint32_t first_child, n_children; /* in the children array */
	uint32_t comm;                    /* a thread node's comm (string id) */
};

struct tree {
	struct node *nodes;
	size_t n, cap;
	struct u64map index; /* hash(parent, frame) (+ probing) -> node */
	uint32_t *children;
	/* frames table: (location, line index) -> index */
	struct u64map frame_index;
	uint64_t *frames; /* location << 8 | line index */
	size_t n_frames, cap_frames;
};

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t c;
	void *q;

	if (need <= *cap)
		return 0;
	c = MAX(*cap * 2, need + 256);
	q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

static int64_t frame_id(struct tree *t, uint32_t location, uint32_t line)
{
	uint64_t key = (uint64_t)location << 8 | line;
	bool fresh;
	uint64_t *v = u64map_upsert(&t->frame_index, key, &fresh);

	if (!v)
		return -ENOMEM;
	if (!fresh)
		return (int64_t)*v;
	if (grow((void **)&t->frames, &t->cap_frames, t->n_frames + 1, sizeof(*t->frames)) < 0) {
		u64map_remove(&t->frame_index, key);
		return -ENOMEM;
	}
	t->frames[t->n_frames] = key;
	*v = t->n_frames;
	return (int64_t)t->n_frames++;
}

/* The child of parent for frame, added when new. */
static int64_t child(struct tree *t, uint32_t parent, uint32_t frame)
{
	uint64_t h = hash_u64((uint64_t)parent << 32 | frame);

	for (uint64_t key = h & ~1ULL;; key = (key + 2) & ~1ULL) {
		bool fresh;
		uint64_t *v = u64map_upsert(&t->index, key, &fresh);

		if (!v)
			return -ENOMEM;
		if (!fresh) {
			if (t->nodes[*v].parent != parent || t->nodes[*v].frame != frame)
				continue;
			return (int64_t)*v;
		}
		if (grow((void **)&t->nodes, &t->cap, t->n + 1, sizeof(*t->nodes)) < 0) {
			u64map_remove(&t->index, key);
			return -ENOMEM;
		}
		t->nodes[t->n] = (struct node){ .parent = parent, .frame = frame };
		*v = t->n;
		return (int64_t)t->n++;
	}
}

static int build(struct tree *t, const struct model *m)
{
	/* one root per process: nodes 0..n_processes-1 */
	for (size_t i = 0; i < m->n_processes; i++)
		if (child(t, NO_PARENT, (uint32_t)i) < 0)
			return -ENOMEM;
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];
		int64_t at = (int64_t)s->process;

		t->nodes[at].total += s->value;
		if (m->threads) {
			at = child(t, (uint32_t)at, THREAD_FRAME | s->tid);
			if (at < 0)
				return -ENOMEM;
			t->nodes[at].total += s->value;
			t->nodes[at].comm = s->thread_comm;
		}
		for (uint32_t k = 0; k < s->depth; k++) {
			uint32_t loc = m->stack_pool[s->first + k];

			for (uint32_t ln = 0; ln < m->locations[loc].n_lines; ln++) {
				int64_t f = frame_id(t, loc, ln);

				if (f < 0 || (at = child(t, (uint32_t)at, (uint32_t)f)) < 0)
					return -ENOMEM;
				t->nodes[at].total += s->value;
			}
		}
		t->nodes[at].self += s->value;
	}
	return 0;
}

static const struct tree *sort_tree;

static int by_parent_then_total(const void *x, const void *y)
{
	const struct node *a = &sort_tree->nodes[*(const uint32_t *)x],
			  *b = &sort_tree->nodes[*(const uint32_t *)y];

	if (a->parent != b->parent)
		return a->parent < b->parent ? -1 : 1;
	if (a->total != b->total)
		return a->total < b->total ? 1 : -1;
	return a->frame < b->frame ? -1 : a->frame > b->frame;
}

/* Lists each node's children, largest first. */
static int link_children(struct tree *t)
{
	t->children = malloc((t->n ? t->n : 1) * sizeof(*t->children));
	if (!t->children)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++)
		t->children[i] = (uint32_t)i;
	sort_tree = t;
	qsort_safe(t->children, t->n, sizeof(*t->children), by_parent_then_total);
	sort_tree = NULL;
	for (size_t i = 0; i < t->n; i++) {
		const struct node *c = &t->nodes[t->children[i]];

		if (c->parent == NO_PARENT)
			continue;
		if (t->nodes[c->parent].n_children++ == 0)
			t->nodes[c->parent].first_child = (uint32_t)i;
	}
	return 0;
}

static void write_node(const struct tree *t, const struct model *m, uint32_t id,
		       struct jsonw *w)
{
	const struct node *n = &t->nodes[id];

	jsonw_object_begin(w);
	if (n->parent != NO_PARENT && (n->frame & THREAD_FRAME)) {
		jsonw_key(w, "thread");
		jsonw_object_begin(w);
		jsonw_kv_u64(w, "tid", n->frame & ~THREAD_FRAME);
		jsonw_kv_string(w, "comm", model_string(m, n->comm));
		jsonw_object_end(w);
	} else if (n->parent != NO_PARENT) {
		jsonw_kv_u64(w, "frame", n->frame);
	}
	jsonw_kv_u64(w, "self", n->self);
	jsonw_kv_u64(w, "total", n->total);
	jsonw_key(w, "children");
	jsonw_array_begin(w);
	for (uint32_t i = 0; i < n->n_children; i++)
		write_node(t, m, t->children[n->first_child + i], w);
	jsonw_array_end(w);
	jsonw_object_end(w);
}

static void write_frame(const struct tree *t, const struct model *m, size_t i, struct jsonw *w)
{
	uint32_t loc = (uint32_t)(t->frames[i] >> 8), ln = (uint32_t)(t->frames[i] & 0xff);
	const struct model_location *l = &m->locations[loc];
	const struct model_line *line = &m->lines[l->first_line + ln];
	const struct model_function *f = &m->functions[line->function];

	jsonw_object_begin(w);
	jsonw_kv_string(w, "kind", frame_kind_names[f->kind]);
	jsonw_kv_string(w, "function", model_string(m, f->name));
	if (f->file) {
		jsonw_kv_string(w, "file", model_string(m, f->file));
		if (line->line)
			jsonw_kv_u64(w, "line", line->line);
	}
	if (l->mapping) {
		const struct model_mapping *mp = &m->mappings[l->mapping - 1];

		jsonw_kv_string(w, "module", model_string(m, mp->path));
		if (mp->build_id)
			jsonw_kv_string(w, "build_id", model_string(m, mp->build_id));
	}
	if (f->kind != FRAME_KIND_SPECIAL && f->kind != FRAME_KIND_PYTHON)
		jsonw_kv_u64(w, "offset", l->offset);
	if (ln > 0) {
		uint64_t *outer = u64map_get(&t->frame_index, (uint64_t)loc << 8 | (ln - 1));

		if (outer)
			jsonw_kv_u64(w, "inlined_by", *outer);
	}
	jsonw_object_end(w);
}

int json_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w)
{
	struct tree t = { 0 };
	int r;

	u64map_init(&t.index);
	u64map_init(&t.frame_index);
	r = build(&t, m);
	if (r == 0)
		r = link_children(&t);
	if (r == 0) {
		jsonw_object_begin(w);
		jsonw_kv_string(w, "kind", profile_kinds[m->kind].name);
		jsonw_kv_string(w, "unit", profile_kinds[m->kind].unit);
		if (m->kind == PROFILE_KIND_CPU)
			jsonw_kv_u64(w, "period_ns", o->period_ns);
		jsonw_kv_u64(w, "total", m->total);
		jsonw_key(w, "frames");
		jsonw_array_begin(w);
		for (size_t i = 0; i < t.n_frames; i++)
			write_frame(&t, m, i, w);
		jsonw_array_end(w);
		jsonw_key(w, "processes");
		jsonw_array_begin(w);
		for (size_t i = 0; i < m->n_processes; i++) {
			const struct model_process *p = &m->processes[i];

			jsonw_object_begin(w);
			jsonw_kv_u64(w, "pid", p->pid);
			jsonw_kv_u64(w, "ns_pid", p->ns_pid);
			jsonw_kv_string(w, "comm", model_string(m, p->comm));
			jsonw_kv_u64(w, "start_time_ns", p->start_time_ns);
			if (p->cgroup)
				jsonw_kv_string(w, "cgroup", model_string(m, p->cgroup));
			if (p->unit)
				jsonw_kv_string(w, "unit", model_string(m, p->unit));
			jsonw_kv_bool(w, "exited", p->exited);
			jsonw_kv_u64(w, "total", p->total);
			jsonw_key(w, "tree");
			write_node(&t, m, (uint32_t)i, w);
			jsonw_object_end(w);
		}
		jsonw_array_end(w);
		jsonw_object_end(w);
		r = jsonw_error(w);
	}
	free(t.nodes);
	free(t.children);
	free(t.frames);
	u64map_done(&t.index);
	u64map_done(&t.frame_index);
	return r;
}
