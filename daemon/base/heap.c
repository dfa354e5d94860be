/* SPDX-License-Identifier: MIT */
/*
 * heap.c - glibc malloc's arenas, one per thread, freed memory given back
 * after passes that free much, and malloc's own figures for status.
 * See heap.h for why.
 */
#include <errno.h>
#include <malloc.h>

#include "base/clock.h"
#include "base/heap.h"

/* An arena for each of perfd's threads (the loop, the drain, the lanes:
 * 9 today), with room: a thread that has to share an arena shares its
 * lock, and the loop waited up to 117 ms in free() on the main arena
 * while a lane at nice 10 that held it was preempted on a busy host.
 * glibc's own limit is 8 per CPU, which a one-CPU guest would be under.
 * What each arena keeps after a pass that freed much goes back with
 * heap_trim, which walks them all. */
#define HEAP_ARENAS 32
/* Blocks this big or bigger (the drain's 1 MiB chunks, symbol tables being
 * built, the unwinder's row arrays) are mmapped one each and unmapped when
 * freed.  Setting it also stops glibc from raising it to the size of the
 * biggest block freed so far (up to 32 MiB), after which such blocks
 * would be carved from the arenas and leave holes there when freed. */
#define HEAP_MMAP_THRESHOLD (256 << 10)

static uint64_t trims, trimmed, longest_trim_ns;

int heap_configure(void)
{
	/* mallopt returns 1 on success, 0 on error */
	if (mallopt(M_ARENA_MAX, HEAP_ARENAS) != 1 || mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD) != 1)
		return -EINVAL;
	return 0;
}

void heap_trim(uint64_t min_free_bytes)
{
	uint64_t start = now_monotonic_ns();
	struct mallinfo2 mi = mallinfo2();

	if (mi.fordblks < min_free_bytes)
		return;
	trims++;
	if (malloc_trim(0))
		trimmed++;
	if (now_monotonic_ns() - start > longest_trim_ns)
		longest_trim_ns = now_monotonic_ns() - start;
}

void heap_get_stats(struct heap_stats *ret)
{
	struct mallinfo2 mi = mallinfo2();

	*ret = (struct heap_stats){
		.in_use_bytes = mi.uordblks + mi.hblkhd,
		.free_bytes = mi.fordblks,
		.arena_bytes = mi.arena,
		.mmapped_bytes = mi.hblkhd,
		.trims = trims,
		.trimmed = trimmed,
		.longest_trim_ns = longest_trim_ns,
	};
}
