/* SPDX-License-Identifier: MIT */
/*
 * server.h - the Unix socket: accepting clients, framing requests into
 * lines, queuing answers, all non-blocking on the sd-event loop.
 *
 * The server knows nothing of the commands: each complete line goes to the
 * on_request callback, which either answers at once (server_reply) or keeps
 * the client waiting (returns SERVER_PENDING) and answers later.  One
 * request per client is in flight: while an answer is pending, further
 * lines from that client wait in its buffer; each is offered once to
 * on_pending_line, which may take it (a "stop" that ends a live snapshot
 * early).  A client that disconnects while waiting is reported to on_cancel.
 *
 * Bounds (api/limits.h has the figures):
 * - a line is at most PERFD_MAX_REQUEST_BYTES (a longer one is answered
 *   request_too_large and the connection closed);
 * - a client's unsent answers: past LIMITS_CLIENT_OUTPUT_BYTES its
 *   requests are not read (no EPOLLIN: they wait in its socket, and a
 *   client that never reads blocks on a full socket) until they drain
 *   below half of it, so a client costs at most the cap plus one answer;
 * - the loop takes one line per client per turn (a deferred event source
 *   per client), so a client that pipelines cannot starve the others, the
 *   timers or the ring buffer;
 * - LIMITS_MAX_CLIENTS connections, LIMITS_CLIENTS_PER_UID of them per
 *   non-root uid, the last LIMITS_CLIENTS_ROOT_RESERVE for root: a client
 *   past these is answered "busy" ("N of N connections for uid U") and
 *   closed;
 * - a client with no request in flight that neither sent a request nor
 *   took an answer byte for the idle timeout is closed, with a "timeout"
 *   error when nothing else is queued for it.
 * Nothing ever blocks the loop.
 *
 * Who is connected is read from the socket once, at accept (api/auth.h), and
 * kept with the client for the commands to filter what they answer; the
 * socket itself is world-connectable (mode 0666).
 */
#ifndef PERFD_SERVER_H
#define PERFD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#define SERVER_PENDING 1
#define ACCEPT_BACKOFF_USEC 100000

struct server;
struct client;
struct perfd_peer;

struct server_opts {
	const char *socket_path;
	int listen_fd; /* from socket activation, or -1 to bind socket_path */
	/* Returns 0 when it replied, SERVER_PENDING when it will, <0 never. */
	int (*on_request)(void *userdata, struct client *c, const char *line, size_t len);
	void (*on_cancel)(void *userdata, struct client *c);
	/* Each line a client sends while its request is pending (line
	 * without its '\n', not NUL-terminated), offered once: returns true
	 * when it took the line (it is dropped), false to leave it waiting
	 * its turn.  It may not reply. */
	bool (*on_pending_line)(void *userdata, struct client *c, const char *line, size_t len);
	void *userdata;
	uint64_t idle_timeout_usec; /* > 0 */
};

/* Binds (replacing a stale socket file, refusing a live one with
 * -EADDRINUSE), listens and adds the socket to the loop. */
int server_new(sd_event *event, const struct server_opts *opts, struct server **ret);
/* Closes every client (a pending one is cancelled: on_cancel) and, when we
 * bound it, removes the socket file. */
struct server *server_free(struct server *s);

/* Queues one answer (a JSON text without the newline) for c and clears its
 * pending state.  Returns 0 or -errno; on failure the client is dropped. */
int server_reply(struct client *c, const char *json, size_t len);
/* Queues one line (a JSON text without the newline) for c ahead of the
 * answer to its pending request, which stays pending (a live snapshot's
 * "started").  Returns 0 or -errno; on failure the client is dropped. */
int server_send_line(struct client *c, const char *json, size_t len);
/* Like server_reply, but takes ownership of json (malloc'ed, size bytes,
 * size > len so the newline fits): a large answer is not copied. */
int server_reply_owned(struct client *c, char *json, size_t len, size_t size);
/* Like server_reply_owned, for an answer whose line is followed by a frame
 * of bytes (include/perfd/protocol.h): buf holds the line, its newline and
 * the frame, len bytes sent as they are. */
int server_reply_frame(struct client *c, char *buf, size_t len, size_t size);
/* Like server_reply, then closes the connection once the answer is sent. */
int server_reply_and_close(struct client *c, const char *json, size_t len);

void client_set_data(struct client *c, void *data);
void *client_get_data(const struct client *c);
/* The credentials of the process that connected (never NULL). */
const struct perfd_peer *client_peer(const struct client *c);
size_t server_clients(const struct server *s);
/* Times accepting paused for ACCEPT_BACKOFF_USEC: perfd was out of
 * descriptors (EMFILE, ENFILE). */
uint64_t server_accept_backoffs(const struct server *s);
uint64_t server_idle_timeout_usec(const struct server *s);

#endif
