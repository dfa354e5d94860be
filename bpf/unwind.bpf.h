/* SPDX-License-Identifier: GPL-2.0 */
/*
 * unwind.bpf.h - walks a user stack with the daemon's unwind tables
 * (include/perfd/unwind.h), in the kernel, without copying the stack.
 *
 * For each frame: find the mapping that holds pc (binary search over the
 * process's mappings), then the row that holds pc (binary search over the
 * binary's rows), compute the CFA from rsp or rbp, and read the return
 * address (and saved rbp) from the user stack.  Code without a table (JIT,
 * binaries without CFI) is walked with its frame pointer, so one stack can
 * mix both; so are the callers in code whose table proves it keeps frame
 * pointers, several a step and without the searches ("Frames in code that
 * keeps frame pointers").
 *
 * The stack is read through a window ("Reading the stack" below): one copy
 * from the lowest address a frame reads to the end of its page, and the
 * frames above read from that copy, so a walk costs one helper call per
 * page of stack rather than one or two per frame.  A helper call is the
 * dear part of a frame where every call and return pays for speculation
 * mitigations (retpolines, Safe RET): perf's 8 KiB copy once per sample
 * and bpftrace's frame-pointer walk (one copy per frame in the kernel)
 * both pay it too.
 *
 * The frame loop runs under bpf_loop(), so the verifier checks one step
 * instead of 127 unrolled ones; the program that uses this is only loaded
 * when the kernel has bpf_loop (probed by the daemon).  All state the step
 * needs is in scalars of struct user_unwind; map values are looked up again
 * in each step (array lookups, inlined by the verifier).
 */
#ifndef PERFD_UNWIND_BPF_H
#define PERFD_UNWIND_BPF_H

#include "perfd/unwind.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* sized by the daemon */
	__type(key, __u32);
	__type(value, struct perfd_unwind_row);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* sized by the daemon */
	__type(key, __u32);
	__type(value, struct perfd_unwind_mapping);
} unwind_mappings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* sized by the daemon */
	__type(key, __u32);
	__type(value, struct perfd_unwind_process);
} unwind_processes SEC(".maps");

enum user_unwind_result {
	UNWIND_RUNNING = 0,
	UNWIND_COMPLETE, /* reached the outermost frame */
	UNWIND_TRUNCATED,
};

struct user_unwind {
	__u64 pc, sp, bp;
	bool bp_known;
	bool pc_exact;   /* the first frame, or one a signal interrupted */
	__u32 written;   /* frames stored so far */
	__u32 offset;    /* where in ips[] the user frames start */
	__u32 maps_first, maps_count;
	__u32 result;
	__u32 fp_frames; /* callers found by perfd_fp_run() */
	bool unmapped; /* met a pc in no described mapping */
	bool pending;  /* walked code whose table is being built */
};

/* The state of the walks on a CPU, one per kind of sample (enum
 * perfd_value_kind: a tick can interrupt a memory sample's walk).  In a
 * map rather than on the program's stack: 6.1's verifier counts 512 bytes
 * of stack across the whole chain of calls (the program, the bpf_loop()
 * callback, the frame step, the frame-pointer run and its callback), and
 * the walk on the program's stack left that chain at 512 exactly.  The
 * callback finds it by the key its context points to. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct user_unwind);
} unwind_walks SEC(".maps");

/* Set by the caller: the buffer being filled (per-CPU scratch). */
static __always_inline __u64 *unwind_out(void);

/*
 * Reading the stack.  A frame's reads (its saved rbp, then its return
 * address: lowest address first) go through a per-CPU window, a copy of
 * the user stack from `base` to the end of base's page.  A read outside it
 * moves the window: from the read's address (or the frame's sp, when that
 * is lower and in the same page, so that the frame's other read is in it
 * too) to the end of that page.  A page is resident or not as a whole, so
 * the copy fails exactly where an 8-byte read in it would, and its failure
 * is the read's: reading the word again on its own would fail too, and
 * that extra path in each of the four inlined reads tripled the verifier's
 * work (1.5 s instead of 0.6-0.75 s per program at every start here).  An
 * unaligned read is read on its own.  The window is emptied at the start
 * of each walk: the stack changes between samples.
 */
#define STACK_WINDOW_BYTES 4096
#define STACK_WINDOW_WORDS (STACK_WINDOW_BYTES / 8)

struct stack_window {
	__u64 base;  /* user address of words[0] */
	__u64 size;  /* bytes copied; 0: empty */
	__u64 words[STACK_WINDOW_WORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_window);
} stack_windows SEC(".maps");

static __always_inline struct stack_window *stack_window_reset(void)
{
	__u32 zero = 0;
	struct stack_window *w = bpf_map_lookup_elem(&stack_windows, &zero);

	if (w)
		w->size = 0;
	return w;
}

/* Copies size (1..4096) bytes of user memory from base into w.  Returns
 * 0, or -EFAULT with the window emptied. */
static __always_inline long stack_window_load(struct stack_window *w, __u64 base, __u64 size)
{
	/* 1..4096 as the verifier sees it too */
	size = ((size - 1) & (STACK_WINDOW_BYTES - 1)) + 1;
	if (bpf_probe_read_user(w->words, size, (void *)base)) {
		w->size = 0;
		return -14; /* -EFAULT */
	}
	w->base = base;
	w->size = size;
	return 0;
}

/* Reads the 8 bytes at user address addr into *out, through the window;
 * lo is the lowest address the current frame may read (its sp). */
static __always_inline long stack_read(__u64 addr, __u64 lo, __u64 *out)
{
	__u32 zero = 0;
	struct stack_window *w = bpf_map_lookup_elem(&stack_windows, &zero);
	__u64 off, base, size;

	if (!w || (addr & 7))
		return bpf_probe_read_user(out, sizeof(*out), (void *)addr);
	off = addr - w->base;
	if (off < w->size) {
		*out = w->words[(off >> 3) & (STACK_WINDOW_WORDS - 1)];
		return 0;
	}
	base = addr;
	if (lo < addr && (lo & ~(__u64)(STACK_WINDOW_BYTES - 1)) == (addr & ~(__u64)(STACK_WINDOW_BYTES - 1)))
		base = lo & ~(__u64)7;
	size = STACK_WINDOW_BYTES - (base & (STACK_WINDOW_BYTES - 1));
	if (stack_window_load(w, base, size))
		return -14; /* -EFAULT */
	off = addr - base;
	*out = w->words[(off >> 3) & (STACK_WINDOW_WORDS - 1)];
	return 0;
}

/*
 * The two searches of a frame, inlined into the frame step
 * (perfd_unwind_frames()), which is a global function: the verifier checks
 * the step once, with the walk's state unknown, so a search's ways through
 * its loop (which half, whether a lookup failed) meet only the other
 * search's, never the states of earlier frames.  That meeting is what made
 * the tick program pass the verifier's 1M limit on one 6.18 host while it
 * was a bpf_loop() callback that kept the walk's state on the caller's
 * stack (docs/notes/performance-history.md, "Verifier headroom").  As global functions
 * of their own they verified in 0.8 % fewer instructions and cost two
 * calls more a frame: 5 % of a shallow stack's tick here.
 */

/* The index in unwind_mappings of the mapping of [first, first + count)
 * that holds addr (the last one starting at or below it), or -1. */
static __always_inline int find_mapping(__u32 first, __u32 count, __u64 addr)
{
	const struct perfd_unwind_mapping *m;
	__u32 lo = 0, hi = count, idx;
	int best = -1;

	for (int i = 0; i < PERFD_UNWIND_MAPPING_SEARCH_STEPS && lo < hi; i++) {
		__u32 mid = lo + (hi - lo) / 2;

		idx = first + mid;
		m = bpf_map_lookup_elem(&unwind_mappings, &idx);
		if (!m)
			return -1;
		if (m->start <= addr) {
			best = idx;
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	if (best < 0)
		return -1;
	idx = best;
	m = bpf_map_lookup_elem(&unwind_mappings, &idx);
	return m && addr < m->end ? best : -1;
}

/* The index in unwind_rows of the row of [first, first + count) that
 * holds pc (the last one starting at or below it), or -1. */
static __always_inline int find_row(__u32 first, __u32 count, __u32 pc)
{
	const struct perfd_unwind_row *r;
	__u32 lo = 0, hi = count, idx;
	int best = -1;

	for (int i = 0; i < PERFD_UNWIND_ROW_SEARCH_STEPS && lo < hi; i++) {
		__u32 mid = lo + (hi - lo) / 2;

		idx = first + mid;
		r = bpf_map_lookup_elem(&unwind_rows, &idx);
		if (!r)
			return -1;
		if (r->pc <= pc) {
			best = idx;
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return best;
}

/* A zero rbp ends a frame-pointer chain (_start clears it) in code that
 * walks by frame pointer for want of anything better: code without CFI
 * and mappings without a table (JIT, binaries without CFI).  Where frame
 * pointers are only a guess -- pc in no described mapping, or in a binary
 * whose table is being built, which may well use rbp as a scratch
 * register and hold 0 in it -- it says nothing, and the walk is cut there
 * (flagged, and so rooted at a marker) rather than passed off as whole. */
static __always_inline long frame_pointer_step(struct user_unwind *u, bool guess)
{
	__u64 next_bp = 0, ra = 0;

	if (!u->bp_known || u->bp == 0 || stack_read(u->bp, u->bp, &next_bp) ||
	    stack_read(u->bp + 8, u->bp, &ra)) {
		u->result = u->bp == 0 && u->bp_known && !guess ? UNWIND_COMPLETE :
								  UNWIND_TRUNCATED;
		return 1;
	}
	u->sp = u->bp + 16;
	u->bp = next_bp;
	u->pc = ra;
	u->pc_exact = false;
	return 0;
}

/* Stores pc as the next user frame.  Returns 0, or 1 when the walk must
 * stop: at the depth limit (as bpf_loop()'s count would stop it; result
 * unchanged), or when ips is full (truncated). */
static __always_inline long record_frame(struct user_unwind *u, __u64 *ips, __u64 pc)
{
	__u32 slot;

	if (u->written >= PERFD_MAX_STACK_DEPTH)
		return 1;
	slot = u->offset + u->written;
	if (!ips || slot >= 2 * PERFD_MAX_STACK_DEPTH) {
		u->result = UNWIND_TRUNCATED;
		return 1;
	}
	ips[slot] = pc;
	u->written++;
	return 0;
}

/*
 * Frames in code that keeps frame pointers.  The daemon proves from a
 * binary's table which of its code has every return address in a
 * standard frame ([fp_first, fp_end) of struct perfd_unwind_mapping), so
 * there a caller is found by frame pointer exactly as its row would find
 * it (the same two words read, the same failures), without the two binary
 * searches and the bpf_loop() callback a frame costs otherwise (~55 ns on
 * a host with Safe RET and retpolines).  One step takes callers this way
 * until one is outside that code, which the next step records and walks
 * by its row.  A frame a signal interrupted, or the first one, is walked
 * by its row (it may be in a prologue).
 */
/* Whether lookup is in m's frame-pointer code.  Compared through
 * differences, so that the verifier learns nothing about lookup itself:
 * bounds learnt on it would split the row walk that follows into one
 * state per way the test can fail, each checked on its own (it doubled
 * the verifier's work, and the daemon's start). */
static __always_inline bool fp_code(const struct perfd_unwind_mapping *m, __u64 lookup)
{
	__u64 in_mapping = lookup - m->start, in_code = lookup - m->pc_adjust - m->fp_first;

	return in_mapping < m->end - m->start && in_code < (__u64)(m->fp_end - m->fp_first);
}

/* A run of callers found by frame pointer (perfd_fp_run()): the walk, the
 * mapping whose frame-pointer code it is in, the frames' buffer, and how
 * it ended (1: the walk stops; 0: it goes on with u->pc, outside that
 * code, not recorded yet).  Pointers alone, and one result: what the
 * steps change is in *u, which the verifier does not follow, so their
 * callback is checked once or twice rather than once per step. */
struct fp_run {
	struct user_unwind *u;
	const struct perfd_unwind_mapping *m;
	__u64 *ips;
	long stop;
};

/* One caller: 0 to take the next, 1 when the run is over. */
static __always_inline long fp_run_caller(struct fp_run *run)
{
	struct user_unwind *u = run->u;
	__u64 bp, next_bp = 0, ra = 0;

	bp = u->bp;
	if (stack_read(bp, bp, &next_bp) || stack_read(bp + 8, bp, &ra)) {
		u->result = UNWIND_TRUNCATED;
		return 1;
	}
	u->sp = bp + 16;
	u->bp = next_bp;
	u->pc = ra;
	if (ra == 0) {
		u->result = UNWIND_COMPLETE;
		return 1;
	}
	if (!fp_code(run->m, ra - 1)) {
		run->stop = 0;
		return 1;
	}
	if (record_frame(u, run->ips, ra))
		return 1;
	u->fp_frames++;
	return 0;
}

/* Callers a bpf_loop() step takes.  Each step is a call (and a return
 * through the return thunk where Safe RET is on): a step of one caller
 * cost a deep stack's tick 12 % more than the unrolled loop did, a step of
 * eight nothing measurable (tests/bench/bpf-pair.py, both orders), for
 * 9.4k more instructions to verify (33.6k in all here, against 83k for the
 * unrolled loop). */
#define FP_RUN_BATCH 8

static long fp_run_step(__u32 i, void *ctx)
{
	for (int k = 0; k < FP_RUN_BATCH; k++)
		if (fp_run_caller(ctx))
			return 1;
	return 0;
}

/* From the recorded frame at u->pc (a return address in m's frame-pointer
 * code), on to its callers.  Returns 1 to stop the walk, 0
 * to go on with the caller at u->pc, outside that code, not recorded yet.
 * A global function: the verifier checks it once, not once for every
 * state the row search leaves the step in; its callers are taken under
 * bpf_loop(), so that the verifier checks one step of FP_RUN_BATCH, not one
 * for each of PERFD_MAX_STACK_DEPTH (an unrolled loop of them was 59k of
 * the tick program's 102k processed instructions). */
__noinline long perfd_fp_run(struct user_unwind *u, const struct perfd_unwind_mapping *m)
{
	struct fp_run run = { .u = u, .m = m, .ips = unwind_out(), .stop = 1 };

	if (!u || !m)
		return 1;
	/* as the row (CFA = rbp + 16) would end it */
	if (!u->bp_known) {
		u->result = UNWIND_TRUNCATED;
		return 1;
	}
	/* the depth limit (record_frame()) ends it first */
	bpf_loop((PERFD_MAX_STACK_DEPTH + FP_RUN_BATCH - 1) / FP_RUN_BATCH, fp_run_step, &run, 0);
	return run.stop;
}

/* rt_sigframe as the kernel builds it: after the handler's return popped
 * pretcode, rsp points at the ucontext; uc_mcontext (struct sigcontext)
 * starts 40 bytes in, and holds rbp, rsp, rip at 80, 120, 128. */
#define UC_MCONTEXT 40
#define SIGCONTEXT_RBP 80
#define SIGCONTEXT_RSP 120
#define SIGCONTEXT_RIP 128

static __always_inline long signal_step(struct user_unwind *u)
{
	__u64 regs[3];
	void *mc = (void *)(u->sp + UC_MCONTEXT);

	if (bpf_probe_read_user(&regs[0], 8, mc + SIGCONTEXT_RBP) ||
	    bpf_probe_read_user(&regs[1], 8, mc + SIGCONTEXT_RSP) ||
	    bpf_probe_read_user(&regs[2], 8, mc + SIGCONTEXT_RIP)) {
		u->result = UNWIND_TRUNCATED;
		return 1;
	}
	u->bp = regs[0];
	u->bp_known = true;
	u->sp = regs[1];
	u->pc = regs[2];
	u->pc_exact = true;
	return 0;
}

/* One frame: records pc, then moves to the caller.  Returns 1 to stop. */
static __always_inline int unwind_frame(struct user_unwind *u)
{
	const struct perfd_unwind_mapping *m = NULL;
	const struct perfd_unwind_row *row;
	__u64 *ips = unwind_out();
	__u64 lookup, cfa, ra = 0;
	int idx;

	/* perfd_fp_run() may have taken several: the limit is on frames */
	if (record_frame(u, ips, u->pc))
		return 1;

	/* A return address points after the call, maybe past the end of the
	 * caller's function: look up the call instruction instead. */
	lookup = u->pc_exact ? u->pc : u->pc - 1;
	idx = find_mapping(u->maps_first, u->maps_count, lookup);
	if (idx >= 0)
		m = bpf_map_lookup_elem(&unwind_mappings, &idx);
	if (m && !u->pc_exact && fp_code(m, lookup))
		return perfd_fp_run(u, m) ? 1 : 0; /* a global function's value is any scalar to the verifier */
	if (!m)
		u->unmapped = true;
	else if (m->rows_count == 0 && m->rows_first == PERFD_UNWIND_ROWS_PENDING)
		u->pending = true;
	/* (the test above again, not kept in a local or in u: either split
	 * the verifier's states, 296k or 323k instructions against 270k) */
	if (!m || m->rows_count == 0)
		return frame_pointer_step(u, !m || m->rows_first == PERFD_UNWIND_ROWS_PENDING);
	idx = find_row(m->rows_first, m->rows_count, (__u32)(lookup - m->pc_adjust));
	row = idx >= 0 ? bpf_map_lookup_elem(&unwind_rows, &idx) : NULL;
	if (!row) {
		u->result = UNWIND_TRUNCATED;
		return 1;
	}

	switch (row->cfa_type) {
	case PERFD_CFA_RSP:
		cfa = u->sp + row->cfa_offset;
		break;
	case PERFD_CFA_RBP:
		if (!u->bp_known) {
			u->result = UNWIND_TRUNCATED;
			return 1;
		}
		cfa = u->bp + row->cfa_offset;
		break;
	case PERFD_CFA_PLT:
		cfa = u->sp + 8 + (((u->pc & 15) >= (__u64)row->cfa_offset) ? 8 : 0);
		break;
	case PERFD_CFA_SIGNAL:
		return signal_step(u);
	case PERFD_CFA_END:
		u->result = UNWIND_COMPLETE;
		return 1;
	case PERFD_CFA_NO_CFI:
		return frame_pointer_step(u, false);
	default:
		u->result = UNWIND_TRUNCATED;
		return 1;
	}

	/* the saved rbp first: it is below the return address */
	if (row->rbp_offset8 == PERFD_RBP_LOST) {
		u->bp_known = false;
	} else if (row->rbp_offset8 != 0) {
		__u64 bp = 0;

		if (stack_read(cfa + 8 * (__s64)row->rbp_offset8, u->sp, &bp)) {
			u->result = UNWIND_TRUNCATED;
			return 1;
		}
		u->bp = bp;
		u->bp_known = true;
	}
	if (stack_read(cfa - 8, u->sp, &ra)) {
		u->result = UNWIND_TRUNCATED;
		return 1;
	}
	u->sp = cfa;
	u->pc = ra;
	u->pc_exact = false;
	if (ra == 0) {
		u->result = UNWIND_COMPLETE;
		return 1;
	}
	return 0;
}

/* Frames a step of the walk takes: each step is a call of
 * perfd_unwind_frames() (and a return through the return thunk where Safe
 * RET is on); the verifier checks the frames of one step. */
#define UNWIND_FRAMES_PER_STEP 2

/* Up to UNWIND_FRAMES_PER_STEP frames of the walk u.  Returns 1 to stop.
 * A global function, so that the verifier checks it once, with u's
 * contents unknown, instead of once for every state the walk's earlier
 * frames left u in (bpf_loop() callbacks are checked until their states
 * repeat from 6.7 on, so a callback that kept what it learnt of u in u
 * made the verifier's work grow with each kernel, past the 1M limit on
 * one 6.18 host). */
__noinline int perfd_unwind_frames(struct user_unwind *u)
{
	if (!u)
		return 1;
	for (int i = 0; i < UNWIND_FRAMES_PER_STEP; i++)
		if (unwind_frame(u))
			return 1;
	return 0;
}

/* key: unwind_walks' key of the walk. */
static long unwind_step(__u32 i, void *key)
{
	return perfd_unwind_frames(bpf_map_lookup_elem(&unwind_walks, key)) ? 1 : 0;
}

#endif
