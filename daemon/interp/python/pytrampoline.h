/* SPDX-License-Identifier: MIT */
/*
 * pytrampoline.h - finding CPython's perf trampolines in a process.
 *
 * Under `-X perf` or `-X perf_jit` (3.12+) every Python function called
 * runs through a trampoline of its own: a copy of libpython's template
 * (pyruntime.h: trampoline) in an arena of copies, 64 KiB of anonymous
 * memory made read-execute, which `perf` names from /tmp/perf-PID.map or
 * /tmp/jit-PID.dump.  The unwinder needs the arenas to walk through them
 * (unwind/trampoline.h), the Python merge to hide them where the Python
 * frames they stand for are shown.
 *
 * The copies' stride is not the template's size everywhere: 3.12 packs
 * them (11 bytes), 3.13 aligns them to 16 bytes and `-X perf_jit` adds
 * 256 bytes of padding after each.  So it is read from each arena: the
 * first place after offset 0 where the template appears again.
 */
#ifndef PERFD_PYTRAMPOLINE_H
#define PERFD_PYTRAMPOLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "process/procmaps.h"

/* new_code_arena()'s mmap in 3.12 and 3.13: 4096 * 16.  Adjacent arenas
 * may be one mapping: they are found in 64 KiB steps from its start. */
#define PYTRAMPOLINE_ARENA_SIZE 65536u
/* Strides looked for (3.13's -X perf_jit: 272). */
#define PYTRAMPOLINE_STRIDE_MAX 1024u
/* Arenas kept per process: 64 MiB of trampolines, 245k functions or more. */
#define PYTRAMPOLINE_MAX_ARENAS 1024u
/* Chunks of anonymous executable memory looked at per search: a process
 * with a JIT of its own beside the trampolines costs at most this many
 * small reads each time its maps change. */
#define PYTRAMPOLINE_MAX_CHUNKS 4096u

struct pytrampoline_arenas {
	uint64_t *starts;  /* sorted; each arena is PYTRAMPOLINE_ARENA_SIZE bytes */
	uint32_t *strides; /* of the copies in each */
	size_t n;
	/* of the candidate mappings at the last search, if searched */
	uint64_t signature;
	bool searched;
};

/* Finds the arenas of copies of the template code[0..size) in process pid,
 * among the anonymous private read-execute mappings of maps: the 64 KiB
 * chunks (from each mapping's start) that hold the template at 0, again at
 * a stride s (size <= s <= PYTRAMPOLINE_STRIDE_MAX, the first place it
 * appears again) and at 2s, and as their last copy where CPython puts it
 * ((65536 / s - 1) * s).  Two reads from the process per chunk, bounded in
 * size; the memory is untrusted, and what is found only steers unwinding
 * (never a read by the daemon).  *arenas holds what an earlier search of
 * the same process found (or nothing): CPython never frees an arena, so a
 * known one still mapped is kept without a read, and when the candidate
 * mappings are where they were nothing is read at all.  Returns the number
 * of arenas and replaces *arenas with them (PYTRAMPOLINE_MAX_ARENAS at
 * most), or -errno with *arenas unchanged (-ESRCH: the process is gone;
 * -ENOMEM). */
int pytrampoline_find(pid_t pid, const struct procmaps *maps, const uint8_t *code, size_t size,
		      struct pytrampoline_arenas *arenas);

/* Where the candidate mappings of maps are: a search with the same
 * signature as *arenas's last reads nothing and finds the same arenas. */
uint64_t pytrampoline_signature(const struct procmaps *maps);
/* Copies the candidate mappings of maps into ret (their paths "", not to
 * be freed): what pytrampoline_find looks at, for a search off the loop.
 * Free ret->maps.  Returns 0 or -ENOMEM. */
int pytrampoline_candidates(const struct procmaps *maps, struct procmaps *ret);
/* Copies *from into *to (emptied first).  Returns 0 or -ENOMEM. */
int pytrampoline_arenas_copy(const struct pytrampoline_arenas *from,
			     struct pytrampoline_arenas *to);

/* Whether addr lies in one of the arenas.  O(log n). */
bool pytrampoline_contains(const struct pytrampoline_arenas *arenas, uint64_t addr);

void pytrampoline_arenas_done(struct pytrampoline_arenas *arenas);

#endif
