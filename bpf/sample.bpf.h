// SPDX-License-Identifier: GPL-2.0
/*
 * sample.bpf.h - one sample built and sent: who ran (tgid, tid, comm, start
 * time, owner, cgroup), its RSS, its kernel and user stacks (by frame
 * pointers or the daemon's tables, unwind.bpf.h) and Python frames
 * (python.bpf.h), announced to the daemon when the process is new, into
 * one ring buffer record.  The CPU, switch and memory programs all send
 * theirs through sample().
 *
 * Part of perfd.bpf.c's one object, included there after the maps and
 * settings it uses; see its top comment for the whole.
 */
#ifndef PERFD_SAMPLE_BPF_H
#define PERFD_SAMPLE_BPF_H

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
		/* an off-CPU stack wakes no one: the block it begins is not
		 * over, and its process's first CPU sample will */
		flags = announce(s->hdr.tgid, s->hdr.start_time_ns, s->hdr.timestamp_ns,
				 !(s->flags & PERFD_SAMPLE_F_SWITCHED) &&
					 s->value_kind != PERFD_VALUE_OFFCPU,
				 nudge);
	if (bpf_ringbuf_output(&events, s, size, flags))
		count(s->value_kind == PERFD_VALUE_CPU    ? PERFD_CNT_RINGBUF_FULL :
		      s->value_kind == PERFD_VALUE_MEMORY ? PERFD_CNT_MEMORY_LOST :
							    PERFD_CNT_OFFCPU_LOST);
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
					   value_kind == PERFD_VALUE_CPU,
					   value_kind != PERFD_VALUE_MEMORY, now);
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

#endif
