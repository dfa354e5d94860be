/* SPDX-License-Identifier: MIT */
/*
 * cmd_stop.c - "stop": ends the live snapshot the client is waiting for on
 * this connection, which then answers with what it sampled so far.
 *
 * A stop that arrives while a command is pending is taken before its turn
 * (command_pending_line() in command.c) and has no answer of its own; one
 * that comes when nothing is pending (the snapshot answered as the client
 * sent it) lands here and says there was nothing to stop.
 */
#include "api/command.h"
#include "api/query.h"
#include "base/jsonw.h"

static int run_stop(struct daemon *d, struct client *c, const void *args)
{
	struct jsonw w;

	query_ok_begin(&w);
	jsonw_kv_bool(&w, "stopped", false);
	jsonw_object_end(&w);
	command_reply_writer(c, &w, 0);
	return 0;
}

const struct command cmd_stop = { .name = "stop", .run = run_stop };
