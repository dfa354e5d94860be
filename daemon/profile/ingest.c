/* SPDX-License-Identifier: MIT */
/*
 * ingest.c - one record into the store: a sample normalized (user frames to
 * module and offset, parked while its maps are read), interned and
 * added to its process's history and to the collectors; exits and forks;
 * the threads' names and the RSS readings.
 * The store's design is aggregate.h's; what its files share,
 * aggregate_internal.h's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/kindtab.h"
#include "process/procmaps.h"
#include "profile/aggregate_internal.h"
#include "profile/frame.h"

/* Before the user frames of s (ips[kd..kd+ud)) are named: re-reads p's
 * maps when one of them misses and a re-read is due.  Returns whether s
 * must wait for them (a read is on the lane); a read done at once that
 * explained the address starts the waits over. */
static bool wait_for_maps(struct aggregator *a, struct process *p, const struct perfd_sample *s,
			  uint32_t kd, uint32_t ud)
{
	if (a->settled)
		return false;
	if (p->maps_job)
		return true;
	/* its files' server does not answer: wait no more */
	(void)agg_probes_late(a, p, s->hdr.timestamp_ns);
	for (uint32_t i = 0; i < ud; i++) {
		uint64_t addr = s->ips[kd + i] - (i > 0);

		if (!agg_maps_miss(p, addr))
			continue;
		/* its file is being identified on the lane */
		if (p->probe_job)
			return true;
		if (!agg_reread_maps_if_due(a, p, s->hdr.timestamp_ns))
			return false;
		if (p->maps_job || (p->probe_job && agg_maps_miss(p, addr)))
			return true;
		if (!agg_maps_miss(p, addr))
			p->maps_reread_wait_ns = 0;
		return false;
	}
	return false;
}

/* p's samples have waited FRAMES_WAIT_NS for their interpreter frames:
 * they wait no more until the reads are back (aggregator_frames_read). */
static void give_up_frames(struct aggregator *a, struct process *p)
{
	p->frames_late = true;
	a->stats.frames_waits_late++;
}

/* Before the interpreter frames of s are named: whether the hook is
 * reading them (hooks.frames_wait) and s must wait, unless p's samples
 * have waited FRAMES_WAIT_NS already (the read is on a file system that
 * does not answer: they go in unread, and wait again once it is back). */
static bool wait_for_frames(struct aggregator *a, struct process *p, const struct perfd_sample *s)
{
	uint64_t now;

	/* asked even when s will not wait: what is read names the samples
	 * after it */
	if (s->python_depth == 0 || !a->hooks.frames_wait ||
	    !a->hooks.frames_wait(a->hooks.userdata, p, s) || a->settled)
		return false;
	now = now_monotonic_ns();
	if (!p->frames_late && p->frames_wait_ns && now - p->frames_wait_ns >= FRAMES_WAIT_NS)
		give_up_frames(a, p);
	if (p->frames_late)
		return false;
	if (!p->frames_wait_ns)
		p->frames_wait_ns = now;
	return true;
}

/* Keeps a copy of the record s aside until p's maps, or its interpreter
 * frames, are read (aggregate.h), counting it in *waited: a sample, or
 * the exit that follows samples waiting.  Returns false when it cannot
 * wait: past the bounds, or out of memory. */
static bool park(struct aggregator *a, struct process *p, const void *s, size_t size,
		 uint64_t *waited)
{
	struct parked_sample *ps;

	if (p->n_parked >= AGG_PARKED_PER_PROCESS ||
	    a->parked_bytes + sizeof(*ps) + size > AGG_PARKED_BYTES ||
	    !(ps = malloc(sizeof(*ps) + size))) {
		a->stats.samples_not_waiting++;
		return false;
	}
	ps->next = NULL;
	ps->size = size;
	memcpy(ps->record, s, size);
	if (!p->parked)
		p->parked_tail = &p->parked;
	*p->parked_tail = ps;
	p->parked_tail = &ps->next;
	p->n_parked++;
	a->parked_bytes += sizeof(*ps) + size;
	(*waited)++;
	return true;
}

/* Maps one user address of p to a frame: (binary, file offset) when it
 * lies in a file mapping, the raw address otherwise (wait_for_maps has
 * re-read the maps if that was due). */
uint64_t agg_user_frame(struct aggregator *a, struct process *p,
			uint64_t addr, uint64_t now_ns)
{
	const struct procmap *m = procmaps_find(p->maps, addr);
	size_t i;
	uint16_t *mod;

	if (!m || p->map_modules[m - p->maps->maps] == MODULE_NONE) {
		/* Anonymous code: JIT-compiled, named by the JIT's map.  A JIT
		 * may write its map only once it has compiled something.  (An
		 * address in no mapping has the maps read again, which look.) */
		if (!p->jit_module && m && procmap_fileless(m) &&
		    now_ns > p->jit_checked_ns + JIT_MAP_RECHECK_NS)
			agg_find_jit_map(a, p);
		if (!p->jit_module)
			return frame_make(FRAME_MODULE_NONE, addr);
		/* its map parsed on the lane before a query names it */
		a->modules.note_jit_frame(a->modules.ctx, frame_make(p->jit_module, addr));
		return frame_make(p->jit_module, addr);
	}

	i = m - p->maps->maps;
	mod = &p->map_modules[i];
	return frame_make(*mod, addr - m->start + m->pgoff);
}

static void count_bucket(struct process *p, uint64_t ts_ns, uint32_t owner, uint64_t samples)
{
	uint64_t second = ts_ns / NSEC_PER_SEC;
	size_t i = second % AGG_BUCKETS;

	if (p->bucket_second[i] != second) {
		p->bucket_second[i] = second;
		p->bucket_samples[i] = 0;
		p->bucket_owner[i] = owner;
	}
	p->bucket_samples[i] += samples;
	p->bucket_owner[i] = history_owner_meet(p->bucket_owner[i], owner);
}

/* Returns the id of the stack holding one reference for the caller, who
 * drops it once the profiles have taken theirs. */
static uint32_t intern_stack(struct aggregator *a, struct process *p,
			     const uint64_t *frames, uint16_t depth,
			     uint16_t kernel_depth)
{
	uint32_t id;
	int r;

	for (int tries = 0;; tries++) {
		r = stacktab_intern(a->stacks, frames, depth, kernel_depth, &id);
		if (r == 0)
			return id;
		/* p's owner's, when past its share, else the heaviest owner's:
		 * oldest windows first, then the coldest processes */
		if (r != -ENOSPC || tries >= EVICTIONS_PER_SAMPLE ||
		    !agg_evict_fairly(a, OWNER_BYTES, p, &a->stats.evictions_stack_limit))
			break;
	}
	a->stats.stack_limit++;
	stacktab_ref(a->stacks, a->stack_limit_id);
	return a->stack_limit_id;
}

static void add_thread(struct process *p, const struct perfd_sample *s);

/* Keeps the comm of each thread, the latest it was sampled with (a thread
 * names itself after it starts: prctl, pthread_setname_np). */
static void remember_thread(struct aggregator *a, struct process *p, const struct perfd_sample *s)
{
	uint64_t *known = u64map_get(&p->thread_index, s->hdr.tid);

	if (known) {
		char *comm = p->thread_comms[*known - 1];

		if (strncmp(comm, s->comm, PERFD_TASK_COMM_LEN - 1) != 0) {
			memcpy(comm, s->comm, PERFD_TASK_COMM_LEN);
			comm[PERFD_TASK_COMM_LEN - 1] = '\0';
		}
		return;
	}
	if (p->n_threads >= PROCESS_MAX_THREADS)
		return;
	a->process_bytes -= agg_process_bytes(p);
	add_thread(p, s);
	a->process_bytes += agg_process_bytes(p);
}

static void add_thread(struct process *p, const struct perfd_sample *s)
{
	bool added;
	uint64_t *slot;

	slot = u64map_upsert(&p->thread_index, s->hdr.tid, &added);
	if (!slot)
		return;
	if (p->n_threads == p->cap_threads) {
		size_t cap = p->cap_threads ? 2 * p->cap_threads : 4;
		char(*comms)[PERFD_TASK_COMM_LEN] = realloc(p->thread_comms, cap * sizeof(*comms));

		if (!comms) {
			u64map_remove(&p->thread_index, s->hdr.tid);
			return;
		}
		p->thread_comms = comms;
		p->cap_threads = cap;
	}
	memcpy(p->thread_comms[p->n_threads], s->comm, PERFD_TASK_COMM_LEN);
	p->thread_comms[p->n_threads][PERFD_TASK_COMM_LEN - 1] = '\0';
	*slot = ++p->n_threads;
}

const char *process_thread_comm(const struct process *p, uint32_t tid)
{
	uint64_t *slot = u64map_get(&p->thread_index, tid);

	return slot ? p->thread_comms[*slot - 1] : NULL;
}

/* Books what adding to p's history did: its bytes, and a new window,
 * which can fall due before anything it held. */
static void history_added(struct aggregator *a, struct process *p, size_t bytes_before,
			  size_t windows_before)
{
	a->history_bytes += p->history.bytes - bytes_before;
	if (p->history.n_windows != windows_before)
		agg_due_now(a, p);
}

/* Takes an RSS reading of p (from a sample or an RSS record): its
 * current counters, its peak, and its history's timeline. */
static void note_rss(struct aggregator *a, struct process *p, uint64_t ts_ns,
		     const __u64 pages[PERFD_RSS_COUNTERS], uint64_t hiwater_pages, uint32_t page_size)
{
	uint64_t total = pages[PERFD_RSS_FILE] + pages[PERFD_RSS_ANON] + pages[PERFD_RSS_SHMEM];
	size_t before = p->history.bytes, windows = p->history.n_windows;

	/* taken before its exec, drained after it: the old image's */
	if (ts_ns < p->exec_ns)
		return;
	memcpy(p->rss_pages, pages, sizeof(p->rss_pages));
	p->page_size = page_size;
	p->rss_ns = ts_ns;
	if (total * page_size >= p->peak_rss_bytes) {
		p->peak_rss_bytes = total * page_size;
		p->peak_rss_ns = ts_ns;
	}
	/* the kernel's high-water mark, updated lazily, may know a higher one
	 * from before perfd saw the process */
	p->hiwater_rss_bytes = MAX(p->hiwater_rss_bytes, hiwater_pages * page_size);
	(void)history_note_rss(&p->history, ts_ns, p->owner_uid, pages, page_size);
	history_added(a, p, before, windows);
}

/* Ingests the sample s of size bytes: of its process, found or created
 * here, or, for one that waited for its maps (park), of waited. */
int agg_ingest_sample(struct aggregator *a, const struct perfd_sample *s, size_t size,
		      struct process *waited)
{
	/* BPF's value_kind is the profile's kind (perfd/kinds.h), checked
	 * first of all */
	enum profile_kind kind;
	const struct kind_info *ki;
	/* A CPU sample stands for s->value mean periods: 1, or more for
	 * the jittered tick that passed several blocks' targets. */
	uint64_t value = s->value;
	/* the specials: a wait's leaf, kernel error, user error; and the last
	 * two slots, kept for the root marker and the GIL's state whether
	 * there are any or not */
	uint64_t frames[2 * PERFD_MAX_STACK_DEPTH + PERFD_MAX_PYTHON_DEPTH + 5];
	const size_t frames_cap = ELEMENTSOF(frames) - 2; /* for all but the roots */
	bool pending = s->flags & PERFD_SAMPLE_F_UNWIND_PENDING;
	/* A tick charged to the task a context switch took off the CPU
	 * comes without a stack and with the RSS of the task switched in. */
	bool switched = s->flags & PERFD_SAMPLE_F_SWITCHED;
	/* at most one root marker: a switched tick has nothing but its
	 * marker; a stack that did not reach its root says so, pending
	 * naming why */
	uint64_t root_special = switched ? FRAME_SPECIAL_CONTEXT_SWITCH :
				!sample_user_unrooted(s) ? 0 :
				pending ? FRAME_SPECIAL_UNWIND_PENDING : FRAME_SPECIAL_TRUNCATED;
	uint32_t kd = s->kernel_depth > 0 ? (uint32_t)s->kernel_depth : 0;
	uint32_t ud = s->user_depth > 0 ? (uint32_t)s->user_depth : 0;
	uint16_t n = 0, kernel_n;
	struct process *p;
	uint64_t key, cpu;
	size_t before, windows;
	uint32_t id;
	int r;

	if (s->value_kind >= PROFILE_KINDS)
		return -EINVAL;
	kind = (enum profile_kind)s->value_kind;
	ki = &kind_infos[kind];
	if (kd > PERFD_MAX_STACK_DEPTH || ud > PERFD_MAX_STACK_DEPTH ||
	    s->python_depth > PERFD_MAX_PYTHON_DEPTH || ki->counts == PERFD_KIND_COUNTS_NONE ||
	    ki->counts == PERFD_KIND_COUNTS_TIME ||
	    (ki->period == PERFD_KIND_PERIOD_PERIODS && (value == 0 || value > PERFD_CPU_VALUE_MAX)) ||
	    size < sizeof(*s) + (kd + ud) * sizeof(uint64_t) +
			   s->python_depth * sizeof(struct perfd_python_frame))
		return -EINVAL;

	cpu = ki->counts == PERFD_KIND_COUNTS_CPU ? value : 0;
	if (waited) {
		p = waited;
	} else {
		a->stats.samples += cpu;
		p = agg_process_for(a, &s->hdr, s->comm, s->page_size, s->flags & PERFD_SAMPLE_F_KTHREAD,
				    !switched);
		if (!p) {
			/* no room and nothing evictable, or out of memory */
			a->stats.samples_evicted += cpu;
			return 0;
		}
		if (ud > 0 && wait_for_maps(a, p, s, kd, ud) &&
		    park(a, p, s, size, &a->stats.samples_waited_for_maps))
			return 0;
	}
	/* one that waited for its maps may now wait for its frames */
	if (wait_for_frames(a, p, s) && park(a, p, s, size, &a->stats.samples_waited_for_frames))
		return 0;

	/* who may see it now: the newest sample says (one drained late
	 * does not undo a change) */
	if (s->hdr.timestamp_ns >= p->owner_ns) {
		agg_set_owner(p, s->owner_uid, s->hdr.timestamp_ns);
	}
	/* an off-CPU block's leaf: why it waited (offcpu.c) */
	if (ki->counts == PERFD_KIND_COUNTS_WAIT)
		frames[n++] = frame_make(FRAME_MODULE_SPECIAL,
					 FRAME_SPECIAL_WAIT + sample_wait_class(s->flags));
	if (s->kernel_depth < 0) {
		a->stats.kernel_stack_errors++;
		frames[n++] = frame_make(FRAME_MODULE_SPECIAL, FRAME_SPECIAL_KSTACK_ERROR);
	}
	/* Every frame but the first of each part is a return address: step
	 * back into the call instruction so it names the caller's line. */
	{
		/* the producer's own frames go (a memory sample's program
		 * and bpf_trace_run2()) */
		uint32_t skip = kd > ki->kernel_skip ? ki->kernel_skip : 0;

		for (uint32_t i = skip; i < kd; i++)
			frames[n++] = frame_make(FRAME_MODULE_KERNEL, s->ips[i] - (i > skip));
	}
	kernel_n = n;
	if (s->user_depth < 0) {
		a->stats.user_stack_errors++;
		frames[n++] = frame_make(FRAME_MODULE_SPECIAL, FRAME_SPECIAL_USTACK_ERROR);
	}
	for (uint32_t i = 0; i < ud; i++)
		frames[n++] = agg_user_frame(a, p, s->ips[kd + i] - (i > 0),
					     s->hdr.timestamp_ns);
	/* BPF met code without tables for it, or the process has none (they
	 * were dropped at an exec whose event was lost, or could not be
	 * uploaded): describing its maps again is what brings them back.
	 * Addresses outside the maps also re-read them (wait_for_maps);
	 * this sample's are in them, so it need not wait for the read. */
	if ((s->flags & PERFD_SAMPLE_F_NEEDS_MAPS) && p->maps)
		(void)agg_reread_maps_if_due(a, p, s->hdr.timestamp_ns);
	/* Only samples that carry interpreter frames have anything to merge:
	 * the others (nearly all) skip the hook. */
	if (a->hooks.rewrite_user_frames && s->python_depth > 0)
		n = kernel_n + (uint16_t)a->hooks.rewrite_user_frames(
				       a->hooks.userdata, p, s, frames + kernel_n, n - kernel_n,
				       frames_cap - kernel_n);
	/* A stack cut short (where a table was not ready yet, where the walk
	 * found no way on, or at the depth limit) says so at its root, rather
	 * than pass for one whose caller is its last frame. */
	if (root_special)
		frames[n++] = frame_make(FRAME_MODULE_SPECIAL, root_special);
	/* A Python thread's stacks part at their root by its GIL: what
	 * it did holding it, waiting for it, and without it. */
	if (s->flags & PERFD_SAMPLE_F_GIL_KNOWN)
		frames[n++] = frame_make(FRAME_MODULE_SPECIAL, sample_gil_special(s->flags));

	id = intern_stack(a, p, frames, n, kernel_n);
	key = profile_key(id, s->hdr.tid, kind);
	before = p->history.bytes;
	windows = p->history.n_windows;
	r = history_add(&p->history, a->stacks, s->hdr.timestamp_ns, s->owner_uid, key, value);
	history_added(a, p, before, windows);
	if (r < 0) {
		stacktab_unref(a->stacks, id);
		a->stats.samples_evicted += cpu;
		return 0;
	}

	switch (ki->counts) {
	case PERFD_KIND_COUNTS_CPU:
		p->total_samples += value;
		if (s->owner_uid == p->owner_uid)
			p->owner_samples += value;
		p->last_sample_ns = s->hdr.timestamp_ns;
		count_bucket(p, s->hdr.timestamp_ns, s->owner_uid, value);
		break;
	case PERFD_KIND_COUNTS_MEMORY:
		a->stats.memory_samples++;
		p->memory_sampled_bytes += value;
		break;
	case PERFD_KIND_COUNTS_WAIT:
		a->stats.offcpu_ns += value;
		break;
	case PERFD_KIND_COUNTS_NONE: /* refused above */
	case PERFD_KIND_COUNTS_TIME:
		break;
	}
	remember_thread(a, p, s);
	if (s->hdr.tid == s->hdr.tgid) {
		memcpy(p->comm, s->comm, sizeof(p->comm));
		p->comm[PERFD_TASK_COMM_LEN - 1] = 0;
	}
	if (!(s->flags & PERFD_SAMPLE_F_KTHREAD) && !switched)
		note_rss(a, p, s->hdr.timestamp_ns, s->rss_pages, s->hiwater_rss_pages, s->page_size);
	agg_feed_collectors(a, p, s, key, value);
	stacktab_unref(a->stacks, id);
	agg_enforce_memory(a, p);
	return 0;
}

static void ingest_exit(struct aggregator *a, const struct perfd_exit *e, struct process *waited)
{
	struct process *p = waited ? waited : agg_lookup(a, e->hdr.tgid, e->hdr.start_time_ns);
	struct collector *c, *next;

	/* Its last samples wait for their interpreter frames (at most
	 * FRAMES_WAIT_NS): the exit goes after them, so that a snapshot of
	 * it ends with them, and the frames are named before the process
	 * is forgotten. */
	if (p && p->n_parked && p->frames_wait_ns && !p->frames_late && !a->settled &&
	    park(a, p, e, sizeof(*e), &a->stats.exits_waited))
		return;

	a->stats.exit_events++;
	if (p)
		agg_mark_exited(a, p);
	/* on_exit may remove the collector: keep the next one first */
	for (c = a->collectors; c; c = next) {
		next = c->next;
		if (c->sel.n_pids != 1 || c->sel.pids[0] != e->hdr.tgid || c->exited ||
		    (c->sel.start_ticks && e->hdr.start_time_ns / a->ns_per_tick != c->sel.start_ticks))
			continue;
		c->exited = true;
		c->exit_ns = e->hdr.timestamp_ns;
		if (c->on_exit)
			c->on_exit(c, c->userdata);
	}
}

/* A followed process forked (struct perfd_fork): the child's parent is
 * known from the record, whatever /proc will say (nothing, for a child
 * gone by then), and it joins the trees its parent is in. */
static void ingest_fork(struct aggregator *a, const struct perfd_fork *f)
{
	struct process *p = agg_process_for(a, &f->hdr, f->comm, f->page_size, false, false);

	if (p)
		p->ppid = f->parent_tgid;
	agg_adopt(a, f->hdr.tgid, f->hdr.start_time_ns, f->parent_tgid, f->parent_start_time_ns);
}

/* Ingests the samples that waited for p's maps, oldest first, with the
 * maps p has now. */
void agg_ingest_parked(struct aggregator *a, struct process *p)
{
	struct parked_sample *ps = p->parked;

	p->parked = NULL;
	p->parked_tail = &p->parked;
	p->n_parked = 0;
	p->pins++; /* not evicted while its own samples go in */
	while (ps) {
		struct parked_sample *next = ps->next;
		struct perfd_event_header h;

		a->parked_bytes -= sizeof(*ps) + ps->size;
		memcpy(&h, ps->record, sizeof(h));
		if (h.kind == PERFD_EVENT_EXIT)
			ingest_exit(a, (const struct perfd_exit *)ps->record, p);
		else
			(void)agg_ingest_sample(a, (const struct perfd_sample *)ps->record, ps->size,
						p);
		free(ps);
		ps = next;
	}
	p->pins--;
}

void aggregator_frames_read(struct aggregator *a, struct process *p)
{
	p->frames_wait_ns = 0;
	p->frames_late = false;
	/* those that wait for the maps too go in when the maps are read */
	if (p->n_parked && !p->maps_job && !p->probe_job)
		agg_ingest_parked(a, p);
}

void agg_give_up_late_frames(struct aggregator *a, uint64_t now_ns)
{
	struct late_one {
		uint32_t pid;
		uint64_t start_time_ns;
	} late[64];
	size_t n = 0;

	/* a copy: ingesting may evict processes, moving the rest */
	for (size_t i = 0; i < a->n_procs && n < ELEMENTSOF(late); i++) {
		const struct process *p = a->procs[i];

		if (p->n_parked && p->frames_wait_ns && !p->frames_late && now_ns >= p->frames_wait_ns &&
		    now_ns - p->frames_wait_ns >= FRAMES_WAIT_NS && !p->maps_job && !p->probe_job)
			late[n++] = (struct late_one){ p->pid, p->start_time_ns };
	}
	for (size_t i = 0; i < n; i++) {
		struct process *p = agg_lookup(a, late[i].pid, late[i].start_time_ns);

		if (!p || !p->n_parked)
			continue;
		give_up_frames(a, p);
		agg_ingest_parked(a, p);
	}
}

int aggregator_ingest(struct aggregator *a, const void *record, size_t size)
{
	const struct perfd_event_header *h = record;
	struct process *p;

	if (size < sizeof(*h))
		return -EINVAL;
	switch (h->kind) {
	case PERFD_EVENT_SAMPLE:
		if (size < sizeof(struct perfd_sample))
			return -EINVAL;
		/* an off-CPU block's stack waits for its end, and a tick
		 * charged to a task switched out takes that stack (offcpu.c) */
		if (((const struct perfd_sample *)record)->value_kind == PERFD_VALUE_OFFCPU)
			return agg_offcpu_begin(a, record, size);
		if (((const struct perfd_sample *)record)->flags & PERFD_SAMPLE_F_SWITCHED)
			return agg_offcpu_switched_tick(a, record, size);
		return agg_ingest_sample(a, record, size, NULL);
	case PERFD_EVENT_OFFCPU_END:
		if (size < sizeof(struct perfd_offcpu_end))
			return -EINVAL;
		return agg_offcpu_end(a, record);
	case PERFD_EVENT_EXIT:
		if (size < sizeof(struct perfd_exit))
			return -EINVAL;
		ingest_exit(a, record, NULL);
		return 0;
	case PERFD_EVENT_RSS: {
		const struct perfd_rss *r = record;

		if (size < sizeof(*r))
			return -EINVAL;
		a->stats.rss_updates++;
		p = agg_process_for(a, h, r->comm[0] ? r->comm : NULL, r->page_size, false, false);
		if (p)
			note_rss(a, p, h->timestamp_ns, r->rss_pages, r->hiwater_rss_pages,
				 r->page_size);
		return 0;
	}
	case PERFD_EVENT_FORK:
		if (size < sizeof(struct perfd_fork))
			return -EINVAL;
		ingest_fork(a, record);
		return 0;
	case PERFD_EVENT_EXEC: {
		const struct perfd_rss *r = record;

		if (size < sizeof(*r))
			return -EINVAL;
		p = agg_lookup(a, h->tgid, h->start_time_ns);
		if (!p && aggregator_follows(a, h->tgid, NULL)) {
			/* a process a tree follows (collect/sampler.h), never
			 * sampled: looked at now, its new maps (and runtime)
			 * included */
			p = agg_process_for(a, h, r->comm, r->page_size, false, true);
			if (p) {
				p->exec_ns = h->timestamp_ns;
				note_rss(a, p, h->timestamp_ns, r->rss_pages, r->hiwater_rss_pages,
					 r->page_size);
			}
		} else if (p) {
			_cleanup_close_ int dirfd = -1;

			/* what waits for the old image's maps or frames goes
			 * in first */
			agg_forget_waits(a, p);
			(void)agg_open_proc(p, &dirfd);
			/* Read the new image's maps now, for a process whose
			 * stacks are named (the event woke us): waiting for its
			 * next sample would leave it unwound without tables
			 * until then. */
			p->maps_reread_wait_ns = 0;
			p->jit_module = 0;
			p->jit_checked_ns = 0; /* the new image's JIT may write one at once */
			/* Its memory starts over: a child between fork and exec
			 * has its parent's mm, whose peak is not the new
			 * program's (the new mm's high-water mark starts over
			 * too); the trend starts after it (query_rss_trend). */
			p->exec_ns = h->timestamp_ns;
			p->peak_rss_bytes = p->peak_rss_ns = p->hiwater_rss_bytes = 0;
			note_rss(a, p, h->timestamp_ns, r->rss_pages, r->hiwater_rss_pages,
				 r->page_size);
			/* The old image is gone for those who described it
			 * (BPF dropped their entries at the exec), even when
			 * the new one maps the same files. */
			agg_notify_gone(a, p);
			/* its name first, from /proc: a process first seen
			 * between fork and exec (its copy-on-write faults) had
			 * its parent's, its samples from before the exec (read
			 * after it) have set it back, and its main thread may
			 * never run on a sampled tick.  Not the record's: it
			 * may be from an exec before the one /proc shows now.
			 * A process already gone keeps the name the record
			 * carries. */
			agg_read_comm(p, dirfd, r->comm);
			/* a followed process's new image is looked at now,
			 * sampled yet or not (its runtime: Python) */
			agg_read_identity_and_maps(a, p, dirfd, true,
						   p->maps_read_ns != 0 || aggregator_follows(a, p->pid, NULL));
		}
		return 0;
	}
	default:
		return -EINVAL;
	}
}
