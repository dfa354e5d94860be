/* SPDX-License-Identifier: MIT */
/*
 * stacktab.h - the table of interned stacks.
 *
 * Each distinct stack (a sequence of frames, see frame.h, leaf first) is
 * stored once and named by a small integer id; processes and snapshots count
 * samples per id.  Stacks are reference-counted by those holders and freed
 * when the last one lets go, so memory follows what is still profiled.  The
 * table refuses (-ENOSPC) to grow past max_stacks stacks or max_frames frames
 * in all; the caller decides what to evict.
 *
 * The frames of each module in all stacks are counted (256 KiB), so that
 * the daemon knows which module ids no stack refers to any more; so are
 * the frames read back from the state directory, whose table
 * (state/persist.h) goes when no stack names one.
 *
 * Lookup is one hash of the frames and a probe of an open-addressing index
 * of ids; a hash match is confirmed by comparing the frames, so colliding
 * stacks never merge.
 */
#ifndef PERFD_STACKTAB_H
#define PERFD_STACKTAB_H

#include <stddef.h>
#include <stdint.h>

#include "profile/moduleset.h"

struct stack {
	uint64_t hash;
	uint32_t refs;
	/* One user's note on the stack, 0 when new: state/persist.c keeps
	 * the segment it was last written to (a stack freed and its id
	 * reused comes back unmarked). */
	uint32_t mark;
	uint16_t depth;
	uint16_t kernel_depth; /* the first kernel_depth frames are the kernel's */
	uint64_t frames[];     /* leaf first */
};

struct stacktab_limits {
	size_t max_stacks;
	size_t max_frames;
};

struct stacktab;

/* Returns 0 or -ENOMEM. */
int stacktab_new(const struct stacktab_limits *limits, struct stacktab **ret);
struct stacktab *stacktab_free(struct stacktab *t);

/* Finds or adds the stack and takes one reference on it.  Returns 0 and the
 * id in *ret_id, -ENOSPC when a limit forbids adding it, -ENOMEM. */
int stacktab_intern(struct stacktab *t, const uint64_t *frames, uint16_t depth,
		    uint16_t kernel_depth, uint32_t *ret_id);
void stacktab_ref(struct stacktab *t, uint32_t id);
/* Drops one reference; the stack is freed with the last. */
void stacktab_unref(struct stacktab *t, uint32_t id);
/* The stack of a live id, or NULL. */
const struct stack *stacktab_get(const struct stacktab *t, uint32_t id);

void stacktab_set_mark(struct stacktab *t, uint32_t id, uint32_t mark);
/* Adds to used every module (frame.h's file ids) a frame of a stack in t
 * is in: a count per module is kept as stacks come and go. */
void stacktab_mark_modules(const struct stacktab *t, struct module_set *used);
/* How many frames of all stacks are FRAME_MODULE_STORED ones (counted as
 * stacks come and go), and which: sets in the bitmap used (n bits) the bit
 * of each such frame's address.  The second visits every stack. */
size_t stacktab_stored_frames(const struct stacktab *t);
void stacktab_mark_stored(const struct stacktab *t, uint64_t *used, size_t n);

size_t stacktab_count(const struct stacktab *t);
size_t stacktab_frames(const struct stacktab *t);
size_t stacktab_memory(const struct stacktab *t);

uint64_t stack_hash(const uint64_t *frames, uint16_t depth, uint16_t kernel_depth);

#endif
