/* SPDX-License-Identifier: MIT */
/*
 * server.h - the Unix socket: accepting clients, framing requests into
 * lines, queuing answers, all non-blocking on the sd-event loop.
 *
 * The server knows nothing of the commands: each complete line goes to the
 * on_request callback, which either answers at once (server_reply) or keeps
 * the client waiting (returns SERVER_PENDING) and answers later.  While an
 * answer is pending, further lines from that client wait in its buffer.  A
 * client that disconnects while waiting is reported to on_cancel.
 *
 * Bounds: PERFD_MAX_REQUEST_BYTES per line (a longer one is answered with
 * request_too_large and the connection closed), SERVER_MAX_CLIENTS
 * connections (more are answered "busy" and closed).  A slow reader only
 * grows its own output queue; nothing ever blocks the loop.
 *
 * Who is connected is read from the socket once, at accept (api/auth.h), and
 * kept with the client for the commands to filter what they answer; the
 * socket itself is world-connectable (mode 0666).
 */
#ifndef PERFD_SERVER_H
#define PERFD_SERVER_H

#include <stddef.h>
#include <systemd/sd-event.h>

#define SERVER_MAX_CLIENTS 128
#define SERVER_PENDING 1

struct server;
struct client;
struct perfd_peer;

struct server_opts {
	const char *socket_path;
	int listen_fd; /* from socket activation, or -1 to bind socket_path */
	/* Returns 0 when it replied, SERVER_PENDING when it will, <0 never. */
	int (*on_request)(void *userdata, struct client *c, const char *line, size_t len);
	void (*on_cancel)(void *userdata, struct client *c);
	void *userdata;
};

/* Binds (replacing a stale socket file, refusing a live one with
 * -EADDRINUSE), listens and adds the socket to the loop. */
int server_new(sd_event *event, const struct server_opts *opts, struct server **ret);
/* Closes every client and, when we bound it, removes the socket file. */
struct server *server_free(struct server *s);

/* Queues one answer (a JSON text without the newline) for c and clears its
 * pending state.  Returns 0 or -errno; on failure the client is dropped. */
int server_reply(struct client *c, const char *json, size_t len);
/* Like server_reply, but takes ownership of json (malloc'ed, size bytes,
 * size > len so the newline fits): a large answer is not copied. */
int server_reply_owned(struct client *c, char *json, size_t len, size_t size);
/* Like server_reply, then closes the connection once the answer is sent. */
int server_reply_and_close(struct client *c, const char *json, size_t len);

void client_set_data(struct client *c, void *data);
void *client_get_data(const struct client *c);
/* The credentials of the process that connected (never NULL). */
const struct perfd_peer *client_peer(const struct client *c);
size_t server_clients(const struct server *s);

#endif
