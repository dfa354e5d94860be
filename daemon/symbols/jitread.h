/* SPDX-License-Identifier: MIT */
/*
 * jitread.h - parsing a JIT's perf map or jitdump (perfmap.h, jitdump.h)
 * as a job for an offload lane (base/offload.h), so that the daemon's loop
 * never does it.
 *
 * A map of PERFMAP_MAX_ENTRIES functions in random order takes ~1 s to
 * parse and sort; the loop only checks the file (its owner, its size: the
 * symbolizer's rules) and hands a descriptor over.  Until the loop takes
 * the parsed map back, the JIT's frames keep the names of its last parse
 * (or none).  A job owns a dup of the descriptor (the symbolizer's LRU may
 * close its own meanwhile) and the map it parsed.
 */
#ifndef PERFD_JITREAD_H
#define PERFD_JITREAD_H

#include <stdbool.h>
#include <sys/types.h>

#include "base/offload.h"

struct perfmap;

struct jitread {
	struct offload_job job; /* first: the lane's part; job.key is the caller's */
	int fd;                 /* the map's (a dup); closed once run */
	off_t size;             /* its size when the job was made */
	/* the result, the caller's to take (and then reset) */
	int error;              /* 0, -EFBIG past the caps, or -errno */
	struct perfmap *map;
};

/* A job parsing the map open on fd (dup'ed: the caller keeps fd), of size
 * bytes, for offload_submit().  Returns 0 or -ENOMEM, -EMFILE. */
int jitread_new(uint64_t key, int fd, off_t size, struct jitread **ret);
/* Parses (what a lane calls; tests call it directly). */
void jitread_run(struct jitread *j);
struct jitread *jitread_free(struct jitread *j);
/* Whether the lane's job j is a jitread (a lane may run other jobs too). */
bool jitread_is(const struct offload_job *j);

static inline struct jitread *jitread_of(struct offload_job *j)
{
	return (struct jitread *)j; /* job is the first member */
}

#endif
