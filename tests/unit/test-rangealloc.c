/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/rangealloc.c: first fit, merging, refusal of bad
 * releases, and a random workload checked against a bitmap. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "base/rangealloc.h"

Test(rangealloc, first_fit_and_merge_back)
{
	struct rangealloc a;
	uint32_t x, y, z;

	cr_assert_eq(rangealloc_init(&a, 100), 0);
	cr_assert_eq(rangealloc_get(&a, 30, &x), 0);
	cr_assert_eq(rangealloc_get(&a, 30, &y), 0);
	cr_assert_eq(rangealloc_get(&a, 30, &z), 0);
	cr_assert_eq(x, 0);
	cr_assert_eq(y, 30);
	cr_assert_eq(z, 60);
	cr_assert_eq(rangealloc_get(&a, 11, &x), -ENOSPC);
	cr_assert_eq(rangealloc_put(&a, 30, 30), 0);
	cr_assert_eq(rangealloc_get(&a, 20, &x), 0);
	cr_assert_eq(x, 30);
	cr_assert_eq(rangealloc_put(&a, 30, 20), 0);
	cr_assert_eq(rangealloc_put(&a, 0, 30), 0);
	cr_assert_eq(rangealloc_put(&a, 60, 30), 0);
	cr_assert_eq(a.n_free, 1, "free ranges did not merge back into one");
	cr_assert_eq(a.used, 0);
	cr_assert_eq(rangealloc_get(&a, 100, &x), 0);
	rangealloc_done(&a);
}

Test(rangealloc, releasing_free_space_is_refused)
{
	struct rangealloc a;
	uint32_t x;

	rangealloc_init(&a, 10);
	rangealloc_get(&a, 4, &x);
	cr_assert_eq(rangealloc_put(&a, 2, 4), -EINVAL);
	cr_assert_eq(rangealloc_put(&a, 8, 4), -EINVAL);
	cr_assert_eq(rangealloc_put(&a, 0, 4), 0);
	cr_assert_eq(rangealloc_put(&a, 0, 4), -EINVAL);
	rangealloc_done(&a);
}

Test(rangealloc, random_workload_never_hands_out_a_used_index)
{
	enum { CAP = 5000, SLOTS = 200 };
	static unsigned char owner[CAP];
	struct range held[SLOTS] = { 0 };
	struct rangealloc a;

	srand(7);
	rangealloc_init(&a, CAP);
	for (int step = 0; step < 20000; step++) {
		int s = rand() % SLOTS;

		if (held[s].count) {
			for (uint32_t i = 0; i < held[s].count; i++)
				owner[held[s].first + i] = 0;
			cr_assert_eq(rangealloc_put(&a, held[s].first, held[s].count), 0);
			held[s].count = 0;
		} else {
			uint32_t n = 1 + rand() % 60, first;

			if (rangealloc_get(&a, n, &first) < 0)
				continue;
			for (uint32_t i = 0; i < n; i++) {
				cr_assert_eq(owner[first + i], 0, "index %u handed out twice", first + i);
				owner[first + i] = 1;
			}
			held[s] = (struct range){ first, n };
		}
	}
	rangealloc_done(&a);
}
