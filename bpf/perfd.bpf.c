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
 *
 * One object, one translation unit: this file holds the maps and settings
 * every program shares and the CPU programs (the ticks, the hrtimer and
 * sched_switch programs that say whose tick it is), and includes the rest:
 * sample.bpf.h (one sample built and sent: who, RSS, stacks), unwind.bpf.h
 * (user stacks by the daemon's tables), python.bpf.h (CPython frames),
 * memory.bpf.h (growth sampled by bytes, RSS records), lifecycle.bpf.h
 * (exit, exec, fork) and offcpu.bpf.h (where tasks wait, by the stack at
 * which they left the CPU).
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
#include "sample.bpf.h"

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
 * (the mm at hand is the incoming task's).  The off-CPU program took the
 * stack the task left at, seeing the tick held off (bpf/offcpu.bpf.h),
 * and the daemon gives it that one; without it (off-CPU off, a kernel
 * thread, a stack lost), it roots the tick at "[context switch]", counted.  The
 * outgoing task is still alive then:
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

#include "memory.bpf.h"
#include "lifecycle.bpf.h"
#include "offcpu.bpf.h"
