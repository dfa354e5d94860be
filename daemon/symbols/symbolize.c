/* SPDX-License-Identifier: MIT */
/* symbolize.c - see symbolize.h for the design. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/offload.h"
#include "symbols/buildid.h"
#include "symbols/debuginfo.h"
#include "symbols/debugsearch.h"
#include "symbols/jitread.h"
#include "symbols/demangle.h"
#include "base/elfopen.h"
#include "symbols/elfsym.h"
#include "profile/frame.h"
#include "symbols/ksyms.h"
#include "perfd/macro.h"
#include "process/procfs.h"
#include "symbols/jitdump.h"
#include "symbols/perfmap.h"
#include "symbols/srcline.h"
#include "symbols/symload.h"
#include "symbols/symbolize.h"
#include "base/u64map.h"

#define MODULES_MAX (FRAME_MODULE_LAST - FRAME_MODULE_FIRST + 1)
#define KERNEL_PATH "[kernel.kallsyms]" /* what perf and pprof users know */
#define NO_MODULE 0 /* in the chains and the LRU list: no module (ids start at 1) */
/* The vDSO's module is everybody's: in no owner's share. */
#define MODULE_OWNER_NONE UINT32_MAX
/* One owner holds at most all but 1/MODULES_RESERVE_DIVISOR of the table,
 * so that whatever one user maps, another's new binaries get ids. */
#define MODULES_RESERVE_DIVISOR 4

enum module_kind {
	MODULE_FREE, /* an id released, to be given again */
	MODULE_FILE,
	MODULE_VDSO,
	MODULE_JIT,
};

/* What makes a file the one a module was read from.  (dev, inode) alone is
 * not enough: an inode freed and reused is another file, and a file
 * rewritten in place is another binary.  Size and mtime say the latter,
 * ctime what its owner cannot forge (utimensat sets mtime, not ctime). */
struct file_id {
	dev_t dev;
	uint64_t inode;
	uint64_t size;
	int64_t mtime_ns, ctime_ns;
};

struct module {
	enum module_kind kind;
	struct file_id file;
	/* FILE: file was read by fstat from the file the process maps.  False
	 * for a module first seen in a process gone before its file could be
	 * looked at: only (dev, inode) and the path are known, and the next
	 * process mapping the same (dev, inode, path) completes it. */
	bool verified;
	uint32_t owner; /* the uid whose process added it, or MODULE_OWNER_NONE */
	uint64_t path_hash;
	uint16_t next_same; /* next module in the chain of its (dev, inode) key */
	char *path;           /* as the first process mapped it */
	const char *basename; /* into path */
	int fd;               /* -1 when closed (LRU) or never opened */
	int fd_error; /* <0: the last (re)open failed, not retried until a
		       * process is seen mapping the file again */
	uint16_t lru_prev, lru_next; /* in the list of modules holding descriptors */
	struct elf_symtab *symtab;
	int load_error; /* <0 once loading failed: not retried */
	/* a table being built on the lane (symload.h): the symbol table (a
	 * first load, a reload after eviction, or one with a debug file's
	 * symbols merged, the old one serving meanwhile), the line tables */
	bool symtab_loading, srcline_loading;
	char build_id[BUILD_ID_MAX * 2 + 1];
	int debug_fd;           /* separate debug file, -1 when none (or closed) */
	uint32_t serial;        /* never the same twice: a job's check that its
				 * module was not given back meanwhile */
	/* Where a stripped binary's full symbols came from, once searched: a
	 * reload after eviction redoes only what worked. */
	enum {
		DEBUG_UNSEARCHED,
		DEBUG_SEARCHING, /* debuglink and MiniDebugInfo, on the lane */
		DEBUG_NONE,
		DEBUG_FILE,
		DEBUG_MINI,
	} debug_source;
	/* those symbols merged were past the module's room (module_room):
	 * refused once, and reloads read the binary's alone */
	bool merge_refused;
	struct srcline *srcline; /* source lines, opened on first use */
	int srcline_error;
	/* the lane indexing units of srcline that lookups asked for (a
	 * SYMLOAD_UNITS job), or NULL; srcline is not freed while it runs */
	struct symload *indexing;
	/* name pointer (into symtab or srcline) -> demangled copy, or 0 when
	 * the name is not mangled; freed with them */
	struct u64map demangled;
	uint64_t last_used; /* LRU order of loaded symbol tables */
	/* FILE: the last process seen mapping it and where (how to open it
	 * again); JIT: the process whose JIT it is */
	pid_t pid;
	uint64_t map_start, map_end;
	uint64_t start_time_ns;
	struct perfmap *perfmap;
	off_t perfmap_size; /* when last parsed */
	off_t perfmap_refused_size; /* when last refused; -1: never */
	bool perfmap_reading;       /* a parse is on the lane (jitread.h) */
	uint64_t perfmap_checked_ns; /* when a sample last had it looked at */
	uint32_t jit_owner_uid; /* who may own the perf map, besides root */
};

struct symbolizer {
	struct ksyms *ksyms;
	char kernel_build_id[BUILD_ID_MAX * 2 + 1]; /* "" when unknown */
	struct module *modules; /* index = id - FRAME_MODULE_FIRST */
	size_t n_modules, cap_modules; /* slots used (live or free), allocated */
	size_t live_modules, max_modules;
	uint32_t next_serial; /* struct module's */
	uint16_t *free_ids; /* released ids, given again first */
	size_t n_free;
	struct u64map by_file; /* hash(dev, inode) -> first module of its chain */
	struct u64map jit_by_process; /* hash(pid, start) -> id; collisions scanned */
	struct u64map by_owner;       /* uid -> live modules it added (its share) */
	uint16_t lru_head, lru_tail; /* modules holding descriptors, most recent first */
	size_t open_fds, max_fds;
	uint64_t refused_at_collection; /* modules_refused at the last collection */
	int vdso_id;                  /* 0 until first asked for */
	bool demangle;
	size_t cache_limit;           /* bytes of loaded symbol tables */
	uint64_t clock;
	char *debug_dir;
	/* debug searches that read whole files (debugsearch.h), tables built
	 * (symload.h), JIT maps' parses (jitread.h): the first lane takes only
	 * the parses, so that a JIT is not named seconds late behind a debug
	 * file's CRC or a big symbol table; the other two take all, so that a
	 * table is not built behind two CRCs */
	struct offload *lane;
	struct symbolizer_stats stats;
};

static struct module *module_of(const struct symbolizer *s, uint16_t id)
{
	if (id < FRAME_MODULE_FIRST || (size_t)(id - FRAME_MODULE_FIRST) >= s->n_modules ||
	    s->modules[id - FRAME_MODULE_FIRST].kind == MODULE_FREE)
		return NULL;
	return &s->modules[id - FRAME_MODULE_FIRST];
}

static uint16_t id_of(const struct symbolizer *s, const struct module *m)
{
	return (uint16_t)(m - s->modules + FRAME_MODULE_FIRST);
}

static uint64_t file_key(dev_t dev, uint64_t inode)
{
	return hash_u64(hash_u64(dev) ^ inode) & ~1ULL; /* never U64MAP_EMPTY */
}

static struct file_id file_id_of(const struct stat *st)
{
	return (struct file_id){
		.dev = st->st_dev, .inode = st->st_ino, .size = (uint64_t)st->st_size,
		.mtime_ns = st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
		.ctime_ns = st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec,
	};
}

static bool file_id_eq(const struct file_id *a, const struct file_id *b)
{
	return a->dev == b->dev && a->inode == b->inode && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

int symbolizer_new(const struct symbolizer_opts *opts, struct symbolizer **ret,
		   int *ret_kernel_error)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	int r = 0;

	if (!s)
		return -ENOMEM;
	u64map_init(&s->by_file);
	u64map_init(&s->jit_by_process);
	u64map_init(&s->by_owner);
	s->demangle = opts->demangle;
	s->cache_limit = opts->cache_bytes ? opts->cache_bytes : 256u << 20;
	s->max_fds = opts->max_fds ? opts->max_fds : SYMBOLIZER_MAX_FDS;
	s->max_modules = opts->max_modules && opts->max_modules < MODULES_MAX ? opts->max_modules :
										 MODULES_MAX;
	s->debug_dir = strdup(opts->debug_dir ? opts->debug_dir : DEBUGINFO_DEFAULT_DIR);
	s->free_ids = malloc(MODULES_MAX * sizeof(*s->free_ids));
	r = !s->debug_dir || !s->free_ids ? -ENOMEM :
	    offload_new(&(struct offload_opts){ .lanes = 3, .small_lanes = 1, .nice = OFFLOAD_BACKGROUND_NICE,
						.take_back = true },
			&s->lane);
	if (r < 0) {
		free(s->debug_dir);
		free(s->free_ids);
		free(s);
		return r;
	}
	if (opts->kallsyms_path)
		r = ksyms_load(opts->kallsyms_path, &s->ksyms);
	/* without it the kernel's mapping only goes without a build-id */
	if (opts->kernel_notes_path)
		(void)ksyms_read_build_id(opts->kernel_notes_path, s->kernel_build_id,
					  sizeof(s->kernel_build_id));
	if (ret_kernel_error)
		*ret_kernel_error = r;
	*ret = s;
	return 0;
}

/* Forgets the demangled names: they are keyed by the address of names in
 * tables about to be freed. */
static void forget_demangled(struct module *m)
{
	U64MAP_FOREACH(slot, &m->demangled)
		free((char *)(uintptr_t)slot->value);
	u64map_done(&m->demangled);
}

/* Frees m's line tables, or, while a lane indexes their units, hands them
 * to that job, which frees them when it is back (owns_srcline is a field
 * of its own, which the lane does not touch). */
static void drop_srcline(struct module *m)
{
	if (m->indexing) {
		m->indexing->owns_srcline = true;
		m->indexing = NULL;
		m->srcline = NULL;
	}
	m->srcline = srcline_free(m->srcline);
}

/* Frees what was parsed from a module's files (symbols, lines, demangled
 * names, a JIT's map); its descriptors stay, so it can be parsed again. */
static void unload(struct module *m)
{
	m->perfmap = perfmap_free(m->perfmap);
	m->perfmap_size = 0;
	forget_demangled(m);
	m->symtab = elf_symtab_free(m->symtab);
	drop_srcline(m);
	m->srcline_error = 0;
}

static size_t loaded_bytes(const struct module *m)
{
	struct srcline_stats st = { 0 };

	if (m->srcline)
		srcline_get_stats(m->srcline, &st);
	return (m->symtab ? elf_symtab_memory(m->symtab) : 0) + st.memory_bytes +
	       u64map_memory(&m->demangled) + (m->perfmap ? perfmap_memory(m->perfmap) : 0);
}

/* What one module's tables may take, its symbols and line tables together,
 * or its JIT map: half of the cache, so that the tables a stack needs
 * besides them fit, and loading those does not evict them.  A table past
 * the cache was kept alone: the next table loaded evicted it, the next
 * lookup loaded it again, and the two took turns while a query waited
 * for names (libc's debug file's line tables 151 times in 15 s; a table
 * of a million symbols until the query gave up waiting and answered
 * unnamed).  Past its room a table is refused (tables_refused). */
static size_t module_room(const struct symbolizer *s)
{
	return s->cache_limit / 2;
}

/* Keeps the parsed symbol tables within the cache limit by unloading the
 * least recently used ones, never keep. */
static void trim_cache(struct symbolizer *s, const struct module *keep)
{
	size_t total = 0;

	for (size_t i = 0; i < s->n_modules; i++)
		total += loaded_bytes(&s->modules[i]);
	while (total > s->cache_limit) {
		struct module *lru = NULL;

		for (size_t i = 0; i < s->n_modules; i++) {
			struct module *m = &s->modules[i];

			if (m != keep && (m->symtab || m->perfmap) &&
			    (!lru || m->last_used < lru->last_used))
				lru = m;
		}
		if (!lru)
			break;
		total -= loaded_bytes(lru);
		unload(lru);
		s->stats.cache_evictions++;
	}
}

struct symbolizer *symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return NULL;
	offload_free(s->lane); /* first: it may be reading */
	for (size_t i = 0; i < s->n_modules; i++) {
		struct module *m = &s->modules[i];

		m->indexing = NULL; /* freed with the lane, and not the srcline's owner */
		free(m->path);
		closep(&m->fd);
		closep(&m->debug_fd);
		unload(m);
	}
	free(s->debug_dir);
	free(s->modules);
	free(s->free_ids);
	u64map_done(&s->by_file);
	u64map_done(&s->jit_by_process);
	u64map_done(&s->by_owner);
	ksyms_free(s->ksyms);
	free(s);
	return NULL;
}

/* --- descriptors: a bounded LRU list ------------------------------------
 *
 * Every module descriptor but the vDSO's (a binary's, its separate debug
 * file's, a JIT map's) is counted in open_fds and its module is on a list,
 * most recently used first.  Before one is opened, the modules at the end
 * of the list give theirs up until there is room under max_fds; what was
 * parsed from them stays, and module_fd() opens the file again when it is
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

/* Puts m first on the list (it holds a descriptor, just used). */
static void lru_touch(struct symbolizer *s, struct module *m)
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

/* Closes the descriptors of m; what was parsed from them stays.  A debug
 * file closed is searched for again when it is needed. */
static void close_fds(struct symbolizer *s, struct module *m)
{
	s->open_fds -= (m->fd >= 0) + (m->debug_fd >= 0);
	closep(&m->fd);
	closep(&m->debug_fd);
	m->fd = m->debug_fd = -1;
	lru_unlink(s, m);
}

/* Makes room for n more descriptors under max_fds, closing those of the
 * least recently used modules, never keep's. */
static void make_fd_room(struct symbolizer *s, const struct module *keep, size_t n)
{
	while (s->open_fds + n > s->max_fds && s->lru_tail) {
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

/* Gives m the descriptor fd (its binary's or JIT map's), counted. */
static void take_fd(struct symbolizer *s, struct module *m, int fd)
{
	m->fd = fd;
	m->fd_error = 0;
	s->open_fds++;
	lru_touch(s, m);
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


/* Opens the mapped file the way that survives the most: map_files names the
 * very inode mapped (deleted or in another mount namespace); the path seen
 * from the process's root comes next.  Either way only a regular file is
 * opened (procfs.h: a mapped device is refused unopened), of any size or
 * owner.  Checks that it is the same inode, and returns what identifies it
 * in *ret_id. */
static int open_mapped_file(pid_t pid, uint64_t start, uint64_t end, const char *path,
			    dev_t dev, uint64_t inode, struct file_id *ret_id)
{
	static const struct procfs_file_rules binary = { .follow_symlinks = true };
	char p[96];
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, start, end);
	fd = procfs_open_link(AT_FDCWD, p, &binary);
	if (fd < 0 && path[0] == '/')
		fd = procfs_open_in_process(pid, PROCFS_START_ANY, path, &binary);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != inode) {
		close(fd);
		return -ESTALE;
	}
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

/* The path a module's file was mapped at, without " (deleted)"; NULL when
 * out of memory. */
static char *mapped_path(const struct module *m)
{
	char *path = strdup(m->path), *deleted;

	if (path && (deleted = strstr(path, " (deleted)")))
		*deleted = 0;
	return path;
}

/* The descriptor of file module m, opened again if the LRU closed it: from
 * the last process seen mapping it (map_files, or the path in its root),
 * else the path from perfd's own root, and only if it is the very file
 * the module was read from (file_id).  -errno when there is none now
 * (remembered until a process maps the file again). */
static int module_fd(struct symbolizer *s, struct module *m)
{
	static const struct procfs_file_rules binary = { .follow_symlinks = true };
	struct file_id now;
	_cleanup_free_ char *path = NULL;
	int fd;

	if (m->fd >= 0) {
		lru_touch(s, m);
		return m->fd;
	}
	if (m->kind != MODULE_FILE || !m->verified || m->fd_error < 0)
		return -EBADF;
	make_fd_room(s, m, 1);
	fd = open_mapped_file(m->pid, m->map_start, m->map_end, m->path, m->file.dev,
			      m->file.inode, &now);
	if (fd < 0) {
		/* the process is gone: the path as perfd sees it, which the
		 * identity check below tells apart from any other file */
		path = mapped_path(m);
		if (!path)
			return -ENOMEM;
		fd = procfs_open_in_root(AT_FDCWD, path, &binary);
		if (fd >= 0) {
			struct stat st;

			if (fstat(fd, &st) < 0) {
				int r = negative_errno();

				close(fd);
				fd = r;
			} else {
				now = file_id_of(&st);
			}
		}
	}
	if (fd >= 0 && !file_id_eq(&now, &m->file)) {
		close(fd);
		fd = -ESTALE;
	}
	if (fd < 0) {
		m->fd_error = fd;
		s->stats.fds_reopen_failed++;
		return -EBADF;
	}
	take_fd(s, m, fd);
	s->stats.fds_reopened++;
	return fd;
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
	unload(m);
	free(m->path);
	*m = (struct module){ .kind = MODULE_FREE, .fd = -1, .debug_fd = -1 };
	s->free_ids[s->n_free++] = id;
	s->live_modules--;
}

/* Notes that process pid maps m at map: the way to open it again.  A
 * module without a descriptor (closed, or its first process gone before it
 * could be opened) gets one now if the caller has it (fd, else -1), and
 * may try again if opening failed before. */
static void note_mapper(struct symbolizer *s, struct module *m, pid_t pid,
			const struct procmap *map, int fd)
{
	m->pid = pid;
	m->map_start = map->start;
	m->map_end = map->end;
	m->fd_error = 0;
	if (fd < 0)
		return;
	if (m->fd >= 0) {
		close(fd);
		lru_touch(s, m);
		return;
	}
	take_fd(s, m, fd);
	if (!m->build_id[0])
		read_build_id(fd, m->build_id);
}

int symbolizer_module_for_mapping(struct symbolizer *s, pid_t pid, uint32_t owner_uid,
				  const struct procmap *map)
{
	dev_t dev = makedev(map->dev_major, map->dev_minor);
	uint64_t path_hash;
	struct file_id fid;
	struct module *m;
	int id, fd = -1, r;

	if (map->inode == 0 || map->path[0] != '/')
		return -EINVAL;
	path_hash = hash_text(map->path, strlen(map->path));
	r = stat_mapped_file(pid, map, &fid);
	if (r < 0) {
		/* no map_files (the range is not mapped now, or it cannot be
		 * followed): the path in the process's root, opened */
		make_fd_room(s, NULL, 1);
		fd = open_mapped_file(pid, map->start, map->end, map->path, dev, map->inode, &fid);
		r = fd < 0 ? fd : 0;
	}
	if (r < 0) {
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
		m->pid = pid;
		m->fd_error = r;
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
		note_mapper(s, m, pid, map, fd);
		return id_of(s, m);
	}
	id = add_module(s, MODULE_FILE, map->path, owner_uid, &m);
	if (id < 0) {
		if (fd >= 0)
			close(fd);
		return id;
	}
	m->file = fid;
	m->verified = true;
	m->path_hash = path_hash;
	chain_add(s, m);
	if (fd < 0) {
		struct file_id opened;

		make_fd_room(s, NULL, 1);
		fd = open_mapped_file(pid, map->start, map->end, map->path, dev, map->inode,
				      &opened);
		if (fd >= 0 && !file_id_eq(&opened, &fid)) {
			/* changed between the stat and the open */
			close(fd);
			fd = -ESTALE;
		}
	}
	m->pid = pid;
	m->map_start = map->start;
	m->map_end = map->end;
	if (fd < 0) {
		m->fd_error = fd;
		return id;
	}
	take_fd(s, m, fd);
	read_build_id(fd, m->build_id);
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

/* What a perf map must be, as perf requires it and more: a regular file
 * reached through no symlink (procfs_open_in_root), owned by the process's
 * user or root, not a hard link to someone else's file, and small enough
 * to parse. */
static struct procfs_file_rules jit_map_rules(uint32_t owner_uid)
{
	return (struct procfs_file_rules){
		.max_size = PERFMAP_MAX_BYTES,
		.check_owner = true,
		.owner_uid = owner_uid,
		.single_link = true,
	};
}

/* Whether r is a map refused for what it is, not absent or unreadable. */
static bool jit_map_refused(int r)
{
	return r == -EPERM || r == -ELOOP || r == -EFBIG || r == -EWOULDBLOCK;
}

int symbolizer_jit_module(struct symbolizer *s, pid_t pid, uint64_t start_time_ns,
			  const char *map_path, uint32_t owner_uid)
{
	uint64_t key = process_key(pid, start_time_ns), *slot = u64map_get(&s->jit_by_process, key);
	struct procfs_file_rules rules = jit_map_rules(owner_uid);
	struct module *m;
	int id, fd;

	if (slot) {
		m = &s->modules[*slot - FRAME_MODULE_FIRST];
		if (m->pid == pid && m->start_time_ns == start_time_ns)
			return (int)*slot;
	}
	make_fd_room(s, NULL, 1);
	fd = procfs_open_in_process(pid, start_time_ns, map_path, &rules);
	if (fd < 0) {
		if (jit_map_refused(fd))
			s->stats.jit_maps_refused++;
		return fd;
	}
	id = add_module(s, MODULE_JIT, map_path, owner_uid, &m);
	if (id < 0) {
		close(fd);
		return id;
	}
	take_fd(s, m, fd);
	m->pid = pid;
	m->start_time_ns = start_time_ns;
	m->jit_owner_uid = owner_uid;
	m->perfmap_refused_size = -1;
	slot = u64map_upsert(&s->jit_by_process, key, NULL);
	if (slot)
		*slot = id; /* without the index it is only found again by a new id */
	return id;
}

/* Looks m's separate debug file up by build-id (an open and its headers:
 * cheap, done on the loop when a known debug file's descriptor was closed;
 * the first lookup is a load's, on the lane, see start_symtab_load) under
 * the root of the last process seen mapping it, into m->debug_fd, counted
 * among the descriptors.  Returns it or -errno. */
static int find_debug_file(struct symbolizer *s, struct module *m, int fd)
{
	_cleanup_free_ char *path = mapped_path(m);
	unsigned refused = 0;
	char root[64];
	int dfd;

	if (!path)
		return -ENOMEM;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)m->pid);
	make_fd_room(s, m, 1);
	dfd = debuginfo_find(fd, path, root, s->debug_dir, DEBUGINFO_BY_BUILD_ID, NULL, &refused);
	s->stats.debug_files_refused += refused;
	if (dfd < 0)
		return dfd;
	m->debug_fd = dfd;
	s->open_fds++;
	lru_touch(s, m);
	return dfd;
}

/* The descriptor of m's separate debug file, found again if the LRU
 * closed it; -errno when it has none now.  One the lane found through
 * .gnu_debuglink is searched for again there (the module goes back to
 * unsearched). */
static int module_debug_fd(struct symbolizer *s, struct module *m)
{
	int fd, dfd;

	if (m->debug_fd >= 0)
		return m->debug_fd;
	if (m->debug_source != DEBUG_FILE)
		return -ENOENT;
	fd = module_fd(s, m);
	if (fd < 0)
		return fd;
	dfd = find_debug_file(s, m, fd);
	if (dfd < 0)
		m->debug_source = DEBUG_UNSEARCHED;
	return dfd;
}

/* A lane job's name for module m: its index and serial, so that a job
 * coming back for a module given back meanwhile (its id may name another
 * file now) is told apart. */
static uint64_t module_key(const struct symbolizer *s, const struct module *m)
{
	return (uint64_t)(m - s->modules) | (uint64_t)m->serial << 32;
}

/* The module a job's key names, or NULL when it was given back since. */
static struct module *module_of_key(struct symbolizer *s, uint64_t key)
{
	size_t i = (uint32_t)key;
	struct module *m = i < s->n_modules ? &s->modules[i] : NULL;

	return m && m->serial == key >> 32 ? m : NULL;
}

/* Has the lane build m's symbol table (symload.h), unless it does
 * already: from the binary, with the symbols of a stripped binary's debug
 * file merged, as m->debug_source says (the build-id lookup on the lane
 * too, the first time; the slower searches follow in symload_done).  The
 * table m has, if any, serves until the new one is taken back.  Nothing
 * when m has no descriptor now (tried again when a process maps it). */
static void start_symtab_load(struct symbolizer *s, struct module *m)
{
	_cleanup_free_ char *path = NULL;
	struct symload *l;
	char root[64];
	int fd, dfd = -1;

	if (m->symtab_loading)
		return;
	fd = module_fd(s, m);
	if (fd < 0)
		return;
	if (m->kind == MODULE_FILE && m->debug_source == DEBUG_FILE && !m->merge_refused)
		dfd = module_debug_fd(s, m); /* back to unsearched when it is gone */
	if (symload_new(module_key(s, m), SYMLOAD_SYMBOLS, fd, dfd, &l) < 0)
		return; /* out of memory or descriptors: tried again at the next lookup */
	l->memory_limit = module_room(s);
	l->mini = m->debug_source == DEBUG_MINI && !m->merge_refused;
	if (m->kind == MODULE_FILE && m->debug_source == DEBUG_UNSEARCHED) {
		path = mapped_path(m);
		snprintf(root, sizeof(root), "/proc/%d/root", (int)m->pid);
		if (!path || symload_set_search(l, path, root, s->debug_dir) < 0) {
			symload_free(l);
			return;
		}
	}
	/* an unbounded pool refuses only after offload_finish, never called
	 * on this one (offload_free stops it) */
	(void)offload_submit(s->lane, &l->job);
	m->symtab_loading = true;
	s->stats.symtab_loads_pending++;
	s->stats.cache_misses++;
}

/* Has the lane open m's DWARF line tables (the binary's, else its debug
 * file's), unless it does already or cannot now. */
static void start_line_load(struct symbolizer *s, struct module *m)
{
	struct symload *l;
	int fd, dfd;

	if (m->srcline_loading)
		return;
	fd = module_fd(s, m);
	if (fd < 0) {
		if (fd != -EBADF) /* no descriptor now: another time */
			m->srcline_error = fd;
		return;
	}
	dfd = module_debug_fd(s, m);
	if (symload_new(module_key(s, m), SYMLOAD_LINES, fd, dfd, &l) < 0)
		return;
	/* libdw's rows included, beside the module's symbols */
	l->memory_limit = module_room(s) - MIN(module_room(s), elf_symtab_memory(m->symtab));
	(void)offload_submit(s->lane, &l->job);
	m->srcline_loading = true;
	s->stats.line_loads_pending++;
}

/* Has the lane index the units of m's line tables that lookups asked for
 * (srcline_want), unless it does already: the frames in them count as
 * pending meanwhile.  Counted as a line load. */
static void start_unit_index(struct symbolizer *s, struct module *m)
{
	struct symload *l;

	if (m->indexing || !m->srcline ||
	    symload_new_units(module_key(s, m), m->srcline, &l) < 0)
		return; /* out of memory: asked for again by the next lookup */
	(void)offload_submit(s->lane, &l->job);
	m->indexing = l;
	s->stats.line_loads_pending++;
}

/* A stripped binary whose debug file no build-id names: the .gnu_debuglink
 * search and MiniDebugInfo read whole files and go to the lane
 * (debugsearch.h); what they find is merged by another load. */
static void start_debug_search(struct symbolizer *s, struct module *m)
{
	_cleanup_free_ char *path = mapped_path(m);
	struct debugsearch *q;
	char root[64];
	int fd = module_fd(s, m);

	m->debug_source = DEBUG_NONE;
	if (!path || fd < 0)
		return;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)m->pid);
	/* the job keeps a descriptor of its own: the LRU may close fd */
	if (debugsearch_new(module_key(s, m), fd, path, root, s->debug_dir, &q) < 0)
		return; /* out of memory or descriptors: named from .dynsym */
	(void)offload_submit(s->lane, &q->job);
	m->debug_source = DEBUG_SEARCHING;
	s->stats.debug_searches_pending++;
}

/* Gives m the descriptor of its debug file, dfd, counted. */
static void take_debug_fd(struct symbolizer *s, struct module *m, int dfd)
{
	make_fd_room(s, m, 1);
	s->open_fds -= m->debug_fd >= 0;
	closep(&m->debug_fd);
	m->debug_fd = dfd;
	s->open_fds++;
	lru_touch(s, m);
	m->debug_source = DEBUG_FILE;
}

/* Takes a built table back (a module given back meanwhile, whose id may
 * name another file now, takes nothing: the serial says).  A stripped
 * binary whose debug file was not found by build-id gets its slower
 * search now. */
static void symload_done(struct symbolizer *s, struct symload *l)
{
	struct module *m = module_of_key(s, l->job.key);

	if (l->what == SYMLOAD_UNITS) {
		s->stats.line_loads_pending--;
		s->stats.line_units_refused += l->units_refused;
		if (!m || m->indexing != l)
			return; /* unloaded meanwhile: the job owns what it read */
		m->indexing = NULL;
		/* asked for while the job ran past them */
		if (srcline_wants(m->srcline))
			start_unit_index(s, m);
		trim_cache(s, m); /* the units count against the cache too */
		return;
	}
	if (l->what == SYMLOAD_LINES) {
		s->stats.line_loads_pending--;
		s->stats.line_units_refused += l->units_refused;
		if (!m || !m->srcline_loading)
			return;
		m->srcline_loading = false;
		s->stats.tables_refused += l->error == -EFBIG;
		if (l->error < 0) {
			m->srcline_error = l->error;
			return;
		}
		drop_srcline(m);
		m->srcline = TAKE_PTR(l->srcline);
		trim_cache(s, m); /* line tables count against the cache too */
		return;
	}
	s->stats.symtab_loads_pending--;
	if (!m || !m->symtab_loading)
		return;
	m->symtab_loading = false;
	s->stats.debug_files_refused += l->refused;
	if (l->error < 0) {
		s->stats.tables_refused += l->error == -EFBIG;
		if (!m->symtab) /* a reload that failed keeps the table it had */
			m->load_error = l->error;
		return;
	}
	forget_demangled(m);
	elf_symtab_free(m->symtab);
	m->symtab = TAKE_PTR(l->symtab);
	s->stats.modules_loaded++;
	/* a debug file counts once, when found (here, or by a search) */
	if (l->found_debug_fd >= 0) {
		s->stats.debug_files += l->merge_error >= 0;
		take_debug_fd(s, m, TAKE_FD(l->found_debug_fd));
	}
	s->stats.tables_refused += l->merge_error == -EFBIG;
	m->merge_refused = m->merge_refused || l->merge_error == -EFBIG;
	if (m->kind == MODULE_FILE && !elf_symtab_has_symtab(m->symtab)) {
		if (m->debug_source == DEBUG_UNSEARCHED)
			start_debug_search(s, m);
		else if ((m->debug_source == DEBUG_FILE || m->debug_source == DEBUG_MINI) &&
			 l->merge_error == 1 && !m->merge_refused)
			start_symtab_load(s, m); /* a search ended while it was built */
	}
	/* line tables opened beside the table this one replaces (a merge's
	 * reload) may leave it no room: read again within what it leaves */
	if (m->srcline && loaded_bytes(m) > module_room(s)) {
		drop_srcline(m);
		m->srcline_error = 0;
	}
	trim_cache(s, m);
}

/* Takes a finished search back: its debug file or MiniDebugInfo becomes
 * the module's, merged by a load on the lane if its symbols are loaded
 * (else at the next load, as after an eviction).  A module given back
 * meanwhile takes nothing. */
static void debug_search_done(struct symbolizer *s, struct debugsearch *q)
{
	struct module *m = module_of_key(s, q->job.key);
	struct symload *l;
	int fd;

	s->stats.debug_searches_pending--;
	s->stats.debug_files_refused += q->refused;
	if (!m || m->debug_source != DEBUG_SEARCHING)
		return;
	m->debug_source = DEBUG_NONE;
	s->stats.debug_files += q->debug_fd >= 0;
	s->stats.minidebuginfo += q->debug_fd < 0 && q->image;
	if (q->debug_fd >= 0)
		take_debug_fd(s, m, TAKE_FD(q->debug_fd));
	else if (q->image)
		m->debug_source = DEBUG_MINI;
	if (m->debug_source == DEBUG_NONE || !m->symtab || m->symtab_loading)
		return;
	if (m->debug_source == DEBUG_FILE) {
		start_symtab_load(s, m);
		return;
	}
	/* the image unpacked once: the load takes it */
	fd = module_fd(s, m);
	if (fd < 0 || symload_new(module_key(s, m), SYMLOAD_SYMBOLS, fd, -1, &l) < 0)
		return;
	l->memory_limit = module_room(s);
	l->image = TAKE_PTR(q->image);
	l->image_size = q->image_size;
	(void)offload_submit(s->lane, &l->job);
	m->symtab_loading = true;
	s->stats.symtab_loads_pending++;
}

/* Takes a finished parse back: its map becomes the module's, unless it is
 * past the caps or the module's room (refused once per size, the old
 * names kept).  A module given back meanwhile takes nothing. */
static void jit_read_done(struct symbolizer *s, struct jitread *j)
{
	struct module *m = module_of_key(s, j->job.key);

	s->stats.jit_maps_pending--;
	if (!m || m->kind != MODULE_JIT || !m->perfmap_reading)
		return;
	m->perfmap_reading = false;
	if (j->error >= 0 && perfmap_memory(j->map) > module_room(s))
		j->error = -EFBIG;
	if (j->error == -EFBIG) {
		m->perfmap_refused_size = j->size;
		s->stats.jit_maps_refused++;
	}
	if (j->error < 0)
		return;
	perfmap_free(m->perfmap);
	m->perfmap = TAKE_PTR(j->map);
	m->perfmap_size = j->size;
	s->stats.jit_maps++;
	trim_cache(s, m);
}

void symbolizer_complete(struct symbolizer *s)
{
	struct offload_job *j = offload_take_done(s->lane), *next;

	for (; j; j = next) {
		next = j->next;
		if (jitread_is(j)) {
			jit_read_done(s, jitread_of(j));
			jitread_free(jitread_of(j));
		} else if (symload_is(j)) {
			symload_done(s, symload_of(j));
			symload_free(symload_of(j));
		} else {
			debug_search_done(s, debugsearch_of(j));
			debugsearch_free(debugsearch_of(j));
		}
	}
}

int symbolizer_fd(const struct symbolizer *s)
{
	return offload_fd(s->lane);
}

/* m's symbol table, or NULL when it is not loaded: its load is started
 * then (start_symtab_load), and the frame named as module+offset until
 * it is taken back; NULL also when it cannot be loaded. */
static struct elf_symtab *module_symtab(struct symbolizer *s, struct module *m)
{
	m->last_used = ++s->clock;
	if (m->symtab || m->load_error < 0) {
		s->stats.cache_hits += m->symtab != NULL;
		return m->symtab;
	}
	start_symtab_load(s, m);
	return NULL;
}

/* Whether the unit of m's line tables covering frame waits for the lane
 * (whose job is started then, if it is not running). */
static bool unit_pending(struct symbolizer *s, struct module *m, uint64_t frame)
{
	uint64_t vaddr;

	if (elf_symtab_offset_to_vaddr(m->symtab, frame_address(frame), &vaddr) < 0 ||
	    srcline_want(m->srcline, vaddr) != -EAGAIN)
		return false;
	start_unit_index(s, m);
	return true;
}

bool symbolizer_frame_pending(struct symbolizer *s, uint64_t frame, bool lines)
{
	struct module *m = module_of(s, frame_module(frame));

	if (!m || m->kind == MODULE_JIT)
		return false;
	if (!m->symtab)
		(void)module_symtab(s, m);
	if (m->symtab_loading)
		return true;
	if (!lines)
		return false;
	if (m->kind == MODULE_FILE && m->symtab && !m->srcline && !m->srcline_error)
		start_line_load(s, m);
	if (m->srcline_loading)
		return true;
	return m->kind == MODULE_FILE && m->symtab && m->srcline && unit_pending(s, m, frame);
}

size_t symbolizer_loads_pending(const struct symbolizer *s)
{
	return s->stats.symtab_loads_pending + s->stats.line_loads_pending;
}

int symbolizer_settle(struct symbolizer *s, unsigned timeout_ms)
{
	uint64_t end = now_monotonic_ns() + (uint64_t)timeout_ms * 1000000;

	for (;;) {
		uint64_t now = now_monotonic_ns();
		int r;

		symbolizer_complete(s);
		if (!symbolizer_loads_pending(s) && !s->stats.debug_searches_pending &&
		    !s->stats.jit_maps_pending)
			return 0;
		if (now >= end)
			return -ETIMEDOUT;
		r = offload_wait_idle(s->lane, (unsigned)((end - now) / 1000000) + 1);
		if (r < 0 && r != -ETIMEDOUT)
			return r;
	}
}

static const char *special_name(uint64_t what)
{
	switch (what) {
	case FRAME_SPECIAL_STACK_LIMIT:
		return "[dropped: stack table full]";
	case FRAME_SPECIAL_KSTACK_ERROR:
		return "[kernel stack unavailable]";
	case FRAME_SPECIAL_USTACK_ERROR:
		return "[user stack unavailable]";
	case FRAME_SPECIAL_UNWIND_PENDING:
		return "[unwind table pending]";
	case FRAME_SPECIAL_TRUNCATED:
		return "[truncated]";
	case FRAME_SPECIAL_CONTEXT_SWITCH:
		return "[context switch]";
	default:
		return "[unknown]";
	}
}

/* (Re)reads a JIT module's perf map or jitdump when it was never read or
 * has grown since: the JIT appends as it compiles.  Reads through the descriptor
 * opened while the process lived, so it works after the process is gone,
 * and only while the file still meets the rules it was opened under (a
 * map grown past the cap is refused once per size, its old names kept).
 * The parse goes to the lane (jitread.h); jit_read_done takes it in. */
static void refresh_perfmap(struct symbolizer *s, struct module *m)
{
	struct procfs_file_rules rules = jit_map_rules(m->jit_owner_uid);
	struct jitread *j;
	struct stat st;
	int fd, r;

	if (m->perfmap_reading)
		return;
	if (m->fd < 0 && m->fd_error == 0) {
		/* closed by the LRU: only its process can open it again */
		make_fd_room(s, m, 1);
		fd = procfs_open_in_process(m->pid, m->start_time_ns, m->path, &rules);
		if (fd < 0) {
			m->fd_error = fd;
			s->stats.fds_reopen_failed++;
			if (jit_map_refused(fd))
				s->stats.jit_maps_refused++;
			return;
		}
		take_fd(s, m, fd);
		s->stats.fds_reopened++;
	} else if (m->fd >= 0) {
		lru_touch(s, m);
	}
	if (m->fd < 0 || fstat(m->fd, &st) < 0 || (m->perfmap && st.st_size == m->perfmap_size) ||
	    st.st_size == m->perfmap_refused_size)
		return;
	r = procfs_check_fd(m->fd, &rules);
	/* a file bigger than the whole cache is refused unread; parsed, a
	 * perf map takes more than its file's bytes (a jitdump, with its
	 * code, less), and one past the module's room is refused after the
	 * parse (jit_read_done) */
	if (r >= 0 && (size_t)st.st_size > s->cache_limit)
		r = -EFBIG;
	if (r < 0) {
		m->perfmap_refused_size = st.st_size;
		s->stats.jit_maps_refused++;
		return;
	}
	if (jitread_new(module_key(s, m), m->fd, st.st_size, &j) < 0)
		return; /* out of memory or descriptors: tried again at the next miss */
	(void)offload_submit(s->lane, &j->job);
	m->perfmap_reading = true;
	s->stats.jit_maps_pending++;
}

void symbolizer_note_jit_frame(struct symbolizer *s, uint64_t frame)
{
	struct module *m = module_of(s, frame_module(frame));
	uint64_t now;

	if (!m || m->kind != MODULE_JIT || m->perfmap_reading ||
	    (m->perfmap && perfmap_lookup(m->perfmap, frame_address(frame), NULL)))
		return;
	now = now_monotonic_ns();
	if (now - m->perfmap_checked_ns < SYMBOLIZER_JIT_CHECK_NS)
		return;
	m->perfmap_checked_ns = now;
	refresh_perfmap(s, m);
}

static const char *jit_name(struct symbolizer *s, struct module *m, uint64_t addr)
{
	const char *name = NULL;

	m->last_used = ++s->clock;
	if (m->perfmap)
		name = perfmap_lookup(m->perfmap, addr, NULL);
	if (!name) {
		refresh_perfmap(s, m);
		if (m->perfmap)
			name = perfmap_lookup(m->perfmap, addr, NULL);
	}
	return name;
}

/* The demangled form of a name owned by module m's symbol table or line
 * tables, cached by the name's address for as long as they are loaded. */
static const char *demangled(struct symbolizer *s, struct module *m, const char *name)
{
	uint64_t *slot;
	bool added;
	char *d;

	if (!s->demangle || name[0] != '_')
		return name;
	slot = u64map_upsert(&m->demangled, (uintptr_t)name, &added);
	if (!slot)
		return name;
	if (!added) {
		s->stats.demangle_cache_hits++;
		return *slot ? (const char *)(uintptr_t)*slot : name;
	}
	s->stats.demangle_cache_misses++;
	d = demangle(name);
	*slot = (uintptr_t)d;
	return d ? d : name;
}

/* The demangled name of the symbol at vaddr of file module m, or NULL. */
static const char *file_symbol(struct symbolizer *s, struct module *m, struct elf_symtab *t,
			       uint64_t vaddr)
{
	uint64_t off;
	const char *name = elf_symtab_lookup(t, vaddr, &off);

	return name ? demangled(s, m, name) : NULL;
}

/* Resolves a frame the symbol tables name (no lines): one record. */
static size_t resolve_symbol(struct symbolizer *s, uint64_t frame, struct frame_record *out,
			     char *scratch, size_t size)
{
	uint16_t module = frame_module(frame);
	uint64_t addr = frame_address(frame);
	const char *name = NULL;
	uint64_t off = 0;

	s->stats.lookups++;
	*out = (struct frame_record){ .kind = FRAME_KIND_NATIVE, .offset = addr };
	if (module == FRAME_MODULE_KERNEL) {
		out->kind = FRAME_KIND_KERNEL;
		out->module = FRAME_MODULE_KERNEL;
		out->offset = frame_kernel_address(frame);
		if (s->ksyms)
			name = ksyms_lookup(s->ksyms, out->offset, NULL, &off);
		out->function = name ? name : "[unknown]";
		out->symbol_offset = name ? off : 0;
	} else if (module == FRAME_MODULE_SPECIAL) {
		out->kind = FRAME_KIND_SPECIAL;
		out->function = special_name(addr);
	} else if (module_of(s, module)) {
		struct module *m = module_of(s, module);

		out->module = module;
		if (m->kind == MODULE_JIT) {
			out->kind = FRAME_KIND_JIT;
			name = jit_name(s, m, addr);
			if (!name) {
				snprintf(scratch, size, "[jit]+0x%" PRIx64, addr);
				name = scratch;
			}
		} else {
			struct elf_symtab *t = module_symtab(s, m);
			uint64_t vaddr;

			if (t && elf_symtab_offset_to_vaddr(t, addr, &vaddr) == 0)
				name = file_symbol(s, m, t, vaddr);
			if (!name) {
				snprintf(scratch, size, "%s+0x%" PRIx64, m->basename, addr);
				name = scratch;
			}
		}
		out->function = name;
	} else {
		out->function = "[unknown]";
	}
	return 1;
}

const char *symbolizer_frame_name(struct symbolizer *s, uint64_t frame,
				  char *buf, size_t size)
{
	struct frame_record r;
	char scratch[PATH_MAX + 32];

	resolve_symbol(s, frame, &r, scratch, sizeof(scratch));
	snprintf(buf, size, "%s", r.function);
	return buf;
}

size_t symbolizer_resolve(struct symbolizer *s, uint64_t frame, bool lines,
			  struct frame_record *out, size_t cap, char *scratch, size_t size)
{
	uint16_t module = frame_module(frame);
	struct srcline_frame chain[FRAME_MAX_INLINE];
	struct elf_symtab *t;
	struct module *m;
	uint64_t vaddr;
	size_t k = 0;
	int n;

	m = module_of(s, module);
	if (!lines || cap < 1 || !m)
		return resolve_symbol(s, frame, out, scratch, size);
	t = m->kind == MODULE_FILE ? module_symtab(s, m) : NULL;
	if (!t || elf_symtab_offset_to_vaddr(t, frame_address(frame), &vaddr) < 0)
		return resolve_symbol(s, frame, out, scratch, size);
	if (!m->srcline && !m->srcline_error)
		start_line_load(s, m); /* named without lines until it is done */
	n = m->srcline ? srcline_lookup_indexed(m->srcline, vaddr, chain, ELEMENTSOF(chain)) : 0;
	if (n == -EAGAIN)
		start_unit_index(s, m); /* named without lines until it is indexed */
	if (n <= 0)
		return resolve_symbol(s, frame, out, scratch, size);

	/* chain[] is innermost first; records are outermost first, and the
	 * outermost is the function the symbol table names (its first line
	 * is DWARF's for the function around the address). */
	resolve_symbol(s, frame, &out[0], scratch, size);
	for (int i = n - 1; i >= 0 && k < cap; i--, k++) {
		const char *fn = chain[i].function;

		if (k > 0) {
			/* an inlined frame without a name is its caller's */
			out[k] = out[0];
			out[k].function = fn ? demangled(s, m, fn) : out[0].function;
		}
		out[k].file = chain[i].file;
		out[k].line = chain[i].line;
		out[k].start_line = chain[i].decl_line;
	}
	return k;
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
	return module_fd(s, m);
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

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *ret)
{
	size_t mem = sizeof(*s) + s->cap_modules * sizeof(struct module) +
		     MODULES_MAX * sizeof(*s->free_ids) + u64map_memory(&s->by_file) +
		     u64map_memory(&s->jit_by_process) + u64map_memory(&s->by_owner);

	*ret = s->stats;
	for (size_t i = 0; i < s->n_modules; i++) {
		const struct module *m = &s->modules[i];
		size_t loaded;

		if (m->kind == MODULE_FREE)
			continue;
		loaded = loaded_bytes(m);
		mem += strlen(m->path) + 1 + loaded;
		ret->cache_bytes += loaded;
		/* not parsed, or without a descriptor to parse it from */
		ret->modules_failed += m->load_error < 0 ||
				       (m->kind == MODULE_FILE && !m->symtab && m->fd < 0 &&
					(!m->verified || m->fd_error < 0));
	}
	ret->modules = s->live_modules;
	ret->modules_limit = s->max_modules;
	ret->fds_open = s->open_fds;
	ret->fds_limit = s->max_fds;
	ret->kernel_symbols = s->ksyms ? ksyms_count(s->ksyms) : 0;
	ret->cache_limit = s->cache_limit;
	ret->memory_bytes = mem;
}

static int modules_for_mapping(void *ctx, pid_t pid, uint32_t owner_uid, const struct procmap *map)
{
	return symbolizer_module_for_mapping(ctx, pid, owner_uid, map);
}

static int modules_vdso(void *ctx)
{
	return symbolizer_vdso_module(ctx);
}

static int modules_jit(void *ctx, pid_t pid, uint64_t start_time_ns, const char *map_path,
		       uint32_t owner_uid)
{
	return symbolizer_jit_module(ctx, pid, start_time_ns, map_path, owner_uid);
}

static void modules_note_jit_frame(void *ctx, uint64_t frame)
{
	symbolizer_note_jit_frame(ctx, frame);
}

struct module_registry symbolizer_modules(struct symbolizer *s)
{
	return (struct module_registry){ .for_mapping = modules_for_mapping,
					 .vdso = modules_vdso,
					 .jit = modules_jit,
					 .note_jit_frame = modules_note_jit_frame,
					 .ctx = s };
}
