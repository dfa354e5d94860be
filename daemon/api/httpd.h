/* SPDX-License-Identifier: MIT */
/*
 * httpd.h - a minimal HTTP/1.x responder on the sd-event loop, for a
 * scraper asking for one page (/metrics).  Not a web server: each
 * connection is one request and one answer, then closed.
 *
 * A request is read until its head ends (the blank line); the body of any
 * request is ignored.  The handler builds the whole answer at once, on the
 * loop (it must be quick: metrics are counters); the answer is written as
 * the socket takes it, and the connection closed when it is sent.
 *
 * Bounds (nothing a client sends can hold the loop or grow perfd):
 * - HTTP_MAX_CONNECTIONS at once; one more closes the oldest (so that
 *   connections held open, by anyone who can reach the port, cannot keep
 *   a scraper out: they only churn);
 * - a request head of at most HTTP_MAX_HEAD_BYTES (else 431 and close);
 * - HTTP_TIMEOUT_USEC from accept to the last byte sent (else closed);
 * - only GET and HEAD (else 405).
 * The listening address is given as HOST:PORT, [IPV6]:PORT or :PORT (every
 * address), resolved once at start.
 */
#ifndef PERFD_HTTPD_H
#define PERFD_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#define HTTP_MAX_CONNECTIONS 8
#define HTTP_MAX_HEAD_BYTES 8192
#define HTTP_TIMEOUT_USEC (10 * 1000000ULL)

struct http_server;

struct http_answer {
	int status;               /* 200, 404, ... */
	const char *content_type; /* for 200 */
	char *body;               /* malloc()ed, taken by the server; NULL: a short text */
	size_t len;
};

/* Answers GET path (without the query); fills *ret. */
typedef void (*http_handler_fn)(void *userdata, const char *path, struct http_answer *ret);

struct http_server_stats {
	uint64_t requests; /* answered 200 */
	uint64_t closed_for_room; /* the oldest, closed for a new one */
	uint64_t errors;   /* answered otherwise, or timed out */
};

/* The request line of head[0..len) ("GET /metrics?x HTTP/1.1"), cut in
 * place: sets *path (without the query) and *head_only.  Returns 0, or
 * the status to answer: 400 (not a request line), 405 (not GET or HEAD),
 * 505 (not HTTP/1.x). */
int http_parse_request_line(char *head, size_t len, bool *head_only, const char **path);

/* Listens on address ("HOST:PORT", "[::1]:PORT", ":PORT").  Returns 0,
 * -EINVAL for an address that is not one, or -errno. */
int http_server_new(sd_event *event, const char *address, http_handler_fn handler, void *userdata,
		    struct http_server **ret);
struct http_server *http_server_free(struct http_server *s);
void http_server_get_stats(const struct http_server *s, struct http_server_stats *ret);

#endif
