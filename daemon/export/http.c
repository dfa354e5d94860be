/* SPDX-License-Identifier: MIT */
/* http.c - see http.h: posting to a backend with libcurl's easy interface. */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/http.h"
#include "perfd/macro.h"
#include "perfd/protocol.h"
#include "perfd/version.h"

#define CONNECT_TIMEOUT_S 5
#define REPLY_TEXT_MAX 200

struct http_target {
	CURL *curl;
	char *url; /* base URL + path */
	struct curl_slist *headers;
	char *userpwd;
	char *ca_file;
	bool insecure;
	long timeout_s;
};

int http_global_init(void)
{
	static bool done;

	if (!done) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return -EIO;
		done = true;
	}
	return 0;
}

struct http_target *http_target_free(struct http_target *t)
{
	if (!t)
		return NULL;
	if (t->curl)
		curl_easy_cleanup(t->curl);
	curl_slist_free_all(t->headers);
	free(t->url);
	free(t->userpwd);
	free(t->ca_file);
	free(t);
	return NULL;
}

static int add_header(struct curl_slist **list, const char *name, const char *value)
{
	_cleanup_free_ char *h = NULL;
	struct curl_slist *l;

	if (asprintf(&h, "%s: %s", name, value) < 0)
		return -ENOMEM;
	l = curl_slist_append(*list, h);
	if (!l)
		return -ENOMEM;
	*list = l;
	return 0;
}

int http_target_new(const struct export_http *e, const char *path, const char *content_type,
		    struct http_target **ret)
{
	struct http_target *t = calloc(1, sizeof(*t));
	size_t n = strlen(e->url);
	int r = -ENOMEM;

	if (!t)
		return -ENOMEM;
	while (n > 0 && e->url[n - 1] == '/')
		n--;
	if (asprintf(&t->url, "%.*s%s", (int)n, e->url, path) < 0) {
		t->url = NULL;
		goto fail;
	}
	if (add_header(&t->headers, "Content-Type", content_type) < 0 ||
	    add_header(&t->headers, "Expect", "") < 0 ||
	    (e->tenant && add_header(&t->headers, "X-Scope-OrgID", e->tenant) < 0))
		goto fail;
	if (e->bearer_token) {
		_cleanup_free_ char *v = NULL;

		if (asprintf(&v, "Bearer %s", e->bearer_token) < 0 ||
		    add_header(&t->headers, "Authorization", v) < 0)
			goto fail;
	}
	if (e->basic_auth && !(t->userpwd = strdup(e->basic_auth)))
		goto fail;
	if (e->ca_file && !(t->ca_file = strdup(e->ca_file)))
		goto fail;
	t->insecure = e->insecure;
	t->timeout_s = (long)e->timeout_s;
	t->curl = curl_easy_init();
	if (!t->curl) {
		r = -EIO;
		goto fail;
	}
	*ret = t;
	return 0;
fail:
	http_target_free(t);
	return r;
}

/* Where url's scheme:// ends, its host:port starts (after any
 * user:password@) and ends (at the path, query or fragment). */
static void url_split(const char *url, const char **ret_host, const char **ret_hostport,
		      const char **ret_end)
{
	const char *host = strstr(url, "://"), *at, *end;

	host = host ? host + 3 : url;
	end = host + strcspn(host, "/?#");
	at = memchr(host, '@', (size_t)(end - host));
	*ret_host = host;
	*ret_hostport = at ? at + 1 : host;
	*ret_end = end;
}

void http_describe(const char *url, char *buf, size_t len)
{
	const char *host, *hostport, *end;

	url_split(url, &host, &hostport, &end);
	/* user:password@ left out */
	snprintf(buf, len, "%.*s%s", (int)(host - url), url, hostport);
}

void http_describe_origin(const char *url, char *buf, size_t len)
{
	const char *host, *hostport, *end;

	url_split(url, &host, &hostport, &end);
	snprintf(buf, len, "%.*s%.*s", (int)(host - url), url, (int)(end - hostport), hostport);
}

char *http_escape(const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0), *copy;

	if (!e)
		return NULL;
	copy = strdup(e);
	curl_free(e);
	return copy;
}

static size_t on_reply(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct http_reply *r = userdata;
	size_t n = size * nmemb, take = MIN(n, HTTP_REPLY_MAX - r->n);

	memcpy(r->data + r->n, data, take);
	r->n += take;
	r->data[r->n] = '\0';
	return n;
}

static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	return atomic_load((const atomic_bool *)userdata) ? 1 : 0;
}

/* "HTTP 503: the reply's text" (its printable bytes, on one line) into err. */
static void status_error(const struct http_reply *reply, char *err, size_t len)
{
	char text[REPLY_TEXT_MAX + 1];
	size_t n = MIN(reply->n, (size_t)REPLY_TEXT_MAX);

	for (size_t i = 0; i < n; i++)
		text[i] = isprint(reply->data[i]) ? (char)reply->data[i] : ' ';
	text[n] = '\0';
	snprintf(err, len, "HTTP %ld%s%s", reply->status, n ? ": " : "", text);
}

int http_post(struct http_target *t, const char *query, const uint8_t *data, size_t len,
	      http_retry_t retry, const atomic_bool *stop, struct http_reply *reply, char *err,
	      size_t errlen)
{
	_cleanup_free_ char *url = NULL;
	CURLcode c;

	if (asprintf(&url, "%s%s%s", t->url, query ? "?" : "", query ? query : "") < 0) {
		url = NULL;
		return -ENOMEM;
	}
	reply->status = 0;
	reply->n = 0;
	reply->data[0] = '\0';
	curl_easy_reset(t->curl);
	curl_easy_setopt(t->curl, CURLOPT_URL, url);
	curl_easy_setopt(t->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(t->curl, CURLOPT_POST, 1L);
	curl_easy_setopt(t->curl, CURLOPT_POSTFIELDS, (const char *)data);
	curl_easy_setopt(t->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(t->curl, CURLOPT_HTTPHEADER, t->headers);
	curl_easy_setopt(t->curl, CURLOPT_USERAGENT, (const char *)perfd_user_agent);
	curl_easy_setopt(t->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(t->curl, CURLOPT_TIMEOUT, t->timeout_s);
	curl_easy_setopt(t->curl, CURLOPT_CONNECTTIMEOUT, MIN(t->timeout_s, (long)CONNECT_TIMEOUT_S));
	curl_easy_setopt(t->curl, CURLOPT_WRITEFUNCTION, on_reply);
	curl_easy_setopt(t->curl, CURLOPT_WRITEDATA, reply);
	curl_easy_setopt(t->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(t->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(t->curl, CURLOPT_XFERINFODATA, (void *)stop);
	if (t->userpwd) {
		curl_easy_setopt(t->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(t->curl, CURLOPT_USERPWD, t->userpwd);
	}
	if (t->ca_file)
		curl_easy_setopt(t->curl, CURLOPT_CAINFO, t->ca_file);
	if (t->insecure) {
		curl_easy_setopt(t->curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(t->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	c = curl_easy_perform(t->curl);
	if (c == CURLE_ABORTED_BY_CALLBACK)
		return -ECANCELED;
	if (c != CURLE_OK) {
		snprintf(err, errlen, "%s", curl_easy_strerror(c));
		return -EAGAIN;
	}
	(void)curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &reply->status);
	if (reply->status >= 200 && reply->status < 300)
		return 0;
	status_error(reply, err, errlen);
	return retry(reply->status) ? -EAGAIN : -EBADMSG;
}
