/* SPDX-License-Identifier: MIT */
/*
 * aggregate.c - the store's front: its making and freeing, the scaling of its CPU
 * values, maintenance and revisits, what is restored from the state
 * directory, and its counters.
 * The store's design is aggregate.h's; what its files share,
 * aggregate_internal.h's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "process/procfs.h"
#include "process/procmaps.h"
#include "profile/aggregate_internal.h"
#include "profile/frame.h"

int aggregator_new(const struct aggregator_limits *limits, const struct module_registry *modules,
		   struct aggregator **ret)
{
	struct stacktab_limits sl = {
		/* the placeholder is ours, not the processes' */
		.max_stacks = limits->max_stacks + 1,
		.max_frames = limits->max_frames + 1,
	};
	uint64_t placeholder = frame_make(FRAME_MODULE_SPECIAL, FRAME_SPECIAL_STACK_LIMIT);
	struct aggregator *a = calloc(1, sizeof(*a));
	long hz = sysconf(_SC_CLK_TCK);
	int r;

	if (!a)
		return -ENOMEM;
	a->limits = *limits;
	if (!a->limits.retention_s)
		a->limits.retention_s = 3600;
	a->modules = *modules;
	a->probes_queued_tail = &a->probes_queued;
	owner_tally_init(&a->owners);
	a->ns_per_tick = NSEC_PER_SEC / (hz > 0 ? (uint64_t)hz : 100);
	u64map_init(&a->by_pid);
	r = stacktab_new(&sl, &a->stacks);
	if (r >= 0)
		r = stacktab_intern(a->stacks, &placeholder, 1, 0, &a->stack_limit_id);
	if (r < 0) {
		aggregator_free(a);
		return r;
	}
	*ret = a;
	return 0;
}

void aggregator_set_hooks(struct aggregator *a, const struct aggregator_hooks *hooks)
{
	a->hooks = *hooks;
}

struct aggregator *aggregator_free(struct aggregator *a)
{
	if (!a)
		return NULL;
	a->hooks = (struct aggregator_hooks){ 0 };
	while (a->collectors) {
		struct collector *c = a->collectors;

		aggregator_remove_collector(a, c);
		aggregator_release_parts(a, &c->parts);
	}
	/* first: the lane may be reading; it frees the jobs it holds */
	a->maps_lane = offload_free(a->maps_lane);
	agg_free_queued_probes(a);
	for (size_t i = 0; i < a->n_procs; i++) {
		a->procs[i]->maps_job = NULL;
		a->procs[i]->probe_job = a->procs[i]->late_job = NULL;
		agg_process_free(a, a->procs[i]);
	}
	agg_offcpu_free(a);
	free(a->procs);
	free(a->due_s);
	owner_tally_done(&a->owners);
	u64map_done(&a->by_pid);
	stacktab_free(a->stacks);
	free(a);
	return NULL;
}

void aggregator_scale_periods(struct aggregator *a, uint64_t num, uint64_t den)
{
	if (num == den || !num || !den)
		return;
	for (size_t i = 0; i < a->n_procs; i++) {
		struct process *p = a->procs[i];
		size_t before = p->history.bytes;

		if (history_scale_periods(&p->history, a->stacks, num, den, &a->scale_rng) < 0) {
			/* no memory to write it again: what it held is dropped, counted */
			struct history_dropped d = { 0 };

			while (history_drop_oldest(&p->history, a->stacks, &d))
				;
			a->stats.windows_evicted += d.windows;
			for (int k = 0; k < PROFILE_KINDS; k++)
				a->stats.values_evicted[k] += d.values[k];
		}
		a->history_bytes += p->history.bytes - before;
		agg_due_now(a, p);
		p->total_samples = profile_scale_value(p->total_samples, num, den, &a->scale_rng);
		p->owner_samples = MIN(profile_scale_value(p->owner_samples, num, den, &a->scale_rng),
				       p->total_samples);
		for (size_t b = 0; b < AGG_BUCKETS; b++)
			p->bucket_samples[b] = (uint32_t)MIN(
				profile_scale_value(p->bucket_samples[b], num, den, &a->scale_rng),
				(uint64_t)UINT32_MAX);
	}
	for (struct collector *c = a->collectors; c; c = c->next) {
		a->collector_bytes -= c->bytes;
		c->bytes = 0;
		for (size_t i = 0; i < c->parts.n; i++) {
			profile_scale_periods(&c->parts.parts[i].prof, a->stacks, num, den, &a->scale_rng);
			c->bytes += profile_memory(&c->parts.parts[i].prof);
		}
		a->collector_bytes += c->bytes;
	}
	agg_enforce_memory(a, NULL); /* larger values take more room */
}

uint64_t aggregator_revisit(struct aggregator *a, uint64_t now_ns)
{
	uint64_t next = 0;

	for (size_t i = 0; i < a->n_procs; i++) {
		struct process *p = a->procs[i];

		if (!p->revisit_ns || p->exited || !a->hooks.revisit)
			continue;
		if (p->revisit_ns <= now_ns) {
			p->revisit_ns = 0;
			a->hooks.revisit(a->hooks.userdata, p);
		}
		if (p->revisit_ns && (!next || p->revisit_ns < next))
			next = p->revisit_ns;
	}
	return next;
}

void aggregator_maintain(struct aggregator *a, uint64_t now_ns)
{
	uint64_t now_s = now_ns / NSEC_PER_SEC;

	/* A probe out for long is given up on here too: a process whose
	 * samples all wait for it may send no other.  Before the pass: the
	 * samples that waited go in, which may evict processes. */
	agg_give_up_late_probes(a, now_ns);
	agg_give_up_late_frames(a, now_ns);
	for (size_t i = 0; i < a->n_procs;) {
		struct process *p;
		struct history_dropped d = { 0 };
		size_t before;

		if (a->due_s[i] > now_s) {
			i++;
			continue;
		}
		p = a->procs[i];
		before = p->history.bytes;
		history_maintain(&p->history, a->stacks, now_s, a->limits.retention_s, &d);
		a->history_bytes -= before - p->history.bytes;
		a->stats.windows_expired += d.windows;
		a->stats.samples_expired += kind_samples_of(d.values);
		/* An exited process stays while it has data to answer with. */
		/* Nor while samples of its wait for its files to be
		 * identified: at most MODPROBE_WAIT_NS more. */
		/* Nor while they wait for their interpreter frames: at most
		 * FRAMES_WAIT_NS more. */
		if (p->exited && history_empty(&p->history) && !p->pins && !p->probe_job &&
		    !(p->n_parked && p->frames_wait_ns)) {
			a->stats.processes_expired++;
			agg_remove_process(a, i);
			continue;
		}
		a->due_s[i] = history_due_s(&p->history, a->limits.retention_s);
		i++;
	}
	agg_enforce_memory(a, NULL);
}

struct process *aggregator_restore_process(struct aggregator *a, const struct process_restored *r)
{
	const struct perfd_event_header h = { .tgid = r->pid, .start_time_ns = r->start_time_ns };
	_cleanup_close_ int dirfd = -1;
	struct process *p = agg_lookup(a, r->pid, r->start_time_ns);
	bool known = p != NULL;

	if (!p) {
		p = agg_process_add(a, &h, (uint32_t)r->page_size, r->kthread);
		if (!p)
			return NULL;
	}
	a->process_bytes -= agg_process_bytes(p);
	memcpy(p->comm, r->comm, sizeof(p->comm));
	p->comm[PERFD_TASK_COMM_LEN - 1] = 0;
	/* its owner as of its newest sample written (an earlier record does
	 * not undo a later one, nor what /proc said of a running process),
	 * and what that owner may count of it: ps's total_samples to a
	 * non-root asker */
	if (!known || r->last_sample_ns >= p->owner_ns)
		agg_set_owner(p, r->owner_uid, r->last_sample_ns);
	if (p->owner_uid == r->owner_uid)
		p->owner_samples = MAX(p->owner_samples, r->owner_samples);
	p->ns_pid = r->ns_pid;
	free(p->cgroup);
	p->cgroup = r->cgroup ? strdup(r->cgroup) : NULL;
	snprintf(p->runtime, sizeof(p->runtime), "%s", r->runtime ? r->runtime : "");
	p->exec_ns = r->exec_ns;
	if (!known || r->first_sample_ns < p->first_sample_ns)
		p->first_sample_ns = r->first_sample_ns;
	p->last_sample_ns = MAX(p->last_sample_ns, r->last_sample_ns);
	p->total_samples = MAX(p->total_samples, r->total_samples);
	p->page_size = r->page_size;
	if (r->peak_rss_bytes >= p->peak_rss_bytes) {
		p->peak_rss_bytes = r->peak_rss_bytes;
		p->peak_rss_ns = r->peak_rss_ns;
	}
	p->hiwater_rss_bytes = MAX(p->hiwater_rss_bytes, r->hiwater_rss_bytes);
	p->memory_sampled_bytes = MAX(p->memory_sampled_bytes, r->memory_sampled_bytes);
	a->process_bytes += agg_process_bytes(p);
	if (known)
		return p;
	/* Still running: who it is now, as for a process seen for the first
	 * time; its maps at its first sample with a stack, as for one seen
	 * only in RSS records (agg_read_identity_and_maps): reading every live
	 * process's at once had the unwinder build and describe tables for
	 * all of them in one burst, the loop deaf for seconds.  Else it is
	 * over. */
	if (!p->kthread && agg_open_proc(p, &dirfd) == 0)
		agg_read_identity_and_maps(a, p, dirfd, true, false);
	else if (p->kthread && procfs_open_pid(p->pid, p->start_time_ns, &dirfd) == 0)
		;
	else
		agg_mark_exited(a, p);
	return p;
}

int aggregator_restore_window(struct aggregator *a, struct process *p,
			      const struct history_restored *w)
{
	size_t before = p->history.bytes;
	int r = history_restore(&p->history, a->stacks, w);

	a->history_bytes += p->history.bytes - before;
	if (r == 0) {
		p->persisted_end_s = MAX(p->persisted_end_s, w->start_s + w->span_s);
		agg_due_now(a, p);
	}
	return r;
}

void aggregator_restored(struct aggregator *a, uint64_t now_ns)
{
	aggregator_maintain(a, now_ns);
}

void aggregator_set_restored_table_bytes(struct aggregator *a, size_t bytes)
{
	a->restored_table_bytes = bytes;
}

void aggregator_mark_modules(const struct aggregator *a, struct module_set *used)
{
	for (size_t i = 0; i < a->n_procs; i++) {
		const struct process *p = a->procs[i];

		if (p->exited)
			continue; /* only its stacks' modules matter now */
		for (size_t j = 0; p->maps && j < p->maps->n; j++)
			module_set_add(used, p->map_modules[j]);
		module_set_add(used, p->jit_module);
	}
	stacktab_mark_modules(a->stacks, used);
}

void aggregator_forget_modules(struct aggregator *a, const struct module_set *used)
{
	for (size_t i = 0; i < a->n_procs; i++) {
		struct process *p = a->procs[i];

		if (!p->exited)
			continue;
		for (size_t j = 0; p->maps && j < p->maps->n; j++)
			if (!module_set_has(used, p->map_modules[j]))
				p->map_modules[j] = MODULE_NONE;
		if (!module_set_has(used, p->jit_module))
			p->jit_module = 0;
	}
}

struct stacktab *aggregator_stacks(struct aggregator *a)
{
	return a->stacks;
}

uint64_t aggregator_ns_per_tick(const struct aggregator *a)
{
	return a->ns_per_tick;
}

void aggregator_get_stats(const struct aggregator *a, struct aggregator_stats *ret)
{
	*ret = a->stats;
	ret->module_probes_pending = a->n_probe_jobs;
	ret->offcpu_waiting = a->offcpu.by_tid.count;
	ret->windows = 0;
	for (size_t i = 0; i < a->n_procs; i++)
		ret->windows += a->procs[i]->history.n_windows;
	ret->processes = a->n_procs;
	ret->stacks = stacktab_count(a->stacks) - 1; /* not the placeholder */
	ret->frames = stacktab_frames(a->stacks) - 1;
	ret->history_bytes = a->history_bytes;
	ret->memory_bytes = agg_store_memory(a);
	ret->snapshot_bytes = a->collector_bytes;
	ret->restored_table_bytes = a->restored_table_bytes;
}
