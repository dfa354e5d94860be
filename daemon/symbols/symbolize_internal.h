/* SPDX-License-Identifier: MIT */
/*
 * symbolize_internal.h - what the symbolizer's three files share, and
 * nothing outside symbols/ includes: the module and the symbolizer
 * themselves (symbolize.h says what they are for), and what each file
 * offers the others.
 *
 *  symbolize.c  the symbolizer made and freed, its cache of parsed tables
 *               (bounded in bytes, least recently used unloaded), and a
 *               frame named;
 *  modtab.c     the table of modules: which file a module is, its id and
 *               each owner's share of the ids, its descriptors under their
 *               LRU bound, the ids given back, and the module registry
 *               profile/ names mappings through;
 *  symloads.c   the tables built on the lanes (symbol tables, debug files
 *               searched, line tables and their units, JIT maps), started
 *               when a lookup needs one and taken back by
 *               symbolizer_complete.
 */
#ifndef PERFD_SYMBOLIZE_INTERNAL_H
#define PERFD_SYMBOLIZE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/u64map.h"
#include "process/procfs.h"
#include "profile/frame.h"
#include "symbols/buildid.h"
#include "symbols/symbolize.h"

struct offload_job;


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
	/* its descriptor is being opened again on the lane, or (queued)
	 * waits for its turn to be (modtab.c) */
	bool reopening, reopen_queued;
	/* what a reopen is to start once the descriptor is back (symloads.c):
	 * the symbol table's load, the debug file's search */
	bool load_waits_fd, search_waits_fd;
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
	/* descriptors module probes may open on a lane (symbolize.h):
	 * counted against max_fds from plan to apply */
	size_t fds_reserved;
	atomic_size_t fds_closing; /* handed to the lane, not closed yet (sym_close_later) */
	/* reopens waiting for a slot (modtab.c): a ring of module keys
	 * (sym_module_key), MODULES_MAX of them, made when first needed;
	 * queued counts its entries, stale ones included, waiting the live */
	uint64_t *reopen_queue;
	size_t reopen_head, reopens_queued, reopens_waiting;
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

static inline struct module *module_of(const struct symbolizer *s, uint16_t id)
{
	if (id < FRAME_MODULE_FIRST || (size_t)(id - FRAME_MODULE_FIRST) >= s->n_modules ||
	    s->modules[id - FRAME_MODULE_FIRST].kind == MODULE_FREE)
		return NULL;
	return &s->modules[id - FRAME_MODULE_FIRST];
}

static inline uint16_t id_of(const struct symbolizer *s, const struct module *m)
{
	return (uint16_t)(m - s->modules + FRAME_MODULE_FIRST);
}

static inline uint64_t file_key(dev_t dev, uint64_t inode)
{
	return hash_u64(hash_u64(dev) ^ inode) & ~1ULL; /* never U64MAP_EMPTY */
}

static inline struct file_id file_id_of(const struct stat *st)
{
	return (struct file_id){
		.dev = st->st_dev, .inode = st->st_ino, .size = (uint64_t)st->st_size,
		.mtime_ns = st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
		.ctime_ns = st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec,
	};
}

static inline bool file_id_eq(const struct file_id *a, const struct file_id *b)
{
	return a->dev == b->dev && a->inode == b->inode && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

/* --- symbolize.c: the cache of parsed tables ----------------------------- */

/* Forgets the demangled names: they are keyed by the address of names in
 * tables about to be freed. */
void sym_forget_demangled(struct module *m);

/* Frees m's line tables, or, while a lane indexes their units, hands them
 * to that job, which frees them when it is back (owns_srcline is a field
 * of its own, which the lane does not touch). */
void sym_drop_srcline(struct module *m);

/* Frees what was parsed from a module's files (symbols, lines, demangled
 * names, a JIT's map); its descriptors stay, so it can be parsed again. */
void sym_unload(struct module *m);

/* The bytes of m's parsed tables (symbols, lines, a JIT's map), as the
 * cache counts them. */
size_t sym_loaded_bytes(const struct module *m);

/* What one module's tables may take, its symbols and line tables together,
 * or its JIT map: half of the cache, so that the tables a stack needs
 * besides them fit, and loading those does not evict them.  A table past
 * the cache was kept alone: the next table loaded evicted it, the next
 * lookup loaded it again, and the two took turns while a query waited
 * for names (libc's debug file's line tables 151 times in 15 s; a table
 * of a million symbols until the query gave up waiting and answered
 * unnamed).  Past its room a table is refused (tables_refused). */
size_t sym_module_room(const struct symbolizer *s);

/* Keeps the parsed symbol tables within the cache limit by unloading the
 * least recently used ones, never keep. */
void sym_trim_cache(struct symbolizer *s, const struct module *keep);

/* --- modtab.c: descriptors and files ------------------------------------- */

/* Puts m first on the list (it holds a descriptor, just used). */
void sym_lru_touch(struct symbolizer *s, struct module *m);

/* Makes room for n more descriptors under max_fds, closing those of the
 * least recently used modules, never keep's. */
void sym_make_fd_room(struct symbolizer *s, const struct module *keep, size_t n);

/* Gives m the descriptor fd (its binary's or JIT map's), counted. */
void sym_take_fd(struct symbolizer *s, struct module *m, int fd);

/* The path a module's file was mapped at, without " (deleted)"; NULL when
 * out of memory. */
char *sym_mapped_path(const struct module *m);

/* The descriptor of file module m.  If the LRU closed it, the lane opens
 * it again (modtab.c) and this answers -EAGAIN until it is taken back:
 * from the last process seen mapping it (map_files, or the path in its
 * root), else the path from perfd's own root, and only if it is the very
 * file the module was read from (file_id).  Other -errno when there is
 * none (remembered until a process maps the file again).  The same for
 * a JIT module's map, opened again in its process's root only. */
int sym_module_fd(struct symbolizer *s, struct module *m);

/* Whether j is a reopen's (sym_module_fd), and takes it back: the module
 * it was for (with its descriptor now, or fd_error set), or NULL when
 * that was given back meanwhile.  The caller frees j (its free()), which
 * closes a descriptor not taken. */
bool sym_reopen_is(const struct offload_job *j);
struct module *sym_reopen_done(struct symbolizer *s, struct offload_job *j);

/* Closes fd (>= 0; -1 is ignored) on the lane, never on the loop: a
 * FUSE server answers the close (modtab.c).  The job comes back done
 * (sym_close_is), only to be freed. */
void sym_close_later(struct symbolizer *s, int fd);
bool sym_close_is(const struct offload_job *j);

/* Hands the lane the reopens queued, as far as the slots allow: after
 * slots are given back (reopens taken back, probes done). */
void sym_pump_reopens(struct symbolizer *s);

/* What a perf map must be, as perf requires it and more: a regular file
 * reached through no symlink (procfs_open_in_root), owned by the process's
 * user or root, not a hard link to someone else's file, and small enough
 * to parse. */
struct procfs_file_rules sym_jit_map_rules(uint32_t owner_uid);

/* Whether r is a map refused for what it is, not absent or unreadable. */
bool sym_jit_map_refused(int r);

/* --- symloads.c: tables built on the lanes ------------------------------- */

/* A lane job's name for module m: its index and serial, so that a job
 * coming back for a module given back meanwhile (its id may name another
 * file now) is told apart. */
uint64_t sym_module_key(const struct symbolizer *s, const struct module *m);

/* The module a job's key names, or NULL when it was given back since. */
struct module *sym_module_of_key(struct symbolizer *s, uint64_t key);

/* m's reopen is over (m NULL: it was given back meanwhile): what waited
 * for its descriptor starts, if it has one now and still needs it. */
void sym_reopen_resume(struct symbolizer *s, struct module *m);

/* Has the lane look at JIT module m's perf map or jitdump again, and
 * parse it if it was never read or has grown since (symloads.c); nothing
 * while such a look is out. */
void sym_refresh_perfmap(struct symbolizer *s, struct module *m);

/* Has the lane open m's DWARF line tables (the binary's, else its debug
 * file's), unless it does already or cannot now. */
void sym_start_line_load(struct symbolizer *s, struct module *m);

/* Has the lane index the units of m's line tables that lookups asked for
 * (srcline_want), unless it does already: the frames in them count as
 * pending meanwhile.  Counted as a line load. */
void sym_start_unit_index(struct symbolizer *s, struct module *m);

/* m's symbol table, or NULL when it is not loaded: its load is started
 * then (start_symtab_load), and the frame named as module+offset until
 * it is taken back; NULL also when it cannot be loaded. */
struct elf_symtab *sym_module_symtab(struct symbolizer *s, struct module *m);

#endif
