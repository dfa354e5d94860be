/* SPDX-License-Identifier: MIT */
/*
 * heap.h - what malloc holds of perfd's RSS, and keeping that part small.
 *
 * perfd's RSS is its store (counted by the store itself), the symbol cache
 * (counted by it) and a fixed part.  Of the fixed part, glibc's heap is
 * the only piece that can grow with what perfd profiles: memory the store
 * freed stays in malloc's free lists, in the arena of the thread that
 * allocated it, and big blocks freed raise the size below which glibc
 * carves blocks from the arenas.  So each thread has an arena of its own
 * (sharing one means sharing its lock, and the loop's malloc and free
 * must not wait on a lower-priority lane: HEAP_ARENAS; heap_trim and
 * heap_get_stats still walk every arena under its lock), blocks of 256 KiB and more are
 * mmapped one each whatever was freed before, and freed memory is handed
 * back to the kernel once a second (the maintenance pass, not per sample;
 * it costs a walk of the free lists, up to ~70 ms measured under load);
 * status shows malloc's own figures so the store can be told from the heap.
 */
#ifndef PERFD_HEAP_H
#define PERFD_HEAP_H

#include <stdint.h>

struct heap_stats {
	uint64_t in_use_bytes;  /* allocated and not freed (mallinfo2 uordblks + hblkhd) */
	uint64_t free_bytes;    /* freed, still held by malloc (fordblks) */
	uint64_t arena_bytes;   /* obtained with sbrk/mmap for arenas (arena) */
	uint64_t mmapped_bytes; /* large blocks mmapped one each (hblkhd) */
	uint64_t trims;         /* heap_trim() calls that ran malloc_trim() */
	uint64_t trimmed;       /* of those, how many gave memory back */
	uint64_t longest_trim_ns; /* of heap_trim(), malloc's walk included */
};

/* Sets malloc's limits; call in main() before any thread starts.
 * Returns 0, or -EINVAL when malloc refused one. */
int heap_configure(void);

/* Gives freed heap memory back to the kernel when at least min_free_bytes
 * of it are free.  Walks every arena under its lock: call it after a pass
 * that freed much (eviction, expiry), never per sample. */
void heap_trim(uint64_t min_free_bytes);

void heap_get_stats(struct heap_stats *ret);

#endif
