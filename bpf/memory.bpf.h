// SPDX-License-Identifier: GPL-2.0
/*
 * memory.bpf.h - memory growth sampled by bytes (on_rss_stat), and the
 * RSS records the daemon keeps each process's resident set from.
 *
 * Part of perfd.bpf.c's one object, included there after the maps and
 * settings it uses; see its top comment for the whole.
 */
#ifndef PERFD_MEMORY_BPF_H
#define PERFD_MEMORY_BPF_H

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

#endif
