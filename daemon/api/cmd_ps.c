/* SPDX-License-Identifier: MIT */
/*
 * cmd_ps.c - "ps": the processes the client may see that ran in the last
 * interval or whose memory moved then ("all": every live one), busiest
 * first, with their RSS trend (the answer is built by query.c, with the
 * process list top shares).
 */
#include "api/auth.h"
#include "api/cmd_ps.h"
#include "api/command.h"
#include "api/query.h"
#include "base/clock.h"
#include "base/jsonw.h"

static int parse_ps(struct json_object *req, void *args, struct perfd_request_error *e)
{
	struct ps_args *r = args;
	int64_t interval = PERFD_PS_DEFAULT_INTERVAL;
	int k;

	k = request_get_int(req, "interval", 1, PERFD_PS_MAX_INTERVAL, false, &interval, e);
	if (k < 0)
		return k;
	r->interval_seconds = (unsigned)interval;
	return request_get_bool(req, "all", &r->all, e);
}


static int run_ps(struct daemon *d, struct client *c, const void *args)
{
	const struct ps_args *req = args;
	struct jsonw w;
	int r;

	query_ok_begin(&w);
	r = query_ps(&w, d->aggregator, client_peer(c), now_monotonic_ns(), req->interval_seconds,
		     req->all, d->start_ns, d->frequency_hz);
	jsonw_object_end(&w);
	command_reply_writer(c, &w, r);
	return 0;
}

const struct command cmd_ps = {
	.name = "ps",
	.args_size = COMMAND_ARGS_SIZE(struct ps_args),
	.parse = parse_ps,
	.run = run_ps,
	.fresh = true,
};
