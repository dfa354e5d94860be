/* SPDX-License-Identifier: MIT */
/* stacktab.c - see stacktab.h for the design. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "profile/frame.h"
#include "profile/stacktab.h"
#include "base/u64map.h"

#define INDEX_EMPTY UINT32_MAX

struct stacktab {
	struct stacktab_limits limits;
	struct stack **by_id; /* id -> stack, NULL for a free id */
	uint32_t ids_allocated; /* ids handed out so far, live or free */
	uint32_t ids_capacity;
	uint32_t *free_ids; /* stack of ids to reuse */
	uint32_t n_free;
	uint32_t *index; /* open addressing over ids, INDEX_EMPTY when free */
	size_t index_mask;
	size_t count;
	size_t frames;
	size_t bytes; /* of the stacks themselves */
	/* module id -> frames of it in all stacks; NULL until a stack has one */
	uint32_t *module_frames;
	size_t stored_frames; /* FRAME_MODULE_STORED frames in all stacks */
};

/* Counts the frames of s in module_frames, up (+1) or down (-1). */
static void count_modules(struct stacktab *t, const struct stack *s, int delta)
{
	for (uint16_t i = 0; i < s->depth; i++) {
		uint16_t m = frame_module(s->frames[i]);

		if (m >= FRAME_MODULE_FIRST && m <= FRAME_MODULE_LAST)
			t->module_frames[m] += (uint32_t)delta;
		else if (m == FRAME_MODULE_STORED)
			t->stored_frames += (size_t)(ssize_t)delta;
	}
}

uint64_t stack_hash(const uint64_t *frames, uint16_t depth, uint16_t kernel_depth)
{
	uint64_t h = hash_u64(((uint64_t)depth << 16) | kernel_depth);

	for (uint16_t i = 0; i < depth; i++)
		h = hash_u64(h ^ frames[i]) + i;
	return h;
}

int stacktab_new(const struct stacktab_limits *limits, struct stacktab **ret)
{
	struct stacktab *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->limits = *limits;
	*ret = t;
	return 0;
}

struct stacktab *stacktab_free(struct stacktab *t)
{
	if (!t)
		return NULL;
	for (uint32_t i = 0; i < t->ids_allocated; i++)
		free(t->by_id[i]);
	free(t->by_id);
	free(t->free_ids);
	free(t->index);
	free(t->module_frames);
	free(t);
	return NULL;
}

static bool same(const struct stack *s, uint64_t hash, const uint64_t *frames,
		 uint16_t depth, uint16_t kernel_depth)
{
	return s->hash == hash && s->depth == depth &&
	       s->kernel_depth == kernel_depth &&
	       memcmp(s->frames, frames, depth * sizeof(uint64_t)) == 0;
}

static size_t index_find_slot(const struct stacktab *t, uint64_t hash,
			      const uint64_t *frames, uint16_t depth,
			      uint16_t kernel_depth)
{
	size_t i;

	for (i = hash & t->index_mask; t->index[i] != INDEX_EMPTY;
	     i = (i + 1) & t->index_mask)
		if (same(t->by_id[t->index[i]], hash, frames, depth, kernel_depth))
			break;
	return i;
}

static int index_grow(struct stacktab *t)
{
	size_t cap = t->index ? (t->index_mask + 1) * 2 : 1024;
	uint32_t *index = malloc(cap * sizeof(*index));

	if (!index)
		return -ENOMEM;
	for (size_t i = 0; i < cap; i++)
		index[i] = INDEX_EMPTY;
	for (uint32_t id = 0; id < t->ids_allocated; id++) {
		size_t j;

		if (!t->by_id[id])
			continue;
		for (j = t->by_id[id]->hash & (cap - 1); index[j] != INDEX_EMPTY;
		     j = (j + 1) & (cap - 1))
			;
		index[j] = id;
	}
	free(t->index);
	t->index = index;
	t->index_mask = cap - 1;
	return 0;
}

static int take_id(struct stacktab *t, uint32_t *ret_id)
{
	if (t->n_free > 0) {
		*ret_id = t->free_ids[--t->n_free];
		return 0;
	}
	if (t->ids_allocated == INDEX_EMPTY)
		return -ENOSPC;
	if (t->ids_allocated == t->ids_capacity) {
		uint32_t cap = t->ids_capacity ? t->ids_capacity * 2 : 256;
		struct stack **by_id = realloc(t->by_id, cap * sizeof(*by_id));
		uint32_t *free_ids;

		if (!by_id)
			return -ENOMEM;
		t->by_id = by_id;
		free_ids = realloc(t->free_ids, cap * sizeof(*free_ids));
		if (!free_ids)
			return -ENOMEM;
		t->free_ids = free_ids;
		t->ids_capacity = cap;
	}
	*ret_id = t->ids_allocated++;
	return 0;
}

int stacktab_intern(struct stacktab *t, const uint64_t *frames, uint16_t depth,
		    uint16_t kernel_depth, uint32_t *ret_id)
{
	uint64_t hash = stack_hash(frames, depth, kernel_depth);
	struct stack *s;
	uint32_t id;
	size_t slot;
	int r;

	if (t->index) {
		slot = index_find_slot(t, hash, frames, depth, kernel_depth);
		if (t->index[slot] != INDEX_EMPTY) {
			id = t->index[slot];
			t->by_id[id]->refs++;
			*ret_id = id;
			return 0;
		}
	}

	if (t->count + 1 > t->limits.max_stacks ||
	    t->frames + depth > t->limits.max_frames)
		return -ENOSPC;
	if (!t->index || (t->count + 1) * 2 > t->index_mask + 1) {
		r = index_grow(t);
		if (r < 0)
			return r;
	}

	if (!t->module_frames) {
		t->module_frames = calloc(FRAME_MODULE_LAST + 1, sizeof(*t->module_frames));
		if (!t->module_frames)
			return -ENOMEM;
	}
	s = malloc(sizeof(*s) + depth * sizeof(uint64_t));
	if (!s)
		return -ENOMEM;
	r = take_id(t, &id);
	if (r < 0) {
		free(s);
		return r;
	}
	s->hash = hash;
	s->refs = 1;
	s->mark = 0;
	s->depth = depth;
	s->kernel_depth = kernel_depth;
	memcpy(s->frames, frames, depth * sizeof(uint64_t));
	count_modules(t, s, +1);
	t->by_id[id] = s;

	slot = index_find_slot(t, hash, frames, depth, kernel_depth);
	t->index[slot] = id;
	t->count++;
	t->frames += depth;
	t->bytes += sizeof(*s) + depth * sizeof(uint64_t);
	*ret_id = id;
	return 0;
}

const struct stack *stacktab_get(const struct stacktab *t, uint32_t id)
{
	return id < t->ids_allocated ? t->by_id[id] : NULL;
}

void stacktab_ref(struct stacktab *t, uint32_t id)
{
	if (id < t->ids_allocated && t->by_id[id])
		t->by_id[id]->refs++;
}

static void index_remove(struct stacktab *t, uint32_t id)
{
	const struct stack *s = t->by_id[id];
	size_t hole, i;

	for (hole = s->hash & t->index_mask; t->index[hole] != id;
	     hole = (hole + 1) & t->index_mask)
		;
	for (i = (hole + 1) & t->index_mask; t->index[i] != INDEX_EMPTY;
	     i = (i + 1) & t->index_mask) {
		size_t home = t->by_id[t->index[i]]->hash & t->index_mask;

		if (((i - home) & t->index_mask) >= ((i - hole) & t->index_mask)) {
			t->index[hole] = t->index[i];
			hole = i;
		}
	}
	t->index[hole] = INDEX_EMPTY;
}

void stacktab_unref(struct stacktab *t, uint32_t id)
{
	struct stack *s = (struct stack *)stacktab_get(t, id);

	if (!s || --s->refs > 0)
		return;
	index_remove(t, id);
	count_modules(t, s, -1);
	t->count--;
	t->frames -= s->depth;
	t->bytes -= sizeof(*s) + s->depth * sizeof(uint64_t);
	free(s);
	t->by_id[id] = NULL;
	t->free_ids[t->n_free++] = id;
}

void stacktab_mark_modules(const struct stacktab *t, struct module_set *used)
{
	for (uint32_t m = FRAME_MODULE_FIRST; t->module_frames && m <= FRAME_MODULE_LAST; m++)
		if (t->module_frames[m])
			module_set_add(used, (uint16_t)m);
}

size_t stacktab_stored_frames(const struct stacktab *t)
{
	return t->stored_frames;
}

void stacktab_mark_stored(const struct stacktab *t, uint64_t *used, size_t n)
{
	for (uint32_t id = 0; id < t->ids_allocated; id++) {
		const struct stack *s = t->by_id[id];

		for (uint16_t i = 0; s && i < s->depth; i++) {
			uint64_t a = frame_address(s->frames[i]);

			if (frame_module(s->frames[i]) == FRAME_MODULE_STORED && a < n)
				used[a / 64] |= 1ULL << (a % 64);
		}
	}
}

size_t stacktab_count(const struct stacktab *t)
{
	return t->count;
}

size_t stacktab_frames(const struct stacktab *t)
{
	return t->frames;
}

size_t stacktab_memory(const struct stacktab *t)
{
	return t->bytes + (size_t)t->ids_allocated * (sizeof(void *) + sizeof(uint32_t)) +
	       (t->index ? (t->index_mask + 1) * sizeof(uint32_t) : 0) +
	       (t->module_frames ? (FRAME_MODULE_LAST + 1) * sizeof(*t->module_frames) : 0);
}

void stacktab_set_mark(struct stacktab *t, uint32_t id, uint32_t mark)
{
	struct stack *s = (struct stack *)stacktab_get(t, id);

	if (s)
		s->mark = mark;
}
