/* SPDX-License-Identifier: MIT */
/*
 * jitread.h - parsing a JIT's perf map or jitdump (perfmap.h, jitdump.h)
 * as a job for an offload lane (base/offload.h), so that the daemon's loop
 * never does it.
 *
 * A map of PERFMAP_MAX_ENTRIES functions in random order takes ~1 s to
 * parse and sort, and even the fstat that tells whether it grew asks the
 * file's file system, which the process chose (a FUSE server need not
 * answer).  So the loop only hands a descriptor over, with what it knows
 * of the map; the job checks the file (its owner, its size: the
 * symbolizer's rules) and parses it only when it is not the size last
 * parsed or refused.  Until the loop takes the parsed map back, the JIT's
 * frames keep the names of its last parse (or none).  A job owns a dup of
 * the descriptor (the symbolizer's LRU may close its own meanwhile) and
 * the map it parsed.
 */
#ifndef PERFD_JITREAD_H
#define PERFD_JITREAD_H

#include <stdbool.h>
#include <sys/types.h>

#include "base/offload.h"
#include "process/procfs.h"

struct perfmap;

/* What the caller knows of the map, for the job to tell whether to parse. */
struct jitread_want {
	struct procfs_file_rules rules; /* what the file must still meet */
	off_t parsed_size;  /* its size at the last parse, -1: none */
	off_t refused_size; /* its size when last refused, -1: never */
	off_t max_size;     /* refused unread past this (-EFBIG) */
};

struct jitread {
	struct offload_job job; /* first: the lane's part; job.key is the caller's */
	int fd;                 /* the map's (a dup); closed once run */
	struct jitread_want want;
	/* the result, the caller's to take (and then reset) */
	off_t size;             /* the map's, as the job found it */
	bool unchanged;         /* the size last parsed or refused: not read */
	bool refused;           /* past the rules or max_size: not read */
	int error;              /* 0, -EFBIG past the caps, or -errno */
	struct perfmap *map;
};

/* A job parsing the map open on fd (dup'ed: the caller keeps fd) unless
 * want says not to, for offload_submit().  Returns 0 or -ENOMEM,
 * -EMFILE. */
int jitread_new(uint64_t key, int fd, const struct jitread_want *want, struct jitread **ret);
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
