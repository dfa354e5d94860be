/* SPDX-License-Identifier: MIT */
/* httpd.c - see httpd.h for the design and the bounds. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/httpd.h"
#include "base/clock.h"
#include "perfd/macro.h"

struct conn {
	struct http_server *server;
	int fd;
	sd_event_source *io, *timeout;
	char in[HTTP_MAX_HEAD_BYTES];
	size_t in_len;
	char *out; /* head and body, once answered */
	size_t out_len, out_sent;
	struct conn *prev, *next;
};

struct http_server {
	sd_event *event;
	int fd;
	sd_event_source *listen_io;
	http_handler_fn handler;
	void *userdata;
	struct conn *conns;
	size_t n_conns;
	struct http_server_stats stats;
};

static void conn_free(struct conn *c)
{
	struct http_server *s = c->server;

	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	sd_event_source_disable_unref(c->io);
	sd_event_source_disable_unref(c->timeout);
	close(c->fd);
	free(c->out);
	free(c);
}

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 431: return "Request Header Fields Too Large";
	case 505: return "HTTP Version Not Supported";
	default: return "Internal Server Error";
	}
}

/* Queues the answer and switches the connection to writing.  Returns 0 or
 * -ENOMEM. */
static int conn_answer(struct conn *c, struct http_answer *a, bool head_only)
{
	_cleanup_free_ char *body = a->body;
	char text[64];
	const char *type = a->content_type;
	size_t len = a->len;
	int n;

	if (!body) {
		len = (size_t)snprintf(text, sizeof(text), "%d %s\n", a->status, reason(a->status));
		type = "text/plain; charset=utf-8";
	}
	n = asprintf(&c->out,
		     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		     "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
		     a->status, reason(a->status), type, len,
		     a->status == 405 ? "Allow: GET, HEAD\r\n" : "");
	if (n < 0) {
		c->out = NULL;
		return -ENOMEM;
	}
	c->out_len = (size_t)n;
	if (!head_only) {
		char *all = realloc(c->out, c->out_len + len);

		if (!all)
			return -ENOMEM;
		memcpy(all + c->out_len, body ? body : text, len);
		c->out = all;
		c->out_len += len;
	}
	return sd_event_source_set_io_events(c->io, EPOLLOUT);
}

int http_parse_request_line(char *head, size_t len, bool *head_only, const char **path)
{
	char *eol = memchr(head, '\n', len), *target, *version, *q;

	if (!eol)
		return 400;
	*eol = '\0';
	if (eol > head && eol[-1] == '\r')
		eol[-1] = '\0';
	target = strchr(head, ' ');
	version = target ? strchr(target + 1, ' ') : NULL;
	if (!version)
		return 400;
	*target++ = '\0';
	*version++ = '\0';
	if (strncmp(version, "HTTP/1.", 7) != 0)
		return 505;
	if (strcmp(head, "GET") != 0 && strcmp(head, "HEAD") != 0)
		return 405;
	q = strchr(target, '?');
	if (q)
		*q = '\0';
	*head_only = strcmp(head, "HEAD") == 0;
	*path = target;
	return 0;
}

static int conn_handle(struct conn *c, size_t head_len)
{
	struct http_server *s = c->server;
	struct http_answer a = { .status = 404 };
	bool head_only = false;
	const char *path;
	int r = http_parse_request_line(c->in, head_len, &head_only, &path);

	if (r)
		a.status = r;
	else
		s->handler(s->userdata, path, &a);
	if (a.status == 200)
		s->stats.requests++;
	else
		s->stats.errors++;
	return conn_answer(c, &a, head_only);
}

/* Where the head ends (after its blank line), or 0 when it has not yet. */
static size_t head_end(const char *p, size_t len)
{
	for (size_t i = 1; i < len; i++) {
		if (p[i] != '\n')
			continue;
		if (p[i - 1] == '\n')
			return i + 1;
		if (i >= 2 && p[i - 1] == '\r' && p[i - 2] == '\n')
			return i + 1;
	}
	return 0;
}

static int conn_read(struct conn *c)
{
	ssize_t n = read(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len);
	size_t end;

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET; /* closed before asking */
	end = head_end(c->in, c->in_len + (size_t)n);
	c->in_len += (size_t)n;
	if (end)
		return conn_handle(c, end);
	if (c->in_len == sizeof(c->in)) {
		c->server->stats.errors++;
		return conn_answer(c, &(struct http_answer){ .status = 431 }, false);
	}
	return 0;
}

/* Returns 1 when all is sent, 0 to wait, or -errno. */
static int conn_write(struct conn *c)
{
	ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	c->out_sent += (size_t)n;
	return c->out_sent == c->out_len;
}

static int on_conn_io(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct conn *c = userdata;
	int r;

	if (c->out)
		r = conn_write(c);
	else
		r = conn_read(c);
	if (r != 0) {
		if (r > 0)
			(void)shutdown(c->fd, SHUT_WR);
		conn_free(c);
	}
	return 0;
}

static int on_conn_timeout(sd_event_source *es, uint64_t usec, void *userdata)
{
	struct conn *c = userdata;

	c->server->stats.errors++;
	conn_free(c);
	return 0;
}

static int conn_new(struct http_server *s, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	int r;

	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->server = s;
	c->fd = fd;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	r = sd_event_add_io(s->event, &c->io, fd, EPOLLIN, on_conn_io, c);
	if (r >= 0)
		r = sd_event_add_time_relative(s->event, &c->timeout, CLOCK_MONOTONIC, HTTP_TIMEOUT_USEC,
					       0, on_conn_timeout, c);
	if (r < 0)
		conn_free(c);
	return r;
}

static int on_accept(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct http_server *s = userdata;

	for (;;) {
		int cfd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0)
			return 0; /* EAGAIN, or a transient error: the next event retries */
		if (s->n_conns >= HTTP_MAX_CONNECTIONS) {
			/* the oldest goes: connections held open cannot
			 * keep a scraper out */
			struct conn *oldest = s->conns;

			while (oldest->next)
				oldest = oldest->next;
			s->stats.closed_for_room++;
			conn_free(oldest);
		}
		(void)conn_new(s, cfd);
	}
}

/* "HOST:PORT", "[V6]:PORT", ":PORT" into its host (NULL: any) and port. */
static int split_address(char *a, char **host, char **port)
{
	char *colon = strrchr(a, ':');

	if (!colon || !colon[1])
		return -EINVAL;
	*colon = '\0';
	*port = colon + 1;
	if (a[0] == '[') {
		size_t n = strlen(a);

		if (n < 2 || a[n - 1] != ']')
			return -EINVAL;
		a[n - 1] = '\0';
		a++;
	} else if (strchr(a, ':')) {
		return -EINVAL; /* an IPv6 address must be in brackets */
	}
	*host = a[0] ? a : NULL;
	return 0;
}

static int listen_on(const char *address)
{
	_cleanup_free_ char *copy = strdup(address);
	struct addrinfo hints = {
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res = NULL;
	char *host, *port;
	int r, fd = -1;

	if (!copy)
		return -ENOMEM;
	if (split_address(copy, &host, &port) < 0)
		return -EINVAL;
	r = getaddrinfo(host, port, &hints, &res);
	if (r != 0)
		return r == EAI_SYSTEM ? -errno : r == EAI_MEMORY ? -ENOMEM : -EINVAL;
	r = -EADDRNOTAVAIL;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int one = 1;

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			r = -errno;
			continue;
		}
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0) {
			r = fd;
			break;
		}
		r = -errno;
		close(fd);
	}
	freeaddrinfo(res);
	return r;
}

int http_server_new(sd_event *event, const char *address, http_handler_fn handler, void *userdata,
		    struct http_server **ret)
{
	struct http_server *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->event = sd_event_ref(event);
	s->handler = handler;
	s->userdata = userdata;
	s->fd = listen_on(address);
	if (s->fd < 0) {
		r = s->fd;
		http_server_free(s);
		return r;
	}
	r = sd_event_add_io(event, &s->listen_io, s->fd, EPOLLIN, on_accept, s);
	if (r < 0) {
		http_server_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

struct http_server *http_server_free(struct http_server *s)
{
	if (!s)
		return NULL;
	while (s->conns)
		conn_free(s->conns);
	sd_event_source_disable_unref(s->listen_io);
	if (s->fd >= 0)
		close(s->fd);
	sd_event_unref(s->event);
	free(s);
	return NULL;
}

void http_server_get_stats(const struct http_server *s, struct http_server_stats *ret)
{
	*ret = s ? s->stats : (struct http_server_stats){ 0 };
}
