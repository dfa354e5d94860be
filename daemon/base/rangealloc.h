/* SPDX-License-Identifier: MIT */
/*
 * rangealloc.h - hands out contiguous ranges of indexes [0, capacity) of a
 * BPF array map (unwind rows, process mappings) and takes them back.
 *
 * First fit over a sorted list of free ranges, merged on release: tables
 * come and go with the binaries processes map, so fragmentation stays low
 * and the list short.  O(free ranges) per call.
 */
#ifndef PERFD_RANGEALLOC_H
#define PERFD_RANGEALLOC_H

#include <stddef.h>
#include <stdint.h>

struct range {
	uint32_t first, count;
};

struct rangealloc {
	uint32_t capacity;
	uint32_t used;
	struct range *free; /* sorted by first, never adjacent */
	size_t n_free, cap_free;
};

int rangealloc_init(struct rangealloc *a, uint32_t capacity);
void rangealloc_done(struct rangealloc *a);
/* Returns 0 and the first index of count free entries, -ENOSPC, -ENOMEM. */
int rangealloc_get(struct rangealloc *a, uint32_t count, uint32_t *ret_first);
/* Gives back a range obtained from rangealloc_get. */
int rangealloc_put(struct rangealloc *a, uint32_t first, uint32_t count);

#endif
