/* SPDX-License-Identifier: MIT */
/*
 * sample.h - the ABI between bpf/perfd.bpf.c and the daemon.
 *
 * The BPF side writes variable-length records into one BPF ring buffer
 * (see the design comment in bpf/perfd.bpf.c for why a ring buffer and not
 * in-kernel aggregation).  Every record starts with struct perfd_event_header;
 * `kind` says which struct follows.  Only fixed-width kernel types are used so
 * that this header compiles both against vmlinux.h and against libc.
 */
#ifndef PERFD_SAMPLE_H
#define PERFD_SAMPLE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "perfd/kinds.h" /* enum perfd_value_kind */
#include "perfd/python.h"

#define PERFD_TASK_COMM_LEN 16
/* The owner of a process no user but root may trace (struct perfd_sample's
 * owner_uid, and the daemon's for a process or a time window). */
#define PERFD_OWNER_NONE 0xffffffffu
/* Matches the kernel's PERF_MAX_STACK_DEPTH default. */
#define PERFD_MAX_STACK_DEPTH 127

enum perfd_event_kind {
	PERFD_EVENT_SAMPLE = 1,
	PERFD_EVENT_EXIT = 2,
	PERFD_EVENT_EXEC = 3,
	PERFD_EVENT_RSS = 4,
	PERFD_EVENT_FORK = 5,
	PERFD_EVENT_OFFCPU_END = 6,
};

/* The most mean periods one CPU sample stands for: a jittered tick later
 * than that restarts the blocks instead of catching up. */
#define PERFD_CPU_VALUE_MAX 4

/* Resident-set counters, in pages, in the order of the kernel's MM_* enum
 * values we copy them from (file, anon, shmem). */
enum perfd_rss_counter {
	PERFD_RSS_FILE = 0,
	PERFD_RSS_ANON = 1,
	PERFD_RSS_SHMEM = 2,
	PERFD_RSS_COUNTERS = 3,
};

struct perfd_event_header {
	__u32 kind; /* enum perfd_event_kind */
	__u32 tgid;
	__u32 tid;
	__u32 cpu;
	__u64 timestamp_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	/* The thread-group leader's start_boottime: with tgid it names one
	 * process for its whole life, so a reused pid is a new process. */
	__u64 start_time_ns;
};

/*
 * One sample: a cpu-clock tick (value_kind CPU, value in mean periods), or a point of the
 * byte-sampled resident-memory growth of the process (value_kind MEMORY,
 * value the bytes it stands for).  ips[] holds kernel_depth kernel frames followed by
 * user_depth user frames, each list leaf first, then python_depth
 * struct perfd_python_frame (two words each, leaf first; see
 * perfd/python.h).  A negative depth is the -errno that bpf_get_stack()
 * returned; no frames are stored for it.
 */
struct perfd_sample {
	struct perfd_event_header hdr;
	char comm[PERFD_TASK_COMM_LEN]; /* of the sampled thread */
	__u64 rss_pages[PERFD_RSS_COUNTERS];
	__u64 hiwater_rss_pages; /* mm->hiwater_rss, updated lazily by the kernel */
	__u32 page_size;
	__s32 kernel_depth;
	__s32 user_depth;
	__u32 flags; /* PERFD_SAMPLE_F_* */
	__u16 python_depth; /* Python frames after the native ones */
	__u16 value_kind;   /* enum perfd_value_kind */
	/* Who could ptrace the process when the sample was taken: its real
	 * uid when its real, effective and saved uids agree and it is
	 * dumpable, else PERFD_OWNER_NONE (root only).  Taken per sample, as
	 * the stack is, because a process changes owner without exec
	 * (setresuid(), prctl(PR_SET_DUMPABLE)); it fits where the two
	 * fields above were 32-bit, so it costs no ring-buffer byte. */
	__u32 owner_uid;
	__u64 value;
	__u64 ips[];
};

#define PERFD_SAMPLE_F_KTHREAD (1u << 0) /* no mm: a kernel thread */
#define PERFD_SAMPLE_F_DWARF (1u << 1)   /* user stack unwound with tables */
#define PERFD_SAMPLE_F_TRUNCATED (1u << 2) /* the unwinder stopped before the root */
/* The unwinder met code the daemon has not described (a process without
 * tables yet, or a pc in no known mapping): the daemon should read maps. */
#define PERFD_SAMPLE_F_NEEDS_MAPS (1u << 3)
/* The process runs a CPython the daemon described: the walker ran (a
 * thread without a thread state has python_depth 0). */
#define PERFD_SAMPLE_F_PYTHON (1u << 4)
/* The Python walk stopped early: too deep, or memory it could not read. */
#define PERFD_SAMPLE_F_PYTHON_TRUNCATED (1u << 5)
/* The unwinder stopped before the root after walking code whose table was
 * still being built (with frame pointers, which that code may not keep):
 * the native stack is likely short, and says so at its root. */
#define PERFD_SAMPLE_F_UNWIND_PENDING (1u << 6)

/* The tick fell due before the last context switch on its CPU and is
 * charged to the task switched out (bpf/perfd.bpf.c, "Whose tick it is"):
 * no stack, and its RSS fields are not the process's. */
#define PERFD_SAMPLE_F_SWITCHED (1u << 7)

/* The thread runs Python and the walker read its interpreter's GIL
 * (bpf/python.bpf.h, "The GIL"): it holds it (HELD), is blocked in the
 * GIL's own locks (WAIT), or neither (it released it: native code, a
 * blocking call). */
#define PERFD_SAMPLE_F_GIL_KNOWN (1u << 8)
#define PERFD_SAMPLE_F_GIL_HELD (1u << 9)
#define PERFD_SAMPLE_F_GIL_WAIT (1u << 10)

#define PERFD_SAMPLE_MAX_WORDS                                                 \
	(2 * PERFD_MAX_STACK_DEPTH +                                           \
	 PERFD_MAX_PYTHON_DEPTH * PERFD_PYFRAME_WORDS)

#define PERFD_SAMPLE_MAX_SIZE                                                  \
	(sizeof(struct perfd_sample) + PERFD_SAMPLE_MAX_WORDS * sizeof(__u64))

/* The last thread of a process we have sampled exited. */
struct perfd_exit {
	struct perfd_event_header hdr;
	__s32 exit_code;
	__u32 reserved;
};

/* The resident-set counters of a process changed (at most about once a
 * second per process): the RSS timeline of processes that get no CPU
 * samples.  comm is the thread's that changed them (hdr.tid): the name of
 * a process first seen here and gone before the daemon reads /proc. */
struct perfd_rss {
	struct perfd_event_header hdr;
	__u64 rss_pages[PERFD_RSS_COUNTERS];
	__u64 hiwater_rss_pages;
	__u32 page_size;
	__u32 reserved;
	char comm[PERFD_TASK_COMM_LEN];
};

/* A process we have sampled called exec(): its mappings are new, and so
 * is its memory.  The record is a struct perfd_rss of kind
 * PERFD_EVENT_EXEC, the new image's RSS as it stands at the exec: a
 * program that then faults in too little to be looked at again, and never
 * runs on a sampled tick, still has a reading of its own, not its
 * parent's. */

/* A process the daemon follows (a "tree" selection: bpf/perfd.bpf.c's
 * `followed` map) forked a new process: hdr names the child (its tgid,
 * start time, and the parent's comm, which the child has until it
 * execs), sent before the child runs, so that the child's parent is known
 * from its first record on, however short its life. */
struct perfd_fork {
	struct perfd_event_header hdr;
	char comm[PERFD_TASK_COMM_LEN];
	__u64 parent_start_time_ns;
	__u32 parent_tgid;
	__u32 page_size;
};

/*
 * A task that a context switch took off its CPU ran again (bpf/offcpu.bpf.h).
 * Its block began with a sample of value_kind OFFCPU and value 0, sent at
 * the switch out, whose stack is where it waited; this record, sent at the
 * switch back in (hdr.timestamp_ns), says how long that was and how likely
 * its stack was to be taken: the sample then stands for
 * (hdr.timestamp_ns - out_ns) / (odds / PERFD_OFFCPU_ODDS_ONE) nanoseconds.  hdr.tid and out_ns
 * (the sample's timestamp) name the sample it ends.
 */
struct perfd_offcpu_end {
	struct perfd_event_header hdr;
	__u64 out_ns;  /* when it was switched out: its sample's timestamp */
	__u32 odds;    /* its stack was taken with probability odds / PERFD_OFFCPU_ODDS_ONE */
	__u32 state;   /* how it left: PERFD_OFFCPU_RUNNABLE, or its __state */
};

#define PERFD_OFFCPU_ODDS_BITS 20
#define PERFD_OFFCPU_ODDS_ONE (1u << PERFD_OFFCPU_ODDS_BITS)

/* The task was still runnable when it left (preempted, or it yielded):
 * its wait was for a CPU. */
#define PERFD_OFFCPU_RUNNABLE (1u << 31)

/* Indexes into the per-CPU `counters` map. */
enum perfd_counter {
	PERFD_CNT_SAMPLES = 0,       /* CPU samples taken (in mean periods), idle included */
	PERFD_CNT_IDLE,              /* ... of pid 0: counted, never sent */
	PERFD_CNT_RINGBUF_FULL,      /* sample dropped: no room in the ring */
	PERFD_CNT_KSTACK_ERROR,      /* kernel stack could not be read */
	PERFD_CNT_USTACK_ERROR,      /* user stack could not be read */
	PERFD_CNT_EXIT_SENT,
	PERFD_CNT_EXIT_LOST,         /* exit event dropped: no room */
	PERFD_CNT_EXEC_SENT,
	PERFD_CNT_EXEC_LOST,         /* exec event dropped: no room */
	PERFD_CNT_UNWIND_DWARF,      /* user stacks unwound with tables */
	PERFD_CNT_UNWIND_TRUNCATED,  /* ... of which stopped early (no rule, bad read) */
	PERFD_CNT_PYTHON_WALKS,      /* samples of a described CPython process */
	PERFD_CNT_PYTHON_NO_THREAD_STATE, /* ... of a thread without a PyThreadState */
	PERFD_CNT_PYTHON_TRUNCATED,  /* ... whose walk stopped early */
	PERFD_CNT_MEMORY_EVENTS,     /* rss_stat events seen */
	PERFD_CNT_MEMORY_SAMPLES,    /* memory samples sent */
	PERFD_CNT_MEMORY_LOST,       /* memory samples dropped: no room */
	PERFD_CNT_RSS_SENT,          /* RSS updates sent */
	PERFD_CNT_RSS_LOST,          /* RSS updates dropped: no room */
	PERFD_CNT_UNWIND_PENDING,    /* user stacks truncated in code whose table was being built */
	/* CPU samples (in periods, idle included) of ticks that fell due
	 * before a context switch, charged to the task switched out */
	PERFD_CNT_SWITCHED,
	/* CPU samples (in periods) of ticks the kernel never delivered to
	 * the cpu-clock program though their timer expired ("Ticks the
	 * kernel did not deliver" in bpf/perfd.bpf.c): on an idle CPU, also
	 * counted in PERFD_CNT_SAMPLES and PERFD_CNT_IDLE; on a busy one,
	 * lost (no stack, no task to charge them to). */
	PERFD_CNT_UNDELIVERED_IDLE,
	PERFD_CNT_UNDELIVERED_LOST,
	/* user frames whose caller was found by frame pointer in code the
	 * daemon proved keeps them (bpf/unwind.bpf.h, "Frames in code that
	 * keeps frame pointers"), of stacks unwound with tables */
	PERFD_CNT_UNWIND_FP_FRAMES,
	/* Timer ticks that took no sample (jittered sampling); kept in
	 * struct perfd_cpu_state, not in the counters map, so that the tick
	 * that samples nothing touches one map entry only. */
	PERFD_CNT_THINNED,
	/* user stacks of a process the daemon had not described, walked by
	 * the kernel's frame-pointer walk, that did not end in a program's
	 * or the loader's entry: flagged truncated (bpf/perfd.bpf.c, "A
	 * stack walked before the daemon described its process") */
	PERFD_CNT_UNWIND_FP_UNROOTED,
	/* Python frames of CPU samples whose code object's tag came from
	 * the walker's per-CPU cache, and those whose tag was read from the
	 * code object (bpf/python.bpf.h, "Tags") */
	PERFD_CNT_PYTHON_TAGS_CACHED,
	PERFD_CNT_PYTHON_TAGS_READ,
	/* Timer ticks timed by a clock read rather than by the expiry the
	 * hrtimer program noted (bpf/perfd.bpf.c, "Whose tick it is"): a
	 * CPU's first tick, a note the program could not make, and every
	 * tick where it is not attached.  Kept in struct perfd_cpu_state,
	 * as PERFD_CNT_THINNED is. */
	PERFD_CNT_TICKS_CLOCKED,
	PERFD_CNT_FORK_SENT,         /* fork events of followed processes sent */
	PERFD_CNT_FORK_LOST,         /* ... dropped: no room in the ring */
	/* Off-CPU time (bpf/offcpu.bpf.h): user tasks switched out, those
	 * whose stack was taken, the nanoseconds they waited, and the
	 * nanoseconds of the blocks whose stack was not taken (sampled
	 * out), or whose record found no room in the ring (lost). */
	PERFD_CNT_OFFCPU_BLOCKS,
	PERFD_CNT_OFFCPU_SAMPLED,
	PERFD_CNT_OFFCPU_SAMPLED_NS,
	PERFD_CNT_OFFCPU_SKIPPED_NS,
	PERFD_CNT_OFFCPU_LOST,
	/* ... blocks whose stack was taken because a tick fell due in their
	 * switch (bpf/offcpu.bpf.h), for the tick: in OFFCPU_SAMPLED too */
	PERFD_CNT_OFFCPU_FOR_TICK,
	PERFD_CNT_MAX,
};

/*
 * The per-CPU state of the cpu-clock program: one map value, so that a tick
 * looks it up once (bpf/perfd.bpf.c).  Jittered sampling ("Which ticks
 * sample"): time is cut into blocks of one mean period; each block has one
 * target instant, uniformly random within it; the first timer tick at or
 * after a target samples.  Whose tick it is ("Whose tick it is"): the
 * expiry of the perf hrtimer that fired last and the last context switch,
 * noted there by two tracepoint programs, the first of which also finds
 * the expiries the program never ran for.  The daemon reads `thinned`
 * and `clocked`.
 */
struct perfd_cpu_state {
	__u64 target_ns;    /* bpf_ktime_get_ns() of the current block's target; 0: not started */
	__u64 block_end_ns; /* where the current block ends and the next begins */
	__u64 thinned;      /* ticks that sampled nothing */
	__u64 due_ns;       /* expiry of the last perf hrtimer that fired here */
	__u64 due_timer;    /* ... that hrtimer (perf's own, or another perf user's) */
	__u64 timer;        /* our hrtimer, learned at the CPU's first tick */
	__u32 due_taken;    /* the program ran for that expiry */
	__u32 due_idle;     /* the CPU was idle at it */
	__u64 switch_ns;    /* bpf_ktime_get_ns() at the last switch here */
	__u64 prev;         /* the task it switched out (read with probes only) */
	__u64 period_gen;   /* the period_gen its blocks were cut for (a reload restarts them) */
	__u64 clocked;      /* ticks timed by a clock read, not by a noted expiry */
};

#endif
