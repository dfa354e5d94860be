// SPDX-License-Identifier: GPL-2.0
/*
 * perfd.bpf.c - the sampling side of perfd.
 *
 * `on_cpu_clock` runs on every tick of a software cpu-clock perf event opened
 * on each online CPU.  It records who ran (tgid, tid, comm, the process's
 * start time), the kernel stack, the user stack and the RSS counters, and
 * sends that as one variable-length record through one BPF ring buffer.
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
 * Wake-ups are rationed: the daemon drains on a timer, and the program only
 * forces a wake-up when the ring is filling up (ringbuf_wakeup_bytes) or when
 * a process is seen for the first time, so the daemon can read its
 * /proc/PID/maps while it is still alive.
 *
 * For a CPython process the daemon has described, the Python frames of the
 * sampled thread follow the native ones (python.bpf.h).
 *
 * `on_process_exit` reports the death of a process we sampled so that a
 * snapshot of it can end at once and the daemon can evict it first;
 * `on_process_exec` says that its mappings must be read again.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "perfd/sample.h"

char LICENSE[] SEC("license") = "GPL";

#define ENOENT 2

static __always_inline __u64 *unwind_out(void);
#include "unwind.bpf.h"

/* Set by the daemon between open and load. */
const volatile __u64 ringbuf_wakeup_bytes = 256 * 1024;
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
 * pid reused) forces a wake-up, and so does a sample whose unwinding met
 * code the daemon has not described yet, at most every nudge_interval_ns
 * per process: the daemon reads the maps then, instead of at its next
 * timer.  LRU, so it can never fill up; an evicted entry only costs one
 * extra wake-up. */
struct known_process {
	__u64 start_time_ns;
	__u64 next_nudge_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct known_process);
} known_processes SEC(".maps");

const volatile __u64 nudge_interval_ns = 20 * 1000 * 1000;

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

static __always_inline void count(enum perfd_counter c)
{
	__u32 key = c;
	__u64 *v = bpf_map_lookup_elem(&counters, &key);

	if (v)
		*v += 1;
}

#include "python.bpf.h"

static __always_inline __u64 clamp_pages(__s64 v)
{
	/* per-CPU batching can make the global count dip below zero */
	return v < 0 ? 0 : (__u64)v;
}

/* Copies file/anon/shmem pages.  Which layout the kernel has is a CO-RE
 * type probe resolved at load time: the other branch is dead code the
 * verifier never sees.  With percpu counters we read the global
 * `count`, which is what the kernel itself reports in /proc (it lags the
 * per-CPU deltas by at most the counter batch per CPU). */
static __always_inline void read_rss(struct mm_struct *mm, struct perfd_sample *s)
{
	static const int kernel_index[PERFD_RSS_COUNTERS] = {
		[PERFD_RSS_FILE] = 0,  /* MM_FILEPAGES */
		[PERFD_RSS_ANON] = 1,  /* MM_ANONPAGES */
		[PERFD_RSS_SHMEM] = 3, /* MM_SHMEMPAGES (2 is MM_SWAPENTS) */
	};

	for (int i = 0; i < PERFD_RSS_COUNTERS; i++) {
		int k = kernel_index[i];
		__s64 v = 0;

		if (bpf_core_type_exists(struct mm_rss_stat___pre62)) {
			struct mm_struct___pre62 *old = (void *)mm;

			v = BPF_CORE_READ(old, rss_stat.count[k].counter);
		} else {
			v = BPF_CORE_READ(mm, rss_stat[k].count);
		}
		s->rss_pages[i] = clamp_pages(v);
	}
	s->hiwater_rss_pages = BPF_CORE_READ(mm, hiwater_rss);
}

static __always_inline __u64 *unwind_out(void)
{
	__u32 zero = 0;
	struct sample_buf *buf = bpf_map_lookup_elem(&scratch, &zero);

	return buf ? ((struct perfd_sample *)buf->bytes)->ips : NULL;
}

/* Unwinds the user stack of the current task with the tables into
 * s->ips[kdepth...].  Returns the number of frames, or -ENOENT when the
 * process has no tables (the caller then walks frame pointers). */
static __always_inline long unwind_user_with_tables(__u32 tgid,
						    struct perfd_sample *s, __u32 kdepth)
{
	struct perfd_unwind_process *proc = bpf_map_lookup_elem(&unwind_processes, &tgid);
	struct user_unwind u = {};
	struct pt_regs *regs;

	if (!proc) {
		s->flags |= PERFD_SAMPLE_F_NEEDS_MAPS;
		return -ENOENT;
	}
	/* The user registers saved at kernel entry: right whether the tick
	 * interrupted user code or a system call. */
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!regs)
		return -ENOENT;
	u.pc = regs->ip;
	u.sp = regs->sp;
	u.bp = regs->bp;
	u.bp_known = true;
	u.pc_exact = true;
	u.offset = kdepth;
	u.maps_first = proc->mappings_first;
	u.maps_count = proc->mappings_count;

	bpf_loop(PERFD_MAX_STACK_DEPTH, unwind_step, &u, 0);
	count(PERFD_CNT_UNWIND_DWARF);
	s->flags |= PERFD_SAMPLE_F_DWARF;
	if (u.result != UNWIND_COMPLETE) {
		count(PERFD_CNT_UNWIND_TRUNCATED);
		s->flags |= PERFD_SAMPLE_F_TRUNCATED;
	}
	if (u.unmapped)
		s->flags |= PERFD_SAMPLE_F_NEEDS_MAPS;
	return u.written;
}

static __always_inline int sample(struct bpf_perf_event_data *ctx, bool tables)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	__u32 zero = 0;
	struct sample_buf *buf;
	struct perfd_sample *s;
	struct mm_struct *mm;
	__s64 kdepth, udepth;
	__u64 flags, size;
	__u32 pdepth = 0;
	long n;

	count(PERFD_CNT_SAMPLES);
	if (tgid == 0) {
		count(PERFD_CNT_IDLE);
		return 0;
	}

	buf = bpf_map_lookup_elem(&scratch, &zero);
	if (!buf)
		return 0;
	s = (struct perfd_sample *)buf->bytes;

	s->hdr.kind = PERFD_EVENT_SAMPLE;
	s->hdr.tgid = tgid;
	s->hdr.tid = (__u32)pid_tgid;
	s->hdr.cpu = bpf_get_smp_processor_id();
	s->hdr.timestamp_ns = bpf_ktime_get_ns();
	s->hdr.start_time_ns = BPF_CORE_READ(task, group_leader, start_boottime);
	bpf_get_current_comm(s->comm, sizeof(s->comm));
	s->page_size = page_size;
	s->flags = 0;
	s->python_depth = 0;
	s->reserved = 0;

	mm = BPF_CORE_READ(task, mm);
	if (mm) {
		read_rss(mm, s);
	} else {
		s->flags |= PERFD_SAMPLE_F_KTHREAD;
		for (int i = 0; i < PERFD_RSS_COUNTERS; i++)
			s->rss_pages[i] = 0;
		s->hiwater_rss_pages = 0;
	}

	n = bpf_get_stack(ctx, s->ips, PERFD_MAX_STACK_DEPTH * sizeof(__u64), 0);
	if (n < 0) {
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
		n = tables ? unwind_user_with_tables(tgid, s, kdepth) : -ENOENT;
		if (n == -ENOENT) {
			n = bpf_get_stack(ctx, &s->ips[kdepth],
					  PERFD_MAX_STACK_DEPTH * sizeof(__u64),
					  BPF_F_USER_STACK);
			if (n > 0)
				n = (__u64)n / sizeof(__u64);
		}
		if (n < 0) {
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

	/* Python frames need bpf_loop() too: only the first variant has them. */
	if (tables && mm) {
		pdepth = python_walk_stack(tgid, kdepth + udepth, &s->flags);
		if (pdepth > PERFD_MAX_PYTHON_DEPTH)
			pdepth = PERFD_MAX_PYTHON_DEPTH;
		s->python_depth = pdepth;
	}

	size = sizeof(struct perfd_sample) +
	       (kdepth + udepth + pdepth * PYFRAME_WORDS) * sizeof(__u64);
	if (size > sizeof(*buf))
		return 0;

	flags = BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= ringbuf_wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	else {
		struct known_process *known = bpf_map_lookup_elem(&known_processes, &tgid);

		if (!known || known->start_time_ns != s->hdr.start_time_ns) {
			struct known_process k = {
				.start_time_ns = s->hdr.start_time_ns,
				.next_nudge_ns = s->hdr.timestamp_ns + nudge_interval_ns,
			};

			bpf_map_update_elem(&known_processes, &tgid, &k, BPF_ANY);
			flags = BPF_RB_FORCE_WAKEUP;
		} else if ((s->flags & PERFD_SAMPLE_F_NEEDS_MAPS) &&
			   s->hdr.timestamp_ns >= known->next_nudge_ns) {
			known->next_nudge_ns = s->hdr.timestamp_ns + nudge_interval_ns;
			flags = BPF_RB_FORCE_WAKEUP;
		}
	}

	if (bpf_ringbuf_output(&events, s, size, flags))
		count(PERFD_CNT_RINGBUF_FULL);
	return 0;
}

/* Two variants of one program; the daemon loads the first when the kernel
 * has bpf_loop(), bpf_task_pt_regs() and bpf_get_current_task_btf(), the
 * second otherwise. */
SEC("perf_event")
int on_cpu_clock(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, true);
}

SEC("perf_event")
int on_cpu_clock_fp(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, false);
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
	known = bpf_map_lookup_elem(&known_processes, &tgid);
	if (!known)
		return 0; /* never sampled: nobody cares */

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PERFD_CNT_EXIT_LOST);
		return 0;
	}
	e->hdr.kind = PERFD_EVENT_EXIT;
	e->hdr.tgid = tgid;
	e->hdr.tid = BPF_CORE_READ(task, pid);
	e->hdr.cpu = bpf_get_smp_processor_id();
	e->hdr.timestamp_ns = bpf_ktime_get_ns();
	e->hdr.start_time_ns = BPF_CORE_READ(task, group_leader, start_boottime);
	e->exit_code = BPF_CORE_READ(task, exit_code);
	e->reserved = 0;
	bpf_map_delete_elem(&known_processes, &tgid);
	bpf_ringbuf_submit(e, 0);
	count(PERFD_CNT_EXIT_SENT);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_process_exec, struct task_struct *task)
{
	struct perfd_event_header *e;
	__u32 tgid = BPF_CORE_READ(task, tgid);

	/* The old image's mappings are gone: unwinding with them would
	 * produce garbage until the daemon has described the new ones, so
	 * walk frame pointers meanwhile. */
	bpf_map_delete_elem(&unwind_processes, &tgid);
	bpf_map_delete_elem(&python_processes, &tgid);
	if (!bpf_map_lookup_elem(&known_processes, &tgid))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PERFD_CNT_EXEC_LOST);
		return 0;
	}
	e->kind = PERFD_EVENT_EXEC;
	e->tgid = tgid;
	e->tid = BPF_CORE_READ(task, pid);
	e->cpu = bpf_get_smp_processor_id();
	e->timestamp_ns = bpf_ktime_get_ns();
	e->start_time_ns = BPF_CORE_READ(task, group_leader, start_boottime);
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	count(PERFD_CNT_EXEC_SENT);
	return 0;
}
