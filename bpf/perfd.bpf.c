// SPDX-License-Identifier: GPL-2.0
/*
 * perfd.bpf.c - the sampling side of perfd.
 *
 * `on_cpu_clock` runs on every tick of a software cpu-clock perf event opened
 * on each online CPU.  The ticks that sample (every one with a fixed period,
 * one per random target otherwise: "Which ticks sample" below) record who ran
 * (tgid, tid, comm, the process's start time), the kernel stack, the user
 * stack and the RSS counters, and send that as one variable-length record
 * through one BPF ring buffer.
 *
 * Why a ring buffer per sample and not in-kernel aggregation: aggregating in
 * maps (a stack-trace map plus a count hash) is cheaper per sample but loses
 * in ways that are hard to see or to bound: stack-map hash collisions silently
 * merge or drop stacks, entries are never freed unless the daemon races the
 * program to delete them, and per-sample facts (RSS at that moment, thread,
 * time, which snapshot window it falls in) are gone.  A ring buffer keeps
 * every sample exact, bounds kernel memory to its size, and makes loss
 * explicit: a failed reserve is counted (PERFD_CNT_RINGBUF_FULL) and shown by
 * `perfctl status`.  The daemon aggregates as it drains, so the cost moved to
 * user space is one hash lookup per sample.  Records are variable length
 * (most stacks are far shorter than 127 frames) so the ring holds more of them.
 *
 * Wake-ups are rationed: the daemon drains on a timer, every record is
 * submitted without a wake-up of its own (the ring's default would wake
 * the daemon for any record that finds it caught up: an exit, an RSS
 * change), and the program forces one only when the ring is filling up
 * (ringbuf_wakeup_bytes), when a process is first seen in a sample with a
 * stack, or when such a process calls exec(): the daemon then reads its
 * /proc/PID/maps while it is still alive.  A process seen only in RSS
 * records (a fork about to exec, a short command) needs no maps and waits
 * for the timer: each forced wake-up costs the daemon a context switch,
 * and with a command started every few milliseconds those were most of
 * its CPU.
 *
 * For a CPython process the daemon has described, the Python frames of the
 * sampled thread follow the native ones (python.bpf.h).
 *
 * `on_process_exit` reports the death of a process we sampled so that a
 * snapshot of it can end at once and the daemon can evict it first;
 * `on_process_exec` says that its mappings must be read again and that its
 * memory starts over, with the new image's RSS.  `on_process_fork` follows
 * the descendants of the processes a "tree" selection takes (`followed`).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "perfd/sample.h"
#include "perfd/tiers.h"

char LICENSE[] SEC("license") = "GPL";

#define ENOENT 2

static __always_inline __u64 *unwind_out(void);
#include "unwind.bpf.h"

/* Set by the daemon between open and load. */
const volatile __u64 ringbuf_wakeup_bytes = 256 * 1024;
/* The load's tier (include/perfd/tiers.h): whether user stacks are walked
 * with the daemon's tables, and whether Python frames are read, by the
 * cpu-clock and the memory programs alike.  Constants to the verifier,
 * which never walks the code of a feature that is off. */
const volatile bool with_tables = true;
const volatile bool with_python = true;
/* Test-only: features whose programs must fail to load (PERFD_REFUSE_*). */
const volatile __u32 test_refuse = 0;

/* Makes the verifier refuse the program being loaded when feature is in
 * test_refuse: a read above the frame, which no kernel accepts.  Dead code,
 * never walked, otherwise. */
static __always_inline void refuse_if_asked(__u32 feature)
{
	if (test_refuse & feature)
		asm volatile("r0 = *(u64 *)(r10 + 8)" ::: "r0");
}
const volatile __u32 page_size = 4096;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024); /* resized by the daemon */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PERFD_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Scratch space for building one sample: too big for the 512-byte stack. */
struct sample_buf {
	__u8 bytes[PERFD_SAMPLE_MAX_SIZE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_buf);
} scratch SEC(".maps");

/* Processes already announced to the daemon.  A miss (new process, or a
 * pid reused) in a sample with a stack forces a wake-up, and so does a
 * sample whose unwinding met code the daemon has not described yet, at
 * most every nudge_interval_ns per process: the daemon reads the maps
 * then, instead of at its next timer.  So does a memory sample with
 * Python frames: the daemon names them by reading their code objects from
 * the process, which a script that grows and then exits (memory samples
 * come in bursts, often just before the end) no longer has a second
 * later; memory samples are rare (one per memory_sample_bytes of growth),
 * so these wake-ups are few.  And so does a CPU sample with Python frames
 * of a `followed` process (perfctl record's): a short script is gone by
 * the next drain too; only recorded processes cost these wake-ups.  LRU, so it can never fill up; an
 * evicted entry only costs one extra wake-up. */
struct known_process {
	__u64 start_time_ns;
	__u64 next_nudge_ns;
	__u32 stacks;   /* a sample with a stack was sent: its maps matter */
	__u32 reserved;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct known_process);
} known_processes SEC(".maps");

const volatile __u64 nudge_interval_ns = 20 * 1000 * 1000;

/* Processes whose forks and execs the daemon follows: the roots of its
 * "tree" selections (perfctl record's command, added by the daemon before
 * the command runs) and every process they start, added here by
 * `on_process_fork` before the child runs, so that no descendant escapes
 * by being short-lived or by a parent the daemon never saw.  A fork of one
 * is sent (struct perfd_fork) with a wake-up, an exec of one as well,
 * sampled or not.  tgid -> start time (0: the root, any incarnation);
 * `on_process_exit` drops it.  A full map follows no more children: the
 * daemon still takes those it finds by their parent in /proc. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} followed SEC(".maps");

/* Before Linux 6.2 the RSS counters were atomics in struct mm_rss_stat;
 * commit f1a7941243c1 ("mm: convert mm's rss stats into percpu_counter")
 * made them an array of percpu_counter.  Both layouts are described here so
 * CO-RE can relocate whichever the running kernel has. */
struct mm_rss_stat___pre62 {
	atomic_long_t count[4];
} __attribute__((preserve_access_index));

struct mm_struct___pre62 {
	struct mm_rss_stat___pre62 rss_stat;
} __attribute__((preserve_access_index));

/* Before 6.18 ("mm: convert mm->flags to a bitmap") mm->flags was an
 * unsigned long; since, it is mm_flags_t, whose first word holds the same
 * low bits. */
struct mm_struct___pre618 {
	unsigned long flags;
} __attribute__((preserve_access_index));

/* include/linux/sched/coredump.h: get_dumpable() is the low two bits */
#define MMF_DUMPABLE_MASK 3
#define SUID_DUMP_USER 1

static __always_inline void count_n(enum perfd_counter c, __u64 n)
{
	__u32 key = c;
	__u64 *v = bpf_map_lookup_elem(&counters, &key);

	if (v)
		*v += n;
}

static __always_inline void count(enum perfd_counter c)
{
	count_n(c, 1);
}

#include "python.bpf.h"

static __always_inline __u64 clamp_pages(__s64 v)
{
	/* per-CPU batching can make the global count dip below zero */
	return v < 0 ? 0 : (__u64)v;
}

/* One resident-set counter (the kernel's MM_* index) of mm.  Which layout
 * the kernel has is a CO-RE type probe resolved at load time: the other
 * branch is dead code the verifier never sees.  With percpu counters we
 * read the global `count`, which is what the kernel itself reports in
 * /proc (it lags the per-CPU deltas by at most the counter batch per
 * CPU).  btf: the verifier knows mm's type (a tp_btf argument, or the
 * current task's from bpf_get_current_task_btf()), and on the layout
 * since 6.2 the counter is a direct load, no helper call: the rss_stat
 * program reads one on every event, a tick three.  Otherwise a probe
 * read, one helper call. */
static __always_inline __s64 read_counter(struct mm_struct *mm, int k, bool btf)
{
	if (bpf_core_type_exists(struct mm_rss_stat___pre62)) {
		struct mm_struct___pre62 *old = (void *)mm;

		return BPF_CORE_READ(old, rss_stat.count[k & 3].counter);
	}
	if (!btf)
		return BPF_CORE_READ(mm, rss_stat[k & 3].count);
	/* constant offsets: the verifier takes no variable one into a
	 * trusted pointer */
	switch (k & 3) {
	case 0:
		return mm->rss_stat[0].count;
	case 1:
		return mm->rss_stat[1].count;
	case 2:
		return mm->rss_stat[2].count;
	default:
		return mm->rss_stat[3].count;
	}
}

/* Copies mm's file/anon/shmem pages and peak into s; btf as for
 * read_counter(). */
static __always_inline void read_rss(struct mm_struct *mm, struct perfd_sample *s, bool btf)
{
	static const int kernel_index[PERFD_RSS_COUNTERS] = {
		[PERFD_RSS_FILE] = 0,  /* MM_FILEPAGES */
		[PERFD_RSS_ANON] = 1,  /* MM_ANONPAGES */
		[PERFD_RSS_SHMEM] = 3, /* MM_SHMEMPAGES (2 is MM_SWAPENTS) */
	};

	/* unrolled, each read at a constant index: left a loop, the
	 * compiler computed the pre-6.2 layout's offset (a relocation libbpf
	 * poisons on a newer kernel) ahead of the layout test, and the
	 * verifier refused the program */
#pragma unroll
	for (int i = 0; i < PERFD_RSS_COUNTERS; i++)
		s->rss_pages[i] = clamp_pages(read_counter(mm, kernel_index[i], btf));
	s->hiwater_rss_pages = btf ? mm->hiwater_rss : BPF_CORE_READ(mm, hiwater_rss);
}

static __always_inline __u64 *unwind_out(void)
{
	__u32 zero = 0;
	struct sample_buf *buf = bpf_map_lookup_elem(&scratch, &zero);

	return buf ? ((struct perfd_sample *)buf->bytes)->ips : NULL;
}

/* The user registers a tick interrupted, when it interrupted user code
 * (valid; see read_user_regs()). */
struct user_regs {
	__u64 ip, sp, bp;
	bool valid;
};

/* Unwinds the user stack of the current task (task, from
 * bpf_get_current_task_btf()) with the tables into s->ips[kdepth...].
 * uregs: the user registers when the program interrupted user code
 * (valid), else the ones saved at kernel entry are read.  Returns the number
 * of frames, or -ENOENT when the process has no tables (the caller then
 * walks frame pointers). */
static __always_inline long unwind_user_with_tables(const struct user_regs *uregs,
						    struct task_struct *task, __u32 tgid,
						    struct perfd_sample *s, __u32 kdepth, bool counted)
{
	struct perfd_unwind_process *proc = bpf_map_lookup_elem(&unwind_processes, &tgid);
	__u32 key = s->value_kind == PERFD_VALUE_CPU ? PERFD_VALUE_CPU : PERFD_VALUE_MEMORY;
	struct user_unwind *u;
	struct pt_regs *regs;

	if (!proc) {
		s->flags |= PERFD_SAMPLE_F_NEEDS_MAPS;
		return -ENOENT;
	}
	u = bpf_map_lookup_elem(&unwind_walks, &key);
	if (!u)
		return -ENOENT;
	__builtin_memset(u, 0, sizeof(*u));
	if (uregs->valid) {
		u->pc = uregs->ip;
		u->sp = uregs->sp;
		u->bp = uregs->bp;
	} else {
		/* The user registers saved at kernel entry: the tick
		 * interrupted the kernel, or this is a memory sample. */
		regs = (struct pt_regs *)bpf_task_pt_regs(task);
		if (!regs)
			return -ENOENT;
		u->pc = regs->ip;
		u->sp = regs->sp;
		u->bp = regs->bp;
	}
	u->bp_known = true;
	u->pc_exact = true;
	u->offset = kdepth;
	u->maps_first = proc->mappings_first;
	u->maps_count = proc->mappings_count;
	if (!stack_window_reset())
		return -ENOENT;

	bpf_loop((PERFD_MAX_STACK_DEPTH + UNWIND_FRAMES_PER_STEP - 1) / UNWIND_FRAMES_PER_STEP, unwind_step,
		 &key, 0);
	if (counted) {
		count(PERFD_CNT_UNWIND_DWARF);
		if (u->fp_frames)
			count_n(PERFD_CNT_UNWIND_FP_FRAMES, u->fp_frames);
	}
	s->flags |= PERFD_SAMPLE_F_DWARF;
	if (u->result != UNWIND_COMPLETE) {
		if (counted)
			count(PERFD_CNT_UNWIND_TRUNCATED);
		s->flags |= PERFD_SAMPLE_F_TRUNCATED;
		if (u->pending) {
			if (counted)
				count(PERFD_CNT_UNWIND_PENDING);
			s->flags |= PERFD_SAMPLE_F_UNWIND_PENDING;
		}
	}
	if (u->unmapped)
		s->flags |= PERFD_SAMPLE_F_NEEDS_MAPS;
	return u->written;
}

/* The wake-up flag for a record about process tgid (the header's
 * start_time_ns names it), which has a stack to name or not: forced for
 * the first record with a stack of a process (or of a reused pid), and,
 * at most every nudge_interval_ns per process, for a sample whose
 * unwinding needs its maps read (needs_maps); none otherwise. */
static __always_inline __u64 announce(__u32 tgid, __u64 start_time_ns, __u64 now, bool stack,
				      bool needs_maps)
{
	struct known_process *known = bpf_map_lookup_elem(&known_processes, &tgid);

	if (!known || known->start_time_ns != start_time_ns) {
		struct known_process k = {
			.start_time_ns = start_time_ns,
			.next_nudge_ns = now + nudge_interval_ns,
			.stacks = stack,
		};

		bpf_map_update_elem(&known_processes, &tgid, &k, BPF_ANY);
		return stack ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	}
	if (stack && !known->stacks) {
		known->stacks = 1;
		return BPF_RB_FORCE_WAKEUP;
	}
	if (needs_maps && now >= known->next_nudge_ns) {
		known->next_nudge_ns = now + nudge_interval_ns;
		return BPF_RB_FORCE_WAKEUP;
	}
	return BPF_RB_NO_WAKEUP;
}

/* Sends a sample built in the scratch buffer, size bytes of it, and counts
 * it or its loss. */
static __always_inline int send_sample(struct perfd_sample *s, __u64 size)
{
	__u64 flags = BPF_RB_NO_WAKEUP;
	bool nudge = (s->flags & PERFD_SAMPLE_F_NEEDS_MAPS) ||
		     (s->value_kind == PERFD_VALUE_MEMORY && (s->flags & PERFD_SAMPLE_F_PYTHON));

	/* a followed process's Python frames are named while it lives (a
	 * short script under perfctl record is gone before the next drain) */
	if (!nudge && s->python_depth > 0 && bpf_map_lookup_elem(&followed, &s->hdr.tgid))
		nudge = true;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= ringbuf_wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	else
		flags = announce(s->hdr.tgid, s->hdr.start_time_ns, s->hdr.timestamp_ns,
				 !(s->flags & PERFD_SAMPLE_F_SWITCHED), nudge);
	if (bpf_ringbuf_output(&events, s, size, flags))
		count(s->value_kind == PERFD_VALUE_CPU ? PERFD_CNT_RINGBUF_FULL : PERFD_CNT_MEMORY_LOST);
	else if (s->value_kind == PERFD_VALUE_MEMORY)
		count(PERFD_CNT_MEMORY_SAMPLES);
	return 0;
}

/* The scratch buffer set up for a sample of process tgid worth value of
 * value_kind, the sample counted (a CPU one: as taken, and as idle for
 * pid 0, which goes no further), its header's who and when left to the
 * caller; NULL when nothing is to be sent. */
static __always_inline struct perfd_sample *begin_sample(__u32 tgid, __u32 value_kind, __u64 value)
{
	struct sample_buf *buf;
	struct perfd_sample *s;
	__u32 zero = 0;

	if (value_kind == PERFD_VALUE_CPU) {
		count_n(PERFD_CNT_SAMPLES, value);
		if (tgid == 0) {
			count_n(PERFD_CNT_IDLE, value);
			return NULL;
		}
	}
	buf = bpf_map_lookup_elem(&scratch, &zero);
	if (!buf)
		return NULL;
	s = (struct perfd_sample *)buf->bytes;
	s->hdr.kind = PERFD_EVENT_SAMPLE;
	s->hdr.tgid = tgid;
	s->hdr.cpu = bpf_get_smp_processor_id();
	s->page_size = page_size;
	s->flags = 0;
	s->python_depth = 0;
	s->value_kind = value_kind;
	s->value = value;
	return s;
}

/* Who may see task's stacks now, by ptrace's rule for a tracer of the same
 * uid (ptrace_may_access()): its real uid when its real, effective and
 * saved uids (of its objective credentials, real_cred) agree and its mm is
 * dumpable, else PERFD_OWNER_NONE.  Read on every sample, not once per
 * process: setresuid() and prctl(PR_SET_DUMPABLE) change it without an
 * exec, and the daemon files each sample under the owner it had.  btf: as
 * for fill_who(); otherwise three probe reads (the cred pointer, its
 * uid..euid in one, the mm's flags). */
static __always_inline __u32 task_owner(struct task_struct *task, struct mm_struct *mm, bool btf)
{
	__u32 ids[5] = {}; /* uid, gid, suid, sgid, euid */
	unsigned long flags = SUID_DUMP_USER; /* a kernel thread: no mm */
	const struct cred *cred;

	if (btf) {
		cred = task->real_cred;
		ids[0] = cred->uid.val;
		ids[2] = cred->suid.val;
		ids[4] = cred->euid.val;
	} else {
		cred = BPF_CORE_READ(task, real_cred);
		if (bpf_probe_read_kernel(ids, sizeof(ids), (void *)cred +
					  bpf_core_field_offset(struct cred, uid)))
			return PERFD_OWNER_NONE;
	}
	if (mm && bpf_core_type_exists(mm_flags_t))
		flags = btf ? mm->flags.__mm_flags[0] : BPF_CORE_READ(mm, flags.__mm_flags[0]);
	else if (mm)
		flags = BPF_CORE_READ((struct mm_struct___pre618 *)mm, flags);
	if (ids[0] != ids[2] || ids[0] != ids[4] ||
	    (flags & MMF_DUMPABLE_MASK) != SUID_DUMP_USER)
		return PERFD_OWNER_NONE;
	return ids[0];
}

/* Fills in who a sample is of, task, and when: thread id, time, process
 * start time, command name, and the kernel-thread rule, one for every
 * sample: a task without an mm is a kernel thread, and its RSS fields are
 * zero.  btf: task is the current task from bpf_get_current_task_btf(),
 * whose fields are plain loads; otherwise (a task switched out, a kernel
 * without that helper, a memory sample: see sample()) each is a probe
 * read, a helper call, which is dear where every call and return pays for
 * retpolines and Safe RET (docs/notes/performance-history.md, "Helper calls on every
 * tick").  Returns the mm, for the caller that reads RSS and the user
 * stack from it. */
static __always_inline struct mm_struct *fill_who(struct perfd_sample *s,
						  struct task_struct *task, __u64 now, bool btf)
{
	struct mm_struct *mm;

	if (btf) {
		mm = task->mm;
		s->hdr.tid = task->pid;
		s->hdr.start_time_ns = task->group_leader->start_boottime;
		__builtin_memcpy(s->comm, task->comm, sizeof(s->comm));
	} else {
		mm = BPF_CORE_READ(task, mm);
		s->hdr.tid = BPF_CORE_READ(task, pid);
		s->hdr.start_time_ns = BPF_CORE_READ(task, group_leader, start_boottime);
		BPF_CORE_READ_STR_INTO(&s->comm, task, comm);
	}
	s->hdr.timestamp_ns = now;
	s->owner_uid = task_owner(task, mm, btf);
	if (!mm)
		s->flags |= PERFD_SAMPLE_F_KTHREAD;
	for (int i = 0; i < PERFD_RSS_COUNTERS; i++)
		s->rss_pages[i] = 0;
	s->hiwater_rss_pages = 0;
	return mm;
}

/*
 * A stack walked before the daemon described its process.  The daemon
 * reads a process's maps and hands its tables to BPF when its first sample
 * wakes it; until then (a process's first milliseconds, or all of a
 * short-lived one's life; also a process the unwinder refused) the user
 * stack is the kernel's frame-pointer walk, as bpftrace's and perf's.  In
 * code without frame pointers (most of a distribution's) that walk stops
 * at a zero rbp or wanders off through a scratch one, and says nothing:
 * Debian's python3.11 run 60-100 times for ~40 ms each had 8-10% of its
 * samples rooted at neither _start nor a marker ("python3.11;setlocale;...",
 * "[unknown];PyDict_SetDefault").  Such a walk is taken as whole only when
 * its last frame is in the program's entry (_start: AT_ENTRY in the
 * auxiliary vector the kernel keeps in the mm) or the dynamic loader's
 * (e_entry of the ELF header mapped at AT_BASE), where a main thread's
 * stack starts; otherwise it is flagged truncated, and the daemon roots it
 * at [truncated].  Flagged too, whole or not, as the walk cannot tell: a
 * thread's stack, which starts in libc's clone3; any stack through a libc
 * without frame pointers (Debian's __libc_start_main keeps argc in rbp),
 * which is nearly every one on such a system; a 32-bit process's (its
 * auxiliary vector is of 32-bit pairs); a program run as `ld.so PROG`.
 */
#define AT_NULL 0
#define AT_BASE 7
#define AT_ENTRY 9
/* from an entry point to the return addresses of its calls: 0x21 in
 * Debian's _start; 0x8 and 0x30 in its ld.so's (_dl_start, then _dl_init
 * while the libraries' constructors run), where the next function starts
 * at 0x40 */
#define ENTRY_WINDOW 64

/* Whether pc is in the entry of the current task's program, or in its
 * loader's.  A global function, checked once on its own: inlined, its
 * walk of the auxiliary vector was two thirds of the tick program's
 * verification.  It finds the mm itself, with probe reads (a global
 * function takes no kernel pointer before 6.8). */
__noinline int perfd_frame_in_entry(__u64 pc)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	__u64 entry = 0, base = 0, ld_entry = 0;

	for (__u32 i = 0; i + 1 < bpf_core_field_size(mm->saved_auxv) / sizeof(__u64); i += 2) {
		__u64 pair[2];

		if (bpf_core_read(pair, sizeof(pair), &mm->saved_auxv[i]) || pair[0] == AT_NULL)
			break;
		if (pair[0] == AT_BASE)
			base = pair[1];
		else if (pair[0] == AT_ENTRY)
			entry = pair[1];
		if (base && entry)
			break;
	}
	if (entry && pc - entry < ENTRY_WINDOW)
		return 1;
	/* 24: e_entry's offset in an Elf64_Ehdr */
	return base && !bpf_probe_read_user(&ld_entry, sizeof(ld_entry), (void *)(base + 24)) &&
	       pc - (base + ld_entry) < ENTRY_WINDOW;
}

/* Builds and sends one sample of the current task at time now: a
 * cpu-clock tick (PERFD_VALUE_CPU, value in mean periods, now the tick's
 * time as on_tick took it) or a point of memory growth
 * (PERFD_VALUE_MEMORY, value in bytes).  ctx is the program's context, for
 * bpf_get_stack().  task is the current task: from
 * bpf_get_current_task_btf() when full or btf are set.  full: the program
 * may walk what its tier (with_tables, with_python) asks for, which needs
 * bpf_loop() and that task; otherwise it takes the kernel's frame-pointer
 * walk alone (on_cpu_clock_fp).  btf: read who and RSS with plain loads
 * (fill_who).  The memory program does not: with the task's mm a BTF
 * pointer through the rest of the walk, verifying it took 170k more
 * instructions (0.6 s more at each start), for samples a thousand times
 * rarer than ticks.  uregs: the user registers when a tick interrupted
 * user code (valid; there is then no kernel stack). */
static __always_inline int sample(void *ctx, struct task_struct *task, bool full, bool btf,
				  const struct user_regs *uregs, __u32 value_kind, __u64 value,
				  __u64 now)
{
	__u32 tgid = btf ? task->tgid : bpf_get_current_pid_tgid() >> 32;
	bool tables = full && with_tables, python = full && with_python;
	struct perfd_sample *s;
	struct mm_struct *mm;
	__s64 kdepth, udepth;
	__u64 last;
	__u32 pdepth = 0;
	__u64 size;
	long n;

	s = begin_sample(tgid, value_kind, value);
	if (!s)
		return 0;
	mm = fill_who(s, task, now, btf);
	if (mm)
		read_rss(mm, s, btf);

	if (uregs->valid) {
		/* Interrupted user code: no kernel stack.  The zero is hidden
		 * from the verifier, which otherwise walks the rest of the
		 * program once more for it (110k more instructions). */
		n = 0;
		asm volatile("" : "+r"(n));
	} else {
		n = bpf_get_stack(ctx, s->ips, PERFD_MAX_STACK_DEPTH * sizeof(__u64), 0);
	}
	if (n < 0) {
		if (value_kind == PERFD_VALUE_CPU)
			count(PERFD_CNT_KSTACK_ERROR);
		s->kernel_depth = n;
		kdepth = 0;
	} else {
		kdepth = n / sizeof(__u64);
		s->kernel_depth = kdepth;
	}
	/* The verifier must see kdepth bounded to index ips[] below. */
	if (kdepth > PERFD_MAX_STACK_DEPTH)
		kdepth = PERFD_MAX_STACK_DEPTH;
	if (kdepth < 0)
		kdepth = 0;

	udepth = 0;
	s->user_depth = 0;
	if (mm) {
		n = tables ? unwind_user_with_tables(uregs, task, tgid, s, kdepth,
						     value_kind == PERFD_VALUE_CPU) :
			     -ENOENT;
		if (n == -ENOENT) {
			n = bpf_get_stack(ctx, &s->ips[kdepth],
					  PERFD_MAX_STACK_DEPTH * sizeof(__u64),
					  BPF_F_USER_STACK);
			if (n > 0)
				n = (__u64)n / sizeof(__u64);
			/* a thread's walk never ends in an entry: no auxv read */
			last = kdepth + n - 1;
			if (tables && n > 0 && last < 2 * PERFD_MAX_STACK_DEPTH &&
			    (s->hdr.tid != tgid || !perfd_frame_in_entry(s->ips[last]))) {
				s->flags |= PERFD_SAMPLE_F_TRUNCATED;
				if (value_kind == PERFD_VALUE_CPU)
					count(PERFD_CNT_UNWIND_FP_UNROOTED);
			}
		}
		if (n < 0) {
			if (value_kind == PERFD_VALUE_CPU)
				count(PERFD_CNT_USTACK_ERROR);
			s->user_depth = n;
		} else {
			udepth = n;
			s->user_depth = udepth;
		}
	}
	if (udepth > PERFD_MAX_STACK_DEPTH)
		udepth = PERFD_MAX_STACK_DEPTH;
	if (udepth < 0)
		udepth = 0;

	if (python && mm) {
		pdepth = python_walk_stack(task, tgid, kdepth + udepth, &s->flags,
					   value_kind == PERFD_VALUE_CPU, now);
		if (pdepth > PERFD_MAX_PYTHON_DEPTH)
			pdepth = PERFD_MAX_PYTHON_DEPTH;
		s->python_depth = pdepth;
	}

	size = sizeof(struct perfd_sample) +
	       (kdepth + udepth + pdepth * PYFRAME_WORDS) * sizeof(__u64);
	/* The depths come from global functions' results, any scalar to the
	 * verifier: the test must be on the register that is passed on, or
	 * 6.1's verifier, which does not carry a bound learnt on one value to
	 * another the compiler derived it from, finds the size unbounded
	 * ("R3 min value is negative"). */
	asm volatile("" : "+r"(size));
	if (size > PERFD_SAMPLE_MAX_SIZE)
		return 0;

	return send_sample(s, size);
}

/*
 * Which ticks sample.  A timer at a fixed period samples a workload whose
 * rounds repeat at (nearly) that period at the same phase of every round,
 * and its profile is wrong however long it runs.  So, unless the daemon
 * asked for a fixed period (jitter_period_ns 0: every tick samples, value
 * 1), time on each CPU is cut into blocks of one mean period P =
 * jitter_period_ns, each block gets one target instant drawn uniformly
 * within it, and the first tick at or after a target samples.  The timer
 * runs a few times faster than 1/P (sampler.c picks its period, a
 * fraction of P that does not divide it) and most ticks only compare
 * their time (the timer's expiry: "Whose tick it is" below) with the
 * target: one map lookup, of the CPU's struct perfd_cpu_state, which
 * holds the switch state too.
 *
 * Why targets in time rather than keeping each tick with probability
 * 1/k: every tick is then kept with probability (its gap)/P exactly, so
 * samples x P is an unbiased estimate of CPU time whatever the timer did
 * (late ticks, a restarted timer), and a CPU takes exactly one sample per
 * block: the count over a window has no sampling noise, where Bernoulli
 * thinning's is binomial (sd 4.4% on 400 samples).  The phase of a sample
 * within any workload round is uniform; its attribution error is the
 * binomial one.  A tick that passed several targets (two in adjacent
 * blocks, both since the previous tick) stands for as many periods; one
 * later than PERFD_CPU_VALUE_MAX blocks (the timer was stopped: throttled,
 * a CPU coming back) restarts the blocks and samples nothing.
 *
 * Not read-only: a reload with a new frequency (sampler_set_frequency)
 * writes it, and the timer's period below, while ticks run (a tick reads
 * each once), then bumps period_gen.  A CPU's first tick after that
 * restarts its blocks: the old block in progress is cut there, its sample
 * taken if its target had come (with probability the part of it that had
 * passed, so it stays unbiased), and the next blocks are of the new length.
 */
volatile __u64 jitter_period_ns = 0;
volatile __u64 period_gen = 0;

/* The jitter state and the switch state ("Whose tick it is" below) of each
 * CPU: one value, which a tick looks up once. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct perfd_cpu_state);
} cpu_states SEC(".maps");

static __always_inline __u64 random_below(__u64 bound)
{
	return ((__u64)bpf_get_prandom_u32() * bound) >> 32; /* bound < 2^32 */
}

/* How many mean periods the tick of time `now` samples: 0 for most ticks.
 * st is this CPU's state. */
static __always_inline __u64 ticks_due(struct perfd_cpu_state *st, __u64 now)
{
	__u64 due = 0, period = jitter_period_ns, gen = period_gen;

	if (!period)
		return 1;
	if (st->period_gen != gen) {
		st->period_gen = gen;
		st->target_ns = 0; /* a new period: the blocks start again below */
	}
	if (now < st->target_ns) {
		st->thinned++;
		return 0;
	}
	if (st->target_ns == 0 ||
	    (__s64)(now - st->block_end_ns) >= (__s64)(PERFD_CPU_VALUE_MAX - 1) * (__s64)period) {
		st->block_end_ns = now + period;
		st->target_ns = now + random_below(period);
		st->thinned++;
		return 0;
	}
	for (int i = 0; i < PERFD_CPU_VALUE_MAX && st->target_ns <= now; i++) {
		due++;
		st->target_ns = st->block_end_ns + random_below(period);
		st->block_end_ns += period;
	}
	return due;
}

/*
 * Whose tick it is.  The cpu-clock timer is per CPU (an hrtimer), and
 * __schedule() keeps interrupts off from before the sched_switch
 * tracepoint until finish_task_switch() unlocks the runqueue in the task
 * switched to.  A tick that falls due while the outgoing task runs with
 * interrupts off on its way out (or while the switch is made) is
 * delivered there, in the incoming task, and would be charged to it with
 * finish_task_switch / _raw_spin_unlock_irq on top of its stack: under
 * many switches a CPU-bound task gains kernel frames on its leaves and a
 * process that switches a lot gains the time of the ones it switches
 * with.  So two tiny tp_btf programs note, per CPU, the expiry of the
 * perf hrtimer about to run (hrtimer_expire_entry fires in __run_hrtimer()
 * just before the timer's function, perf_swevent_hrtimer, which runs this
 * program, on the same CPU with interrupts off) and the time and the
 * outgoing task of the last switch (sched_switch, still in the outgoing
 * task).  A tick that fell due before the last switch was the outgoing
 * task's: it is charged to it (or counted idle), flagged
 * PERFD_SAMPLE_F_SWITCHED, with no stack (the outgoing task's user stack
 * cannot be read from the incoming one's context, and its kernel stack
 * needs a trusted task pointer this program does not have) and no RSS
 * (the mm at hand is the incoming task's); the daemon roots it at
 * "[context switch]".  The outgoing task is still alive then:
 * finish_task_switch() drops a dead one's last reference only after it
 * re-enabled interrupts, that is after this tick, and frees it after an
 * RCU grace period; it is read with probe reads all the same.  The tick's
 * time is its expiry, for jittered sampling (a tick delayed past a target
 * did not fall due after it) and as the timestamp of the sample it takes,
 * switched or not.
 *
 * Why charge and not drop: a dropped tick is CPU time lost to exactly the
 * processes that switch most (a ping-pong pair, measured in
 * tests/integration/test_switch.py, has a third of its ticks fall due in
 * its own switch path), where charging keeps samples x period an estimate
 * of every task's CPU time, as perf's per-task timer does.  The cost:
 * the sched_switch program on every switch, one clock read and two
 * stores; the hrtimer one on every hrtimer expiry, hard or soft, a
 * compare; in this program no map lookup of its own: the switch state
 * shares the jitter state's per-CPU value, which a tick looks up once
 * (docs/notes/performance-history.md, "Context switches").
 *
 * So a tick reads no clock when the expiry noted on its CPU is not yet
 * taken (due_taken 0) and is of the timer the last tick took (timer):
 * nothing runs between the tracepoint and the timer's function, so the
 * note is this tick's.  That saves a bpf_ktime_get_ns() on every tick,
 * sampling or not, ~80 ns in a KVM guest (kvm-clock) under retpolines
 * and Safe RET: 8 % of a shallow stack's tick (docs/notes/performance-history.md,
 * "Helper calls on every tick").  Otherwise the tick reads the clock:
 * the CPU's first tick, which takes the note if it is of the last timer
 * period and learns its timer from it (a CPU's timer is made once, in
 * sampler_new(), with a zeroed cpu_states; a reload keeps it), and a tick
 * whose note the hrtimer program could not make, which takes none.  That
 * happens when our hard timer fires while the program runs for a soft
 * hrtimer (softirq, interrupts on): the kernel skips the nested run of the
 * same program, and the note left is an older one, or another perf user's
 * (perf record, a second perfd), however recent.  An older note of our own
 * timer (an expiry the program never ran for, as on an idle vCPU below)
 * passes unchecked: the tick then takes the targets due by that expiry,
 * which the next note would have counted idle or lost, and leaves the
 * rest to the next tick.  The window is the program's run for a soft
 * hrtimer, tens of ns a few hundred times a second; status counts the
 * ticks that read the clock (st->clocked: each CPU's first alone in 200k
 * ticks, measured).  Without the hrtimer program every tick
 * reads the clock and is charged to the current task, as without all
 * this.
 */
volatile __u64 timer_period_ns = 0; /* written at a reload, as jitter_period_ns */
/* perf's hrtimer callback: the one timer whose expiry matters here.  Weak,
 * so the object loads on a kernel without the symbol; sampler.c then
 * loads neither this program nor on_sched_switch, and every tick falls
 * back. */
extern const void perf_swevent_hrtimer __ksym __weak;

/*
 * Ticks the kernel did not deliver.  The perf hrtimer can expire without
 * running this program: measured on a 2-vCPU KVM guest (kernel 6.18), one
 * vCPU's timer kept expiring while it idled but no idle tick ever reached
 * the program (nor perf record's samples).  Jittered sampling then gave
 * every target of the idle time to the first tick after the CPU woke up,
 * in the task that woke it: a workload that sleeps a tenth of each round
 * gained that tenth in the function it starts the round with.  So the
 * hrtimer program, at each expiry of our timer, first settles the
 * previous one if the program never ran for it: the targets due then are
 * idle samples when the CPU was idle at it, and lost ones, counted, when
 * it was not (there is no stack to take, and charging the task that runs
 * later would be the bias above).  Our timer is the one whose expiry the
 * program last ran for: another perf user's cpu-clock timers on the CPU
 * share the callback and are left alone.
 */
static __always_inline void settle_undelivered(struct perfd_cpu_state *st)
{
	__u64 due;

	if (st->due_taken || !st->due_ns || st->due_timer != st->timer)
		return;
	st->due_taken = 1;
	due = ticks_due(st, st->due_ns);
	if (!due)
		return;
	if (st->due_idle) {
		/* counted as any idle sample is (taken and idle), no more */
		(void)begin_sample(0, PERFD_VALUE_CPU, due);
		count_n(PERFD_CNT_UNDELIVERED_IDLE, due);
	} else {
		count_n(PERFD_CNT_UNDELIVERED_LOST, due);
	}
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(on_hrtimer_expire, struct hrtimer *timer, ktime_t *now)
{
	struct perfd_cpu_state *st;
	__u32 zero = 0;

	if ((const void *)timer->function != &perf_swevent_hrtimer)
		return 0;
	st = bpf_map_lookup_elem(&cpu_states, &zero);
	if (!st)
		return 0;
	settle_undelivered(st);
	st->due_ns = timer->node.expires;
	st->due_timer = (__u64)timer;
	st->due_taken = 0;
	st->due_idle = (__u32)bpf_get_current_pid_tgid() == 0;
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev)
{
	struct perfd_cpu_state *st;
	__u32 zero = 0;

	st = bpf_map_lookup_elem(&cpu_states, &zero);
	if (st) {
		st->switch_ns = bpf_ktime_get_ns();
		st->prev = (__u64)prev;
	}
	return 0;
}

/* Sends a CPU sample of value periods of task (the one a switch took off
 * this CPU) at time now: who it is, no stack, no RSS. */
static __always_inline int sample_switched(struct task_struct *task, __u64 now, __u64 value)
{
	struct perfd_sample *s;

	count_n(PERFD_CNT_SWITCHED, value);
	s = begin_sample(BPF_CORE_READ(task, tgid), PERFD_VALUE_CPU, value);
	if (!s)
		return 0;
	s->flags = PERFD_SAMPLE_F_SWITCHED;
	(void)fill_who(s, task, now, false);
	s->kernel_depth = 0;
	s->user_depth = 0;
	return send_sample(s, sizeof(*s));
}

/* Whether the tick interrupted user code (r->valid), and if so its
 * registers: the user unwind then starts from them (no bpf_task_pt_regs())
 * and there is no kernel stack (no bpf_get_stack()).  The privilege level is cs's
 * low two bits; a perf_event context allows only whole 8-byte loads of
 * its registers, and the volatile keeps the compiler from narrowing this
 * one.  The copy into r keeps context pointers out of the unwinder, where
 * the compiler would merge their loads with the ones of
 * bpf_task_pt_regs()'s pointer, which the verifier refuses. */
static __always_inline void read_user_regs(struct bpf_perf_event_data *ctx, struct user_regs *r)
{
	r->valid = *(volatile __u64 *)((void *)ctx + __builtin_offsetof(struct pt_regs, cs)) & 3;
	if (r->valid) {
		r->ip = ctx->regs.ip;
		r->sp = ctx->regs.sp;
		r->bp = ctx->regs.bp;
	}
}

/* Two variants of one program; the daemon loads the first when the kernel
 * has bpf_loop(), bpf_task_pt_regs() and bpf_get_current_task_btf(), with
 * what its tier walks (with_tables, with_python), and the second, the
 * kernel's frame-pointer walk alone, otherwise. */
static __always_inline int on_tick(struct bpf_perf_event_data *ctx, bool full)
{
	__u64 now, prev = 0, due;
	struct perfd_cpu_state *st;
	struct user_regs uregs;
	bool noted;
	__u32 zero = 0;

	/* the one map lookup of a tick that samples nothing */
	st = bpf_map_lookup_elem(&cpu_states, &zero);
	if (!st)
		return 0;
	/* an expiry noted and not taken yet: of our timer, it is this tick's
	 * (see above) */
	noted = !st->due_taken && st->due_ns;
	if (!noted || st->due_timer != st->timer) {
		st->clocked++;
		now = bpf_ktime_get_ns();
		/* a first tick: the note is ours if of the last period */
		noted = noted && !st->timer && st->due_ns <= now && now - st->due_ns < timer_period_ns;
		if (noted)
			st->timer = st->due_timer;
	}
	if (noted) {
		/* taken, and so delivered */
		st->due_taken = 1;
		if (st->due_ns < st->switch_ns)
			prev = st->prev;
		now = st->due_ns;
	}
	due = ticks_due(st, now);
	if (!due)
		return 0;
	if (prev)
		return sample_switched((struct task_struct *)prev, now, due);
	read_user_regs(ctx, &uregs);
	return sample(ctx, full ? bpf_get_current_task_btf() :
				  (struct task_struct *)bpf_get_current_task(),
		      full, full, &uregs,
		      PERFD_VALUE_CPU, due, now);
}

SEC("perf_event")
int on_cpu_clock(struct bpf_perf_event_data *ctx)
{
	refuse_if_asked(with_tables ? PERFD_REFUSE_TABLES : PERFD_REFUSE_FRAME_POINTERS);
	if (with_python)
		refuse_if_asked(PERFD_REFUSE_PYTHON);
	return on_tick(ctx, true);
}

SEC("perf_event")
int on_cpu_clock_fp(struct bpf_perf_event_data *ctx)
{
	refuse_if_asked(PERFD_REFUSE_FRAME_POINTERS);
	return on_tick(ctx, false);
}

/*
 * Memory growth, sampled by bytes.
 *
 * The rss_stat tracepoint fires in the task that changed a process's
 * resident-set counters (a page fault faulting memory in, a 2 MiB huge
 * page at once, munmap, exit), after every change.  Every event reads the
 * one counter that changed; after a random number of events (mean
 * memory_look_mask + 1), or at once when that counter moved by a huge page
 * or more or the process is another, the program looks: it reads the
 * process's resident pages and compares them with what it read last time
 * for that process (mem_processes): the growth since, whatever events it
 * skipped, is fed to
 * a byte countdown per CPU.  Each time the countdown runs out the current
 * stack is sampled, standing for memory_sample_bytes of growth; the
 * distance to the next sample point is drawn from an exponential
 * distribution of that mean (exp_q12, -ln U scaled to a mean of exactly
 * 4096), so that growth that repeats with any period cannot beat with the
 * sampling, and the expected number of points per byte is exactly
 * 1/memory_sample_bytes: n points x memory_sample_bytes is an unbiased
 * estimate of the bytes.  A growth past several points at once (a huge
 * page) counts all of them.  Skipping events costs nothing in accuracy of
 * the total (the next look sees the growth) and shifts attribution by at
 * most a few faults of the same process; it is what keeps the cost of a
 * fault-heavy process low.  The same look sends the process's RSS at most
 * every rss_interval_ns, so processes that never run on a CPU while
 * sampled (blocked, or short bursts) still have a current RSS.
 */
const volatile __u64 memory_sample_bytes = 1024 * 1024;
const volatile __u32 memory_look_mask = 31;
const volatile __u64 rss_interval_ns = 1000 * 1000 * 1000;

static const __u16 exp_q12[256] = {
	25599, 21081, 18986, 17606, 16575, 15752, 15067, 14480, 13966, 13510, 13100, 12726,
	12384, 12069, 11776, 11502, 11246, 11004, 10776, 10561, 10355, 10160, 9974, 9795,
	9624, 9460, 9302, 9151, 9004, 8863, 8726, 8594, 8465, 8341, 8220, 8103,
	7989, 7878, 7770, 7665, 7563, 7463, 7365, 7270, 7176, 7085, 6996, 6909,
	6823, 6740, 6658, 6577, 6498, 6421, 6345, 6270, 6197, 6125, 6055, 5985,
	5917, 5849, 5783, 5718, 5654, 5591, 5529, 5468, 5407, 5348, 5289, 5231,
	5174, 5118, 5063, 5008, 4954, 4901, 4848, 4796, 4745, 4695, 4645, 4595,
	4546, 4498, 4450, 4403, 4357, 4310, 4265, 4220, 4175, 4131, 4088, 4044,
	4002, 3959, 3917, 3876, 3835, 3794, 3754, 3714, 3675, 3636, 3597, 3559,
	3521, 3483, 3446, 3409, 3372, 3336, 3300, 3264, 3229, 3194, 3159, 3125,
	3091, 3057, 3023, 2990, 2957, 2924, 2891, 2859, 2827, 2795, 2764, 2732,
	2701, 2670, 2640, 2609, 2579, 2549, 2520, 2490, 2461, 2432, 2403, 2374,
	2346, 2317, 2289, 2261, 2234, 2206, 2179, 2152, 2125, 2098, 2071, 2045,
	2018, 1992, 1966, 1941, 1915, 1889, 1864, 1839, 1814, 1789, 1764, 1740,
	1715, 1691, 1667, 1643, 1619, 1596, 1572, 1548, 1525, 1502, 1479, 1456,
	1433, 1411, 1388, 1366, 1343, 1321, 1299, 1277, 1255, 1234, 1212, 1191,
	1169, 1148, 1127, 1106, 1085, 1064, 1043, 1023, 1002, 982, 962, 941,
	921, 901, 881, 862, 842, 822, 803, 783, 764, 745, 725, 706,
	687, 668, 650, 631, 612, 594, 575, 557, 539, 520, 502, 484,
	466, 448, 430, 413, 395, 377, 360, 342, 325, 308, 290, 273,
	256, 239, 222, 205, 189, 172, 155, 138, 122, 105, 89, 73,
	56, 40, 24, 8,
};

struct mem_process {
	__u64 mm;          /* the mm it was read from: a new one restarts */
	__u64 last_pages;  /* resident pages at the last look */
	__u64 rss_sent_ns; /* when its RSS was last sent */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct mem_process);
} mem_processes SEC(".maps");

struct mem_cpu {
	__s64 countdown;   /* bytes of growth before the next sample point */
	__u64 mm;          /* whose counter this CPU saw last ... */
	__s64 seen[4];     /* ... and the counters' values then */
	__u32 events_left; /* events to skip before the next look */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mem_cpu);
} mem_cpus SEC(".maps");

static __always_inline __s64 next_interval(void)
{
	__u32 r = bpf_get_prandom_u32() & 255;

	return (__s64)((memory_sample_bytes * exp_q12[r]) >> 12);
}

/* Fills the header of a record of kind about process tgid (its leader's
 * start time start), whose thread tid it names, taken now on this CPU:
 * the records other than samples (RSS, exec, exit, fork). */
static __always_inline void fill_header(struct perfd_event_header *h, __u32 kind, __u32 tgid,
					__u32 tid, __u64 start, __u64 now)
{
	h->kind = kind;
	h->tgid = tgid;
	h->tid = tid;
	h->cpu = bpf_get_smp_processor_id();
	h->timestamp_ns = now;
	h->start_time_ns = start;
}

/* Fills r with the resident-set counters of mm, of process tgid, the
 * current task's: an RSS record, or an exec record (kind). */
static __always_inline void fill_rss(struct perfd_rss *r, __u32 kind, struct task_struct *task,
				     struct mm_struct *mm, __u32 tgid, __u64 now)
{
	struct perfd_sample tmp;

	read_rss(mm, &tmp, true);
	fill_header(&r->hdr, kind, tgid, (__u32)bpf_get_current_pid_tgid(),
		    BPF_CORE_READ(task, group_leader, start_boottime), now);
	for (int i = 0; i < PERFD_RSS_COUNTERS; i++)
		r->rss_pages[i] = tmp.rss_pages[i];
	r->hiwater_rss_pages = tmp.hiwater_rss_pages;
	r->page_size = page_size;
	r->reserved = 0;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
}

static __always_inline void send_rss(struct task_struct *task, struct mm_struct *mm, __u32 tgid,
				     __u64 now)
{
	struct perfd_rss *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		count(PERFD_CNT_RSS_LOST);
		return;
	}
	fill_rss(r, PERFD_EVENT_RSS, task, mm, tgid, now);
	/* A process first seen here is announced, without a wake-up: its
	 * exec and exit events follow, and the daemon reads who owns it at
	 * its next drain (a process gone by then keeps the name the record
	 * carries). */
	bpf_ringbuf_submit(r, announce(tgid, r->hdr.start_time_ns, now, false, false));
	count(PERFD_CNT_RSS_SENT);
}

SEC("tp_btf/rss_stat")
int BPF_PROG(on_rss_stat, struct mm_struct *mm, int member)
{
	struct task_struct *task;
	struct mem_process *mp, fresh = {};
	struct mem_cpu *mc;
	struct perfd_sample tmp;
	__u32 tgid, zero = 0;
	__u64 pages, now;
	__s64 growth = 0;

	refuse_if_asked(PERFD_REFUSE_MEMORY);
	mc = bpf_map_lookup_elem(&mem_cpus, &zero);
	if (!mc)
		return 0;
	/* The cheap part, for every event: the changed counter alone.  A
	 * move of a huge page or more (the per-CPU batching folds smaller
	 * ones into the global count a batch at a time), or another process,
	 * is looked at at once; the rest after a random number of events of
	 * mean memory_look_mask + 1. */
	{
		__u32 k = (__u32)member;
		__s64 cur, moved;

		/* MM_FILEPAGES..MM_SHMEMPAGES: 0..3.  The mask, kept from the
		 * compiler, is what shows the verifier the index is bounded. */
		asm volatile("" : "+r"(k));
		k &= 3;
		cur = read_counter(mm, k, true);
		moved = cur - mc->seen[k];
		if (moved < 0)
			moved = -moved;
		if (mc->mm == (__u64)mm && moved < 256 && mc->events_left > 1) {
			mc->events_left--;
			mc->seen[k] = cur;
			return 0;
		}
		mc->mm = (__u64)mm;
		mc->seen[k] = cur;
		mc->events_left = 1 + (bpf_get_prandom_u32() & (2 * memory_look_mask + 1));
	}
	task = bpf_get_current_task_btf();
	/* Only a task changing its own counters has the stack that did it
	 * (not khugepaged, nor exit's teardown of another mm). */
	if (task->mm != mm || !mm)
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	count(PERFD_CNT_MEMORY_EVENTS);
	read_rss(mm, &tmp, true);
	pages = tmp.rss_pages[PERFD_RSS_FILE] + tmp.rss_pages[PERFD_RSS_ANON] +
		tmp.rss_pages[PERFD_RSS_SHMEM];
	now = bpf_ktime_get_ns();

	mp = bpf_map_lookup_elem(&mem_processes, &tgid);
	if (!mp || mp->mm != (__u64)mm) {
		fresh.mm = (__u64)mm;
		fresh.last_pages = pages;
		bpf_map_update_elem(&mem_processes, &tgid, &fresh, BPF_ANY);
		mp = bpf_map_lookup_elem(&mem_processes, &tgid);
		if (!mp)
			return 0;
	} else {
		growth = (__s64)(pages - mp->last_pages);
		mp->last_pages = pages;
	}
	if (now - mp->rss_sent_ns >= rss_interval_ns) {
		mp->rss_sent_ns = now;
		send_rss(task, mm, tgid, now);
	}
	if (growth <= 0)
		return 0;
	if (mc->countdown == 0)
		mc->countdown = next_interval();
	mc->countdown -= growth * page_size;
	if (mc->countdown > 0)
		return 0;
	{
		/* every sample point the growth went past */
		__u64 points = 1 + (__u64)(-mc->countdown) / memory_sample_bytes;
		struct user_regs no_uregs = {};

		mc->countdown += (__s64)((points - 1) * memory_sample_bytes) + next_interval();
		return sample(ctx, task, true, false, &no_uregs, PERFD_VALUE_MEMORY,
			      points * memory_sample_bytes, now);
	}
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_process_exit, struct task_struct *task)
{
	struct perfd_exit *e;
	__u32 tgid;
	__u64 *known;

	/* signal->live drops to zero in do_exit() before this tracepoint,
	 * for the last thread of the group only. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	tgid = BPF_CORE_READ(task, tgid);
	bpf_map_delete_elem(&followed, &tgid);
	known = bpf_map_lookup_elem(&known_processes, &tgid);
	if (!known)
		return 0; /* never sampled: nobody cares */

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PERFD_CNT_EXIT_LOST);
		return 0;
	}
	fill_header(&e->hdr, PERFD_EVENT_EXIT, tgid, BPF_CORE_READ(task, pid),
		    BPF_CORE_READ(task, group_leader, start_boottime), bpf_ktime_get_ns());
	e->exit_code = BPF_CORE_READ(task, exit_code);
	e->reserved = 0;
	bpf_map_delete_elem(&known_processes, &tgid);
	/* No wake-up: the next drain brings it (a snapshot waiting for the
	 * process ends then, within a second; its end time is this one). */
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	count(PERFD_CNT_EXIT_SENT);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_process_exec, struct task_struct *task)
{
	struct known_process *known;
	struct perfd_rss *e;
	struct mm_struct *mm;
	__u32 wake = 0, tgid = BPF_CORE_READ(task, tgid);

	/* The old image's mappings are gone: unwinding with them would
	 * produce garbage until the daemon has described the new ones, so
	 * walk frame pointers meanwhile. */
	bpf_map_delete_elem(&unwind_processes, &tgid);
	bpf_map_delete_elem(&python_processes, &tgid);
	known = bpf_map_lookup_elem(&known_processes, &tgid);
	/* the new image's maps matter only where stacks are to be named;
	 * a followed process is looked at from its exec on, before it was
	 * ever sampled: its maps, its runtime */
	if (!known) {
		if (!bpf_map_lookup_elem(&followed, &tgid))
			return 0;
		wake = 1;
	} else {
		wake = known->stacks;
		if (!wake && bpf_map_lookup_elem(&followed, &tgid))
			wake = 1;
	}
	/* the exec's own task: task->mm is the new image's */
	mm = task->mm;
	if (!mm)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PERFD_CNT_EXEC_LOST);
		return 0;
	}
	fill_rss(e, PERFD_EVENT_EXEC, task, mm, tgid, bpf_ktime_get_ns());
	bpf_ringbuf_submit(e, wake ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	count(PERFD_CNT_EXEC_SENT);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), tgid = BPF_CORE_READ(child, tgid);
	__u64 *parent_start = bpf_map_lookup_elem(&followed, &ptgid);
	__u64 start, leader_start;
	struct perfd_fork *f;

	/* a new thread of a process is not a new process */
	if (!parent_start || tgid == ptgid)
		return 0;
	leader_start = BPF_CORE_READ(parent, group_leader, start_boottime);
	if (*parent_start && *parent_start != leader_start)
		return 0; /* an older incarnation's pid, left behind */
	start = BPF_CORE_READ(child, start_boottime);
	bpf_map_update_elem(&followed, &tgid, &start, BPF_ANY);
	f = bpf_ringbuf_reserve(&events, sizeof(*f), 0);
	if (!f) {
		count(PERFD_CNT_FORK_LOST);
		return 0;
	}
	fill_header(&f->hdr, PERFD_EVENT_FORK, tgid, BPF_CORE_READ(child, pid), start,
		    bpf_ktime_get_ns());
	BPF_CORE_READ_STR_INTO(&f->comm, child, comm);
	f->parent_start_time_ns = leader_start;
	f->parent_tgid = ptgid;
	f->page_size = page_size;
	/* the daemon reads the child's /proc while it lives */
	bpf_ringbuf_submit(f, BPF_RB_FORCE_WAKEUP);
	count(PERFD_CNT_FORK_SENT);
	return 0;
}
