/* SPDX-License-Identifier: MIT */
/*
 * pydetect.h - looking for CPython in a process, as a job for a lane
 * (base/offload.h): the files it maps are opened and read there, never on
 * the daemon's loop, since a file system need not answer (a FUSE server
 * that stops, a slow NFS mount, a file in another mount namespace).
 *
 * The loop (python.c) copies the mappings that can tell (the first file,
 * the files named like Python, libc) into a job and submits it; the lane
 * runs pyruntime_detect (the interpreter, its version, _PyRuntime) and,
 * when it finds a supported runtime, pthread_tsd_read on the libc the
 * process maps (opened as the mapping's very inode: procfs.h's
 * procfs_open_mapped_file); the loop takes the results back.  The job
 * owns everything it holds, and touches nothing else.
 */
#ifndef PERFD_PYDETECT_H
#define PERFD_PYDETECT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/offload.h"
#include "perfd/macro.h"
#include "interp/python/pthread_tsd.h"
#include "interp/python/pyruntime.h"
#include "process/procmaps.h"

struct pydetect {
	struct offload_job job; /* first: the lane's part */
	/* what to look at, the job's */
	uint32_t pid;
	uint64_t start_time_ns;
	struct procmaps maps; /* the mappings that can tell, in their order */
	/* the results */
	int r; /* pyruntime_detect's: 0, -EPROTONOSUPPORT, -ENOENT, -errno */
	struct pyruntime rt; /* for 0 and -EPROTONOSUPPORT */
	int tsd_r; /* r == 0: pthread_tsd_read's of the first libc that tells */
	struct pthread_tsd tsd;
	bool alive; /* the process lived through the look */
};

/* Whether a file's name looks like CPython's ("python*", "libpython*"),
 * or like glibc's libc. */
bool pydetect_python_named(const char *path);
bool pydetect_libc_named(const char *path);

/* A job looking at process (pid, start_time_ns), whose mappings are maps
 * (only those that can tell are copied: the first file as
 * pyruntime_detect counts it, the files named like Python, libc).
 * Returns 0 or -ENOMEM. */
int pydetect_new(uint32_t pid, uint64_t start_time_ns, const struct procmaps *maps,
		 struct pydetect **ret);
/* Looks (what the lane calls; tests may call it directly). */
void pydetect_run(struct pydetect *d);
struct pydetect *pydetect_free(struct pydetect *d);

DEFINE_TRIVIAL_CLEANUP_FUNC(struct pydetect, pydetect_free);

static inline struct pydetect *pydetect_of(struct offload_job *j)
{
	return (struct pydetect *)j; /* job is the first member */
}

#endif
