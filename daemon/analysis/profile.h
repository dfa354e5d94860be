/* SPDX-License-Identifier: MIT */
/*
 * profile.h - the one model perfd's analysis computes on: a list of
 * stacks, each a run of named frames root first and a value in the
 * profile's unit.  perfctl builds it from a file or a snapshot answer
 * (cli/profile_read.c: folded, json, pprof); perfd builds it from its own
 * model for `top` (api/model_profile.c).  Either way the same code sums it
 * (analysis/functions.h), so a table means the same wherever it was made.
 *
 * Frames are interned (one id per function, file, line and side of the
 * kernel boundary) and strings too, so a profile costs ~4 bytes a frame
 * reference plus its distinct names.  What is not a frame (a process, a
 * thread, a folded line's comm) is not in it.
 *
 * Compiled into perfd and perfctl alike, it uses nothing but base/ and
 * include/perfd/.  The builder enforces the caps below, so a hostile file
 * cannot make a reader hold more than a small multiple of them.
 */
#ifndef PERFD_ANALYSIS_PROFILE_H
#define PERFD_ANALYSIS_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "perfd/macro.h"

/* Caps on what a file may make a reader hold (perfd's own store, format
 * LIVE, is bounded by the store's limits: only the 32-bit offsets of its
 * frame references bound it here). */
#define PROFILE_MAX_DEPTH 2048                   /* frames in one stack */
#define PROFILE_MAX_FRAME_REFS ((size_t)1 << 25) /* frames over all stacks */
#define PROFILE_MAX_STACKS ((size_t)1 << 22)     /* stacks, frameless ones too */

/* Room for a builder's or reader's complaint ("line 3: the count is not a
 * number"). */
#define PROFILE_ERROR_MAX 256

/* Where the stacks came from. */
enum profile_format {
	PROFILE_FORMAT_FOLDED,
	PROFILE_FORMAT_JSON,
	PROFILE_FORMAT_PPROF,
	PROFILE_FORMAT_LIVE, /* perfd's store, built in perfd (top) */
};

struct profile_frame {
	uint32_t function; /* string id, never 0 */
	uint32_t file;     /* string id, 0: unknown */
	uint32_t line;     /* 0: unknown */
	bool kernel;
	/* what kind of code it is, as its producer tells kinds apart (perfd's
	 * enum frame_kind for a profile made in perfd: a Python function and a
	 * native one of one name are two frames); 0 for every frame of a file */
	uint8_t kind;
	/* string id of the module it is in, as a JSON answer names it, 0:
	 * unknown; not part of what the frame is (the first one seen stays) */
	uint32_t module;
};

struct profile_stack {
	uint64_t value;
	uint32_t first, depth; /* frame ids in pool[first .. first + depth), root first */
};

struct profile {
	enum profile_format format;
	uint32_t kind;      /* string id: "cpu", "memory", "offcpu", or a pprof sample type */
	uint32_t unit;      /* string id: "samples", "bytes", "nanoseconds", ... */
	uint64_t period_ns; /* what one CPU sample stands for; 0: unknown */
	uint64_t total;     /* of all the stacks' values */

	char *text; /* strings, NUL-terminated; id = offset, 0 is "" */
	size_t text_len, text_cap;
	struct profile_frame *frames;
	size_t n_frames, cap_frames;
	uint32_t *pool;
	size_t n_pool, cap_pool;
	struct profile_stack *stacks;
	size_t n_stacks, cap_stacks;

	struct u64map strings_by_hash, frames_by_hash; /* interning */
	size_t stack_start;                            /* of the stack being built */
};

/* An empty profile (no kind yet: profile_set_kind()).  Returns 0 and *ret
 * (profile_free() it), or -ENOMEM. */
int profile_new(enum profile_format format, struct profile **ret);

/* Frees p; accepts NULL; returns NULL. */
struct profile *profile_free(struct profile *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct profile, profile_free)

/* --- building: a stack is begun, its frames pushed root first, and ended
 * with its value.  Functions that take err (PROFILE_ERROR_MAX bytes, or
 * NULL) say there what is wrong, but for -ENOMEM. --- */

/* The id of s[0..n) (0 for ""), added when new; -ENOMEM, or -E2BIG when
 * the strings outgrow 32-bit ids. */
int64_t profile_intern_string(struct profile *p, const char *s, size_t n);
int64_t profile_intern_cstring(struct profile *p, const char *s);

/* The id of the frame, added when new; or -ENOMEM.  kind: see struct
 * profile_frame. */
int64_t profile_intern_frame(struct profile *p, uint32_t function, uint32_t file, uint32_t line,
			     bool kernel, uint8_t kind);

void profile_stack_begin(struct profile *p);
/* Appends a frame to the stack being built; -E2BIG past the caps, -ENOMEM. */
int profile_stack_push(struct profile *p, uint32_t frame, char *err);
/* Ends the stack being built with its value (a stack worth nothing is
 * dropped); -EOVERFLOW when the total would pass 2^64, -ENOMEM. */
int profile_stack_end(struct profile *p, uint64_t value, char *err);

/* Sets p's kind and unit strings; 0 or -ENOMEM, -E2BIG. */
int profile_set_kind(struct profile *p, const char *kind, const char *unit);

/* Writes the message into err (when not NULL) and returns error. */
_printf_(3, 4) int profile_fail(char *err, int error, const char *fmt, ...);

/* --- reading --- */

/* The text of string id. */
static inline const char *profile_string(const struct profile *p, uint32_t id)
{
	return p->text + id;
}

/* The id of the string s[0..n) in p's strings (0 for ""), or -ENOENT when
 * p has none such: how a text of one profile is found in another. */
int64_t profile_find_string(const struct profile *p, const char *s, size_t n);

/* The name of a format: "folded", "json", "pprof", "live". */
const char *profile_format_name(enum profile_format f);

#endif
