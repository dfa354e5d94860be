// SPDX-License-Identifier: GPL-2.0
/*
 * offcpu.bpf.h - where user tasks wait: off-CPU time by the stack at which
 * they left the CPU.
 *
 * `on_switch_offcpu` runs at every context switch (sched_switch, in the
 * task switched out, interrupts off).  For the task leaving, it notes the
 * time in the task's local storage and, with the odds below, takes its
 * stack there and then, as a CPU sample's (kernel, user by the daemon's
 * tables, Python frames), and sends it as a sample of value_kind OFFCPU
 * and value 0.  For the task coming in, it finds that note, and sends how
 * long the task was away and the odds its stack had (struct
 * perfd_offcpu_end); the daemon joins the two (daemon/profile/offcpu.c).
 * The stack must be taken at the switch out: only the task itself can
 * read its user memory, and when it runs again the program is in the next
 * switch's outgoing task.
 *
 * Why sample blocks and not keep every one: taking a stack costs
 * microseconds (unwinding, Python frames), and a host can switch a
 * million times a second.  A block's stack is taken with odds p, and the
 * daemon counts a taken block as its length / p: the sum stays an
 * unbiased estimate of every task's waiting time (each block's expected
 * count is its length), as long as p is fixed before the block begins
 * (it may depend on the task's past, never on how long this block will
 * be).  p is the product of two odds (take()):
 *  - by length, threshold sampling (Duffield, Lund and Thorup's, as
 *    network flow samplers keep flows by size): a block whose expected
 *    length m is the CPU's threshold t or more is kept; a shorter one
 *    with odds m / t.  m is the mean of the task's last blocks of this
 *    kind (waits for a CPU, or the others: a task's short preemptions
 *    would otherwise drag down the mean of its long sleeps), quick to
 *    rise and slow to fall (note_length).  So the odds follow where the
 *    time is: the long waits that make up most of it (a service waiting
 *    for requests, a loop sleeping on a timer) are all kept, and the
 *    error is in the short ones, whose many samples average out
 *    (relative error ~1/sqrt(blocks taken)).  t is offcpu_long_ns (1 ms)
 *    while the CPU takes about offcpu_blocks_per_s (--offcpu-rate, 500)
 *    stacks a second or fewer (over OFFCPU_WINDOW_NS), the bound on the
 *    cost whatever the number of tasks; past it, t rises for the next
 *    window in proportion (next_threshold).  So a burst of short
 *    or new tasks thins themselves, not the long waits of the others: an
 *    established timer loop's 300 ms sleeps stay whole unless 50 blocks
 *    a window that long are due on its CPU.  (A budget kept for long
 *    blocks, by a fixed 1 ms line, let a shell script's process starts,
 *    80 blocks in 10 ms that new tasks' means count as long, take a
 *    timer loop's sleeps with odds of 1/2 to 3/4: off by 0.3 s in 2.4.)
 *  - by the task's rate: of those, about offcpu_task_stacks_per_s (100)
 *    a second (over OFFCPU_TASK_WINDOW_NS), so that no task's switches
 *    take the CPU's budget from the others.
 * The lengths of the blocks not taken are counted
 * (PERFD_CNT_OFFCPU_SKIPPED_NS), and status shows them beside the
 * estimate.
 *
 * One more block's stack is taken, whatever the odds: the one a task
 * leaves its CPU at while a tick of the CPU's perf timer is due and held
 * off by the switch itself (__schedule() runs with interrupts off).  That
 * tick is delivered in the task switched in and charged to this one
 * (perfd.bpf.c, "Whose tick it is"), which it can no longer read: the
 * daemon gives it this stack (profile/offcpu.c).  Such a block's odds are
 * one, decided at its start by the timer, not by its length: the
 * estimate stays unbiased, and these stacks, one per tick at most, come
 * out of neither budget.
 *
 * perfd's own threads are left out too (offcpu_self_tgid).  Kernel
 * threads and the idle task are left out: their waits are the
 * kernel's, and they would spend the budget of the processes users ask
 * about.  A block that began before this program was attached, or whose
 * note the kernel could not store, has no note and is not counted.
 *
 * Part of perfd.bpf.c's one object, included there after the maps,
 * settings and sample builder it uses; see its top comment for the whole.
 */
#ifndef PERFD_OFFCPU_BPF_H
#define PERFD_OFFCPU_BPF_H

#define OFFCPU_WINDOW_NS (100ull * 1000 * 1000)
#define OFFCPU_TASK_WINDOW_NS (1000ull * 1000 * 1000)
/* A CPU's threshold at most: blocks of 10 s on the mean are always kept */
#define OFFCPU_MAX_THRESHOLD_NS (10000ull * 1000 * 1000)
/* include/linux/sched.h's TASK_DEAD, the state of a task's last switch */
#define TASK_DEAD_STATE 0x80

/* Stacks each CPU takes a second, at most about (set by the daemon). */
const volatile __u64 offcpu_blocks_per_s = 500;
/* Stacks each task takes a second, at most about. */
const volatile __u64 offcpu_task_stacks_per_s = 100;
/* A task whose blocks last this long on the mean keeps every one, while
 * its CPU is within offcpu_blocks_per_s. */
const volatile __u64 offcpu_long_ns = 1000000;
/* perfd's own process: its waits are left out, or every wait of its
 * drain would send records that make it wait again. */
const volatile __u32 offcpu_self_tgid = 0;

/* A task's note of its current block, and its rate. */
struct offcpu_note {
	__u64 out_ns;        /* when it left the CPU; 0: not away (or not noted) */
	/* how long its blocks last, a moving mean (note_length) of each
	 * kind: [0] waits for a CPU (runnable when it left), [1] the others */
	__u64 mean_ns[2];
	__u64 window_end_ns; /* its rate's window */
	__u32 window_taken;  /* its blocks its own odds let through in that window */
	__u32 rate_odds;     /* its rate's odds, from the window before */
	__u32 odds;          /* this block's stack was taken with these odds; 0: not taken */
	__u32 state;         /* PERFD_OFFCPU_RUNNABLE, or its __state when it left */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct offcpu_note);
} offcpu_notes SEC(".maps");

/* Each CPU's rate: the stacks taken in the window under way, and the
 * threshold the window before set (0: none yet). */
struct offcpu_cpu {
	__u64 window_end_ns;
	__u64 taken;
	__u64 threshold_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_cpu);
} offcpu_cpus SEC(".maps");

/* Before 5.14 ("sched: Change task_struct::state") the field was state. */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state(struct task_struct *task)
{
	if (bpf_core_field_exists(task->__state))
		return BPF_CORE_READ(task, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)task, state);
}

/* The odds of a rate: PERFD_OFFCPU_ODDS_ONE while the blocks let through
 * in the window gone were within budget, else budget / taken; all when
 * that window is not the one just gone (quiet since). */
static __always_inline __u32 rate_odds(__u64 taken, __u64 budget, bool last_window)
{
	if (!last_window || taken <= budget)
		return PERFD_OFFCPU_ODDS_ONE;
	return (__u32)(budget * PERFD_OFFCPU_ODDS_ONE / taken) ?: 1;
}

/* Whether a draw with these odds wins. */
static __always_inline bool wins(__u32 odds)
{
	return odds >= PERFD_OFFCPU_ODDS_ONE ||
	       (bpf_get_prandom_u32() & (PERFD_OFFCPU_ODDS_ONE - 1)) < odds;
}

static __always_inline __u32 odds_times(__u32 a, __u32 b)
{
	return (__u32)(((__u64)a * b) >> PERFD_OFFCPU_ODDS_BITS) ?: 1;
}

/* The CPU's threshold for the window beginning now: the last one's, times
 * what that window took over its budget (the shorter blocks' share of the
 * stacks taken goes as 1/t), at most 4 times up and 2 down a window, and
 * offcpu_long_ns at least: so at about the budget on the mean, bursts
 * (a shell script's process starts: 80 blocks in 10 ms, then none)
 * included.  (Up by the ratio and down by halves only below half the
 * budget, t ratcheted up under bursts, to seconds.) */
static __always_inline __u64 next_threshold(const struct offcpu_cpu *c, __u64 now)
{
	__u64 budget = offcpu_blocks_per_s * OFFCPU_WINDOW_NS / 1000000000ull ?: 1;
	__u64 last = c->threshold_ns, t;

	if (!last)
		return offcpu_long_ns;
	if (now - c->window_end_ns >= OFFCPU_WINDOW_NS) { /* windows with none since */
		__u64 quiet = (now - c->window_end_ns) / OFFCPU_WINDOW_NS;

		t = quiet >= 16 ? 0 : last >> quiet;
		return t < offcpu_long_ns ? offcpu_long_ns : t;
	}
	t = last * c->taken / budget;
	if (t < last / 2)
		t = last / 2;
	if (t > last * 4)
		t = last * 4;
	return t < offcpu_long_ns ? offcpu_long_ns : t > OFFCPU_MAX_THRESHOLD_NS ? OFFCPU_MAX_THRESHOLD_NS : t;
}

/* Whether the stack of the block task n begins now is taken, and with
 * what odds (*ret: the product of the two, 0 when not taken):
 *  - its length's: a task whose blocks last the CPU's threshold or more
 *    on the mean keeps every one; one whose blocks are shorter keeps that
 *    share;
 *  - its rate's: of those, about offcpu_task_stacks_per_s a second.
 * Each is fixed before the block begins. */
static __always_inline bool take(struct offcpu_note *n, __u64 now, __u32 *ret)
{
	__u32 by_length = PERFD_OFFCPU_ODDS_ONE, zero = 0;
	__u64 mean = n->mean_ns[n->state != PERFD_OFFCPU_RUNNABLE];
	struct offcpu_cpu *c;

	*ret = 0;
	c = bpf_map_lookup_elem(&offcpu_cpus, &zero);
	if (!c)
		return false;
	if (now >= c->window_end_ns) {
		c->threshold_ns = next_threshold(c, now);
		c->window_end_ns = now + OFFCPU_WINDOW_NS;
		c->taken = 0;
	}
	if (mean < c->threshold_ns)
		by_length = (__u32)(mean * PERFD_OFFCPU_ODDS_ONE / c->threshold_ns) ?: 1;
	if (!wins(by_length))
		return false;
	if (now >= n->window_end_ns) {
		n->rate_odds = rate_odds(n->window_taken,
					 offcpu_task_stacks_per_s * OFFCPU_TASK_WINDOW_NS / 1000000000ull,
					 n->window_end_ns && now - n->window_end_ns < OFFCPU_TASK_WINDOW_NS);
		n->window_end_ns = now + OFFCPU_TASK_WINDOW_NS;
		n->window_taken = 0;
	}
	n->window_taken++;
	if (!wins(n->rate_odds))
		return false;
	c->taken++;
	*ret = odds_times(by_length, n->rate_odds);
	return true;
}

/* The moving mean of a task's blocks of the kind of the one that just
 * ended, with it: quick to rise (half the way to a longer block), slow to
 * fall (a sixteenth of the way to a shorter one), so that a task whose
 * long waits come between short ones (a sleep after a few page-cache
 * reads, a request after a few lock waits) keeps its long ones whole:
 * the odds follow where its waiting time is, not how many waits. */
static __always_inline void note_length(struct offcpu_note *n, __u64 away)
{
	__u64 *mean = &n->mean_ns[n->state != PERFD_OFFCPU_RUNNABLE];

	if (away >= *mean)
		*mean += (away - *mean) >> 1;
	else
		*mean -= (*mean - away) >> 4;
}

/* task, back on the CPU at now: how long it was away, if it was noted. */
static __always_inline void offcpu_end(struct task_struct *task, __u64 now)
{
	struct perfd_offcpu_end *e;
	struct offcpu_note *n;
	__u64 away;

	n = bpf_task_storage_get(&offcpu_notes, task, 0, 0);
	if (!n || !n->out_ns)
		return;
	away = now - n->out_ns;
	note_length(n, away);
	if (!n->odds) {
		count_n(PERFD_CNT_OFFCPU_SKIPPED_NS, away);
		n->out_ns = 0;
		return;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PERFD_CNT_OFFCPU_LOST);
		count_n(PERFD_CNT_OFFCPU_SKIPPED_NS, away);
		n->out_ns = 0;
		return;
	}
	fill_header(&e->hdr, PERFD_EVENT_OFFCPU_END, task->tgid, task->pid,
		    task->group_leader->start_boottime, now);
	e->out_ns = n->out_ns;
	e->odds = n->odds;
	e->state = n->state;
	n->out_ns = 0;
	count_n(PERFD_CNT_OFFCPU_SAMPLED_NS, away);
	bpf_ringbuf_submit(e, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= ringbuf_wakeup_bytes ?
				      BPF_RB_FORCE_WAKEUP :
				      BPF_RB_NO_WAKEUP);
}

/* Whether a tick of this CPU's perf timer fell due before task's switch
 * out and waits for the interrupts the switch keeps off, and will sample
 * there, charged to task: its expiry is before the switch as
 * on_sched_switch noted it (on_tick's test; before now if that program
 * has not run yet) and within a timer period of it (a cancelled or
 * stopped timer keeps its old expiry: it takes stacks for a period at
 * most; its state field, which would say, is not in every kernel's
 * struct hrtimer: 7.2's refused the read), and a jittered
 * target is due by it (ticks_due(), without moving on).  Not known
 * before the CPU's first tick (st->timer). */
static __always_inline bool tick_held_off(struct task_struct *task, __u64 now)
{
	struct perfd_cpu_state *st;
	struct hrtimer *timer;
	__u64 expires, at;
	__u32 zero = 0;

	st = bpf_map_lookup_elem(&cpu_states, &zero);
	if (!st || !st->timer)
		return false;
	at = st->prev == (__u64)task ? st->switch_ns : now;
	/* (out of BPF_CORE_READ(), whose relocations would take st's field
	 * for the kernel's) */
	timer = (struct hrtimer *)st->timer;
	expires = BPF_CORE_READ(timer, node.expires);
	if (expires >= at || at - expires > timer_period_ns)
		return false;
	return !jitter_period_ns ||
	       (st->period_gen == period_gen && st->target_ns && st->target_ns <= expires);
}

/* task, the current one, leaves the CPU at now. */
static __always_inline int offcpu_begin(void *ctx, struct task_struct *task, bool preempt,
					__u64 now)
{
	struct user_regs no_uregs = {};
	struct offcpu_note *n;
	__u32 odds, state;

	state = task_state(task);
	/* its last switch: a dead task never comes back to end a block */
	if (state & TASK_DEAD_STATE)
		return 0;
	n = bpf_task_storage_get(&offcpu_notes, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!n)
		return 0;
	count(PERFD_CNT_OFFCPU_BLOCKS);
	if (!n->window_end_ns && !n->mean_ns[0] && !n->mean_ns[1]) {
		/* new: its first blocks are kept, the first forty or so short
		 * ones too (a process's start: exec's reads, the loader) */
		n->mean_ns[0] = 16 * offcpu_long_ns;
		n->mean_ns[1] = 16 * offcpu_long_ns;
	}
	n->out_ns = now;
	n->state = preempt || state == 0 ? PERFD_OFFCPU_RUNNABLE : state;
	n->odds = 0;
	if (tick_held_off(task, now)) {
		odds = PERFD_OFFCPU_ODDS_ONE;
		count(PERFD_CNT_OFFCPU_FOR_TICK);
	} else if (!take(n, now, &odds)) {
		return 0;
	}
	n->odds = odds;
	count(PERFD_CNT_OFFCPU_SAMPLED);
	return sample(ctx, task, true, true, &no_uregs, PERFD_VALUE_OFFCPU, 0, now);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch_offcpu, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 now;

	refuse_if_asked(PERFD_REFUSE_OFFCPU);
	now = bpf_ktime_get_ns();
	if (next->mm && next->pid && next->tgid != offcpu_self_tgid)
		offcpu_end(next, now);
	if (!prev->mm || !prev->pid || prev->tgid == offcpu_self_tgid)
		return 0;
	return offcpu_begin(ctx, prev, preempt, now);
}

#endif
