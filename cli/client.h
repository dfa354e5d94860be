/* SPDX-License-Identifier: MIT */
/*
 * client.h - the client end of the perfd socket protocol (see
 * include/perfd/protocol.h): connect, send one request line, read one
 * response line.  Returns -errno, never prints.
 */
#ifndef PERFCTL_CLIENT_H
#define PERFCTL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

/* Largest response line perfctl accepts: a folded profile of a busy process
 * over an hour is tens of MB; this leaves room without letting a broken peer
 * exhaust memory. */
#define CTL_CLIENT_MAX_RESPONSE_BYTES ((size_t)1 << 30)

/* Connects a close-on-exec Unix stream socket to path.  Returns 0 and the fd
 * (owned by the caller) in *ret_fd, or -errno (-ENAMETOOLONG when path does
 * not fit in sockaddr_un). */
int ctl_client_connect(const char *path, int *ret_fd);

/* Writes request as one line of plain JSON ending in '\n'.  Returns 0,
 * -EMSGSIZE when the line exceeds PERFD_MAX_REQUEST_BYTES, -ENOMEM, or the
 * -errno of send() (-EPIPE when the daemon has gone; SIGPIPE is not raised). */
int ctl_client_send(int fd, struct json_object *request);

/* Reads until the first '\n' and parses the bytes before it as one JSON
 * object.  timeout_ms bounds the whole read (< 0: no bound); max_bytes
 * bounds the line.  Bytes after the '\n' stay in the socket for the
 * next call (a live snapshot's "started" line, then its answer).
 * Returns 0 and the object in *ret (caller drops it with
 * json_object_put()), or:
 *   -ENODATA    the peer closed the connection without sending anything
 *   -EPROTO     the peer closed the connection in the middle of the line
 *   -EBADMSG    the line is not one JSON object
 *   -EMSGSIZE   the line is longer than max_bytes
 *   -ETIMEDOUT  no complete line within timeout_ms
 *   -ENOMEM, or the -errno of poll()/read() */
int ctl_client_recv(int fd, int timeout_ms, size_t max_bytes, struct json_object **ret);

/* What to do while ctl_client_recv_watched() waits: fn(userdata, fd) is
 * called every interval_ms and after a signal interrupted the wait (a
 * progress line, a stop to send on fd); ctl_exchange_watched() also calls
 * it once as soon as the request is sent. */
struct ctl_client_watch {
	int interval_ms;
	void (*fn)(void *userdata, int fd);
	void *userdata;
};

/* ctl_client_recv(), calling watch (NULL: none) while it waits. */
int ctl_client_recv_watched(int fd, int timeout_ms, size_t max_bytes,
			    const struct ctl_client_watch *watch, struct json_object **ret);

/* Reads the n bytes of the frame that follows an answer's line
 * (include/perfd/protocol.h) and hands them to put(userdata, data, len) as
 * they come, a chunk at a time: the frame is never held whole.  timeout_ms
 * bounds each wait for more (< 0: none).  Returns 0, put's error, or:
 *   -EPROTO     the peer closed the connection before the frame's end
 *   -ETIMEDOUT  no byte for timeout_ms
 *   or the -errno of poll()/read(); *ret_got says how many were read. */
int ctl_client_recv_frame(int fd, int timeout_ms, uint64_t n,
			  int (*put)(void *userdata, const void *data, size_t len), void *userdata,
			  uint64_t *ret_got);

/* A sentence for the errors above that strerror() words badly, else
 * strerror(-error).  Static storage. */
const char *ctl_client_strerror(int error);

#endif
