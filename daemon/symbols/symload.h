/* SPDX-License-Identifier: MIT */
/*
 * symload.h - building a module's tables, as a job for an offload lane
 * (base/offload.h), so that the daemon's loop never does it: reading and
 * sorting a binary's symbol table (a million symbols take a second or
 * more), merging a separate debug file's or MiniDebugInfo's symbols into
 * it, opening its DWARF line tables and indexing their units (srcline.h:
 * srcline_index_all, up to its cap), and, past that cap, indexing the
 * units lookups asked for (srcline_index_wanted).
 *
 * The loop decides what a job reads (the binary, the debug file it has
 * found, whether to look one up by build-id or to unpack MiniDebugInfo)
 * and takes back a whole table; it never touches one being built.  Until
 * then the module's frames are named from the table it had (a reload
 * after eviction, or before a debug file's merge) or as module+offset, and
 * count as pending (symbolize.h: symbolizer_frame_pending), which a query
 * may wait for.  A job owns everything it holds: dups of the descriptors
 * (the symbolizer's LRU may close its own meanwhile), copies of the paths,
 * the tables it built until they are taken.  Except SYMLOAD_UNITS: it
 * indexes the module's own struct srcline, which the loop keeps reading
 * meanwhile (srcline.h says what each side may do), and which the loop
 * must not free until the job is back: a module unloaded meanwhile hands
 * it to the job (owns_srcline), whose free frees it.
 */
#ifndef PERFD_SYMLOAD_H
#define PERFD_SYMLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/offload.h"

struct elf_symtab;
struct srcline;

enum symload_what {
	SYMLOAD_SYMBOLS, /* the symbol table, with a debug file's merged in */
	SYMLOAD_LINES,   /* the DWARF line tables (the binary's, else the debug file's) */
	SYMLOAD_UNITS,   /* the units of srcline lookups asked for */
};

struct symload {
	struct offload_job job; /* first: the lane's part; job.key is the caller's */
	enum symload_what what;
	/* what to read, owned by the job */
	int fd;          /* the binary's (a dup) */
	int debug_fd;    /* its separate debug file's (a dup), or -1 */
	bool mini;       /* SYMBOLS, no .symtab: merge the MiniDebugInfo */
	void *image;     /* ... already unpacked (malloc'd, the job's), or NULL */
	size_t image_size;
	/* no debug_fd: look a debug file up by build-id (debuginfo.h) under
	 * root, as the process saw path, if it is needed (SYMBOLS: no
	 * .symtab; LINES: no line tables in the binary) */
	bool by_build_id;
	char *path, *root, *debug_dir;
	/* SYMBOLS: a table past it is refused (-EFBIG), and so is a merge
	 * that would take it past (merge_error); LINES: srcline's
	 * (srcline_set_memory_limit).  SIZE_MAX: none */
	size_t memory_limit;
	/* the result, the caller's to take (and then reset) */
	int error;                 /* 0, or -errno of the binary's table */
	struct elf_symtab *symtab; /* SYMBOLS */
	struct srcline *srcline;   /* LINES; UNITS: the module's (see above) */
	bool owns_srcline;         /* UNITS: set by the loop, read by its free */
	size_t units_refused;      /* LINES, UNITS: units this job refused (their
				    * time, program length or memory) */
	/* by_build_id: whether the lookup ran (SYMBOLS: the binary has no
	 * .symtab; LINES: no line tables), and the debug file found, or -1 */
	bool looked_up;
	int found_debug_fd;
	/* SYMBOLS, no .symtab: the debug symbols' merge: 0, 1 when none was
	 * asked for, -ENOENT when none was found, -errno */
	int merge_error;
	unsigned refused;          /* candidates refused unread (debuginfo_find's count) */
};

/* A job building what of the binary open on fd and, if debug_fd >= 0, of
 * its debug file (both dup'ed: the caller keeps its own), for
 * offload_submit(); the caller sets mini or image, or by_build_id (with
 * symload_set_search), before submitting.  Returns 0 or -ENOMEM, -EMFILE. */
int symload_new(uint64_t key, enum symload_what what, int fd, int debug_fd,
		struct symload **ret);
/* A job indexing the units of s that lookups asked for (s stays the
 * caller's; see above).  Returns 0 or -ENOMEM. */
int symload_new_units(uint64_t key, struct srcline *s, struct symload **ret);
/* For by_build_id: where to look.  Returns 0 or -ENOMEM. */
int symload_set_search(struct symload *l, const char *path, const char *root,
		       const char *debug_dir);
/* Builds (what a lane calls; tests call it directly). */
void symload_run(struct symload *l);
struct symload *symload_free(struct symload *l);
/* Whether the lane's job j is a symload (the lane runs other jobs too). */
bool symload_is(const struct offload_job *j);

static inline struct symload *symload_of(struct offload_job *j)
{
	return (struct symload *)j; /* job is the first member */
}

#endif
