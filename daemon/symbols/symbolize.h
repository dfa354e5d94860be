/* SPDX-License-Identifier: MIT */
/*
 * symbolize.h - the table of modules and frame -> name.
 *
 * A module is where user code lives, named by a frame's module id:
 *  - a file (executable or library), known by what identifies the file
 *    itself: (device, inode, size, mtime, ctime), read with a stat of the
 *    process's /proc/PID/map_files link, whatever paths or processes map
 *    it.  Two files are two modules even when their build-ids are equal:
 *    a build-id is what a file says of itself, and a user's modified copy
 *    must not lend its symbols or unwind tables to anyone else's binary.
 *    The daemon opens the file through map_files (which works for files
 *    deleted since, and for other mount namespaces) and keeps the
 *    descriptor, so symbols and unwind tables can still be read after the
 *    process has gone.  Symbols are parsed once, on the first query that
 *    needs them (built on a lane: see symbolizer_fd), however many processes
 *    map the file;
 *  - the vDSO: one image for the whole kernel, read from perfd's own;
 *  - a process's JIT code, named by its /tmp/perf-PID.map, re-read when a
 *    lookup misses and the file has grown.  The map is the process's to
 *    write: only a regular file reached through no symlink, owned by the
 *    process's user or root, of at most PERFMAP_MAX_BYTES and
 *    PERFMAP_MAX_ENTRIES lines, is read (others are refused and counted),
 *    and a parsed map is part of the cache below (one bigger than the
 *    whole cache is refused too).  The parse runs on the symbolizer's lane
 *    (symbols/jitread.h): a frame is named once it is taken back
 *    (symbolizer_complete), and a sample's frame the map does not name
 *    starts one (symbolizer_note_jit_frame), so that it is done by the
 *    time a query names the frame.
 *
 * Descriptors are bounded: at most max_fds (SYMBOLIZER_MAX_FDS by default,
 * far below any RLIMIT_NOFILE perfd runs with) are open at once, binaries',
 * debug files' and JIT maps' together; past it the least recently used are
 * closed, and opened again when needed, from the last process seen mapping
 * the file, else from its path, and only if the file opened is the very
 * one the module was read from (its identity above); a JIT map only while
 * its process lives.  Module ids are bounded too (max_modules, at most the
 * 16-bit ids of frame.h): past it a new file gets no module (refused,
 * counted), and so does one of a user (the uid of the process that would
 * add it) holding three quarters of the table already, so that one user
 * mapping without end leaves the last quarter to everyone else's new
 * binaries; the daemon gives back the ids nothing refers to any more
 * (symbolizer_release_unused, once the table is half full or has refused
 * one).  Costs: a stat per file mapping each time a process's maps are
 * read, and a copy of a library in another container image is parsed, and
 * gets an unwind table, of its own.
 *
 * Kernel frames are named from /proc/kallsyms, read once at start, and
 * belong to one module, FRAME_MODULE_KERNEL, described as
 * "[kernel.kallsyms]" (perf's name for it) with the build-id of the
 * running kernel (/sys/kernel/notes, read once at start); frames in kernel
 * modules are in it too, as their addresses are the kernel's.  Names
 * are demangled (C++, Rust) once per symbol and cached.  Parsed tables
 * (symbols, source lines, JIT maps) are a cache bounded in bytes: the
 * least recently used are unloaded, and parsed again from the kept
 * descriptors when needed.
 */
#ifndef PERFD_SYMBOLIZE_H
#define PERFD_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "process/modules.h"
#include "process/procmaps.h"
#include "profile/frame.h"
#include "profile/moduleset.h"

/* Descriptors of module files open at once, by default: binaries, their
 * debug files and JIT maps (a few per module in use; the rest are opened
 * again when needed). */
#define SYMBOLIZER_MAX_FDS 512

struct symbolizer;

struct symbolizer_opts {
	const char *kallsyms_path; /* NULL: no kernel symbols */
	const char *kernel_notes_path; /* the kernel's build-id; NULL: none */
	const char *debug_dir;     /* separate debug files; NULL: /usr/lib/debug */
	size_t cache_bytes;        /* parsed symbol tables kept; 0: 256 MiB */
	size_t max_fds;            /* 0: SYMBOLIZER_MAX_FDS */
	size_t max_modules;        /* 0 (or more than there are ids): every id of frame.h */
	bool demangle;
};

struct symbolizer_stats {
	size_t modules;        /* live now */
	size_t modules_limit;
	uint64_t modules_refused;  /* new files without a module: the table was full */
	uint64_t modules_refused_share; /* ... of those, their owner held its share */
	uint64_t modules_released; /* ids given back, nothing referring to them */
	uint64_t collections;      /* times the table looked for ids to give back */
	size_t fds_open, fds_limit;
	uint64_t fds_evicted;       /* modules whose descriptors the LRU closed */
	uint64_t fds_reopened;      /* ... opened again when needed */
	uint64_t fds_reopen_failed; /* ... could not be: the file is gone or another */
	size_t fds_reopening;       /* ... being opened again on the lane now */
	size_t fds_closing;         /* descriptors being closed on the lane now */
	size_t modules_loaded; /* symbol tables parsed */
	size_t modules_failed; /* could not be opened or parsed */
	size_t debug_files;    /* symbols found in a separate debug file */
	size_t debug_files_refused; /* candidates not read: past the size caps of
				     * debuginfo.h, or a symlink in the binary's
				     * own directory */
	size_t minidebuginfo;  /* ... or in MiniDebugInfo */
	size_t debug_searches_pending; /* debuglink/MiniDebugInfo searches on the lane */
	/* tables being built on the lane (symload.h): symbol tables (first
	 * loads, reloads after eviction, debug symbols' merges), and DWARF
	 * line tables; their frames count as pending meanwhile */
	size_t symtab_loads_pending, line_loads_pending;
	size_t tables_refused; /* symbol, string or line tables past their caps
				* (ELFSYM_MAX_TABLE_BYTES, SRCLINE_MAX_*): not read */
	size_t line_units_refused; /* compile units not indexed: past
				    * SRCLINE_UNIT_MAX_NS of CPU time, with a
				    * line program past SRCLINE_UNIT_MAX_LINE_BYTES,
				    * or whose rows could take their file's line
				    * tables past the cache's cap; named without
				    * lines */
	size_t jit_maps;       /* perf maps and jitdumps parsed (re-reads included) */
	size_t jit_maps_pending; /* ... being parsed on the lane now */
	size_t jit_maps_refused; /* not read: not a regular file, a symlink, a
				  * stranger's, too big or bigger than the
				  * cache (each attempt counts) */
	size_t kernel_symbols;
	uint64_t lookups;      /* frames named */
	uint64_t demangle_cache_hits, demangle_cache_misses;
	uint64_t cache_hits, cache_misses; /* parsed symbol tables found loaded or not */
	uint64_t cache_evictions;          /* ... unloaded to stay within the limit */
	size_t cache_bytes, cache_limit;
	size_t memory_bytes;
};

/* Returns 0, or -errno (-ENOMEM, or its lanes' threads not started).
 * *ret_kernel_error (when not NULL) gets the -errno from loading kernel
 * symbols (0 when they loaded): the symbolizer is made without them. */
int symbolizer_new(const struct symbolizer_opts *opts, struct symbolizer **ret,
		   int *ret_kernel_error);
struct symbolizer *symbolizer_free(struct symbolizer *s);

/* Returns the module id (FRAME_MODULE_FIRST..LAST) for a file mapping of
 * process pid, registering it (and opening the file) the first time,
 * charged to owner_uid (the process's owner).  Returns -ENOSPC when the
 * module table is full or owner_uid holds its share of it (counted in
 * modules_refused), -EINVAL for a mapping that is not backed by a file. */
int symbolizer_module_for_mapping(struct symbolizer *s, pid_t pid, uint32_t owner_uid,
				  const struct procmap *map);
/* The same in three steps, so that the middle one, which alone touches
 * the process's files, can run on a lane (process/modules.h, struct
 * module_probe).  plan (loop; open: open the file even if the table
 * knows it): 0, -EINVAL or -ENOMEM; it may close
 * module descriptors (the LRU) to reserve the probe's.  module_probe_run
 * (any thread; touches only p).  for_probe (loop): as for_mapping, or
 * -EAGAIN when the file must be planned and probed again (it was not
 * opened and is new now).  done (loop): always, after for_probe or
 * instead of it: closes what was not taken, frees p's copy. */
int symbolizer_plan_probe(struct symbolizer *s, pid_t pid, const struct procmap *map, bool open,
			  struct module_probe *ret);
void module_probe_run(struct module_probe *p);
int symbolizer_module_for_probe(struct symbolizer *s, uint32_t owner_uid, struct module_probe *p);
void symbolizer_probe_done(struct symbolizer *s, struct module_probe *p);
/* The module of the vDSO; frames in it carry their offset from the start of
 * the [vdso] mapping.  -ENOENT when this system has none. */
int symbolizer_vdso_module(struct symbolizer *s);
/* The JIT module of one process (pid, start_time_ns), whose names come
 * from a map inside the process's root (/tmp/perf-NSPID.map, or a
 * jitdump such as /tmp/jit-NSPID.dump, told by its content; opened while
 * pid is still that process, and read when needed, even after the
 * process is gone); frames in it carry raw addresses.  The map must be
 * owned by owner_uid or root (UINT32_MAX: root only).  In the three steps
 * of process/modules.h's struct jit_probe: symbolizer_jit_plan returns
 * the process's module if it has one, symbolizer_jit_apply registers it
 * the first time, or returns -errno when the map could not be opened
 * (-EPERM, -ELOOP, -EFBIG, -EWOULDBLOCK when refused: counted in
 * jit_maps_refused). */
int symbolizer_jit_plan(struct symbolizer *s, struct jit_probe *p);
void jit_probe_run(struct jit_probe *p);
int symbolizer_jit_apply(struct symbolizer *s, struct jit_probe *p);
void symbolizer_jit_done(struct symbolizer *s, struct jit_probe *p);
/* The three in a row, for map_path (tests; the store does them apart). */
int symbolizer_jit_module(struct symbolizer *s, pid_t pid, uint64_t start_time_ns,
			  const char *map_path, uint32_t owner_uid);

/* A sample's frame in a JIT module that its map does not name (yet):
 * has the lane look at the map again, at most every SYMBOLIZER_JIT_CHECK_NS
 * (an fstat), and parse it when it grew (symbolizer_fd), so that the
 * names are there by the time a query asks for them.  Cheap when the map
 * names the frame. */
#define SYMBOLIZER_JIT_CHECK_NS (100 * 1000 * 1000ULL)
void symbolizer_note_jit_frame(struct symbolizer *s, uint64_t frame);

/* Whether frame's name (and, with lines, its source lines) waits for a
 * table being built on the lane; starts building it if it is not loaded.
 * Until it is done the frame is named without it: module+offset (or the
 * table it had before a merge), without lines.  Cheap: a query asks it of
 * every distinct frame it answers (model.h), persist of every frame it
 * writes. */
bool symbolizer_frame_pending(struct symbolizer *s, uint64_t frame, bool lines);
/* Tables being built now (symbol and line tables), and the descriptors
 * being opened again that they may wait for; the lane's other jobs, debug
 * searches and JIT maps, not counted. */
size_t symbolizer_loads_pending(const struct symbolizer *s);
/* Waits, up to timeout_ms, until every job of the lane is done and taken
 * back (symbolizer_complete), those the takings start too.  For tests and
 * tools that name frames without a loop.  Returns 0 or -ETIMEDOUT (at once
 * when what is left are files waiting to be opened again for slots that
 * module probes hold: only their taking back frees them). */
int symbolizer_settle(struct symbolizer *s, unsigned timeout_ms);

/* Writes the name of frame into buf (always NUL-terminated; truncated to
 * size) and returns buf.  Frames are never reported as errors: what cannot
 * be named prints as "module+0xOFFSET" or "[unknown]". */
const char *symbolizer_frame_name(struct symbolizer *s, uint64_t frame,
				  char *buf, size_t size);

/* Resolves frame into records (profile/frame.h), outermost first: with
 * lines, a user frame gets its file and line and the functions inlined at
 * its address follow as records of their own; without, or where the binary
 * has no debug info, one record with the symbol's name.  Names that
 * cannot be found read "module+0xOFFSET" or "[unknown]" (formatted in
 * scratch).  Strings are valid until the next call into s.  Returns the
 * count, >= 1. */
size_t symbolizer_resolve(struct symbolizer *s, uint64_t frame, bool lines,
			  struct frame_record *out, size_t cap, char *scratch, size_t size);

/* The path (as first mapped) and build-id (hex, "" when none) of a module;
 * for FRAME_MODULE_KERNEL "[kernel.kallsyms]" and the kernel's build-id.
 * False for an unknown id.  Strings owned by s. */
bool symbolizer_describe_module(const struct symbolizer *s, uint16_t module,
				const char **ret_path, const char **ret_build_id);

/* The descriptor of a file module (owned by s: do not close; valid until
 * the next call into s), opened again if the LRU closed it.  -EBADF when
 * it cannot be opened (now: a module whose first process was gone before
 * its file was opened gets one from the next process mapping it), -ENOENT
 * for an unknown or non-file id. */
int symbolizer_module_fd(struct symbolizer *s, uint16_t module);

/* Whether it is time to give ids back: half the table is used, or a new
 * file was refused since the last time. */
bool symbolizer_wants_collection(const struct symbolizer *s);
/* Gives back the id of every file and JIT module not in used, calling
 * released (if not NULL) with each just before: whatever knows the id
 * (an unwind table) forgets it there.  Returns how many. */
size_t symbolizer_release_unused(struct symbolizer *s, const struct module_set *used,
				 void (*released)(void *userdata, uint16_t module), void *userdata);

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *ret);

/* s as the profile store's module registry (process/modules.h): the
 * functions above, with s as their context. */
struct module_registry symbolizer_modules(struct symbolizer *s);

/* What takes long runs on the symbolizer's lanes: building a module's
 * symbol table (and merging its debug file's) or line tables
 * (symbols/symload.h), the searches that read whole files (a
 * .gnu_debuglink candidate's CRC, MiniDebugInfo's decompression:
 * symbols/debugsearch.h), JIT maps' parses (symbols/jitread.h); until one
 * is done the module is named as it was.  symbolizer_fd is readable when
 * some are done, and symbolizer_complete, on the caller's thread, takes
 * what they built. */
int symbolizer_fd(const struct symbolizer *s);
void symbolizer_complete(struct symbolizer *s);

#endif
