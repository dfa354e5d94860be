/* SPDX-License-Identifier: MIT */
/* aggregate.c - see aggregate.h for the design. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "profile/aggregate.h"
#include "perfd/macro.h"
#include "profile/frame.h"
#include "process/procmaps.h"
#include "profile/stacktab.h"
#include "symbols/symbolize.h"

/* A user address outside every known mapping makes us re-read the maps: a
 * library was mapped since (dlopen, or libc itself when the first sample
 * came while ld.so was still loading it).  The first time at once; while
 * re-reading finds nothing new (garbage addresses from a truncated stack),
 * the wait doubles up to MAPS_REREAD_MAX_NS; a re-read that explains the
 * address starts over. */
#define MAPS_REREAD_FIRST_NS (16 * 1000 * 1000ULL)
#define MAPS_REREAD_MAX_NS (8 * NSEC_PER_SEC)
/* How often to look again for a JIT's perf map that was not there. */
#define JIT_MAP_RECHECK_NS (1 * NSEC_PER_SEC)
/* Bound on evictions for one sample, so one sample can't stall the loop. */
#define EVICTIONS_PER_SAMPLE 4
#define MODULE_NONE UINT16_MAX

struct aggregator {
	struct aggregator_limits limits;
	struct symbolizer *symbolizer;
	struct stacktab *stacks;
	struct process **procs;
	size_t n_procs, cap_procs;
	struct u64map by_pid; /* tgid -> struct process * (latest incarnation) */
	struct collector *collectors;
	uint64_t ns_per_tick;
	uint32_t stack_limit_id; /* the placeholder stack, always interned */
	struct aggregator_hooks hooks;
	struct aggregator_stats stats;
};

struct aggregator *aggregator_new(const struct aggregator_limits *limits,
				  struct symbolizer *symbolizer)
{
	struct stacktab_limits sl = {
		/* the placeholder is ours, not the processes' */
		.max_stacks = limits->max_stacks + 1,
		.max_frames = limits->max_frames + 1,
	};
	uint64_t placeholder = frame_make(FRAME_MODULE_SPECIAL, FRAME_SPECIAL_STACK_LIMIT);
	struct aggregator *a = calloc(1, sizeof(*a));
	long hz = sysconf(_SC_CLK_TCK);

	if (!a)
		return NULL;
	a->limits = *limits;
	a->symbolizer = symbolizer;
	a->ns_per_tick = NSEC_PER_SEC / (hz > 0 ? (uint64_t)hz : 100);
	u64map_init(&a->by_pid);
	a->stacks = stacktab_new(&sl);
	if (!a->stacks || stacktab_intern(a->stacks, &placeholder, 1, 0,
					  &a->stack_limit_id) < 0)
		return aggregator_free(a);
	return a;
}

void aggregator_set_hooks(struct aggregator *a, const struct aggregator_hooks *hooks)
{
	a->hooks = *hooks;
}

static void notify_gone(struct aggregator *a, const struct process *p)
{
	if (a->hooks.process_gone)
		a->hooks.process_gone(a->hooks.userdata, p);
}

static void release_counts(struct aggregator *a, struct u64map *counts)
{
	U64MAP_FOREACH(slot, counts)
		stacktab_unref(a->stacks, (uint32_t)slot->key);
	u64map_done(counts);
}

static void process_free(struct aggregator *a, struct process *p)
{
	release_counts(a, &p->counts);
	procmaps_free(p->maps);
	free(p->map_modules);
	free(p->cgroup);
	free(p);
}

struct aggregator *aggregator_free(struct aggregator *a)
{
	if (!a)
		return NULL;
	a->hooks = (struct aggregator_hooks){ 0 };
	while (a->collectors)
		aggregator_remove_collector(a, a->collectors);
	for (size_t i = 0; i < a->n_procs; i++)
		process_free(a, a->procs[i]);
	free(a->procs);
	u64map_done(&a->by_pid);
	stacktab_free(a->stacks);
	free(a);
	return NULL;
}

static void evict(struct aggregator *a, size_t index)
{
	struct process *p = a->procs[index];
	uint64_t *cur = u64map_get(&a->by_pid, p->pid);

	if (cur && *cur == (uintptr_t)p)
		u64map_remove(&a->by_pid, p->pid);
	a->stats.samples_evicted += p->total_samples;
	a->stats.processes_evicted++;
	if (p->exited)
		a->stats.processes_exited--;
	a->procs[index] = a->procs[--a->n_procs];
	if (!p->exited)
		notify_gone(a, p); /* an exited one was reported at its exit */
	process_free(a, p);
}

/* Evicts the coldest process other than keep.  Returns false when there is
 * none that may go. */
static bool evict_coldest(struct aggregator *a, const struct process *keep)
{
	size_t best = SIZE_MAX;

	for (size_t i = 0; i < a->n_procs; i++) {
		const struct process *p = a->procs[i], *b;

		if (p == keep || p->collectors > 0)
			continue;
		if (best == SIZE_MAX) {
			best = i;
			continue;
		}
		b = a->procs[best];
		if (p->exited != b->exited ? p->exited :
					     p->last_sample_ns < b->last_sample_ns)
			best = i;
	}
	if (best == SIZE_MAX)
		return false;
	evict(a, best);
	return true;
}

static void read_comm(uint32_t pid, char comm[PERFD_TASK_COMM_LEN])
{
	char path[64], buf[PERFD_TASK_COMM_LEN + 2] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[MIN((size_t)n, (size_t)PERFD_TASK_COMM_LEN - 1)] = 0;
	memcpy(comm, buf, PERFD_TASK_COMM_LEN);
}

/* Reads the pid as p's own pid namespace sees it (the last NSpid field)
 * and p's cgroup v2 path: what names it inside a container. */
static void read_identity(struct process *p)
{
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	char path[64];
	FILE *f;

	p->ns_pid = p->pid;
	snprintf(path, sizeof(path), "/proc/%u/status", p->pid);
	f = fopen(path, "re");
	if (f) {
		while (getline(&line, &cap, f) > 0) {
			char *last;

			if (strncmp(line, "NSpid:", 6) != 0)
				continue;
			last = strrchr(line, '\t');
			if (last)
				p->ns_pid = (uint32_t)strtoul(last + 1, NULL, 10);
			break;
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%u/cgroup", p->pid);
	f = fopen(path, "re");
	if (f) {
		while (getline(&line, &cap, f) > 0) {
			if (strncmp(line, "0::", 3) != 0)
				continue;
			line[strcspn(line, "\n")] = 0;
			p->cgroup = strdup(line + 3);
			break;
		}
		fclose(f);
	}
}

/* The process's JIT map, as its JIT wrote it: /tmp/perf-<pid in its own
 * namespace>.map under its own root. */
static void find_jit_map(struct aggregator *a, struct process *p)
{
	char path[96];
	int id;

	snprintf(path, sizeof(path), "/proc/%u/root/tmp/perf-%u.map", p->pid, p->ns_pid);
	if (access(path, R_OK) < 0)
		return;
	id = symbolizer_jit_module(a->symbolizer, p->pid, p->start_time_ns, path);
	if (id > 0)
		p->jit_module = (uint16_t)id;
}

/* Reads p's executable mappings and resolves the module of each, opening
 * binaries while the process still lives. */
static void refresh_maps(struct aggregator *a, struct process *p)
{
	struct procmaps *maps = NULL;
	uint16_t *modules;

	/* When they were read, not when the sample that asked was taken: a
	 * sample older than the read cannot show the read missed anything. */
	p->maps_read_ns = now_monotonic_ns();
	/* A process that is already gone keeps the maps it had. */
	if (procmaps_read_pid(p->pid, true, &maps) < 0)
		return;
	modules = calloc(maps->n ? maps->n : 1, sizeof(uint16_t));
	if (!modules) {
		procmaps_free(maps);
		return;
	}
	for (size_t i = 0; i < maps->n; i++) {
		const struct procmap *m = &maps->maps[i];
		int id = strcmp(m->path, "[vdso]") == 0 ?
				 symbolizer_vdso_module(a->symbolizer) :
				 symbolizer_module_for_mapping(a->symbolizer, p->pid, m);

		modules[i] = id > 0 ? (uint16_t)id : MODULE_NONE;
	}
	if (!p->jit_module)
		find_jit_map(a, p);
	procmaps_free(p->maps);
	free(p->map_modules);
	p->maps = maps;
	p->map_modules = modules;
	if (a->hooks.maps_changed)
		a->hooks.maps_changed(a->hooks.userdata, p);
}

static struct process *process_new(struct aggregator *a,
				   const struct perfd_sample *s)
{
	struct process *p;
	uint64_t *slot;

	if (a->n_procs >= a->limits.max_processes &&
	    !evict_coldest(a, NULL))
		return NULL;
	if (a->n_procs == a->cap_procs) {
		size_t cap = a->cap_procs ? a->cap_procs * 2 : 256;
		struct process **procs = realloc(a->procs, cap * sizeof(*procs));

		if (!procs)
			return NULL;
		a->procs = procs;
		a->cap_procs = cap;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	slot = u64map_upsert(&a->by_pid, s->hdr.tgid, NULL);
	if (!slot) {
		free(p);
		return NULL;
	}
	*slot = (uintptr_t)p;
	a->procs[a->n_procs++] = p;

	p->pid = s->hdr.tgid;
	p->start_time_ns = s->hdr.start_time_ns;
	p->page_size = s->page_size;
	p->first_sample_ns = s->hdr.timestamp_ns;
	u64map_init(&p->counts);
	if (s->hdr.tid == s->hdr.tgid)
		memcpy(p->comm, s->comm, sizeof(p->comm));
	else
		read_comm(p->pid, p->comm);
	if (!p->comm[0])
		memcpy(p->comm, s->comm, sizeof(p->comm));
	p->comm[PERFD_TASK_COMM_LEN - 1] = 0;
	if (!(s->flags & PERFD_SAMPLE_F_KTHREAD)) {
		read_identity(p);
		refresh_maps(a, p);
	}
	return p;
}

static struct process *lookup(struct aggregator *a, uint32_t tgid, uint64_t start_ns)
{
	uint64_t *slot = u64map_get(&a->by_pid, tgid);
	struct process *p = slot ? (struct process *)(uintptr_t)*slot : NULL;

	return p && p->start_time_ns == start_ns ? p : NULL;
}

static struct process *process_for_sample(struct aggregator *a,
					  const struct perfd_sample *s)
{
	struct process *p = lookup(a, s->hdr.tgid, s->hdr.start_time_ns);
	uint64_t *slot;

	if (p)
		return p;
	slot = u64map_get(&a->by_pid, s->hdr.tgid);
	if (slot) {
		/* The pid was reused: the old process is over. */
		struct process *old = (struct process *)(uintptr_t)*slot;

		if (!old->exited) {
			old->exited = true;
			a->stats.processes_exited++;
			notify_gone(a, old);
		}
		u64map_remove(&a->by_pid, s->hdr.tgid);
	}
	return process_new(a, s);
}

/* Re-reads p's maps because it ran code they do not describe, unless a
 * re-read is not due yet.  Each re-read doubles the wait before the next
 * (the caller resets it when the re-read explained what it met).  Returns
 * whether it read them. */
static bool reread_maps_if_due(struct aggregator *a, struct process *p, uint64_t now_ns)
{
	if (now_ns < p->maps_read_ns || now_ns - p->maps_read_ns < p->maps_reread_wait_ns)
		return false;
	refresh_maps(a, p);
	p->maps_reread_wait_ns = MIN(MAX(2 * p->maps_reread_wait_ns, MAPS_REREAD_FIRST_NS),
				     MAPS_REREAD_MAX_NS);
	return true;
}

/* Maps one user address of p to a frame: (binary, file offset) when it
 * lies in a file mapping, the raw address otherwise. */
static uint64_t user_frame(struct aggregator *a, struct process *p,
			   uint64_t addr, uint64_t now_ns)
{
	const struct procmap *m = NULL;
	size_t i;
	uint16_t *mod;

	if (p->maps)
		m = procmaps_find(p->maps, addr);
	if (!m && reread_maps_if_due(a, p, now_ns)) {
		if (p->maps)
			m = procmaps_find(p->maps, addr);
		if (m)
			p->maps_reread_wait_ns = 0;
	}
	if (!m || p->map_modules[m - p->maps->maps] == MODULE_NONE) {
		/* Anonymous code: JIT-compiled, named by the JIT's map.  A JIT
		 * may write its map only once it has compiled something. */
		if (!p->jit_module && now_ns - p->jit_checked_ns > JIT_MAP_RECHECK_NS) {
			p->jit_checked_ns = now_ns;
			find_jit_map(a, p);
		}
		return frame_make(p->jit_module ? p->jit_module : FRAME_MODULE_NONE, addr);
	}

	i = m - p->maps->maps;
	mod = &p->map_modules[i];
	return frame_make(*mod, addr - m->start + m->pgoff);
}

static void count_bucket(struct process *p, uint64_t ts_ns)
{
	uint64_t second = ts_ns / NSEC_PER_SEC;
	size_t i = second % AGG_BUCKETS;

	if (p->bucket_second[i] != second) {
		p->bucket_second[i] = second;
		p->bucket_samples[i] = 0;
	}
	p->bucket_samples[i]++;
}

/* Adds one sample of stack id to counts, taking a stack reference for a new
 * key.  Returns false when memory ran out. */
static bool count_stack(struct aggregator *a, struct u64map *counts, uint32_t id)
{
	bool added;
	uint64_t *v = u64map_upsert(counts, id, &added);

	if (!v)
		return false;
	if (added)
		stacktab_ref(a->stacks, id);
	(*v)++;
	return true;
}

/* Returns the id of the stack holding one reference for the caller, who
 * drops it once the counts have taken theirs. */
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
		if (r != -ENOSPC || tries >= EVICTIONS_PER_SAMPLE ||
		    !evict_coldest(a, p))
			break;
	}
	a->stats.stack_limit++;
	stacktab_ref(a->stacks, a->stack_limit_id);
	return a->stack_limit_id;
}

#define COLLECTOR_MAX_THREADS 65536

static void remember_thread(struct collector *c, const struct perfd_sample *s)
{
	bool added;
	uint64_t *slot;

	if (c->n_threads >= COLLECTOR_MAX_THREADS)
		return;
	slot = u64map_upsert(&c->thread_index, s->hdr.tid, &added);
	if (!slot || !added)
		return;
	if (c->n_threads == c->cap_threads) {
		size_t cap = c->cap_threads ? 2 * c->cap_threads : 16;
		char(*comms)[PERFD_TASK_COMM_LEN] = realloc(c->thread_comms, cap * sizeof(*comms));

		if (!comms) {
			u64map_remove(&c->thread_index, s->hdr.tid);
			return;
		}
		c->thread_comms = comms;
		c->cap_threads = cap;
	}
	memcpy(c->thread_comms[c->n_threads], s->comm, PERFD_TASK_COMM_LEN);
	c->thread_comms[c->n_threads][PERFD_TASK_COMM_LEN - 1] = '\0';
	*slot = ++c->n_threads;
}

const char *collector_thread_comm(const struct collector *c, uint32_t tid)
{
	uint64_t *slot = u64map_get(&c->thread_index, tid);

	return slot ? c->thread_comms[*slot - 1] : NULL;
}

/* The stack id, with one reference for the caller, of stack id rooted at
 * the sample's thread. */
static uint32_t thread_stack(struct aggregator *a, struct process *p,
			     const struct perfd_sample *s, uint32_t id)
{
	const struct stack *st = stacktab_get(a->stacks, id);
	uint64_t frames[2 * PERFD_MAX_STACK_DEPTH + PERFD_MAX_PYTHON_DEPTH + 3];
	uint16_t depth = st ? st->depth : 0;

	if (!st || depth >= ELEMENTSOF(frames)) {
		stacktab_ref(a->stacks, id);
		return id;
	}
	memcpy(frames, st->frames, depth * sizeof(*frames));
	frames[depth] = frame_make(FRAME_MODULE_SPECIAL, FRAME_SPECIAL_THREAD | s->hdr.tid);
	return intern_stack(a, p, frames, depth + 1, st->kernel_depth);
}

static void feed_collectors(struct aggregator *a, struct process *p,
			    const struct perfd_sample *s, uint32_t id)
{
	for (struct collector *c = a->collectors; c; c = c->next) {
		if (c->pid != s->hdr.tgid ||
		    s->hdr.start_time_ns / a->ns_per_tick != c->start_ticks ||
		    s->hdr.timestamp_ns < c->begin_ns ||
		    s->hdr.timestamp_ns > c->end_ns)
			continue;
		if (!c->process) {
			c->process = p;
			p->collectors++;
		}
		if (c->threads) {
			uint32_t tid_id = thread_stack(a, p, s, id);

			remember_thread(c, s);
			if (count_stack(a, &c->counts, tid_id))
				c->samples++;
			stacktab_unref(a->stacks, tid_id);
			continue;
		}
		if (count_stack(a, &c->counts, id))
			c->samples++;
	}
}

static int ingest_sample(struct aggregator *a, const struct perfd_sample *s,
			 size_t size)
{
	uint64_t frames[2 * PERFD_MAX_STACK_DEPTH + PERFD_MAX_PYTHON_DEPTH + 2];
	uint32_t kd = s->kernel_depth > 0 ? (uint32_t)s->kernel_depth : 0;
	uint32_t ud = s->user_depth > 0 ? (uint32_t)s->user_depth : 0;
	uint16_t n = 0, kernel_n;
	struct process *p;
	uint32_t id;

	if (kd > PERFD_MAX_STACK_DEPTH || ud > PERFD_MAX_STACK_DEPTH ||
	    s->python_depth > PERFD_MAX_PYTHON_DEPTH ||
	    size < sizeof(*s) + (kd + ud) * sizeof(uint64_t) +
			   s->python_depth * sizeof(struct perfd_python_frame))
		return -EINVAL;

	a->stats.samples++;
	p = process_for_sample(a, s);
	if (!p) {
		/* no room and nothing evictable, or out of memory */
		a->stats.samples_evicted++;
		return 0;
	}

	if (s->kernel_depth < 0) {
		a->stats.kernel_stack_errors++;
		frames[n++] = frame_make(FRAME_MODULE_SPECIAL, FRAME_SPECIAL_KSTACK_ERROR);
	}
	/* Every frame but the first of each part is a return address: step
	 * back into the call instruction so it names the caller's line. */
	for (uint32_t i = 0; i < kd; i++)
		frames[n++] = frame_make(FRAME_MODULE_KERNEL, s->ips[i] - (i > 0));
	kernel_n = n;
	/* BPF met code without tables for it, or the process has none (they
	 * were dropped at an exec whose event was lost, or could not be
	 * uploaded): describing its maps again is what brings them back.
	 * Addresses outside the maps also re-read them, in user_frame(). */
	if ((s->flags & PERFD_SAMPLE_F_NEEDS_MAPS) && p->maps)
		(void)reread_maps_if_due(a, p, s->hdr.timestamp_ns);
	if (s->user_depth < 0) {
		a->stats.user_stack_errors++;
		frames[n++] = frame_make(FRAME_MODULE_SPECIAL, FRAME_SPECIAL_USTACK_ERROR);
	}
	for (uint32_t i = 0; i < ud; i++)
		frames[n++] = user_frame(a, p, s->ips[kd + i] - (i > 0),
					 s->hdr.timestamp_ns);
	/* Only samples that carry interpreter frames have anything to merge:
	 * the others (nearly all) skip the hook. */
	if (a->hooks.rewrite_user_frames && s->python_depth > 0)
		n = kernel_n + (uint16_t)a->hooks.rewrite_user_frames(
				       a->hooks.userdata, p, s, frames + kernel_n, n - kernel_n,
				       ELEMENTSOF(frames) - kernel_n);

	id = intern_stack(a, p, frames, n, kernel_n);
	if (!count_stack(a, &p->counts, id)) {
		stacktab_unref(a->stacks, id);
		a->stats.samples_evicted++;
		return 0;
	}

	p->total_samples++;
	p->last_sample_ns = s->hdr.timestamp_ns;
	count_bucket(p, s->hdr.timestamp_ns);
	if (s->hdr.tid == s->hdr.tgid) {
		memcpy(p->comm, s->comm, sizeof(p->comm));
		p->comm[PERFD_TASK_COMM_LEN - 1] = 0;
	}
	if (!(s->flags & PERFD_SAMPLE_F_KTHREAD)) {
		uint64_t peak = s->hiwater_rss_pages;

		memcpy(p->rss_pages, s->rss_pages, sizeof(p->rss_pages));
		p->page_size = s->page_size;
		peak = MAX(peak, p->rss_pages[PERFD_RSS_FILE] +
					 p->rss_pages[PERFD_RSS_ANON] +
					 p->rss_pages[PERFD_RSS_SHMEM]);
		p->peak_rss_bytes = MAX(p->peak_rss_bytes, peak * s->page_size);
	}
	feed_collectors(a, p, s, id);
	stacktab_unref(a->stacks, id);
	return 0;
}

static void ingest_exit(struct aggregator *a, const struct perfd_exit *e)
{
	struct process *p = lookup(a, e->hdr.tgid, e->hdr.start_time_ns);
	struct collector *c, *next;

	a->stats.exit_events++;
	if (p && !p->exited) {
		p->exited = true;
		a->stats.processes_exited++;
		notify_gone(a, p);
	}
	/* on_exit may remove the collector: keep the next one first */
	for (c = a->collectors; c; c = next) {
		next = c->next;
		if (c->pid != e->hdr.tgid || c->exited ||
		    e->hdr.start_time_ns / a->ns_per_tick != c->start_ticks)
			continue;
		c->exited = true;
		c->exit_ns = e->hdr.timestamp_ns;
		if (c->on_exit)
			c->on_exit(c, c->userdata);
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
		return ingest_sample(a, record, size);
	case PERFD_EVENT_EXIT:
		if (size < sizeof(struct perfd_exit))
			return -EINVAL;
		ingest_exit(a, record);
		return 0;
	case PERFD_EVENT_EXEC:
		p = lookup(a, h->tgid, h->start_time_ns);
		if (p) {
			/* Read the new image's maps now (the event woke us):
			 * waiting for its next sample would leave it unwound
			 * without tables until then. */
			p->maps_reread_wait_ns = 0;
			p->jit_module = 0;
			/* The old image is gone for those who described it
			 * (BPF dropped their entries at the exec), even when
			 * the new one maps the same files. */
			notify_gone(a, p);
			refresh_maps(a, p);
		}
		return 0;
	default:
		return -EINVAL;
	}
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
				uint64_t end_second)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < AGG_BUCKETS; i++)
		if (p->bucket_second[i] >= first_second && p->bucket_second[i] < end_second)
			sum += p->bucket_samples[i];
	return sum;
}

uint64_t process_rss_bytes(const struct process *p)
{
	return (p->rss_pages[PERFD_RSS_FILE] + p->rss_pages[PERFD_RSS_ANON] +
		p->rss_pages[PERFD_RSS_SHMEM]) * p->page_size;
}

void aggregator_add_collector(struct aggregator *a, struct collector *c)
{
	u64map_init(&c->counts);
	u64map_init(&c->thread_index);
	c->thread_comms = NULL;
	c->n_threads = c->cap_threads = 0;
	c->samples = 0;
	c->process = NULL;
	c->exited = false;
	c->next = a->collectors;
	a->collectors = c;
}

void aggregator_remove_collector(struct aggregator *a, struct collector *c)
{
	for (struct collector **pp = &a->collectors; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	c->next = NULL;
	release_counts(a, &c->counts);
	u64map_done(&c->thread_index);
	free(c->thread_comms);
	c->thread_comms = NULL;
	c->n_threads = c->cap_threads = 0;
	if (c->process) {
		c->process->collectors--;
		c->process = NULL;
	}
}

struct stacktab *aggregator_stacks(struct aggregator *a)
{
	return a->stacks;
}

void aggregator_get_stats(const struct aggregator *a, struct aggregator_stats *ret)
{
	size_t mem = sizeof(*a) + a->cap_procs * sizeof(void *) +
		     u64map_memory(&a->by_pid) + stacktab_memory(a->stacks);

	for (size_t i = 0; i < a->n_procs; i++) {
		const struct process *p = a->procs[i];

		mem += sizeof(*p) + u64map_memory(&p->counts);
		if (p->maps)
			for (size_t j = 0; j < p->maps->n; j++)
				mem += sizeof(struct procmap) + sizeof(uint16_t) +
				       strlen(p->maps->maps[j].path) + 1;
	}
	*ret = a->stats;
	ret->processes = a->n_procs;
	ret->stacks = stacktab_count(a->stacks) - 1; /* not the placeholder */
	ret->frames = stacktab_frames(a->stacks) - 1;
	ret->memory_bytes = mem;
}
