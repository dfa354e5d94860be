/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/collect/ingest_wait.c: a wait runs once the records
 * queued when it started are delivered, not before, never from inside a
 * slice, in the order the waits came; at rest it does not wait; a cancelled
 * wait never runs.  A real drain queue (no thread: records are enqueued by
 * hand) and a real sd-event loop, whose turns the test takes itself. */
#include <criterion/criterion.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "collect/drain.h"
#include "collect/ingest_wait.h"
#include "perfd/macro.h"
#include "perfd/sample.h"

#define SLICE 100

struct harness {
	sd_event *event;
	struct drain *drain;
	struct ingest_waits q;
	bool in_slice;
	size_t slices;
};

struct waiter {
	struct ingest_wait w;
	struct harness *h;
	uint64_t delivered_at_ready; /* 0: not run */
	int order;
};

static int order_seen;

static int ingest(void *ctx, void *data, size_t size)
{
	return 0;
}

/* One slice, as the daemon's loop ingests them. */
static void deliver(void *ctx)
{
	struct harness *h = ctx;
	struct drain_budget b = { .max_records = SLICE };

	h->in_slice = true;
	if (drain_deliver(h->drain, &b, ingest, h))
		ingest_waits_delivered(&h->q);
	h->in_slice = false;
	h->slices++;
}

static void ready(struct ingest_wait *w)
{
	struct waiter *x = container_of(w, struct waiter, w);

	cr_assert_not(x->h->in_slice, "a wait runs on a turn of its own, not inside a slice");
	cr_assert_eq(x->delivered_at_ready, 0, "a wait runs once");
	x->delivered_at_ready = drain_delivered(x->h->drain);
	x->order = ++order_seen;
}

static void enqueue(struct harness *h, size_t n)
{
	unsigned char rec[64] = { 0 };

	((struct perfd_event_header *)rec)->kind = PERFD_EVENT_SAMPLE;
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(drain_enqueue(h->drain, rec, sizeof(rec)), 0);
}

static void setup(struct harness *h)
{
	struct drain_opts o = { .max_queued_bytes = 64u << 20, .interval_ms = 100 };

	memset(h, 0, sizeof(*h));
	cr_assert_eq(sd_event_new(&h->event), 0);
	cr_assert_eq(drain_new(&o, &h->drain), 0);
	ingest_waits_init(&h->q, h->event, h->drain, deliver, h);
}

static void teardown(struct harness *h)
{
	ingest_waits_free(&h->q);
	drain_free(h->drain);
	sd_event_unref(h->event);
}

/* A turn of the loop: the queue's slice, then what became ready. */
static void turn(struct harness *h)
{
	deliver(h);
	while (sd_event_run(h->event, 0) > 0)
		;
}

Test(ingest_wait, at_rest_a_wait_does_not_wait)
{
	struct harness h;
	struct waiter a;

	setup(&h);
	a = (struct waiter){ .h = &h };
	cr_assert_eq(ingest_wait_start(&h.q, &a.w, ready), 0, "nothing queued: the caller goes on");
	enqueue(&h, SLICE / 2);
	cr_assert_eq(ingest_wait_start(&h.q, &a.w, ready), 0, "what one slice holds is delivered at once");
	cr_assert_eq(drain_delivered(h.drain), SLICE / 2);
	cr_assert_eq(a.delivered_at_ready, 0, "ready() is for a wait that waited");
	cr_assert_eq(sd_event_run(h.event, 0), 0, "and nothing is left to run");
	teardown(&h);
}

Test(ingest_wait, waits_run_once_their_records_are_in_in_the_order_they_came)
{
	struct harness h;
	struct waiter a, b, c;

	order_seen = 0;
	setup(&h);
	a = b = c = (struct waiter){ .h = &h };
	enqueue(&h, 10 * SLICE);
	cr_assert_eq(ingest_wait_start(&h.q, &a.w, ready), 1);
	cr_assert_eq(drain_delivered(h.drain), SLICE, "one slice at the start, not the backlog");
	enqueue(&h, 5 * SLICE);
	cr_assert_eq(ingest_wait_start(&h.q, &b.w, ready), 1);
	cr_assert_eq(ingest_wait_start(&h.q, &c.w, ready), 1);
	ingest_wait_cancel(&h.q, &c.w);
	ingest_wait_cancel(&h.q, &c.w); /* twice is fine */
	for (int i = 0; i < 100 && !b.delivered_at_ready; i++) {
		turn(&h);
		if (!a.delivered_at_ready)
			cr_assert_lt(drain_delivered(h.drain), 10 * SLICE, "a waits no longer than its records");
	}
	cr_assert_eq(a.delivered_at_ready, 10 * SLICE, "a ran once the records queued before it were in");
	cr_assert_eq(b.delivered_at_ready, 15 * SLICE, "b ran once the ones before it were in");
	cr_assert_eq(a.order, 1);
	cr_assert_eq(b.order, 2);
	cr_assert_eq(c.delivered_at_ready, 0, "a cancelled wait never runs");
	cr_assert_not(a.w.waiting || b.w.waiting || c.w.waiting);
	cr_assert_eq(h.slices, 3 + 12, "one slice at each start, then one a turn");
	teardown(&h);
}
