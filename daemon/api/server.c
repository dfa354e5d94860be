/* SPDX-License-Identifier: MIT */
/* server.c - see server.h for the design. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "perfd/protocol.h"
#include "api/auth.h"
#include "api/limits.h"
#include "api/server.h"
#include "base/clock.h"

/* An output buffer larger than this is freed once all of it is sent. */
#define OUT_KEEP_BYTES (64 * 1024)
/* The idle timeout fires up to a second late: it is a bound, not a clock. */
#define USEC_IDLE_ACCURACY 1000000

struct client {
	struct server *server;
	int fd;
	sd_event_source *io;
	sd_event_source *next_line; /* defer: handles one waiting line */
	sd_event_source *idle;      /* the idle timeout */
	uint64_t active_usec;       /* a request read or an answer byte sent */
	char *in;     /* PERFD_MAX_REQUEST_BYTES */
	size_t in_len;
	char *out;
	size_t out_len, out_sent, out_cap;
	bool pending;
	size_t offered;   /* bytes of in offered to on_pending_line already */
	bool close_after_flush;
	bool eof;
	bool dead;        /* broken: free at the next kick */
	bool dispatching; /* inside on_request: replies only queue */
	bool throttled;   /* over LIMITS_CLIENT_OUTPUT_BYTES, until below half */
	bool admitted;    /* counts in its uid's share (not refused at accept) */
	struct perfd_peer peer; /* who connected, read once at accept */
	void *data;
	struct client *prev, *next;
};

struct server {
	sd_event *event;
	struct server_opts opts;
	char *path; /* set when we bound it and must unlink it */
	int fd;
	sd_event_source *listen_io;
	sd_event_source *accept_again; /* the pause after EMFILE/ENFILE */
	uint64_t accept_backoffs;
	struct client *clients;
	size_t n_clients, n_admitted;
};

static void client_free(struct client *c)
{
	struct server *s;

	if (!c)
		return;
	s = c->server;
	if (c->pending && s->opts.on_cancel)
		s->opts.on_cancel(s->opts.userdata, c);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_clients--;
	s->n_admitted -= c->admitted;
	sd_event_source_disable_unref(c->io);
	sd_event_source_disable_unref(c->next_line);
	sd_event_source_disable_unref(c->idle);
	closep(&c->fd);
	free(c->in);
	free(c->out);
	free(c);
}

static size_t unsent(const struct client *c)
{
	return c->out_len - c->out_sent;
}

/* A line to handle: a complete one, or a full buffer without one (which
 * is answered request_too_large). */
static bool has_line(const struct client *c)
{
	return c->in_len >= PERFD_MAX_REQUEST_BYTES || memchr(c->in, '\n', c->in_len);
}

/* One request in flight, and none while the answers are over the cap. */
static bool may_take_line(const struct client *c)
{
	return !c->pending && !c->close_after_flush && !c->dead && !c->throttled && has_line(c);
}

static void update_events(struct client *c)
{
	uint32_t ev = 0;

	/* A throttled client's requests wait in its socket: a full socket
	 * is what tells a client that never reads to stop writing. */
	if (!c->eof && !c->close_after_flush && !c->throttled && c->in_len < PERFD_MAX_REQUEST_BYTES)
		ev |= EPOLLIN;
	if (c->out_sent < c->out_len)
		ev |= EPOLLOUT;
	(void)sd_event_source_set_io_events(c->io, ev);
	(void)sd_event_source_set_enabled(c->next_line,
					  may_take_line(c) ? SD_EVENT_ONESHOT : SD_EVENT_OFF);
}

/* Writes what it can.  Returns <0 when the client must go. */
static int flush_out(struct client *c)
{
	size_t was = c->out_sent;

	while (c->out_sent < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			return negative_errno();
		}
		c->out_sent += n;
	}
	if (c->out_sent > was)
		c->active_usec = now_monotonic_ns() / 1000;
	if (c->out_sent == c->out_len) {
		c->out_sent = c->out_len = 0;
		if (c->close_after_flush)
			return -ECONNRESET;
		/* all sent: a large buffer (a snapshot's, a flood's) goes back */
		if (c->out_cap > OUT_KEEP_BYTES) {
			free(c->out);
			c->out = NULL;
			c->out_cap = 0;
		}
	}
	if (unsent(c) > LIMITS_CLIENT_OUTPUT_BYTES)
		c->throttled = true;
	else if (unsent(c) <= LIMITS_CLIENT_OUTPUT_BYTES / 2)
		c->throttled = false;
	return 0;
}

static int reply_error_and_close(struct client *c, const char *code, const char *msg);
static void offer_lines(struct client *c);

/* Hands the next line to on_request.  Replies made meanwhile are only
 * queued (c->dispatching), so nothing here recurses or frees the client. */
static void take_line(struct client *c)
{
	struct server *s = c->server;
	char *nl = memchr(c->in, '\n', c->in_len);
	_cleanup_free_ char *line = NULL;
	size_t len;

	c->dispatching = true;
	if (!nl) {
		(void)reply_error_and_close(c, PERFD_ERR_TOO_LARGE,
					    "request longer than the protocol's maximum line length");
		c->dispatching = false;
		return;
	}
	len = nl - c->in;
	line = malloc(len + 1);
	if (!line) {
		c->dead = true;
		c->dispatching = false;
		return;
	}
	memcpy(line, c->in, len);
	line[len] = 0;
	memmove(c->in, nl + 1, c->in_len - len - 1);
	c->in_len -= len + 1;
	c->active_usec = now_monotonic_ns() / 1000;
	c->pending = true;
	c->offered = 0;
	(void)s->opts.on_request(s->opts.userdata, c, line, len);
	c->dispatching = false;
	/* lines read with this one (a stop sent right behind its snapshot)
	 * are offered now: no other read may come to offer them */
	offer_lines(c);
}

/* Offers each line that arrives while a request is pending to
 * on_pending_line, once: a line it takes is dropped, the others wait their
 * turn. */
static void offer_lines(struct client *c)
{
	struct server *s = c->server;
	char *line, *nl;

	if (!c->pending || c->dead || !s->opts.on_pending_line)
		return;
	c->dispatching = true;
	while (c->offered < c->in_len &&
	       (nl = memchr((line = c->in + c->offered), '\n', c->in_len - c->offered))) {
		size_t len = (size_t)(nl - line) + 1;

		if (s->opts.on_pending_line(s->opts.userdata, c, line, len - 1)) {
			memmove(line, nl + 1, c->in_len - c->offered - len);
			c->in_len -= len;
		} else {
			c->offered += len;
		}
	}
	c->dispatching = false;
}

/* Moves the client forward after anything happened to it: sends, asks
 * the loop for its next line, and frees it when it is finished or
 * broken. */
static void client_kick(struct client *c)
{
	if (!c->dead && flush_out(c) < 0)
		c->dead = true;
	if (c->dead || (c->eof && !c->pending && c->out_len == 0 && !has_line(c))) {
		client_free(c);
		return;
	}
	update_events(c);
}

/* One line per client per turn of the loop: a client that pipelines
 * cannot keep the loop, or the other clients, waiting. */
static int on_next_line(sd_event_source *es, void *userdata)
{
	struct client *c = userdata;

	if (may_take_line(c))
		take_line(c);
	client_kick(c);
	return 0;
}

/* The idle timeout: a client with no request in flight that neither sent
 * a request nor took an answer byte for the timeout is closed, with an
 * error when its answers are all sent (else it is not reading them). */
static int on_idle(sd_event_source *es, uint64_t usec, void *userdata)
{
	struct client *c = userdata;
	uint64_t timeout = c->server->opts.idle_timeout_usec;
	char msg[96];

	if (c->pending || c->active_usec + timeout > usec) {
		(void)sd_event_source_set_time(es, (c->pending ? usec : c->active_usec) + timeout);
		(void)sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
		return 0;
	}
	if (unsent(c) > 0 || c->close_after_flush) {
		c->dead = true;
		client_kick(c);
		return 0;
	}
	(void)snprintf(msg, sizeof(msg), "no request for %" PRIu64 " s: closing the connection",
		       timeout / 1000000);
	(void)reply_error_and_close(c, PERFD_ERR_TIMEOUT, msg);
	return 0;
}

/* Queues json and, with newline, its newline for c.  An answer (answer)
 * ends c's pending request; a line ahead of the answer (server_send_line)
 * leaves it pending. */
static int queue_reply(struct client *c, const char *json, size_t len, bool newline,
		       bool close_after, bool answer)
{
	size_t need;

	/* A client that reads, but never all of it, would otherwise keep
	 * the sent bytes ahead of the unsent ones for ever: move the unsent
	 * ones to the front once the sent ones are the larger part (each byte
	 * moves O(1) times on average). */
	if (c->out_sent > 0 && c->out_sent >= unsent(c)) {
		memmove(c->out, c->out + c->out_sent, unsent(c));
		c->out_len -= c->out_sent;
		c->out_sent = 0;
	}
	need = c->out_len + len + newline;

	if (need > c->out_cap) {
		size_t cap = MAX(need, c->out_cap * 2);
		char *out = realloc(c->out, cap);

		if (!out) {
			c->dead = true;
			if (!c->dispatching)
				client_kick(c);
			return -ENOMEM;
		}
		c->out = out;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, json, len);
	if (newline)
		c->out[c->out_len + len] = '\n';
	c->out_len += len + newline;
	if (answer)
		c->pending = false;
	c->close_after_flush |= close_after;
	if (!c->dispatching)
		client_kick(c);
	return 0;
}

int server_reply(struct client *c, const char *json, size_t len)
{
	return queue_reply(c, json, len, true, false, true);
}

int server_send_line(struct client *c, const char *json, size_t len)
{
	return queue_reply(c, json, len, true, false, false);
}

/* server_reply_owned and server_reply_frame: buf (size bytes) handed
 * over, len of them sent, a newline after them with newline. */
static int reply_owned(struct client *c, char *buf, size_t len, size_t size, bool newline)
{
	int r;

	if (c->out_len > 0 || size < len + newline) {
		/* something is still queued: append behind it */
		r = queue_reply(c, buf, len, newline, false, true);
		free(buf);
		return r;
	}
	/* the common case: hand the buffer over, no copy of a large answer */
	free(c->out);
	c->out = buf;
	c->out_cap = size;
	c->out_sent = 0;
	if (newline)
		c->out[len] = '\n';
	c->out_len = len + newline;
	c->pending = false;
	if (!c->dispatching)
		client_kick(c);
	return 0;
}

int server_reply_owned(struct client *c, char *json, size_t len, size_t size)
{
	return reply_owned(c, json, len, size, true);
}

int server_reply_frame(struct client *c, char *buf, size_t len, size_t size)
{
	return reply_owned(c, buf, len, size, false);
}

int server_reply_and_close(struct client *c, const char *json, size_t len)
{
	return queue_reply(c, json, len, true, true, true);
}

static int reply_error_and_close(struct client *c, const char *code, const char *msg)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf),
			 "{\"version\":%d,\"ok\":false,\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
			 PERFD_PROTOCOL_VERSION, code, msg);

	return server_reply_and_close(c, buf, n);
}

static int on_client_io(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct client *c = userdata;

	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR) && !c->eof && !c->close_after_flush &&
	    c->in_len < PERFD_MAX_REQUEST_BYTES) {
		ssize_t n = recv(fd, c->in + c->in_len, PERFD_MAX_REQUEST_BYTES - c->in_len,
				 MSG_DONTWAIT);

		if (n < 0 && errno != EAGAIN && errno != EINTR)
			c->dead = true;
		else if (n == 0)
			c->eof = true; /* a half-closed client still gets its answers */
		else if (n > 0)
			c->in_len += n;
		offer_lines(c);
	}
	/* Hang-up means the peer closed both directions: no answer can reach
	 * it any more, so a pending one is cancelled.  (A half-close only
	 * reads as EOF, and still gets its answers.) */
	if (revents & (EPOLLHUP | EPOLLERR))
		c->dead = true;
	client_kick(c);
	return 0;
}

/* Whether c may stay: its uid's share and root's reserve (api/limits.h).
 * Returns 0, or answers busy and returns -EBUSY. */
static int admit(struct server *s, struct client *c)
{
	size_t by_uid = 0;
	char msg[128];
	int r;

	for (struct client *o = s->clients; o; o = o->next)
		by_uid += o->admitted && o->peer.uid == c->peer.uid;
	r = limits_admit(c->peer.uid, by_uid, s->n_admitted, LIMITS_MAX_CLIENTS,
			 LIMITS_CLIENTS_PER_UID, LIMITS_CLIENTS_ROOT_RESERVE);
	if (r == -EUSERS)
		(void)snprintf(msg, sizeof(msg), "%zu of %d connections for uid %" PRIu32, by_uid,
			       LIMITS_CLIENTS_PER_UID, c->peer.uid);
	else if (r < 0)
		(void)snprintf(msg, sizeof(msg), "too many clients connected to perfd (%zu of %d)",
			       s->n_admitted, LIMITS_MAX_CLIENTS);
	if (r < 0) {
		(void)reply_error_and_close(c, PERFD_ERR_BUSY, msg);
		return -EBUSY;
	}
	c->admitted = true;
	s->n_admitted++;
	return 0;
}

static int on_accept_again(sd_event_source *es, uint64_t usec, void *userdata)
{
	struct server *s = userdata;

	(void)sd_event_source_set_enabled(s->listen_io, SD_EVENT_ON);
	return 0;
}

static void pause_accepting(struct server *s)
{
	uint64_t now;

	s->accept_backoffs++;
	if (sd_event_now(s->event, CLOCK_MONOTONIC, &now) < 0)
		return;
	if (!s->accept_again &&
	    sd_event_add_time(s->event, &s->accept_again, CLOCK_MONOTONIC, 0, 0, on_accept_again,
			      s) < 0)
		return; /* without the timer, spinning is better than deaf */
	(void)sd_event_source_set_time(s->accept_again, now + ACCEPT_BACKOFF_USEC);
	(void)sd_event_source_set_enabled(s->accept_again, SD_EVENT_ONESHOT);
	(void)sd_event_source_set_enabled(s->listen_io, SD_EVENT_OFF);
}

static int on_accept(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct server *s = userdata;
	_cleanup_close_ int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct client *c;
	int r;

	if (cfd < 0) {
		/* Out of descriptors: the connection stays queued and the
		 * socket readable, so the loop would spin on it.  Stop
		 * listening for a moment; clients connected already are
		 * served meanwhile, and their closing frees descriptors. */
		if (errno == EMFILE || errno == ENFILE)
			pause_accepting(s);
		return 0; /* EAGAIN, or a client that went away: nothing to do */
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return 0;
	c->in = malloc(PERFD_MAX_REQUEST_BYTES);
	c->active_usec = now_monotonic_ns() / 1000;
	if (!c->in || sd_event_add_io(s->event, &c->io, cfd, EPOLLIN, on_client_io, c) < 0 ||
	    sd_event_add_defer(s->event, &c->next_line, on_next_line, c) < 0 ||
	    sd_event_add_time(s->event, &c->idle, CLOCK_MONOTONIC,
			      c->active_usec + s->opts.idle_timeout_usec, USEC_IDLE_ACCURACY, on_idle,
			      c) < 0) {
		sd_event_source_disable_unref(c->io);
		sd_event_source_disable_unref(c->next_line);
		free(c->in);
		free(c);
		return 0;
	}
	(void)sd_event_source_set_enabled(c->next_line, SD_EVENT_OFF);
	c->server = s;
	/* Until the credentials are read the client is nobody: no uid
	 * owns a process as PERFD_OWNER_NONE, so it would see nothing. */
	c->peer = (struct perfd_peer){ .uid = PERFD_OWNER_NONE, .gid = PERFD_OWNER_NONE };
	r = auth_peer_from_socket(cfd, &c->peer);
	c->fd = TAKE_FD(cfd);
	c->next = s->clients;
	if (s->clients)
		s->clients->prev = c;
	s->clients = c;
	s->n_clients++;
	/* a refused client is freed once its answer is sent: c is not used after */
	if (r < 0)
		(void)reply_error_and_close(c, PERFD_ERR_INTERNAL,
					    "cannot read the credentials of this connection");
	else
		(void)admit(s, c);
	return 0;
}

/* A socket file that nobody accepts on is a leftover of a crashed daemon. */
static int socket_is_live(const struct sockaddr_un *sa, socklen_t len)
{
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return negative_errno();
	if (connect(fd, (const struct sockaddr *)sa, len) == 0)
		return 1;
	return errno == ECONNREFUSED || errno == ENOENT ? 0 : negative_errno();
}

static int bind_socket(struct server *s, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	_cleanup_close_ int fd = -1;
	int r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	len = offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return negative_errno();
	if (bind(fd, (struct sockaddr *)&sa, len) < 0) {
		if (errno != EADDRINUSE)
			return negative_errno();
		r = socket_is_live(&sa, len);
		if (r < 0)
			return r;
		if (r > 0)
			return -EADDRINUSE;
		if (unlink(path) < 0 && errno != ENOENT)
			return negative_errno();
		if (bind(fd, (struct sockaddr *)&sa, len) < 0)
			return negative_errno();
	}
	/* Every local user may connect; what each sees is decided by its
	 * credentials (api/auth.h), not by this mode. */
	if (chmod(path, 0666) < 0 || listen(fd, 64) < 0) {
		r = negative_errno();
		(void)unlink(path);
		return r;
	}
	s->path = strdup(path);
	if (!s->path) {
		(void)unlink(path);
		return -ENOMEM;
	}
	return TAKE_FD(fd);
}

int server_new(sd_event *event, const struct server_opts *opts, struct server **ret)
{
	struct server *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->event = sd_event_ref(event);
	s->opts = *opts;
	s->fd = -1;
	if (opts->listen_fd >= 0) {
		s->fd = opts->listen_fd;
		r = fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
		if (r < 0) {
			r = negative_errno();
			goto fail;
		}
	} else {
		r = bind_socket(s, opts->socket_path);
		if (r < 0)
			goto fail;
		s->fd = r;
	}
	r = sd_event_add_io(event, &s->listen_io, s->fd, EPOLLIN, on_accept, s);
	if (r < 0)
		goto fail;
	*ret = s;
	return 0;
fail:
	server_free(s);
	return r;
}

struct server *server_free(struct server *s)
{
	if (!s)
		return NULL;
	/* a pending request's command is cancelled, as when its client goes
	 * away: whatever it holds (a model being built) is freed */
	while (s->clients)
		client_free(s->clients);
	sd_event_source_disable_unref(s->listen_io);
	sd_event_source_disable_unref(s->accept_again);
	closep(&s->fd);
	if (s->path)
		(void)unlink(s->path);
	free(s->path);
	sd_event_unref(s->event);
	free(s);
	return NULL;
}

void client_set_data(struct client *c, void *data)
{
	c->data = data;
}

void *client_get_data(const struct client *c)
{
	return c->data;
}

const struct perfd_peer *client_peer(const struct client *c)
{
	return &c->peer;
}

uint64_t server_accept_backoffs(const struct server *s)
{
	return s->accept_backoffs;
}

size_t server_clients(const struct server *s)
{
	return s->n_clients;
}

uint64_t server_idle_timeout_usec(const struct server *s)
{
	return s->opts.idle_timeout_usec;
}
