/* SPDX-License-Identifier: MIT */
/*
 * test-owners.c - the fair eviction policy (daemon/profile/owners.c): the
 * owner admitting data pays when it holds more than the mean, else the one
 * holding the most; exhausted owners are passed over; bytes and processes
 * are counted apart.
 */
#include <criterion/criterion.h>

#include "profile/owners.h"

static struct owner_tally t;

static void setup(void)
{
	owner_tally_init(&t);
}

static void teardown(void)
{
	owner_tally_done(&t);
}

TestSuite(owners, .init = setup, .fini = teardown);

static uint32_t victim(enum owner_measure m, const uint32_t *admitter, bool *own)
{
	struct owner_use *u = owner_tally_victim(&t, m, admitter, own);

	cr_assert_not_null(u);
	return u->owner;
}

Test(owners, the_heaviest_pays_when_the_admitter_is_within_its_share)
{
	uint32_t small = 1000;
	bool own = true;

	cr_assert_eq(owner_tally_add(&t, 0, 300), 0);
	cr_assert_eq(owner_tally_add(&t, 1000, 100), 0);
	cr_assert_eq(owner_tally_add(&t, 2000, 500), 0);
	cr_assert_eq(victim(OWNER_BYTES, &small, &own), 2000);
	cr_assert_not(own);
	cr_assert_eq(victim(OWNER_BYTES, NULL, &own), 2000);
}

Test(owners, an_admitter_past_the_mean_pays_with_its_own)
{
	uint32_t mid = 0;
	bool own = false;

	cr_assert_eq(owner_tally_add(&t, 0, 400), 0);
	cr_assert_eq(owner_tally_add(&t, 1000, 100), 0);
	cr_assert_eq(owner_tally_add(&t, 2000, 500), 0);
	/* mean 333: 400 is past it, though 2000 holds more */
	cr_assert_eq(victim(OWNER_BYTES, &mid, &own), 0);
	cr_assert(own);
}

Test(owners, exhausted_owners_are_passed_over_and_leave_the_mean)
{
	uint32_t mid = 0;
	bool own;

	cr_assert_eq(owner_tally_add(&t, 0, 400), 0);
	cr_assert_eq(owner_tally_add(&t, 1000, 100), 0);
	cr_assert_eq(owner_tally_add(&t, 2000, 1000), 0);
	owner_tally_get(&t, 2000)->exhausted = true;
	cr_assert_eq(victim(OWNER_BYTES, &mid, &own), 0);
	cr_assert(own, "past the mean of those that can give");
	owner_tally_get(&t, 0)->exhausted = true;
	cr_assert_eq(victim(OWNER_BYTES, &mid, &own), 1000);
	owner_tally_get(&t, 1000)->exhausted = true;
	cr_assert_null(owner_tally_victim(&t, OWNER_BYTES, &mid, &own));
}

Test(owners, processes_are_counted_apart_from_bytes)
{
	bool own;

	for (int i = 0; i < 5; i++)
		cr_assert_eq(owner_tally_add(&t, 2000, 10), 0);
	cr_assert_eq(owner_tally_add(&t, 1000, 1000), 0);
	cr_assert_eq(victim(OWNER_PROCESSES, NULL, &own), 2000);
	cr_assert_eq(victim(OWNER_BYTES, NULL, &own), 1000);
	cr_assert_eq(owner_tally_get(&t, 2000)->held[OWNER_PROCESSES], 5);
	cr_assert_eq(owner_tally_get(&t, 2000)->held[OWNER_BYTES], 50);
}

Test(owners, a_reset_forgets_every_owner)
{
	bool own;

	cr_assert_eq(owner_tally_add(&t, 7, 1), 0);
	owner_tally_reset(&t);
	cr_assert_null(owner_tally_get(&t, 7));
	cr_assert_null(owner_tally_victim(&t, OWNER_BYTES, NULL, &own));
	cr_assert_eq(owner_tally_add(&t, 8, 1), 0);
	cr_assert_eq(victim(OWNER_BYTES, NULL, &own), 8);
}
