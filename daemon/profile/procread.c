/* SPDX-License-Identifier: MIT */
/*
 * procread.c - what the store reads of a process under /proc: its comm, owner
 * and parent, its executable mappings (on the maps lane, re-read on a
 * miss with a backoff) and their modules, and its JIT map.
 * The store's design is aggregate.h's; what its files share,
 * aggregate_internal.h's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The process's JIT map, as its JIT wrote it: /tmp/perf-<pid in its own
 * namespace>.map, else its jitdump /tmp/jit-<pid>.dump (CPython's -X
 * perf_jit, the JVM's and V8's perf agents), under its own root, owned by
 * its user or root (the module registry refuses anything else:
 * process/modules.h).  Not looked for in a process found gone. */
void agg_find_jit_map(struct aggregator *a, struct process *p)
{
	static const char *const formats[] = { "/tmp/perf-%u.map", "/tmp/jit-%u.dump" };
	char path[32];
	int id = -ENOENT;

	for (size_t i = 0; i < ELEMENTSOF(formats) && id <= 0 && !p->proc_gone; i++) {
		snprintf(path, sizeof(path), formats[i], p->ns_pid);
		id = a->modules.jit(a->modules.ctx, p->pid, p->start_time_ns, path, p->owner_uid);
		if (id == -ESRCH)
			p->proc_gone = true;
	}
	if (id > 0)
		p->jit_module = (uint16_t)id;
}

/* Whether some executable mapping of maps has no module: anonymous code
 * (JIT-compiled, or CPython's perf trampolines), all a JIT map can name
 * (agg_user_frame).  Not the kernel's legacy [vsyscall] page, which every
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
			id = a->modules.vdso(a->modules.ctx);
		} else if (m->inode == 0 || m->path[0] != '/') {
			id = -EINVAL; /* anonymous: no file to look up */
		} else if (budget == 0) {
			p->maps_partial = true;
			id = -EAGAIN;
		} else {
			budget--;
			id = a->modules.for_mapping(a->modules.ctx, p->pid, p->owner_uid, m);
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
		if (dirfd < 0 && agg_open_proc(p, &own) == 0)
			dirfd = own;
		agg_read_comm(p, dirfd, NULL);
	}
	resolve_modules(a, p, maps, modules);
	/* Only where there is code for it to name: the two look-ups cost
	 * more than the rest of a short process's reads, and a sample in code
	 * mapped later makes agg_user_frame look. */
	if (!p->jit_module && has_unnamed_code(maps, modules))
		agg_find_jit_map(a, p);
	a->process_bytes -= agg_process_bytes(p);
	procmaps_free(p->maps);
	free(p->map_modules);
	p->maps = maps;
	p->map_modules = modules;
	a->process_bytes += agg_process_bytes(p);
	if (a->hooks.maps_changed)
		a->hooks.maps_changed(a->hooks.userdata, p);
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
	if (p->maps_job || now_ns < p->maps_read_ns ||
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

/* p's maps changed under a read still on the lane (an exec): the read is
 * dropped when it comes back, and the samples that waited go in with the
 * maps p had. */
void agg_forget_maps_read(struct aggregator *a, struct process *p)
{
	if (!p->maps_job)
		return;
	p->maps_job->owner = NULL;
	p->maps_job = NULL;
	agg_ingest_parked(a, p);
}

int aggregator_start_maps_lane(struct aggregator *a)
{
	return a->maps_lane ? 0 :
			      offload_new(&(struct offload_opts){ .lanes = 1, .background = true,
								  .take_back = true,
								  /* a read of maps touches only its job */
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
		struct mapsread *j = mapsread_of(done);
		struct process *p = j->owner;

		next = done->next;
		a->stats.maps_reads_pending--;
		if (p) {
			p->maps_job = NULL;
			(void)maps_read_done(a, p, j);
			agg_ingest_parked(a, p);
		}
		mapsread_free(j);
	}
}
