/* SPDX-License-Identifier: MIT */
/*
 * heap.c - glibc malloc's arenas held to two, freed memory given back
 * after passes that free much, and malloc's own figures for status.
 * See heap.h for why.
 */
#include <errno.h>
#include <malloc.h>

#include "base/clock.h"
#include "base/heap.h"

/* The loop's main arena and one more: the drain thread, the builder lanes,
 * the exporter and the state writer allocate a little each, and an arena
 * per thread keeps up to 64 MiB of address space and whatever it freed. */
#define HEAP_ARENAS 2
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
