/* SPDX-License-Identifier: MIT */
/* fresh.c - see fresh.h. */
#include <stdlib.h>

#include "api/command.h"
#include "api/fresh.h"
#include "api/server.h"
#include "base/log.h"
#include "collect/drain.h"

struct fresh_wait {
	struct command_pending pending; /* first: the client's data */
	struct fresh_wait *next;
	struct client *client;
	uint64_t mark;
	bool stopped; /* a "stop" came while it waited */
	struct perfd_request req;
};

static void unlink_wait(struct daemon *d, struct fresh_wait *w)
{
	for (struct fresh_wait **p = &d->fresh_waits; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			return;
		}
}

static void cancel_wait(struct daemon *d, struct client *c)
{
	struct fresh_wait *w = client_get_data(c);

	unlink_wait(d, w);
	free(w);
}

/* A "stop" for a live snapshot that still waits: it ends as soon as it
 * has started. */
static void stop_wait(struct daemon *d, struct client *c)
{
	struct fresh_wait *w = client_get_data(c);

	w->stopped = true;
}

static const struct command wait_command = { .name = "wait", .cancel = cancel_wait };
static const struct command wait_stoppable = { .name = "wait", .cancel = cancel_wait,
					       .stop = stop_wait };

static int run(struct daemon *d, struct client *c, const struct perfd_request *req, bool stopped)
{
	const struct command *cmd = commands[req->command];
	int r = cmd->run(d, c, req);

	if (r == SERVER_PENDING && stopped && cmd->stop)
		cmd->stop(d, c);
	return r;
}

/* The waits whose records are in, oldest first: their commands run now. */
static int on_delivered(sd_event_source *s, void *userdata)
{
	struct daemon *d = userdata;
	uint64_t delivered = drain_delivered(d->drain);
	struct fresh_wait **p = &d->fresh_waits;

	while (*p) {
		struct fresh_wait *w = *p;

		if (w->mark > delivered) {
			p = &w->next;
			continue;
		}
		*p = w->next;
		client_set_data(w->client, NULL);
		(void)run(d, w->client, &w->req, w->stopped);
		free(w);
	}
	return 0;
}

void fresh_delivered(struct daemon *d)
{
	int r;

	if (!d->fresh_waits)
		return;
	if (!d->fresh_source) /* a new defer source is on, once */
		r = sd_event_add_defer(d->event, &d->fresh_source, on_delivered, d);
	else
		r = sd_event_source_set_enabled(d->fresh_source, SD_EVENT_ONESHOT);
	if (r < 0) /* they run at the next delivery, which comes at least once a second */
		log_warning_errno(r, "Failed to schedule the queries waiting for the ingest: %m");
}

int fresh_dispatch(struct daemon *d, struct client *c, const struct perfd_request *req)
{
	struct fresh_wait *w, **p;
	uint64_t mark;
	int r = drain_now(d->drain);

	if (r < 0)
		log_warning_errno(r, "Failed to drain the ring buffer, ignoring: %m");
	mark = drain_queued_mark(d->drain);
	if (drain_delivered(d->drain) < mark)
		daemon_deliver(d); /* one slice: all there is, at rest */
	if (drain_delivered(d->drain) >= mark)
		return run(d, c, req, false);
	w = calloc(1, sizeof(*w));
	if (!w) { /* out of memory: the answer waits for nothing else */
		daemon_drain(d);
		return run(d, c, req, false);
	}
	*w = (struct fresh_wait){ .pending = { commands[req->command]->stop ? &wait_stoppable :
								      &wait_command },
				  .client = c, .mark = mark, .req = *req };
	for (p = &d->fresh_waits; *p; p = &(*p)->next)
		;
	*p = w; /* last: they run in the order they came */
	client_set_data(c, w);
	return SERVER_PENDING;
}

void fresh_free(struct daemon *d)
{
	d->fresh_source = sd_event_source_disable_unref(d->fresh_source);
}
