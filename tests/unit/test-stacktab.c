/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/stacktab.c and daemon/u64map.c: interning,
 * reference counting, limits, and the hash map they are built on. */
#include <criterion/criterion.h>
#include <errno.h>

#include "profile/stacktab.h"
#include "base/u64map.h"

static const struct stacktab_limits big = { .max_stacks = 1000000, .max_frames = 100000000 };

Test(stacktab, same_frames_intern_to_one_id)
{
	struct stacktab *t;
	uint64_t a[] = { 1, 2, 3 }, b[] = { 1, 2, 3 }, c[] = { 1, 2, 4 };
	uint32_t ia, ib, ic;

	cr_assert_eq(stacktab_new(&big, &t), 0);
	cr_assert_eq(stacktab_intern(t, a, 3, 1, &ia), 0);
	cr_assert_eq(stacktab_intern(t, b, 3, 1, &ib), 0);
	cr_assert_eq(stacktab_intern(t, c, 3, 1, &ic), 0);
	cr_assert_eq(ia, ib);
	cr_assert_neq(ia, ic);
	cr_assert_eq(stacktab_count(t), 2);
	cr_assert_eq(stacktab_frames(t), 6);
	cr_assert_eq(stacktab_get(t, ia)->refs, 2);
	cr_assert_eq(stacktab_get(t, ia)->kernel_depth, 1);
	stacktab_free(t);
}

Test(stacktab, kernel_depth_is_part_of_identity)
{
	struct stacktab *t;
	uint64_t a[] = { 1, 2 };
	uint32_t i1, i2;

	cr_assert_eq(stacktab_new(&big, &t), 0);
	stacktab_intern(t, a, 2, 0, &i1);
	stacktab_intern(t, a, 2, 1, &i2);
	cr_assert_neq(i1, i2);
	stacktab_free(t);
}

Test(stacktab, last_unref_frees_and_reuses_the_id)
{
	struct stacktab *t;
	uint64_t a[] = { 7 }, b[] = { 8 };
	uint32_t ia, ib;

	cr_assert_eq(stacktab_new(&big, &t), 0);
	stacktab_intern(t, a, 1, 0, &ia);
	stacktab_ref(t, ia);
	stacktab_unref(t, ia);
	cr_assert_not_null(stacktab_get(t, ia));
	stacktab_unref(t, ia);
	cr_assert_null(stacktab_get(t, ia));
	cr_assert_eq(stacktab_count(t), 0);
	cr_assert_eq(stacktab_frames(t), 0);
	stacktab_intern(t, b, 1, 0, &ib);
	cr_assert_eq(ib, ia);
	/* the freed stack is no longer found: interning it again is new */
	stacktab_intern(t, a, 1, 0, &ia);
	cr_assert_neq(ia, ib);
	cr_assert_eq(stacktab_get(t, ia)->refs, 1);
	stacktab_free(t);
}

Test(stacktab, limits_refuse_new_stacks_but_not_known_ones)
{
	struct stacktab_limits l = { .max_stacks = 2, .max_frames = 5 };
	struct stacktab *t;
	uint64_t a[] = { 1, 2 }, b[] = { 3, 4, 5 }, c[] = { 6 };
	uint32_t id;

	cr_assert_eq(stacktab_new(&l, &t), 0);
	cr_assert_eq(stacktab_intern(t, a, 2, 0, &id), 0);
	cr_assert_eq(stacktab_intern(t, b, 3, 0, &id), 0);
	cr_assert_eq(stacktab_intern(t, c, 1, 0, &id), -ENOSPC); /* stacks */
	cr_assert_eq(stacktab_intern(t, a, 2, 0, &id), 0);
	stacktab_free(t);

	l = (struct stacktab_limits){ .max_stacks = 10, .max_frames = 4 };
	cr_assert_eq(stacktab_new(&l, &t), 0);
	cr_assert_eq(stacktab_intern(t, a, 2, 0, &id), 0);
	cr_assert_eq(stacktab_intern(t, b, 3, 0, &id), -ENOSPC); /* frames */
	cr_assert_eq(stacktab_intern(t, c, 1, 0, &id), 0);
	stacktab_free(t);
}

Test(stacktab, many_stacks_survive_growth_and_removal)
{
	struct stacktab *t;
	cr_assert_eq(stacktab_new(&big, &t), 0);
	enum { N = 50000 };
	static uint32_t ids[N];

	for (uint64_t i = 0; i < N; i++) {
		uint64_t f[] = { i, i * 3, 42 };

		cr_assert_eq(stacktab_intern(t, f, 3, 0, &ids[i]), 0);
	}
	for (uint64_t i = 0; i < N; i += 2)
		stacktab_unref(t, ids[i]);
	cr_assert_eq(stacktab_count(t), N / 2);
	for (uint64_t i = 0; i < N; i++) {
		uint64_t f[] = { i, i * 3, 42 };
		uint32_t id;

		cr_assert_eq(stacktab_intern(t, f, 3, 0, &id), 0);
		if (i % 2)
			cr_assert_eq(id, ids[i], "odd stack %llu lost its id", (unsigned long long)i);
		cr_assert_eq(stacktab_get(t, id)->frames[0], i);
	}
	stacktab_free(t);
}

Test(u64map, insert_get_remove)
{
	struct u64map m;
	bool added;

	u64map_init(&m);
	cr_assert_null(u64map_get(&m, 5));
	*u64map_upsert(&m, 5, &added) = 50;
	cr_assert(added);
	*u64map_upsert(&m, 5, &added) += 1;
	cr_assert_not(added);
	cr_assert_eq(*u64map_get(&m, 5), 51);
	cr_assert(u64map_remove(&m, 5));
	cr_assert_not(u64map_remove(&m, 5));
	cr_assert_eq(m.count, 0);
	u64map_done(&m);
}

Test(u64map, backward_shift_keeps_every_key_reachable)
{
	struct u64map m;
	size_t seen = 0;

	u64map_init(&m);
	for (uint64_t k = 0; k < 20000; k++)
		*u64map_upsert(&m, k * 7919, NULL) = k;
	for (uint64_t k = 0; k < 20000; k += 3)
		cr_assert(u64map_remove(&m, k * 7919));
	for (uint64_t k = 0; k < 20000; k++) {
		uint64_t *v = u64map_get(&m, k * 7919);

		if (k % 3 == 0)
			cr_assert_null(v);
		else
			cr_assert(v && *v == k, "key %llu lost", (unsigned long long)k);
	}
	U64MAP_FOREACH(slot, &m)
		seen++;
	cr_assert_eq(seen, m.count);
	u64map_done(&m);
}
