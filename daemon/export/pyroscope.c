/* SPDX-License-Identifier: MIT */
/*
 * pyroscope.c - the Pyroscope exporter: each profile one request to the
 * ingest API, with libcurl's easy interface on the worker's thread.
 *
 *   POST URL/ingest?name=SERVICE{k=v,...}&from=S&until=S&format=pprof
 *        &sampleRate=HZ&spyName=perfd
 *   body: the gzipped profile.proto, Content-Type binary/octet-stream
 *
 * For format=pprof Pyroscope takes the profile type (process_cpu,
 * memory) from the pprof's own sample types and the part of name before
 * '{' as service_name, so name carries no ".cpu" suffix (which would end
 * up in the service's name); the labels in braces become the series'
 * labels (exporter.c builds name on the loop, at the labels configured
 * then).  Headers: X-Scope-OrgID for a tenant, Authorization: Bearer or
 * basic auth.  One easy handle per target keeps the connection alive
 * between requests.
 *
 * Outcomes: 2xx sent; a connection, TLS or timeout error, 408, 429 and
 * 5xx are the backend's trouble and retried (-EAGAIN); another 4xx is
 * this request's, dropped and counted as failed.  Requests time out after
 * push-timeout (connection included), redirects are not followed, only
 * http and https are spoken, and the worker's stop flag aborts a request
 * through the progress callback.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/sinks.h"
#include "perfd/macro.h"

#define CONNECT_TIMEOUT_S 5
#define REPLY_KEPT 200

struct pyroscope_target {
	CURL *curl;
	char *ingest_url; /* URL/ingest */
	struct curl_slist *headers;
	char *userpwd;
	char *ca_file;
	bool insecure;
	long timeout_s;
};

int pyroscope_global_init(void)
{
	static bool done;

	if (!done) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return -EIO;
		done = true;
	}
	return 0;
}

static void pyroscope_free_target(void *t)
{
	struct pyroscope_target *p = t;

	if (!p)
		return;
	if (p->curl)
		curl_easy_cleanup(p->curl);
	curl_slist_free_all(p->headers);
	free(p->ingest_url);
	free(p->userpwd);
	free(p->ca_file);
	free(p);
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

int pyroscope_target_new(const struct export_opts *o, void **ret)
{
	struct pyroscope_target *p = calloc(1, sizeof(*p));
	size_t n = strlen(o->push_url);
	int r = -ENOMEM;

	if (!p)
		return -ENOMEM;
	while (n > 0 && o->push_url[n - 1] == '/')
		n--;
	if (asprintf(&p->ingest_url, "%.*s/ingest", (int)n, o->push_url) < 0) {
		p->ingest_url = NULL;
		goto fail;
	}
	if (add_header(&p->headers, "Content-Type", "binary/octet-stream") < 0 ||
	    add_header(&p->headers, "Expect", "") < 0 ||
	    (o->push_tenant && add_header(&p->headers, "X-Scope-OrgID", o->push_tenant) < 0))
		goto fail;
	if (o->push_bearer_token) {
		_cleanup_free_ char *v = NULL;

		if (asprintf(&v, "Bearer %s", o->push_bearer_token) < 0 ||
		    add_header(&p->headers, "Authorization", v) < 0)
			goto fail;
	}
	if (o->push_basic_auth && !(p->userpwd = strdup(o->push_basic_auth)))
		goto fail;
	if (o->push_ca_file && !(p->ca_file = strdup(o->push_ca_file)))
		goto fail;
	p->insecure = o->push_insecure;
	p->timeout_s = (long)o->push_timeout_s;
	p->curl = curl_easy_init();
	if (!p->curl) {
		r = -EIO;
		goto fail;
	}
	*ret = p;
	return 0;
fail:
	pyroscope_free_target(p);
	return r;
}

void pyroscope_describe(const struct export_opts *o, char *buf, size_t len)
{
	const char *url = o->push_url, *host = strstr(url, "://"), *at, *end;

	host = host ? host + 3 : url;
	end = host + strcspn(host, "/?#");
	at = memchr(host, '@', (size_t)(end - host));
	/* user:password@ left out */
	snprintf(buf, len, "%.*s%s", (int)(host - url), url, at ? at + 1 : host);
}

struct reply {
	char text[REPLY_KEPT + 1];
	size_t n;
};

static size_t on_reply(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct reply *r = userdata;
	size_t n = size * nmemb, take = MIN(n, REPLY_KEPT - r->n);

	memcpy(r->text + r->n, data, take);
	r->n += take;
	r->text[r->n] = '\0';
	return n;
}

static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	return atomic_load((const atomic_bool *)userdata) ? 1 : 0;
}

/* A reply's text for a log line: printable, on one line. */
static void printable(char *s)
{
	for (; *s; s++)
		if (!isprint((unsigned char)*s))
			*s = ' ';
}

static int pyroscope_send(void *target, const struct export_item *it, const atomic_bool *stop,
			  char *err, size_t len)
{
	struct pyroscope_target *p = target;
	_cleanup_free_ char *url = NULL;
	struct reply reply = { .n = 0 };
	char *name;
	long status = 0;
	CURLcode c;
	int r;

	name = curl_easy_escape(p->curl, it->push_name, 0);
	if (!name)
		return -ENOMEM;
	r = asprintf(&url, "%s?name=%s&from=%.0f&until=%.0f&format=pprof&sampleRate=%u&spyName=perfd",
		     p->ingest_url, name, it->from_unix, it->to_unix, it->sample_rate_hz);
	curl_free(name);
	if (r < 0) {
		url = NULL;
		return -ENOMEM;
	}
	curl_easy_reset(p->curl);
	curl_easy_setopt(p->curl, CURLOPT_URL, url);
	curl_easy_setopt(p->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(p->curl, CURLOPT_POST, 1L);
	curl_easy_setopt(p->curl, CURLOPT_POSTFIELDS, (const char *)it->data);
	curl_easy_setopt(p->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)it->len);
	curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, p->headers);
	curl_easy_setopt(p->curl, CURLOPT_USERAGENT, "perfd/0.1.0");
	curl_easy_setopt(p->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(p->curl, CURLOPT_TIMEOUT, p->timeout_s);
	curl_easy_setopt(p->curl, CURLOPT_CONNECTTIMEOUT, MIN(p->timeout_s, (long)CONNECT_TIMEOUT_S));
	curl_easy_setopt(p->curl, CURLOPT_WRITEFUNCTION, on_reply);
	curl_easy_setopt(p->curl, CURLOPT_WRITEDATA, &reply);
	curl_easy_setopt(p->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(p->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(p->curl, CURLOPT_XFERINFODATA, (void *)stop);
	if (p->userpwd) {
		curl_easy_setopt(p->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(p->curl, CURLOPT_USERPWD, p->userpwd);
	}
	if (p->ca_file)
		curl_easy_setopt(p->curl, CURLOPT_CAINFO, p->ca_file);
	if (p->insecure) {
		curl_easy_setopt(p->curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(p->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	c = curl_easy_perform(p->curl);
	if (c == CURLE_ABORTED_BY_CALLBACK)
		return -ECANCELED;
	if (c != CURLE_OK) {
		snprintf(err, len, "%s", curl_easy_strerror(c));
		return -EAGAIN;
	}
	(void)curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 200 && status < 300)
		return 0;
	printable(reply.text);
	snprintf(err, len, "HTTP %ld%s%s", status, reply.n ? ": " : "", reply.text);
	if (status == 408 || status == 429 || status >= 500)
		return -EAGAIN;
	return -EBADMSG;
}

const struct export_sink_ops pyroscope_sink_ops = {
	.name = "pyroscope",
	.send = pyroscope_send,
	.free_target = pyroscope_free_target,
};
