/* SPDX-License-Identifier: MIT */
/*
 * test-rss.c - a process's RSS timeline and its trend (daemon/profile/rss.c),
 * over real history windows (history_note_rss): the points come oldest
 * first with the last and the highest reading of each window, roll-ups keep
 * the newer reading and the higher peak, and "growing" means a steady rise,
 * not a flat line, a single step or a process that breathes.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "base/clock.h"
#include "profile/aggregate.h"
#include "profile/history.h"
#include "profile/rss.h"
#include "profile/stacktab.h"

#define SEC NSEC_PER_SEC
#define MIB (1024 * 1024)
#define PAGE 4096

static struct stacktab *stacks;
static struct process p;

static void setup(void)
{
	struct stacktab_limits l = { 100, 1000 };

	cr_assert_eq(stacktab_new(&l, &stacks), 0);
	memset(&p, 0, sizeof(p));
	history_init(&p.history);
}

static void teardown(void)
{
	history_release(&p.history, stacks);
	stacktab_free(stacks);
}

TestSuite(rss, .init = setup, .fini = teardown);

/* An RSS reading of anon bytes (plus 1 MiB of file pages) at second t. */
static void reading(uint64_t t_ns, uint64_t anon_bytes)
{
	__u64 pages[PERFD_RSS_COUNTERS] = { [PERFD_RSS_FILE] = MIB / PAGE,
					    [PERFD_RSS_ANON] = anon_bytes / PAGE };

	cr_assert_eq(history_note_rss(&p.history, t_ns, 0, pages, PAGE), 0);
}

static struct rss_trend trend_over(uint64_t from, uint64_t to, size_t *ret_n)
{
	struct rss_point pts[64];
	struct rss_trend t;
	size_t n = rss_timeline(&p, from, to, NULL, pts, 64);

	rss_trend(pts, n, &t);
	if (ret_n)
		*ret_n = n;
	return t;
}

Test(rss, timeline_is_oldest_first_with_last_and_highest_readings)
{
	struct rss_point pts[8];
	size_t n;

	reading(100 * SEC + 100, 10 * MIB);
	reading(100 * SEC + 500, 30 * MIB); /* the window's peak ... */
	reading(100 * SEC + 900, 20 * MIB); /* ... and its last reading */
	reading(101 * SEC + 1, 25 * MIB);
	n = rss_timeline(&p, 0, 200 * SEC, NULL, pts, 8);
	cr_assert_eq(n, 2);
	cr_assert_eq(pts[0].start_ns, 100 * SEC);
	cr_assert_eq(pts[0].bytes[PERFD_RSS_ANON], 20 * MIB);
	cr_assert_eq(pts[0].total_bytes, 21 * MIB);
	cr_assert_eq(pts[0].max_bytes, 31 * MIB);
	cr_assert_eq(pts[1].total_bytes, 26 * MIB);
	/* a range that holds only the second window */
	cr_assert_eq(rss_timeline(&p, 101 * SEC, 200 * SEC, NULL, pts, 8), 1);
	cr_assert_eq(pts[0].start_ns, 101 * SEC);
}

Test(rss, a_steady_rise_is_growing_with_its_rate)
{
	size_t n;
	struct rss_trend t;

	for (int s = 0; s < 20; s++)
		reading((1000 + s) * SEC, 50 * MIB + (uint64_t)s * 3 * MIB);
	t = trend_over(1000 * SEC, 1020 * SEC, &n);
	cr_assert_eq(n, 20);
	cr_assert(fabs(t.bytes_per_second - 3.0 * MIB) < 0.01 * MIB, "rate %f", t.bytes_per_second);
	cr_assert_gt(t.r2, 0.99);
	cr_assert_eq(t.rise_bytes, 57 * MIB);
	cr_assert(t.growing);
}

Test(rss, flat_step_and_breathing_are_not_growing)
{
	struct rss_trend t;

	/* flat */
	for (int s = 0; s < 10; s++)
		reading((2000 + s) * SEC, 64 * MIB);
	t = trend_over(2000 * SEC, 2010 * SEC, NULL);
	cr_assert(!t.growing);
	cr_assert(fabs(t.bytes_per_second) < 1);

	/* breathing: up and down by 32 MiB every other second */
	for (int s = 0; s < 10; s++)
		reading((3000 + s) * SEC, (s % 2 ? 96 : 64) * (uint64_t)MIB);
	t = trend_over(3000 * SEC, 3010 * SEC, NULL);
	cr_assert(!t.growing, "breathing marked growing: rate %f r2 %f", t.bytes_per_second, t.r2);

	/* a slow creep below the rate that counts */
	for (int s = 0; s < 10; s++)
		reading((4000 + s) * SEC, 64 * MIB + (uint64_t)s * 16 * 1024);
	t = trend_over(4000 * SEC, 4010 * SEC, NULL);
	cr_assert(!t.growing, "16 KiB/s marked growing");

	/* too few readings to say */
	reading(5000 * SEC, 10 * MIB);
	reading(5001 * SEC, 20 * MIB);
	t = trend_over(5000 * SEC, 5002 * SEC, NULL);
	cr_assert(!t.growing);
}

Test(rss, changed_sees_a_move_within_or_across_windows)
{
	reading(6000 * SEC, 10 * MIB);
	reading(6001 * SEC, 10 * MIB);
	cr_assert(!rss_changed(&p, 6000 * SEC, 6002 * SEC, NULL));
	reading(6002 * SEC, 12 * MIB);
	cr_assert(rss_changed(&p, 6000 * SEC, 6003 * SEC, NULL));
	/* a move inside one window: its peak differs from its last reading */
	reading(6010 * SEC + 1, 40 * MIB);
	reading(6010 * SEC + 2, 10 * MIB);
	cr_assert(rss_changed(&p, 6010 * SEC, 6011 * SEC, NULL));
}

Test(rss, roll_up_keeps_the_newer_reading_and_the_higher_peak)
{
	struct rss_point pts[4];
	struct history_dropped d = { 0 };

	/* ten 1 s windows in one aligned 10 s span, peak in the first */
	for (int s = 0; s < 10; s++)
		reading((7000 + s) * SEC, (s == 0 ? 90 : 10 + s) * (uint64_t)MIB);
	/* much later: they roll up into one 10 s window */
	history_maintain(&p.history, stacks, 7000 + HISTORY_FINE_AGE_S + 60, 100000, &d);
	cr_assert_eq(rss_timeline(&p, 0, UINT64_MAX, NULL, pts, 4), 1);
	cr_assert_eq(pts[0].end_ns - pts[0].start_ns, 10 * SEC);
	cr_assert_eq(pts[0].bytes[PERFD_RSS_ANON], 19 * MIB, "the newest reading is kept");
	cr_assert_eq(pts[0].max_bytes, 91 * MIB, "the highest peak is kept");
}

static bool takes_only(void *userdata, uint32_t owner)
{
	return owner == *(const uint32_t *)userdata;
}

/* A user sees the RSS of a process only for the windows it could have
 * traced it in, as it sees its profile (history.h's owner_filter). */
Test(rss, timeline_and_change_take_only_the_owners_windows)
{
	__u64 pages[PERFD_RSS_COUNTERS] = { [PERFD_RSS_ANON] = 1 };
	uint32_t user = 1000;
	struct owner_filter mine = { .takes = takes_only, .userdata = &user };
	struct rss_point pts[8];

	/* root's seconds 100..102, growing; then the user's 103..104, flat */
	for (uint64_t t = 100; t < 103; t++) {
		pages[PERFD_RSS_ANON] = t;
		cr_assert_eq(history_note_rss(&p.history, t * SEC, 0, pages, PAGE), 0);
	}
	for (uint64_t t = 103; t < 105; t++)
		cr_assert_eq(history_note_rss(&p.history, t * SEC, user, pages, PAGE), 0);

	cr_assert_eq(rss_timeline(&p, 0, 200 * SEC, NULL, pts, 8), 5);
	cr_assert_eq(rss_timeline(&p, 0, 200 * SEC, &mine, pts, 8), 2);
	cr_assert_eq(pts[0].start_ns, 103 * SEC);
	cr_assert(rss_changed(&p, 100 * SEC, 105 * SEC, NULL));
	cr_assert(!rss_changed(&p, 100 * SEC, 105 * SEC, &mine), "root's growth shown to the user");
}
