/* SPDX-License-Identifier: MIT */
/*
 * perfmap.h - JIT symbol maps in perf's /tmp/perf-PID.map format, as written
 * by `node --perf-basic-prof`, Python 3.12+ `-X perf`, the JVM's agents and
 * others: one "START SIZE NAME" line (hex, hex, rest of line) per function.
 */
#ifndef PERFD_PERFMAP_H
#define PERFD_PERFMAP_H

#include <stdint.h>
#include <stdio.h>

struct perfmap;

/* Bounds on a map: a longer line is skipped as malformed; a map larger
 * than PERFMAP_MAX_BYTES, or of more than PERFMAP_MAX_ENTRIES lines (or
 * jitdump functions), is refused (the symbolizer does not open one).  The
 * caps bound the memory of a map (32 bytes an entry plus its names, with
 * the arrays' slack: 101 MiB for 1,048,576 entries of ~49-byte lines; a
 * parsed map counts in the symbol cache, which refuses one bigger than
 * itself) and the time its parse takes on the symbolizer's lane
 * (jitread.h), never the loop.  Measured on the shared 2-CPU VM at load
 * 17, entries in random order: 16,384 parse in 20 ms, 100,000 in 136 ms,
 * 1,048,576 in 1.8 s (the loop's old cap was 16,384: 5-40 ms there).
 * A JIT with more functions than that has its map refused (counted). */
#define PERFMAP_LINE_MAX (16 * 1024)
#define PERFMAP_MAX_BYTES ((uint64_t)64 << 20)
#define PERFMAP_MAX_ENTRIES ((size_t)1 << 20)

/* Parses a whole map.  Malformed lines are skipped (a JIT may be writing the
 * last one right now) and counted in *ret_skipped (may be NULL).  When
 * ranges overlap, the line written last wins: code was recompiled there
 * (what remains of an older function past a newer one is dropped, so an
 * address there is unknown rather than named from stale code).
 * Returns 0, -EFBIG when more than PERFMAP_MAX_BYTES were read or there
 * are more than PERFMAP_MAX_ENTRIES lines, or -errno. */
int perfmap_parse(FILE *f, struct perfmap **ret, size_t *ret_skipped);
/* A map built entry by entry (jitdump.c): perfmap_new(), perfmap_add()
 * for each function in the order the JIT wrote them (overlaps are resolved
 * as for a perf map's lines: the later wins), then perfmap_seal() before
 * the first lookup.  perfmap_new returns 0 or -ENOMEM.  perfmap_add
 * copies name[0..name_len) (no NUL needed) and returns 0, -EINVAL for an
 * empty range or name, or -ENOMEM. */
int perfmap_new(struct perfmap **ret);
int perfmap_add(struct perfmap *m, uint64_t start, uint64_t size, const char *name,
		size_t name_len);
/* Adds a function under the name of the index-th one added (no copy: a
 * JIT's code move keeps its name).  Returns 0, -ENOENT past the last added,
 * -EINVAL for an empty range, or -ENOMEM.  Before perfmap_seal only. */
int perfmap_add_named_as(struct perfmap *m, uint64_t start, uint64_t size, size_t index);
/* The name of the index-th function (as added until perfmap_seal, by
 * address after it), or NULL past the last. */
const char *perfmap_name_at(const struct perfmap *m, size_t index);
void perfmap_seal(struct perfmap *m);

/* The function containing addr, or NULL; *ret_offset (may be NULL) gets
 * addr's offset into it.  O(log n). */
const char *perfmap_lookup(const struct perfmap *m, uint64_t addr, uint64_t *ret_offset);
size_t perfmap_count(const struct perfmap *m);
/* The bytes the map holds, allocated capacity included. */
size_t perfmap_memory(const struct perfmap *m);
struct perfmap *perfmap_free(struct perfmap *m);

#endif
