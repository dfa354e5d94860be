/* SPDX-License-Identifier: MIT */
/*
 * profile_read.h - perfd's saved snapshots read back into one list of
 * stacks, whatever format they were written in: folded, json (the call
 * tree) or pprof (gzipped profile.proto).  For the commands that compute
 * on a profile (`report`, later `diff`), so each sees one shape.
 *
 * A profile is a list of stacks, each a run of frames root first and a
 * value in the profile's unit; frames are interned (one id per function,
 * file, line and side of the kernel boundary) and strings too.  What is
 * not a frame is left out: the comm that roots a folded stack, the process
 * and [thread TID COMM] nodes of the others.
 *
 * Files are untrusted: readers check every length, index and number, never
 * crash on a truncated or hostile input, and stop at the caps below with
 * an error, so memory stays within a small multiple of the caps.
 */
#ifndef PERFCTL_PROFILE_READ_H
#define PERFCTL_PROFILE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "perfd/macro.h"

struct json_object;

/* Caps on what a file may make the reader hold. */
#define PROFILE_MAX_FILE_BYTES ((size_t)256 << 20)     /* a file as read */
#define PROFILE_MAX_UNPACKED_BYTES ((size_t)256 << 20) /* a pprof message, gunzipped */
#define PROFILE_MAX_DEPTH 2048                         /* frames in one stack */
#define PROFILE_MAX_FRAME_REFS ((size_t)1 << 25)       /* frames over all stacks */

/* Room for a reader's complaint ("line 3: the count is not a number"). */
#define PROFILE_ERROR_MAX 256

enum profile_format {
	PROFILE_FORMAT_FOLDED,
	PROFILE_FORMAT_JSON,
	PROFILE_FORMAT_PPROF,
};

struct profile_frame {
	uint32_t function; /* string id, never 0 */
	uint32_t file;     /* string id, 0: unknown */
	uint32_t line;     /* 0: unknown */
	bool kernel;
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

/* Reads a profile from data[0..len), the format told by its content: gzip's
 * magic is pprof, a '{' first (after white space) is json, anything else
 * folded.  kind: what the caller wants ("cpu", "memory", "offcpu"), or NULL
 * for what the file holds: it picks a pprof's sample type, names a folded
 * file's values (cpu samples by default), and must match a json file's.
 * Returns 0 and the profile in *ret (profile_free() it), or -EBADMSG (not
 * a profile, or a broken one), -EFBIG, -E2BIG (past a cap), -EOVERFLOW (a
 * sum past 2^64), -ENOENT (no such kind in it), -ENOMEM; but for -ENOMEM,
 * err (PROFILE_ERROR_MAX bytes, or NULL) then says what is wrong. */
int profile_read(const char *data, size_t len, const char *kind, struct profile **ret,
		 char *err);

/* Reads the file at path (a regular file of at most PROFILE_MAX_FILE_BYTES,
 * or a pipe) with profile_read().  Returns what it returns, or the -errno
 * of opening and reading it. */
int profile_read_file(const char *path, const char *kind, struct profile **ret, char *err);

/* Reads a json call tree already parsed (a snapshot answer's "profile"),
 * as profile_read() does. */
int profile_read_json(struct json_object *doc, const char *kind, struct profile **ret,
		      char *err);

/* The text of string id. */
static inline const char *profile_string(const struct profile *p, uint32_t id)
{
	return p->text + id;
}

/* The id of the string s[0..n) in p's strings (0 for ""), or -ENOENT when
 * p has none such: how a text of one profile is found in another. */
int64_t profile_find_string(const struct profile *p, const char *s, size_t n);

/* The name of a format: "folded", "json", "pprof". */
const char *profile_format_name(enum profile_format f);

/* Frees p; accepts NULL; returns NULL. */
struct profile *profile_free(struct profile *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct profile, profile_free)

#endif
