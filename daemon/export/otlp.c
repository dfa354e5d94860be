/* SPDX-License-Identifier: MIT */
/*
 * otlp.c - the OTLP exporter: each profile one OTLP/HTTP request (the
 * export request encode/otlp.c built on the loop), posted by http.c on
 * the worker's thread.
 *
 *   POST URL/v1development/profiles
 *   body: ExportProfilesServiceRequest, Content-Type application/x-protobuf
 *
 * The path is the one the OTLP specification gives profiles (an
 * OpenTelemetry Collector's otlp receiver listens there, on port 4318 by
 * default).  No profiles version header is sent: none is part of the
 * released specification perfd follows (v1.8.0); the proposal for one
 * (OTLP-Profiles-Development-Version) has a missing header mean the first
 * version anyway.
 *
 * Outcomes, as the specification has them: 2xx sent, unless the answer's
 * partial_success says profiles were rejected (then it is this request's
 * fault: counted as failed, not retried); no reply (a connection, TLS or
 * timeout error), 429, 502, 503 and 504 are retried with the worker's
 * backoff (-EAGAIN); every other status is not to be retried (failed).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include "export/http.h"
#include "export/sinks.h"
#include "perfd/macro.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse pb_response;

int otlp_target_new(const struct export_opts *o, void **ret)
{
	return http_target_new(&o->otlp, "/v1development/profiles", "application/x-protobuf",
			       (struct http_target **)ret);
}

static void otlp_free_target(void *t)
{
	http_target_free(t);
}

/* -EBADMSG with the reason when a 2xx answer rejected profiles, else 0
 * (an answer that does not decode, or warns only, is a success). */
static int check_partial_success(const struct http_reply *reply, char *err, size_t len)
{
	pb_response *resp;
	int r = 0;

	resp = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__unpack(
		NULL, reply->n, reply->data);
	if (!resp)
		return 0;
	if (resp->partial_success && resp->partial_success->rejected_profiles > 0) {
		snprintf(err, len, "rejected %" PRId64 " profiles: %s",
			 resp->partial_success->rejected_profiles,
			 resp->partial_success->error_message ? resp->partial_success->error_message : "");
		r = -EBADMSG;
	}
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__free_unpacked(
		resp, NULL);
	return r;
}

static bool otlp_retry(long status)
{
	return status == 429 || status == 502 || status == 503 || status == 504;
}

static int otlp_send(void *target, const struct export_item *it, const atomic_bool *stop, char *err,
		     size_t len)
{
	_cleanup_free_ struct http_reply *reply = malloc(sizeof(*reply));
	int r;

	if (!reply)
		return -ENOMEM;
	r = http_post(target, NULL, it->data, it->len, otlp_retry, stop, reply, err, len);
	return r < 0 ? r : check_partial_success(reply, err, len);
}

const struct export_sink_ops otlp_sink_ops = {
	.name = "otlp",
	.send = otlp_send,
	.free_target = otlp_free_target,
};
