/* SPDX-License-Identifier: MIT */
/*
 * calltree.h - the model's samples merged into one call tree, for the
 * encoders that show a tree (json.c for scripts, html.c's flame graph).
 *
 * One root per process (nodes 0 .. n_processes-1), then, with threads, one
 * node per thread under it, then one node per frame: a frame is one line of
 * a location (an inlined function is a frame of its own), numbered in the
 * frames table in the order first met.  Nodes are interned by (parent,
 * frame) in a hash map, so building is one pass over the samples' frames;
 * each node's children are listed largest total first.  Memory: ~40 bytes
 * a node plus ~20 a frame, bounded by the model's stack frames.
 */
#ifndef PERFD_CALLTREE_H
#define PERFD_CALLTREE_H

#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "profile/model.h"

#define CALLTREE_NO_PARENT UINT32_MAX
#define CALLTREE_THREAD (1u << 31) /* a node's frame that names a thread */

struct calltree_node {
	uint32_t parent;
	uint32_t frame; /* index in the frames table, or CALLTREE_THREAD | tid */
	uint64_t self, total;
	uint32_t first_child, n_children; /* in the children array */
	uint32_t comm;                    /* a thread node's comm (string id) */
};

struct calltree {
	struct calltree_node *nodes;
	size_t n, cap;
	struct u64map index; /* hash(parent, frame) (+ probing) -> node */
	uint32_t *children;
	/* frames table: (location, line index) -> index */
	struct u64map frame_index;
	uint64_t *frames; /* location << 8 | line index */
	size_t n_frames, cap_frames;
};

/* Builds m's tree into t (zeroed by the caller).  Returns 0 or -ENOMEM;
 * calltree_done() frees t either way. */
int calltree_build(struct calltree *t, const struct model *m);
void calltree_done(struct calltree *t);

static inline const struct calltree_node *calltree_child(const struct calltree *t,
							 const struct calltree_node *n, uint32_t i)
{
	return &t->nodes[t->children[n->first_child + i]];
}

static inline uint32_t calltree_frame_location(const struct calltree *t, size_t frame)
{
	return (uint32_t)(t->frames[frame] >> 8);
}

/* The line (in m->lines) frame stands for. */
static inline const struct model_line *calltree_frame_line(const struct calltree *t,
							   const struct model *m, size_t frame)
{
	const struct model_location *l = &m->locations[calltree_frame_location(t, frame)];

	return &m->lines[l->first_line + (t->frames[frame] & 0xff)];
}

#endif
