/* SPDX-License-Identifier: MIT */
/* aggregate.c - see aggregate.h for the design. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/offload.h"
#include "perfd/macro.h"
#include "process/procfs.h"
#include "process/mapsread.h"
#include "process/procmaps.h"
#include "profile/aggregate.h"
#include "profile/frame.h"
#include "profile/owners.h"
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
#define MAPS_REREAD_COST_FACTOR 20
#define MAPS_REREAD_COST_MIN_NS (5 * 1000 * 1000ULL) /* ~4,000 mappings */
/* How often to look again for a JIT's perf map that was not there. */
#define JIT_MAP_RECHECK_NS (1 * NSEC_PER_SEC)
/* Bound on evictions for one sample, so one sample can't stall the loop. */
#define EVICTIONS_PER_SAMPLE 4
#define MODULE_NONE UINT16_MAX
/* New file mappings looked up per read of a process's maps (each a stat,
 * and an open the first time a file is seen: ~20 us). */
#define MODULES_PER_READ 256
#define PROCESS_MAX_THREADS 4096
/* Samples waiting for their process's maps (aggregate.h): at 1999 Hz on
 * every CPU of a large host, a read of ~100 ms; and 8 MiB of records (a
 * sample of full stacks is ~3 KiB). */
#define AGG_PARKED_PER_PROCESS 1024
#define AGG_PARKED_BYTES (8u << 20)

static void adopt(struct aggregator *a, uint32_t pid, uint64_t start, uint32_t ppid,
		  uint64_t parent_start);

/* A copy of a sample record that waits for its process's maps. */
struct parked_sample {
	struct parked_sample *next;
	size_t size;
	uint64_t record[]; /* the record, aligned as the ring buffer's */
};

struct aggregator {
	struct aggregator_limits limits;
	struct symbolizer *symbolizer;
	struct stacktab *stacks;
	struct process **procs;
	/* When aggregator_maintain has work on procs[i] (history_due_s; 0
	 * for at once): a compact array, so that the once-a-second pass over
	 * a full store reads 8 bytes a process, not its history. */
	uint64_t *due_s;
	size_t n_procs, cap_procs;
	struct u64map by_pid; /* tgid -> struct process * (latest incarnation) */
	struct collector *collectors;
	/* The exited processes, oldest exit first: a host with process churn
	 * keeps max_processes of them, and a new process evicts one, without
	 * a look at all the others. */
	struct process *exited_head, *exited_tail;
	uint64_t ns_per_tick;
	uint64_t scale_rng;       /* aggregator_scale_cpu's rounding */
	uint32_t stack_limit_id; /* the placeholder stack, always interned */
	size_t history_bytes;    /* sum of the processes' history bytes */
	size_t process_bytes;    /* sum of process_bytes() over the processes */
	struct aggregator_hooks hooks;
	struct aggregator_stats stats;
	struct owner_tally owners; /* evict_fairly's count, kept for its memory */
	size_t collector_bytes;    /* of the collectors' parts (collector.bytes) */
	size_t restored_table_bytes; /* aggregator_set_restored_table_bytes */
	struct offload *maps_lane; /* NULL: maps are read at once */
	size_t parked_bytes;       /* of the samples waiting for maps */
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
	if (!a->limits.retention_s)
		a->limits.retention_s = 3600;
	a->symbolizer = symbolizer;
	owner_tally_init(&a->owners);
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

/* What a process record holds besides its history: its maps, thread
 * names, cgroup.  Recomputed where those change (they change rarely). */
static size_t process_bytes(const struct process *p)
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

static void process_free(struct aggregator *a, struct process *p)
{
	/* a read still on the lane is dropped when it comes back */
	if (p->maps_job)
		p->maps_job->owner = NULL;
	drop_parked(a, p);
	a->process_bytes -= process_bytes(p);
	a->history_bytes -= p->history.bytes;
	history_release(&p->history, a->stacks);
	procmaps_free(p->maps);
	free(p->map_modules);
	free(p->cgroup);
	u64map_done(&p->thread_index);
	free(p->thread_comms);
	free(p);
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
	for (size_t i = 0; i < a->n_procs; i++) {
		a->procs[i]->maps_job = NULL;
		process_free(a, a->procs[i]);
	}
	free(a->procs);
	free(a->due_s);
	owner_tally_done(&a->owners);
	u64map_done(&a->by_pid);
	stacktab_free(a->stacks);
	free(a);
	return NULL;
}

static uint64_t history_samples(const struct process *p)
{
	struct history_iter it;
	struct history_window w;
	uint64_t n = 0;

	history_iter_init(&it, &p->history);
	while (history_iter_next(&it, &w))
		n += history_window_total(&w, PROFILE_KIND_CPU);
	return n;
}

/* Has aggregator_maintain look at p at its next pass: its history may
 * have a window that falls due sooner, or p may be free to go. */
static void due_now(struct aggregator *a, const struct process *p)
{
	a->due_s[p->index] = 0;
}

/* p is over (it exited, or its pid is another process's now): it joins
 * the end of the exited list. */
static void mark_exited(struct aggregator *a, struct process *p)
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
	due_now(a, p);
	notify_gone(a, p);
}

/* Removes procs[index] from the store and frees it. */
static void remove_process(struct aggregator *a, size_t index)
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
		notify_gone(a, p); /* an exited one was reported at its exit */
	process_free(a, p);
}

static void evict(struct aggregator *a, size_t index)
{
	struct process *p = a->procs[index];

	a->stats.samples_evicted += history_samples(p);
	a->stats.processes_evicted++;
	remove_process(a, index);
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
static size_t store_memory(const struct aggregator *a)
{
	return sizeof(*a) + a->cap_procs * (sizeof(void *) + sizeof(uint64_t)) + a->history_bytes +
	       stacktab_memory(a->stacks) + a->process_bytes + u64map_memory(&a->by_pid) +
	       a->collector_bytes + a->restored_table_bytes + a->parked_bytes;
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
	due_now(a, oldest); /* an exited process may have nothing left */
	a->stats.windows_evicted += d.windows;
	for (int k = 0; k < PROFILE_KINDS; k++)
		a->stats.values_evicted[k] += d.values[k];
	a->stats.samples_evicted += d.values[PROFILE_KIND_CPU];
	return true;
}

/* One step of eviction for want of m (memory, or a slot for a process or
 * a stack): from the owner owners.h chooses, with keep's owner as the one
 * admitting (keep NULL: nobody in particular), its oldest window (not for
 * a process slot) or else its coldest process, never keep.  An owner with
 * nothing that may go is passed over; when the owners cannot be counted
 * (no memory), the oldest of all goes, as it would without owners.
 * Returns false when nothing may go. */
static bool evict_fairly(struct aggregator *a, enum owner_measure m, const struct process *keep,
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

/* Keeps the store under its memory limit, fairly (evict_fairly; keep is
 * the process whose data is being admitted, NULL for none).  Goes to 15/16
 * of the limit, so that it does not run again at the next sample. */
static void enforce_memory(struct aggregator *a, const struct process *keep)
{
	size_t limit = a->limits.max_memory_bytes;

	if (!limit || store_memory(a) <= limit)
		return;
	while (store_memory(a) > limit - limit / 16)
		if (!evict_fairly(a, OWNER_BYTES, keep, &a->stats.evictions_memory))
			break;
}

/* Opens p's /proc directory, checked against its start time (procfs.h):
 * everything read through it is p's, so one check serves all the files
 * read at once.  A process found gone (exited, or its pid another
 * process's now) stays gone: it is not looked for again, which spares
 * the failed opens of every later event of a short-lived process.
 * Returns 0 or -errno. */
static int open_proc(struct process *p, int *ret_dirfd)
{
	int r;

	if (p->proc_gone)
		return -ESRCH;
	r = procfs_open_pid(p->pid, p->start_time_ns, ret_dirfd);
	if (r == -ESRCH)
		p->proc_gone = true;
	return r;
}

/* The name of p's main thread, from its /proc directory dirfd (-1 when
 * it could not be opened).  Where /proc has none (the process is gone),
 * otherwise names it, a record's comm; NULL leaves p->comm alone. */
static void read_comm(struct process *p, int dirfd, const char *otherwise)
{
	if (dirfd >= 0 && procfs_read_comm(dirfd, p->comm, sizeof(p->comm)) >= 0)
		return;
	if (otherwise) {
		memcpy(p->comm, otherwise, sizeof(p->comm));
		p->comm[PERFD_TASK_COMM_LEN - 1] = 0;
	}
}

/* p's owner is owner from ns on; the samples counted under the owner it
 * had are not the new one's. */
static void set_owner(struct process *p, uint32_t owner, uint64_t ns)
{
	if (owner != p->owner_uid)
		p->owner_samples = 0;
	p->owner_uid = owner;
	p->owner_ns = ns;
}

/* Reads what names p inside a container (the pid its own namespace sees,
 * its cgroup v2 path) and who owns it (procfs_owner_uid), from its /proc
 * directory dirfd.  What cannot be read (dirfd -1 included) is unknown:
 * the host's pid, no cgroup, PERFD_OWNER_NONE.  Read again at exec, where
 * a set-uid binary changes the owner; its samples say it from then on
 * (ingest_sample). */
static void read_identity(struct process *p, int dirfd)
{
	struct procfs_status st;
	char *cgroup;

	uint32_t owner = PERFD_OWNER_NONE;

	p->ns_pid = p->pid;
	if (dirfd >= 0 && procfs_read_status(dirfd, &st) == 0) {
		p->ns_pid = st.ns_pid;
		p->ppid = st.ppid;
		owner = st.owner_uid;
	}
	set_owner(p, owner, now_monotonic_ns());
	if (dirfd < 0)
		return;
	if (procfs_read_cgroup(dirfd, &cgroup) == 0) {
		free(p->cgroup);
		p->cgroup = cgroup;
	}
}

/* The process's JIT map, as its JIT wrote it: /tmp/perf-<pid in its own
 * namespace>.map, else its jitdump /tmp/jit-<pid>.dump (CPython's -X
 * perf_jit, the JVM's and V8's perf agents), under its own root, owned by
 * its user or root (the symbolizer refuses anything else, see
 * symbolize.h).  Not looked for in a process found gone. */
static void find_jit_map(struct aggregator *a, struct process *p)
{
	static const char *const formats[] = { "/tmp/perf-%u.map", "/tmp/jit-%u.dump" };
	char path[32];
	int id = -ENOENT;

	for (size_t i = 0; i < ELEMENTSOF(formats) && id <= 0 && !p->proc_gone; i++) {
		snprintf(path, sizeof(path), formats[i], p->ns_pid);
		id = symbolizer_jit_module(a->symbolizer, p->pid, p->start_time_ns, path,
					   p->owner_uid);
		if (id == -ESRCH)
			p->proc_gone = true;
	}
	if (id > 0)
		p->jit_module = (uint16_t)id;
}

/* Whether some executable mapping of maps has no module: anonymous code
 * (JIT-compiled, or CPython's perf trampolines), all a JIT map can name
 * (user_frame).  Not the kernel's legacy [vsyscall] page, which every
 * x86-64 process shows. */
static bool has_unnamed_code(const struct procmaps *maps, const uint16_t *modules)
{
	for (size_t i = 0; i < maps->n; i++)
		if (modules[i] == MODULE_NONE && strcmp(maps->maps[i].path, "[vsyscall]") != 0)
			return true;
	return false;
}

/* Whether two reads of a process's maps describe the same mappings. */
static bool maps_same(const struct procmaps *x, const struct procmaps *y)
{
	if (!x || !y || x->n != y->n)
		return x == y;
	for (size_t i = 0; i < x->n; i++) {
		const struct procmap *a = &x->maps[i], *b = &y->maps[i];

		if (a->start != b->start || a->end != b->end || a->pgoff != b->pgoff ||
		    a->inode != b->inode || a->dev_major != b->dev_major || a->dev_minor != b->dev_minor)
			return false;
	}
	return true;
}

/* The module of each of maps (p's, just read) into modules.  A mapping p
 * had already (same range, offset, file and path) keeps its module: the
 * symbolizer's look-up costs a stat, and a process may map thousands of
 * files.  At most MODULES_PER_READ new ones are looked up per read, so
 * that one read costs the loop a few milliseconds at most; the others stay
 * without a module, and p->maps_partial has a sample in one of them read
 * the maps again (when due), as do those the symbolizer's full table
 * refused. */
static void resolve_modules(struct aggregator *a, struct process *p, const struct procmaps *maps,
			    uint16_t *modules)
{
	const struct procmaps *old = p->maps;
	size_t j = 0, budget = MODULES_PER_READ;

	p->maps_partial = false;
	for (size_t i = 0; i < maps->n; i++) {
		const struct procmap *m = &maps->maps[i];
		int id;

		/* both are sorted by address */
		while (old && j < old->n && old->maps[j].start < m->start)
			j++;
		if (old && j < old->n && p->map_modules[j] != MODULE_NONE &&
		    old->maps[j].start == m->start && old->maps[j].end == m->end &&
		    old->maps[j].pgoff == m->pgoff && old->maps[j].inode == m->inode &&
		    old->maps[j].dev_major == m->dev_major && old->maps[j].dev_minor == m->dev_minor &&
		    strcmp(old->maps[j].path, m->path) == 0) {
			modules[i] = p->map_modules[j];
			continue;
		}
		if (strcmp(m->path, "[vdso]") == 0) {
			id = symbolizer_vdso_module(a->symbolizer);
		} else if (m->inode == 0 || m->path[0] != '/') {
			id = -EINVAL; /* anonymous: no file to look up */
		} else if (budget == 0) {
			p->maps_partial = true;
			id = -EAGAIN;
		} else {
			budget--;
			id = symbolizer_module_for_mapping(a->symbolizer, p->pid, p->owner_uid, m);
			/* the table is full: ids may be given back by then */
			if (id == -ENOSPC)
				p->maps_partial = true;
		}
		modules[i] = id > 0 ? (uint16_t)id : MODULE_NONE;
	}
}

/* Takes maps (p's, just read; consumed) as p's and resolves the module of
 * each, opening binaries while the process still lives.  dirfd is p's
 * /proc directory, -1 to open it here if needed; named: the caller has
 * just read p's name from it.  Returns whether they changed. */
static bool apply_maps(struct aggregator *a, struct process *p, struct procmaps *maps, int dirfd,
		       bool named)
{
	_cleanup_close_ int own = -1;
	uint16_t *modules;
	bool changed;

	/* A process that is already gone keeps the maps it had, and so does
	 * one on its way out: an exiting process (a zombie) reads as no
	 * mappings at all, not as an error, and its samples still to be
	 * drained need the maps it ran with.  A live process has at least
	 * its vdso. */
	if (maps->n == 0) {
		procmaps_free(maps);
		return false;
	}
	modules = calloc(maps->n, sizeof(uint16_t));
	if (!modules) {
		procmaps_free(maps);
		return false;
	}
	changed = !maps_same(p->maps, maps);
	/* The name that goes with these maps: a process first seen in a
	 * sample from before its exec carried its old one. */
	if (changed && !named) {
		if (dirfd < 0 && open_proc(p, &own) == 0)
			dirfd = own;
		read_comm(p, dirfd, NULL);
	}
	resolve_modules(a, p, maps, modules);
	/* Only where there is code for it to name: the two look-ups cost
	 * more than the rest of a short process's reads, and a sample in code
	 * mapped later makes user_frame look. */
	if (!p->jit_module && has_unnamed_code(maps, modules))
		find_jit_map(a, p);
	a->process_bytes -= process_bytes(p);
	procmaps_free(p->maps);
	free(p->map_modules);
	p->maps = maps;
	p->map_modules = modules;
	a->process_bytes += process_bytes(p);
	if (a->hooks.maps_changed)
		a->hooks.maps_changed(a->hooks.userdata, p);
	return changed;
}

/* After a re-read on a miss (reread_maps_if_due) found the maps changed
 * or not: when to re-read next.  Each re-read that finds the maps as they
 * were doubles the wait before the next; one that finds them changed (a
 * dlopen() in progress maps one library after another) starts over, so a
 * library mapped while the wait was long is not missed for seconds. */
static void reread_done(struct process *p, bool changed)
{
	if (changed)
		p->maps_reread_wait_ns = MAPS_REREAD_FIRST_NS;
	else
		p->maps_reread_wait_ns = MIN(MAX(2 * p->maps_reread_wait_ns, MAPS_REREAD_FIRST_NS),
					     MAPS_REREAD_MAX_NS);
	/* A process with tens of thousands of mappings costs tens of
	 * milliseconds a read (the kernel's formatting, mostly), on the
	 * lane: waiting MAPS_REREAD_COST_FACTOR times what the read cost
	 * keeps its share of a CPU small, however it maps. */
	if (p->maps_read_cost_ns >= MAPS_REREAD_COST_MIN_NS)
		p->maps_reread_wait_ns = MAX(p->maps_reread_wait_ns,
					     MAPS_REREAD_COST_FACTOR * p->maps_read_cost_ns);
}

/* The end of a read of p's maps that went past what the loop reads
 * (mapsread.h): takes its maps in, as refresh_maps would have.  Returns
 * whether they changed. */
static bool maps_read_done(struct aggregator *a, struct process *p, struct mapsread *j)
{
	bool changed = false;

	p->maps_read_cost_ns = j->read_ns;
	if (j->truncated)
		a->stats.maps_truncated++;
	if (j->error >= 0)
		changed = apply_maps(a, p, TAKE_PTR(j->maps), -1, p->maps_job_named);
	if (p->maps_job_reread)
		reread_done(p, changed);
	return changed;
}

/* Reads p's executable mappings and resolves the module of each (see
 * apply_maps): at once when the loop can read them whole
 * (MAPSREAD_LOOP_BYTES), else on the lane, and then p->maps_job is set
 * until aggregator_complete takes them in; one read at a time.  dirfd is
 * p's /proc directory, -1 to open it here; named: the caller has just
 * read p's name from it; reread: a re-read on a miss (reread_done).
 * Returns whether they were read now and changed. */
static bool refresh_maps(struct aggregator *a, struct process *p, int dirfd, bool named,
			 bool reread)
{
	_cleanup_close_ int own = -1;
	struct procmaps *maps = NULL;
	struct mapsread *j = NULL;
	bool changed;
	int r;

	if (p->maps_job)
		return false;
	/* When they were read, not when the sample that asked was taken: a
	 * sample older than the read cannot show the read missed anything. */
	p->maps_read_ns = now_monotonic_ns();
	if (dirfd < 0 && open_proc(p, &own) == 0)
		dirfd = own;
	r = dirfd < 0 ? -EBADF :
			mapsread_start(dirfd, true, a->maps_lane ? MAPSREAD_LOOP_BYTES : MAPSREAD_MAX_BYTES,
				       &maps, &j);
	p->maps_read_cost_ns = now_monotonic_ns() - p->maps_read_ns;
	if (r < 0) {
		if (reread)
			reread_done(p, false);
		return false;
	}
	if (j) {
		j->owner = p;
		p->maps_job = j;
		p->maps_job_named = named;
		p->maps_job_reread = reread;
		if (a->maps_lane) {
			a->stats.maps_reads_offloaded++;
			a->stats.maps_reads_pending++;
			(void)offload_submit(a->maps_lane, &j->job);
			return false;
		}
		mapsread_run(j); /* no lane: it only cuts what was read at the cap */
		p->maps_job = NULL;
		changed = maps_read_done(a, p, j);
		mapsread_free(j);
		return changed;
	}
	changed = apply_maps(a, p, maps, dirfd, named);
	if (reread)
		reread_done(p, changed);
	return changed;
}

/* Who p is and, with maps, what it maps, from its /proc directory dirfd
 * (-1: not there), the store's count of p's bytes kept right (the cgroup
 * may change): at first sight and again at exec.  named: as refresh_maps().
 *
 * The maps are read only for a process that has, or had before its exec,
 * samples with stacks to name.  One seen only in RSS records (a child
 * between fork and exec, a short command that never ran on a sampled tick)
 * needs its name and owner, not its maps: reading them, finding the
 * module of every mapping and describing them to the unwinder was most of
 * what each new process cost the daemon.  Its first sample with a stack
 * reads them (user_frame(), as for any address the maps do not cover). */
static void read_identity_and_maps(struct aggregator *a, struct process *p, int dirfd, bool named,
				   bool maps)
{
	a->process_bytes -= process_bytes(p);
	read_identity(p, dirfd);
	a->process_bytes += process_bytes(p);
	if (maps)
		refresh_maps(a, p, dirfd, named, false);
}

/* Everything /proc has to say of a new process, through one directory:
 * its name (unless the sample's is the main thread's, own_comm), and,
 * unless it is a kernel thread, who it is and, with maps, what it maps. */
static void read_new_process(struct aggregator *a, struct process *p, const char *comm,
			     bool own_comm, bool maps)
{
	_cleanup_close_ int dirfd = -1;

	if (!p->kthread || !own_comm)
		(void)open_proc(p, &dirfd);
	if (own_comm)
		memcpy(p->comm, comm, sizeof(p->comm));
	else
		read_comm(p, dirfd, comm);
	p->comm[PERFD_TASK_COMM_LEN - 1] = 0;
	if (!p->kthread)
		read_identity_and_maps(a, p, dirfd, !own_comm, maps);
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
static struct process *process_add(struct aggregator *a, const struct perfd_event_header *h,
				   uint32_t page_size, bool kthread)
{
	struct process *p;
	uint64_t *slot;

	if (a->n_procs >= a->limits.max_processes &&
	    !evict_fairly(a, OWNER_PROCESSES, NULL, &a->stats.evictions_process_limit))
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
		mark_exited(a, old);
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
	a->process_bytes += process_bytes(p);
	p->kthread = kthread;
	return p;
}

static struct process *process_new(struct aggregator *a, const struct perfd_event_header *h,
				   const char *comm, uint32_t page_size, bool kthread, bool maps)
{
	struct process *p = process_add(a, h, page_size, kthread);

	if (!p)
		return NULL;
	read_new_process(a, p, comm, comm && h->tid == h->tgid && h->kind == PERFD_EVENT_SAMPLE,
			 maps);
	/* a tree's member by its parent, when no fork record said so */
	adopt(a, p->pid, p->start_time_ns, p->ppid, 0);
	return p;
}

static struct process *lookup(struct aggregator *a, uint32_t tgid, uint64_t start_ns)
{
	uint64_t *slot = u64map_get(&a->by_pid, tgid);
	struct process *p = slot ? (struct process *)(uintptr_t)*slot : NULL;

	return p && p->start_time_ns == start_ns ? p : NULL;
}

/* The process of a record, new or known (see process_new). */
static struct process *process_for(struct aggregator *a, const struct perfd_event_header *h,
				   const char *comm, uint32_t page_size, bool kthread, bool maps)
{
	struct process *p = lookup(a, h->tgid, h->start_time_ns);
	uint64_t *slot;

	if (p)
		return p;
	slot = u64map_get(&a->by_pid, h->tgid);
	if (slot) {
		/* The pid was reused: the old process is over. */
		struct process *old = (struct process *)(uintptr_t)*slot;

		mark_exited(a, old);
		u64map_remove(&a->by_pid, h->tgid);
	}
	return process_new(a, h, comm, page_size, kthread, maps);
}

/* Re-reads p's maps because it ran code they do not describe, unless a
 * re-read is not due yet (reread_done says when it is).  Returns whether
 * it started one. */
static bool reread_maps_if_due(struct aggregator *a, struct process *p, uint64_t now_ns)
{
	if (p->maps_job || now_ns < p->maps_read_ns ||
	    now_ns - p->maps_read_ns < p->maps_reread_wait_ns)
		return false;
	(void)refresh_maps(a, p, -1, false, true);
	return true;
}

/* Whether the user address addr of p lies outside its maps, or in a
 * mapping that was left without a module (resolve_modules). */
static bool maps_miss(const struct process *p, uint64_t addr)
{
	const struct procmap *m = procmaps_find(p->maps, addr);

	return !m || (p->maps_partial && p->map_modules[m - p->maps->maps] == MODULE_NONE);
}

/* Before the user frames of s (ips[kd..kd+ud)) are named: re-reads p's
 * maps when one of them misses and a re-read is due.  Returns whether s
 * must wait for them (a read is on the lane); a read done at once that
 * explained the address starts the waits over. */
static bool wait_for_maps(struct aggregator *a, struct process *p, const struct perfd_sample *s,
			  uint32_t kd, uint32_t ud)
{
	if (p->maps_job)
		return true;
	for (uint32_t i = 0; i < ud; i++) {
		uint64_t addr = s->ips[kd + i] - (i > 0);

		if (!maps_miss(p, addr))
			continue;
		if (!reread_maps_if_due(a, p, s->hdr.timestamp_ns))
			return false;
		if (p->maps_job)
			return true;
		if (!maps_miss(p, addr))
			p->maps_reread_wait_ns = 0;
		return false;
	}
	return false;
}

/* Keeps a copy of s aside until p's maps are read (aggregate.h).  Returns
 * false when it cannot wait: past the bounds, or out of memory. */
static bool park(struct aggregator *a, struct process *p, const struct perfd_sample *s, size_t size)
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
	a->stats.samples_waited_for_maps++;
	return true;
}

/* Maps one user address of p to a frame: (binary, file offset) when it
 * lies in a file mapping, the raw address otherwise (wait_for_maps has
 * re-read the maps if that was due). */
static uint64_t user_frame(struct aggregator *a, struct process *p,
			   uint64_t addr, uint64_t now_ns)
{
	const struct procmap *m = procmaps_find(p->maps, addr);
	size_t i;
	uint16_t *mod;

	if (!m || p->map_modules[m - p->maps->maps] == MODULE_NONE) {
		/* Anonymous code: JIT-compiled, named by the JIT's map.  A JIT
		 * may write its map only once it has compiled something. */
		if (!p->jit_module && now_ns - p->jit_checked_ns > JIT_MAP_RECHECK_NS) {
			p->jit_checked_ns = now_ns;
			find_jit_map(a, p);
		}
		if (!p->jit_module)
			return frame_make(FRAME_MODULE_NONE, addr);
		/* its map parsed on the lane before a query names it */
		symbolizer_note_jit_frame(a->symbolizer, frame_make(p->jit_module, addr));
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
		    !evict_fairly(a, OWNER_BYTES, p, &a->stats.evictions_stack_limit))
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
	a->process_bytes -= process_bytes(p);
	add_thread(p, s);
	a->process_bytes += process_bytes(p);
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

/* Whether name is one element of the path (between slashes). */
static bool path_has_element(const char *path, const char *name)
{
	size_t len = strlen(name);

	for (const char *e = path; e && *e; e = strchr(e, '/')) {
		e += *e == '/';
		if (strncmp(e, name, len) == 0 && (e[len] == '/' || e[len] == '\0'))
			return true;
	}
	return false;
}

/* Parent links followed at most, so that a loop (a pid reused by a
 * process's own ancestor) cannot hang a walk. */
#define SELECTION_TREE_MAX_DEPTH 64

/* Whether p is root or descends from it, by the parents a holds. */
static bool descends_from(struct aggregator *a, const struct process *p, uint32_t root)
{
	for (int depth = 0; p && depth < SELECTION_TREE_MAX_DEPTH; depth++) {
		if (p->pid == root)
			return true;
		if (!p->ppid || p->ppid == p->pid)
			return false;
		p = aggregator_find_process(a, p->ppid);
	}
	return false;
}

/* Whether p is a member of a collector's tree (struct selection): its
 * pid and incarnation; the root's incarnation is the first one met. */
static bool tree_member(struct u64map *members, uint32_t pid, uint64_t start_time_ns)
{
	uint64_t *v = u64map_get(members, pid);

	if (!v)
		return false;
	if (*v == 0)
		*v = start_time_ns;
	return *v == start_time_ns;
}

/* Makes the process (pid, start) a member of every tree collector that
 * has its parent (ppid, parent_start; 0: the one the store holds now, or
 * any) as one. */
static void adopt(struct aggregator *a, uint32_t pid, uint64_t start, uint32_t ppid,
		  uint64_t parent_start)
{
	struct process *parent = NULL;

	if (!ppid || ppid == pid)
		return;
	if (!parent_start) {
		parent = aggregator_find_process(a, ppid);
		parent_start = parent && !parent->exited ? parent->start_time_ns : 0;
	}
	for (struct collector *c = a->collectors; c; c = c->next) {
		uint64_t *v;

		if (!c->sel.tree_members || !u64map_get(c->sel.tree_members, ppid) ||
		    (parent_start && !tree_member(c->sel.tree_members, ppid, parent_start)))
			continue;
		v = u64map_upsert(c->sel.tree_members, pid, NULL);
		if (v)
			*v = start;
	}
}

bool aggregator_follows(const struct aggregator *a, uint32_t pid, const struct collector *except)
{
	for (const struct collector *c = a->collectors; c; c = c->next)
		if (c != except && c->sel.tree_members && u64map_get(c->sel.tree_members, pid))
			return true;
	return false;
}

bool selection_matches(struct aggregator *a, const struct selection *sel, const struct process *p)
{
	uint64_t ns_per_tick = a->ns_per_tick;

	if (sel->n_pids > 0) {
		bool found = false;

		for (size_t i = 0; i < sel->n_pids && !found; i++)
			found = sel->pids[i] == p->pid;
		if (!found || (sel->n_pids == 1 && sel->start_ticks &&
			       p->start_time_ns / ns_per_tick != sel->start_ticks))
			return false;
	}
	if (sel->comm[0] && strncmp(sel->comm, p->comm, PERFD_TASK_COMM_LEN - 1) != 0)
		return false;
	if (sel->cgroup[0]) {
		size_t len = strlen(sel->cgroup);

		/* the cgroup itself or one below it */
		while (len > 1 && sel->cgroup[len - 1] == '/')
			len--;
		if (!p->cgroup || strncmp(p->cgroup, sel->cgroup, len) != 0 ||
		    (p->cgroup[len] != '\0' && p->cgroup[len] != '/' && len > 1))
			return false;
	}
	if (sel->unit[0] && (!p->cgroup || !path_has_element(p->cgroup, sel->unit)))
		return false;
	if (sel->tree && !(sel->tree_members ? tree_member(sel->tree_members, p->pid, p->start_time_ns) :
					       descends_from(a, p, sel->tree)))
		return false;
	if (!sel->all && !sel->n_pids && !sel->comm[0] && !sel->cgroup[0] && !sel->unit[0] &&
	    !sel->tree)
		return false;
	return !sel->visible || sel->visible(sel->visible_userdata, p);
}

/* The part of parts for process p, NULL when there is none. */
static struct profile_part *part_find(const struct profile_parts *parts, const struct process *p)
{
	for (size_t i = 0; i < parts->n; i++)
		if (parts->parts[i].process == p)
			return &parts->parts[i];
	return NULL;
}

/* The part of parts for process p, added (and p pinned) when new; NULL
 * when memory ran out. */
static struct profile_part *part_for(struct profile_parts *parts, struct process *p)
{
	struct profile_part *part = part_find(parts, p);

	if (part)
		return part;
	if (parts->n == parts->cap) {
		size_t cap = parts->cap ? 2 * parts->cap : 4;
		struct profile_part *q = realloc(parts->parts, cap * sizeof(*q));

		if (!q)
			return NULL;
		parts->parts = q;
		parts->cap = cap;
	}
	part = &parts->parts[parts->n++];
	part->process = p;
	profile_init(&part->prof);
	p->pins++;
	return part;
}

/* Which of its uid's shares (see struct collector) c may not go past to
 * take a sample of p, COLLECTOR_REFUSED_NONE when it may take it. */
static enum collector_refusal collector_refuses(const struct aggregator *a,
						const struct collector *c, const struct process *p)
{
	size_t bytes = 0, pins = 0;

	if (c->uid == 0)
		return COLLECTOR_REFUSED_NONE;
	for (const struct collector *o = a->collectors; o; o = o->next)
		if (o->uid == c->uid) {
			bytes += o->bytes;
			pins += o->parts.n;
		}
	if (a->limits.max_memory_bytes &&
	    bytes >= a->limits.max_memory_bytes / AGG_SNAPSHOT_MEMORY_SHARE)
		return COLLECTOR_REFUSED_MEMORY;
	if (!part_find(&c->parts, p) &&
	    pins >= MAX(a->limits.max_processes / AGG_SNAPSHOT_PIN_SHARE, 1))
		return COLLECTOR_REFUSED_PINS;
	return COLLECTOR_REFUSED_NONE;
}

static void feed_collectors(struct aggregator *a, struct process *p,
			    const struct perfd_sample *s, uint64_t key, uint64_t value)
{
	for (struct collector *c = a->collectors; c; c = c->next) {
		struct profile_part *part;
		enum collector_refusal refused;
		size_t before;

		if (s->hdr.timestamp_ns < c->begin_ns || s->hdr.timestamp_ns > c->end_ns ||
		    !owner_filter_takes(&c->sel.owners, s->owner_uid) ||
		    !selection_matches(a, &c->sel, p))
			continue;
		refused = collector_refuses(a, c, p);
		if (refused != COLLECTOR_REFUSED_NONE) {
			c->samples_refused++;
			c->refused_by = refused;
			(*(refused == COLLECTOR_REFUSED_MEMORY ? &a->stats.snapshot_samples_refused_memory :
								&a->stats.snapshot_samples_refused_pins))++;
			continue;
		}
		part = part_for(&c->parts, p);
		if (!part)
			continue;
		before = profile_memory(&part->prof);
		if (profile_add(&part->prof, a->stacks, key, value) == 0)
			c->samples++;
		c->bytes += profile_memory(&part->prof) - before;
		a->collector_bytes += profile_memory(&part->prof) - before;
	}
}

/* Books what adding to p's history did: its bytes, and a new window,
 * which can fall due before anything it held. */
static void history_added(struct aggregator *a, struct process *p, size_t bytes_before,
			  size_t windows_before)
{
	a->history_bytes += p->history.bytes - bytes_before;
	if (p->history.n_windows != windows_before)
		due_now(a, p);
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
static int ingest_sample(struct aggregator *a, const struct perfd_sample *s, size_t size,
			 struct process *waited)
{
	enum profile_kind kind = s->value_kind == PERFD_VALUE_MEMORY ? PROFILE_KIND_MEMORY :
								       PROFILE_KIND_CPU;
	/* A CPU sample stands for s->value mean periods: 1, or more for
	 * the jittered tick that passed several blocks' targets. */
	uint64_t value = s->value;
	/* the specials: kernel error, user error; and the last slot, kept for
	 * the root marker whether there is one or not */
	uint64_t frames[2 * PERFD_MAX_STACK_DEPTH + PERFD_MAX_PYTHON_DEPTH + 3];
	const size_t frames_cap = ELEMENTSOF(frames) - 1; /* for all but the marker */
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

	if (kd > PERFD_MAX_STACK_DEPTH || ud > PERFD_MAX_STACK_DEPTH ||
	    s->python_depth > PERFD_MAX_PYTHON_DEPTH || s->value_kind > PERFD_VALUE_MEMORY ||
	    (kind == PROFILE_KIND_CPU && (value == 0 || value > PERFD_CPU_VALUE_MAX)) ||
	    size < sizeof(*s) + (kd + ud) * sizeof(uint64_t) +
			   s->python_depth * sizeof(struct perfd_python_frame))
		return -EINVAL;

	cpu = kind == PROFILE_KIND_CPU ? value : 0;
	if (waited) {
		p = waited;
	} else {
		a->stats.samples += cpu;
		p = process_for(a, &s->hdr, s->comm, s->page_size, s->flags & PERFD_SAMPLE_F_KTHREAD,
				!switched);
		if (!p) {
			/* no room and nothing evictable, or out of memory */
			a->stats.samples_evicted += cpu;
			return 0;
		}
		if (ud > 0 && wait_for_maps(a, p, s, kd, ud) && park(a, p, s, size))
			return 0;
	}

	/* who may see it now: the newest sample says (one drained late
	 * does not undo a change) */
	if (s->hdr.timestamp_ns >= p->owner_ns) {
		set_owner(p, s->owner_uid, s->hdr.timestamp_ns);
	}
	if (s->kernel_depth < 0) {
		a->stats.kernel_stack_errors++;
		frames[n++] = frame_make(FRAME_MODULE_SPECIAL, FRAME_SPECIAL_KSTACK_ERROR);
	}
	/* Every frame but the first of each part is a return address: step
	 * back into the call instruction so it names the caller's line. */
	{
		/* the program and bpf_trace_run2() of a memory sample go */
		uint32_t skip = kind == PROFILE_KIND_MEMORY && kd > PERFD_MEMORY_KSTACK_SKIP ?
					PERFD_MEMORY_KSTACK_SKIP : 0;

		for (uint32_t i = skip; i < kd; i++)
			frames[n++] = frame_make(FRAME_MODULE_KERNEL, s->ips[i] - (i > skip));
	}
	kernel_n = n;
	if (s->user_depth < 0) {
		a->stats.user_stack_errors++;
		frames[n++] = frame_make(FRAME_MODULE_SPECIAL, FRAME_SPECIAL_USTACK_ERROR);
	}
	for (uint32_t i = 0; i < ud; i++)
		frames[n++] = user_frame(a, p, s->ips[kd + i] - (i > 0),
					 s->hdr.timestamp_ns);
	/* BPF met code without tables for it, or the process has none (they
	 * were dropped at an exec whose event was lost, or could not be
	 * uploaded): describing its maps again is what brings them back.
	 * Addresses outside the maps also re-read them (wait_for_maps);
	 * this sample's are in them, so it need not wait for the read. */
	if ((s->flags & PERFD_SAMPLE_F_NEEDS_MAPS) && p->maps)
		(void)reread_maps_if_due(a, p, s->hdr.timestamp_ns);
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

	if (kind == PROFILE_KIND_CPU) {
		p->total_samples += value;
		if (s->owner_uid == p->owner_uid)
			p->owner_samples += value;
		p->last_sample_ns = s->hdr.timestamp_ns;
		count_bucket(p, s->hdr.timestamp_ns, s->owner_uid, value);
	} else {
		a->stats.memory_samples++;
		p->memory_sampled_bytes += value;
	}
	remember_thread(a, p, s);
	if (s->hdr.tid == s->hdr.tgid) {
		memcpy(p->comm, s->comm, sizeof(p->comm));
		p->comm[PERFD_TASK_COMM_LEN - 1] = 0;
	}
	if (!(s->flags & PERFD_SAMPLE_F_KTHREAD) && !switched)
		note_rss(a, p, s->hdr.timestamp_ns, s->rss_pages, s->hiwater_rss_pages, s->page_size);
	feed_collectors(a, p, s, key, value);
	stacktab_unref(a->stacks, id);
	enforce_memory(a, p);
	return 0;
}

static void ingest_exit(struct aggregator *a, const struct perfd_exit *e)
{
	struct process *p = lookup(a, e->hdr.tgid, e->hdr.start_time_ns);
	struct collector *c, *next;

	a->stats.exit_events++;
	if (p)
		mark_exited(a, p);
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
	struct process *p = process_for(a, &f->hdr, f->comm, f->page_size, false, false);

	if (p)
		p->ppid = f->parent_tgid;
	adopt(a, f->hdr.tgid, f->hdr.start_time_ns, f->parent_tgid, f->parent_start_time_ns);
}

/* Ingests the samples that waited for p's maps, oldest first, with the
 * maps p has now. */
static void ingest_parked(struct aggregator *a, struct process *p)
{
	struct parked_sample *ps = p->parked;

	p->parked = NULL;
	p->parked_tail = &p->parked;
	p->n_parked = 0;
	p->pins++; /* not evicted while its own samples go in */
	while (ps) {
		struct parked_sample *next = ps->next;

		a->parked_bytes -= sizeof(*ps) + ps->size;
		(void)ingest_sample(a, (const struct perfd_sample *)ps->record, ps->size, p);
		free(ps);
		ps = next;
	}
	p->pins--;
}

/* p's maps changed under a read still on the lane (an exec): the read is
 * dropped when it comes back, and the samples that waited go in with the
 * maps p had. */
static void forget_maps_read(struct aggregator *a, struct process *p)
{
	if (!p->maps_job)
		return;
	p->maps_job->owner = NULL;
	p->maps_job = NULL;
	ingest_parked(a, p);
}

int aggregator_start_maps_lane(struct aggregator *a)
{
	return a->maps_lane ? 0 :
			      offload_new(&(struct offload_opts){ .lanes = 1, .take_back = true },
					  &a->maps_lane);
}

int aggregator_fd(const struct aggregator *a)
{
	return a->maps_lane ? offload_fd(a->maps_lane) : -1;
}

void aggregator_complete(struct aggregator *a)
{
	struct offload_job *done = a->maps_lane ? offload_take_done(a->maps_lane) : NULL, *next;

	for (; done; done = next) {
		struct mapsread *j = mapsread_of(done);
		struct process *p = j->owner;

		next = done->next;
		a->stats.maps_reads_pending--;
		if (p) {
			p->maps_job = NULL;
			(void)maps_read_done(a, p, j);
			ingest_parked(a, p);
		}
		mapsread_free(j);
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
		return ingest_sample(a, record, size, NULL);
	case PERFD_EVENT_EXIT:
		if (size < sizeof(struct perfd_exit))
			return -EINVAL;
		ingest_exit(a, record);
		return 0;
	case PERFD_EVENT_RSS: {
		const struct perfd_rss *r = record;

		if (size < sizeof(*r))
			return -EINVAL;
		a->stats.rss_updates++;
		p = process_for(a, h, r->comm[0] ? r->comm : NULL, r->page_size, false, false);
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
		p = lookup(a, h->tgid, h->start_time_ns);
		if (!p && aggregator_follows(a, h->tgid, NULL)) {
			/* a process a tree follows (collect/sampler.h), never
			 * sampled: looked at now, its new maps (and runtime)
			 * included */
			p = process_for(a, h, r->comm, r->page_size, false, true);
			if (p) {
				p->exec_ns = h->timestamp_ns;
				note_rss(a, p, h->timestamp_ns, r->rss_pages, r->hiwater_rss_pages,
					 r->page_size);
			}
		} else if (p) {
			_cleanup_close_ int dirfd = -1;

			/* what waits for the old image's maps goes in first */
			forget_maps_read(a, p);
			(void)open_proc(p, &dirfd);
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
			notify_gone(a, p);
			/* its name first, from /proc: a process first seen
			 * between fork and exec (its copy-on-write faults) had
			 * its parent's, its samples from before the exec (read
			 * after it) have set it back, and its main thread may
			 * never run on a sampled tick.  Not the record's: it
			 * may be from an exec before the one /proc shows now.
			 * A process already gone keeps the name the record
			 * carries. */
			read_comm(p, dirfd, r->comm);
			/* a followed process's new image is looked at now,
			 * sampled yet or not (its runtime: Python) */
			read_identity_and_maps(a, p, dirfd, true,
					       p->maps_read_ns != 0 || aggregator_follows(a, p->pid, NULL));
		}
		return 0;
	}
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

/* The members of c's tree among the processes the store holds now, by
 * the parents it holds: decided once, here; later ones are decided as
 * they come (adopt).  Out of memory, c's selection walks the parents at
 * each sample instead. */
static void seed_tree(struct aggregator *a, struct collector *c)
{
	bool ok;

	u64map_init(&c->tree_members);
	c->sel.tree_members = NULL;
	ok = u64map_upsert(&c->tree_members, c->sel.tree, NULL) != NULL;
	for (size_t i = 0; ok && i < a->n_procs; i++) {
		struct process *p = a->procs[i];
		uint64_t *v;

		if (p->exited || !descends_from(a, p, c->sel.tree))
			continue;
		v = u64map_upsert(&c->tree_members, p->pid, NULL);
		ok = v != NULL;
		if (ok)
			*v = p->start_time_ns;
	}
	if (ok)
		c->sel.tree_members = &c->tree_members;
	else
		u64map_done(&c->tree_members);
}

void aggregator_add_collector(struct aggregator *a, struct collector *c)
{
	if (c->sel.tree)
		seed_tree(a, c);
	c->parts = (struct profile_parts){ 0 };
	c->bytes = 0;
	c->samples = c->samples_refused = 0;
	c->refused_by = COLLECTOR_REFUSED_NONE;
	c->exited = false;
	c->next = a->collectors;
	a->collectors = c;
}

void aggregator_remove_collector(struct aggregator *a, struct collector *c)
{
	for (struct collector **pp = &a->collectors; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			/* its parts are the caller's now, answered at once */
			a->collector_bytes -= c->bytes;
			break;
		}
	c->next = NULL;
	if (c->sel.tree_members) {
		u64map_done(&c->tree_members);
		c->sel.tree_members = NULL;
	}
}

void aggregator_release_parts(struct aggregator *a, struct profile_parts *parts)
{
	for (size_t i = 0; i < parts->n; i++) {
		struct process *p = parts->parts[i].process;

		profile_release(&parts->parts[i].prof, a->stacks);
		if (!--p->pins)
			due_now(a, p); /* an exited one may go now */
	}
	free(parts->parts);
	*parts = (struct profile_parts){ 0 };
}

int aggregator_query_process(struct aggregator *a, struct process *p, uint64_t from_ns,
			     uint64_t to_ns, const struct owner_filter *owners,
			     struct profile_parts *parts)
{
	uint64_t first = UINT64_MAX, end = 0;
	struct profile_part *part = part_for(parts, p);

	if (!part)
		return -ENOMEM;
	if (history_query(&p->history, a->stacks, now_monotonic_ns(), from_ns, to_ns, owners,
			  &part->prof, &first, &end) < 0) {
		profile_release(&part->prof, a->stacks);
		p->pins--;
		parts->n--;
		return -ENOMEM;
	}
	return 0;
}

int aggregator_query(struct aggregator *a, const struct selection *sel, uint64_t from_ns,
		     uint64_t to_ns, struct profile_parts *ret, uint64_t *first_ns,
		     uint64_t *end_ns)
{
	struct profile_parts parts = { 0 };
	uint64_t first = UINT64_MAX, end = 0;
	/* once: every process's window in progress is cut at the same now */
	uint64_t now = now_monotonic_ns();

	for (size_t i = 0; i < a->n_procs; i++) {
		struct process *p = a->procs[i];
		struct profile_part *part;

		if (history_empty(&p->history) || !selection_matches(a, sel, p))
			continue;
		part = part_for(&parts, p);
		if (!part || history_query(&p->history, a->stacks, now, from_ns, to_ns,
					   &sel->owners, &part->prof, &first, &end) < 0) {
			aggregator_release_parts(a, &parts);
			return -ENOMEM;
		}
		if (part->prof.values.count == 0) {
			/* nothing in the range: not part of the answer */
			profile_release(&part->prof, a->stacks);
			p->pins--;
			parts.n--;
		}
	}
	*ret = parts;
	*first_ns = first == UINT64_MAX ? 0 : first;
	*end_ns = end;
	return 0;
}

void aggregator_scale_cpu(struct aggregator *a, uint64_t num, uint64_t den)
{
	if (num == den || !num || !den)
		return;
	for (size_t i = 0; i < a->n_procs; i++) {
		struct process *p = a->procs[i];
		size_t before = p->history.bytes;

		if (history_scale(&p->history, a->stacks, PROFILE_KIND_CPU, num, den, &a->scale_rng) < 0) {
			/* no memory to write it again: what it held is dropped, counted */
			struct history_dropped d = { 0 };

			while (history_drop_oldest(&p->history, a->stacks, &d))
				;
			a->stats.windows_evicted += d.windows;
			for (int k = 0; k < PROFILE_KINDS; k++)
				a->stats.values_evicted[k] += d.values[k];
		}
		a->history_bytes += p->history.bytes - before;
		due_now(a, p);
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
			profile_scale(&c->parts.parts[i].prof, a->stacks, PROFILE_KIND_CPU, num, den,
				      &a->scale_rng);
			c->bytes += profile_memory(&c->parts.parts[i].prof);
		}
		a->collector_bytes += c->bytes;
	}
	enforce_memory(a, NULL); /* larger values take more room */
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
		a->stats.samples_expired += d.values[PROFILE_KIND_CPU];
		/* An exited process stays while it has data to answer with. */
		if (p->exited && history_empty(&p->history) && !p->pins) {
			a->stats.processes_expired++;
			remove_process(a, i);
			continue;
		}
		a->due_s[i] = history_due_s(&p->history, a->limits.retention_s);
		i++;
	}
	enforce_memory(a, NULL);
}

struct process *aggregator_restore_process(struct aggregator *a, const struct process_restored *r)
{
	const struct perfd_event_header h = { .tgid = r->pid, .start_time_ns = r->start_time_ns };
	_cleanup_close_ int dirfd = -1;
	struct process *p = lookup(a, r->pid, r->start_time_ns);
	bool known = p != NULL;

	if (!p) {
		p = process_add(a, &h, (uint32_t)r->page_size, r->kthread);
		if (!p)
			return NULL;
	}
	a->process_bytes -= process_bytes(p);
	memcpy(p->comm, r->comm, sizeof(p->comm));
	p->comm[PERFD_TASK_COMM_LEN - 1] = 0;
	/* its owner as of its newest sample written (an earlier record does
	 * not undo a later one, nor what /proc said of a running process),
	 * and what that owner may count of it: ps's total_samples to a
	 * non-root asker */
	if (!known || r->last_sample_ns >= p->owner_ns)
		set_owner(p, r->owner_uid, r->last_sample_ns);
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
	a->process_bytes += process_bytes(p);
	if (known)
		return p;
	/* Still running: who it is now, as for a process seen for the first
	 * time; its maps at its first sample with a stack, as for one seen
	 * only in RSS records (read_identity_and_maps): reading every live
	 * process's at once had the unwinder build and describe tables for
	 * all of them in one burst, the loop deaf for seconds.  Else it is
	 * over. */
	if (!p->kthread && open_proc(p, &dirfd) == 0)
		read_identity_and_maps(a, p, dirfd, true, false);
	else if (p->kthread && procfs_open_pid(p->pid, p->start_time_ns, &dirfd) == 0)
		;
	else
		mark_exited(a, p);
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
		due_now(a, p);
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
	ret->windows = 0;
	for (size_t i = 0; i < a->n_procs; i++)
		ret->windows += a->procs[i]->history.n_windows;
	ret->processes = a->n_procs;
	ret->stacks = stacktab_count(a->stacks) - 1; /* not the placeholder */
	ret->frames = stacktab_frames(a->stacks) - 1;
	ret->history_bytes = a->history_bytes;
	ret->memory_bytes = store_memory(a);
	ret->snapshot_bytes = a->collector_bytes;
	ret->restored_table_bytes = a->restored_table_bytes;
}
