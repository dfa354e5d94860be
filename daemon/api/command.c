/* SPDX-License-Identifier: MIT */
/* command.c - the command table and the dispatch (see command.h). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "api/auth.h"
#include "api/command.h"
#include "api/fresh.h"
#include "api/query.h"
#include "base/jsonw.h"
#include "base/log.h"

#define ROW(name, NAME) [PERFD_CMD_##NAME] = &cmd_##name,
const struct command *const commands[PERFD_CMD_COUNT] = { PERFD_COMMANDS(ROW) };
#undef ROW

/* What a client gets when its answer could not be written. */
static void reply_out_of_memory(struct client *c)
{
	static const char oom[] = "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"internal\","
				  "\"message\":\"perfd ran out of memory building the answer\"}}";

	(void)server_reply(c, oom, sizeof(oom) - 1);
}

void command_reply_writer(struct client *c, struct jsonw *w, int r)
{
	size_t len;
	bool sendable = r == 0 || r == COMMAND_FRAMED;
	char *text = !sendable || jsonw_error(w) ? NULL : jsonw_steal(w, &len);

	jsonw_done(w);
	if (!text) {
		reply_out_of_memory(c);
		return;
	}
	if (r == COMMAND_FRAMED)
		(void)server_reply_frame(c, text, len, len + 1);
	else
		(void)server_reply_owned(c, text, len, len + 1);
}

void command_reply_error(struct client *c, const char *code, const char *fmt, ...)
{
	struct jsonw w;
	va_list ap;

	va_start(ap, fmt);
	query_verror(&w, code, fmt, ap);
	va_end(ap);
	command_reply_writer(c, &w, 0);
}

void command_reply_oom(struct client *c)
{
	reply_out_of_memory(c);
}

int command_dispatch(struct daemon *d, struct client *c, const char *line, size_t len)
{
	struct perfd_request req;
	struct perfd_request_error err;

	if (request_parse(line, len, &req, &err) < 0) {
		command_reply_error(c, err.code, "%s", err.message);
		return 0;
	}
	if (commands[req.command]->fresh)
		return fresh_dispatch(d, c, &req);
	return commands[req.command]->run(d, c, req.args);
}

void command_cancel(struct daemon *d, struct client *c)
{
	struct command_pending *p = client_get_data(c);

	if (p && p->command->cancel)
		p->command->cancel(d, c);
	client_set_data(c, NULL);
}

bool command_pending_line(struct daemon *d, struct client *c, const char *line, size_t len)
{
	struct command_pending *p = client_get_data(c);
	struct perfd_request req;
	struct perfd_request_error err;

	/* only a command that can stop takes a stop early; otherwise the
	 * line waits its turn and is answered as any other */
	if (!p || !p->command->stop)
		return false;
	if (request_parse(line, len, &req, &err) < 0 || req.command != PERFD_CMD_STOP)
		return false;
	p->command->stop(d, c);
	return true;
}

bool daemon_peer_sees(void *peer, const struct process *p)
{
	return auth_may_see(peer, p->owner_uid);
}

bool daemon_peer_sees_owner(void *peer, uint32_t owner)
{
	return auth_may_see(peer, owner);
}

struct owner_filter daemon_peer_owners(const struct perfd_peer *peer)
{
	return (struct owner_filter){ .takes = daemon_peer_sees_owner, .userdata = (void *)peer };
}

