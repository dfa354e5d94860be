/* SPDX-License-Identifier: MIT */
/*
 * mapsread.h - reading a process's /proc/PID/maps bounded on the loop,
 * the rest on an offload lane (base/offload.h).
 *
 * The kernel formats the maps as they are read: ~1-6 us a line, so a
 * process with 20,000 mappings costs 23-123 ms, which the daemon's loop
 * must not spend.  The loop reads the first MAPSREAD_LOOP_BYTES (a few
 * hundred lines: every ordinary process's maps whole) and parses them at
 * once; a longer file becomes a job that goes on reading the same
 * descriptor (the kernel keeps its place) on a lane, up to
 * MAPSREAD_MAX_BYTES, and parses there.  Past that cap the maps are cut
 * at the last whole line: the mappings at the highest addresses are
 * missing (counted by the caller through truncated).
 *
 * A job owns its descriptor and buffer; the result (maps or error) is the
 * caller's once offload_take_done gave the job back.
 */
#ifndef PERFD_MAPSREAD_H
#define PERFD_MAPSREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/offload.h"
#include "process/procmaps.h"

/* Read on the loop before handing the rest to a lane: ~500 lines. */
#define MAPSREAD_LOOP_BYTES (48u << 10)
/* Read in all: 65,530 mappings (vm.max_map_count's default) of ~250
 * bytes each.  A process past it keeps what fits. */
#define MAPSREAD_MAX_BYTES (16u << 20)

struct mapsread {
	struct offload_job job; /* first: the lane's part */
	int fd;                 /* the maps file, where the loop stopped */
	char *buf;
	size_t len, cap;
	bool exec_only;
	/* the result, the caller's to take (and then reset) */
	int error;              /* 0, or -errno of the read or the parse */
	bool truncated;         /* cut at MAPSREAD_MAX_BYTES */
	struct procmaps *maps;  /* on success */
	uint64_t read_ns;       /* what reading and parsing took, on the clock */
	void *owner;            /* the caller's; no lane reads it */
};

/* Opens the maps of the /proc/PID directory dirfd and reads at most
 * loop_bytes of them.  When that was all, parses them and returns 0 with
 * *ret_maps set and *ret_job NULL; else returns 0 with *ret_job, a job for
 * offload_submit (or mapsread_run), and *ret_maps NULL.  -errno when the
 * file cannot be opened or read (-ESRCH: the process is gone). */
int mapsread_start(int dirfd, bool exec_only, size_t loop_bytes, struct procmaps **ret_maps,
		   struct mapsread **ret_job);
/* Reads the rest and parses (what a lane calls). */
void mapsread_run(struct mapsread *j);
struct mapsread *mapsread_free(struct mapsread *j);

static inline struct mapsread *mapsread_of(struct offload_job *j)
{
	return (struct mapsread *)j; /* job is the first member */
}

#endif
