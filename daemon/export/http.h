/* SPDX-License-Identifier: MIT */
/*
 * http.h - the HTTP pusher behind the exporters that post profiles to a
 * backend (pyroscope.c, otlp.c): one libcurl easy handle per target, on
 * its worker's thread.
 *
 * A target is built on the loop from an export_http (URL, tenant, bearer
 * or basic auth, CA file, certificate checks, timeout) and the path and
 * Content-Type of its protocol, then owned by the worker's thread, which
 * posts with it one request at a time; the handle keeps the connection
 * alive between requests.  Requests time out after the timeout
 * (connection included, which gets at most 5 s), redirects are not
 * followed, only http and https are spoken, and the worker's stop flag
 * aborts a request through the progress callback.  What a status means
 * (retry or give up) is the protocol's: http_post only reports it.
 */
#ifndef PERFD_EXPORT_HTTP_H
#define PERFD_EXPORT_HTTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export/export_opts.h"

#define HTTP_REPLY_MAX 4096

struct http_reply {
	long status;
	size_t n; /* bytes of the body kept, at most HTTP_REPLY_MAX */
	uint8_t data[HTTP_REPLY_MAX + 1]; /* NUL-terminated */
};

struct http_target;

/* Sets up libcurl once per process, from the loop before any thread uses
 * it.  Returns 0 or -EIO. */
int http_global_init(void);
/* A target posting to e->url (trailing '/' dropped) + path with the
 * Content-Type content_type.  Returns 0 or -errno (-ENOMEM, -EIO:
 * libcurl could not start). */
int http_target_new(const struct export_http *e, const char *path, const char *content_type,
		    struct http_target **ret);
struct http_target *http_target_free(struct http_target *t);
/* url without user:password@, into buf. */
void http_describe(const char *url, char *buf, size_t len);
/* url's scheme://host:port only (no credentials, path, query or fragment:
 * what a user who is not root may see of an endpoint), into buf. */
void http_describe_origin(const char *url, char *buf, size_t len);
/* s %-escaped for a URL's query (malloc'd, the caller's), or NULL. */
char *http_escape(const char *s);
/* Whether a reply of this status is to be retried: the protocol's rule. */
typedef bool (*http_retry_t)(long status);

/* POSTs len bytes of data to the target's URL, with "?query" when query
 * is not NULL, and says what came of it, for a sink's send(): 0 for a 2xx
 * reply (its status and the start of its body in *reply), -EAGAIN when no
 * reply came (a refused connection, TLS, a timeout) or retry() says so,
 * -EBADMSG for another status (err: "HTTP 400: the reply's printable
 * text"), -ECANCELED when *stop was set, -ENOMEM. */
int http_post(struct http_target *t, const char *query, const uint8_t *data, size_t len,
	      http_retry_t retry, const atomic_bool *stop, struct http_reply *reply, char *err,
	      size_t errlen);

#endif
