/* SPDX-License-Identifier: GPL-2.0 */
/*
 * python.bpf.h - walks the CPython frames of the sampled thread
 * (include/perfd/python.h says what is recorded and why).
 *
 * The thread state is found the way pthread_getspecific() finds it: the
 * task's fs base is glibc's struct pthread, whose specific[key / 32]
 * points to a block of 32 {seq, data} records; record key % 32 holds the
 * PyThreadState* CPython stored under its autoTSSkey.  That is set for
 * the thread's whole life, so a thread that released the GIL inside C
 * code still shows the Python frames that called that code, and a thread
 * CPython never saw (a native worker) has none.  Four reads, whatever the
 * number of threads.
 *
 * Each frame costs up to two reads: the frame's first frame_read_size
 * bytes at once (code object, previous frame, instruction position,
 * owner, function) and the code object's bytes from co_firstlineno to
 * co_filename, for its tag.  The loop runs under bpf_loop() like the
 * native unwinder, with its state in scalars.
 *
 * Tags.  A code object's tag tells the daemon that the object at an
 * address is still the one it read there (include/perfd/python.h); the
 * second read of a frame is for it, and it was a quarter of a Python
 * sample's kernel cost (docs/notes/performance-history.md, "Python code tags, cached").
 * Code objects do not change, so each CPU keeps the tags it read in a
 * small two-way cache keyed by process, code address and the frame's
 * function object (its globals before 3.11), and takes a tag from there
 * when that entry was read less than python_tag_ttl_ns ago.  Its set is
 * a Fibonacci hash of the whole address: the low 12 bits of a code
 * object's address are the same in every run, and a direct-mapped slot
 * taken from bits 4-19 put two of deep.py's 4 hot code objects (CPython
 * 3.12, its source run by exec) in one in 35 runs of 100; two evicting
 * each other cost a tag read per frame per sample (CI saw it once).
 * Two ways of 128 sets need 3 of them in a set: none in those 100.  (The
 * objects' distances from each other are much the same in every run, so
 * that is a property of a program's layout: about one layout in 1400 can
 * put 3 of 4 in a set, and then does in about a third of its runs.)
 * From 3.11, a code object freed and another allocated at its address is
 * usually run by another function object, which the key tells apart.
 * When it is not (a hot-reloader assigns the new code to the same
 * function, the new function lands at the old one's address too, or,
 * before 3.11, the module is reloaded into the same globals), each CPU
 * that read the old tag takes it for python_tag_ttl_ns at most, from the
 * tick it was read at: the new code's first 20 ms there are named for the
 * old (test_python.py,
 * test_code_reused_at_an_address_is_named_for_what_runs).  At 999 Hz a
 * CPU reads a hot frame's tag once in ~20 samples; at 99 Hz, in ~40 % of
 * them (tests/bench/tag-rate.sh).  Only CPU samples fill the cache: a
 * memory sample's walk (on_rss_stat) can be interrupted by a tick on its
 * CPU, whose walk takes the shared buffer between the tag's read and its
 * use.
 *
 * From 3.11 on, the frames of a thread are pushed on its data stack, a few
 * hundred bytes each, each one's caller just below it: their bytes are read
 * through the native walk's window (unwind.bpf.h), one copy from the start
 * of a frame's page up to the end of the frame, and the callers below it
 * in that page come from the copy.  A helper call is the dear part of a
 * read where calls pay for speculation mitigations; frame objects (up to
 * 3.10) are scattered on the heap, and are read one by one.
 */
#ifndef PERFD_PYTHON_BPF_H
#define PERFD_PYTHON_BPF_H

#include "perfd/python.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* sized by the daemon */
	__type(key, __u32);
	__type(value, struct perfd_python_process);
} python_processes SEC(".maps");

#define PYTHON_FRAME_READ_MAX 128

struct python_frame_buf {
	union {
		__u8 bytes[PYTHON_FRAME_READ_MAX + 8];
		__u64 words[(PYTHON_FRAME_READ_MAX + 8) / 8];
	};
};

/* Tags read on this CPU, in sets of PYTHON_TAG_WAYS slots by hash of
 * the code address ("Tags" above). */
#define PYTHON_TAG_SET_BITS 7
#define PYTHON_TAG_WAYS 2 /* python_code_tag() picks between two */
#define PYTHON_TAG_SLOTS (PYTHON_TAG_WAYS << PYTHON_TAG_SET_BITS)
struct python_tag_slot {
	__u64 code;    /* 0: empty */
	__u64 ident;   /* the frame's word at frame_ident */
	__u64 read_ns; /* when the tag was read */
	__u32 tgid;
	__u32 tag;
};

struct python_scratch {
	struct python_frame_buf buf;
	struct python_tag_slot tags[PYTHON_TAG_SLOTS];
	/* the walk's tags from the cache and read: here, not in struct
	 * python_walk, whose every changed value the verifier would follow
	 * through the loop */
	__u32 tags_cached, tags_read;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct python_scratch);
} python_scratch SEC(".maps");

/* How long a cached tag is taken ("Tags" above). */
const volatile __u64 python_tag_ttl_ns = 20 * 1000 * 1000;

#define PYFRAME_WORDS PERFD_PYFRAME_WORDS
_Static_assert(sizeof(struct perfd_python_frame) == PYFRAME_WORDS * sizeof(__u64),
	       "a Python frame record is PERFD_PYFRAME_WORDS words");

struct python_walk {
	__u64 frame;     /* the next frame to read, 0 at the end */
	__u32 base;      /* where in ips[] the Python frames start */
	__u32 written;   /* frames stored */
	__s32 call_last; /* last frame stored for the current call, -1: none */
	bool truncated;
	/* a copy of the process's description, in scalars */
	__u32 walk, read_size;
	__s32 frame_code, frame_previous, frame_position, frame_owner, frame_is_entry;
	__s32 frame_ident;
	__s32 code_adaptive;
	__u32 tgid;
	bool fill_tags;             /* a CPU sample's walk: it may cache tags */
	__u64 now;                  /* the sample's time, for the tags' age */
	__s32 code_tag_first; /* the code object's bytes read for the tag */
	__u32 code_tag_size;
	__s32 tag_firstlineno, tag_filename; /* offsets in those bytes */
};

static __always_inline __u64 buf_u64(const struct python_frame_buf *b, __s32 off)
{
	return *(const __u64 *)(b->bytes + (off & (PYTHON_FRAME_READ_MAX - 1)));
}

static __always_inline __s32 buf_s32(const struct python_frame_buf *b, __s32 off)
{
	return *(const __s32 *)(b->bytes + (off & (PYTHON_FRAME_READ_MAX - 1)));
}

static __always_inline __u8 buf_u8(const struct python_frame_buf *b, __s32 off)
{
	return b->bytes[off & (PYTHON_FRAME_READ_MAX - 1)];
}

/* Appends one frame record; false when there is no room. */
static __always_inline bool python_emit(struct python_walk *w, __u64 code,
					__s32 position, __u32 tag)
{
	__u64 *out = unwind_out();
	struct perfd_python_frame *f;
	__u32 idx;

	if (!out || w->written >= PERFD_MAX_PYTHON_DEPTH) {
		w->truncated = true;
		return false;
	}
	idx = w->base + w->written * PYFRAME_WORDS;
	/* keep the compiler from splitting the checked index */
	asm volatile("" : "+r"(idx));
	if (idx > PERFD_SAMPLE_MAX_WORDS - PYFRAME_WORDS)
		return false;
	f = (struct perfd_python_frame *)(out + idx);
	f->code = code;
	f->position = position;
	f->tag = tag;
	w->written++;
	return true;
}

/* The current _PyEval_EvalFrameDefault call is over: flag its outermost
 * stored frame, or store an empty call. */
static __always_inline void python_close_call(struct python_walk *w)
{
	__u64 *out = unwind_out();
	__u32 idx;

	if (w->call_last < 0) {
		python_emit(w, PERFD_PYFRAME_ENTRY, 0, 0);
		return;
	}
	idx = w->base + (__u32)w->call_last * PYFRAME_WORDS;
	asm volatile("" : "+r"(idx));
	if (out && idx < PERFD_SAMPLE_MAX_WORDS)
		out[idx] |= PERFD_PYFRAME_ENTRY;
	w->call_last = -1;
}

/* Reads the first size (<= PYTHON_FRAME_READ_MAX) bytes of the frame at
 * addr into b, through the window when through_window.  A frame that is
 * not 8-byte aligned, or runs past its page, is read on its own.  Returns
 * 0, or the failed read's error. */
static __always_inline long python_frame_read(struct python_frame_buf *b, __u64 addr, __u32 size,
					      bool through_window)
{
	__u32 zero = 0;
	struct stack_window *w = through_window ? bpf_map_lookup_elem(&stack_windows, &zero) : NULL;
	__u64 off, base, end = addr + size;

	if (!w || (addr & 7) || (addr & ~(__u64)(STACK_WINDOW_BYTES - 1)) !=
				((end - 1) & ~(__u64)(STACK_WINDOW_BYTES - 1)))
		return bpf_probe_read_user(b->bytes, size, (const void *)addr);
	off = addr - w->base;
	if (off >= w->size || end - w->base > w->size) {
		/* from the start of the page to the end of the frame: the
		 * callers are below it */
		base = addr & ~(__u64)(STACK_WINDOW_BYTES - 1);
		if (stack_window_load(w, base, end - base))
			return -14; /* -EFAULT */
		off = addr - base;
	}
	off >>= 3;
	for (int i = 0; i < PYTHON_FRAME_READ_MAX / 8; i++)
		b->words[i] = w->words[(off + i) & (STACK_WINDOW_WORDS - 1)];
	return 0;
}

/* The tag of the code object at code, run by a frame whose word at
 * frame_ident is ident: from this CPU's cache, or read (b's bytes are
 * overwritten then) and cached.  0 when it cannot be read. */
static __always_inline __u32 python_code_tag(struct python_walk *w, struct python_scratch *sc,
					     __u64 code, __u64 ident)
{
	struct python_frame_buf *b = &sc->buf;
	struct python_tag_slot *set, *slot;
	__u32 tag_size = w->code_tag_size, tag, first;

	first = (__u32)((code * 0x9e3779b97f4a7c15ULL) >> (64 - PYTHON_TAG_SET_BITS)) *
		PYTHON_TAG_WAYS;
	set = &sc->tags[first & (PYTHON_TAG_SLOTS - PYTHON_TAG_WAYS)];
	for (int i = 0; i < PYTHON_TAG_WAYS; i++) {
		slot = &set[i];
		if (slot->code == code && slot->ident == ident && slot->tgid == w->tgid &&
		    w->now - slot->read_ns < python_tag_ttl_ns) {
			sc->tags_cached++;
			return slot->tag;
		}
	}
	tag_size &= PYTHON_FRAME_READ_MAX - 1; /* < 64 in every version */
	if (tag_size == 0 ||
	    bpf_probe_read_user((void *)b->bytes, tag_size, (const void *)(code + w->code_tag_first)))
		return 0;
	tag = perfd_python_code_tag(buf_s32(b, w->tag_firstlineno), buf_u64(b, w->tag_filename));
	sc->tags_read++;
	/* The way read longest ago (an empty one was read at 0).  Only
	 * ticks write slots, and nothing that reads them interrupts a tick.
	 * (A memory walk a tick interrupts between its test of a slot and
	 * its read of the tag can take the tick's tag for that one frame:
	 * the daemon then finds the tag wrong and names it unreadable.) */
	slot = set[1].read_ns < set[0].read_ns ? &set[1] : &set[0];
	if (w->fill_tags)
		*slot = (struct python_tag_slot){
			.code = code, .ident = ident, .read_ns = w->now, .tgid = w->tgid, .tag = tag,
		};
	return tag;
}

/* One frame of the walk w.  Returns 1 to stop. */
static __always_inline int python_frame(struct python_walk *w)
{
	struct python_scratch *sc;
	struct python_frame_buf *b;
	__u32 zero = 0, size;
	bool last_of_call, shown = true;
	__s32 position;
	__u64 code, ident;
	__u8 owner = 0;

	if (!w->frame)
		return 1;
	size = w->read_size;
	sc = bpf_map_lookup_elem(&python_scratch, &zero);
	if (!sc || size == 0 || size > PYTHON_FRAME_READ_MAX)
		return 1;
	b = &sc->buf;
	if (python_frame_read(b, w->frame, size,
			      w->walk != PERFD_PYWALK_FRAME_OBJECTS)) {
		w->truncated = true;
		return 1;
	}
	/* 3.14's f_executable is a _PyStackRef: tag bits (Py_TAG_BITS) in
	 * the low bits of the code object's address, which is 8-aligned */
	code = buf_u64(b, w->frame_code) & ~(__u64)7;
	ident = buf_u64(b, w->frame_ident);
	if (w->frame_owner >= 0)
		owner = buf_u8(b, w->frame_owner);
	w->frame = buf_u64(b, w->frame_previous);

	if (w->walk == PERFD_PYWALK_FRAME_OBJECTS) {
		position = buf_s32(b, w->frame_position);
		last_of_call = true;
	} else {
		__u64 instr = buf_u64(b, w->frame_position);

		if (w->walk == PERFD_PYWALK_SHIM_FRAMES && owner >= PERFD_PY_OWNED_BY_SHIM) {
			python_close_call(w);
			return 0;
		}
		position = (__s32)(instr - (code + w->code_adaptive));
		last_of_call = w->walk == PERFD_PYWALK_IS_ENTRY && buf_u8(b, w->frame_is_entry);
		/* A frame that has not started its first instruction is
		 * one the interpreter itself hides ("incomplete"). */
		if (position < 0 && owner != 1 /* FRAME_OWNED_BY_GENERATOR */)
			shown = false;
	}

	if (shown && code) {
		/* the frame's bytes are used up: a tag read takes the buffer */
		if (!python_emit(w, code, position, python_code_tag(w, sc, code, ident)))
			return 1;
		w->call_last = (__s32)w->written - 1;
	}
	if (last_of_call)
		python_close_call(w);
	return 0;
}

/* Frames a step of the walk takes ("Each frame" above): each step is a
 * call of perfd_python_frames() (and a return through the return thunk
 * where Safe RET is on), 5 % of a 30-frame Python tick at one frame a
 * step (tests/bench/bpf-pair.py, both orders); the verifier checks the
 * frames of one step. */
#define PYTHON_FRAMES_PER_STEP 4

/* Up to PYTHON_FRAMES_PER_STEP frames of the walk w.  Returns 1 to stop.
 * A global function, for the reason perfd_unwind_frames() is one: checked
 * once, with w's contents unknown; inlined into the bpf_loop() callback,
 * the walk's fields multiplied the states (189k instructions instead of
 * 34k for the tick program). */
__noinline int perfd_python_frames(struct python_walk *w)
{
	if (!w)
		return 1;
	for (int i = 0; i < PYTHON_FRAMES_PER_STEP; i++)
		if (python_frame(w))
			return 1;
	return 0;
}

/* The walks on a CPU, one per kind of sample, in a map for the reason
 * unwind_walks is one (unwind.bpf.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct python_walk);
} python_walks SEC(".maps");

/* key: python_walks' key of the walk. */
static long python_step(__u32 i, void *key)
{
	return perfd_python_frames(bpf_map_lookup_elem(&python_walks, key)) ? 1 : 0;
}

/* Reads the PyThreadState* of the current thread (task, from
 * bpf_get_current_task_btf()), 0 when it has none. */
static __always_inline __u64 python_thread_state(struct task_struct *task,
						 const struct perfd_python_process *py)
{
	struct { __s32 initialized; __u32 key; } tss;
	__u64 fsbase, block = 0, tstate = 0;

	if (bpf_probe_read_user(&tss, sizeof(tss), (const void *)py->tss_addr) ||
	    !tss.initialized)
		return 0;
	fsbase = task->thread.fsbase;
	if (!fsbase)
		return 0;
	if (bpf_probe_read_user(&block, sizeof(block),
				(const void *)(fsbase + py->pthread_specific + (tss.key / 32) * 8)) ||
	    !block)
		return 0;
	bpf_probe_read_user(&tstate, sizeof(tstate),
			    (const void *)(block + (tss.key % 32) * py->key_data_size +
					   py->key_data_data));
	return tstate;
}

/* The GIL.  A thread holds it while it is the interpreter's current
 * thread, which CPython makes it just after it took the GIL and unmakes
 * just before it drops it (PyEval_SaveThread(), the eval loop's switch):
 * up to 3.11 its state is the runtime's gilstate.tstate_current; from 3.12
 * that is thread-local, and its state's _status.active bit says it.  (The
 * GIL's own locked and last_holder fields do not: a thread that has just
 * released it to sleep still reads as its holder while the thread taking
 * it over has set locked and not yet last_holder, and a tick in that
 * thread between the two stores made a whole sleep look held.)  It waits
 * for it when it is blocked in a futex inside the GIL's struct, whose
 * mutex and condition variables take_gil() and drop_gil() wait on: the
 * system call its entry registers name (orig_ax; an interrupt's is
 * negative), a futex operation that waits (not the wake of a release),
 * and its first argument, the futex's address.  A thread that left the
 * CPU holding it (a C extension blocking without releasing it) shows as
 * HELD in its off-CPU sample: every other thread of the interpreter waits
 * for it.  One read.  Sub-interpreters with a GIL of their own (3.12+) are
 * not looked at. */
#define PYTHON_NR_FUTEX 202 /* x86_64 */
#define PYTHON_FUTEX_CMD_MASK 127 /* without FUTEX_PRIVATE_FLAG, FUTEX_CLOCK_REALTIME */

/* FUTEX_WAIT, FUTEX_LOCK_PI, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI,
 * FUTEX_LOCK_PI2: the operations that wait. */
static __always_inline bool python_futex_waits(__u64 op)
{
	op &= PYTHON_FUTEX_CMD_MASK;
	return op == 0 || op == 6 || op == 9 || op == 11 || op == 13;
}

static __always_inline void python_gil_state(struct task_struct *task,
					     const struct perfd_python_process *py, __u64 tstate,
					     __u32 *flags)
{
	struct pt_regs *regs;
	__u64 current = 0, uaddr;
	__u32 status = 0;

	if (py->gil_current_addr) {
		if (bpf_probe_read_user(&current, sizeof(current),
					(const void *)py->gil_current_addr))
			return;
		*flags |= PERFD_SAMPLE_F_GIL_KNOWN;
		if (current == tstate) {
			*flags |= PERFD_SAMPLE_F_GIL_HELD;
			return;
		}
	} else if (py->tstate_active >= 0) {
		if (bpf_probe_read_user(&status, sizeof(status),
					(const void *)(tstate + py->tstate_active)))
			return;
		*flags |= PERFD_SAMPLE_F_GIL_KNOWN;
		if (status & py->tstate_active_mask) {
			*flags |= PERFD_SAMPLE_F_GIL_HELD;
			return;
		}
	} else {
		return;
	}
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!py->gil_addr || !regs || regs->orig_ax != PYTHON_NR_FUTEX ||
	    !python_futex_waits(regs->si))
		return;
	uaddr = regs->di;
	if (uaddr >= py->gil_addr && uaddr < py->gil_addr + py->gil_size)
		*flags |= PERFD_SAMPLE_F_GIL_WAIT;
}

/* Appends the Python frames of the current thread (task, from
 * bpf_get_current_task_btf()) at ips[base...].
 * Returns how many records were stored.  counted: the walk is a CPU
 * sample's, which status' python counters count (memory samples walk
 * too, uncounted, so the counters keep meaning CPU samples).  gil: say the
 * thread's GIL state in *flags (CPU and off-CPU samples). */
static __always_inline __u32 python_walk_stack(struct task_struct *task, __u32 tgid, __u32 base,
					       __u32 *flags, bool counted, bool gil, __u64 now)
{
	const struct perfd_python_process *py = bpf_map_lookup_elem(&python_processes, &tgid);
	__u32 key = counted ? PERFD_VALUE_CPU : PERFD_VALUE_MEMORY;
	struct python_walk *w;
	struct python_scratch *sc;
	__u64 tstate, frame = 0;
	__u32 zero = 0;

	if (!py)
		return 0;
	/* it may hold another process's bytes when the native walk did not
	 * run (python_frame_read) */
	if (!stack_window_reset())
		return 0;
	*flags |= PERFD_SAMPLE_F_PYTHON;
	if (counted)
		count(PERFD_CNT_PYTHON_WALKS);
	tstate = python_thread_state(task, py);
	if (!tstate) {
		if (counted)
			count(PERFD_CNT_PYTHON_NO_THREAD_STATE);
		return 0;
	}
	if (gil)
		python_gil_state(task, py, tstate, flags);
	if (bpf_probe_read_user(&frame, sizeof(frame),
				(const void *)(tstate + py->tstate_frame)))
		goto truncated;
	if (py->cframe_current_frame >= 0 && frame &&
	    bpf_probe_read_user(&frame, sizeof(frame),
				(const void *)(frame + py->cframe_current_frame)))
		goto truncated;

	w = bpf_map_lookup_elem(&python_walks, &key);
	if (!w)
		return 0;
	__builtin_memset(w, 0, sizeof(*w));
	w->frame = frame;
	w->base = base;
	w->call_last = -1;
	w->walk = py->walk;
	w->read_size = py->frame_read_size;
	w->frame_code = py->frame_code;
	w->frame_previous = py->frame_previous;
	w->frame_position = py->frame_position;
	w->frame_owner = py->frame_owner;
	w->frame_is_entry = py->frame_is_entry;
	w->frame_ident = py->frame_ident;
	w->tgid = tgid;
	w->fill_tags = counted;
	w->now = now;
	w->code_adaptive = py->code_adaptive;
	w->code_tag_first = py->code_tag_first;
	w->code_tag_size = py->code_tag_size;
	w->tag_firstlineno = py->tag_firstlineno;
	w->tag_filename = py->tag_filename;
	sc = bpf_map_lookup_elem(&python_scratch, &zero);
	if (sc)
		sc->tags_cached = sc->tags_read = 0;
	bpf_loop((PERFD_MAX_PYTHON_DEPTH * 2 + PYTHON_FRAMES_PER_STEP - 1) / PYTHON_FRAMES_PER_STEP,
		 python_step, &key, 0);
	if (counted && sc) {
		count_n(PERFD_CNT_PYTHON_TAGS_CACHED, sc->tags_cached);
		count_n(PERFD_CNT_PYTHON_TAGS_READ, sc->tags_read);
	}
	if (w->call_last >= 0)
		python_close_call(w);
	if (w->frame || w->truncated)
		goto truncated_walk;
	return w->written;

truncated_walk:
	*flags |= PERFD_SAMPLE_F_PYTHON_TRUNCATED;
	if (counted)
		count(PERFD_CNT_PYTHON_TRUNCATED);
	return w->written;
truncated:
	*flags |= PERFD_SAMPLE_F_PYTHON_TRUNCATED;
	if (counted)
		count(PERFD_CNT_PYTHON_TRUNCATED);
	return 0;
}

#endif
