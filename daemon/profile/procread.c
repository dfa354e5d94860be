/* SPDX-License-Identifier: MIT */
/*
 * procread.c - what the store reads of a process under /proc: its comm, owner
 * and parent, its executable mappings (on the maps lane, re-read on a
 * miss with a backoff) and their modules, and its JIT map.
 * The store's design is aggregate.h's; what its files share,
 * aggregate_internal.h's.
 *
 * The module of a new file mapping is found in three steps (the module
 * registry's plan / probe / apply, process/modules.h): the loop plans
 * (table look-ups, a descriptor slot reserved), a maps lane probes (the
 * stat of /proc/PID/map_files, the open, the build-id: what a FUSE or NFS
 * server, or a process's mmap lock, can hold for as long as it likes),
 * and the loop applies the result to the table.  Samples in mappings
 * still being probed wait (ingest.c's wait_for_maps), bounded as those
 * waiting for a maps read, and go in when the probe is back or after
 * MODPROBE_WAIT_NS; a probe given up on still names the maps when it is
 * back.  A device whose probe is stuck is probed no more until it
 * answers, so that one server holds one lane, mostly (jobs planned before
 * it was seen stuck may still run into it); one lane is always left to
 * the maps reads.  With every job slot taken, jobs wait in a queue.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "process/mapsread.h"
#include "process/procfs.h"
#include "process/procmaps.h"
#include "profile/aggregate_internal.h"

/* Opens p's /proc directory, checked against its start time (procfs.h):
 * everything read through it is p's, so one check serves all the files
 * read at once.  A process found gone (exited, or its pid another
 * process's now) stays gone: it is not looked for again, which spares
 * the failed opens of every later event of a short-lived process.
 * Returns 0 or -errno. */
int agg_open_proc(struct process *p, int *ret_dirfd)
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
void agg_read_comm(struct process *p, int dirfd, const char *otherwise)
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
void agg_set_owner(struct process *p, uint32_t owner, uint64_t ns)
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
 * (agg_ingest_sample). */
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
	agg_set_owner(p, owner, now_monotonic_ns());
	if (dirfd < 0)
		return;
	if (procfs_read_cgroup(dirfd, &cgroup) == 0) {
		free(p->cgroup);
		p->cgroup = cgroup;
	}
}

/* Whether some executable mapping of maps is anonymous code (JIT-compiled,
 * or CPython's perf trampolines): no file, so nothing but a JIT map can
 * name it (agg_user_frame).  Not the vDSO, nor the kernel's legacy
 * [vsyscall] page, which every x86-64 process shows. */
static bool has_anonymous_code(const struct procmaps *maps)
{
	for (size_t i = 0; i < maps->n; i++) {
		const struct procmap *m = &maps->maps[i];

		if (procmap_fileless(m) && strcmp(m->path, "[vsyscall]") != 0 &&
		    strcmp(m->path, "[vdso]") != 0)
			return true;
	}
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

/* The new file mappings of one read of a process's maps, identified on
 * the lane (the head of this file): the loop plans each (registry plan), the lane
 * probes them (registry probe: the stat, open and build-id), the loop
 * applies them (registry apply) in aggregator_complete.  owner NULL: the
 * process was freed or its maps replaced since; the results are only
 * released. */
struct modprobe_item {
	uint32_t map_index; /* of the mapping in owner->maps */
	struct module_probe probe;
};

struct modprobe_job {
	struct offload_job job; /* first: the lane's part */
	struct process *owner;
	void (*probe)(struct module_probe *p);
	void (*probe_jit)(struct jit_probe *p);
	bool jit_wanted; /* the process's JIT map is looked for too, last */
	struct jit_probe jit;
	uint64_t submitted_ns;
	/* the item the lane is probing (SIZE_MAX: none yet), since when:
	 * in it for long, or given up on, the device of its mapping is slow
	 * until the job is back (dev_slow) */
	atomic_size_t at;
	_Atomic uint64_t at_ns;
	bool late;
	struct modprobe_job *next_queued; /* waiting for a slot (MODPROBE_JOBS_MAX) */
	size_t n, cap;
	struct modprobe_item items[];
};

static void modprobe_run(struct offload_job *job)
{
	struct modprobe_job *j = (struct modprobe_job *)job;

	for (size_t i = 0; i < j->n && !atomic_load(j->job.cancel); i++) {
		/* the time first: read the other way round, an item is never
		 * older than it is */
		atomic_store(&j->at_ns, now_monotonic_ns());
		atomic_store(&j->at, i);
		j->probe(&j->items[i].probe);
	}
	atomic_store(&j->at, j->n);
	if (j->jit_wanted && !atomic_load(j->job.cancel))
		j->probe_jit(&j->jit);
}

/* The next item of *jobp, grown as needed (up to MODULES_PER_READ), or
 * NULL when out of memory.  Only the item's map_index is the caller's to
 * set, and n to count it once planned. */
static struct modprobe_item *modprobe_next(struct modprobe_job **jobp)
{
	struct modprobe_job *j = *jobp;

	if (!j || j->n == j->cap) {
		size_t cap = j ? MIN(2 * j->cap, (size_t)MODULES_PER_READ) : 8;
		struct modprobe_job *bigger;

		if (j && j->n == cap)
			return NULL;
		bigger = realloc(j, sizeof(*j) + cap * sizeof(j->items[0]));
		if (!bigger)
			return NULL;
		if (!j)
			*bigger = (struct modprobe_job){ .n = 0 };
		bigger->cap = cap;
		*jobp = j = bigger;
	}
	return &j->items[j->n];
}

/* Without the registry (the lanes stop first at shutdown): closes what
 * the probes opened, frees their copies. */
static void modprobe_free(struct offload_job *job)
{
	struct modprobe_job *j = (struct modprobe_job *)job;

	for (size_t i = 0; i < j->n; i++) {
		if (j->items[i].probe.fd >= 0)
			close(j->items[i].probe.fd);
		free(j->items[i].probe.map.path);
	}
	if (j->jit_wanted && j->jit.fd >= 0)
		close(j->jit.fd);
	free(j);
}

/* With the registry: gives back what the probes hold and frees j. */
static void modprobe_done(struct aggregator *a, struct modprobe_job *j)
{
	for (size_t i = 0; i < j->n; i++)
		a->modules.done(a->modules.ctx, &j->items[i].probe);
	if (j->jit_wanted)
		a->modules.jit_done(a->modules.ctx, &j->jit);
	free(j);
}

/* The device of a mapping whose probe has been in one file for longer
 * than MODPROBE_WAIT_NS, or was given up on, is slow while that probe is
 * out: its files are not probed meanwhile, so that one server that does
 * not answer holds one lane, not one per re-read.  (A process whose mmap
 * lock is held that long blames the device of the file being probed: it
 * is only not probed for as long.) */
static dev_t item_dev(const struct modprobe_item *it)
{
	return makedev(it->probe.map.dev_major, it->probe.map.dev_minor);
}

static bool dev_slow(struct aggregator *a, dev_t dev, uint64_t now_ns)
{
	for (size_t i = 0; i < a->n_probe_jobs; i++) {
		struct modprobe_job *j = a->probe_jobs[i];
		size_t at = atomic_load(&j->at);
		uint64_t since = atomic_load(&j->at_ns);

		/* not j->late: a job given up on while it only waited for a
		 * lane is no sign of a slow device */
		if (at < j->n && item_dev(&j->items[at]) == dev && now_ns > since &&
		    now_ns - since > MODPROBE_WAIT_NS)
			return true;
	}
	return false;
}



static bool probes_on_lane(const struct aggregator *a)
{
	return a->maps_lane && a->modules.plan && a->modules.probe && a->modules.apply &&
	       a->modules.done;
}

/* Tells the hooks p's maps changed, unless p has exited: they were told
 * it is gone then (agg_mark_exited), and would describe it again, to no
 * one, for good.  A probe or a read out at the exit comes back later. */
static void tell_maps_changed(struct aggregator *a, struct process *p)
{
	if (a->hooks.maps_changed && !p->exited)
		a->hooks.maps_changed(a->hooks.userdata, p);
}

/* --- the JIT map ----------------------------------------------------------
 *
 * The process's JIT map, as its JIT wrote it: /tmp/perf-<pid in its own
 * namespace>.map, else its jitdump /tmp/jit-<pid>.dump (CPython's -X
 * perf_jit, the JVM's and V8's perf agents), under its own root, owned by
 * its user or root (the module registry refuses anything else:
 * process/modules.h).  Looked for where the process has code no file
 * names (has_anonymous_code), and again every JIT_MAP_RECHECK_NS while a
 * sample is in such code and none was found (agg_user_frame): a JIT may
 * write its map only once it has compiled something.  The opens are a
 * probe's like a file mapping's, for the same reason (the file system is
 * the process's choice), and go with the process's probe job, last; its
 * samples in such code wait for them as for the files.  Not looked for
 * in a process found gone. */

static const char *const jit_map_formats[JIT_PROBE_PATHS] = { "/tmp/perf-%u.map",
							      "/tmp/jit-%u.dump" };

static void jit_request(const struct process *p, struct jit_probe *ret)
{
	*ret = (struct jit_probe){ .pid = p->pid, .start_time_ns = p->start_time_ns,
				   .owner_uid = p->owner_uid, .fd = -1 };
	for (size_t i = 0; i < JIT_PROBE_PATHS; i++)
		snprintf(ret->paths[i], sizeof(ret->paths[i]), jit_map_formats[i], p->ns_pid);
}

/* What the look for p's JIT map found (jp, probed), taken in. */
static void take_jit(struct aggregator *a, struct process *p, struct jit_probe *jp)
{
	int id;

	if (jp->error == -ESRCH)
		p->proc_gone = true;
	id = a->modules.jit_apply(a->modules.ctx, jp);
	if (id > 0 && !p->jit_module)
		p->jit_module = (uint16_t)id;
}

/* Looks for p's JIT map: planned into *jobp (made if NULL) for the lane,
 * or at once without one. */
static void find_jit_map(struct aggregator *a, struct process *p, struct modprobe_job **jobp)
{
	struct jit_probe jp;
	int id;

	if (p->proc_gone || p->jit_module)
		return;
	p->jit_checked_ns = now_monotonic_ns(); /* the clock of samples' times */
	jit_request(p, &jp);
	id = a->modules.jit_plan(a->modules.ctx, &jp);
	if (id > 0)
		p->jit_module = (uint16_t)id;
	if (id != 0)
		return;
	if (!probes_on_lane(a)) {
		a->modules.jit_probe(&jp);
		take_jit(a, p, &jp);
	} else if (*jobp || modprobe_next(jobp)) {
		(*jobp)->jit = jp;
		(*jobp)->jit_wanted = true;
		return;
	}
	a->modules.jit_done(a->modules.ctx, &jp);
}

static void submit_probes(struct aggregator *a, struct process *p, struct modprobe_job *job);

void agg_find_jit_map(struct aggregator *a, struct process *p)
{
	struct modprobe_job *job = NULL;

	/* with a job out, the next sample in such code looks */
	if (probes_on_lane(a) && (p->probe_job || p->late_job || a->settled))
		return;
	find_jit_map(a, p, &job);
	if (!job)
		return;
	submit_probes(a, p, job);
	if (p->probe_job)
		p->maps_partial = true; /* samples in such code wait for it */
}

/* Whether p's probe has been out longer than MODPROBE_WAIT_NS at now_ns;
 * then it is given up on, and the samples that waited go in. */
bool agg_probes_late(struct aggregator *a, struct process *p, uint64_t now_ns)
{
	if (!p->probe_job || now_ns < p->probe_job->submitted_ns ||
	    now_ns - p->probe_job->submitted_ns < MODPROBE_WAIT_NS)
		return false;
	/* still p's: what it finds when it is back names the mappings, if
	 * they are still these (probes_done) */
	p->probe_job->late = true;
	p->late_job = p->probe_job;
	p->probe_job = NULL;
	agg_due_now(a, p); /* an exited one waited for it to be let go */
	a->stats.module_probes_late++;
	/* not probed again at once (each try would hold a lane the same
	 * way, and a re-read would forget the job, which names these maps
	 * when it is back): the next re-read waits the longest */
	p->maps_read_ns = now_ns;
	p->maps_reread_wait_ns = MAPS_REREAD_MAX_NS;
	tell_maps_changed(a, p);
	agg_ingest_parked(a, p);
	return true;
}

void agg_give_up_late_probes(struct aggregator *a, uint64_t now_ns)
{
	struct modprobe_job *jobs[MODPROBE_JOBS_MAX];
	size_t n = a->n_probe_jobs;

	/* a copy: giving up ingests samples, which may free processes (and
	 * orphan their jobs, which stay on the list until they are back) */
	memcpy(jobs, a->probe_jobs, n * sizeof(jobs[0]));
	for (size_t i = 0; i < n; i++)
		if (jobs[i]->owner && !jobs[i]->late)
			(void)agg_probes_late(a, jobs[i]->owner, now_ns);
	/* the queue is oldest first, and orphaned jobs stay in it until
	 * their turn: giving up changes no link */
	for (struct modprobe_job *j = a->probes_queued; j; j = j->next_queued) {
		if (now_ns < j->submitted_ns || now_ns - j->submitted_ns < MODPROBE_WAIT_NS)
			break;
		if (j->owner && !j->late)
			(void)agg_probes_late(a, j->owner, now_ns);
	}
}

void agg_forget_probes(struct process *p)
{
	if (p->probe_job)
		p->probe_job->owner = NULL;
	if (p->late_job)
		p->late_job->owner = NULL;
	p->probe_job = p->late_job = NULL;
}

/* The job's process lets go of it. */
static void unlink_job(struct modprobe_job *job)
{
	struct process *p = job->owner;

	if (p && p->late_job == job)
		p->late_job = NULL;
	else if (p && p->probe_job == job)
		p->probe_job = NULL;
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
			    uint16_t *modules, struct modprobe_job **ret_job)
{
	const struct procmaps *old = p->maps;
	size_t j = 0, budget = MODULES_PER_READ;
	bool lane = probes_on_lane(a);
	struct modprobe_job *job = NULL;
	uint64_t now_ns = lane ? now_monotonic_ns() : 0;

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
			id = a->modules.vdso(a->modules.ctx);
		} else if (procmap_fileless(m)) {
			id = -EINVAL; /* anonymous: no file to look up */
		} else if (budget == 0) {
			p->maps_partial = true;
			id = -EAGAIN;
		} else if (lane && dev_slow(a, makedev(m->dev_major, m->dev_minor), now_ns)) {
			/* its server does not answer: not now */
			budget--;
			p->maps_partial = true;
			id = -EAGAIN;
		} else if (lane) {
			/* identified on the lane: until then as past the budget */
			struct modprobe_item *it;

			p->maps_partial = true;
			id = -EAGAIN;
			budget--;
			it = modprobe_next(&job);
			if (it && a->modules.plan(a->modules.ctx, p->pid, m, false, &it->probe) == 0) {
				it->map_index = (uint32_t)i;
				job->n++;
			}
		} else {
			budget--;
			id = a->modules.for_mapping(a->modules.ctx, p->pid, p->owner_uid, m);
			/* the table is full: ids may be given back by then */
			if (id == -ENOSPC)
				p->maps_partial = true;
		}
		modules[i] = id > 0 ? (uint16_t)id : MODULE_NONE;
	}
	if (job && !job->n) {
		free(job);
		job = NULL;
	}
	*ret_job = job;
}

/* Hands job to the lanes, in one of the MODPROBE_JOBS_MAX slots. */
static int send_probes(struct aggregator *a, struct modprobe_job *job)
{
	int r = offload_submit(a->maps_lane, &job->job);

	if (r < 0)
		return r;
	a->probe_jobs[a->n_probe_jobs++] = job;
	a->stats.module_probes++;
	return 0;
}

/* Sends job (p's, for the maps p has now) to the lanes, or, with every
 * slot taken (a burst of new processes within one turn of the loop), to
 * the queue of those waiting for one; samples in its mappings wait for it
 * either way (wait_for_maps), MODPROBE_WAIT_NS at most from now.  Refused
 * (the queue is full too), it is given back: the mappings stay without a
 * module, re-read later as past the budget. */
static void submit_probes(struct aggregator *a, struct process *p, struct modprobe_job *job)
{
	job->owner = p;
	job->probe = a->modules.probe;
	job->probe_jit = a->modules.jit_probe;
	job->job.run = modprobe_run;
	job->job.free = modprobe_free;
	job->job.bytes = sizeof(*job) + job->cap * sizeof(job->items[0]);
	job->job.big = true; /* not on the lane kept for maps reads */
	atomic_store(&job->at, SIZE_MAX);
	job->submitted_ns = now_monotonic_ns();
	if (a->n_probe_jobs < MODPROBE_JOBS_MAX) {
		if (send_probes(a, job) < 0) {
			modprobe_done(a, job);
			return;
		}
	} else if (a->n_probes_queued < MODPROBE_QUEUED_MAX) {
		job->next_queued = NULL;
		*a->probes_queued_tail = job;
		a->probes_queued_tail = &job->next_queued;
		a->n_probes_queued++;
	} else {
		modprobe_done(a, job);
		return;
	}
	p->probe_job = job;
}

/* Sends the queued jobs slots have been given back for; those whose
 * process is gone or was given up on meanwhile are only released. */
static void send_queued_probes(struct aggregator *a)
{
	while (a->probes_queued && a->n_probe_jobs < MODPROBE_JOBS_MAX) {
		struct modprobe_job *job = a->probes_queued;
		struct process *p = job->owner;
		bool late = job->late;

		a->probes_queued = job->next_queued;
		if (!a->probes_queued)
			a->probes_queued_tail = &a->probes_queued;
		a->n_probes_queued--;
		/* one given up on too: what it finds names the mappings later */
		if (p && send_probes(a, job) == 0)
			continue;
		unlink_job(job);
		modprobe_done(a, job);
		if (!p || late)
			continue;
		/* refused by the lanes (never, short of shutdown): named
		 * with what is known */
		tell_maps_changed(a, p);
		agg_ingest_parked(a, p);
	}
}

void agg_free_queued_probes(struct aggregator *a)
{
	while (a->probes_queued) {
		struct modprobe_job *job = a->probes_queued;

		a->probes_queued = job->next_queued;
		unlink_job(job);
		modprobe_done(a, job);
	}
	a->probes_queued_tail = &a->probes_queued;
	a->n_probes_queued = 0;
}

/* The end of job on the loop: each probe applied to the module table and
 * its id given to its mapping, if the maps are still those it was
 * planned for; the unwinder and the rest told; the samples that waited
 * go in. */
static void probes_done(struct aggregator *a, struct modprobe_job *job)
{
	struct process *p = job->owner;
	struct modprobe_job *follow = NULL;
	bool again = false;

	for (size_t i = 0; i < a->n_probe_jobs; i++)
		if (a->probe_jobs[i] == job) {
			a->probe_jobs[i] = a->probe_jobs[--a->n_probe_jobs];
			break;
		}
	if (!p) {
		modprobe_done(a, job);
		return;
	}
	unlink_job(job);
	/* Given up on, and back at last: its ids are for the maps p still
	 * has (a new read forgets it), the samples that waited went in, and
	 * what it could not name waits for a re-read. */
	if (job->late) {
		for (size_t i = 0; i < job->n; i++) {
			int id = a->modules.apply(a->modules.ctx, p->owner_uid,
						  &job->items[i].probe);

			if (id > 0)
				p->map_modules[job->items[i].map_index] = (uint16_t)id;
		}
		if (job->jit_wanted)
			take_jit(a, p, &job->jit);
		modprobe_done(a, job);
		if (!p->probe_job)
			tell_maps_changed(a, p);
		return;
	}
	for (size_t i = 0; i < job->n; i++) {
		uint32_t index = job->items[i].map_index;
		int id = a->modules.apply(a->modules.ctx, p->owner_uid, &job->items[i].probe);
		struct modprobe_item *it;

		if (id > 0) {
			p->map_modules[index] = (uint16_t)id;
			continue;
		}
		again |= id == -EAGAIN || id == -ENOSPC;
		/* stat'ed as a file the table knew, and it is another now:
		 * opened by a second probe, not here */
		if (id != -EAGAIN)
			continue;
		it = modprobe_next(&follow);
		if (it && a->modules.plan(a->modules.ctx, p->pid, &p->maps->maps[index], true,
					  &it->probe) == 0) {
			it->map_index = index;
			follow->n++;
		}
	}
	if (job->jit_wanted)
		take_jit(a, p, &job->jit);
	modprobe_done(a, job);
	if (follow && follow->n) {
		submit_probes(a, p, follow);
		if (p->probe_job) {
			p->maps_partial = true;
			return; /* the samples wait on */
		}
	} else {
		free(follow);
	}
	/* what is still without a module waits for a re-read, as past the
	 * budget; the rest is named now */
	p->maps_partial = again;
	for (size_t i = 0; i < p->maps->n && !p->maps_partial; i++) {
		const struct procmap *m = &p->maps->maps[i];

		if (p->map_modules[i] == MODULE_NONE && !procmap_fileless(m))
			p->maps_partial = true;
	}
	tell_maps_changed(a, p);
	agg_ingest_parked(a, p);
}

/* Takes maps (p's, just read; consumed) as p's and resolves the module of
 * each, opening binaries while the process still lives.  dirfd is p's
 * /proc directory, -1 to open it here if needed; named: the caller has
 * just read p's name from it.  Returns whether they changed. */
static bool apply_maps(struct aggregator *a, struct process *p, struct procmaps *maps, int dirfd,
		       bool named)
{
	_cleanup_close_ int own = -1;
	struct modprobe_job *job = NULL;
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
		if (dirfd < 0 && agg_open_proc(p, &own) == 0)
			dirfd = own;
		agg_read_comm(p, dirfd, NULL);
	}
	/* a job for the maps p had is for mappings these may not have (an
	 * exec forgets it first: agg_forget_waits) */
	agg_forget_probes(p);
	resolve_modules(a, p, maps, modules, &job);
	/* Only where there is code for it to name: the two look-ups cost
	 * more than the rest of a short process's reads, and a sample in code
	 * mapped later makes agg_user_frame look.  With the files' probes,
	 * after them. */
	if (!p->jit_module && has_anonymous_code(maps))
		find_jit_map(a, p, &job);
	a->process_bytes -= agg_process_bytes(p);
	procmaps_free(p->maps);
	free(p->map_modules);
	p->maps = maps;
	p->map_modules = modules;
	a->process_bytes += agg_process_bytes(p);
	if (job) {
		bool jit = job->jit_wanted;

		submit_probes(a, p, job);
		/* samples in code no file names wait for the JIT map's look */
		if (jit && p->probe_job)
			p->maps_partial = true;
	}
	/* With a probe out, the hooks hear of these maps when it is done
	 * (probes_done) or given up on: the Python runtime is looked for in
	 * the binaries' modules, and not again for the same maps. */
	if (!p->probe_job)
		tell_maps_changed(a, p);
	return changed;
}

/* After a re-read on a miss (agg_reread_maps_if_due) found the maps changed
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
	if (dirfd < 0 && agg_open_proc(p, &own) == 0)
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
 * reads them (agg_user_frame(), as for any address the maps do not cover). */
void agg_read_identity_and_maps(struct aggregator *a, struct process *p, int dirfd, bool named,
				bool maps)
{
	a->process_bytes -= agg_process_bytes(p);
	read_identity(p, dirfd);
	a->process_bytes += agg_process_bytes(p);
	if (maps)
		refresh_maps(a, p, dirfd, named, false);
}

/* Everything /proc has to say of a new process, through one directory:
 * its name (unless the sample's is the main thread's, own_comm), and,
 * unless it is a kernel thread, who it is and, with maps, what it maps. */
void agg_read_new_process(struct aggregator *a, struct process *p, const char *comm,
			  bool own_comm, bool maps)
{
	_cleanup_close_ int dirfd = -1;

	if (!p->kthread || !own_comm)
		(void)agg_open_proc(p, &dirfd);
	if (own_comm)
		memcpy(p->comm, comm, sizeof(p->comm));
	else
		agg_read_comm(p, dirfd, comm);
	p->comm[PERFD_TASK_COMM_LEN - 1] = 0;
	if (!p->kthread)
		agg_read_identity_and_maps(a, p, dirfd, !own_comm, maps);
}

/* Re-reads p's maps because it ran code they do not describe, unless a
 * re-read is not due yet (reread_done says when it is).  Returns whether
 * it started one. */
bool agg_reread_maps_if_due(struct aggregator *a, struct process *p, uint64_t now_ns)
{
	if (p->maps_job || p->probe_job || now_ns < p->maps_read_ns ||
	    now_ns - p->maps_read_ns < p->maps_reread_wait_ns)
		return false;
	(void)refresh_maps(a, p, -1, false, true);
	return true;
}

/* Whether the user address addr of p lies outside its maps, or in a
 * mapping that was left without a module (resolve_modules). */
bool agg_maps_miss(const struct process *p, uint64_t addr)
{
	const struct procmap *m = procmaps_find(p->maps, addr);

	return !m || (p->maps_partial && p->map_modules[m - p->maps->maps] == MODULE_NONE);
}

/* p's image changed under reads still out (an exec): its maps' read is
 * dropped when it comes back, and the samples that waited go in with the
 * maps p had, their frames unread. */
void agg_forget_waits(struct aggregator *a, struct process *p)
{
	/* a late probe's ids are for maps an exec replaced too */
	agg_forget_probes(p);
	if (p->maps_job)
		p->maps_job->owner = NULL;
	p->maps_job = NULL;
	/* the reads of frames are of the old image's memory: its samples go
	 * in unread */
	p->frames_late = true;
	if (p->n_parked)
		agg_ingest_parked(a, p);
	p->frames_late = false;
	p->frames_wait_ns = 0;
}

void aggregator_settle(struct aggregator *a)
{
	a->settled = true; /* no sample waits from now on */
	agg_free_queued_probes(a); /* nor is a queued probe sent */
	aggregator_complete(a);
	for (size_t i = 0; i < a->n_procs;) {
		if (!a->procs[i]->n_parked) {
			i++;
			continue;
		}
		agg_forget_waits(a, a->procs[i]);
		/* nothing waits on any more: in, whatever the jobs */
		if (a->procs[i]->n_parked)
			agg_ingest_parked(a, a->procs[i]);
		/* ingesting may have evicted others, moving the rest */
		i = 0;
	}
}

int aggregator_start_maps_lane(struct aggregator *a)
{
	return a->maps_lane ? 0 :
			      offload_new(&(struct offload_opts){ .lanes = AGG_LANES,
								  .name = "perfd-maps",
								  .small_lanes = 1,
								  .background = true,
								  .take_back = true,
								  /* a read of maps, a probe of
								   * files: each touches only its job */
								  .may_abandon = true },
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
		struct mapsread *j;
		struct process *p;

		next = done->next;
		if (done->run == modprobe_run) {
			probes_done(a, (struct modprobe_job *)done);
			continue;
		}
		j = mapsread_of(done);
		p = j->owner;
		a->stats.maps_reads_pending--;
		if (p) {
			p->maps_job = NULL;
			(void)maps_read_done(a, p, j);
			/* samples in files still being identified wait on */
			if (!p->probe_job)
				agg_ingest_parked(a, p);
		}
		mapsread_free(j);
	}
	send_queued_probes(a);
}
