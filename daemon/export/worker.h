/* SPDX-License-Identifier: MIT */
/*
 * worker.h - one exporter's thread and its bounded queue: the one
 * mechanism behind writing files and pushing to a backend.
 *
 * The exporter encodes each interval's profiles (exporter.c) and pushes them
 * here; the thread, an ordered offload lane (base/offload.h), hands them,
 * oldest first, to its sink's send() and never touches the store.  What
 * crosses threads: export_items (immutable once pushed, reference-counted:
 * the files and the push exporters share one), a sink target (built on the
 * loop, then owned by the thread: a new one is swapped in under the lock
 * and the old one freed on the thread), and the stats, under the same lock.
 *
 * Bounded: past max_bytes of queued items (the one being sent among them)
 * the oldest are dropped, and counted; a dead backend costs the queue's
 * bound, never more.  A send()
 * that says -EAGAIN (a full or read-only disk, a refused connection, a 5xx)
 * keeps its item first in line and is retried after a backoff doubling from
 * 250 ms to 5 s (the sink's tidy() runs first: the files sink prunes, so a
 * disk its own old files filled makes room); any other error drops the
 * item, counted as failed.
 * Stopping interrupts the backoff, and a sink's long send() watches the
 * stop flag it is given.
 */
#ifndef PERFD_EXPORT_WORKER_H
#define PERFD_EXPORT_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/profile.h"

/* One encoded profile: one process, one kind, one interval. */
struct export_item {
	atomic_uint refs;
	enum profile_kind kind;
	uint32_t pid;
	double from_unix, to_unix;
	unsigned sample_rate_hz;
	char *file_name; /* for the files exporter: no directory */
	char *push_name; /* Pyroscope's name=SERVICE{k=v,...}, not URL-escaped */
	size_t len;
	uint8_t *data; /* gzipped profile.proto */
};

struct export_item *export_item_ref(struct export_item *it);
struct export_item *export_item_unref(struct export_item *it);

#define EXPORT_ERROR_MAX 256

struct export_sink_ops {
	const char *name; /* "files", "pyroscope" */
	/* On the thread: sends it to target, giving up early once *stop is
	 * set.  Returns 0, -EAGAIN to try again later, or another -errno to
	 * give up on it; err says why. */
	int (*send)(void *target, const struct export_item *it, const atomic_bool *stop, char *err,
		    size_t len);
	/* On the thread, the sink's housekeeping (may be NULL): when the
	 * queue ran empty, and after each send() that said -EAGAIN, before
	 * the backoff, as it may make room for the retry. */
	void (*tidy)(void *target);
	void (*free_target)(void *target);
};

struct export_worker_stats {
	const char *name;
	char target[256];      /* what it sends to, without credentials */
	uint64_t queued, queued_bytes, max_queued_bytes;
	uint64_t sent, sent_bytes;
	uint64_t dropped;      /* pushed out of the full queue, oldest first; the one
				* being sent then counts as what its send() makes it */
	uint64_t failed;       /* given up on (a permanent error) */
	uint64_t retries;
	bool retrying;         /* the item first in line failed and waits */
	double last_success_unix, last_error_unix; /* 0: never */
	char last_error[EXPORT_ERROR_MAX];
};

struct export_worker;

/* Starts the thread, taking target (freed with ops->free_target, even on
 * failure).  Returns 0 or -errno. */
int export_worker_new(const struct export_sink_ops *ops, void *target, const char *describe,
		      size_t max_bytes, struct export_worker **ret);
/* Sends to target from the next item on (taken; the old one is freed on
 * the thread); the queue keeps its items. */
void export_worker_retarget(struct export_worker *w, void *target, const char *describe,
			    size_t max_bytes);
/* Queues it (taking a reference), dropping the oldest past the bound. */
void export_worker_push(struct export_worker *w, struct export_item *it);
void export_worker_get_stats(struct export_worker *w, struct export_worker_stats *ret);
/* At shutdown: waits up to timeout_ms for the queue to empty; what is
 * still queued then counts as dropped.  Returns how many that is.  The
 * caller frees the worker next. */
size_t export_worker_finish(struct export_worker *w, unsigned timeout_ms);
/* Stops the thread (a send in progress is interrupted where the sink
 * allows), drops what is queued. */
struct export_worker *export_worker_free(struct export_worker *w);

#endif
