/* SPDX-License-Identifier: MIT */
/*
 * procmaps.h - parser for /proc/PID/maps, and its readers.
 */
#ifndef PERFD_PROCMAPS_H
#define PERFD_PROCMAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct procmap {
	uint64_t start, end; /* [start, end) */
	uint64_t pgoff;      /* file offset of start */
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	bool readable, writable, executable, shared;
	char *path; /* "" for anonymous, "[vdso]", "/usr/lib/x.so", "/x (deleted)" */
};

struct procmaps {
	struct procmap *maps; /* sorted by start, non-overlapping */
	size_t n;
};

/* Bounds on a maps file: a line holds a path (< PATH_MAX) and ~90 bytes
 * more; a process has at most vm.max_map_count (65530 by default)
 * mappings. */
#define PROCMAPS_LINE_MAX (4096 + 256)
#define PROCMAPS_MAX_LINES (1u << 20)

/* Parses a maps file.  With exec_only, keeps only executable mappings.
 * Returns 0 and a new object in *ret, or -errno (-EINVAL on a malformed or
 * over-long line, -EFBIG past PROCMAPS_MAX_LINES). */
int procmaps_parse(FILE *f, bool exec_only, struct procmaps **ret);
/* Reads the maps of the /proc/PID directory dirfd (procfs_open_pid);
 * -ESRCH when the process is gone. */
int procmaps_read_dirfd(int dirfd, bool exec_only, struct procmaps **ret);
/* Reads the maps of process pid if it is still the one that started at
 * start_time_ns (procfs_open_pid), else -ESRCH. */
int procmaps_read_process(pid_t pid, uint64_t start_time_ns, bool exec_only,
			  struct procmaps **ret);
/* Reads /proc/PID/maps of whatever process has pid now; -ESRCH when there
 * is none. */
int procmaps_read_pid(pid_t pid, bool exec_only, struct procmaps **ret);
/* Whether m is backed by no file a path names: anonymous memory, a
 * special one ([vdso], [heap]...). */
static inline bool procmap_fileless(const struct procmap *m)
{
	return m->inode == 0 || m->path[0] != '/';
}

/* The mapping containing addr, or NULL.  O(log n). */
const struct procmap *procmaps_find(const struct procmaps *m, uint64_t addr);
struct procmaps *procmaps_free(struct procmaps *m);

#endif
