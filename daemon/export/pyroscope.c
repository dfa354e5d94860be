/* SPDX-License-Identifier: MIT */
/*
 * pyroscope.c - the Pyroscope exporter: each profile one request to the
 * ingest API, posted by http.c on the worker's thread.
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
 * basic auth (http.c).
 *
 * Outcomes: 2xx sent; no reply (a connection, TLS or timeout error), 408,
 * 429 and 5xx are the backend's trouble and retried (-EAGAIN); another
 * 4xx is this request's, dropped and counted as failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "export/http.h"
#include "export/sinks.h"
#include "perfd/macro.h"

int pyroscope_target_new(const struct export_opts *o, void **ret)
{
	return http_target_new(&o->push, "/ingest", "binary/octet-stream", (struct http_target **)ret);
}

static void pyroscope_free_target(void *t)
{
	http_target_free(t);
}

static bool pyroscope_retry(long status)
{
	return status == 408 || status == 429 || status >= 500;
}

static int pyroscope_send(void *target, const struct export_item *it, const atomic_bool *stop,
			  char *err, size_t len)
{
	_cleanup_free_ struct http_reply *reply = malloc(sizeof(*reply));
	_cleanup_free_ char *name = http_escape(it->push_name), *query = NULL;

	if (!reply || !name)
		return -ENOMEM;
	if (asprintf(&query, "name=%s&from=%.0f&until=%.0f&format=pprof&sampleRate=%u&spyName=perfd", name,
		     it->from_unix, it->to_unix, it->sample_rate_hz) < 0) {
		query = NULL;
		return -ENOMEM;
	}
	return http_post(target, query, it->data, it->len, pyroscope_retry, stop, reply, err, len);
}

const struct export_sink_ops pyroscope_sink_ops = {
	.name = "pyroscope",
	.send = pyroscope_send,
	.free_target = pyroscope_free_target,
};
