/* SPDX-License-Identifier: MIT */
/*
 * pyread.h - reading a Python process's memory, as a job for a lane
 * (base/offload.h): the code objects its samples show, and whether an
 * interpreter runs in it yet.  Never on the daemon's loop: a page of the
 * process may be a file's that was never read in, on a file system that
 * need not answer (a FUSE server that stops: the read waits as long), and
 * the process chooses where its objects point.
 *
 * The loop (python.c) copies the runtime and the (address, tag) of each
 * code object to read into a job and submits it; the lane runs
 * pycode_read for each, the 8-byte read of _PyRuntime's list of
 * interpreters and the search for `-X perf`'s trampoline arenas
 * (pytrampoline.h, among the candidate mappings the loop copied) when
 * asked; the loop takes the results back and its samples, which waited
 * for them, go in named.  The job owns everything
 * it holds, and touches nothing else.
 */
#ifndef PERFD_PYREAD_H
#define PERFD_PYREAD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/offload.h"
#include "interp/python/pycode.h"
#include "interp/python/pyruntime.h"
#include "interp/python/pytrampoline.h"
#include "perfd/macro.h"
#include "perfd/python.h"

/* Code objects one job reads at most: all a sample can show. */
#define PYREAD_MAX_CODES PERFD_MAX_PYTHON_DEPTH

struct pyread_code {
	uint64_t addr;
	uint32_t tag; /* what the sample saw there (perfd_python_code_tag) */
	int r;        /* pycode_read's, or -ESTALE: the object there has another tag */
	struct pycode code; /* r == 0: its linetable is the job's until taken */
};

struct pyread {
	struct offload_job job; /* first: the lane's part */
	/* what to read, the job's */
	uint32_t pid;
	uint64_t start_time_ns;
	uint32_t uid; /* whose share of the lanes it counts in (python.c) */
	bool taken;   /* back, and taken in by the process still waiting (python.c) */
	struct pyruntime rt; /* a copy: the process's entry may go meanwhile */
	bool interpreter;    /* look whether an interpreter runs */
	bool trampolines;    /* look for trampoline arenas among candidates */
	struct procmaps candidates; /* pytrampoline_candidates', the job's */
	/* the results */
	bool interpreter_runs; /* or _PyRuntime could not be read: the files say it is Python */
	/* in: the arenas known (pytrampoline_find's *arenas); out, when
	 * trampolines_r >= 0: those found */
	struct pytrampoline_arenas arenas;
	int trampolines_r;
	size_t n;
	struct pyread_code codes[]; /* n of them */
};

/* A job reading n (<= PYREAD_MAX_CODES) code objects of process (pid,
 * start_time_ns), whose runtime is rt, and looking whether an interpreter
 * runs when interpreter is true; the caller fills codes[i].addr and .tag.
 * Returns 0 or -ENOMEM. */
int pyread_new(uint32_t pid, uint64_t start_time_ns, const struct pyruntime *rt,
	       bool interpreter, size_t n, struct pyread **ret);
/* Reads (what the lane calls; tests may call it directly). */
void pyread_run(struct pyread *r);
struct pyread *pyread_free(struct pyread *r);

DEFINE_TRIVIAL_CLEANUP_FUNC(struct pyread, pyread_free);

static inline struct pyread *pyread_of(struct offload_job *j)
{
	return (struct pyread *)j; /* job is the first member */
}

#endif
