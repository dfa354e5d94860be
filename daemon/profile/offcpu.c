/* SPDX-License-Identifier: MIT */
/*
 * offcpu.c - an off-CPU block, joined.  BPF sends the stack a task left
 * its CPU at (a sample of kind OFFCPU, value 0) and, when it runs again,
 * how long it was away (struct perfd_offcpu_end; bpf/offcpu.bpf.h).  The
 * stack waits here, by thread, for its end; joined, it is one sample worth
 * the block's estimated nanoseconds (its length over the odds its stack
 * had of being taken), taken at the end, with why it waited as its leaf
 * (waitclass.h), and goes in as any sample does (agg_ingest_sample).
 *
 * A thread has one block at a time, so one stack waits per thread: a
 * second stack for a thread whose first never got its end (the end found
 * no room in the ring) replaces it, counted; an end whose stack is not
 * here (its sample was lost, or came before perfd) is counted with its
 * nanoseconds.  What waits is bounded (OFFCPU_WAITING_MAX stacks,
 * OFFCPU_WAITING_BYTES) and counted in the store's memory; a stack past
 * the bound is dropped and counted.  Waiting stacks of a thread that
 * exits go with its end, which a task always has: it runs again to exit.
 *
 * A tick that fell due while a task was on its way off its CPU is
 * charged to it (PERFD_SAMPLE_F_SWITCHED: bpf/perfd.bpf.c, "Whose tick it
 * is") but comes without a stack: the task switched in cannot read it.
 * BPF took the stack the task left at, seeing the tick held off
 * (bpf/offcpu.bpf.h), and it waits here, sent just before the tick on the
 * same CPU: the tick goes in as a CPU sample with that stack (its leaf in
 * __schedule, where the task was when the tick fell due), rooted at
 * "[context switch]" only when there is none (off-CPU off; a kernel
 * thread, perfd's own or a dying one, whose stacks it does not take; a
 * stack dropped or lost; a tick BPF did not see held off), counted
 * either way.
 *
 * What a process waited for over a few seconds (ps, top) is read back
 * from its history: each entry of kind OFFCPU names its class by its
 * stack's leaf (process_window_waits).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/kindtab.h"
#include "perfd/macro.h"
#include "profile/aggregate_internal.h"
#include "profile/frame.h"
#include "profile/waitclass.h"

struct offcpu_stack {
	size_t size;
	struct perfd_sample s; /* and its frames, size bytes in all */
};

static size_t stack_bytes(const struct offcpu_stack *w)
{
	return sizeof(*w) - sizeof(w->s) + w->size;
}

static void forget(struct aggregator *a, uint32_t tid, struct offcpu_stack *w)
{
	u64map_remove(&a->offcpu.by_tid, tid);
	a->offcpu.bytes -= stack_bytes(w);
	free(w);
}

int agg_offcpu_begin(struct aggregator *a, const struct perfd_sample *s, size_t size)
{
	struct offcpu_stack *w;
	uint64_t *slot;
	bool added;

	a->stats.offcpu_stacks++;
	slot = u64map_get(&a->offcpu.by_tid, s->hdr.tid);
	if (slot) {
		a->stats.offcpu_stacks_replaced++;
		forget(a, s->hdr.tid, (struct offcpu_stack *)(uintptr_t)*slot);
	}
	if (a->offcpu.by_tid.count >= OFFCPU_WAITING_MAX ||
	    a->offcpu.bytes + size > OFFCPU_WAITING_BYTES) {
		a->stats.offcpu_stacks_dropped++;
		return 0;
	}
	w = malloc(sizeof(*w) - sizeof(w->s) + size);
	if (!w) {
		a->stats.offcpu_stacks_dropped++;
		return -ENOMEM;
	}
	w->size = size;
	memcpy(&w->s, s, size);
	slot = u64map_upsert(&a->offcpu.by_tid, s->hdr.tid, &added);
	if (!slot) {
		free(w);
		a->stats.offcpu_stacks_dropped++;
		return -ENOMEM;
	}
	*slot = (uint64_t)(uintptr_t)w;
	a->offcpu.bytes += stack_bytes(w);
	/* known from its first block on: its maps are read while it lives */
	(void)agg_process_for(a, &s->hdr, s->comm, s->page_size, s->flags & PERFD_SAMPLE_F_KTHREAD,
			      true);
	return 0;
}

static const char *kernel_name(void *ctx, uint64_t frame, char *buf, size_t size)
{
	struct aggregator *a = ctx;

	return a->hooks.kernel_function ? a->hooks.kernel_function(a->hooks.userdata, frame, buf, size) :
					  NULL;
}

/* Why s waited, from state and its kernel frames; a Python thread's
 * futex in its GIL is the GIL's (BPF saw which futex). */
static enum wait_class classify(struct aggregator *a, const struct perfd_sample *s, uint32_t state)
{
	uint64_t frames[PERFD_MAX_STACK_DEPTH];
	uint32_t kd = s->kernel_depth > 0 ? MIN((uint32_t)s->kernel_depth, PERFD_MAX_STACK_DEPTH) : 0;
	uint32_t skip = kind_infos[PERFD_VALUE_OFFCPU].kernel_skip;
	size_t n = 0;

	if ((s->flags & PERFD_SAMPLE_F_GIL_WAIT) && !(state & PERFD_OFFCPU_RUNNABLE))
		return WAIT_GIL;

	for (uint32_t i = skip; i < kd; i++)
		frames[n++] = frame_make(FRAME_MODULE_KERNEL, s->ips[i] - (i > skip));
	return wait_classify(state, frames, n, kernel_name, a);
}

/* What a block of away ns whose stack had these odds stands for:
 * away / (odds / PERFD_OFFCPU_ODDS_ONE), saturated. */
static uint64_t estimate(uint64_t away, uint32_t odds)
{
	if (!odds)
		odds = 1;
	if (odds >= PERFD_OFFCPU_ODDS_ONE)
		return away;
	if (away > UINT64_MAX >> PERFD_OFFCPU_ODDS_BITS)
		return UINT64_MAX / odds;
	return (away << PERFD_OFFCPU_ODDS_BITS) / odds;
}

int agg_offcpu_end(struct aggregator *a, const struct perfd_offcpu_end *e)
{
	uint64_t *slot = u64map_get(&a->offcpu.by_tid, e->hdr.tid);
	uint64_t away = e->hdr.timestamp_ns > e->out_ns ? e->hdr.timestamp_ns - e->out_ns : 0;
	struct offcpu_stack *w;
	enum wait_class c;
	int r;

	w = slot ? (struct offcpu_stack *)(uintptr_t)*slot : NULL;
	if (!w || w->s.hdr.timestamp_ns != e->out_ns || w->s.hdr.tgid != e->hdr.tgid) {
		/* an older stack than this end's (its own end was lost) goes;
		 * a newer one waits for its own */
		if (w && w->s.hdr.timestamp_ns < e->out_ns) {
			a->stats.offcpu_stacks_replaced++;
			forget(a, e->hdr.tid, w);
		}
		a->stats.offcpu_ends_unmatched++;
		a->stats.offcpu_unmatched_ns += away;
		return 0;
	}
	u64map_remove(&a->offcpu.by_tid, e->hdr.tid);
	a->offcpu.bytes -= stack_bytes(w);
	c = classify(a, &w->s, e->state);
	w->s.value = estimate(away, e->odds);
	w->s.hdr.timestamp_ns = e->hdr.timestamp_ns;
	w->s.flags = (w->s.flags & ~SAMPLE_WAIT_MASK) | sample_wait_flags(c);
	a->stats.offcpu_joined++;
	r = w->s.value ? agg_ingest_sample(a, &w->s, w->size, NULL) : 0;
	free(w);
	return r;
}

/* How long after a switched tick fell due its task's block may begin
 * and still be the switch it fell due in: interrupts are off from before
 * the switch, microseconds.  (A later block of the same thread would be a
 * race of the task on another CPU with this one's interrupts.) */
#define SWITCHED_STACK_NS (1000ull * 1000)

int agg_offcpu_switched_tick(struct aggregator *a, const struct perfd_sample *s, size_t size)
{
	const uint32_t skip = kind_infos[PERFD_VALUE_OFFCPU].kernel_skip;
	const uint64_t *slot = u64map_get(&a->offcpu.by_tid, s->hdr.tid);
	const struct offcpu_stack *w = slot ? (const struct offcpu_stack *)(uintptr_t)*slot : NULL;
	_cleanup_free_ struct perfd_sample *t = NULL;
	uint32_t kd = w && w->s.kernel_depth > 0 ? (uint32_t)w->s.kernel_depth : 0;

	/* (the waiting record's depths are checked when it goes in: here,
	 * only that its kernel frames are there to move) */
	if (!w || w->s.hdr.tgid != s->hdr.tgid || w->s.hdr.start_time_ns != s->hdr.start_time_ns ||
	    w->s.hdr.timestamp_ns < s->hdr.timestamp_ns ||
	    w->s.hdr.timestamp_ns - s->hdr.timestamp_ns > SWITCHED_STACK_NS ||
	    kd > PERFD_MAX_STACK_DEPTH || w->size < sizeof(*t) + kd * sizeof(t->ips[0]) ||
	    !(t = malloc(w->size))) {
		a->stats.switched_bare += s->value;
		return agg_ingest_sample(a, s, size, NULL);
	}
	memcpy(t, &w->s, w->size);
	t->hdr.timestamp_ns = s->hdr.timestamp_ns;
	t->value_kind = PERFD_VALUE_CPU;
	t->value = s->value;
	/* the kernel stack from the switch on, without the off-CPU
	 * program's own frames: its first frame as the off-CPU profile has
	 * it (ingest takes a part's first frame as it is) */
	if (kd > skip) {
		memmove(t->ips, t->ips + skip,
			w->size - sizeof(*t) - skip * sizeof(t->ips[0]));
		t->kernel_depth -= (int32_t)skip;
		size = w->size - skip * sizeof(t->ips[0]);
	} else {
		size = w->size;
	}
	a->stats.switched_stacked += s->value;
	return agg_ingest_sample(a, t, size, NULL);
}

struct waits_sum {
	const struct stacktab *stacks;
	uint64_t *ns;
};

static int add_wait(void *userdata, uint64_t key, uint64_t value)
{
	struct waits_sum *ws = userdata;
	const struct stack *st;
	uint64_t leaf;

	if (profile_key_kind(key) != PROFILE_KIND_OFFCPU ||
	    !(st = stacktab_get(ws->stacks, profile_key_stack(key))) || !st->depth)
		return 0;
	leaf = st->frames[0];
	if (frame_module(leaf) == FRAME_MODULE_SPECIAL && frame_address(leaf) >= FRAME_SPECIAL_WAIT &&
	    frame_address(leaf) < FRAME_SPECIAL_WAIT + WAIT_CLASSES)
		ws->ns[frame_address(leaf) - FRAME_SPECIAL_WAIT] += value;
	else
		ws->ns[WAIT_OTHER] += value; /* no class named: none is, but it waited */
	return 0;
}

uint64_t process_window_waits(const struct aggregator *a, const struct process *p,
			      uint64_t first_second, uint64_t end_second,
			      const struct owner_filter *owners, uint64_t *ns)
{
	struct waits_sum ws = { a->stacks, ns };
	struct history_iter it;
	struct history_window w;
	uint64_t sum = 0;

	memset(ns, 0, WAIT_CLASSES * sizeof(*ns));
	history_iter_init(&it, &p->history);
	while (history_iter_next(&it, &w))
		if (w.start_s >= first_second && w.start_s + w.span_s <= end_second &&
		    owner_filter_takes(owners, w.owner))
			(void)history_window_foreach(&w, add_wait, &ws);
	for (unsigned c = 0; c < WAIT_CLASSES; c++)
		sum += ns[c];
	return sum;
}

void agg_offcpu_free(struct aggregator *a)
{
	U64MAP_FOREACH(slot, &a->offcpu.by_tid)
		free((void *)(uintptr_t)slot->value);
	u64map_done(&a->offcpu.by_tid);
	a->offcpu.bytes = 0;
}
