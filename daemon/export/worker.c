/* SPDX-License-Identifier: MIT */
/* worker.c - see worker.h: a thread, a bounded queue, retries. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "export/worker.h"
#include "perfd/macro.h"

#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000

struct export_item *export_item_ref(struct export_item *it)
{
	atomic_fetch_add(&it->refs, 1);
	return it;
}

struct export_item *export_item_unref(struct export_item *it)
{
	if (it && atomic_fetch_sub(&it->refs, 1) == 1) {
		free(it->file_name);
		free(it->push_name);
		free(it->data);
		free(it);
	}
	return NULL;
}

struct node {
	struct export_item *it;
	struct node *next;
};

struct export_worker {
	const struct export_sink_ops *ops;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_cond_t idle; /* the queue ran empty (export_worker_finish) */
	atomic_bool stop;
	/* under lock */
	struct node *head, *tail;
	const struct export_item *sending; /* the head, while send() has it */
	bool sending_dropped; /* ... and the full queue dropped it meanwhile */
	void *pending_target; /* swapped in by the thread */
	struct export_worker_stats stats;
	/* the thread's */
	void *target;
};

static double now_unix(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Waits on wake until ms pass or the worker stops (lock held). */
static void wait_ms(struct export_worker *w, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	while (!atomic_load(&w->stop))
		if (pthread_cond_timedwait(&w->wake, &w->lock, &ts) == ETIMEDOUT)
			break;
}

/* Unlinks the head (lock held; the caller counts it). */
static void queue_pop(struct export_worker *w)
{
	struct node *n = w->head;

	if (!(w->head = n->next))
		w->tail = NULL;
	w->stats.queued--;
	w->stats.queued_bytes -= n->it->len;
	export_item_unref(n->it);
	free(n);
}

/* Takes a new target, if one came (lock held); the old one is freed after
 * the lock is released, by the caller. */
static void *adopt_target(struct export_worker *w)
{
	void *old = NULL;

	if (w->pending_target) {
		old = w->target;
		w->target = TAKE_PTR(w->pending_target);
	}
	return old;
}

/* The sink's housekeeping (lock held, released around it). */
static void tidy(struct export_worker *w)
{
	if (!w->ops->tidy || !w->target)
		return;
	pthread_mutex_unlock(&w->lock);
	w->ops->tidy(w->target);
	pthread_mutex_lock(&w->lock);
}

static void *run(void *userdata)
{
	struct export_worker *w = userdata;
	unsigned backoff = 0;
	char err[EXPORT_ERROR_MAX];

	pthread_mutex_lock(&w->lock);
	while (!atomic_load(&w->stop)) {
		struct export_item *it;
		bool gone, stopping, retry;
		void *old;
		int r;

		if (!w->head) {
			pthread_cond_broadcast(&w->idle);
			tidy(w);
			while (!w->head && !w->pending_target && !atomic_load(&w->stop))
				pthread_cond_wait(&w->wake, &w->lock);
			old = adopt_target(w);
			if (old) {
				pthread_mutex_unlock(&w->lock);
				w->ops->free_target(old);
				pthread_mutex_lock(&w->lock);
			}
			continue;
		}
		old = adopt_target(w);
		it = export_item_ref(w->head->it);
		w->sending = it;
		pthread_mutex_unlock(&w->lock);
		if (old)
			w->ops->free_target(old);
		err[0] = '\0';
		r = w->ops->send(w->target, it, &w->stop, err, sizeof(err));
		pthread_mutex_lock(&w->lock);
		/* gone: the full queue dropped it meanwhile, uncounted (push) */
		gone = w->sending_dropped;
		w->sending = NULL;
		w->sending_dropped = false;
		stopping = atomic_load(&w->stop);
		retry = r == -EAGAIN && !stopping;
		if (!gone && !retry)
			queue_pop(w);
		if (r == 0) {
			w->stats.sent++;
			w->stats.sent_bytes += it->len;
			w->stats.last_success_unix = now_unix();
			if (w->stats.retrying)
				log_info("Exporter %s: %s works again.", w->ops->name, w->stats.target);
			w->stats.retrying = false;
			backoff = 0;
		} else if (!stopping) {
			bool first = !w->stats.retrying;

			snprintf(w->stats.last_error, sizeof(w->stats.last_error), "%s",
				 err[0] ? err : strerror(-r));
			w->stats.last_error_unix = now_unix();
			if (retry) {
				/* it would have been retried: dropped, not failed */
				if (gone)
					w->stats.dropped++;
				w->stats.retries++;
				w->stats.retrying = true;
				if (first)
					log_warning("Exporter %s: %s failed, retrying: %s", w->ops->name,
						    w->stats.target, w->stats.last_error);
				backoff = backoff ? MIN(2 * backoff, BACKOFF_MAX_MS) : BACKOFF_MIN_MS;
				export_item_unref(it);
				/* what fails may be what tidying mends (a disk
				 * full of old profiles), and the queue does not
				 * run empty while its head waits */
				tidy(w);
				wait_ms(w, backoff);
				continue;
			}
			w->stats.failed++;
			log_warning("Exporter %s: %s refused a profile, dropped: %s", w->ops->name,
				    w->stats.target, w->stats.last_error);
		}
		export_item_unref(it);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void set_describe(struct export_worker *w, const char *describe, size_t max_bytes)
{
	snprintf(w->stats.target, sizeof(w->stats.target), "%s", describe);
	w->stats.max_queued_bytes = max_bytes;
}

int export_worker_new(const struct export_sink_ops *ops, void *target, const char *describe,
		      size_t max_bytes, struct export_worker **ret)
{
	struct export_worker *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;
	int r;

	if (!w) {
		ops->free_target(target);
		return -ENOMEM;
	}
	w->ops = ops;
	w->target = target;
	w->stats.name = ops->name;
	set_describe(w, describe, max_bytes);
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_cond_init(&w->idle, &ca);
	pthread_condattr_destroy(&ca);
	r = -pthread_create(&w->thread, NULL, run, w);
	if (r < 0) {
		pthread_cond_destroy(&w->wake);
		pthread_mutex_destroy(&w->lock);
		ops->free_target(target);
		free(w);
		return r;
	}
	*ret = w;
	return 0;
}

void export_worker_retarget(struct export_worker *w, void *target, const char *describe,
			    size_t max_bytes)
{
	void *old;

	pthread_mutex_lock(&w->lock);
	old = w->pending_target;
	w->pending_target = target;
	set_describe(w, describe, max_bytes);
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	if (old)
		w->ops->free_target(old);
}

void export_worker_push(struct export_worker *w, struct export_item *it)
{
	struct node *n = malloc(sizeof(*n));

	pthread_mutex_lock(&w->lock);
	if (!n || it->len > w->stats.max_queued_bytes) {
		w->stats.dropped++;
		pthread_mutex_unlock(&w->lock);
		free(n);
		return;
	}
	/* the oldest go first; the one being sent goes too, and the thread
	 * counts it once its send() says what became of it: sent, failed, or
	 * dropped if it was to be retried */
	while (w->head && w->stats.queued_bytes + it->len > w->stats.max_queued_bytes) {
		if (w->head->it == w->sending) {
			w->sending = NULL;
			w->sending_dropped = true;
		} else {
			w->stats.dropped++;
		}
		queue_pop(w);
	}
	n->it = export_item_ref(it);
	n->next = NULL;
	if (w->tail)
		w->tail->next = n;
	else
		w->head = n;
	w->tail = n;
	w->stats.queued++;
	w->stats.queued_bytes += it->len;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
}

void export_worker_get_stats(struct export_worker *w, struct export_worker_stats *ret)
{
	pthread_mutex_lock(&w->lock);
	*ret = w->stats;
	pthread_mutex_unlock(&w->lock);
}

size_t export_worker_finish(struct export_worker *w, unsigned timeout_ms)
{
	struct timespec until;
	size_t left;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&w->lock);
	while (w->head && pthread_cond_timedwait(&w->idle, &w->lock, &until) == 0)
		;
	left = w->stats.queued;
	w->stats.dropped += left;
	pthread_mutex_unlock(&w->lock);
	return left;
}

struct export_worker *export_worker_free(struct export_worker *w)
{
	if (!w)
		return NULL;
	pthread_mutex_lock(&w->lock);
	atomic_store(&w->stop, true);
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	while (w->head)
		queue_pop(w);
	if (w->pending_target)
		w->ops->free_target(w->pending_target);
	if (w->target)
		w->ops->free_target(w->target);
	pthread_cond_destroy(&w->wake);
	pthread_cond_destroy(&w->idle);
	pthread_mutex_destroy(&w->lock);
	free(w);
	return NULL;
}
