/* SPDX-License-Identifier: MIT */
/*
 * search.h - the one binary search over sorted ranges: how many elements
 * of an array sorted by key have a key at or below x (C++'s upper_bound).
 * The element before that index, when there is one, is the last to start
 * at or below x: the only range that can hold x.  Symbols, mappings,
 * perf maps, unwind rows and DWARF ranges are all looked up this way; each
 * caller then checks the end of its own range.
 *
 * Header-only and static inline, the key read through an accessor: at a
 * call site the accessor is a known function, which the compiler inlines
 * (-O2's indirect inlining), so a lookup costs what the hand-written loops
 * did; they run once per frame.  O(log n), and no element outside the
 * array is read (n == 0 reads none).
 */
#ifndef PERFD_SEARCH_H
#define PERFD_SEARCH_H

#include <stddef.h>
#include <stdint.h>

/* The number of the n elements at base (size bytes each, in ascending
 * order of key()) whose key is <= x: 0 when all are above x, n when none
 * is. */
static inline size_t search_upper_bound(const void *base, size_t n, size_t size, uint64_t x,
					uint64_t (*key)(const void *elem))
{
	const unsigned char *p = base;
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (key(p + mid * size) <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The key of an array of uint64_t: the element itself. */
static inline uint64_t search_key_u64(const void *elem)
{
	return *(const uint64_t *)elem;
}

#endif
