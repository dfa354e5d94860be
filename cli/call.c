/* SPDX-License-Identifier: MIT */
/*
 * call.c - the request/answer round trip every subcommand makes, with the
 * decision of what each failure means to the user.
 *
 * Design: one connection per perfctl run, closed when the answer is in
 * (`top` keeps one open and exchanges a request and an answer on it per
 * refresh).
 * client.c reports -errno and never prints; this file is the caller that
 * decides, so it is the one place that words connection and protocol
 * failures and maps them to exit codes.  A daemon that refuses a client
 * (busy) may answer and close before reading the request, so a failed send
 * still looks for an answer before giving up.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "call.h"
#include "client.h"
#include "output.h"
#include "perfd/macro.h"
#include "perfd/protocol.h"

/* How long to look for an explanation after the daemon stopped reading. */
#define SEND_FAILED_GRACE_MS 1000

struct json_object *ctl_request_new(const char *command)
{
	struct json_object *req = json_object_new_object();

	if (!req)
		return NULL;
	if (json_object_object_add(req, "version", json_object_new_int(PERFD_PROTOCOL_VERSION)) < 0 ||
	    json_object_object_add(req, "command", json_object_new_string(command)) < 0) {
		json_object_put(req);
		return NULL;
	}
	return req;
}

/* Reports an answer with "ok": false and picks the exit code. */
static enum perfctl_exit report_daemon_error(const struct ctl_env *env,
					     struct json_object *response)
{
	struct json_object *code = ctl_json_path(response, "error.code");
	struct json_object *msg = ctl_json_path(response, "error.message");
	bool no_process = json_object_is_type(code, json_type_string) &&
			  strcmp(json_object_get_string(code), PERFD_ERR_NO_SUCH_PROCESS) == 0;

	if (env->json) {
		/* The daemon's error object is already the shape scripts expect. */
		if (ctl_print_json(stdout, response) < 0)
			fprintf(stderr, "perfctl: cannot write the error to stdout\n");
	} else if (json_object_is_type(msg, json_type_string) &&
		   json_object_get_string_len(msg) > 0) {
		ctl_message(NULL, json_object_get_string(msg),
			    (size_t)json_object_get_string_len(msg));
	} else if (json_object_is_type(code, json_type_string)) {
		char text[160];
		int n = snprintf(text, sizeof(text), "perfd reported an error: %s",
				 json_object_get_string(code));

		ctl_message(NULL, text, (size_t)MIN(n, (int)sizeof(text) - 1));
	} else {
		fprintf(stderr, "perfctl: perfd reported an error without saying which\n");
	}
	return no_process ? PERFCTL_EXIT_NO_PROCESS : PERFCTL_EXIT_FAILURE;
}

enum perfctl_exit ctl_connect(const struct ctl_env *env, int *ret_fd)
{
	int k = ctl_client_connect(env->socket_path, ret_fd);

	if (k < 0) {
		ctl_error(env, CTL_ERR_CONNECT,
			  "cannot connect to perfd at %s: %s \u2014 is perfd running?",
			  env->socket_path, strerror(-k));
		return PERFCTL_EXIT_CONNECT;
	}
	return PERFCTL_EXIT_OK;
}

/* Reads one answer line on fd and checks it (ctl_receive()); ksend is
 * the send's error (< 0: the request did not go out, and an answer is
 * looked for only to explain why). */
static enum perfctl_exit receive(const struct ctl_env *env, int fd, int timeout_ms,
				 const struct ctl_client_watch *watch, int ksend,
				 struct json_object **ret_response)
{
	_cleanup_(json_object_putp) struct json_object *response = NULL;
	struct json_object *ok, *version;
	int k;

	k = ctl_client_recv_watched(fd, timeout_ms, CTL_CLIENT_MAX_RESPONSE_BYTES, watch, &response);
	if (k < 0) {
		if (ksend < 0)
			ctl_error(env, CTL_ERR_IO, "cannot send the request to perfd at %s: %s",
				  env->socket_path, ctl_client_strerror(ksend));
		else
			ctl_error(env, k == -EBADMSG || k == -EPROTO || k == -ENODATA ||
						       k == -EMSGSIZE ?
					       CTL_ERR_PROTOCOL :
					       CTL_ERR_IO,
				  "%s", ctl_client_strerror(k));
		return PERFCTL_EXIT_FAILURE;
	}

	if (!json_object_object_get_ex(response, "ok", &ok) ||
	    !json_object_is_type(ok, json_type_boolean)) {
		ctl_error(env, CTL_ERR_PROTOCOL, "perfd's answer has no boolean \"ok\" field");
		return PERFCTL_EXIT_FAILURE;
	}
	/* An error is shown whatever its version: it may be the very reason. */
	if (!json_object_get_boolean(ok))
		return report_daemon_error(env, response);

	if (!json_object_object_get_ex(response, "version", &version) ||
	    !json_object_is_type(version, json_type_int)) {
		ctl_error(env, CTL_ERR_PROTOCOL, "perfd's answer has no protocol \"version\"");
		return PERFCTL_EXIT_FAILURE;
	}
	if (json_object_get_int64(version) != PERFD_PROTOCOL_VERSION) {
		ctl_error(env, CTL_ERR_PROTOCOL,
			  "perfd answered in protocol version %" PRId64 "; perfctl speaks version %d",
			  json_object_get_int64(version), PERFD_PROTOCOL_VERSION);
		return PERFCTL_EXIT_FAILURE;
	}

	*ret_response = TAKE_PTR(response);
	return PERFCTL_EXIT_OK;
}

enum perfctl_exit ctl_exchange(const struct ctl_env *env, int fd, struct json_object *request,
			       int timeout_ms, struct json_object **ret_response)
{
	return ctl_exchange_watched(env, fd, request, timeout_ms, NULL, ret_response);
}

enum perfctl_exit ctl_exchange_watched(const struct ctl_env *env, int fd,
				       struct json_object *request, int timeout_ms,
				       const struct ctl_client_watch *watch,
				       struct json_object **ret_response)
{
	int ksend = ctl_client_send(fd, request);

	if (ksend >= 0 && watch)
		watch->fn(watch->userdata, fd); /* the request is out */
	return receive(env, fd, ksend < 0 ? SEND_FAILED_GRACE_MS : timeout_ms,
		       ksend < 0 ? NULL : watch, ksend, ret_response);
}

enum perfctl_exit ctl_receive(const struct ctl_env *env, int fd, int timeout_ms,
			      const struct ctl_client_watch *watch,
			      struct json_object **ret_response)
{
	return receive(env, fd, timeout_ms, watch, 0, ret_response);
}

enum perfctl_exit ctl_call_keep(const struct ctl_env *env, struct json_object *request,
				int timeout_ms, struct json_object **ret_response, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	enum perfctl_exit rc = ctl_connect(env, &fd);

	if (rc == PERFCTL_EXIT_OK)
		rc = ctl_exchange(env, fd, request, timeout_ms, ret_response);
	if (rc == PERFCTL_EXIT_OK && ret_fd)
		*ret_fd = TAKE_FD(fd);
	return rc;
}

enum perfctl_exit ctl_call(const struct ctl_env *env, struct json_object *request,
			   int timeout_ms, struct json_object **ret_response)
{
	return ctl_call_keep(env, request, timeout_ms, ret_response, NULL);
}
