/* SPDX-License-Identifier: MIT */
/*
 * aggregate.h - the profile store: every process perfd has seen and its
 * retained profile, built from the sample stream.
 *
 * The aggregator owns every process (keyed by pid and start time, so a
 * reused pid is a new process), the interned stacks their profiles count,
 * and the snapshots collecting from now on.  For each sample it normalizes
 * the user frames to (binary, offset) using the process's mappings, interns
 * the stack, and adds its value (profile.h: by stack, thread and kind) to
 * the process's history (history.h: time windows over the retention) and to
 * every collector whose selection takes the process.  A sample whose user
 * addresses wait for maps being read on the lane (aggregator_start_maps_lane)
 * is kept aside, a copy of the record, until they are read; then it is
 * ingested as if it had just come.  At most AGG_PARKED_PER_PROCESS per
 * process and AGG_PARKED_BYTES in all wait; the others are named from the
 * maps there are, as a sample always was before its maps were re-read.
 *
 * Memory is bounded by max_memory_bytes over everything the store holds
 * (windows, stacks, processes, what snapshots are collecting, and the
 * names of the frames read back from the state directory): past
 * it, the store takes from one owner at a time, fairly (profile/owners.h:
 * the owner admitting data when it holds more than its share, else the
 * one holding the most), that owner's oldest window first; when it has no
 * window left to drop, its coldest process (the one that exited first,
 * then the live one sampled longest ago; never one a snapshot is
 * collecting).  The process and stack limits evict the same way.  Exited
 * processes stay, queryable, until their last window has passed the
 * retention.  Every value dropped is counted.
 *
 * Maintenance (once a second) visits only the processes with something due
 * (a window to seal, roll up or expire, or an exited process free to go):
 * their due seconds sit in an array of their own, so a store full of idle
 * processes costs a scan of 8 bytes each, not a read of every history.
 */
#ifndef PERFD_AGGREGATE_H
#define PERFD_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfd/sample.h"
#include "perfd/protocol.h"
#include "base/u64map.h"
#include "profile/history.h"
#include "profile/moduleset.h"
#include "profile/profile.h"

struct module_registry;
struct mapsread;
struct modprobe_job;
struct parked_sample;
struct stacktab;

#define AGG_BUCKETS 64 /* one per second; > PERFD_PS_MAX_INTERVAL */


struct process {
	uint32_t pid;
	uint64_t start_time_ns;
	/* Who could ptrace it now (see api/auth.h): its real uid when real,
	 * effective and saved uids are equal and it is dumpable, else
	 * PERFD_OWNER_NONE; 0 for kernel threads.  From its newest sample
	 * (owner_ns), or /proc when it has none; its history keeps the owner
	 * of each window (history.h). */
	uint32_t owner_uid;
	uint64_t owner_ns;
	char comm[PERFD_TASK_COMM_LEN];
	struct procmaps *maps; /* executable mappings, NULL until read */
	uint16_t *map_modules; /* module id per mapping, MODULE_NONE for none */
	uint64_t maps_read_ns; /* when maps were last read */
	uint64_t maps_reread_wait_ns; /* before re-reading them on a miss */
	bool maps_partial; /* some file mappings were left without a module */
	uint64_t maps_read_cost_ns; /* what reading them took last time */
	/* procread.c's: a read of its maps still on the lane (NULL: none;
	 * process/mapsread.h), and the samples that wait for it to be named,
	 * oldest first */
	struct mapsread *maps_job;
	bool maps_job_named, maps_job_reread;
	/* procread.c's: the new file mappings of these maps being identified
	 * on the lane (profile/procread.c), NULL: none; samples in them wait too */
	struct modprobe_job *probe_job;
	/* the one given up on (MODPROBE_WAIT_NS) and not back yet: what it
	 * finds still names these maps */
	struct modprobe_job *late_job;
	struct parked_sample *parked, **parked_tail;
	size_t n_parked;
	uint16_t jit_module;   /* names from /tmp/perf-PID.map, 0 when none */
	uint64_t jit_checked_ns; /* when we last looked for that map (CLOCK_MONOTONIC) */
	/* When it last called exec(), 0: never seen to.  Its RSS before that
	 * was its old image's (a child between fork and exec has its
	 * parent's): its peak starts over there, and no RSS trend reaches
	 * across it. */
	uint64_t exec_ns;
	uint32_t ns_pid;       /* the pid inside its own pid namespace */
	uint32_t ppid;         /* its parent when first seen or at exec (0: unknown) */
	char *cgroup;          /* cgroup v2 path, NULL when unknown */
	char runtime[80];      /* the language runtime found in it ("CPython 3.11.7"), or "" */
	/* When the hooks want to look at it again (hooks.revisit, run by
	 * aggregator_revisit at that time or after); 0: never. */
	uint64_t revisit_ns;
	/* Since when (CLOCK_MONOTONIC) samples of it wait for their
	 * interpreter frames to be read (hooks.frames_wait); 0: none does.
	 * Past FRAMES_WAIT_NS (frames_late), its samples wait no more until
	 * the reads are back (aggregator_frames_read). */
	uint64_t frames_wait_ns;
	bool frames_late;
	struct history history; /* the retained profile */
	/* The comm each thread was last sampled with, for "[thread TID COMM]"
	 * (at most PROCESS_MAX_THREADS per process). */
	struct u64map thread_index; /* tid -> index + 1 in thread_comms */
	char (*thread_comms)[PERFD_TASK_COMM_LEN];
	size_t n_threads, cap_threads;
	uint64_t total_samples;
	/* Of those, the ones taken since its owner became owner_uid: what a
	 * user who sees it now may be told it totals. */
	uint64_t owner_samples;
	uint64_t first_sample_ns, last_sample_ns;
	uint64_t rss_pages[PERFD_RSS_COUNTERS]; /* the latest reading ... */
	uint64_t rss_ns;                        /* ... taken then */
	uint64_t page_size;
	uint64_t peak_rss_bytes, peak_rss_ns;   /* the highest reading, and when */
	uint64_t hiwater_rss_bytes;             /* the kernel's high-water mark */
	uint64_t memory_sampled_bytes;          /* growth sampled, in all */
	uint32_t bucket_samples[AGG_BUCKETS];
	uint32_t bucket_owner[AGG_BUCKETS]; /* as a window's (history.h) */
	uint64_t bucket_second[AGG_BUCKETS];
	bool exited;
	bool proc_gone; /* its /proc directory was found gone: not read again */
	bool kthread; /* a kernel thread: no mm, no user stack, no RSS */
	/* state/persist.c's: its windows that ended by persisted_end_s are
	 * on disk, and the segment it was last described in. */
	uint64_t persisted_end_s;
	uint64_t persisted_segment;
	unsigned pins; /* answers and snapshots holding it: never evicted */
	/* private to the store (proctab.c): where it sits in the store's array, and in
	 * its list of exited processes, oldest exit first (the order they are
	 * evicted in) */
	size_t index;
	struct process *exited_prev, *exited_next;
};

struct aggregator;

/* Which processes a query or a snapshot takes: the listed pids, or those
 * whose comm, cgroup (the path or below it) or systemd unit (a path element
 * of its cgroup) is the one given, or all; and of those only the ones
 * visible() accepts (the client's authorization), when set. */
#define SELECTION_MAX_PIDS 64
struct selection {
	uint32_t pids[SELECTION_MAX_PIDS];
	size_t n_pids;
	/* With one pid: the incarnation, by its start time in clock ticks as
	 * /proc says it (0: any). */
	uint64_t start_ticks;
	char comm[PERFD_TASK_COMM_LEN]; /* "" for any */
	char cgroup[256];               /* "" for any */
	char unit[256];                 /* "" for any */
	bool all;
	/* A pid: it and its descendants (0: any).  In a collector, each
	 * process's membership is decided once and kept in tree_members:
	 * at the collector's start for the processes the store has (by the
	 * parents it holds), at the fork record of a followed parent
	 * (collect/sampler.h's sampler_follow: however short the child's
	 * life), else when the process is first seen, by the parent /proc
	 * gives.  Elsewhere (a query of the past) by the parent each process
	 * had when it was first seen: one gone before perfd read its /proc
	 * has no known parent and is not taken. */
	uint32_t tree;
	/* The collector's members (pid -> start time; 0: the root, whichever
	 * incarnation comes first), NULL outside a collector. */
	struct u64map *tree_members;
	bool (*visible)(void *userdata, const struct process *p);
	void *visible_userdata;
	/* Of those, only the samples taken under an owner this takes (the
	 * client's authorization again, per window of history and per
	 * sample of a snapshot: history.h). */
	struct owner_filter owners;
};

/* Whether p is one of sel's processes (a's: sel->tree looks up parents). */
bool selection_matches(struct aggregator *a, const struct selection *sel, const struct process *p);

/* The profile of one process in an answer: pinned while the answer holds
 * it, so an eviction cannot free it under the encoder. */
struct profile_part {
	struct process *process;
	struct profile_values prof;
};

struct profile_parts {
	struct profile_part *parts;
	size_t n, cap;
};

/* A snapshot in progress: counts the samples of the selected processes
 * that fall in [begin_ns, end_ns].  The caller (manager.c) owns it and
 * decides when it ends.
 *
 * What snapshots collect counts inside max_memory_bytes, and cannot be
 * evicted, so the snapshots of one uid other than root (uid) share
 * limits of their own: together they hold at most 1/AGG_SNAPSHOT_MEMORY_SHARE
 * of max_memory_bytes, and pin (keep from eviction: a part each) at most
 * 1/AGG_SNAPSHOT_PIN_SHARE of max_processes.  A sample past either is left
 * out of the snapshot, counted in samples_refused (and the store's
 * stats), with the limit it met in refused_by; the history still has it. */
#define AGG_SNAPSHOT_MEMORY_SHARE 4
#define AGG_SNAPSHOT_PIN_SHARE 4
enum collector_refusal { COLLECTOR_REFUSED_NONE, COLLECTOR_REFUSED_MEMORY, COLLECTOR_REFUSED_PINS };
struct collector {
	struct selection sel;
	uint32_t uid; /* whose snapshot: its shares, 0 (root) for none */
	uint64_t begin_ns, end_ns;
	struct profile_parts parts;
	size_t bytes; /* of the parts' profiles */
	uint64_t samples;
	uint64_t samples_refused;
	enum collector_refusal refused_by; /* the last limit met */
	/* A tree selection's members (sel.tree_members points here). */
	struct u64map tree_members;
	/* One pid: the process exited (the snapshot ends early). */
	bool exited;
	uint64_t exit_ns;
	void (*on_exit)(struct collector *c, void *userdata);
	void *userdata;
	struct collector *next;
};

struct aggregator_limits {
	size_t max_processes;
	size_t max_stacks;
	size_t max_frames;
	size_t max_memory_bytes; /* everything the store holds; 0: no limit */
	uint64_t retention_s;    /* how long windows are kept */
};

struct aggregator_stats {
	uint64_t samples;           /* CPU samples ingested (idle excluded) */
	uint64_t memory_samples;    /* memory-growth samples ingested */
	uint64_t rss_updates;       /* RSS records ingested */
	uint64_t samples_evicted;   /* samples of evicted processes */
	uint64_t stack_limit;       /* samples whose stack was dropped */
	uint64_t kernel_stack_errors, user_stack_errors;
	uint64_t exit_events;
	size_t processes, processes_exited, processes_evicted;
	size_t processes_expired;   /* exited, and their last window passed the retention */
	size_t stacks, frames;
	size_t windows;
	uint64_t windows_expired;   /* past the retention */
	uint64_t windows_evicted;   /* dropped for memory, oldest first */
	uint64_t samples_expired;   /* CPU samples in expired windows */
	uint64_t values_evicted[PROFILE_KINDS]; /* in windows dropped for memory */
	/* Eviction steps (a window or a process each), by what ran out, and
	 * by whose data went (profile/owners.h): the admitting owner's own,
	 * past its share, or the owner holding the most. */
	uint64_t evictions_memory, evictions_process_limit, evictions_stack_limit;
	uint64_t evictions_own, evictions_heaviest;
	/* Samples snapshots of users other than root left out: their
	 * memory share or their share of pinned processes was full. */
	uint64_t snapshot_samples_refused_memory, snapshot_samples_refused_pins;
	size_t snapshot_bytes; /* what the snapshots collecting hold */
	size_t restored_table_bytes; /* names of restored frames (state/persist.h) */
	/* Maps too long to read on the loop (process/mapsread.h): reads
	 * handed to the lane, those on it now, those cut at their byte cap;
	 * samples that waited for one, and those that could not (past the
	 * bounds on waiting samples) and were named from the maps there
	 * were. */
	uint64_t maps_reads_offloaded;
	size_t maps_reads_pending;
	uint64_t maps_truncated;
	uint64_t samples_waited_for_maps, samples_not_waiting;
	/* samples that waited for their interpreter frames to be read
	 * (hooks.frames_wait), and those let in unread at FRAMES_WAIT_NS */
	uint64_t samples_waited_for_frames, frames_waits_late;
	uint64_t exits_waited; /* exits that went after their samples waiting */
	/* mapped files identified on the lane (profile/procread.c): jobs sent, on
	 * the lane now, and given up on (not back within MODPROBE_WAIT_NS) */
	uint64_t module_probes;
	size_t module_probes_pending;
	uint64_t module_probes_late;
	/* Off-CPU blocks (offcpu.c): stacks received, replaced (their ends
	 * were lost), dropped (past the bounds on waiting ones); blocks
	 * joined and ingested; ends without their stack and their
	 * nanoseconds; stacks waiting now; nanoseconds ingested (estimated:
	 * each block times the odds against its stack being taken) */
	uint64_t offcpu_stacks, offcpu_stacks_replaced, offcpu_stacks_dropped;
	uint64_t offcpu_joined, offcpu_ends_unmatched, offcpu_unmatched_ns;
	/* ticks charged to a task a switch took off its CPU (in periods):
	 * given the stack it left at, and left at "[context switch]" */
	uint64_t switched_stacked, switched_bare;
	size_t offcpu_waiting;
	uint64_t offcpu_ns;
	size_t history_bytes;       /* of the windows */
	size_t memory_bytes;        /* everything the store holds */
};

/* Optional observers of process life, called from inside
 * aggregator_ingest: maps_changed after a process's mappings were (re)read
 * and every executable mapping's module resolved (map_modules), whether or
 * not they changed (describing them again to the unwinder is what brings
 * back tables BPF lost: PERFD_SAMPLE_F_NEEDS_MAPS), and
 * process_gone when a process exited, was replaced by a new incarnation of
 * its pid, was evicted, or called exec (its old image is gone; maps_changed
 * follows for the new one); rewrite_user_frames for every sample that
 * carries Python frames, frames_wait before it (whether the sample
 * waits, parked with those waiting for maps, until the hook's reads of
 * them are back: aggregator_frames_read; at most FRAMES_WAIT_NS); revisit
 * for a live process at or after its
 * revisit_ns, from aggregator_revisit (which clears it first; the hook may
 * set it again):
 * a look again at what a maps change alone would not show, such as an
 * interpreter that had not started yet. */
struct aggregator_hooks {
	void (*maps_changed)(void *userdata, struct process *p);
	void (*process_gone)(void *userdata, const struct process *p);
	/* Rewrites the user frames of a sample (frames[0..n), leaf first,
	 * normalized) into at most cap frames, returning the count: where
	 * interpreter frames are replaced by the frames they run. */
	size_t (*rewrite_user_frames)(void *userdata, const struct process *p,
				      const struct perfd_sample *s, uint64_t *frames,
				      size_t n, size_t cap);
	/* Whether what rewrite_user_frames needs of s is being read off the
	 * loop (and is asked for, when it is not), so s should wait for it. */
	bool (*frames_wait)(void *userdata, const struct process *p,
			    const struct perfd_sample *s);
	void (*revisit)(void *userdata, struct process *p);
	/* The name of the kernel function of frame, into buf (NULL: none):
	 * why an off-CPU block waited is read from them (waitclass.h). */
	const char *(*kernel_function)(void *userdata, uint64_t frame, char *buf, size_t size);
	void *userdata;
};

/* Whether the native user stack of s did not reach its root: the table
 * walk stopped before the outermost frame (PERFD_SAMPLE_F_TRUNCATED: code
 * without CFI whose frame pointers led nowhere, a table still being built,
 * the depth limit; or, for a process without tables yet, the kernel's
 * frame-pointer walk did not end in an entry point), or a frame-pointer
 * walk by the kernel filled its limit (it says nothing more: that is taken
 * as a cut).  Its frames towards the root are unknown, so the stack is
 * rooted at a marker, and frames merged into it must not be placed as if
 * its rootmost frame were the root. */
static inline bool sample_user_unrooted(const struct perfd_sample *s)
{
	return (s->flags & PERFD_SAMPLE_F_TRUNCATED) ||
	       (!(s->flags & PERFD_SAMPLE_F_DWARF) && s->user_depth >= PERFD_MAX_STACK_DEPTH);
}

struct aggregator;

/* The store, whose mappings take their module ids from modules
 * (process/modules.h; copied).  Returns 0 or -ENOMEM. */
int aggregator_new(const struct aggregator_limits *limits, const struct module_registry *modules,
		   struct aggregator **ret);
void aggregator_set_hooks(struct aggregator *a, const struct aggregator_hooks *hooks);
struct aggregator *aggregator_free(struct aggregator *a);

/* From now on, maps too long to read on the caller's thread are read on
 * a lane of their own (process/mapsread.h): aggregator_fd is readable
 * when some are read, and aggregator_complete, on the caller's thread,
 * takes them in and ingests the samples that waited for them.  Without
 * it (the unit tests) every read is done at once.  Returns 0 or -errno. */
int aggregator_start_maps_lane(struct aggregator *a);
int aggregator_fd(const struct aggregator *a);
void aggregator_complete(struct aggregator *a);
/* At exit, before the store is written: the samples still waiting for
 * their process's maps or files go in with what is known, so that none
 * is lost with the lanes. */
void aggregator_settle(struct aggregator *a);

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
 * [first_second, end_second) of CLOCK_MONOTONIC, at most AGG_BUCKETS back,
 * of the seconds whose owner owners takes (NULL: all; a second of two
 * owners is PERFD_OWNER_NONE's, as a window of history is). */
uint64_t process_window_samples(const struct process *p, uint64_t first_second,
				uint64_t end_second, const struct owner_filter *owners);
uint64_t process_rss_bytes(const struct process *p);
/* The highest RSS known: perfd's highest reading, the kernel's high-water
 * mark, or the current one, whichever is highest. */
uint64_t process_peak_rss_bytes(const struct process *p);
/* p's off-CPU time in the whole seconds [first_second, end_second) (a
 * block counts in the second it ended), of the windows of its history
 * whose owner owners takes, by why it waited: ns[c] for each wait class c
 * of profile/waitclass.h (ns holds WAIT_CLASSES).  Returns the sum. */
uint64_t process_window_waits(const struct aggregator *a, const struct process *p,
			      uint64_t first_second, uint64_t end_second,
			      const struct owner_filter *owners, uint64_t *ns);
/* The comm thread tid of p was last sampled with, or NULL. */
const char *process_thread_comm(const struct process *p, uint32_t tid);

/* Starts counting samples for c (filled by the caller: sel, begin_ns,
 * end_ns, on_exit).  c->on_exit is called, from inside aggregator_ingest,
 * when the one process c selects by pid exits.  A tree selection's
 * members are decided from here on (struct selection); out of memory,
 * by the parents the store holds at each sample. */
void aggregator_add_collector(struct aggregator *a, struct collector *c);
/* Whether a collector other than except (NULL: none) takes pid as a
 * member of its tree: its forks and execs are still to be followed. */
bool aggregator_follows(const struct aggregator *a, uint32_t pid, const struct collector *except);
/* Stops counting; c->parts stay for the caller, released with
 * aggregator_release_parts; its tree members are freed. */
void aggregator_remove_collector(struct aggregator *a, struct collector *c);

/* The retained profiles of the selected processes over [from_ns, to_ns)
 * (CLOCK_MONOTONIC), one part per process with data there; *first_ns and
 * *end_ns get the span the windows taken cover (0, 0 when none).  Returns
 * 0 or -ENOMEM (ret released). */
int aggregator_query(struct aggregator *a, const struct selection *sel, uint64_t from_ns,
		     uint64_t to_ns, struct profile_parts *ret, uint64_t *first_ns,
		     uint64_t *end_ns);
/* Adds p's retained profile over [from_ns, to_ns), of the windows owners
 * takes (NULL: all), to parts, which do not
 * hold p yet, as a part of its own (p pinned until the parts are
 * released), even when empty.  Returns 0 or -ENOMEM (parts as they were). */
int aggregator_query_process(struct aggregator *a, struct process *p, uint64_t from_ns,
			     uint64_t to_ns, const struct owner_filter *owners,
			     struct profile_parts *parts);
/* Releases the parts of a query or a collector, unpinning their processes
 * (an expired one that nothing holds any more is freed). */
void aggregator_release_parts(struct aggregator *a, struct profile_parts *parts);

/* Runs the revisit hook for each live process whose revisit_ns is due at
 * now_ns (CLOCK_MONOTONIC).  Returns the earliest revisit_ns still set, 0
 * when none: the caller's loop calls again then.  On a timer, not at a
 * process's next sample: samples reach the store a drain later, up to a
 * second, and an interpreter found before it ran would go unwalked that
 * long. */
uint64_t aggregator_revisit(struct aggregator *a, uint64_t now_ns);
/* The reads hooks.frames_wait asked for p are back: its samples that
 * waited for them go in (those that also wait for its maps, once those
 * are read). */
void aggregator_frames_read(struct aggregator *a, struct process *p);

/* Once a second: rolls windows up, drops those past the retention, frees
 * exited processes with nothing left, keeps memory under its limit. */
void aggregator_maintain(struct aggregator *a, uint64_t now_ns);
/* Every value counted in sampling periods (the CPU samples: kindtab.h's
 * kind_in_periods) held (windows, snapshots collecting, per-process
 * counts) x num / den, rounded at random so that the sums stay unbiased: when the
 * sampling period goes from num ns to den ns, an old sample is num / den
 * new ones.  A process whose windows cannot be written again for want of
 * memory loses them, counted as evicted. */
void aggregator_scale_periods(struct aggregator *a, uint64_t num, uint64_t den);

/* What the state directory keeps of a process (state/persist.h). */
struct process_restored {
	uint32_t pid;
	uint64_t start_time_ns;
	uint32_t owner_uid, ns_pid;
	char comm[PERFD_TASK_COMM_LEN];
	const char *cgroup; /* NULL: unknown */
	const char *runtime;
	bool kthread;
	uint64_t exec_ns, first_sample_ns, last_sample_ns, total_samples;
	uint64_t owner_samples; /* of total_samples, counted under owner_uid */
	uint64_t page_size, peak_rss_bytes, peak_rss_ns, hiwater_rss_bytes;
	uint64_t memory_sampled_bytes;
};

/* The process r describes, from the state directory: the one the store
 * has (its counts updated from r), or a new one.  A process still running
 * (its pid and start time in /proc) is read from /proc as a new one is
 * (its owner now; its maps at its first sample with a stack); one that is
 * not is exited.  NULL when
 * the store has no room for it or out of memory. */
struct process *aggregator_restore_process(struct aggregator *a, const struct process_restored *r);
/* Appends a window read back from the state directory to p's history
 * (history_restore).  Returns 0, -EINVAL or -ENOMEM. */
int aggregator_restore_window(struct aggregator *a, struct process *p,
			      const struct history_restored *w);
/* After a restore: drops what is past the retention and over the memory
 * limit, as maintenance would. */
void aggregator_restored(struct aggregator *a, uint64_t now_ns);
/* What the table restored frames resolve from holds (state/persist.h):
 * inside max_memory_bytes, though no window's; the table shrinks as the
 * windows naming its frames go. */
void aggregator_set_restored_table_bytes(struct aggregator *a, size_t bytes);

/* Adds to used every module a live process maps (or whose JIT map it
 * has) and every module a frame of a kept stack is in.  An exited
 * process, kept for its history, holds only what its stacks name. */
void aggregator_mark_modules(const struct aggregator *a, struct module_set *used);
/* Forgets, in exited processes' maps, the modules not in used (their ids
 * were just given back, and will name other files). */
void aggregator_forget_modules(struct aggregator *a, const struct module_set *used);
struct stacktab *aggregator_stacks(struct aggregator *a);
uint64_t aggregator_ns_per_tick(const struct aggregator *a);
void aggregator_get_stats(const struct aggregator *a, struct aggregator_stats *ret);

#endif
