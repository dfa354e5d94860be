/* SPDX-License-Identifier: MIT */
/*
 * srcline.h - source lines and inlined frames of one ELF file, from its
 * DWARF (libdw): ELF virtual address -> chain of (function, file:line),
 * innermost inlined function first, the way `perf report --inline` and
 * `addr2line -i` show it.
 *
 * One struct srcline per binary, opened on the binary itself or, when that
 * is stripped, on its separate debug file (same addresses).  Each compile
 * unit is indexed on its first lookup, or, for the daemon's loop, by
 * another thread while the loop answers from the units already indexed
 * (srcline_lookup_indexed, srcline_index_wanted); see srcline.c.
 */
#ifndef PERFD_SRCLINE_H
#define PERFD_SRCLINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct srcline;

/* One frame of a chain.  The strings are owned by the struct srcline and
 * stay valid until srcline_free().  function is the DWARF linkage name when
 * there is one (mangled, as the symbol table spells it), else DW_AT_name;
 * NULL when no function DIE covers the address (assembly with line info
 * only, padding after a function).  file is the full path, comp_dir-joined
 * when recorded relative; NULL when the DWARF does not say.  line is 0 when
 * unknown, also with a file: DWARF gives compiler-made code line 0.
 * decl_line is the line the function starts at (its DW_AT_decl_line, an
 * inlined function's from its abstract origin), 0 when unknown or when
 * function is NULL; like the function's name it is the function's, not
 * the address's, so it may be in another file than file:line. */
struct srcline_frame {
	const char *function;
	const char *file;
	unsigned line;
	unsigned decl_line;
};

/* Debug sections larger than this in all are not read (a file's owner
 * chooses its size; what is read is held in memory, and counted). */
#define SRCLINE_MAX_DEBUG_BYTES ((uint64_t)1 << 30)
/* ... and a .debug_line bigger than this: its line programs are decoded,
 * past SRCLINE_INDEX_ALL_MAX_LINE_BYTES, a unit's whole when a lookup
 * first asks for it (srcline_index_wanted).  libLLVM's is ~60 MiB. */
#define SRCLINE_MAX_LINE_BYTES ((uint64_t)256 << 20)

/* Opens the DWARF of the ELF file on fd, whose debug sections are read
 * into memory (counted in memory_bytes) and which is then no longer
 * needed: the caller keeps or closes it; a later truncation of the file
 * does not affect what was read.  Indexes which
 * compile unit covers which addresses (.debug_aranges, and the units'
 * own ranges for units aranges do not list).  Returns 0, -ENODATA when the
 * file has no .debug_info (stripped: try the separate debug file's fd, the
 * same call), -ENOEXEC when it is not ELF, -EBADMSG when libdw rejects its
 * DWARF or a string section of it does not end with a NUL, -EIO when the
 * file cannot be read, -EFBIG when its debug sections are past
 * SRCLINE_MAX_DEBUG_BYTES or its .debug_line past SRCLINE_MAX_LINE_BYTES
 * (refused unread), -ENOMEM. */
int srcline_open(int fd, struct srcline **ret);

/* A .debug_line up to this size is decoded whole by srcline_index_all;
 * past it, each unit when first asked for. */
#define SRCLINE_INDEX_ALL_MAX_LINE_BYTES ((uint64_t)32 << 20)
/* A unit whose indexing takes more CPU time than this is refused (its
 * lookups get -ETIME, srcline_stats.units_refused counts it): the work is
 * bounded by the unit's bytes, but a crafted unit can make those bytes
 * minutes of it.  An answer waits 10 s for its names at most (daemon.h). */
#define SRCLINE_UNIT_MAX_NS (10ULL * 1000000000ULL)
/* ... and one whose line program is longer than this is refused before
 * it is decoded (-EFBIG, counted the same way): libdw's decode cannot be
 * stopped, and holds SRCLINE_ROW_BYTES per row, up to a row per byte of
 * program.  The largest units measured in real code are ~300 KB (CPython
 * 3.13's unicodeobject.c at -O3 -g: 302,688 bytes; a Rust std codegen
 * unit: 301,654; Go 1.19's biggest package: 154,398; Debian 12's libc:
 * 53,556), so 2 MiB leaves them a margin of 7 and bounds a crafted unit
 * to ~2.1 M rows: ~170 MB held and 0.2 s of a quiet CPU here. */
#define SRCLINE_UNIT_MAX_LINE_BYTES ((uint64_t)2 << 20)
/* What libdw holds per decoded line row, counted in memory_bytes (so in
 * the symbol cache): the most measured here with mallinfo2 (libdw 0.188:
 * 50-68 bytes a row over all the units of libpython3.13, of libc's debug
 * file and of a Go binary; 80 for one unit of 2 M rows). */
#define SRCLINE_ROW_BYTES 80
/* What libdw holds for its other caches of a file, counted the same way.
 * Measured with tests/bench/dwmem.c (mallinfo2 over libdw alone) on 12
 * files here (libpython 3.10-3.13, libnccl, libasan, libtsan, libc's
 * debug file, perfd, docker (Go), clippy-driver (Rust), node):
 * - what it builds per unit at open (dwarf_get_units: a Dwarf_CU, its
 *   tree node and its empty abbreviation table, and, for a unit without
 *   aranges, its first abbreviations): 0.8-1.0 KiB a unit where aranges
 *   list them (C), 4.3 KiB in clippy-driver (none): SRCLINE_CU_BYTES each,
 *   charged at open (the Rust binary's open stays 15% under);
 * - a unit's abbreviation table, parsed when its DIEs are first read:
 *   2.9-4.5 bytes held per byte of the tables, from 0.35 MB for perfd to
 *   4.4 MB for libc's 2,063 units.  Charged when the unit is indexed, as
 *   SRCLINE_ABBREV_FACTOR times its table's bytes (to the next table in
 *   .debug_abbrev): units that share a table (Go, Rust) each parse their
 *   own copy of what they use, and are charged for all of it. */
#define SRCLINE_CU_BYTES 1024
#define SRCLINE_ABBREV_FACTOR 5

/* The memory a struct srcline may hold (memory_bytes, with the rows its
 * units' line programs would decode at most: a row per byte of program)
 * before it refuses to decode another unit (-EFBIG, counted in
 * units_refused): libdw keeps what it decoded until srcline_free, so
 * this is what bounds one file's line tables.  Unlimited unless set;
 * perfd sets its symbol cache's cap (symload.c).  Not with an indexer
 * running. */
void srcline_set_memory_limit(struct srcline *s, size_t bytes);

/* Indexes every compile unit now (a lookup indexes its unit the first
 * time otherwise), for a caller off the daemon's loop (symload.h), so
 * that lookups there only search; nothing when .debug_line is past
 * SRCLINE_INDEX_ALL_MAX_LINE_BYTES.  A broken unit stays broken, as for a
 * lookup.  Returns how many units it refused (as srcline_index_wanted)
 * or -ENOMEM. */
int srcline_index_all(struct srcline *s);

/* Threads: srcline_lookup_indexed, srcline_want, srcline_wants and
 * srcline_get_stats (the reader's: the daemon's loop) may run while one
 * other thread runs srcline_index_wanted (the indexer: a lane); every
 * other call needs the struct srcline to itself.  The owner frees it only
 * once no indexer runs. */

/* Fills ret[] with the frames at the ELF virtual address vaddr, innermost
 * first: one per inlined subroutine containing vaddr, then the function
 * they are inlined into.  The innermost frame's file:line is the line
 * table's row for vaddr; each outer frame's is the call site (DW_AT_call_file,
 * DW_AT_call_line) of the frame inside it.  When the chain is longer than
 * max, the innermost max - 1 frames and the outermost are written (the
 * outermost is the function the symbol table names).
 * Returns the number of frames written (>= 1), 0 when no DWARF describes
 * vaddr (no compile unit covers it, or its unit has neither a function nor
 * a line row there), -EINVAL when max is 0, -EBADMSG when the unit covering
 * vaddr cannot be read (remembered: the unit is not retried), -ENOMEM.
 * Indexes vaddr's unit first if it is not (for a caller that may take the
 * time: tests, tools).  Not with an indexer running. */
int srcline_lookup(struct srcline *s, uint64_t vaddr, struct srcline_frame *ret, size_t max);

/* The same, for the reader, which never indexes: -EAGAIN when vaddr's
 * unit is not indexed yet (it is marked wanted: srcline_wants is true
 * until an indexer's srcline_index_wanted has taken it); -ETIME for a
 * unit refused for its time, -EFBIG for the length of its line program
 * or the memory its rows would take. */
int srcline_lookup_indexed(struct srcline *s, uint64_t vaddr, struct srcline_frame *ret,
			   size_t max);

/* The reader's check before a lookup: 0 when srcline_lookup_indexed can
 * answer for vaddr now (also with an error or nothing), -EAGAIN when its
 * unit is not indexed yet (marked wanted, as there). */
int srcline_want(struct srcline *s, uint64_t vaddr);

/* Whether a unit was marked wanted since the last srcline_index_wanted
 * pass began: the owner then has an indexer run (again). */
bool srcline_wants(struct srcline *s);

/* The indexer's: indexes every unit marked wanted, until none is left.
 * Returns how many of them it refused (SRCLINE_UNIT_MAX_NS, _LINE_BYTES,
 * the memory limit),
 * -ENOMEM (the unit is asked for again by its next lookup) or -ECANCELED
 * once *cancel (may be NULL) is set. */
int srcline_index_wanted(struct srcline *s, const atomic_bool *cancel);

/* For tests: the CPU time a unit's indexing may take and the length of
 * line program it may decode (SRCLINE_UNIT_MAX_NS, _LINE_BYTES). */
void srcline_set_unit_limits(struct srcline *s, uint64_t ns, uint64_t line_bytes);

/* Counters, for status and benchmarks. */
struct srcline_stats {
	size_t units;        /* compile units */
	size_t units_loaded; /* indexed so far */
	size_t units_refused; /* past SRCLINE_UNIT_MAX_NS, _LINE_BYTES or the memory limit */
	size_t lookups;
	size_t cache_hits;   /* lookups answered from the recent-lookup cache */
	size_t memory_bytes; /* held by srcline, and by libdw: the sections
			      * (decompressed), the line rows it decoded
			      * (SRCLINE_ROW_BYTES each), its unit list and
			      * abbreviations (SRCLINE_CU_BYTES, _ABBREV_FACTOR) */
};

void srcline_get_stats(const struct srcline *s, struct srcline_stats *ret);

struct srcline *srcline_free(struct srcline *s);

#endif
