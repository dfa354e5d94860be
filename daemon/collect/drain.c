/* SPDX-License-Identifier: MIT */
/* drain.c - see drain.h for the design and the ownership rules. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/clock.h"
#include "collect/drain.h"
#include "collect/sampler.h"
#include "perfd/macro.h"
#include "perfd/sample.h"

#define CHUNK_BYTES (1u << 20)

struct chunk {
	struct chunk *next;
	size_t used;
	char data[CHUNK_BYTES];
};

/* Each record in a chunk: its size, then its bytes, padded to 8. */
struct rec_head {
	uint32_t size;
	uint32_t pad;
};

struct drain {
	struct drain_opts opts;
	struct sampler *sampler;
	pthread_t thread;
	bool started;
	int event_fd; /* to the loop: records are queued */
	int stop_fd;  /* to the thread: stop */

	pthread_mutex_t ring_lock;

	pthread_mutex_t queue_lock;
	struct chunk *head, *tail;
	size_t head_at; /* the loop's next record in head */
	struct chunk *spare; /* one kept for reuse: no malloc per batch */
	size_t queued_bytes;
	uint64_t accepted, delivered; /* records into the queue, out of it */
	bool signalled; /* event_fd written since the last deliver */
	struct drain_stats stats;
};

int drain_new(const struct drain_opts *opts, struct drain **ret)
{
	struct drain *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->opts = *opts;
	d->stop_fd = -1;
	d->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->event_fd >= 0)
		d->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->stop_fd < 0) {
		int r = negative_errno();

		closep(&d->event_fd);
		free(d);
		return r;
	}
	pthread_mutex_init(&d->ring_lock, NULL);
	pthread_mutex_init(&d->queue_lock, NULL);
	*ret = d;
	return 0;
}

static bool is_sample(const void *data, size_t size)
{
	return size >= sizeof(struct perfd_event_header) &&
	       ((const struct perfd_event_header *)data)->kind == PERFD_EVENT_SAMPLE;
}

int drain_enqueue(void *ctx, void *data, size_t size)
{
	struct drain *d = ctx;
	size_t need = sizeof(struct rec_head) + ((size + 7) & ~(size_t)7);
	struct chunk *c;

	pthread_mutex_lock(&d->queue_lock);
	d->stats.records++;
	c = d->tail;
	if (need > CHUNK_BYTES || d->queued_bytes + need > d->opts.max_queued_bytes)
		goto drop;
	if (!c || c->used + need > CHUNK_BYTES) {
		c = d->spare ? d->spare : malloc(sizeof(*c));
		if (!c)
			goto drop;
		d->spare = NULL;
		c->next = NULL;
		c->used = 0;
		if (d->tail)
			d->tail->next = c;
		else
			d->head = c;
		d->tail = c;
	}
	*(struct rec_head *)(c->data + c->used) = (struct rec_head){ (uint32_t)size, 0 };
	memcpy(c->data + c->used + sizeof(struct rec_head), data, size);
	c->used += need;
	d->queued_bytes += need;
	d->accepted++;
	d->stats.queued_records++;
	d->stats.queued_samples += is_sample(data, size);
	d->stats.max_queued_bytes = MAX(d->stats.max_queued_bytes, d->queued_bytes);
	pthread_mutex_unlock(&d->queue_lock);
	return 0;
drop:
	d->stats.dropped++;
	d->stats.dropped_samples += is_sample(data, size);
	pthread_mutex_unlock(&d->queue_lock);
	return 0;
}

/* Tells the loop once per batch that records wait. */
static void signal_loop(struct drain *d)
{
	bool tell;

	pthread_mutex_lock(&d->queue_lock);
	tell = d->head && !d->signalled;
	if (tell)
		d->signalled = true;
	pthread_mutex_unlock(&d->queue_lock);
	if (tell)
		(void)!write(d->event_fd, &(uint64_t){ 1 }, sizeof(uint64_t));
}

int drain_now(struct drain *d)
{
	uint64_t t0 = now_monotonic_ns(), dt;
	int r;

	if (!d->sampler)
		return 0; /* not started: no ring yet */
	pthread_mutex_lock(&d->ring_lock);
	r = sampler_drain(d->sampler);
	pthread_mutex_unlock(&d->ring_lock);
	dt = now_monotonic_ns() - t0;
	pthread_mutex_lock(&d->queue_lock);
	d->stats.batches++;
	d->stats.max_consume_ns = MAX(d->stats.max_consume_ns, dt);
	pthread_mutex_unlock(&d->queue_lock);
	return r;
}

static void *run(void *arg)
{
	struct drain *d = arg;
	struct pollfd fds[2] = {
		{ .fd = sampler_fd(d->sampler), .events = POLLIN },
		{ .fd = d->stop_fd, .events = POLLIN },
	};

	(void)pthread_setname_np(pthread_self(), "perfd-drain");
	for (;;) {
		int n = poll(fds, 2, (int)d->opts.interval_ms);

		if (n < 0 && errno != EINTR)
			break;
		if (fds[1].revents)
			break;
		if (n > 0) {
			pthread_mutex_lock(&d->queue_lock);
			d->stats.wakeups++;
			pthread_mutex_unlock(&d->queue_lock);
		}
		(void)drain_now(d);
		signal_loop(d);
	}
	return NULL;
}

int drain_start(struct drain *d, struct sampler *s)
{
	int r;

	d->sampler = s;
	r = -pthread_create(&d->thread, NULL, run, d);
	if (r == 0)
		d->started = true;
	return r;
}

int drain_fd(const struct drain *d)
{
	return d->event_fd;
}

static bool spent(const struct drain_budget *b, size_t n, uint64_t start_ns)
{
	if (!b || !n)
		return false;
	return (b->max_records && n >= b->max_records) ||
	       (b->max_ns && now_monotonic_ns() - start_ns >= b->max_ns);
}

/* The records are read in place: the drain thread only appends past a
 * chunk's used bytes, and only the loop moves head and head_at, so the
 * lock is taken per chunk, not per record. */
size_t drain_deliver(struct drain *d, const struct drain_budget *budget,
		     int (*fn)(void *ctx, void *data, size_t size), void *ctx)
{
	uint64_t v, start = now_monotonic_ns();
	size_t n = 0;
	bool left;

	(void)!read(d->event_fd, &v, sizeof(v));
	for (;;) {
		struct chunk *c, *done = NULL;
		size_t at, end, bytes = 0, records = 0, samples = 0;

		pthread_mutex_lock(&d->queue_lock);
		c = d->head;
		at = d->head_at;
		end = c ? c->used : 0;
		pthread_mutex_unlock(&d->queue_lock);
		if (!c)
			break;
		while (at < end && !spent(budget, n, start)) {
			const struct rec_head *h = (const struct rec_head *)(c->data + at);
			size_t step = sizeof(*h) + ((h->size + 7) & ~(size_t)7);

			samples += is_sample(c->data + at + sizeof(*h), h->size);
			(void)fn(ctx, c->data + at + sizeof(*h), h->size);
			at += step;
			bytes += step;
			records++;
			n++;
		}
		pthread_mutex_lock(&d->queue_lock);
		d->head_at = at;
		d->queued_bytes -= bytes;
		d->delivered += records;
		d->stats.queued_records -= records;
		d->stats.queued_samples -= samples;
		if (at == c->used) { /* all of it: the thread appends to another */
			d->head = c->next;
			if (!d->head)
				d->tail = NULL;
			d->head_at = 0;
			if (d->spare)
				done = c;
			else
				d->spare = c;
		}
		pthread_mutex_unlock(&d->queue_lock);
		free(done);
		if (at < end)
			break; /* the budget is spent */
	}
	pthread_mutex_lock(&d->queue_lock);
	left = d->head != NULL;
	/* empty: the thread tells the loop of its next records itself */
	d->signalled = left;
	if (n)
		d->stats.slices++;
	d->stats.max_slice_records = MAX(d->stats.max_slice_records, n);
	if (left)
		d->stats.slices_cut++;
	pthread_mutex_unlock(&d->queue_lock);
	if (left) /* the loop comes back for the rest after what else is ready */
		(void)!write(d->event_fd, &(uint64_t){ 1 }, sizeof(uint64_t));
	return n;
}

/* A counter the drain thread may be writing, read under its lock. */
static uint64_t read_locked(struct drain *d, const uint64_t *v)
{
	uint64_t r;

	pthread_mutex_lock(&d->queue_lock);
	r = *v;
	pthread_mutex_unlock(&d->queue_lock);
	return r;
}

uint64_t drain_queued_mark(struct drain *d)
{
	return read_locked(d, &d->accepted);
}

uint64_t drain_delivered(struct drain *d)
{
	return read_locked(d, &d->delivered);
}

void drain_get_stats(struct drain *d, struct drain_stats *ret)
{
	pthread_mutex_lock(&d->queue_lock);
	*ret = d->stats;
	ret->queued_bytes = d->queued_bytes;
	pthread_mutex_unlock(&d->queue_lock);
}

struct drain *drain_free(struct drain *d)
{
	struct chunk *next;

	if (!d)
		return NULL;
	if (d->started) {
		(void)!write(d->stop_fd, &(uint64_t){ 1 }, sizeof(uint64_t));
		pthread_join(d->thread, NULL);
	}
	for (struct chunk *c = d->head; c; c = next) {
		next = c->next;
		free(c);
	}
	free(d->spare);
	closep(&d->event_fd);
	closep(&d->stop_fd);
	pthread_mutex_destroy(&d->ring_lock);
	pthread_mutex_destroy(&d->queue_lock);
	free(d);
	return NULL;
}
