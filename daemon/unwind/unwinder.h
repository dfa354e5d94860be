/* SPDX-License-Identifier: MIT */
/*
 * unwinder.h - keeps the BPF unwind maps (include/perfd/unwind.h) in step
 * with the processes being profiled.
 *
 * Each binary's table is built once (unwind_table.c, from the descriptor
 * the symbolizer holds), on the builder's thread (builder.h: the loop never
 * waits for a build; the binary's mappings use frame pointers until
 * unwinder_complete takes the table in and describes every process that
 * maps it again), uploaded into a range of the `unwind_rows` array,
 * and shared by every process that maps the binary.  When the last of them
 * is gone the table stays, idle, until its rows are needed for another
 * (least recently used first): binaries come back with the next process.  Each process gets a range of `unwind_mappings` describing
 * its executable mappings and an entry in `unwind_processes`; a process that
 * has none is unwound with frame pointers.  Memory is bounded by the sizes of
 * the two arrays; when they are full, processes go without tables (counted).
 */
#ifndef PERFD_UNWINDER_H
#define PERFD_UNWINDER_H

#include <stddef.h>
#include <stdint.h>

#include "process/procmaps.h"

struct symbolizer;

struct unwinder_opts {
	int rows_fd, mappings_fd, processes_fd;
	uint32_t rows_capacity, mappings_capacity;
	/* Tables up to this many rows are uploaded by the caller's thread
	 * right away (UNWINDER_LOOP_UPLOAD_MAX_ROWS: ~8 ms of syscalls, libc's
	 * 28k rows), saving a trip through the builder; bigger ones by the
	 * builder. */
	uint32_t loop_upload_max_rows;
	struct symbolizer *symbolizer;
};

#define UNWINDER_LOOP_UPLOAD_MAX_ROWS 32768

struct unwinder_stats {
	size_t tables;           /* tables uploaded */
	size_t tables_idle;      /* ... of which no process uses now (kept for reuse) */
	size_t tables_evicted;   /* idle tables freed to make room */
	size_t tables_built;     /* since start */
	size_t tables_building;  /* with the builder now */
	size_t tables_failed;    /* binaries without usable CFI */
	uint64_t tables_refused; /* builds given up for now: no room, no memory, no
				  * descriptor of the file yet (retried) */
	size_t rows_used, rows_capacity;
	size_t mappings_used, mappings_capacity;
	size_t processes;        /* with tables */
	size_t processes_refused; /* no room for their tables */
	uint64_t build_ns;       /* time the builder spent building tables */
	uint64_t upload_ns;      /* time the loop spent uploading their rows */
	uint64_t cfi_bytes;      /* .eh_frame/.debug_frame read */
};

struct unwinder;

int unwinder_new(const struct unwinder_opts *opts, struct unwinder **ret);
struct unwinder *unwinder_free(struct unwinder *u);

/* (Re)describes the executable mappings of process pid (started at
 * start_time_ns) to BPF.  module_ids[i] is the symbolizer's module of
 * maps->maps[i], 0 when it has none.  Returns 0 or -errno (-ENOSPC when the
 * maps are full); on failure the process keeps what it had. */
int unwinder_update_process(struct unwinder *u, uint32_t pid, uint64_t start_time_ns,
			    const struct procmaps *maps, const uint16_t *module_ids);
/* Forgets the process, if it is that incarnation, and frees what only it used. */
void unwinder_forget_process(struct unwinder *u, uint32_t pid, uint64_t start_time_ns);

/* Readable when builds are done (poll it on the loop, then call
 * unwinder_complete). */
int unwinder_fd(const struct unwinder *u);
/* Takes the finished builds in: uploads their rows and describes the
 * processes that map them again. */
void unwinder_complete(struct unwinder *u);

void unwinder_get_stats(const struct unwinder *u, struct unwinder_stats *ret);

#endif
