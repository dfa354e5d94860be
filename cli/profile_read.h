/* SPDX-License-Identifier: MIT */
/*
 * profile_read.h - perfd's saved snapshots read back into the analysis
 * model (analysis/profile.h, a list of named stacks), whatever format they
 * were written in: folded, json (the call tree) or pprof (gzipped
 * profile.proto).  For the commands that compute on a profile (`report`,
 * `diff`, `diagnose`), so each sees one shape, the one perfd's `top`
 * computes on too.  What is not a frame is left out: the comm that roots a
 * folded stack, the process and [thread TID COMM] nodes of the others.
 *
 * Files are untrusted: readers check every length, index and number, never
 * crash on a truncated or hostile input, and stop at the caps below with
 * an error, so memory stays within a small multiple of the caps.
 */
#ifndef PERFCTL_PROFILE_READ_H
#define PERFCTL_PROFILE_READ_H

#include <stddef.h>

#include "analysis/profile.h"

struct json_object;

/* Caps on what a file may make the reader hold (the model's builder caps
 * the frames: analysis/profile.h). */
#define PROFILE_MAX_FILE_BYTES ((size_t)256 << 20)     /* a file as read */
#define PROFILE_MAX_UNPACKED_BYTES ((size_t)256 << 20) /* a pprof message, gunzipped */

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
 * as profile_read() does; threads: a thread node (--threads) is the frame
 * "[thread TID COMM]" rooting its stacks, as the folded format has it,
 * where the readers otherwise leave threads out. */
int profile_read_json(struct json_object *doc, const char *kind, bool threads,
		      struct profile **ret, char *err);

#endif
