/* SPDX-License-Identifier: MIT */
/*
 * persist_internal.h - what the store on disk's four files share, and
 * nothing outside state/ includes: its records, its segments, the table
 * restored frames resolve from, and struct persist itself (persist.h
 * says what they are for).
 *
 *  persist.c  the directory: opened, locked, its segments listed; stats;
 *  stored.c   the restored frames' table: what FRAME_MODULE_STORED frames
 *             resolve to, and its trimming as the stacks naming it go;
 *  restore.c  every segment of this boot read back into the store;
 *  flush.c    what was sealed since the last flush, written.
 */
#ifndef PERFD_PERSIST_INTERNAL_H
#define PERFD_PERSIST_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "profile/aggregate.h"
#include "state/persist.h"

enum record_type {
	REC_SEGMENT = 1,
	REC_STRING,
	REC_FRAME,
	REC_STACK,
	REC_PROCESS,
	REC_WINDOW,
};

#define MAX_NAME 4096            /* a function or file name read back */
#define MAX_PATH_READ PATH_MAX
#define MAX_WINDOW_ENTRIES (1u << 20)
#define MAX_SEGMENTS 4096

/* One segment on disk. */
struct segment {
	uint64_t seq;
	uint64_t bytes;
	uint64_t newest_end_s; /* of the windows in it */
};

/* ---- restored frames: what FRAME_MODULE_STORED frames resolve to ---- */

struct stored_line {
	uint8_t kind;
	uint32_t function, file; /* offsets in the pool; file 0: none */
	uint32_t line, start_line;
	uint16_t module;
	uint64_t offset, symbol_offset;
};

struct stored_frame {
	uint32_t first, n; /* in lines */
	uint64_t hash;
};

struct stored_module {
	uint32_t path, build_id; /* pool offsets */
};

struct stored {
	char *pool; /* NUL-terminated strings; offset 0 is "" */
	size_t pool_len, pool_cap;
	struct u64map pool_index; /* hash_text -> offset + 1 */
	struct stored_line *lines;
	size_t n_lines, cap_lines;
	struct stored_frame *frames;
	size_t n_frames, cap_frames;
	struct u64map frame_index; /* content hash -> id + 1 */
	struct stored_module *modules;
	size_t n_modules;
};

struct persist {
	char dir[PATH_MAX];
	int dirfd, lockfd;
	uint64_t max_bytes, retention_s;
	uint8_t boot_id[16];
	struct state_writer *writer;
	struct segment *segments; /* oldest first; the last may be current */
	size_t n_segments;
	/* the segment being written: 0 before its first record */
	uint64_t seq, next_seq;
	uint64_t seq_started_s;
	uint64_t next_flush_s;
	struct u64map frames_written;  /* frame word -> 1 in this segment */
	/* modules given back since the last flush: their frames in
	 * frames_written go before the next one writes */
	uint64_t forgotten[(FRAME_MODULE_LAST + 1 + 63) / 64];
	bool any_forgotten;
	struct u64map strings_written; /* hash_text -> string id + 1 */
	uint64_t n_strings;
	/* what each owner's windows wrote to this segment, definitions
	 * included: owner uid -> bytes (persist.h, "a share per owner") */
	struct u64map owner_bytes;
	uint64_t segment_budget;
	struct stored stored;
	/* stacktab_stored_frames when stored was last made to fit */
	size_t stored_refs;
	struct persist_stats stats;
};


/* --- persist.c ---------------------------------------------------------- */

struct segment *persist_segment_add(struct persist *ps, uint64_t seq, uint64_t bytes);

/* Renames name aside as name.why, so that it is not read again; kept for
 * a look by hand. */
void persist_move_aside(struct persist *ps, const char *name, const char *why, const char *what);

/* --- stored.c ------------------------------------------------------------ */

/* The pool offset of s, added once. */
int stored_intern(struct stored *st, const char *s, uint32_t *ret);

/* The restored module of (path, build-id), FRAME_MODULE_NONE when the
 * range is full. */
uint16_t stored_module(struct stored *st, uint32_t path, uint32_t build_id);

/* The stored frame of n lines (the pending ones at lines[n_lines]),
 * shared with an equal one already stored. */
int stored_frame(struct stored *st, size_t n, uint32_t *ret);

void stored_done(struct stored *st);

size_t stored_memory(const struct stored *st);

/* Frees what the restored frames' table holds for frames no stack names
 * any more (their windows expired or were evicted): all of it when none
 * is named, else a compacted copy once the frames named fell to half of
 * what they were at the last fit, so that the stacks are visited
 * O(log n) times while the history drains.  Tells a what is left. */
void stored_trim(struct persist *ps, struct aggregator *a);

#endif
