/* SPDX-License-Identifier: MIT */
/*
 * debugsearch.h - the slow half of finding a stripped binary's symbols, as
 * a job for an offload lane (base/offload.h), so that the daemon's loop
 * never does it.
 *
 * The loop looks for a debug file by build-id itself (an open and the
 * candidate's headers: debuginfo.h); what is left may read whole files:
 * the .gnu_debuglink candidates (up to DEBUGINFO_CRC_MAX_BYTES each, read
 * whole for their CRC) and, when none is the one, the MiniDebugInfo (an xz
 * stream decompressed in memory, up to 64 MiB).  A job does both, in that
 * order, and gives back a descriptor or an image; until the loop takes it
 * back, the binary is named from its own symbols.
 *
 * A job owns everything it holds: a dup of the binary's descriptor (the
 * symbolizer may close or evict its own meanwhile) and copies of the paths.
 */
#ifndef PERFD_DEBUGSEARCH_H
#define PERFD_DEBUGSEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "base/offload.h"

struct debugsearch {
	struct offload_job job; /* first: the lane's part; job.key is the caller's */
	/* what to search, owned by the job */
	int fd;          /* the binary's (a dup); closed once run */
	char *path;      /* as the process saw the binary, no " (deleted)" */
	char *root;      /* "/proc/PID/root" */
	char *debug_dir;
	/* the result, the caller's to take (and then reset) */
	int debug_fd;       /* the verified debug file, or -errno */
	void *image;        /* else the MiniDebugInfo ELF image, malloc'd, or NULL */
	size_t image_size;
	unsigned refused;   /* candidates refused unread (debuginfo_find's count) */
};

/* A job searching for the binary open on fd (dup'ed: the caller keeps
 * fd), for offload_submit().  Returns 0 or -ENOMEM, -EMFILE. */
int debugsearch_new(uint64_t key, int fd, const char *path, const char *root,
		    const char *debug_dir, struct debugsearch **ret);
/* Runs the search (what a lane calls; tests and fuzzers call it directly). */
void debugsearch_run(struct debugsearch *q);
struct debugsearch *debugsearch_free(struct debugsearch *q);

static inline struct debugsearch *debugsearch_of(struct offload_job *j)
{
	return (struct debugsearch *)j; /* job is the first member */
}

#endif
