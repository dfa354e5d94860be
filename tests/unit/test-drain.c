/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/collect/drain.c's queue: records come out whole and
 * in order across chunk boundaries, a full queue drops and counts (samples
 * apart), a queue delivered empty is empty, and a slice stops at its
 * budget with the rest still queued, in order, and the loop told again.  The thread itself runs in
 * every integration test (it is how the daemon drains). */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "collect/drain.h"
#include "perfd/sample.h"

struct seen {
	uint64_t next;  /* the sequence number expected */
	size_t records;
	size_t bytes;
};

static int check(void *ctx, void *data, size_t size)
{
	struct seen *s = ctx;
	const uint64_t *words = data;

	cr_assert_geq(size, 16);
	cr_assert_eq(words[1], s->next, "record %llu came as %llu", (unsigned long long)s->next,
		     (unsigned long long)words[1]);
	for (size_t i = 16; i < size; i++)
		cr_assert_eq(((const unsigned char *)data)[i], (unsigned char)(s->next + i));
	s->next++;
	s->records++;
	s->bytes += size;
	return 0;
}

/* A record of size bytes: an event header of kind, then seq, then a pattern. */
static void make(unsigned char *buf, size_t size, uint32_t kind, uint64_t seq)
{
	memset(buf, 0, size);
	((struct perfd_event_header *)buf)->kind = kind;
	((uint64_t *)buf)[1] = seq;
	for (size_t i = 16; i < size; i++)
		buf[i] = (unsigned char)(seq + i);
}

Test(drain, records_come_out_whole_and_in_order)
{
	struct drain_opts o = { .max_queued_bytes = 64u << 20, .interval_ms = 100 };
	struct drain *d;
	struct drain_stats st;
	struct seen s = { 0 };
	static unsigned char buf[5000];
	uint64_t seq = 0;

	cr_assert_eq(drain_new(&o, &d), 0);
	/* sizes that do not divide a chunk: records straddle no boundary */
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 2000; i++) {
			size_t size = 16 + (size_t)(seq * 37 % 4000);

			make(buf, size, PERFD_EVENT_SAMPLE, seq++);
			cr_assert_eq(drain_enqueue(d, buf, size), 0);
		}
		cr_assert_eq(drain_deliver(d, NULL, check, &s), 2000);
	}
	cr_assert_eq(s.records, 6000);
	cr_assert_eq(drain_deliver(d, NULL, check, &s), 0, "a delivered queue is empty");
	drain_get_stats(d, &st);
	cr_assert_eq(st.records, 6000);
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(st.queued_bytes, 0);
	cr_assert_gt(st.max_queued_bytes, 1u << 20, "2000 records of ~2 KB span several chunks");
	drain_free(d);
}

Test(drain, a_full_queue_drops_and_counts)
{
	struct drain_opts o = { .max_queued_bytes = 10000, .interval_ms = 100 };
	struct drain *d;
	struct drain_stats st;
	struct seen s = { 0 };
	unsigned char buf[1000];

	cr_assert_eq(drain_new(&o, &d), 0);
	for (uint64_t i = 0; i < 20; i++) {
		make(buf, sizeof(buf), i % 2 ? PERFD_EVENT_EXIT : PERFD_EVENT_SAMPLE, s.records + i);
		cr_assert_eq(drain_enqueue(d, buf, sizeof(buf)), 0);
	}
	drain_get_stats(d, &st);
	/* 1008 bytes a record with its head: 9 fit in 10000 */
	cr_assert_eq(st.dropped, 11);
	cr_assert_eq(st.dropped_samples, 5, "only the samples among the dropped count as samples");
	cr_assert_leq(st.queued_bytes, 10000);
	cr_assert_eq(drain_deliver(d, NULL, check, &s), 9);
	/* room again once delivered */
	make(buf, sizeof(buf), PERFD_EVENT_SAMPLE, s.next);
	cr_assert_eq(drain_enqueue(d, buf, sizeof(buf)), 0);
	cr_assert_eq(drain_deliver(d, NULL, check, &s), 1);
	drain_free(d);
}

Test(drain, freeing_with_records_queued_frees_them)
{
	struct drain_opts o = { .max_queued_bytes = 8u << 20, .interval_ms = 100 };
	struct drain *d;
	unsigned char buf[3000];

	cr_assert_eq(drain_new(&o, &d), 0);
	for (int i = 0; i < 1000; i++) {
		make(buf, sizeof(buf), PERFD_EVENT_SAMPLE, (uint64_t)i);
		cr_assert_eq(drain_enqueue(d, buf, sizeof(buf)), 0);
	}
	cr_assert_null(drain_free(d));
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

Test(drain, a_slice_stops_at_its_budget_and_leaves_the_rest_queued)
{
	struct drain_opts o = { .max_queued_bytes = 64u << 20, .interval_ms = 100 };
	struct drain_budget records = { .max_records = 700 };
	struct drain_budget instant = { .max_ns = 1 }; /* spent after the first record */
	struct drain *d;
	struct drain_stats st;
	struct seen s = { 0 };
	static unsigned char buf[3000];

	cr_assert_eq(drain_new(&o, &d), 0);
	/* 2000 records of ~2.5 KB: several chunks */
	for (uint64_t i = 0; i < 2000; i++) {
		make(buf, 2500, i % 4 ? PERFD_EVENT_SAMPLE : PERFD_EVENT_EXIT, i);
		cr_assert_eq(drain_enqueue(d, buf, 2500), 0);
	}
	cr_assert_eq(drain_queued_mark(d), 2000);
	cr_assert_eq(drain_deliver(d, &records, check, &s), 700);
	drain_get_stats(d, &st);
	cr_assert_eq(st.queued_records, 1300, "the records past the budget stay queued");
	cr_assert_eq(st.queued_samples, 1300 - 325, "and the samples among them are counted as queued");
	cr_assert_eq(drain_delivered(d), 700);
	cr_assert(readable(drain_fd(d)), "a slice that leaves records tells the loop to come back");
	cr_assert_eq(drain_deliver(d, &instant, check, &s), 1, "a slice makes progress whatever its budget");
	cr_assert_eq(drain_deliver(d, &records, check, &s), 700);
	cr_assert_eq(drain_deliver(d, &records, check, &s), 599, "then what is left");
	cr_assert_eq(s.next, 2000, "every record once, in order");
	drain_get_stats(d, &st);
	cr_assert_eq(st.queued_records, 0);
	cr_assert_eq(st.queued_samples, 0);
	cr_assert_eq(st.queued_bytes, 0);
	cr_assert_eq(st.slices, 4);
	cr_assert_eq(st.slices_cut, 3);
	cr_assert_eq(st.max_slice_records, 700, "the largest slice");
	cr_assert_not(readable(drain_fd(d)), "an emptied queue leaves the loop alone");
	cr_assert_eq(drain_deliver(d, &records, check, &s), 0);
	drain_free(d);
}
