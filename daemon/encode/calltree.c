/* SPDX-License-Identifier: MIT */
/*
 * calltree.c - see calltree.h.  Children are sorted once, all nodes by
 * (parent, total descending, frame), so each node's children are one run
 * of the children array: O(n log n) for the whole tree, no per-node lists.
 */
#include <errno.h>
#include <stdlib.h>

#include "encode/calltree.h"
#include "perfd/macro.h"
#include "profile/model.h"

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

static int64_t frame_id(struct calltree *t, uint32_t location, uint32_t line)
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

int64_t calltree_node(struct calltree *t, uint32_t parent, uint32_t frame)
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
		t->nodes[t->n] = (struct calltree_node){ .parent = parent, .frame = frame };
		*v = t->n;
		return (int64_t)t->n++;
	}
}

const struct model_line *calltree_frame_line(const struct calltree *t, const struct model *m,
					     size_t frame)
{
	const struct model_location *l = &m->locations[calltree_frame_location(t, frame)];

	return &m->lines[l->first_line + (t->frames[frame] & 0xff)];
}

static int add_samples(struct calltree *t, const struct model *m, const atomic_bool *cancel)
{
	/* one root per process: nodes 0..n_processes-1 */
	for (size_t i = 0; i < m->n_processes; i++)
		if (calltree_node(t, CALLTREE_NO_PARENT, (uint32_t)i) < 0)
			return -ENOMEM;
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];
		int64_t at = (int64_t)s->process;

		if (cancel && i % CALLTREE_CANCEL_EVERY == 0 && atomic_load(cancel))
			return -ECANCELED;

		t->nodes[at].total += s->value;
		if (m->threads) {
			at = calltree_node(t, (uint32_t)at, CALLTREE_THREAD | s->tid);
			if (at < 0)
				return -ENOMEM;
			t->nodes[at].total += s->value;
			t->nodes[at].comm = s->thread_comm;
		}
		for (uint32_t k = 0; k < s->depth; k++) {
			uint32_t loc = m->stack_pool[s->first + k];

			for (uint32_t ln = 0; ln < m->locations[loc].n_lines; ln++) {
				int64_t f = frame_id(t, loc, ln);

				if (f < 0 || (at = calltree_node(t, (uint32_t)at, (uint32_t)f)) < 0)
					return -ENOMEM;
				t->nodes[at].total += s->value;
			}
		}
		t->nodes[at].self += s->value;
	}
	return 0;
}

static int by_parent_then_total(const void *x, const void *y, void *ctx)
{
	const struct calltree *sort_tree = ctx;
	const struct calltree_node *a = &sort_tree->nodes[*(const uint32_t *)x],
			  *b = &sort_tree->nodes[*(const uint32_t *)y];

	if (a->parent != b->parent)
		return a->parent < b->parent ? -1 : 1;
	if (a->total != b->total)
		return a->total < b->total ? 1 : -1;
	return a->frame < b->frame ? -1 : a->frame > b->frame;
}

int calltree_link(struct calltree *t)
{
	t->children = malloc((t->n ? t->n : 1) * sizeof(*t->children));
	if (!t->children)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++)
		t->children[i] = (uint32_t)i;
	qsort_r_safe(t->children, t->n, sizeof(*t->children), by_parent_then_total, t);
	for (size_t i = 0; i < t->n; i++) {
		const struct calltree_node *c = &t->nodes[t->children[i]];

		if (c->parent == CALLTREE_NO_PARENT) {
			if (t->n_roots++ == 0)
				t->first_root = (uint32_t)i;
			continue;
		}
		if (t->nodes[c->parent].n_children++ == 0)
			t->nodes[c->parent].first_child = (uint32_t)i;
	}
	return 0;
}

void calltree_init(struct calltree *t)
{
	*t = (struct calltree){ 0 };
	u64map_init(&t->index);
	u64map_init(&t->frame_index);
}

int calltree_build(struct calltree *t, const struct model *m, const atomic_bool *cancel)
{
	int r;

	calltree_init(t);
	r = add_samples(t, m, cancel);
	return r < 0 ? r : calltree_link(t);
}

void calltree_done(struct calltree *t)
{
	free(t->nodes);
	free(t->children);
	free(t->frames);
	u64map_done(&t->index);
	u64map_done(&t->frame_index);
	*t = (struct calltree){ 0 };
}
