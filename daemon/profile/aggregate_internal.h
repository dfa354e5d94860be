/* SPDX-License-Identifier: MIT */
/*
 * aggregate_internal.h - what the files of the profile store share: its
 * state, struct aggregator, and the functions one of them calls in another.
 * The store is one module in five files, by concern: aggregate.c (its
 * front), proctab.c (the process table), procread.c (what it reads under
 * /proc), ingest.c (a record in) and selection.c (who a query or a
 * collector takes).  Nothing outside profile/ includes this; the store's
 * interface and design are aggregate.h's.
 */
#ifndef PERFD_AGGREGATE_INTERNAL_H
#define PERFD_AGGREGATE_INTERNAL_H

#include "base/clock.h"
#include "base/kindtab.h"
#include "base/offload.h"
#include "perfd/macro.h"
#include "process/modules.h"
#include "profile/aggregate.h"
#include "profile/owners.h"
#include "profile/stacktab.h"

/* A user address outside every known mapping makes us re-read the maps: a
 * library was mapped since (dlopen, or libc itself when the first sample
 * came while ld.so was still loading it).  The first time at once; while
 * re-reading finds nothing new (garbage addresses from a truncated stack),
 * the wait doubles up to MAPS_REREAD_MAX_NS; a re-read that explains the
 * address starts over. */
#define MAPS_REREAD_FIRST_NS (16 * 1000 * 1000ULL)
#define MAPS_REREAD_MAX_NS (8 * NSEC_PER_SEC)
#define MAPS_REREAD_COST_FACTOR 20
#define MAPS_REREAD_COST_MIN_NS (5 * 1000 * 1000ULL) /* ~4,000 mappings */
/* How often to look again for a JIT's perf map that was not there. */
#define JIT_MAP_RECHECK_NS (1 * NSEC_PER_SEC)
/* Bound on evictions for one sample, so one sample can't stall the loop. */
#define EVICTIONS_PER_SAMPLE 4
#define MODULE_NONE UINT16_MAX
/* New file mappings looked up per read of a process's maps (each a stat,
 * and an open the first time a file is seen: ~20 us). */
#define MODULES_PER_READ 256
/* Jobs identifying mapped files on the lane at once (profile/procread.c), one per
 * process whose maps have new files: past it a read's new file mappings
 * wait for a later one, as past MODULES_PER_READ, so it is sized for a
 * burst of new processes (a make -j) within one turn of the loop.  The
 * descriptors they hold are bounded by the symbolizer (a quarter of
 * max_fds). */
#define MODPROBE_JOBS_MAX 32
/* A probe not back by then is given up on (its server does not answer):
 * the samples that waited go in with the modules known, and the job, when
 * it returns, is only released.  It still counts in MODPROBE_JOBS_MAX
 * until then, so hung ones cannot pile up. */
#define MODPROBE_WAIT_NS (1 * NSEC_PER_SEC)
/* How long samples wait for their interpreter frames to be read
 * (hooks.frames_wait): a read that takes longer is one of memory on a
 * file system that does not answer. */
#define FRAMES_WAIT_NS (1 * NSEC_PER_SEC)
/* Lanes of the maps lane: a read of maps, or the files of one process
 * probed.  The first takes only maps reads, so that probes stuck on file
 * servers that do not answer never stop those; each such server holds one
 * of the others (procread.c's dev_slow). */
#define AGG_LANES 4
/* Jobs waiting for a slot (MODPROBE_JOBS_MAX), oldest first: a burst of
 * new processes; past it their new mappings wait for a later read. */
#define MODPROBE_QUEUED_MAX 1024
#define PROCESS_MAX_THREADS 4096
/* Samples waiting for their process's maps (aggregate.h): at 1999 Hz on
 * every CPU of a large host, a read of ~100 ms; and 8 MiB of records (a
 * sample of full stacks is ~3 KiB). */
#define AGG_PARKED_PER_PROCESS 1024
#define AGG_PARKED_BYTES (8u << 20)

/* A copy of a sample record that waits for its process's maps. */
struct parked_sample {
	struct parked_sample *next;
	size_t size;
	uint64_t record[]; /* the record, aligned as the ring buffer's */
};

struct aggregator {
	struct aggregator_limits limits;
	struct module_registry modules; /* names the mappings' binaries */
	struct stacktab *stacks;
	struct process **procs;
	/* When aggregator_maintain has work on procs[i] (history_due_s; 0
	 * for at once): a compact array, so that the once-a-second pass over
	 * a full store reads 8 bytes a process, not its history. */
	uint64_t *due_s;
	size_t n_procs, cap_procs;
	struct u64map by_pid; /* tgid -> struct process * (latest incarnation) */
	struct collector *collectors;
	/* The exited processes, oldest exit first: a host with process churn
	 * keeps max_processes of them, and a new process evicts one, without
	 * a look at all the others. */
	struct process *exited_head, *exited_tail;
	uint64_t ns_per_tick;
	uint64_t scale_rng;       /* aggregator_scale_periods's rounding */
	uint32_t stack_limit_id; /* the placeholder stack, always interned */
	size_t history_bytes;    /* sum of the processes' history bytes */
	size_t process_bytes;    /* sum of process_bytes() over the processes */
	struct aggregator_hooks hooks;
	struct aggregator_stats stats;
	struct owner_tally owners; /* evict_fairly's count, kept for its memory */
	size_t collector_bytes;    /* of the collectors' parts (collector.bytes) */
	size_t restored_table_bytes; /* aggregator_set_restored_table_bytes */
	struct offload *maps_lane; /* NULL: maps are read at once */
	size_t parked_bytes;       /* of the samples waiting for maps */
	/* modprobe jobs on the lane, those given up on included */
	struct modprobe_job *probe_jobs[MODPROBE_JOBS_MAX];
	size_t n_probe_jobs;
	struct modprobe_job *probes_queued, **probes_queued_tail;
	size_t n_probes_queued;
	bool settled; /* aggregator_settle: nothing waits any more */
	struct {
		struct u64map by_tid; /* tid -> struct offcpu_stack * (offcpu.c) */
		size_t bytes;
	} offcpu; /* off-CPU stacks waiting for their blocks' ends */
};

/* offcpu.c: an off-CPU block's stack waits for its end, then goes in;
 * a tick charged to a task switched out goes in with that stack. */
#define OFFCPU_WAITING_MAX 65536
#define OFFCPU_WAITING_BYTES (32u << 20)
int agg_offcpu_begin(struct aggregator *a, const struct perfd_sample *s, size_t size);
int agg_offcpu_end(struct aggregator *a, const struct perfd_offcpu_end *e);
int agg_offcpu_switched_tick(struct aggregator *a, const struct perfd_sample *s, size_t size);
void agg_offcpu_free(struct aggregator *a);

/* A joined off-CPU sample's wait class (profile/waitclass.h), set by
 * offcpu.c in flags bits BPF leaves clear, and read by ingest as its
 * leaf frame; with the record, it stays with a sample that waits. */
#define SAMPLE_WAIT_SHIFT 24
#define SAMPLE_WAIT_MASK (0xffu << SAMPLE_WAIT_SHIFT)
static inline uint32_t sample_wait_flags(unsigned c)
{
	return (uint32_t)c << SAMPLE_WAIT_SHIFT;
}
static inline unsigned sample_wait_class(uint32_t flags)
{
	return (flags & SAMPLE_WAIT_MASK) >> SAMPLE_WAIT_SHIFT;
}

/* The root frame of a sample whose GIL state BPF read. */
static inline uint64_t sample_gil_special(uint32_t flags)
{
	return flags & PERFD_SAMPLE_F_GIL_HELD ? FRAME_SPECIAL_GIL_HELD :
	       flags & PERFD_SAMPLE_F_GIL_WAIT ? FRAME_SPECIAL_GIL_WAITING :
						 FRAME_SPECIAL_GIL_RELEASED;
}

/* proctab.c */
void agg_notify_gone(struct aggregator *a, const struct process *p);
size_t agg_process_bytes(const struct process *p);
void agg_process_free(struct aggregator *a, struct process *p);
void agg_due_now(struct aggregator *a, const struct process *p);
void agg_mark_exited(struct aggregator *a, struct process *p);
void agg_remove_process(struct aggregator *a, size_t index);
size_t agg_store_memory(const struct aggregator *a);
bool agg_evict_fairly(struct aggregator *a, enum owner_measure m, const struct process *keep,
		      uint64_t *cause);
void agg_enforce_memory(struct aggregator *a, const struct process *keep);
struct process *agg_process_add(struct aggregator *a, const struct perfd_event_header *h,
				uint32_t page_size, bool kthread);
struct process *agg_lookup(struct aggregator *a, uint32_t tgid, uint64_t start_ns);
struct process *agg_process_for(struct aggregator *a, const struct perfd_event_header *h,
				const char *comm, uint32_t page_size, bool kthread, bool maps);

/* procread.c */
int agg_open_proc(struct process *p, int *ret_dirfd);
void agg_read_comm(struct process *p, int dirfd, const char *otherwise);
void agg_set_owner(struct process *p, uint32_t owner, uint64_t ns);
void agg_find_jit_map(struct aggregator *a, struct process *p);
void agg_read_identity_and_maps(struct aggregator *a, struct process *p, int dirfd, bool named,
				bool maps);
void agg_read_new_process(struct aggregator *a, struct process *p, const char *comm,
			  bool own_comm, bool maps);
bool agg_reread_maps_if_due(struct aggregator *a, struct process *p, uint64_t now_ns);
bool agg_maps_miss(const struct process *p, uint64_t addr);
/* Forgets what p's samples wait for (its maps' read, its files' probes,
 * its frames' reads: of an image an exec replaced) and lets in those
 * that waited. */
void agg_forget_waits(struct aggregator *a, struct process *p);
void agg_forget_probes(struct process *p);
bool agg_probes_late(struct aggregator *a, struct process *p, uint64_t now_ns);
void agg_give_up_late_probes(struct aggregator *a, uint64_t now_ns);
/* Lets in the samples that waited FRAMES_WAIT_NS for their interpreter
 * frames (hooks.frames_wait), unread. */
void agg_give_up_late_frames(struct aggregator *a, uint64_t now_ns);
void agg_free_queued_probes(struct aggregator *a);

/* ingest.c */
uint64_t agg_user_frame(struct aggregator *a, struct process *p,
			uint64_t addr, uint64_t now_ns);
int agg_ingest_sample(struct aggregator *a, const struct perfd_sample *s, size_t size,
		      struct process *waited);
void agg_ingest_parked(struct aggregator *a, struct process *p);

/* selection.c */
void agg_adopt(struct aggregator *a, uint32_t pid, uint64_t start, uint32_t ppid,
	       uint64_t parent_start);
void agg_feed_collectors(struct aggregator *a, struct process *p,
			 const struct perfd_sample *s, uint64_t key, uint64_t value);

#endif
