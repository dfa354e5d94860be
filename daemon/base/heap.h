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
 * must not wait on a lower-priority lane: HEAP_ARENAS), blocks of 256 KiB
 * and more are mmapped one each whatever was freed before, and freed
 * memory is handed back to the kernel once a second.  Status shows
 * malloc's own figures so the store can be told from the heap.
 *
 * Taking those figures (mallinfo2) and giving memory back (malloc_trim)
 * lock every arena in turn, so neither runs on the event loop: a lane of
 * its own does both once a second and publishes the figures, which status
 * reads without a lock (heap.c says why and what it costs).
 */
#ifndef PERFD_HEAP_H
#define PERFD_HEAP_H

#include <stdint.h>

/* How often the figures are taken and freed memory given back. */
#define HEAP_PERIOD_MS 1000
/* Less free heap than this is not worth malloc_trim()'s walk. */
#define HEAP_TRIM_MIN_FREE_BYTES (4ULL << 20)

/* malloc's figures as of one reading (heap_get_stats). */
struct heap_stats {
	uint64_t in_use_bytes;  /* allocated and not freed (mallinfo2 uordblks + hblkhd) */
	uint64_t free_bytes;    /* freed, still held by malloc (fordblks) */
	uint64_t arena_bytes;   /* obtained with sbrk/mmap for arenas (arena) */
	uint64_t mmapped_bytes; /* large blocks mmapped one each (hblkhd) */
	uint64_t trims;         /* passes that ran malloc_trim() */
	uint64_t trimmed;       /* of those, how many gave memory back */
	uint64_t longest_trim_ns; /* of malloc_trim(), on the heap lane */
	uint64_t readings;      /* figures taken since heap_start, this one included */
	uint64_t as_of_ns;      /* when they were taken (CLOCK_MONOTONIC) */
};

/* Sets malloc's limits; call in main() before any thread starts.
 * Returns 0, or -EINVAL when malloc refused one. */
int heap_configure(void);

/* Takes the first figures on the caller's thread (call it once, before
 * the loop runs, with the signals the loop takes blocked: the lane inherits
 * the mask), then starts the lane that takes
 * them again and gives freed memory back (when at least
 * trim_min_free_bytes of it are free) every period_ms.  Returns 0, or
 * -errno from starting the lane (the first figures stay). */
int heap_start(unsigned period_ms, uint64_t trim_min_free_bytes);
/* Stops the lane (at once: its sleep is cut short).  Accepts a heap that
 * was not started. */
void heap_stop(void);

/* The figures last published: a copy, taken without a lock and without
 * walking an arena, at most a period (plus the lane's own delay) old;
 * ret->as_of_ns says when.  Any thread may call it. */
void heap_get_stats(struct heap_stats *ret);

#endif
