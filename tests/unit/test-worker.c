/* SPDX-License-Identifier: MIT */
/*
 * test-worker.c - daemon/export/worker.c: the exporters' thread and queue,
 * driven through a sink of the test's own whose send() waits at a gate
 * until the test lets it through, then returns what the test set.  Each
 * item ends counted once (sent, failed or dropped), also one the full
 * queue drops while it is being sent; a send() that says -EAGAIN lets
 * the sink tidy up (the files sink's pruning) before it is retried.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "export/worker.h"
#include "perfd/macro.h"

/* The test sink: send() counts its calls, waits until `open` calls have
 * been let through, and returns the result set for its call. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned calls, open;
	int result[8];
	bool fills;       /* the next send() fills the "disk"... */
	bool full;        /* ... and says -EAGAIN until tidy() ran */
};

static struct gate gate = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static int gate_send(void *target, const struct export_item *it, const atomic_bool *stop, char *err,
		     size_t len)
{
	struct gate *g = target;
	unsigned call;
	int r;

	(void)it;
	(void)err;
	(void)len;
	pthread_mutex_lock(&g->lock);
	call = g->calls++;
	pthread_cond_broadcast(&g->cond);
	while (g->open <= call && !atomic_load(stop))
		pthread_cond_wait(&g->cond, &g->lock);
	if (g->fills) {
		g->fills = false;
		g->full = true;
	}
	r = g->full ? -EAGAIN : call < ELEMENTSOF(g->result) ? g->result[call] : 0;
	pthread_mutex_unlock(&g->lock);
	return r;
}

static void gate_tidy(void *target)
{
	struct gate *g = target;

	pthread_mutex_lock(&g->lock);
	g->full = false;
	pthread_mutex_unlock(&g->lock);
}

static void gate_free(void *target)
{
	(void)target;
}

static const struct export_sink_ops gate_ops = {
	.name = "gate",
	.send = gate_send,
	.tidy = gate_tidy,
	.free_target = gate_free,
};

static void gate_reset(void)
{
	pthread_mutex_lock(&gate.lock);
	gate.calls = gate.open = 0;
	memset(gate.result, 0, sizeof(gate.result));
	gate.fills = gate.full = false;
	pthread_mutex_unlock(&gate.lock);
}

/* Lets n more send() calls through. */
static void gate_open(unsigned n)
{
	pthread_mutex_lock(&gate.lock);
	gate.open += n;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
}

/* Waits until send() was called n times (fails the test after 10 s). */
static void gate_wait_calls(unsigned n)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&gate.lock);
	while (gate.calls < n)
		if (pthread_cond_timedwait(&gate.cond, &gate.lock, &until) == ETIMEDOUT)
			break;
	cr_assert_geq(gate.calls, n, "send() called %u times, expected %u", gate.calls, n);
	pthread_mutex_unlock(&gate.lock);
}

static struct export_item *item(size_t len)
{
	struct export_item *it = calloc(1, sizeof(*it));

	cr_assert(it);
	atomic_init(&it->refs, 1);
	it->len = len;
	return it;
}

static void push_new(struct export_worker *w, size_t len)
{
	struct export_item *it = item(len);

	export_worker_push(w, it);
	export_item_unref(it);
}

/* The worker's stats once sent + failed + dropped reach n (fails the
 * test after 10 s). */
static struct export_worker_stats settled(struct export_worker *w, uint64_t n)
{
	struct export_worker_stats st;

	for (int i = 0; i < 1000; i++) {
		export_worker_get_stats(w, &st);
		if (st.sent + st.failed + st.dropped >= n && st.queued == 0)
			return st;
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000000 }, NULL);
	}
	cr_assert_fail("not settled: sent %" PRIu64 ", failed %" PRIu64 ", dropped %" PRIu64
		       ", queued %" PRIu64, st.sent, st.failed, st.dropped, st.queued);
	return st;
}

TestSuite(worker, .init = gate_reset);

/* A is being sent when B pushes it out of the full queue; A's send then
 * succeeds: A is sent, not also dropped. */
Test(worker, an_item_dropped_while_sent_and_sent_counts_once)
{
	struct export_worker *w = NULL;
	struct export_worker_stats st;

	cr_assert_eq(export_worker_new(&gate_ops, &gate, "gate", 150, &w), 0);
	push_new(w, 100);
	gate_wait_calls(1);
	push_new(w, 100); /* 200 > 150: A leaves the queue while in send() */
	gate_open(2);
	st = settled(w, 2);
	cr_assert_eq(st.sent, 2);
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(st.failed, 0);
	export_worker_free(w);
}

/* The same, A's send failing for good: failed once; and C, pushed out
 * while its send says -EAGAIN: dropped once, not retried. */
Test(worker, an_item_dropped_while_sent_and_failed_counts_once)
{
	struct export_worker *w = NULL;
	struct export_worker_stats st;

	gate.result[0] = -EBADMSG;
	gate.result[2] = -EAGAIN;
	cr_assert_eq(export_worker_new(&gate_ops, &gate, "gate", 150, &w), 0);
	push_new(w, 100);
	gate_wait_calls(1);
	push_new(w, 100);
	gate_open(2); /* A fails, B is sent */
	st = settled(w, 2);
	cr_assert_eq(st.failed, 1);
	cr_assert_eq(st.sent, 1);
	push_new(w, 100);
	gate_wait_calls(3);
	push_new(w, 100);
	gate_open(2); /* C says -EAGAIN, D is sent after the backoff */
	st = settled(w, 4);
	cr_assert_eq(st.dropped, 1);
	cr_assert_eq(st.sent, 2);
	cr_assert_eq(st.failed, 1);
	cr_assert_eq(st.retries, 1);
	cr_assert_eq(gate.calls, 4, "C was retried after it was dropped");
	export_worker_free(w);
}

/* The sink's send() fails until its tidy() ran (a disk full of the files
 * sink's own old profiles, which pruning removes): the retry path tidies,
 * though the queue never runs empty while its head waits. */
Test(worker, a_retry_lets_the_sink_tidy_up)
{
	struct export_worker *w = NULL;
	struct export_worker_stats st;

	gate.fills = true;
	gate_open(100);
	cr_assert_eq(export_worker_new(&gate_ops, &gate, "gate", 1000, &w), 0);
	push_new(w, 100);
	st = settled(w, 1);
	cr_assert_eq(st.sent, 1);
	cr_assert_eq(st.retries, 1);
	export_worker_free(w);
}
