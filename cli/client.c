/* SPDX-License-Identifier: MIT */
/*
 * client.c - the wire side of perfctl: one Unix stream connection, one
 * request line out, one response line in.
 *
 * Design: the response is read into one buffer that doubles as it fills,
 * up to a cap, and handed to json-c in a single call once the '\n' has
 * arrived.  A snapshot answer of tens of MB therefore costs about twice its
 * size in memory for a moment (the bytes and the parsed tree), and reading
 * is O(n) because only newly read bytes are searched for the newline.  A
 * deadline covers the whole read, so a daemon that stalls mid-answer cannot
 * hang perfctl forever.  A binary profile's frame after the line is read
 * apart, a chunk at a time, straight to where it goes (recv_frame).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client.h"
#include "perfd/macro.h"
#include "perfd/protocol.h"

#define RECV_INITIAL_BUFFER (64 * 1024)

int ctl_client_connect(const char *path, int *ret_fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	size_t len = strlen(path);

	if (len == 0)
		return -ENOENT;
	if (len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, len + 1);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return negative_errno();

	*ret_fd = TAKE_FD(fd);
	return 0;
}

int ctl_client_send(int fd, struct json_object *request)
{
	_cleanup_free_ char *line = NULL;
	const char *json;
	size_t len, off = 0;

	json = json_object_to_json_string_ext(request, JSON_C_TO_STRING_PLAIN |
							       JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!json)
		return -ENOMEM;
	len = strlen(json);
	if (len + 1 > PERFD_MAX_REQUEST_BYTES)
		return -E2BIG;

	line = malloc(len + 1);
	if (!line)
		return -ENOMEM;
	memcpy(line, json, len);
	line[len++] = '\n';

	while (off < len) {
		ssize_t n = send(fd, line + off, len - off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		off += (size_t)n;
	}
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is readable or the deadline (< 0: none) passes, calling
 * watch (NULL: none) on its ticks and after signals.  Returns 0,
 * -ETIMEDOUT or -errno. */
static int wait_readable(int fd, int64_t deadline_ms, const struct ctl_client_watch *watch)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int timeout = -1, k;

		if (deadline_ms >= 0) {
			int64_t left = deadline_ms - now_ms();

			if (left <= 0)
				return -ETIMEDOUT;
			timeout = (int)MIN(left, (int64_t)INT_MAX);
		}
		if (watch && (timeout < 0 || timeout > watch->interval_ms))
			timeout = watch->interval_ms;
		k = poll(&p, 1, timeout);
		if (k < 0 && errno != EINTR)
			return negative_errno();
		if (k > 0)
			return 0;
		if (watch)
			watch->fn(watch->userdata, fd);
	}
}

#define CLIENT_MAX_JSON_DEPTH 4096

/* Parses buf[0..len) as exactly one JSON object, allowing surrounding
 * whitespace.  Returns 0 and the object, or -EBADMSG / -ENOMEM. */
static int parse_line(const char *buf, size_t len, struct json_object **ret)
{
	struct json_tokener *tok;
	struct json_object *obj;
	size_t end;

	if (len > INT_MAX)
		return -EMSGSIZE;
	/* A call tree (--format json) nests two levels per frame. */
	tok = json_tokener_new_ex(CLIENT_MAX_JSON_DEPTH);
	if (!tok)
		return -ENOMEM;
	obj = json_tokener_parse_ex(tok, buf, (int)len);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!obj)
		return -EBADMSG;

	for (; end < len; end++)
		if (!strchr(" \t\r", buf[end]) || buf[end] == '\0') {
			json_object_put(obj);
			return -EBADMSG;
		}
	if (!json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		return -EBADMSG;
	}
	*ret = obj;
	return 0;
}

/* Reads the n bytes a MSG_PEEK just showed at buf (they are there: the
 * socket has no other reader).  Returns 0 or -errno. */
static int take(int fd, char *buf, size_t n)
{
	while (n > 0) {
		ssize_t k = recv(fd, buf, n, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? negative_errno() : -EPROTO;
		buf += k;
		n -= (size_t)k;
	}
	return 0;
}

int ctl_client_recv(int fd, int timeout_ms, size_t max_bytes, struct json_object **ret)
{
	return ctl_client_recv_watched(fd, timeout_ms, max_bytes, NULL, ret);
}

int ctl_client_recv_watched(int fd, int timeout_ms, size_t max_bytes,
			    const struct ctl_client_watch *watch, struct json_object **ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0, limit;
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;

	/* Room for the longest accepted line plus its '\n'. */
	limit = MIN(max_bytes, (size_t)INT_MAX - 1) + 1;

	for (;;) {
		char *nl;
		ssize_t n;
		int k;

		if (len == cap) {
			size_t ncap;
			char *p;

			if (cap >= limit)
				return -EMSGSIZE;
			ncap = cap ? MIN(cap * 2, limit) : MIN((size_t)RECV_INITIAL_BUFFER, limit);
			p = realloc(buf, ncap);
			if (!p)
				return -ENOMEM;
			buf = p;
			cap = ncap;
		}

		k = wait_readable(fd, deadline, watch);
		if (k < 0)
			return k;
		/* a look first, then only this line's bytes are taken: a line
		 * behind it stays in the socket for the next call */
		n = recv(fd, buf + len, cap - len, MSG_PEEK);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return negative_errno();
		}
		if (n == 0)
			return len == 0 ? -ENODATA : -EPROTO;

		nl = memchr(buf + len, '\n', (size_t)n);
		if (nl)
			n = nl - (buf + len) + 1;
		k = take(fd, buf + len, (size_t)n);
		if (k < 0)
			return k;
		len += (size_t)n;
		if (nl)
			return parse_line(buf, (size_t)(nl - buf), ret);
	}
}

#define FRAME_CHUNK (256 * 1024)

int ctl_client_recv_frame(int fd, int timeout_ms, uint64_t n,
			  int (*put)(void *userdata, const void *data, size_t len), void *userdata,
			  uint64_t *ret_got)
{
	_cleanup_free_ char *buf = malloc(FRAME_CHUNK);
	uint64_t got = 0;
	int k = 0;

	if (!buf)
		return -ENOMEM;
	while (got < n) {
		ssize_t r;

		k = wait_readable(fd, timeout_ms < 0 ? -1 : now_ms() + timeout_ms, NULL);
		if (k < 0)
			break;
		r = recv(fd, buf, (size_t)MIN(n - got, (uint64_t)FRAME_CHUNK), 0);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			k = r < 0 ? negative_errno() : -EPROTO;
			break;
		}
		got += (uint64_t)r;
		if ((k = put(userdata, buf, (size_t)r)) < 0)
			break;
	}
	*ret_got = got;
	return k;
}

const char *ctl_client_strerror(int error)
{
	switch (-error) {
	case ENODATA:
		return "perfd closed the connection without answering";
	case EPROTO:
		return "perfd closed the connection in the middle of its answer";
	case EBADMSG:
		return "perfd's answer is not a JSON object";
	case EMSGSIZE:
		return "perfd's answer is larger than perfctl accepts (1 GiB)";
	case E2BIG:
		return "the request is larger than the protocol allows";
	case ETIMEDOUT:
		return "perfd did not answer in time";
	default:
		return strerror(-error);
	}
}
