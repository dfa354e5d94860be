/* SPDX-License-Identifier: MIT */
/*
 * test-search.c - the one upper-bound search (daemon/base/search.h):
 * checked against a count made one element at a time, on arrays with
 * repeated keys, on a key inside a struct, and at the ends of the range
 * of keys; an empty array reads nothing.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "base/search.h"
#include "perfd/macro.h"

/* What search_upper_bound() must say: the elements whose key is <= x. */
static size_t count_upto(const uint64_t *keys, size_t n, uint64_t x)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += keys[i] <= x;
	return k;
}

Test(search, every_prefix_of_every_array)
{
	static const uint64_t keys[] = { 2, 3, 3, 3, 7, 10, 10, 11, 20 };

	for (size_t n = 0; n <= ELEMENTSOF(keys); n++)
		for (uint64_t x = 0; x <= 22; x++)
			cr_assert_eq(search_upper_bound(keys, n, sizeof(*keys), x, search_key_u64),
				     count_upto(keys, n, x), "n %zu, x %llu", n,
				     (unsigned long long)x);
}

Test(search, an_empty_array_is_not_read)
{
	cr_assert_eq(search_upper_bound(NULL, 0, sizeof(uint64_t), 5, search_key_u64), 0);
}

Test(search, the_ends_of_the_keys)
{
	static const uint64_t keys[] = { 0, 1, UINT64_MAX - 1, UINT64_MAX };

	cr_assert_eq(search_upper_bound(keys, 4, sizeof(*keys), 0, search_key_u64), 1);
	cr_assert_eq(search_upper_bound(keys, 4, sizeof(*keys), UINT64_MAX - 2, search_key_u64), 2);
	cr_assert_eq(search_upper_bound(keys, 4, sizeof(*keys), UINT64_MAX, search_key_u64), 4);
	cr_assert_eq(search_upper_bound(keys + 1, 3, sizeof(*keys), 0, search_key_u64), 0);
}

/* Ranges as the callers keep them: the one that can hold x is the one
 * before the bound, and its end says whether it does. */
struct range {
	uint32_t pad;
	uint64_t start, end;
};

static uint64_t range_start(const void *r)
{
	return ((const struct range *)r)->start;
}

Test(search, a_key_inside_a_struct)
{
	static const struct range ranges[] = { { 9, 0x1000, 0x1100 },
					       { 9, 0x1100, 0x1180 },
					       { 9, 0x2000, 0x3000 } };
	static const struct {
		uint64_t x;
		size_t bound;
	} cases[] = { { 0, 0 },         { 0xfff, 0 },  { 0x1000, 1 }, { 0x10ff, 1 },
		      { 0x1100, 2 },    { 0x1fff, 2 }, { 0x2000, 3 }, { UINT64_MAX, 3 } };

	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		cr_assert_eq(search_upper_bound(ranges, ELEMENTSOF(ranges), sizeof(*ranges),
						cases[i].x, range_start),
			     cases[i].bound, "x %#llx", (unsigned long long)cases[i].x);
}
