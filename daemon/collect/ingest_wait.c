/* SPDX-License-Identifier: MIT */
/* ingest_wait.c - see ingest_wait.h. */
#include "base/log.h"
#include "collect/drain.h"
#include "collect/ingest_wait.h"

void ingest_waits_init(struct ingest_waits *q, sd_event *event, struct drain *drain,
		       void (*deliver)(void *ctx), void *ctx)
{
	*q = (struct ingest_waits){ .event = event, .drain = drain, .deliver = deliver, .ctx = ctx };
}

/* The waits whose records are in, oldest first.  Each is taken off the
 * list before its ready() runs: a ready() may start or cancel waits. */
static int on_delivered(sd_event_source *s, void *userdata)
{
	struct ingest_waits *q = userdata;
	uint64_t delivered = drain_delivered(q->drain);

	while (q->head && q->head->mark <= delivered) {
		struct ingest_wait *w = q->head;

		q->head = w->next;
		w->next = NULL;
		w->waiting = false;
		w->ready(w);
	}
	return 0;
}

void ingest_waits_delivered(struct ingest_waits *q)
{
	int r;

	if (!q->head || q->head->mark > drain_delivered(q->drain))
		return;
	if (!q->source) /* a defer source, made once, on once per delivery */
		r = sd_event_add_defer(q->event, &q->source, on_delivered, q);
	else
		r = sd_event_source_set_enabled(q->source, SD_EVENT_ONESHOT);
	if (r < 0) /* they run after the next slice, which comes at least once a second */
		log_warning_errno(r, "Failed to schedule what waits for the ingest: %m");
}

int ingest_wait_start(struct ingest_waits *q, struct ingest_wait *w, ingest_ready_fn ready)
{
	struct ingest_wait **p;
	int r = drain_now(q->drain);

	if (r < 0)
		log_warning_errno(r, "Failed to drain the ring buffer, ignoring: %m");
	*w = (struct ingest_wait){ .mark = drain_queued_mark(q->drain), .ready = ready };
	if (drain_delivered(q->drain) < w->mark)
		q->deliver(q->ctx); /* one slice: all there is, at rest */
	if (drain_delivered(q->drain) >= w->mark)
		return 0;
	for (p = &q->head; *p; p = &(*p)->next)
		;
	*p = w; /* last: marks only grow, so the list stays ordered by mark */
	w->waiting = true;
	return 1;
}

void ingest_wait_cancel(struct ingest_waits *q, struct ingest_wait *w)
{
	if (!w->waiting)
		return;
	for (struct ingest_wait **p = &q->head; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	w->next = NULL;
	w->waiting = false;
}

void ingest_waits_free(struct ingest_waits *q)
{
	q->source = sd_event_source_disable_unref(q->source);
}
