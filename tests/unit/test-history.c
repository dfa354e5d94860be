/* SPDX-License-Identifier: MIT */
/*
 * test-history.c - one process's time windows (daemon/profile/history.c):
 * which window a sample lands in (an older sample included), the roll-up
 * from 1 s to 10 s to 60 s windows as they age with no two windows
 * overlapping, the retention, the half-overlap rule of a query and the span
 * it reports, and that the byte count and the stack references all go when
 * the windows do; that windows are sealed into the log after a delay with
 * every entry kept, that a late sample for a sealed second is kept after
 * the log, and that random streams (late samples, skipped maintenance,
 * retention, evictions) lose nothing and leave the log tight.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "base/clock.h"
#include "perfd/macro.h"
#include "profile/history.h"
#include "profile/profile.h"
#include "profile/stacktab.h"

#define SEC NSEC_PER_SEC
#define N_STACKS 4

static struct stacktab *stacks;
static uint32_t ids[N_STACKS];
static struct history h;

static void setup(void)
{
	struct stacktab_limits l = { 1000, 100000 };

	cr_assert_eq(stacktab_new(&l, &stacks), 0);
	for (uint32_t i = 0; i < N_STACKS; i++) {
		uint64_t frames[] = { 0x1000 + i, 0x2000 };

		cr_assert_eq(stacktab_intern(stacks, frames, 2, 0, &ids[i]), 0);
	}
	history_init(&h);
}

/* Releasing everything gives every stack reference back: only the test's
 * own remain, and once those go the table is empty. */
static void teardown(void)
{
	history_release(&h, stacks);
	cr_expect_eq(h.bytes, 0, "%zu bytes left after release", h.bytes);
	cr_expect_eq(h.n_windows, 0);
	cr_expect_eq(stacktab_count(stacks), N_STACKS, "stack references leaked");
	for (uint32_t i = 0; i < N_STACKS; i++)
		stacktab_unref(stacks, ids[i]);
	cr_expect_eq(stacktab_count(stacks), 0);
	stacktab_free(stacks);
}

TestSuite(history, .init = setup, .fini = teardown);

static uint64_t key(int stack)
{
	return profile_key(ids[stack], 1, PROFILE_KIND_CPU);
}

static void add(uint64_t ts_ns, int stack, uint64_t value)
{
	cr_assert_eq(history_add(&h, stacks, ts_ns, 0, key(stack), value), 0);
}

/* The windows as the iterator shows them, oldest first (a copy: valid
 * until the history changes). */
static struct history_window wins[8192];
static size_t n_wins;

static void collect(void)
{
	struct history_iter it;

	n_wins = 0;
	history_iter_init(&it, &h);
	while (n_wins < ELEMENTSOF(wins) && history_iter_next(&it, &wins[n_wins]))
		n_wins++;
	cr_assert_lt(n_wins, ELEMENTSOF(wins));
}

static uint64_t value_in(const struct history_window *w, int stack)
{
	cr_assert_not_null(w, "no window there");
	return history_window_value(w, key(stack));
}

/* The window whose span holds second s, or NULL. */
static const struct history_window *window_at(uint64_t s)
{
	collect();
	for (size_t i = 0; i < n_wins; i++)
		if (s >= wins[i].start_s && s < wins[i].start_s + wins[i].span_s)
			return &wins[i];
	return NULL;
}

static const struct history_window *newest(void)
{
	collect();
	return n_wins ? &wins[n_wins - 1] : NULL;
}

static const struct history_window *oldest(void)
{
	collect();
	return n_wins ? &wins[0] : NULL;
}

static uint64_t total(void)
{
	uint64_t n = 0;

	collect();
	for (size_t i = 0; i < n_wins; i++)
		n += history_window_total(&wins[i], PROFILE_KIND_CPU);
	return n;
}

/* Windows are aligned to their span, never overlap, and coarsen with age;
 * the sealed ones come before the open ones; every entry of a sealed
 * window is a distinct key in ascending order; n_windows and bytes add up
 * (the open windows and their maps, and the log's buffer, which holds no
 * more than its live bytes plus an eighth and a little). */
static void check_invariants(void)
{
	const struct history_window *older = NULL;
	const struct window *open = h.oldest_open, *prev_open = NULL;
	size_t bytes = h.log.cap, live = h.log.len - h.log.head;

	collect();
	for (size_t i = 0; i < n_wins; older = &wins[i], i++) {
		const struct history_window *w = &wins[i];

		cr_assert(w->span_s == 1 || w->span_s == 10 || w->span_s == 60, "span %u",
			  w->span_s);
		cr_assert_eq(w->start_s % w->span_s, 0, "window at %lu not aligned to %u s",
			     (unsigned long)w->start_s, w->span_s);
		if (older) {
			cr_assert_leq(older->start_s + older->span_s, w->start_s,
				      "window [%lu,+%u) overlaps [%lu,+%u)",
				      (unsigned long)older->start_s, older->span_s,
				      (unsigned long)w->start_s, w->span_s);
			cr_assert_geq(older->span_s, w->span_s, "an older window is finer");
			cr_assert(older->sealed || !w->sealed, "a sealed window after an open one");
		}
		if (!w->sealed) {
			cr_assert_eq(w->span_s, 1, "an open window was rolled up");
			cr_assert_eq(w->start_s, open->start_s);
			cr_assert_eq(open->older, prev_open);
			bytes += sizeof(*open) + profile_memory(&open->prof);
			prev_open = open;
			open = open->newer;
		}
	}
	cr_assert_null(open, "an open window the iterator missed");
	cr_assert_eq(h.newest, prev_open);
	cr_assert_eq(h.n_windows, n_wins);
	cr_assert_eq(h.bytes, bytes, "bytes %zu, windows hold %zu", h.bytes, bytes);
	cr_assert_leq(h.log.cap, live + 2 * (live / 8 + 64) + 64, "log of %zu bytes for %zu live",
		      h.log.cap, live);
}

Test(history, samples_land_in_the_window_of_their_second)
{
	add(10 * SEC + 1, 0, 1);
	add(10 * SEC + SEC - 1, 0, 1);
	add(11 * SEC, 1, 1);
	add(12 * SEC + 5, 0, 1);
	cr_assert_eq(h.n_windows, 3);
	cr_assert_eq(newest()->start_s, 12);
	cr_assert_eq(oldest()->start_s, 10);
	cr_assert_eq(wins[1].start_s, 11);
	cr_assert_eq(value_in(window_at(10), 0), 2);
	cr_assert_eq(value_in(window_at(11), 1), 1);
	cr_assert_eq(history_oldest_s(&h), 10);
	check_invariants();
}

Test(history, an_older_sample_goes_to_the_window_of_its_second)
{
	add(10 * SEC, 0, 1);
	add(11 * SEC, 0, 1);
	add(12 * SEC, 0, 1);
	add(11 * SEC + SEC / 2, 1, 5); /* late, but its second has a window */
	cr_assert_eq(h.n_windows, 3);
	cr_assert_eq(value_in(window_at(11), 1), 5);
	cr_assert_eq(value_in(window_at(12), 1), 0);
	check_invariants();
}

Test(history, an_older_sample_in_a_gap_or_before_all_goes_to_the_newest)
{
	add(10 * SEC, 0, 1);
	add(20 * SEC, 0, 1); /* idle from 11 to 19 */
	add(15 * SEC, 1, 3);
	add(2 * SEC, 2, 4);  /* older than everything kept */
	cr_assert_eq(h.n_windows, 2, "an old sample made a window of its own");
	cr_assert_eq(value_in(newest(), 1), 3);
	cr_assert_eq(value_in(newest(), 2), 4);
	cr_assert_eq(value_in(oldest(), 1), 0);
	cr_assert_eq(total(), 9, "a sample was lost");
	check_invariants();
}

/* Samples every second for 4000 s, maintained once a second as the daemon
 * does: 1 s windows for the last two minutes, 10 s ones to half an hour,
 * 60 s ones beyond, nothing lost, nothing overlapping. */
Test(history, roll_up_one_to_ten_to_sixty_seconds)
{
	const uint64_t end = 5000;

	for (uint64_t s = 1000; s < end; s++) {
		add(s * SEC + 1000, (int)(s % N_STACKS), 1);
		history_maintain(&h, stacks, s + 1, 100000, NULL);
	}
	check_invariants();
	cr_assert_eq(total(), end - 1000);
	collect();
	for (size_t i = 0; i < n_wins; i++) {
		const struct history_window *w = &wins[i];
		uint64_t age_end = end - (w->start_s + w->span_s); /* how long ago it ended */

		if (w->span_s == 1)
			cr_assert_lt(age_end, HISTORY_FINE_AGE_S + 10, "1 s window aged %lu s",
				     (unsigned long)age_end);
		else if (w->span_s == 10)
			cr_assert(age_end >= HISTORY_FINE_AGE_S - 1 &&
					  age_end < HISTORY_MEDIUM_AGE_S + 60,
				  "10 s window aged %lu s", (unsigned long)age_end);
		else
			cr_assert_geq(age_end, HISTORY_MEDIUM_AGE_S - 1, "60 s window aged %lu s",
				      (unsigned long)age_end);
	}
	/* the three tiers are all there, each window holds what its span saw */
	cr_assert_eq(window_at(end - 5)->span_s, 1);
	cr_assert_eq(window_at(end - 600)->span_s, 10);
	cr_assert_eq(window_at(1200)->span_s, 60);
	cr_assert_eq(history_window_total(window_at(1200), PROFILE_KIND_CPU), 60);
	cr_assert_eq(history_window_total(window_at(end - 600), PROFILE_KIND_CPU), 10);
	/* a stack seen every 4th second of a minute costs one entry there */
	cr_assert_eq(history_window_entries(window_at(1200)), N_STACKS);
	cr_assert_eq(value_in(window_at(1200), 0), 15);
	/* about 120 + 168 + 50 windows, not 4000 */
	cr_assert_lt(h.n_windows, 400, "%zu windows", h.n_windows);
}

/* One maintenance after a long pause rolls everything at once. */
Test(history, roll_up_in_one_step)
{
	for (uint64_t s = 0; s < 3600; s++)
		add(s * SEC, 0, 2);
	history_maintain(&h, stacks, 3600, 100000, NULL);
	check_invariants();
	cr_assert_eq(total(), 7200);
	cr_assert_eq(window_at(0)->span_s, 60);
	cr_assert_eq(window_at(3599)->span_s, 1);
	cr_assert_eq(window_at(3400)->span_s, 10);
	/* a second pass changes nothing */
	{
		size_t n = h.n_windows;

		history_maintain(&h, stacks, 3600, 100000, NULL);
		cr_assert_eq(h.n_windows, n);
		check_invariants();
	}
}

/* A window is sealed (packed into the log) once it ended
 * HISTORY_SEAL_AFTER_S ago, and keeps every entry: the same keys, the same
 * values, the same references; the younger ones stay open. */
Test(history, windows_are_sealed_after_a_delay_and_keep_their_entries)
{
	size_t open_bytes;

	for (uint64_t s = 100; s < 110; s++) {
		add(s * SEC, (int)(s % N_STACKS), s);
		add(s * SEC + 1, 3, 1);
	}
	open_bytes = h.bytes;
	history_maintain(&h, stacks, 110, 100000, NULL);
	check_invariants();
	cr_assert_eq(h.log.n, 10 - HISTORY_SEAL_AFTER_S,
		     "%zu sealed, expected those that ended by %d", h.log.n, 110 - HISTORY_SEAL_AFTER_S);
	cr_assert_eq(h.n_windows, 10);
	for (uint64_t s = 100; s < 110; s++) {
		const struct history_window *w = window_at(s);

		cr_assert_eq(w->sealed, s + 1 + HISTORY_SEAL_AFTER_S <= 110, "second %lu", (unsigned long)s);
		cr_assert_eq(history_window_entries(w), s % N_STACKS == 3 ? 1 : 2);
		cr_assert_eq(value_in(w, (int)(s % N_STACKS)), s % N_STACKS == 3 ? s + 1 : s);
		cr_assert_eq(value_in(w, 3), s % N_STACKS == 3 ? s + 1 : 1);
	}
	cr_assert_lt(h.bytes, open_bytes, "sealing did not make the history smaller");
	/* two entries and a header in a few bytes, not a map's 64 */
	cr_assert_lt(h.log.len - h.log.head, h.log.n * 16, "%zu bytes for %zu windows",
		     h.log.len - h.log.head, h.log.n);
}

/* A late sample for a second already sealed goes to the first second after
 * the log: nothing lost, nothing out of order. */
Test(history, a_late_sample_for_a_sealed_second_goes_after_the_log)
{
	for (uint64_t s = 0; s < 400; s++)
		add(s * SEC, 0, 1);
	history_maintain(&h, stacks, 400, 100000, NULL);
	cr_assert_eq(window_at(15)->span_s, 10);
	cr_assert(window_at(15)->sealed);
	cr_assert_eq(h.log.end_s, 400 - HISTORY_SEAL_AFTER_S);
	add(15 * SEC + 7, 3, 1);
	cr_assert_eq(value_in(window_at(15), 3), 0);
	cr_assert_eq(value_in(window_at(h.log.end_s), 3), 1);
	cr_assert_not(window_at(h.log.end_s)->sealed);
	cr_assert_eq(total(), 401);
	check_invariants();
	/* and with no open window left at all: a new one right after the log */
	history_maintain(&h, stacks, 500, 100000, NULL);
	cr_assert_null(h.newest);
	add(20 * SEC, 2, 1);
	cr_assert_eq(newest()->start_s, h.log.end_s);
	cr_assert_eq(value_in(newest(), 2), 1);
	cr_assert_eq(total(), 402);
	check_invariants();
}

/* A query takes open and sealed windows alike, and an entry merged by a
 * roll-up is counted once, with the sum of its values. */
Test(history, query_spans_sealed_and_open_windows)
{
	struct profile_values out;
	uint64_t first = UINT64_MAX, end = 0;

	for (uint64_t s = 1000; s < 1300; s++)
		add(s * SEC, (int)(s % 2), 1);
	history_maintain(&h, stacks, 1300, 100000, NULL);
	check_invariants();
	cr_assert(window_at(1000)->sealed && window_at(1000)->span_s == 10);
	cr_assert_not(window_at(1299)->sealed);
	profile_init(&out);
	cr_assert_eq(history_query(&h, stacks, UINT64_MAX, 0, 2000 * SEC, NULL, &out, &first, &end), 0);
	cr_assert_eq(out.values.count, 2);
	cr_assert_eq(*u64map_get(&out.values, key(0)), 150);
	cr_assert_eq(*u64map_get(&out.values, key(1)), 150);
	cr_assert_eq(first, 1000 * SEC);
	cr_assert_eq(end, 1300 * SEC);
	profile_release(&out, stacks);
}

Test(history, retention_drops_the_windows_that_ended_before_it)
{
	struct history_dropped d = { 0 };

	for (uint64_t s = 100; s < 110; s++)
		add(s * SEC, 0, 2);
	/* retention 60 s at 165: those that ended by 105 go (100..104) */
	history_maintain(&h, stacks, 165, 60, &d);
	cr_assert_eq(d.windows, 5);
	cr_assert_eq(d.values[PROFILE_KIND_CPU], 10);
	cr_assert_eq(h.n_windows, 5);
	cr_assert_eq(history_oldest_s(&h), 105);
	check_invariants();
	/* later, all of them */
	history_maintain(&h, stacks, 1000, 60, &d);
	cr_assert_eq(d.windows, 10);
	cr_assert_eq(d.values[PROFILE_KIND_CPU], 20);
	cr_assert(history_empty(&h));
	cr_assert_null(h.newest);
	cr_assert_null(h.oldest_open);
	cr_assert_null(h.log.buf);
	cr_assert_eq(h.bytes, 0);
	cr_assert_eq(history_oldest_s(&h), UINT64_MAX);
}

Test(history, drop_oldest_goes_oldest_first)
{
	struct history_dropped d = { 0 };

	add(5 * SEC, 0, 1);
	add(6 * SEC, 1, 2);
	add(7 * SEC, 2, 3);
	cr_assert(history_drop_oldest(&h, stacks, &d));
	cr_assert_eq(history_oldest_s(&h), 6);
	cr_assert_eq(d.windows, 1);
	cr_assert_eq(d.values[PROFILE_KIND_CPU], 1);
	cr_assert(history_drop_oldest(&h, stacks, NULL));
	cr_assert(history_drop_oldest(&h, stacks, &d));
	cr_assert_eq(d.values[PROFILE_KIND_CPU], 4);
	cr_assert_not(history_drop_oldest(&h, stacks, &d));
	cr_assert_eq(h.bytes, 0);
	cr_assert_eq(h.n_windows, 0);
}

/* Queries the history over [from, to) (ns) as of now_ns; returns the CPU
 * total and the span covered. */
static uint64_t query_at(uint64_t now_ns, uint64_t from_ns, uint64_t to_ns, uint64_t *first_ns,
			 uint64_t *end_ns)
{
	struct profile_values out;
	uint64_t n;

	profile_init(&out);
	*first_ns = UINT64_MAX;
	*end_ns = 0;
	cr_assert_eq(history_query(&h, stacks, now_ns, from_ns, to_ns, NULL, &out, first_ns, end_ns), 0);
	n = out.totals[PROFILE_KIND_CPU];
	profile_release(&out, stacks);
	return n;
}

/* The same, long after every window ended. */
static uint64_t query(uint64_t from_ns, uint64_t to_ns, uint64_t *first_ns, uint64_t *end_ns)
{
	return query_at(UINT64_MAX, from_ns, to_ns, first_ns, end_ns);
}

/* 10 s windows [100,110) [110,120) [120,130), holding 10, 100 and 1000. */
static void ten_second_windows(void)
{
	for (uint64_t s = 100; s < 130; s++)
		add(s * SEC, 0, s < 110 ? 1 : s < 120 ? 10 : 100);
	history_maintain(&h, stacks, 300, 100000, NULL);
	cr_assert_eq(h.n_windows, 3);
	cr_assert_eq(oldest()->span_s, 10);
	check_invariants();
}

Test(history, query_takes_windows_at_least_half_inside)
{
	uint64_t first, end;

	ten_second_windows();
	/* exactly half of [100,110) and of [110,120) */
	cr_assert_eq(query(105 * SEC, 115 * SEC, &first, &end), 110);
	cr_assert_eq(first, 100 * SEC);
	cr_assert_eq(end, 120 * SEC);
	/* less than half of [100,110), half of [110,120) */
	cr_assert_eq(query(105 * SEC + 1, 115 * SEC, &first, &end), 100);
	cr_assert_eq(first, 110 * SEC);
	cr_assert_eq(end, 120 * SEC);
	/* a range inside one window, less than half of it */
	cr_assert_eq(query(121 * SEC, 124 * SEC, &first, &end), 0);
	cr_assert_eq(first, UINT64_MAX, "the span moved without a window taken");
	cr_assert_eq(end, 0);
	/* the whole, and more */
	cr_assert_eq(query(0, 1000 * SEC, &first, &end), 1110);
	cr_assert_eq(first, 100 * SEC);
	cr_assert_eq(end, 130 * SEC);
	/* before and after everything */
	cr_assert_eq(query(0, 100 * SEC, &first, &end), 0);
	cr_assert_eq(query(130 * SEC, 200 * SEC, &first, &end), 0);
	cr_assert_eq(end, 0);
}

Test(history, query_at_the_second_for_recent_windows)
{
	uint64_t first, end;

	for (uint64_t s = 50; s < 60; s++)
		add(s * SEC, 0, 1);
	cr_assert_eq(query(52 * SEC, 55 * SEC, &first, &end), 3);
	cr_assert_eq(first, 52 * SEC);
	cr_assert_eq(end, 55 * SEC);
	/* half a second of 51 and of 55: both in */
	cr_assert_eq(query(51 * SEC + SEC / 2, 55 * SEC + SEC / 2, &first, &end), 5);
	cr_assert_eq(first, 51 * SEC);
	cr_assert_eq(end, 56 * SEC);
}

/* "The last 2 s" asked 0.3 s into second 103: the window of 103 holds the
 * newest samples and has passed only 0.3 s, all of it inside the range,
 * so it is taken; asked later (it has passed whole), the same range holds
 * less than half of it.  (Taking it by its whole length lost up to the
 * last second of every recent query: a workload of 40 runs snapshotted
 * right after them showed 46% of its samples.) */
Test(history, the_window_in_progress_counts_what_has_passed)
{
	uint64_t first, end, now = 103 * SEC + 3 * SEC / 10;

	for (uint64_t s = 100; s < 103; s++)
		add(s * SEC, 0, 1);
	add(103 * SEC + SEC / 10, 0, 100);
	cr_assert_eq(query_at(now, now - 2 * SEC, now, &first, &end), 102);
	cr_assert_eq(first, 101 * SEC);
	cr_assert_eq(end, now, "the span ends in the future");
	cr_assert_eq(query_at(104 * SEC, now - 2 * SEC, now, &first, &end), 2);
	cr_assert_eq(end, 103 * SEC);
	/* a window that starts after now (no clock does that) counts whole */
	cr_assert_eq(query_at(50 * SEC, now - 2 * SEC, now, &first, &end), 2);
}

/* The span widens what the caller passed in: several histories (one per
 * process) add up to one answer. */
Test(history, query_widens_the_span_given)
{
	struct profile_values out;
	uint64_t first = 3 * SEC, end = 4 * SEC;

	add(10 * SEC, 0, 1);
	profile_init(&out);
	cr_assert_eq(history_query(&h, stacks, UINT64_MAX, 0, 100 * SEC, NULL, &out, &first, &end), 0);
	cr_assert_eq(first, 3 * SEC);
	cr_assert_eq(end, 11 * SEC);
	/* the answer holds its own references: the history can go first */
	history_release(&h, stacks);
	cr_assert_eq(out.totals[PROFILE_KIND_CPU], 1);
	cr_assert_not_null(stacktab_get(stacks, ids[0]));
	profile_release(&out, stacks);
}

Test(history, kinds_and_threads_are_kept_apart)
{
	uint64_t k_mem = profile_key(ids[0], 1, PROFILE_KIND_MEMORY);
	uint64_t k_t2 = profile_key(ids[0], 2, PROFILE_KIND_CPU);

	add(10 * SEC, 0, 3);
	cr_assert_eq(history_add(&h, stacks, 10 * SEC, 0, k_mem, 4096), 0);
	cr_assert_eq(history_add(&h, stacks, 10 * SEC, 0, k_t2, 7), 0);
	cr_assert_eq(h.newest->prof.values.count, 3);
	cr_assert_eq(h.newest->prof.totals[PROFILE_KIND_CPU], 10);
	cr_assert_eq(h.newest->prof.totals[PROFILE_KIND_MEMORY], 4096);
	cr_assert_eq(h.newest->prof.totals[PROFILE_KIND_OFFCPU], 0);
	cr_assert_eq(profile_key_tid(k_t2), 2);
	cr_assert_eq(profile_key_kind(k_mem), PROFILE_KIND_MEMORY);
	cr_assert_eq(profile_key_stack(k_mem), ids[0]);
	check_invariants();
}

Test(history, bytes_follow_the_windows)
{
	size_t one;

	add(10 * SEC, 0, 1);
	one = h.bytes;
	cr_assert_gt(one, sizeof(struct window));
	for (int i = 1; i < N_STACKS; i++)
		add(10 * SEC, i, 1);
	for (uint64_t s = 11; s < 200; s++)
		add(s * SEC, (int)(s % N_STACKS), 1);
	check_invariants();
	history_maintain(&h, stacks, 400, 100000, NULL);
	check_invariants();
	while (history_drop_oldest(&h, stacks, NULL))
		check_invariants();
	cr_assert_eq(h.bytes, 0);
}

/* Random samples over two hours (random keys, threads and kinds; some
 * seconds idle, some samples a few seconds late), maintained every second
 * or after pauses: a query of everything always gives exactly what was
 * added, key by key, and the invariants hold throughout.  The references
 * come back at teardown. */
Test(history, random_streams_keep_every_value)
{
	enum { KEYS = 64 };
	uint64_t keys[KEYS], want[KEYS] = { 0 }, rng = 88172645463325252ull;
	uint64_t s = 10000;

	for (int i = 0; i < KEYS; i++)
		keys[i] = profile_key(ids[i % N_STACKS], 1 + i / 4 % 8,
				      (enum profile_kind)(i / 32 % PROFILE_KINDS));
	for (int step = 0; step < 7200; step++, s++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		if (rng % 5) { /* 4 seconds in 5 see samples */
			for (uint64_t k = 0; k < 1 + rng % 7; k++) {
				int i = (int)((rng >> (8 + k * 6)) % KEYS);
				uint64_t late = (rng >> 40) % 16 == 0 ? (rng >> 44) % 8 : 0;

				cr_assert_eq(history_add(&h, stacks, (s - MIN(late, s)) * SEC, 0, keys[i],
							 1 + k), 0);
				want[i] += 1 + k;
			}
		}
		if ((rng >> 50) % 13) /* and maintenance skips a second now and then */
			history_maintain(&h, stacks, s + 1, 100000, NULL);
		if (step % 600 == 0)
			check_invariants();
	}
	check_invariants();
	{
		struct profile_values out;
		uint64_t first = UINT64_MAX, end = 0;

		profile_init(&out);
		cr_assert_eq(history_query(&h, stacks, UINT64_MAX, 0, UINT64_MAX, NULL, &out, &first, &end), 0);
		for (int i = 0; i < KEYS; i++) {
			uint64_t *v = u64map_get(&out.values, keys[i]);

			cr_assert_eq(v ? *v : 0, want[i], "key %d: %lu, added %lu", i,
				     (unsigned long)(v ? *v : 0), (unsigned long)want[i]);
		}
		profile_release(&out, stacks);
	}
	cr_assert_lt(h.n_windows, 400, "%zu windows", h.n_windows);
}

/* The same with a retention of 15 minutes and evictions now and then:
 * what a query finds plus what was dropped is what was added, kind by
 * kind, and the log never holds much more than its live bytes. */
Test(history, random_streams_with_retention_and_evictions_account_for_every_value)
{
	uint64_t added[PROFILE_KINDS] = { 0 }, rng = 0x9e3779b97f4a7c15ull, s = 50000;
	struct history_dropped d = { 0 };

	for (int step = 0; step < 5000; step++, s++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		for (uint64_t k = 0; k < rng % 5; k++) {
			enum profile_kind kind = (enum profile_kind)((rng >> (10 + k)) % PROFILE_KINDS);
			uint64_t v = 1 + ((rng >> (20 + k * 3)) % 1000);

			cr_assert_eq(history_add(&h, stacks, s * SEC, 0,
						 profile_key(ids[(rng >> (30 + k)) % N_STACKS],
							     1 + (uint32_t)(k % 3), kind),
						 v),
				     0);
			added[kind] += v;
		}
		history_maintain(&h, stacks, s + 1, 900, &d);
		if ((rng >> 45) % 97 == 0)
			(void)history_drop_oldest(&h, stacks, &d);
		if (step % 500 == 0)
			check_invariants();
	}
	check_invariants();
	cr_assert_gt(d.windows, 0);
	{
		struct profile_values out;
		uint64_t first = UINT64_MAX, end = 0;

		profile_init(&out);
		cr_assert_eq(history_query(&h, stacks, UINT64_MAX, 0, UINT64_MAX, NULL, &out, &first, &end), 0);
		for (int k = 0; k < PROFILE_KINDS; k++)
			cr_assert_eq(out.totals[k] + d.values[k], added[k], "kind %d: %lu kept + %lu dropped, %lu added",
				     k, (unsigned long)out.totals[k], (unsigned long)d.values[k],
				     (unsigned long)added[k]);
		profile_release(&out, stacks);
	}
}

/* A new sampling period: every CPU value, sealed or open, x num / den;
 * memory values untouched; whole results exact (no rounding when the
 * ratio divides); entries that round to 0 go with their stack reference
 * (the teardown counts them); the log stays tight and the invariants
 * hold. */
Test(history, scale_multiplies_cpu_values_sealed_and_open)
{
	uint64_t k_mem = profile_key(ids[1], 1, PROFILE_KIND_MEMORY), rng = 1;

	for (uint64_t s = 100; s < 400; s++)
		add(s * SEC, (int)(s % N_STACKS), 3);
	cr_assert_eq(history_add(&h, stacks, 399 * SEC, 0, k_mem, 4096), 0);
	/* the last window (ends at 400) still open, the others sealed */
	history_maintain(&h, stacks, 400 + HISTORY_SEAL_AFTER_S - 1, 100000, NULL);
	cr_assert_gt(h.log.n, 0);
	cr_assert_not_null(h.newest);
	cr_assert_eq(history_scale_periods(&h, stacks, 1000, 3, &rng), 0);
	check_invariants();
	cr_assert_eq(total(), 300 * 1000, "sealed and open: %lu", (unsigned long)total());
	cr_assert_eq(value_in(window_at(399), 3), 1000);
	cr_assert_eq(history_window_value(window_at(399), k_mem), 4096, "memory was scaled");
	cr_assert_eq(history_window_total(window_at(399), PROFILE_KIND_MEMORY), 4096);
	/* a window's samples: its CPU values, open or sealed, not its bytes */
	for (uint64_t at = 200; at < 400; at += 199) {
		uint64_t cpu = history_window_total(window_at(at), PROFILE_KIND_CPU);

		cr_assert_gt(cpu, 0);
		cr_assert_eq(history_window_samples(window_at(at)), cpu, "at %lu", (unsigned long)at);
	}

	/* x 1/2000: the open windows' entries of 1000 (and the rolled-up
	 * windows' of 2000 or 3000: 1 or 1.5) round at random; the 0s leave */
	cr_assert_eq(history_scale_periods(&h, stacks, 1, 2000, &rng), 0);
	check_invariants();
	collect();
	for (size_t i = 0; i < n_wins; i++)
		for (int k = 0; k < N_STACKS; k++)
			cr_assert_leq(history_window_value(&wins[i], key(k)), 2);
	/* 150 in the mean, sd under 8.7 */
	cr_assert(total() > 110 && total() < 190, "%lu kept, 150 expected", (unsigned long)total());
}

/* Random rounding is unbiased: 10,000 entries of 1 at x 0.3 keep ~3,000
 * (sd 46), where rounding to the nearest would keep none. */
Test(history, scale_rounds_at_random_without_bias)
{
	struct profile_values p;
	uint64_t rng = 42, sum = 0;

	profile_init(&p);
	for (uint32_t t = 0; t < 10000; t++)
		cr_assert_eq(profile_add(&p, stacks, profile_key(ids[t % N_STACKS], t, PROFILE_KIND_CPU), 1), 0);
	profile_scale_periods(&p, stacks, 3, 10, &rng);
	U64MAP_FOREACH(slot, &p.values) {
		cr_assert_eq(slot->value, 1);
		sum += slot->value;
	}
	cr_assert_eq(sum, p.totals[PROFILE_KIND_CPU]);
	cr_assert_eq(p.values.count, sum, "zeros left in the map");
	cr_assert(sum > 3000 - 4 * 46 && sum < 3000 + 4 * 46, "%lu kept", (unsigned long)sum);
	profile_release(&p, stacks);
}

/* Whether maintenance at now_s would leave h as it is: no window to seal,
 * to roll up or to drop past the retention. */
static bool nothing_due(const struct history *hist, uint64_t now_s, uint64_t retention_s)
{
	struct history_iter it;
	struct history_window w;

	history_iter_init(&it, hist);
	while (history_iter_next(&it, &w)) {
		uint64_t end = w.start_s + w.span_s;

		if (end + retention_s <= now_s)
			return false;
		if (!w.sealed && end + HISTORY_SEAL_AFTER_S <= now_s)
			return false;
		if (w.sealed && w.span_s == 1 && w.start_s - w.start_s % 10 + 10 + HISTORY_FINE_AGE_S <= now_s)
			return false;
		if (w.sealed && w.span_s == 10 && w.start_s - w.start_s % 60 + 60 + HISTORY_MEDIUM_AGE_S <= now_s)
			return false;
	}
	return true;
}

/* The due time lets a caller skip a history (the store skips all but a
 * few each second): one maintained only from history_due_s on holds, at
 * every second, the very windows of one maintained every second; nothing
 * is ever due before history_due_s; and right after a pass the due time
 * is in the future (else the store would visit it every second).  Random
 * samples with idle stretches, late ones, evictions, and retentions that
 * fall before and after the roll-up ages. */
Test(history, due_time_is_never_late_and_skipping_until_it_changes_nothing)
{
	static const uint64_t retentions[] = { 3, 45, 900, 100000 };

	for (size_t t = 0; t < ELEMENTSOF(retentions); t++) {
		uint64_t retention = retentions[t], rng = 0x2545f4914f6cdd1dull + t, s = 20000;
		uint64_t due = 0, passes = 0, every = 0;
		struct history skip;

		history_init(&skip);
		for (int step = 0; step < 4000; step++, s++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			/* bursts of activity and long idle stretches */
			if ((s / 300) % 3 != 2 && rng % 4) {
				size_t windows = skip.n_windows;

				for (uint64_t k = 0; k < 1 + rng % 3; k++) {
					uint64_t late = (rng >> 40) % 16 == 0 ? (rng >> 44) % 8 : 0;
					uint64_t kk = profile_key(ids[(rng >> (8 + k)) % N_STACKS], 1,
								  PROFILE_KIND_CPU);

					cr_assert_eq(history_add(&h, stacks, (s - late) * SEC, 0, kk, 1 + k), 0);
					cr_assert_eq(history_add(&skip, stacks, (s - late) * SEC, 0, kk, 1 + k), 0);
				}
				if (skip.n_windows != windows)
					due = 0; /* a new window: as the store does */
			}
			if ((rng >> 50) % 211 == 0) {
				(void)history_drop_oldest(&h, stacks, NULL);
				(void)history_drop_oldest(&skip, stacks, NULL);
			}
			history_maintain(&h, stacks, s, retention, NULL);
			every++;
			cr_assert(nothing_due(&h, s, retention), "retention %lu: due left at %lu",
				  (unsigned long)retention, (unsigned long)s);
			cr_assert_gt(history_due_s(&h, retention), s, "due in the past at %lu",
				     (unsigned long)s);
			if (s >= due) {
				history_maintain(&skip, stacks, s, retention, NULL);
				due = history_due_s(&skip, retention);
				cr_assert_gt(due, s);
				passes++;
			} else {
				cr_assert(nothing_due(&skip, s, retention),
					  "retention %lu: skipped at %lu with something due (due %lu)",
					  (unsigned long)retention, (unsigned long)s, (unsigned long)due);
			}
			{
				struct history_iter ia, ib;
				struct history_window wa, wb;
				bool more;

				history_iter_init(&ia, &h);
				history_iter_init(&ib, &skip);
				while ((more = history_iter_next(&ia, &wa))) {
					cr_assert(history_iter_next(&ib, &wb), "a window missing at %lu",
						  (unsigned long)s);
					cr_assert(wa.start_s == wb.start_s && wa.span_s == wb.span_s &&
							  wa.sealed == wb.sealed &&
							  history_window_total(&wa, PROFILE_KIND_CPU) ==
								  history_window_total(&wb, PROFILE_KIND_CPU),
						  "at %lu: [%lu,+%u) vs [%lu,+%u)", (unsigned long)s,
						  (unsigned long)wa.start_s, wa.span_s,
						  (unsigned long)wb.start_s, wb.span_s);
				}
				cr_assert_not(history_iter_next(&ib, &wb), "an extra window at %lu",
					      (unsigned long)s);
			}
		}
		/* skipping is the point: far fewer passes than seconds once idle */
		cr_assert_lt(passes, every * 3 / 4, "retention %lu: %lu passes in %lu s",
			     (unsigned long)retention, (unsigned long)passes, (unsigned long)every);
		history_release(&skip, stacks);
		history_release(&h, stacks);
		history_init(&h);
	}
}
