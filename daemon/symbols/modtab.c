/* SPDX-License-Identifier: MIT */
/* modtab.c - the table of modules (symbolize.h, symbolize_internal.h):
 * which file a module is, its ids and each owner's share of them, its
 * descriptors under their LRU bound, the ids given back, and the module
 * registry profile/ names mappings through. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/elfopen.h"
#include "base/offload.h"
#include "perfd/macro.h"
#include "process/procfs.h"
#include "symbols/jitdump.h"
#include "symbols/perfmap.h"
#include "symbols/symbolize_internal.h"

/* --- descriptors: a bounded LRU list ------------------------------------
 *
 * Every module descriptor but the vDSO's (a binary's, its separate debug
 * file's, a JIT map's) is counted in open_fds and its module is on a list,
 * most recently used first.  Before one is opened, the modules at the end
 * of the list give theirs up until there is room under max_fds; what was
 * parsed from them stays, and sym_module_fd() opens the file again when it is
 * needed. */

static void lru_unlink(struct symbolizer *s, struct module *m)
{
	uint16_t id = id_of(s, m);

	if (m->lru_prev)
		s->modules[m->lru_prev - FRAME_MODULE_FIRST].lru_next = m->lru_next;
	else if (s->lru_head == id)
		s->lru_head = m->lru_next;
	else
		return; /* not on the list */
	if (m->lru_next)
		s->modules[m->lru_next - FRAME_MODULE_FIRST].lru_prev = m->lru_prev;
	else
		s->lru_tail = m->lru_prev;
	m->lru_prev = m->lru_next = NO_MODULE;
}

void sym_lru_touch(struct symbolizer *s, struct module *m)
{
	uint16_t id = id_of(s, m);

	if (m->kind == MODULE_VDSO || s->lru_head == id)
		return;
	lru_unlink(s, m);
	m->lru_next = s->lru_head;
	if (s->lru_head)
		s->modules[s->lru_head - FRAME_MODULE_FIRST].lru_prev = id;
	s->lru_head = id;
	if (!s->lru_tail)
		s->lru_tail = id;
}

/* --- descriptors closed on a lane ---------------------------------------
 *
 * A close asks the file's file system too: FUSE waits for its server to
 * answer a FLUSH, at every close of every descriptor of the file.  So the
 * loop closes no module's descriptor: it hands it to the symbolizer's lane
 * (sym_close_later), and counts it in fds_closing until the close
 * returns.  Those do not count under max_fds, which they leave as soon as
 * a lane gets to them; while a server holds them, reserve_slot (below)
 * stops handing out slots once as many are closing as max_fds, so that
 * what perfd holds stays bounded.  The count is the one thing a close job
 * touches besides itself: an atomic, and the lane is never abandoned
 * (offload_free waits for it), so it outlives every job. */

struct closejob {
	struct offload_job job; /* first */
	int fd;
	atomic_size_t *closing; /* the symbolizer's fds_closing; NULL once counted out */
};

static void close_counted(struct closejob *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->closing)
		atomic_fetch_sub(c->closing, 1);
	c->closing = NULL;
}

static void closejob_run(struct offload_job *j)
{
	close_counted((struct closejob *)j);
}

static void closejob_free(struct offload_job *j)
{
	close_counted((struct closejob *)j);
	free(j);
}

bool sym_close_is(const struct offload_job *j)
{
	return j->run == closejob_run;
}

void sym_close_later(struct symbolizer *s, int fd)
{
	struct closejob *c;

	if (fd < 0)
		return;
	c = malloc(sizeof(*c));
	if (!c) {
		close(fd); /* out of memory: on the loop, as before */
		return;
	}
	*c = (struct closejob){ .job = { .run = closejob_run, .free = closejob_free }, .fd = fd,
				.closing = &s->fds_closing };
	atomic_fetch_add(&s->fds_closing, 1);
	/* an unbounded pool refuses only after offload_finish, never called
	 * on this one (offload_free stops it) */
	if (offload_submit(s->lane, &c->job) < 0)
		closejob_free(&c->job);
}

/* Closes the descriptors of m (on the lane); what was parsed from them
 * stays.  A debug file closed is searched for again when it is needed. */
static void close_fds(struct symbolizer *s, struct module *m)
{
	s->open_fds -= (m->fd >= 0) + (m->debug_fd >= 0);
	sym_close_later(s, TAKE_FD(m->fd));
	sym_close_later(s, TAKE_FD(m->debug_fd));
	lru_unlink(s, m);
}

void sym_make_fd_room(struct symbolizer *s, const struct module *keep, size_t n)
{
	while (s->open_fds + s->fds_reserved + n > s->max_fds && s->lru_tail) {
		struct module *lru = &s->modules[s->lru_tail - FRAME_MODULE_FIRST];

		if (lru == keep) {
			if (!lru->lru_prev)
				break;
			lru = &s->modules[lru->lru_prev - FRAME_MODULE_FIRST];
		}
		close_fds(s, lru);
		s->stats.fds_evicted++;
	}
}

void sym_take_fd(struct symbolizer *s, struct module *m, int fd)
{
	m->fd = fd;
	m->fd_error = 0;
	s->open_fds++;
	sym_lru_touch(s, m);
}

/* --- which file a module is ---------------------------------------------- */

static void chain_add(struct symbolizer *s, struct module *m)
{
	uint64_t *slot = u64map_upsert(&s->by_file, file_key(m->file.dev, m->file.inode), NULL);

	/* without the index the module is only found again by a new id */
	if (!slot)
		return;
	m->next_same = *slot == U64MAP_EMPTY ? NO_MODULE : (uint16_t)*slot;
	*slot = id_of(s, m);
}

static void chain_remove(struct symbolizer *s, struct module *m)
{
	uint64_t key = file_key(m->file.dev, m->file.inode), *slot = u64map_get(&s->by_file, key);
	uint16_t id = id_of(s, m);

	if (!slot)
		return;
	if (*slot == id) {
		if (m->next_same)
			*slot = m->next_same;
		else
			u64map_remove(&s->by_file, key);
		return;
	}
	for (uint16_t i = (uint16_t)*slot; i; i = s->modules[i - FRAME_MODULE_FIRST].next_same)
		if (s->modules[i - FRAME_MODULE_FIRST].next_same == id) {
			s->modules[i - FRAME_MODULE_FIRST].next_same = m->next_same;
			return;
		}
}

/* The module of the file identified by id (read from the file a process
 * maps: nothing but that file's own module matches), or NULL. */
static struct module *find_verified(const struct symbolizer *s, const struct file_id *id)
{
	uint64_t *slot = u64map_get(&s->by_file, file_key(id->dev, id->inode));

	for (uint16_t i = slot ? (uint16_t)*slot : NO_MODULE; i;
	     i = s->modules[i - FRAME_MODULE_FIRST].next_same) {
		struct module *m = &s->modules[i - FRAME_MODULE_FIRST];

		if (m->verified && file_id_eq(&m->file, id))
			return m;
	}
	return NULL;
}

/* A module known only by (dev, inode) and path, when that is all there is
 * to go by: the file was mapped at path from (dev, inode).  Prefers the
 * most recently added. */
static struct module *find_by_path(const struct symbolizer *s, dev_t dev, uint64_t inode,
				   uint64_t path_hash, bool unverified_only)
{
	uint64_t *slot = u64map_get(&s->by_file, file_key(dev, inode));

	for (uint16_t i = slot ? (uint16_t)*slot : NO_MODULE; i;
	     i = s->modules[i - FRAME_MODULE_FIRST].next_same) {
		struct module *m = &s->modules[i - FRAME_MODULE_FIRST];

		if (m->file.dev == dev && m->file.inode == inode && m->path_hash == path_hash &&
		    (!unverified_only || !m->verified))
			return m;
	}
	return NULL;
}

/* Reads the GNU build-id note of the ELF file on fd as hex into out
 * (BUILD_ID_MAX * 2 + 1 bytes); "" when it has none.  From its segments
 * only (buildid.h): what is mapped, whatever the sections say. */
static void read_build_id(int fd, char *out)
{
	_cleanup_(elf_endp) Elf *elf = NULL;
	const uint8_t *id;
	size_t len;

	out[0] = 0;
	if (fd < 0 || elf_open_fd(fd, &elf) < 0 ||
	    build_id_from_elf(elf, BUILD_ID_FROM_SEGMENTS, BUILD_ID_MAX, &id, &len) < 0)
		return;
	(void)build_id_hex(id, len, out, BUILD_ID_MAX * 2 + 1); /* it has the room */
}


/* procfs_open_mapped_file, with what identifies the file in *ret_id. */
static int open_mapped_file(pid_t pid, uint64_t start, uint64_t end, const char *path,
			    dev_t dev, uint64_t inode, struct file_id *ret_id)
{
	struct stat st;
	int fd = procfs_open_mapped_file(pid, start, end, path, dev, inode, &st);

	if (fd >= 0)
		*ret_id = file_id_of(&st);
	return fd;
}

/* What identifies the file process pid maps at map, without opening it
 * (a stat of its map_files link: one system call).  -errno when the link
 * cannot be followed (the process is gone, or no map_files). */
static int stat_mapped_file(pid_t pid, const struct procmap *map, struct file_id *ret)
{
	char p[96];
	struct stat st;

	snprintf(p, sizeof(p), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, map->start,
		 map->end);
	if (stat(p, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode) || st.st_ino != map->inode ||
	    st.st_dev != makedev(map->dev_major, map->dev_minor))
		return -ESTALE;
	*ret = file_id_of(&st);
	return 0;
}

/* path as /proc/PID/maps shows it, without " (deleted)"; NULL when out of
 * memory. */
static char *mapped_path(const char *shown)
{
	char *path = strdup(shown), *deleted;

	if (path && (deleted = strstr(path, " (deleted)")))
		*deleted = 0;
	return path;
}

char *sym_mapped_path(const struct module *m)
{
	return mapped_path(m->path);
}

/* --- descriptors opened again, on a lane ----------------------------------
 *
 * A module whose descriptor the LRU closed is opened again when a load, a
 * search or a table build needs it.  The open asks the file's file system
 * (a stat of map_files, then the open): a FUSE or NFS server that does
 * not answer would hold whoever opens, so the loop never does.  The
 * symbolizer's lane does, on a descriptor slot reserved for it from the
 * start to the taking back (as a probe's: max_fds holds), and the module
 * takes the descriptor only if it is still the file it was read from.
 * Meanwhile sym_module_fd answers -EAGAIN, and what waits counts as
 * pending: a symbol table (symbolizer_frame_pending), a line table, an
 * unwind table (the unwinder asks again, unwinder_retry_opens).
 *
 * A JIT module's map is opened again the same way, in its process's root
 * while that process lives (symloads.c's sym_refresh_perfmap waits). */

struct reopen {
	struct offload_job job; /* first; key: sym_module_key */
	pid_t pid;              /* the last process seen mapping it, and where */
	uint64_t start, end;
	bool jit;               /* a JIT map: of (pid, start_time_ns) */
	uint64_t start_time_ns;
	uint32_t jit_owner_uid;
	struct file_id want;    /* what the module was read from */
	struct file_id got;     /* what the open found */
	int fd;                 /* or -errno */
	char path[];            /* as the process mapped it */
};

static void reopen_run(struct offload_job *j)
{
	static const struct procfs_file_rules binary = { .follow_symlinks = true };
	struct reopen *o = (struct reopen *)j;
	_cleanup_free_ char *mapped = NULL;
	struct stat st;

	if (o->jit) {
		struct procfs_file_rules rules = sym_jit_map_rules(o->jit_owner_uid);

		o->fd = procfs_open_in_process(o->pid, o->start_time_ns, o->path, &rules);
		return;
	}
	o->fd = open_mapped_file(o->pid, o->start, o->end, o->path, o->want.dev, o->want.inode,
				 &o->got);
	if (o->fd >= 0)
		return;
	/* the process is gone: the path as perfd sees it, which the identity
	 * check tells apart from any other file */
	mapped = mapped_path(o->path);
	if (!mapped) {
		o->fd = -ENOMEM;
		return;
	}
	o->fd = procfs_open_in_root(AT_FDCWD, mapped, &binary);
	if (o->fd < 0)
		return;
	if (fstat(o->fd, &st) < 0) {
		int r = negative_errno();

		close(o->fd);
		o->fd = r;
		return;
	}
	o->got = file_id_of(&st);
}

static void reopen_free(struct offload_job *j)
{
	struct reopen *o = (struct reopen *)j;

	if (o->fd >= 0)
		close(o->fd);
	free(o);
}

bool sym_reopen_is(const struct offload_job *j)
{
	return j->run == reopen_run;
}

/* Descriptors that may be opening on the lanes at once, probes' and
 * reopens' together: a quarter of max_fds, so that reserving for them does
 * not close what the loop would then open again. */
static size_t lane_fds_cap(const struct symbolizer *s)
{
	return MAX(s->max_fds / 4, (size_t)1);
}

/* A descriptor slot held for a probe (a file's, a JIT map's) from its
 * plan until apply takes it or done gives it back, so that max_fds holds
 * with the probe's open on a lane; probes hold at most lane_fds_cap(s),
 * and none while max_fds are closing (a server holds them).  Returns
 * whether one is held now. */
static bool reserve_slot(struct symbolizer *s)
{
	if (s->fds_reserved >= lane_fds_cap(s) || atomic_load(&s->fds_closing) >= s->max_fds)
		return false;
	sym_make_fd_room(s, NULL, 1);
	s->fds_reserved++;
	return true;
}

static void release_slot(struct symbolizer *s, bool *reserved)
{
	if (*reserved)
		s->fds_reserved--;
	*reserved = false;
}

/* A probe's end: what it opened and no module took is closed, its slot
 * given back (here or at apply, which comes first), and a reopen waiting
 * for one started. */
static void give_back(struct symbolizer *s, int *fd, bool *reserved)
{
	sym_close_later(s, TAKE_FD(*fd));
	release_slot(s, reserved);
	sym_pump_reopens(s);
}

/* Hands m's reopen to the lane, on a slot reserved for it.  Returns 0 or
 * -ENOMEM. */
static int submit_reopen(struct symbolizer *s, struct module *m)
{
	size_t len = strlen(m->path) + 1;
	struct reopen *o = malloc(sizeof(*o) + len);

	if (!o)
		return -ENOMEM;
	*o = (struct reopen){ .job = { .run = reopen_run, .free = reopen_free,
				       .key = sym_module_key(s, m) },
			      .pid = m->pid, .start = m->map_start, .end = m->map_end,
			      .jit = m->kind == MODULE_JIT, .start_time_ns = m->start_time_ns,
			      .jit_owner_uid = m->jit_owner_uid, .want = m->file, .fd = -1 };
	memcpy(o->path, m->path, len);
	/* the slot is the job's until it is taken back */
	sym_make_fd_room(s, m, 1);
	s->fds_reserved++;
	/* an unbounded pool refuses only after offload_finish, never called
	 * on this one (offload_free stops it) */
	(void)offload_submit(s->lane, &o->job);
	return 0;
}

/* Puts m's key at the back of the queue of reopens (a ring, made when
 * first needed).  Keys of modules given back meanwhile stay in it until
 * their turn (or a full ring drops them): each live module is in it once
 * at most, and the ring has a slot for every module.  Returns 0 or
 * -ENOMEM. */
static int queue_reopen(struct symbolizer *s, struct module *m)
{
	if (!s->reopen_queue &&
	    !(s->reopen_queue = malloc(MODULES_MAX * sizeof(*s->reopen_queue))))
		return -ENOMEM;
	if (s->reopens_queued == MODULES_MAX) {
		size_t kept = 0;

		for (size_t i = 0; i < MODULES_MAX; i++) {
			uint64_t key = s->reopen_queue[(s->reopen_head + i) % MODULES_MAX];
			struct module *q = sym_module_of_key(s, key);

			if (q && q->reopen_queued)
				s->reopen_queue[(s->reopen_head + kept++) % MODULES_MAX] = key;
		}
		s->reopens_queued = kept;
	}
	s->reopen_queue[(s->reopen_head + s->reopens_queued++) % MODULES_MAX] = sym_module_key(s, m);
	m->reopen_queued = true;
	s->reopens_waiting++;
	return 0;
}

/* Has the lane open m again, now or, past lane_fds_cap, in its turn.
 * Returns -EAGAIN (started, queued, or already either), or -ENOMEM. */
static int start_reopen(struct symbolizer *s, struct module *m)
{
	if (m->reopening)
		return -EAGAIN;
	if (s->fds_reserved >= lane_fds_cap(s) ? queue_reopen(s, m) < 0 :
						 submit_reopen(s, m) < 0)
		return -ENOMEM;
	m->reopening = true;
	s->stats.fds_reopening++;
	return -EAGAIN;
}

void sym_pump_reopens(struct symbolizer *s)
{
	while (s->reopens_queued && s->fds_reserved < lane_fds_cap(s)) {
		struct module *m = sym_module_of_key(s, s->reopen_queue[s->reopen_head]);

		s->reopen_head = (s->reopen_head + 1) % MODULES_MAX;
		s->reopens_queued--;
		if (!m || !m->reopen_queued)
			continue; /* given back meanwhile */
		m->reopen_queued = false;
		s->reopens_waiting--;
		if (m->fd < 0 && submit_reopen(s, m) == 0)
			continue;
		/* a probe gave it a descriptor meanwhile, or out of memory
		 * (the next ask tries again): what waited goes on, or not */
		m->reopening = false;
		s->stats.fds_reopening--;
		sym_reopen_resume(s, m);
	}
}

int sym_module_fd(struct symbolizer *s, struct module *m)
{
	if (m->fd >= 0) {
		sym_lru_touch(s, m);
		return m->fd;
	}
	if ((m->kind == MODULE_FILE ? !m->verified : m->kind != MODULE_JIT) || m->fd_error < 0)
		return -EBADF;
	return start_reopen(s, m);
}

struct module *sym_reopen_done(struct symbolizer *s, struct offload_job *j)
{
	struct reopen *o = (struct reopen *)j;
	struct module *m = sym_module_of_key(s, j->key);

	s->fds_reserved--;
	s->stats.fds_reopening--;
	if (!m || !m->reopening) {
		sym_close_later(s, TAKE_FD(o->fd)); /* given back meanwhile */
		return NULL;
	}
	m->reopening = false;
	if (m->fd >= 0) { /* a probe gave it one meanwhile: this one is closed */
		sym_close_later(s, TAKE_FD(o->fd));
		return m;
	}
	/* a JIT map is its process's, whatever it has become since */
	if (o->fd >= 0 && !o->jit && !file_id_eq(&o->got, &m->file)) {
		sym_close_later(s, TAKE_FD(o->fd));
		o->fd = -ESTALE;
	}
	if (o->fd < 0) {
		m->fd_error = o->fd;
		s->stats.fds_reopen_failed++;
		if (o->jit && sym_jit_map_refused(o->fd))
			s->stats.jit_maps_refused++;
		return m;
	}
	sym_take_fd(s, m, TAKE_FD(o->fd));
	s->stats.fds_reopened++;
	return m;
}

/* How many modules one owner may hold at once. */
static size_t owner_share(const struct symbolizer *s)
{
	return s->max_modules - s->max_modules / MODULES_RESERVE_DIVISOR;
}

/* Takes an id for a new module of kind with the given path, charged to
 * owner: a released one first.  Returns it or -errno (-ENOSPC when
 * max_modules are live, or owner holds its share: counted). */
static int add_module(struct symbolizer *s, enum module_kind kind, const char *path,
		      uint32_t owner, struct module **ret)
{
	uint64_t *held = NULL;
	struct module *m;
	const char *slash;
	char *copy;
	size_t i;

	if (s->live_modules >= s->max_modules) {
		s->stats.modules_refused++;
		return -ENOSPC;
	}
	if (owner != MODULE_OWNER_NONE) {
		held = u64map_get(&s->by_owner, owner);
		if (held && *held >= owner_share(s)) {
			s->stats.modules_refused++;
			s->stats.modules_refused_share++;
			return -ENOSPC;
		}
		/* now: the map may need memory, the id may not be undone */
		held = u64map_upsert(&s->by_owner, owner, NULL);
		if (!held)
			return -ENOMEM;
	}
	if (!s->n_free && s->n_modules == s->cap_modules) {
		size_t cap = s->cap_modules ? s->cap_modules * 2 : 64;
		struct module *mods;

		cap = cap < MODULES_MAX ? cap : MODULES_MAX;
		mods = realloc(s->modules, cap * sizeof(*mods));
		if (!mods)
			return -ENOMEM;
		s->modules = mods;
		s->cap_modules = cap;
	}
	copy = strdup(path);
	if (!copy) {
		if (held && *held == 0)
			u64map_remove(&s->by_owner, owner);
		return -ENOMEM;
	}
	if (held)
		(*held)++;
	i = s->n_free ? (size_t)(s->free_ids[--s->n_free] - FRAME_MODULE_FIRST) : s->n_modules++;
	m = &s->modules[i];
	*m = (struct module){ .kind = kind, .fd = -1, .debug_fd = -1, .path = copy,
			      .owner = owner, .serial = ++s->next_serial };
	slash = strrchr(m->path, '/');
	m->basename = slash ? slash + 1 : m->path;
	s->live_modules++;
	*ret = m;
	return (int)(i + FRAME_MODULE_FIRST);
}

/* Gives m's id back: frees what it holds and takes it out of the indexes. */
static void release_module(struct symbolizer *s, struct module *m)
{
	uint16_t id = id_of(s, m);
	uint64_t *slot;

	if (m->kind == MODULE_FILE)
		chain_remove(s, m);
	if (m->kind == MODULE_JIT) {
		uint64_t key = hash_u64(hash_u64((uint64_t)m->pid) ^ m->start_time_ns) & ~1ULL;

		slot = u64map_get(&s->jit_by_process, key);
		if (slot && *slot == id)
			u64map_remove(&s->jit_by_process, key);
	}
	if (m->owner != MODULE_OWNER_NONE) {
		slot = u64map_get(&s->by_owner, m->owner);
		if (slot && --*slot == 0)
			u64map_remove(&s->by_owner, m->owner);
	}
	close_fds(s, m);
	sym_unload(m);
	free(m->path);
	/* one on the lane is counted out when it is back; a queued one now
	 * (pump_reopens skips it: its flag goes) */
	if (m->reopen_queued) {
		s->stats.fds_reopening--;
		s->reopens_waiting--;
	}
	*m = (struct module){ .kind = MODULE_FREE, .fd = -1, .debug_fd = -1 };
	s->free_ids[s->n_free++] = id;
	s->live_modules--;
}

/* Notes that process pid maps m at map: the way to open it again.  A
 * module without a descriptor (closed, or its first process gone before it
 * could be opened) gets one now if the caller has it (fd, else -1), and
 * may try again if opening failed before.  build_id: the file's, read
 * with fd (NULL: read it here if m has none). */
static void note_mapper(struct symbolizer *s, struct module *m, pid_t pid,
			const struct procmap *map, int fd, const char *build_id)
{
	m->pid = pid;
	m->map_start = map->start;
	m->map_end = map->end;
	m->fd_error = 0;
	if (fd < 0)
		return;
	if (m->fd >= 0) {
		sym_close_later(s, fd);
		sym_lru_touch(s, m);
		return;
	}
	sym_take_fd(s, m, fd);
	if (!m->build_id[0]) {
		if (build_id)
			snprintf(m->build_id, sizeof(m->build_id), "%s", build_id);
		else
			read_build_id(fd, m->build_id);
	}
}

_Static_assert(MODULE_PROBE_BUILD_ID_LEN == BUILD_ID_MAX * 2 + 1, "build-id buffer");

static struct file_id probe_file_id(const struct module_probe *p)
{
	return (struct file_id){ .dev = p->dev, .inode = p->inode, .size = p->size,
				 .mtime_ns = p->mtime_ns, .ctime_ns = p->ctime_ns };
}

static void probe_set_file_id(struct module_probe *p, const struct file_id *id)
{
	p->dev = id->dev;
	p->inode = id->inode;
	p->size = id->size;
	p->mtime_ns = id->mtime_ns;
	p->ctime_ns = id->ctime_ns;
}

/* Whether a verified module is on the file (dev, inode): then a stat
 * tells whether the process maps it, and nothing need be opened. */
static bool has_verified(const struct symbolizer *s, dev_t dev, uint64_t inode)
{
	uint64_t *slot = u64map_get(&s->by_file, file_key(dev, inode));

	for (uint16_t i = slot ? (uint16_t)*slot : NO_MODULE; i;
	     i = s->modules[i - FRAME_MODULE_FIRST].next_same) {
		const struct module *m = &s->modules[i - FRAME_MODULE_FIRST];

		if (m->verified && m->file.dev == dev && m->file.inode == inode)
			return true;
	}
	return false;
}

int symbolizer_plan_probe(struct symbolizer *s, pid_t pid, const struct procmap *map, bool open,
			  struct module_probe *ret)
{
	dev_t dev = makedev(map->dev_major, map->dev_minor);

	*ret = (struct module_probe){ .fd = -1, .pid = pid };
	if (procmap_fileless(map))
		return -EINVAL;
	ret->map = *map;
	ret->map.path = strdup(map->path);
	if (!ret->map.path)
		return -ENOMEM;
	ret->want_open = open || !has_verified(s, dev, map->inode);
	/* Probes out on the lanes hold at most a quarter of the descriptors:
	 * the rest stay with the modules being symbolized, so reserving does
	 * not close what the loop would then reopen.  Past it the probe opens
	 * the file, reads its build-id and closes it: the module is reopened
	 * when it is wanted, as one the LRU closed. */
	if (ret->want_open)
		ret->reserved = reserve_slot(s);
	return 0;
}

void module_probe_run(struct module_probe *p)
{
	const struct procmap *map = &p->map;
	dev_t dev = makedev(map->dev_major, map->dev_minor);
	struct file_id fid, opened;
	int r, fd;

	p->probed = true;
	p->fd = -1;
	p->build_id[0] = 0;
	r = stat_mapped_file(p->pid, map, &fid);
	/* Not asked to open, nothing is: apply asks for another probe, one
	 * that does, when the stat was not enough. */
	if (p->want_open) {
		/* no map_files (the range is not mapped now, or it cannot be
		 * followed): the path in the process's root, opened */
		fd = open_mapped_file(p->pid, map->start, map->end, map->path, dev, map->inode,
				      &opened);
		if (fd >= 0 && r == 0 && !file_id_eq(&opened, &fid)) {
			/* changed between the stat and the open */
			close(fd);
			fd = -ESTALE;
		}
		if (r < 0)
			r = fd < 0 ? fd : 0;
		if (fd >= 0) {
			fid = opened;
			read_build_id(fd, p->build_id);
			/* without a slot, closed here (a lane), never on the loop */
			if (p->reserved)
				p->fd = fd;
			else
				close(fd);
		} else {
			p->open_error = fd;
		}
		p->opened = true;
	}
	p->error = r;
	if (r == 0)
		probe_set_file_id(p, &fid);
}

void symbolizer_probe_done(struct symbolizer *s, struct module_probe *p)
{
	free(p->map.path);
	p->map.path = NULL;
	give_back(s, &p->fd, &p->reserved);
}

int symbolizer_module_for_probe(struct symbolizer *s, uint32_t owner_uid, struct module_probe *p)
{
	const struct procmap *map = &p->map;
	dev_t dev = makedev(map->dev_major, map->dev_minor);
	uint64_t path_hash = hash_text(map->path, strlen(map->path));
	struct file_id fid = probe_file_id(p);
	/* taken from the probe here: whatever becomes of it, done has
	 * nothing left to close */
	int fd = p->fd;
	struct module *m;
	int id;

	p->fd = -1;
	release_slot(s, &p->reserved);
	if (!p->probed) {
		if (fd >= 0)
			sym_close_later(s, fd);
		return -EAGAIN;
	}
	if (p->error < 0 && !p->opened) {
		/* a known file not stat'ed: opened, it may be told apart */
		if (fd >= 0)
			sym_close_later(s, fd);
		return -EAGAIN;
	}
	if (p->error < 0) {
		/* The process is gone (a short-lived one read at its end): the
		 * module of (dev, inode) at this path, as a best guess, else
		 * one that the next process mapping it completes. */
		m = find_by_path(s, dev, map->inode, path_hash, false);
		if (m)
			return id_of(s, m);
		id = add_module(s, MODULE_FILE, map->path, owner_uid, &m);
		if (id < 0)
			return id;
		m->file = (struct file_id){ .dev = dev, .inode = map->inode };
		m->path_hash = path_hash;
		m->pid = p->pid;
		m->fd_error = p->error;
		chain_add(s, m);
		return id;
	}
	m = find_verified(s, &fid);
	if (!m) {
		m = find_by_path(s, dev, map->inode, path_hash, true);
		if (m) {
			/* first seen in a process that was gone: this is its file */
			chain_remove(s, m);
			m->file = fid;
			m->verified = true;
			chain_add(s, m);
		}
	}
	if (m) {
		note_mapper(s, m, p->pid, map, fd, fd >= 0 ? p->build_id : NULL);
		return id_of(s, m);
	}
	if (fd < 0 && !p->want_open)
		/* a new file where plan saw a known one (it changed, or its
		 * module was released since): it must be opened, off the loop */
		return -EAGAIN;
	id = add_module(s, MODULE_FILE, map->path, owner_uid, &m);
	if (id < 0) {
		if (fd >= 0)
			sym_close_later(s, fd);
		return id;
	}
	m->file = fid;
	m->verified = true;
	m->path_hash = path_hash;
	chain_add(s, m);
	m->pid = p->pid;
	m->map_start = map->start;
	m->map_end = map->end;
	if (fd < 0 && !(p->opened && !p->open_error)) {
		m->fd_error = p->open_error < 0 ? p->open_error : -EBADF;
		return id;
	}
	/* opened without a slot and closed: reopened when it is wanted */
	if (fd >= 0)
		sym_take_fd(s, m, fd);
	snprintf(m->build_id, sizeof(m->build_id), "%s", p->build_id);
	return id;
}

int symbolizer_module_for_mapping(struct symbolizer *s, pid_t pid, uint32_t owner_uid,
				  const struct procmap *map)
{
	struct module_probe p;
	int id;

	id = symbolizer_plan_probe(s, pid, map, false, &p);
	if (id < 0)
		return id;
	module_probe_run(&p);
	id = symbolizer_module_for_probe(s, owner_uid, &p);
	if (id == -EAGAIN) {
		/* known when planned, not now: open it after all */
		symbolizer_probe_done(s, &p);
		id = symbolizer_plan_probe(s, pid, map, true, &p);
		if (id < 0)
			return id;
		module_probe_run(&p);
		id = symbolizer_module_for_probe(s, owner_uid, &p);
	}
	symbolizer_probe_done(s, &p);
	return id;
}

int symbolizer_vdso_module(struct symbolizer *s)
{
	const Elf64_Ehdr *eh = (const void *)getauxval(AT_SYSINFO_EHDR);
	struct module *m;
	size_t size;
	int id, fd;

	if (s->vdso_id)
		return s->vdso_id;
	if (!eh)
		return -ENOENT;
	id = add_module(s, MODULE_VDSO, "[vdso]", MODULE_OWNER_NONE, &m);
	if (id < 0)
		return id;
	s->vdso_id = id;
	/* A copy in a memfd lets the ELF reader treat it like any file.  Its
	 * section headers come last in the image. */
	size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	fd = memfd_create("perfd-vdso", MFD_CLOEXEC);
	if (fd >= 0 && write(fd, eh, size) != (ssize_t)size) {
		close(fd);
		fd = -1;
	}
	m->fd = fd;
	if (fd < 0)
		m->load_error = -EIO;
	return id;
}

static uint64_t process_key(pid_t pid, uint64_t start_time_ns)
{
	return hash_u64(hash_u64((uint64_t)pid) ^ start_time_ns) & ~1ULL;
}

struct procfs_file_rules sym_jit_map_rules(uint32_t owner_uid)
{
	return (struct procfs_file_rules){
		.max_size = PERFMAP_MAX_BYTES,
		.check_owner = true,
		.owner_uid = owner_uid,
		.single_link = true,
	};
}

bool sym_jit_map_refused(int r)
{
	return r == -EPERM || r == -ELOOP || r == -EFBIG || r == -EWOULDBLOCK;
}

/* The module process_key(pid, start) names, if it is still that
 * process's. */
static int jit_module_of(struct symbolizer *s, pid_t pid, uint64_t start_time_ns)
{
	uint64_t *slot = u64map_get(&s->jit_by_process, process_key(pid, start_time_ns));
	struct module *m;

	if (!slot)
		return 0;
	m = &s->modules[*slot - FRAME_MODULE_FIRST];
	return m->kind == MODULE_JIT && m->pid == pid && m->start_time_ns == start_time_ns ?
		       (int)*slot : 0;
}

int symbolizer_jit_plan(struct symbolizer *s, struct jit_probe *p)
{
	int id = jit_module_of(s, p->pid, p->start_time_ns);

	p->probed = p->reserved = false;
	p->fd = -1;
	p->error = 0;
	if (id > 0)
		return id;
	p->reserved = reserve_slot(s);
	return 0;
}

void jit_probe_run(struct jit_probe *p)
{
	struct procfs_file_rules rules = sym_jit_map_rules(p->owner_uid);

	p->probed = true;
	p->fd = -1;
	p->error = -ENOENT;
	for (int i = 0; i < JIT_PROBE_PATHS && p->paths[i][0]; i++) {
		int fd = procfs_open_in_process(p->pid, p->start_time_ns, p->paths[i], &rules);

		if (fd >= 0) {
			p->fd = fd;
			p->opened = i;
			return;
		}
		/* a refusal is what is said of the look, not the next path's
		 * absence */
		if (p->error == -ENOENT)
			p->error = fd;
		if (fd == -ESRCH)
			return;
	}
}

int symbolizer_jit_apply(struct symbolizer *s, struct jit_probe *p)
{
	uint64_t *slot;
	struct module *m;
	int id;

	if (!p->probed)
		return -EAGAIN;
	if (p->fd < 0) {
		if (sym_jit_map_refused(p->error))
			s->stats.jit_maps_refused++;
		return p->error;
	}
	/* another probe registered it meanwhile: this descriptor is closed */
	id = jit_module_of(s, p->pid, p->start_time_ns);
	if (id > 0)
		return id;
	id = add_module(s, MODULE_JIT, p->paths[p->opened], p->owner_uid, &m);
	if (id < 0)
		return id;
	/* kept: only its process could open it again, while it lives */
	if (!p->reserved)
		sym_make_fd_room(s, NULL, 1);
	release_slot(s, &p->reserved);
	sym_take_fd(s, m, TAKE_FD(p->fd));
	m->pid = p->pid;
	m->start_time_ns = p->start_time_ns;
	m->jit_owner_uid = p->owner_uid;
	m->perfmap_refused_size = -1;
	slot = u64map_upsert(&s->jit_by_process, process_key(p->pid, p->start_time_ns), NULL);
	if (slot)
		*slot = id; /* without the index it is only found again by a new id */
	return id;
}

void symbolizer_jit_done(struct symbolizer *s, struct jit_probe *p)
{
	give_back(s, &p->fd, &p->reserved);
}

int symbolizer_jit_module(struct symbolizer *s, pid_t pid, uint64_t start_time_ns,
			  const char *map_path, uint32_t owner_uid)
{
	struct jit_probe p = { .pid = pid, .start_time_ns = start_time_ns, .owner_uid = owner_uid };
	int id;

	if (strlen(map_path) >= sizeof(p.paths[0]))
		return -ENAMETOOLONG;
	strcpy(p.paths[0], map_path);
	id = symbolizer_jit_plan(s, &p);
	if (id == 0) {
		jit_probe_run(&p);
		id = symbolizer_jit_apply(s, &p);
	}
	symbolizer_jit_done(s, &p);
	return id;
}

bool symbolizer_describe_module(const struct symbolizer *s, uint16_t module,
				const char **ret_path, const char **ret_build_id)
{
	const struct module *m;

	if (module == FRAME_MODULE_KERNEL) {
		*ret_path = KERNEL_PATH;
		*ret_build_id = s->kernel_build_id;
		return true;
	}
	m = module_of(s, module);
	if (!m)
		return false;
	*ret_path = m->path;
	*ret_build_id = m->build_id;
	return true;
}

int symbolizer_module_fd(struct symbolizer *s, uint16_t module)
{
	struct module *m = module_of(s, module);

	if (!m || m->kind == MODULE_JIT)
		return -ENOENT;
	return sym_module_fd(s, m);
}

size_t symbolizer_release_unused(struct symbolizer *s, const struct module_set *used,
				 void (*released)(void *userdata, uint16_t module), void *userdata)
{
	size_t n = 0;

	s->stats.collections++;
	s->refused_at_collection = s->stats.modules_refused;
	for (size_t i = 0; i < s->n_modules; i++) {
		struct module *m = &s->modules[i];
		uint16_t id = id_of(s, m);

		if ((m->kind != MODULE_FILE && m->kind != MODULE_JIT) || module_set_has(used, id))
			continue;
		/* the caller forgets it first: nothing may know the id when
		 * it is given again */
		if (released)
			released(userdata, id);
		release_module(s, m);
		n++;
	}
	s->stats.modules_released += n;
	return n;
}

bool symbolizer_wants_collection(const struct symbolizer *s)
{
	return s->live_modules >= s->max_modules / 2 ||
	       s->stats.modules_refused != s->refused_at_collection;
}

static int modules_for_mapping(void *ctx, pid_t pid, uint32_t owner_uid, const struct procmap *map)
{
	return symbolizer_module_for_mapping(ctx, pid, owner_uid, map);
}

static int modules_plan(void *ctx, pid_t pid, const struct procmap *map, bool open,
			struct module_probe *ret)
{
	return symbolizer_plan_probe(ctx, pid, map, open, ret);
}

static int modules_apply(void *ctx, uint32_t owner_uid, struct module_probe *p)
{
	return symbolizer_module_for_probe(ctx, owner_uid, p);
}

static void modules_done(void *ctx, struct module_probe *p)
{
	symbolizer_probe_done(ctx, p);
}

static int modules_vdso(void *ctx)
{
	return symbolizer_vdso_module(ctx);
}

static int modules_jit_plan(void *ctx, struct jit_probe *p)
{
	return symbolizer_jit_plan(ctx, p);
}

static int modules_jit_apply(void *ctx, struct jit_probe *p)
{
	return symbolizer_jit_apply(ctx, p);
}

static void modules_jit_done(void *ctx, struct jit_probe *p)
{
	symbolizer_jit_done(ctx, p);
}

static void modules_note_jit_frame(void *ctx, uint64_t frame)
{
	symbolizer_note_jit_frame(ctx, frame);
}

struct module_registry symbolizer_modules(struct symbolizer *s)
{
	return (struct module_registry){ .for_mapping = modules_for_mapping,
					 .plan = modules_plan,
					 .probe = module_probe_run,
					 .apply = modules_apply,
					 .done = modules_done,
					 .vdso = modules_vdso,
					 .jit_plan = modules_jit_plan,
					 .jit_probe = jit_probe_run,
					 .jit_apply = modules_jit_apply,
					 .jit_done = modules_jit_done,
					 .note_jit_frame = modules_note_jit_frame,
					 .ctx = s };
}
