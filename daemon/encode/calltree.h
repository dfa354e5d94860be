/* SPDX-License-Identifier: MIT */
/*
 * calltree.h - stacks merged into one call tree, for the encoders that
 * show a tree (json.c for scripts, the flame graphs of encode/flame.h) and
 * for perfctl's differential flame graph (cli/diff_flame.c), which builds
 * one from two profiles read back: the tree itself knows frames only as
 * numbers, so it needs no model.
 *
 * calltree_build() makes the model's tree: one root per process (nodes 0
 * .. n_processes-1), then, with threads, one node per thread under it,
 * then one node per frame: a frame is one line of a location (an inlined
 * function is a frame of its own), numbered in the frames table in the
 * order first met.  Nodes are interned by (parent, frame) in a hash map
 * (calltree_node()), so building is one pass over the stacks' frames; once
 * calltree_link() has run, each node's children, and the roots, are listed
 * largest total first.  Memory: ~40 bytes a node plus ~20 a frame, bounded
 * by the stacks' frames.
 */
#ifndef PERFD_CALLTREE_H
#define PERFD_CALLTREE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"

/* Only calltree_build() and calltree_frame_line() know the model, so that
 * perfctl, whose profiles are not the daemon's, can use the tree. */
struct model;
struct model_line;

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
	uint32_t first_root, n_roots; /* the roots' run of children */
	/* frames table: (location, line index) -> index */
	struct u64map frame_index;
	uint64_t *frames; /* location << 8 | line index */
	size_t n_frames, cap_frames;
};

/* Builds m's tree into t (zeroed by the caller), giving up once *cancel
 * is set (NULL: never; looked at every CALLTREE_CANCEL_EVERY samples: a
 * tree of 16k 100-frame stacks takes most of a second).  Returns 0,
 * -ENOMEM or -ECANCELED; calltree_done() frees t either way. */
int calltree_build(struct calltree *t, const struct model *m, const atomic_bool *cancel);
#define CALLTREE_CANCEL_EVERY 256
void calltree_done(struct calltree *t);

/* A tree built by hand: calltree_init() t, then calltree_node() for every
 * frame of every stack (adding the values to the nodes it returns), then
 * calltree_link() once; calltree_done() frees it. */
void calltree_init(struct calltree *t);

/* The node of frame under parent (CALLTREE_NO_PARENT: a root), added with
 * zero values when new.  Returns its index, stable while t grows (t->nodes
 * may move), or -ENOMEM. */
int64_t calltree_node(struct calltree *t, uint32_t parent, uint32_t frame);

/* Lists each node's children and the roots, largest total first (ties by
 * frame).  Returns 0 or -ENOMEM. */
int calltree_link(struct calltree *t);

static inline uint32_t calltree_root(const struct calltree *t, uint32_t i)
{
	return t->children[t->first_root + i];
}

static inline const struct calltree_node *calltree_child(const struct calltree *t,
							 const struct calltree_node *n, uint32_t i)
{
	return &t->nodes[t->children[n->first_child + i]];
}

static inline uint32_t calltree_frame_location(const struct calltree *t, size_t frame)
{
	return (uint32_t)(t->frames[frame] >> 8);
}

/* The line (in m->lines) frame stands for, in a tree of calltree_build(). */
const struct model_line *calltree_frame_line(const struct calltree *t, const struct model *m,
					     size_t frame);

#endif
