/* SPDX-License-Identifier: MIT */
/*
 * command.h - what a command is, the table of them, and the dispatch.
 *
 * A request line is parsed once (request.c: JSON, version, which command)
 * and handed to its row of the table: parse() reads its arguments into the
 * command's own arguments struct (args_size bytes, declared in its
 * api/cmd_NAME.h), run() answers the client from them, now or later.  A command
 * that answers later (a snapshot from now on) keeps its state as the
 * client's data, starting with a struct command_pending that names the
 * command, so that a client that goes away cancels it through cancel(),
 * and a "stop" sent on the same connection meanwhile ends it early through
 * stop() (the stop gets no answer of its own: the command's is the answer).
 *
 * The state commands work on, struct daemon, is daemon.h's.
 */
#ifndef PERFD_COMMAND_H
#define PERFD_COMMAND_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/request.h"
#include "api/server.h"
#include "daemon.h"

/* The args_size of a command whose arguments are a T: its size, and a
 * build that fails when it outgrows REQUEST_ARGS_MAX. */
#define COMMAND_ARGS_SIZE(T) sizeof(char[sizeof(T) <= REQUEST_ARGS_MAX ? sizeof(T) : -1])

struct command {
	const char *name;
	size_t args_size; /* of its arguments struct (COMMAND_ARGS_SIZE); 0: none */
	/* Reads the arguments into args, a zeroed struct of args_size bytes
	 * (NULL: none).  Returns 0, or -EINVAL with *e set (request.h's
	 * helpers do both). */
	int (*parse)(struct json_object *req, void *args, struct perfd_request_error *e);
	/* Answers c from its arguments.  Returns 0 when it has,
	 * SERVER_PENDING when it will. */
	int (*run)(struct daemon *d, struct client *c, const void *args);
	/* Drops what a pending run kept for c (the client went away). */
	void (*cancel)(struct daemon *d, struct client *c);
	/* Ends a pending run early, at the client's "stop": it answers soon,
	 * with what it has (NULL: the command cannot stop early). */
	void (*stop)(struct daemon *d, struct client *c);
	/* Answers with every sample taken before the request came: runs once
	 * those are ingested (api/fresh.h). */
	bool fresh;
};

/* The first member of a pending command's client data. */
struct command_pending {
	const struct command *command;
};

#define DECLARE(name, NAME) extern const struct command cmd_##name;
PERFD_COMMANDS(DECLARE)
#undef DECLARE

extern const struct command *const commands[PERFD_CMD_COUNT];

/* Parses a request line and runs its command; a bad request gets its
 * error answer.  Returns 0 or SERVER_PENDING (server.h). */
int command_dispatch(struct daemon *d, struct client *c, const char *line, size_t len);
/* The client of a pending command went away. */
void command_cancel(struct daemon *d, struct client *c);
/* A line the client sent while its command is pending (server.h's
 * on_pending_line): a "stop" request is taken and stops the pending
 * command, which then answers; anything else waits its turn (false). */
bool command_pending_line(struct daemon *d, struct client *c, const char *line, size_t len);

/* Ends every snapshot still waiting (the daemon stops). */
void snapshots_free_all(struct daemon *d);

struct jsonw;
/* What an answer's writer returns when w holds the answer's line, its
 * newline and then a frame of bytes (include/perfd/protocol.h); a value no
 * count is, and any other positive one is a bug answered as an error. */
#define COMMAND_FRAMED 0x4652414d
/* Sends what w holds (a whole answer object, or with r COMMAND_FRAMED an
 * answer and its frame) when r is 0 or COMMAND_FRAMED and w has no error,
 * else the out-of-memory error; frees w's buffer either way. */
void command_reply_writer(struct client *c, struct jsonw *w, int r);
/* Sends the error answer code with its message (query.h's query_error). */
void command_reply_error(struct client *c, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Sends the answer that says perfd ran out of memory building one. */
void command_reply_oom(struct client *c);

/* A selection's visible(): the client (a struct perfd_peer) may see p. */
bool daemon_peer_sees(void *peer, const struct process *p);
/* A selection's owners: the client may see what was taken under owner
 * (the history of a process that changed owner, history.h). */
bool daemon_peer_sees_owner(void *peer, uint32_t owner);
struct owner_filter daemon_peer_owners(const struct perfd_peer *peer);

/* The status answer (api/query.h), as root or as others see it, written
 * into w (initialized here); 0 or -ENOMEM. */
int daemon_status(struct daemon *d, bool root, struct jsonw *w);
struct http_answer;
/* The page at path of the --metrics-address server (api/httpd.h): /metrics,
 * the status answer others see in the Prometheus format (api/metrics.h). */
void daemon_metrics_page(struct daemon *d, const char *path, struct http_answer *ret);


#endif
