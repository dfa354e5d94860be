/* SPDX-License-Identifier: MIT */
/*
 * aggregate.h - per-process profiles built from the sample stream.
 *
 * The aggregator owns every process perfd has seen (keyed by pid and start
 * time, so a reused pid is a new process), the interned stacks they count,
 * and the snapshots in progress.  For each sample it normalizes the user
 * frames to (binary, offset) using the process's mappings, read from /proc
 * when the process is first seen, interns the stack, and adds one to the
 * process's count for that stack and to every matching snapshot.
 *
 * Memory is bounded by three limits: processes, unique stacks and frames.
 * When one is reached the coldest process (exited ones first, then the one
 * sampled longest ago; never one a snapshot is collecting) is evicted and its
 * samples counted as lost; if nothing can be evicted, the sample is kept
 * under a "[dropped: stack table full]" stack and counted.
 */
#ifndef PERFD_AGGREGATE_H
#define PERFD_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfd/sample.h"
#include "perfd/protocol.h"
#include "base/u64map.h"

struct symbolizer;
struct stacktab;

#define AGG_BUCKETS 64 /* one per second; > PERFD_PS_MAX_INTERVAL */

#ifndef PROCESS_OWNER_NONE
#define PROCESS_OWNER_NONE UINT32_MAX /* owner_uid of a process whose uids differ */
#endif

struct process {
	uint32_t pid;
	uint64_t start_time_ns;
	/* The real uid when real, effective and saved uids are equal, else
	 * PROCESS_OWNER_NONE; 0 for kernel threads (see api/auth.h). */
	uint32_t owner_uid;
	char comm[PERFD_TASK_COMM_LEN];
	struct procmaps *maps; /* executable mappings, NULL until read */
	uint16_t *map_modules; /* module id per mapping, MODULE_NONE for none */
	uint64_t maps_read_ns; /* when maps were last read */
	uint64_t maps_reread_wait_ns; /* before re-reading them on a miss */
	uint16_t jit_module;   /* names from /tmp/perf-PID.map, 0 when none */
	uint64_t jit_checked_ns; /* when we last looked for that map */
	uint32_t ns_pid;       /* the pid inside its own pid namespace */
	char *cgroup;          /* cgroup v2 path, NULL when unknown */
	char runtime[80];      /* the language runtime found in it ("CPython 3.11.7"), or "" */
	struct u64map counts;  /* stack id -> samples */
	uint64_t total_samples;
	uint64_t first_sample_ns, last_sample_ns;
	uint64_t rss_pages[PERFD_RSS_COUNTERS];
	uint64_t page_size;
	uint64_t peak_rss_bytes;
	uint32_t bucket_samples[AGG_BUCKETS];
	uint64_t bucket_second[AGG_BUCKETS];
	bool exited;
	unsigned collectors; /* snapshots holding this process */
};

/* A snapshot in progress: counts the samples of one process that fall in
 * [begin_ns, end_ns].  The caller (query.c) owns it and decides when it ends. */
struct collector {
	uint32_t pid;
	uint64_t start_ticks; /* the process's start time in clock ticks, as /proc says */
	uint64_t begin_ns, end_ns;
	struct u64map counts; /* stack id -> samples */
	uint64_t samples;
	struct process *process; /* once a sample matched; pinned */
	bool exited;
	uint64_t exit_ns;
	/* Roots each stack at a thread frame (frame.h FRAME_SPECIAL_THREAD);
	 * the comm each thread had when first seen is kept for its name. */
	bool threads;
	struct u64map thread_index; /* tid -> index + 1 in thread_comms */
	char (*thread_comms)[PERFD_TASK_COMM_LEN];
	size_t n_threads, cap_threads;
	void (*on_exit)(struct collector *c, void *userdata);
	void *userdata;
	struct collector *next;
};

struct aggregator_limits {
	size_t max_processes;
	size_t max_stacks;
	size_t max_frames;
};

struct aggregator_stats {
	uint64_t samples;           /* samples ingested (idle excluded) */
	uint64_t samples_evicted;   /* samples of evicted processes */
	uint64_t stack_limit;       /* samples whose stack was dropped */
	uint64_t kernel_stack_errors, user_stack_errors;
	uint64_t exit_events;
	size_t processes, processes_exited, processes_evicted;
	size_t stacks, frames;
	size_t memory_bytes;
};

/* Optional observers of process life, called from inside
 * aggregator_ingest: maps_changed after a process's mappings were (re)read
 * and every executable mapping's module resolved (map_modules), and
 * process_gone when a process exited, was replaced by a new incarnation of
 * its pid, was evicted, or called exec (its old image is gone; maps_changed
 * follows for the new one); rewrite_user_frames for every sample that
 * carries Python frames. */
struct aggregator_hooks {
	void (*maps_changed)(void *userdata, struct process *p);
	void (*process_gone)(void *userdata, const struct process *p);
	/* Rewrites the user frames of a sample (frames[0..n), leaf first,
	 * normalized) into at most cap frames, returning the count: where
	 * interpreter frames are replaced by the frames they run. */
	size_t (*rewrite_user_frames)(void *userdata, const struct process *p,
				      const struct perfd_sample *s, uint64_t *frames,
				      size_t n, size_t cap);
	void *userdata;
};

struct aggregator;

struct aggregator *aggregator_new(const struct aggregator_limits *limits,
				  struct symbolizer *symbolizer);
void aggregator_set_hooks(struct aggregator *a, const struct aggregator_hooks *hooks);
struct aggregator *aggregator_free(struct aggregator *a);

/* Consumes one record from the BPF ring buffer.  Returns 0, or -EINVAL for
 * a record that is malformed (counted, never fatal). */
int aggregator_ingest(struct aggregator *a, const void *record, size_t size);

/* Calls fn for each process, live and exited, in no particular order. */
void aggregator_foreach_process(struct aggregator *a,
				void (*fn)(struct process *p, void *userdata),
				void *userdata);
/* The current incarnation of pid, or NULL. */
struct process *aggregator_find_process(struct aggregator *a, uint32_t pid);

/* Samples of p whose timestamp falls in the whole seconds
 * [first_second, end_second) of CLOCK_MONOTONIC; at most AGG_BUCKETS back. */
uint64_t process_window_samples(const struct process *p, uint64_t first_second,
				uint64_t end_second);
uint64_t process_rss_bytes(const struct process *p);

/* Starts counting samples for c (filled by the caller: pid, start_ticks,
 * begin_ns, end_ns, on_exit).  c->on_exit is called, from inside
 * aggregator_ingest, when the process exits. */
void aggregator_add_collector(struct aggregator *a, struct collector *c);
/* The comm of thread tid as c first saw it, or NULL. */
const char *collector_thread_comm(const struct collector *c, uint32_t tid);
/* Stops counting, releases the collector's stacks and counts. */
void aggregator_remove_collector(struct aggregator *a, struct collector *c);

struct stacktab *aggregator_stacks(struct aggregator *a);
void aggregator_get_stats(const struct aggregator *a, struct aggregator_stats *ret);

#endif
