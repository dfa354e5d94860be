/* SPDX-License-Identifier: MIT */
/* fresh.c - see fresh.h. */
#include <stdlib.h>

#include "api/command.h"
#include "api/fresh.h"
#include "api/server.h"
#include "collect/ingest_wait.h"
#include "perfd/macro.h"

struct fresh_wait {
	struct command_pending pending; /* first: the client's data */
	struct ingest_wait wait;
	struct daemon *d;
	struct client *client;
	bool stopped; /* a "stop" came while it waited */
	struct perfd_request req;
};

static void cancel_wait(struct daemon *d, struct client *c)
{
	struct fresh_wait *w = client_get_data(c);

	ingest_wait_cancel(&d->ingest, &w->wait);
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

/* A stop that came meanwhile goes to what is pending now: the command's
 * own state, or what it handed its answer to (api/encode_lane.h). */
static int run(struct daemon *d, struct client *c, const struct perfd_request *req, bool stopped)
{
	int r = commands[req->command]->run(d, c, req->args);
	struct command_pending *p = client_get_data(c);

	if (r == SERVER_PENDING && stopped && p && p->command->stop)
		p->command->stop(d, c);
	return r;
}

/* Its records are in: the command runs now. */
static void on_ingested(struct ingest_wait *iw)
{
	struct fresh_wait *w = container_of(iw, struct fresh_wait, wait);

	client_set_data(w->client, NULL);
	(void)run(w->d, w->client, &w->req, w->stopped);
	free(w);
}

int fresh_dispatch(struct daemon *d, struct client *c, const struct perfd_request *req)
{
	_cleanup_free_ struct fresh_wait *w = calloc(1, sizeof(*w));

	if (!w) {
		command_reply_oom(c);
		return 0;
	}
	*w = (struct fresh_wait){ .pending = { commands[req->command]->stop ? &wait_stoppable :
								      &wait_command },
				  .d = d, .client = c, .req = *req };
	if (ingest_wait_start(&d->ingest, &w->wait, on_ingested) == 0)
		return run(d, c, req, false);
	client_set_data(c, TAKE_PTR(w));
	return SERVER_PENDING;
}
