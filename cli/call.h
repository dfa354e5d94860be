/* SPDX-License-Identifier: MIT */
/*
 * call.h - one request to perfd as a subcommand sees it: connect, ask, wait,
 * and turn every way that can fail into a printed error and an exit code.
 */
#ifndef PERFCTL_CALL_H
#define PERFCTL_CALL_H

#include "perfctl.h"

struct json_object;

/* Timeout for commands the daemon answers at once. */
#define CTL_CALL_TIMEOUT_MS (30 * 1000)

/* Builds {"version": PERFD_PROTOCOL_VERSION, "command": command}.  NULL on
 * ENOMEM.  The caller adds arguments and drops it with json_object_put(). */
struct json_object *ctl_request_new(const char *command);

/* Sends request to the daemon at env->socket_path and waits up to timeout_ms
 * (< 0: forever) for the answer.  Returns PERFCTL_EXIT_OK and the whole
 * answer object ({"version":1,"ok":true,...}, owned by the caller) in
 * *ret_response; otherwise the error has been reported (see ctl_error(); a
 * daemon error is printed as "perfctl: MESSAGE", or in JSON mode as the
 * daemon's answer itself) and the exit code is returned:
 * PERFCTL_EXIT_CONNECT, PERFCTL_EXIT_NO_PROCESS or PERFCTL_EXIT_FAILURE. */
enum perfctl_exit ctl_call(const struct ctl_env *env, struct json_object *request,
			   int timeout_ms, struct json_object **ret_response);

/* ctl_call(), with the connection kept open on success (*ret_fd, the
 * caller's; NULL: closed) for what follows the answer: a binary profile's
 * frame (include/perfd/protocol.h). */
enum perfctl_exit ctl_call_keep(const struct ctl_env *env, struct json_object *request,
				int timeout_ms, struct json_object **ret_response, int *ret_fd);

/* The two halves of ctl_call(), for a connection that carries several
 * requests: ctl_connect() connects to env->socket_path (*ret_fd, owned by
 * the caller) or reports why not (PERFCTL_EXIT_CONNECT); ctl_exchange()
 * sends request on fd and waits for its answer as ctl_call() does, with
 * the same errors and exit codes. */
enum perfctl_exit ctl_connect(const struct ctl_env *env, int *ret_fd);
enum perfctl_exit ctl_exchange(const struct ctl_env *env, int fd, struct json_object *request,
			       int timeout_ms, struct json_object **ret_response);
/* ctl_exchange(), calling watch (client.h; NULL: none) while it waits. */
struct ctl_client_watch;
enum perfctl_exit ctl_exchange_watched(const struct ctl_env *env, int fd,
				       struct json_object *request, int timeout_ms,
				       const struct ctl_client_watch *watch,
				       struct json_object **ret_response);
/* The answer half of ctl_exchange_watched(): waits for one more answer
 * line on fd (a live snapshot's answer after its "started" line), checked
 * and reported as ctl_call() does. */
enum perfctl_exit ctl_receive(const struct ctl_env *env, int fd, int timeout_ms,
			      const struct ctl_client_watch *watch,
			      struct json_object **ret_response);

#endif
