/* SPDX-License-Identifier: MIT */
/*
 * test-rates.c - the ring of the daemon's own counters (daemon/rates.c):
 * a rate over N seconds is taken from the newest reading at least N seconds
 * old, or from the oldest one held when none is; the ring forgets its
 * oldest readings once full; nothing before the first reading.
 */
#include <criterion/criterion.h>

#include "rates.h"
#include "base/clock.h"

static struct rates_reading at(uint64_t second, uint64_t cpu_ms, uint64_t samples, uint64_t lost)
{
	return (struct rates_reading){ second * NSEC_PER_SEC, cpu_ms * 1000000, samples, lost };
}

Test(rates, nothing_without_an_older_reading)
{
	struct rates r = { 0 };
	struct rates_reading now = at(10, 0, 0, 0), d = { 1, 2, 3, 4 };

	cr_expect_not(rates_over(&r, &now, 2, &d));
	rates_note(&r, &now);
	cr_expect_not(rates_over(&r, &now, 2, &d), "a reading of the same time is no base");
	cr_expect_eq(d.ns, 1, "untouched");
}

Test(rates, the_newest_reading_old_enough)
{
	struct rates r = { 0 };
	struct rates_reading now = at(10, 500, 1000, 7), d;

	for (uint64_t s = 1; s <= 9; s++) {
		struct rates_reading x = at(s, s * 10, s * 100, s / 4);

		rates_note(&r, &x);
	}
	cr_assert(rates_over(&r, &now, 2, &d));
	/* from second 8 */
	cr_expect_eq(d.ns, 2 * NSEC_PER_SEC);
	cr_expect_eq(d.cpu_ns, (500 - 80) * 1000000ULL);
	cr_expect_eq(d.samples, 1000 - 800);
	cr_expect_eq(d.lost, 7 - 2);
	/* longer than the ring reaches: from the oldest, second 1 */
	cr_assert(rates_over(&r, &now, 60, &d));
	cr_expect_eq(d.ns, 9 * NSEC_PER_SEC);
}

Test(rates, the_ring_forgets_the_oldest)
{
	struct rates r = { 0 };
	struct rates_reading now = at(RATES_SECONDS + 100, 0, 0, 0), d;

	for (uint64_t s = 1; s <= RATES_SECONDS + 10; s++) {
		struct rates_reading x = at(s, 0, 0, 0);

		rates_note(&r, &x);
	}
	cr_expect_eq(r.n, RATES_SECONDS);
	cr_assert(rates_over(&r, &now, 1000, &d));
	cr_expect_eq(d.ns, (now.ns - 11 * NSEC_PER_SEC), "the oldest kept is second 11");
}
