/* SPDX-License-Identifier: MIT */
/*
 * proctab.c - the process table: processes found and added by pid and start
 * time, their memory, the exited ones, and eviction under the store's
 * caps, fairly between owners.
 * The store's design is aggregate.h's; what its files share,
 * aggregate_internal.h's.
 */
#include <stdlib.h>
#include <string.h>

#include "process/mapsread.h"
#include "process/procmaps.h"
#include "profile/aggregate_internal.h"

void agg_notify_gone(struct aggregator *a, const struct process *p)
{
	if (a->hooks.process_gone)
		a->hooks.process_gone(a->hooks.userdata, p);
}

/* What a process record holds besides its history: its maps, thread
 * names, cgroup.  Recomputed where those change (they change rarely). */
size_t agg_process_bytes(const struct process *p)
{
	size_t n = sizeof(*p) + u64map_memory(&p->thread_index) +
		   p->cap_threads * PERFD_TASK_COMM_LEN + (p->cgroup ? strlen(p->cgroup) + 1 : 0);

	if (p->maps)
		for (size_t j = 0; j < p->maps->n; j++)
			n += sizeof(struct procmap) + sizeof(uint16_t) + strlen(p->maps->maps[j].path) + 1;
	return n;
}

/* Drops the samples waiting for p's maps. */
static void drop_parked(struct aggregator *a, struct process *p)
{
	while (p->parked) {
		struct parked_sample *ps = p->parked;

		p->parked = ps->next;
		a->parked_bytes -= sizeof(*ps) + ps->size;
		free(ps);
	}
	p->parked_tail = &p->parked;
	p->n_parked = 0;
}

void agg_process_free(struct aggregator *a, struct process *p)
{
	/* a read still on the lane is dropped when it comes back */
	if (p->maps_job)
		p->maps_job->owner = NULL;
	agg_forget_probes(p);
	drop_parked(a, p);
	a->process_bytes -= agg_process_bytes(p);
	a->history_bytes -= p->history.bytes;
	history_release(&p->history, a->stacks);
	procmaps_free(p->maps);
	free(p->map_modules);
	free(p->cgroup);
	u64map_done(&p->thread_index);
	free(p->thread_comms);
	free(p);
}

static uint64_t history_samples(const struct process *p)
{
	struct history_iter it;
	struct history_window w;
	uint64_t n = 0;

	history_iter_init(&it, &p->history);
	while (history_iter_next(&it, &w))
		n += history_window_samples(&w);
	return n;
}

/* Has aggregator_maintain look at p at its next pass: its history may
 * have a window that falls due sooner, or p may be free to go. */
void agg_due_now(struct aggregator *a, const struct process *p)
{
	a->due_s[p->index] = 0;
}

/* p is over (it exited, or its pid is another process's now): it joins
 * the end of the exited list. */
void agg_mark_exited(struct aggregator *a, struct process *p)
{
	if (p->exited)
		return;
	p->exited = true;
	a->stats.processes_exited++;
	p->exited_prev = a->exited_tail;
	p->exited_next = NULL;
	if (a->exited_tail)
		a->exited_tail->exited_next = p;
	else
		a->exited_head = p;
	a->exited_tail = p;
	agg_due_now(a, p);
	agg_notify_gone(a, p);
}

/* Removes procs[index] from the store and frees it. */
void agg_remove_process(struct aggregator *a, size_t index)
{
	struct process *p = a->procs[index];
	uint64_t *cur = u64map_get(&a->by_pid, p->pid);

	if (cur && *cur == (uintptr_t)p)
		u64map_remove(&a->by_pid, p->pid);
	if (p->exited) {
		a->stats.processes_exited--;
		*(p->exited_prev ? &p->exited_prev->exited_next : &a->exited_head) = p->exited_next;
		*(p->exited_next ? &p->exited_next->exited_prev : &a->exited_tail) = p->exited_prev;
	}
	a->procs[index] = a->procs[--a->n_procs];
	a->due_s[index] = a->due_s[a->n_procs];
	a->procs[index]->index = index;
	if (!p->exited)
		agg_notify_gone(a, p); /* an exited one was reported at its exit */
	agg_process_free(a, p);
}

static void evict(struct aggregator *a, size_t index)
{
	struct process *p = a->procs[index];

	a->stats.samples_evicted += history_samples(p);
	a->stats.processes_evicted++;
	agg_remove_process(a, index);
}

/* Whether p is owner's (NULL: anyone's). */
static bool owned_by(const struct process *p, const uint32_t *owner)
{
	return !owner || p->owner_uid == *owner;
}

/* Evicts the coldest process of owner (NULL: of anyone) other than keep:
 * the one that exited first (the head of the exited list, past those
 * pinned), else the live one sampled longest ago.  Returns false when
 * there is none that may go. */
static bool evict_coldest(struct aggregator *a, const struct process *keep, const uint32_t *owner)
{
	size_t best = SIZE_MAX;

	for (const struct process *p = a->exited_head; p; p = p->exited_next)
		if (p != keep && !p->pins && owned_by(p, owner)) {
			evict(a, p->index);
			return true;
		}
	for (size_t i = 0; i < a->n_procs; i++) {
		const struct process *p = a->procs[i];

		if (p == keep || p->pins > 0 || p->exited || !owned_by(p, owner))
			continue;
		if (best == SIZE_MAX || p->last_sample_ns < a->procs[best]->last_sample_ns)
			best = i;
	}
	if (best == SIZE_MAX)
		return false;
	evict(a, best);
	return true;
}

/* Everything the store holds, as the memory cap counts it: the snapshots
 * collecting and the names of restored frames too. */
size_t agg_store_memory(const struct aggregator *a)
{
	return sizeof(*a) + a->cap_procs * (sizeof(void *) + sizeof(uint64_t)) + a->history_bytes +
	       stacktab_memory(a->stacks) + a->process_bytes + u64map_memory(&a->by_pid) +
	       a->collector_bytes + a->restored_table_bytes + a->parked_bytes + a->offcpu.bytes;
}

/* Drops the oldest window of owner's processes (NULL: of all).  Returns
 * false when none has one. */
static bool drop_oldest_window(struct aggregator *a, const uint32_t *owner)
{
	struct history_dropped d = { 0 };
	struct process *oldest = NULL;
	size_t before;

	for (size_t i = 0; i < a->n_procs; i++)
		if (owned_by(a->procs[i], owner) &&
		    (!oldest || history_oldest_s(&a->procs[i]->history) <
					history_oldest_s(&oldest->history)))
			oldest = a->procs[i];
	if (!oldest || history_empty(&oldest->history))
		return false;
	before = oldest->history.bytes;
	(void)history_drop_oldest(&oldest->history, a->stacks, &d);
	a->history_bytes -= before - oldest->history.bytes;
	agg_due_now(a, oldest); /* an exited process may have nothing left */
	a->stats.windows_evicted += d.windows;
	for (int k = 0; k < PROFILE_KINDS; k++)
		a->stats.values_evicted[k] += d.values[k];
	a->stats.samples_evicted += kind_samples_of(d.values);
	return true;
}

/* One step of eviction for want of m (memory, or a slot for a process or
 * a stack): from the owner owners.h chooses, with keep's owner as the one
 * admitting (keep NULL: nobody in particular), its oldest window (not for
 * a process slot) or else its coldest process, never keep.  An owner with
 * nothing that may go is passed over; when the owners cannot be counted
 * (no memory), the oldest of all goes, as it would without owners.
 * Returns false when nothing may go. */
bool agg_evict_fairly(struct aggregator *a, enum owner_measure m, const struct process *keep,
		      uint64_t *cause)
{
	struct owner_use *victim;
	bool own;

	owner_tally_reset(&a->owners);
	for (size_t i = 0; i < a->n_procs; i++)
		if (owner_tally_add(&a->owners, a->procs[i]->owner_uid,
				    sizeof(struct process) + a->procs[i]->history.bytes) < 0) {
			if ((m == OWNER_BYTES && drop_oldest_window(a, NULL)) ||
			    evict_coldest(a, keep, NULL)) {
				(*cause)++;
				return true;
			}
			return false;
		}
	while ((victim = owner_tally_victim(&a->owners, m, keep ? &keep->owner_uid : NULL, &own))) {
		uint32_t owner = victim->owner;

		if ((m == OWNER_BYTES && drop_oldest_window(a, &owner)) ||
		    evict_coldest(a, keep, &owner)) {
			(*cause)++;
			(*(own ? &a->stats.evictions_own : &a->stats.evictions_heaviest))++;
			return true;
		}
		victim->exhausted = true;
	}
	return false;
}

/* Keeps the store under its memory limit, fairly (agg_evict_fairly; keep is
 * the process whose data is being admitted, NULL for none).  Goes to 15/16
 * of the limit, so that it does not run again at the next sample. */
void agg_enforce_memory(struct aggregator *a, const struct process *keep)
{
	size_t limit = a->limits.max_memory_bytes;

	if (!limit || agg_store_memory(a) <= limit)
		return;
	while (agg_store_memory(a) > limit - limit / 16)
		if (!agg_evict_fairly(a, OWNER_BYTES, keep, &a->stats.evictions_memory))
			break;
}

/* A new process seen in a record: h names it, comm is the thread's as BPF
 * read it (NULL: none), kthread when it has no mm, maps when the record
 * has a stack to name.  A sample's comm, its main thread's, names the
 * process; an RSS record's may be from before an exec the daemon has not
 * read yet (a child between fork and exec has its parent's), so /proc
 * names such a process, and the record only one already gone. */
/* A new process record for h's process in the store, nothing read of it
 * yet; an older incarnation of its pid is over.  NULL when the store has
 * no room and nothing evictable, or out of memory. */
struct process *agg_process_add(struct aggregator *a, const struct perfd_event_header *h,
				uint32_t page_size, bool kthread)
{
	struct process *p;
	uint64_t *slot;

	if (a->n_procs >= a->limits.max_processes &&
	    !agg_evict_fairly(a, OWNER_PROCESSES, NULL, &a->stats.evictions_process_limit))
		return NULL;
	if (a->n_procs == a->cap_procs) {
		size_t cap = a->cap_procs ? a->cap_procs * 2 : 256;
		struct process **procs = realloc(a->procs, cap * sizeof(*procs));
		uint64_t *due;

		if (!procs)
			return NULL;
		a->procs = procs;
		due = realloc(a->due_s, cap * sizeof(*due));
		if (!due)
			return NULL;
		a->due_s = due;
		a->cap_procs = cap;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	slot = u64map_upsert(&a->by_pid, h->tgid, NULL);
	if (!slot) {
		free(p);
		return NULL;
	}
	if (*slot) {
		/* The pid was reused: the old process is over. */
		struct process *old = (struct process *)(uintptr_t)*slot;

		*slot = 0;
		agg_mark_exited(a, old);
	}
	*slot = (uintptr_t)p;
	p->index = a->n_procs;
	a->due_s[a->n_procs] = 0;
	a->procs[a->n_procs++] = p;

	p->pid = h->tgid;
	p->start_time_ns = h->start_time_ns;
	p->page_size = page_size;
	p->first_sample_ns = h->timestamp_ns;
	history_init(&p->history);
	u64map_init(&p->thread_index);
	a->process_bytes += agg_process_bytes(p);
	p->kthread = kthread;
	return p;
}

static struct process *process_new(struct aggregator *a, const struct perfd_event_header *h,
				   const char *comm, uint32_t page_size, bool kthread, bool maps)
{
	struct process *p = agg_process_add(a, h, page_size, kthread);

	if (!p)
		return NULL;
	agg_read_new_process(a, p, comm, comm && h->tid == h->tgid && h->kind == PERFD_EVENT_SAMPLE,
			     maps);
	/* a tree's member by its parent, when no fork record said so */
	agg_adopt(a, p->pid, p->start_time_ns, p->ppid, 0);
	return p;
}

struct process *agg_lookup(struct aggregator *a, uint32_t tgid, uint64_t start_ns)
{
	uint64_t *slot = u64map_get(&a->by_pid, tgid);
	struct process *p = slot ? (struct process *)(uintptr_t)*slot : NULL;

	return p && p->start_time_ns == start_ns ? p : NULL;
}

/* The process of a record, new or known (see process_new). */
struct process *agg_process_for(struct aggregator *a, const struct perfd_event_header *h,
				const char *comm, uint32_t page_size, bool kthread, bool maps)
{
	struct process *p = agg_lookup(a, h->tgid, h->start_time_ns);
	uint64_t *slot;

	if (p)
		return p;
	slot = u64map_get(&a->by_pid, h->tgid);
	if (slot) {
		/* The pid was reused: the old process is over. */
		struct process *old = (struct process *)(uintptr_t)*slot;

		agg_mark_exited(a, old);
		u64map_remove(&a->by_pid, h->tgid);
	}
	return process_new(a, h, comm, page_size, kthread, maps);
}

void aggregator_foreach_process(struct aggregator *a,
				void (*fn)(struct process *p, void *userdata),
				void *userdata)
{
	for (size_t i = 0; i < a->n_procs; i++)
		fn(a->procs[i], userdata);
}

struct process *aggregator_find_process(struct aggregator *a, uint32_t pid)
{
	uint64_t *slot = u64map_get(&a->by_pid, pid);

	return slot ? (struct process *)(uintptr_t)*slot : NULL;
}

uint64_t process_window_samples(const struct process *p, uint64_t first_second,
				uint64_t end_second, const struct owner_filter *owners)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < AGG_BUCKETS; i++)
		if (p->bucket_second[i] >= first_second && p->bucket_second[i] < end_second &&
		    owner_filter_takes(owners, p->bucket_owner[i]))
			sum += p->bucket_samples[i];
	return sum;
}

uint64_t process_rss_bytes(const struct process *p)
{
	return (p->rss_pages[PERFD_RSS_FILE] + p->rss_pages[PERFD_RSS_ANON] +
		p->rss_pages[PERFD_RSS_SHMEM]) * p->page_size;
}

uint64_t process_peak_rss_bytes(const struct process *p)
{
	return MAX(MAX(p->peak_rss_bytes, p->hiwater_rss_bytes), process_rss_bytes(p));
}
