/* SPDX-License-Identifier: MIT */
/*
 * ingest_wait.h - "run this once the records queued now are ingested",
 * without holding the loop while they are.
 *
 * Whatever must see every sample taken before a moment (a query as of its
 * arrival, the end of a live snapshot, the close of an export interval, a
 * reload's change of period) could ingest the whole queue there and then;
 * but the queue holds up to max_queued_bytes (collect/drain.h), and under
 * a flood ingesting it at once holds every client, root's status
 * included, for hundreds of milliseconds.  So the moment is noted
 * instead: what the ring buffer holds is moved into the queue
 * (drain_now), the queue's mark is taken (drain_queued_mark), and the
 * wait joins a list in the order waits came.  The loop's ordinary slices
 * (bounded in records and time) deliver the queue; after each, the waits
 * whose mark is reached run from an event source of their own (a defer
 * source), never from inside a slice, oldest first.  At rest what is
 * queued fits in one slice, which is delivered at once: the wait does not
 * wait.
 *
 * A wait is a struct ingest_wait inside its owner (no allocation, so
 * starting one cannot fail); its ready() gets it back and finds the owner
 * with container_of.  A slice may deliver past a mark: a wait sees at
 * least the records queued when it started, and may see a few more
 * (those of one slice).  Cost: one list walk per delivery while waits
 * exist, none otherwise.
 */
#ifndef PERFD_INGEST_WAIT_H
#define PERFD_INGEST_WAIT_H

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

struct drain;
struct ingest_wait;

typedef void (*ingest_ready_fn)(struct ingest_wait *w);

struct ingest_wait {
	struct ingest_wait *next;
	uint64_t mark; /* drain_queued_mark when it started */
	bool waiting;
	ingest_ready_fn ready;
};

/* The waits of one drain, and how the loop ingests one slice of it. */
struct ingest_waits {
	sd_event *event;
	struct drain *drain;
	void (*deliver)(void *ctx); /* one bounded slice; it calls ingest_waits_delivered */
	void *ctx;
	struct ingest_wait *head; /* in the order they came, so by mark */
	sd_event_source *source;  /* runs the ready ones, once per delivery */
};

/* Sets q up (nothing to free until a wait starts). */
void ingest_waits_init(struct ingest_waits *q, sd_event *event, struct drain *drain,
		       void (*deliver)(void *ctx), void *ctx);
/* Notes the records queued now (the ring's too) and delivers one slice.
 * Returns 0 when they are ingested already: w is not kept and the caller
 * goes on now.  Returns 1 when w waits: ready(w) runs later, on a turn of
 * its own, unless ingest_wait_cancel() comes first.  w must not be
 * waiting already. */
int ingest_wait_start(struct ingest_waits *q, struct ingest_wait *w, ingest_ready_fn ready);
/* Ends w's wait without running it.  Accepts a w that does not wait. */
void ingest_wait_cancel(struct ingest_waits *q, struct ingest_wait *w);
/* After a slice: the waits it satisfied run soon (on their own turn). */
void ingest_waits_delivered(struct ingest_waits *q);
/* Drops the event source; the waits left are their owners' to cancel. */
void ingest_waits_free(struct ingest_waits *q);

#endif
