/* SPDX-License-Identifier: MIT */
/*
 * procmaps.h - parser for /proc/PID/maps.
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

/* Parses a maps file.  With exec_only, keeps only executable mappings.
 * Returns 0 and a new object in *ret, or -errno (-EINVAL on a malformed line). */
int procmaps_parse(FILE *f, bool exec_only, struct procmaps **ret);
/* Reads /proc/PID/maps; -ENOENT/-ESRCH when the process is gone. */
int procmaps_read_pid(pid_t pid, bool exec_only, struct procmaps **ret);
/* The mapping containing addr, or NULL.  O(log n). */
const struct procmap *procmaps_find(const struct procmaps *m, uint64_t addr);
struct procmaps *procmaps_free(struct procmaps *m);

#endif
