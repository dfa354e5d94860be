/* SPDX-License-Identifier: MIT */
/*
 * builder.h - the thread that builds unwind tables, so that the event loop
 * never does.
 *
 * A table is a pure function of a binary: its .eh_frame/.debug_frame read
 * into sorted rows (unwind_table.c) and its PT_LOAD segments.  For most
 * binaries that takes a millisecond; for libLLVM (105 MiB, 4.8 MiB of
 * CFI) it took 1.5 s of the loop, during which no request was answered
 * and no sample ingested.  So the unwinder (unwinder.c, on the loop)
 * hands each build to this thread and goes on; the binary's mappings are
 * unwound with frame pointers until the table is ready.
 *
 * A job has two stages, both on the builder's thread: BUILD reads the
 * binary; then the loop takes the job back, finds room for its rows in
 * unwind_rows (the row allocator is the loop's), and hands it back for
 * UPLOAD, which writes the rows into that range (1.5M rows of libLLVM take
 * 0.4 s of syscalls: not the loop's either).
 *
 * The threads, the queue and the ownership rules are base/offload.h's:
 * a job is the loop's until builder_submit, the builder's until it is
 * done, and the loop's again from builder_take_done on.  The builder
 * reads only the job's own descriptor (which the job owns: a dup of the
 * symbolizer's, so the symbolizer may close its own at any time) and its
 * table, and writes only the job's result fields and, in UPLOAD, the range
 * of unwind_rows the loop reserved for it (which no BPF mapping points at
 * until the loop takes the job back); it never touches the symbolizer or
 * the unwinder's tables.
 *
 * A build is bounded, as the file is its owner's to craft: call-frame
 * information past BUILDER_MAX_CFI_BYTES is refused unread (-E2BIG), and
 * a build that has used BUILDER_MAX_BUILD_NS (or the daemon's
 * --unwind-build-cpu-ms) of its lane's CPU time is
 * abandoned (-ETIMEDOUT: libdw replays an FDE's program for each of its
 * rows, so a crafted FDE of n rows costs n^2, hours for a few hundred
 * KiB), which frees its lane; the binary then has no table, as one
 * without CFI.  CPU time, not wall time: the lanes run below the loop
 * (base/priority.h) and this machine is shared, so libLLVM's 1.5 s may
 * take many more seconds of the clock.  builder_free cancels the builds in progress.
 *
 * Two threads serve the queue, newest job first: the binaries of the
 * process perfd saw last are those running now, where a backlog (the
 * hundred binaries of every process sampled when perfd starts) is mostly
 * of processes that have moved on; a binary a newer process needs too is
 * bumped to the front (builder_bump).  One lane skips big jobs (a build
 * weighs its call-frame information, read off the section headers by the
 * lane that takes it first, which builds a small one at once and hands a
 * big one back to be queued as big; an upload weighs its rows' bytes:
 * big are those that take ~100 ms or more), so that a small binary's
 * table never waits behind a huge one's.
 * A new process's own binaries are thus walked with frame pointers for
 * milliseconds, not for as long as the backlog or libLLVM's table takes.
 */
#ifndef PERFD_BUILDER_H
#define PERFD_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/offload.h"
#include "unwind/unwind_table.h"

struct unwind_segment {
	uint64_t offset, vaddr, filesz;
	bool executable;
};

enum build_stage {
	BUILD_STAGE_BUILD,  /* read the binary into a table */
	BUILD_STAGE_UPLOAD, /* write the table's rows at rows_first */
};

/* 13 times libLLVM's 4.8 MiB of .eh_frame, 7 times its 1.5 s build. */
#define BUILDER_MAX_CFI_BYTES ((uint64_t)64 << 20)
#define BUILDER_MAX_BUILD_NS (10ULL * 1000000000ULL)

struct build_job {
	struct offload_job job; /* first: the lanes' part */
	struct build_job *next; /* in builder_take_done's list */
	uint64_t key; /* the caller's: which binary */
	int fd;       /* owned by the job; closed once built */
	int rows_fd;  /* the builder's unwind_rows, for UPLOAD */
	enum build_stage stage;
	uint32_t rows_first; /* for UPLOAD */
	uint64_t weight;     /* big or small: CFI bytes, or row bytes */
	bool weighed;        /* BUILD: its CFI bytes read (on a lane) */
	/* written by the builder */
	int r; /* 0, or the stage's -errno */
	struct unwind_table *table;
	struct unwind_segment *segs;
	size_t n_segs;
	uint64_t build_ns, upload_ns;
	uint64_t submitted_ns; /* CLOCK_MONOTONIC, when first submitted */
	uint64_t max_build_ns; /* the builder's: CPU time before it is abandoned */
};

struct builder;

/* rows_fd: the unwind_rows array map UPLOAD writes into; max_build_ns:
 * the CPU time a build may take (0: BUILDER_MAX_BUILD_NS). */
int builder_new(int rows_fd, uint64_t max_build_ns, struct builder **ret);
/* Stops the thread (after the build it is in, if any) and frees every job. */
struct builder *builder_free(struct builder *b);

/* Queues a build of the ELF file open on fd, which the builder owns from
 * now on (closed on every path).  Returns 0 or -ENOMEM. */
int builder_submit(struct builder *b, uint64_t key, int fd);
/* Moves the queued job of key, if any, to the front of the queue. */
void builder_bump(struct builder *b, uint64_t key);
/* Queues the upload of a built job's rows at rows_first. */
void builder_submit_upload(struct builder *b, struct build_job *j, uint32_t rows_first);
/* The jobs built since the last call (a list through next, oldest first),
 * or NULL.  Reads the eventfd empty. */
struct build_job *builder_take_done(struct builder *b);
/* Readable when builder_take_done has jobs to give. */
int builder_fd(const struct builder *b);

void build_job_free(struct build_job *j);

/* Writes n values into consecutive indexes of an array map from first, in
 * batches where the kernel can, one by one where it cannot.  Any thread. */
int bpf_array_upload(int map_fd, uint32_t first, const void *values, size_t value_size, size_t n);

#endif
