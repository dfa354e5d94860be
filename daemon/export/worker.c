/* SPDX-License-Identifier: MIT */
/* worker.c - see worker.h: the jobs of an ordered offload lane, and retries. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/offload.h"
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

/* One item to send: a job of the worker's ordered lane. */
struct send_job {
	struct offload_job job; /* first: the lane's part */
	struct export_worker *w;
	struct export_item *it;
};

struct export_worker {
	const struct export_sink_ops *ops;
	struct offload *lane; /* the queue, its bound and the thread */
	pthread_mutex_t lock; /* for: */
	void *pending_target; /* swapped in by the lane */
	struct export_worker_stats stats; /* but queued, and the lane's drops */
	/* the lane's */
	void *target;
	unsigned backoff;  /* ms, of the last failure; 0 after a success */
	uint64_t next_try; /* CLOCK_MONOTONIC ns: the backoff's end */
};

static double now_unix(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct send_job *send_job_of(struct offload_job *j)
{
	return (struct send_job *)j;
}

static void send_job_free(struct offload_job *j)
{
	struct send_job *sj = send_job_of(j);

	export_item_unref(sj->it);
	free(sj);
}

/* On the lane: takes a new target, if one came, and frees the old. */
static void adopt_target(struct export_worker *w)
{
	void *old = NULL;

	pthread_mutex_lock(&w->lock);
	if (w->pending_target) {
		old = w->target;
		w->target = TAKE_PTR(w->pending_target);
	}
	pthread_mutex_unlock(&w->lock);
	if (old)
		w->ops->free_target(old);
}

/* On the lane: the sink's housekeeping. */
static void tidy(struct export_worker *w)
{
	if (w->ops->tidy && w->target)
		w->ops->tidy(w->target);
}

/* On the lane, out of work (and at a retarget): the new target, tidied. */
static void idle(void *userdata)
{
	struct export_worker *w = userdata;

	adopt_target(w);
	tidy(w);
}

/* On the lane: waits out the backoff of the last failure, whichever item
 * it was.  Returns false when the job is cancelled or dropped meanwhile. */
static bool wait_turn(struct export_worker *w, struct offload_job *j)
{
	uint64_t now = now_monotonic_ns();

	if (now >= w->next_try)
		return !atomic_load(j->cancel) && !offload_dropped(j);
	return offload_sleep(j, (unsigned)((w->next_try - now + 999999) / 1000000));
}

/* On the lane: sends one item until it is sent, given up on, dropped by
 * the full queue, or the worker stops; counts which. */
static void send_run(struct offload_job *j)
{
	struct send_job *sj = send_job_of(j);
	struct export_worker *w = sj->w;
	const struct export_item *it = sj->it;
	char err[EXPORT_ERROR_MAX];

	for (;;) {
		bool gone, stopping;
		int r;

		if (!wait_turn(w, j)) {
			/* dropped by the full queue, or the shutdown, while it
			 * waited: counted now */
			if (offload_dropped(j) || atomic_load(j->cancel)) {
				pthread_mutex_lock(&w->lock);
				w->stats.dropped++;
				pthread_mutex_unlock(&w->lock);
			}
			return;
		}
		adopt_target(w);
		err[0] = '\0';
		r = w->ops->send(w->target, it, j->cancel, err, sizeof(err));
		/* gone: the full queue dropped it meanwhile, uncounted */
		gone = offload_dropped(j);
		stopping = atomic_load(j->cancel);
		pthread_mutex_lock(&w->lock);
		if (r == 0) {
			w->stats.sent++;
			w->stats.sent_bytes += it->len;
			w->stats.last_success_unix = now_unix();
			if (w->stats.retrying)
				log_info("Exporter %s: %s works again.", w->ops->name, w->stats.target);
			w->stats.retrying = false;
			w->backoff = 0;
		} else if (!stopping) {
			bool first = !w->stats.retrying;

			snprintf(w->stats.last_error, sizeof(w->stats.last_error), "%s",
				 err[0] ? err : strerror(-r));
			w->stats.last_error_unix = now_unix();
			if (r == -EAGAIN) {
				/* it would have been retried: dropped, not failed */
				if (gone)
					w->stats.dropped++;
				w->stats.retries++;
				w->stats.retrying = true;
				if (first)
					log_warning("Exporter %s: %s failed, retrying: %s", w->ops->name,
						    w->stats.target, w->stats.last_error);
				w->backoff = w->backoff ? MIN(2 * w->backoff, BACKOFF_MAX_MS) :
							  BACKOFF_MIN_MS;
				pthread_mutex_unlock(&w->lock);
				/* what fails may be what tidying mends (a disk
				 * full of old profiles), and the queue does not
				 * run empty while its head waits */
				tidy(w);
				w->next_try = now_monotonic_ns() + (uint64_t)w->backoff * 1000000;
				if (gone)
					return;
				continue;
			}
			w->stats.failed++;
			log_warning("Exporter %s: %s refused a profile, dropped: %s", w->ops->name,
				    w->stats.target, w->stats.last_error);
		} else {
			/* cut short by the shutdown (offload_finish counts
			 * only what was queued) */
			w->stats.dropped++;
		}
		pthread_mutex_unlock(&w->lock);
		return;
	}
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
	r = offload_new(&(struct offload_opts){ .lanes = 1, .ordered = true, .max_bytes = max_bytes,
						.drop_oldest = true, .background = true, .idle = idle,
						.userdata = w, .name = "perfd-send" },
			&w->lane);
	if (r < 0) {
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
	pthread_mutex_unlock(&w->lock);
	offload_set_max_bytes(w->lane, max_bytes);
	offload_kick(w->lane); /* an idle lane takes it now */
	if (old)
		w->ops->free_target(old);
}

void export_worker_push(struct export_worker *w, struct export_item *it)
{
	struct send_job *sj = malloc(sizeof(*sj));

	if (!sj) {
		pthread_mutex_lock(&w->lock);
		w->stats.dropped++;
		pthread_mutex_unlock(&w->lock);
		return;
	}
	/* the oldest go first; the one being sent goes too, and counts
	 * once its send() says what became of it: sent, failed, or dropped
	 * if it was to be retried */
	*sj = (struct send_job){
		.job = { .bytes = it->len, .run = send_run, .free = send_job_free },
		.w = w,
		.it = export_item_ref(it),
	};
	if (offload_submit(w->lane, &sj->job) < 0) /* bigger than the bound: counted */
		send_job_free(&sj->job);
}

void export_worker_get_stats(struct export_worker *w, struct export_worker_stats *ret)
{
	struct offload_stats os;

	pthread_mutex_lock(&w->lock);
	*ret = w->stats;
	pthread_mutex_unlock(&w->lock);
	offload_get_stats(w->lane, &os);
	ret->queued = os.jobs;
	ret->queued_bytes = os.bytes;
	ret->dropped += os.refused + os.dropped;
}

size_t export_worker_finish(struct export_worker *w, unsigned timeout_ms)
{
	return offload_finish(w->lane, timeout_ms);
}

struct export_worker *export_worker_free(struct export_worker *w)
{
	if (!w)
		return NULL;
	offload_free(w->lane); /* a send in progress sees the cancel flag */
	if (w->pending_target)
		w->ops->free_target(w->pending_target);
	if (w->target)
		w->ops->free_target(w->target);
	pthread_mutex_destroy(&w->lock);
	free(w);
	return NULL;
}
