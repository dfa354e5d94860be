/* SPDX-License-Identifier: MIT */
/*
 * test-heap.c - daemon/base/heap.c: malloc's figures are taken, and freed
 * memory given back, on the heap's lane and never on the thread that reads
 * the figures (the event loop, in perfd); a reader gets whole readings
 * while the lane publishes; heap_stop cuts the lane's sleep short.
 *
 * mallinfo2 and malloc_trim are defined here, over glibc's: a definition
 * in the executable wins over the C library's, so every call heap.c makes
 * is counted by the thread that made it, then passed on.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/heap.h"

/* The test's own thread, which stands for the loop. */
static pid_t reader_tid;
static atomic_uint mallinfo_here, mallinfo_elsewhere, trims_here, trims_elsewhere;

static void count(atomic_uint *here, atomic_uint *elsewhere)
{
	atomic_fetch_add(gettid() == reader_tid ? here : elsewhere, 1);
}

struct mallinfo2 mallinfo2(void)
{
	struct mallinfo2 (*real)(void) = (struct mallinfo2 (*)(void))dlsym(RTLD_NEXT, "mallinfo2");

	count(&mallinfo_here, &mallinfo_elsewhere);
	return real();
}

int malloc_trim(size_t pad)
{
	int (*real)(size_t) = (int (*)(size_t))dlsym(RTLD_NEXT, "malloc_trim");

	count(&trims_here, &trims_elsewhere);
	return real(pad);
}

/* Waits up to 10 s until the lane published at least n readings. */
static struct heap_stats wait_readings(uint64_t n)
{
	uint64_t until = now_monotonic_ns() + 10 * NSEC_PER_SEC;
	struct heap_stats st;

	for (;;) {
		heap_get_stats(&st);
		if (st.readings >= n || now_monotonic_ns() > until)
			return st;
		usleep(5000);
	}
}

static void start(unsigned period_ms, uint64_t trim_min_free_bytes)
{
	reader_tid = gettid();
	cr_assert_eq(heap_start(period_ms, trim_min_free_bytes), 0);
}

Test(heap, reading_the_figures_walks_no_arena_and_the_lane_takes_them)
{
	struct heap_stats st;

	start(20, UINT64_MAX);
	/* heap_start's first reading is the caller's, before any lane runs */
	cr_assert_eq(atomic_load(&mallinfo_here), 1);
	st = wait_readings(5);
	cr_assert_geq(st.readings, 5, "the lane published %lu readings in 10 s", st.readings);
	for (int i = 0; i < 100000; i++)
		heap_get_stats(&st);
	cr_expect_eq(atomic_load(&mallinfo_here), 1,
		     "heap_get_stats walked the arenas on the reader's thread: %u mallinfo2 calls",
		     atomic_load(&mallinfo_here));
	cr_expect_geq(atomic_load(&mallinfo_elsewhere), 4);
	cr_expect_eq(atomic_load(&trims_here) + atomic_load(&trims_elsewhere), 0,
		     "a trim ran with less free than asked");
	cr_expect_leq(st.mmapped_bytes, st.in_use_bytes);
	cr_expect_leq(st.as_of_ns, now_monotonic_ns());
	heap_stop();
}

Test(heap, freed_memory_is_given_back_on_the_lane_and_counted)
{
	enum { BLOCKS = 4096, BLOCK = 2048 }; /* 8 MiB below the mmap threshold */
	static void *blocks[BLOCKS];
	struct heap_stats st0, st;

	start(20, 0); /* every pass trims */
	for (int i = 0; i < BLOCKS; i++)
		cr_assert_not_null(blocks[i] = malloc(BLOCK));
	for (int i = 0; i < BLOCKS; i++)
		free(blocks[i]);
	heap_get_stats(&st0);
	st = wait_readings(st0.readings + 3);
	cr_assert_geq(st.trims, 2, "%lu trims in %lu readings", st.trims, st.readings);
	cr_expect_eq(atomic_load(&trims_here), 0, "malloc_trim ran on the reader's thread");
	cr_expect_geq(atomic_load(&trims_elsewhere), st.trims);
	cr_expect_leq(st.trimmed, st.trims);
	heap_stop();
}

/* Readers copy while the lane publishes a thousand times a second: each
 * copy is one reading, never half of two (a reading's number and its time
 * go together, and both only grow). */
static void *read_whole(void *arg)
{
	uint64_t until = now_monotonic_ns() + NSEC_PER_SEC / 2, *bad = arg;
	struct heap_stats prev, st;

	heap_get_stats(&prev);
	while (now_monotonic_ns() < until) {
		heap_get_stats(&st);
		if (st.readings < prev.readings || (st.readings == prev.readings) != (st.as_of_ns == prev.as_of_ns) ||
		    (st.readings > prev.readings && st.as_of_ns <= prev.as_of_ns) ||
		    (st.readings == prev.readings && st.in_use_bytes != prev.in_use_bytes))
			(*bad)++;
		prev = st;
	}
	return NULL;
}

Test(heap, a_copy_is_one_whole_reading_while_the_lane_publishes)
{
	pthread_t t[2];
	uint64_t bad[2] = { 0 };
	struct heap_stats st0, st;

	start(1, UINT64_MAX);
	heap_get_stats(&st0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, read_whole, &bad[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	heap_get_stats(&st);
	heap_stop();
	cr_assert_gt(st.readings, st0.readings + 50, "the lane published %lu times in 0.5 s",
		     st.readings - st0.readings);
	cr_expect_eq(bad[0] + bad[1], 0, "%lu copies mixed two readings", bad[0] + bad[1]);
}

Test(heap, stopping_cuts_the_lanes_sleep_short)
{
	uint64_t t0;

	start(3600 * 1000, UINT64_MAX);
	t0 = now_monotonic_ns();
	heap_stop();
	cr_expect_lt(now_monotonic_ns() - t0, NSEC_PER_SEC, "heap_stop waited out the lane's period");
}
