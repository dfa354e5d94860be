// SPDX-License-Identifier: GPL-2.0
/*
 * lifecycle.bpf.h - a process's exit, exec and fork, as the daemon needs
 * them: a snapshot ended at once, mappings read again, descendants
 * followed.
 *
 * Part of perfd.bpf.c's one object, included there after the maps and
 * settings it uses; see its top comment for the whole.
 */
#ifndef PERFD_LIFECYCLE_BPF_H
#define PERFD_LIFECYCLE_BPF_H

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

#endif
