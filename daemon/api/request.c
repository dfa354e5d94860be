/* SPDX-License-Identifier: MIT */
/*
 * request.c - turn one request line of the perfd protocol into a
 * struct perfd_request, or into an error code and a message for the client.
 *
 * Design: the whole line is handed to json-c in one call with its explicit
 * length, in strict mode with UTF-8 validation and a bounded nesting depth,
 * so neither NUL bytes, trailing bytes, invalid UTF-8 nor deep nesting can
 * reach the code below.  The validation that follows walks the few fields a
 * command uses and ignores every other key, so a newer client can add fields
 * without breaking an older daemon.  Cost: json-c builds a tree for a line of
 * at most PERFD_MAX_REQUEST_BYTES, which is negligible next to a snapshot.
 *
 * Messages name the field and the allowed values; any text copied from the
 * request into a message is escaped and shortened, because the message is
 * shown to a person.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "perfd/macro.h"
#include "perfd/protocol.h"
#include "api/request.h"

/* Requests are flat objects; a little headroom lets future versions nest. */
#define REQUEST_MAX_DEPTH 16

/* How much of a client-supplied string is quoted back in a message. */
#define REQUEST_QUOTE_MAX 32

static const char *const command_names[] = {
	[PERFD_CMD_STATUS] = "status",
	[PERFD_CMD_PS] = "ps",
	[PERFD_CMD_SNAPSHOT] = "snapshot",
};

static const char *const format_names[] = {
	[PERFD_FORMAT_FOLDED] = "folded",
};

const char *perfd_command_to_string(enum perfd_command c)
{
	if ((size_t)c >= ELEMENTSOF(command_names))
		return NULL;
	return command_names[c];
}

const char *perfd_format_to_string(enum perfd_format f)
{
	if ((size_t)f >= ELEMENTSOF(format_names))
		return NULL;
	return format_names[f];
}

/* Fills *e with code and a formatted message; returns -EINVAL so callers can
 * "return fail(...)". */
_printf_(3, 4) static int fail(struct perfd_request_error *e, const char *code,
			       const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	(void)vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Copies at most REQUEST_QUOTE_MAX bytes of s (len bytes, may hold NULs) into
 * buf as printable ASCII: control bytes, quotes, backslashes and non-ASCII
 * bytes become \xNN, and "..." marks a cut.  buf must hold
 * 4 * REQUEST_QUOTE_MAX + 4 bytes. */
static void quote(const char *s, size_t len, char *buf, size_t size)
{
	size_t n = 0;

	for (size_t i = 0; i < len && i < REQUEST_QUOTE_MAX; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			n += (size_t)snprintf(buf + n, size - n, "\\x%02x", c);
		else
			buf[n++] = (char)c;
	}
	if (len > REQUEST_QUOTE_MAX)
		n += (size_t)snprintf(buf + n, size - n, "...");
	buf[n] = '\0';
}

/* Parses the line into a JSON object.  Returns 0 and the object (owned by the
 * caller) or -EINVAL with *e filled. */
static int parse_object(const char *line, size_t len, struct json_object **ret,
			struct perfd_request_error *e)
{
	struct json_tokener *tok;
	struct json_object *obj;
	enum json_tokener_error jerr;
	size_t i = 0, end;

	if (len > 0 && memchr(line, '\0', len))
		return fail(e, PERFD_ERR_BAD_REQUEST, "request contains a NUL byte");

	/* Decide "not an object" before json-c sees the line: a bare number
	 * at the end of the buffer would only ever be "incomplete" to it. */
	while (i < len && strchr(" \t\r", line[i]))
		i++;
	if (i == len)
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "empty request: expected a JSON object");
	if (line[i] != '{')
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "request must be a JSON object ({\"version\": %d, \"command\": ...})",
			    PERFD_PROTOCOL_VERSION);

	tok = json_tokener_new_ex(REQUEST_MAX_DEPTH);
	if (!tok)
		return fail(e, PERFD_ERR_INTERNAL, "out of memory parsing the request");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);

	obj = json_tokener_parse_ex(tok, line, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);

	if (!obj) {
		if (jerr == json_tokener_continue)
			return fail(e, PERFD_ERR_BAD_REQUEST,
				    "request is not valid JSON: the object is incomplete");
		if (jerr == json_tokener_error_depth)
			return fail(e, PERFD_ERR_BAD_REQUEST,
				    "request is not valid JSON: nested deeper than %d levels",
				    REQUEST_MAX_DEPTH);
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "request is not valid JSON: %s at byte %zu",
			    json_tokener_error_desc(jerr), end);
	}

	/* Strict mode already refuses trailing bytes other than whitespace;
	 * this keeps that promise independent of json-c's version. */
	for (; end < len; end++)
		if (!strchr(" \t\r\n", line[end])) {
			json_object_put(obj);
			return fail(e, PERFD_ERR_BAD_REQUEST,
				    "request has trailing bytes after the JSON object");
		}

	if (!json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		return fail(e, PERFD_ERR_BAD_REQUEST, "request must be a JSON object");
	}

	*ret = obj;
	return 0;
}

/* Reads an optional integer field into *ret within [min, max].  Absent
 * leaves *ret alone; a double (even 5.0), a bool or a string is an error. */
static int get_int_field(struct json_object *req, const char *key, int64_t min,
			 int64_t max, bool required, int64_t *ret,
			 struct perfd_request_error *e)
{
	struct json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(req, key, &v)) {
		if (required)
			return fail(e, PERFD_ERR_BAD_REQUEST,
				    "missing \"%s\": an integer %" PRId64 "..%" PRId64,
				    key, min, max);
		return 0;
	}
	if (!json_object_is_type(v, json_type_int))
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"%s\" must be an integer %" PRId64 "..%" PRId64 ", not %s",
			    key, min, max, json_type_to_name(json_object_get_type(v)));

	/* json-c saturates at INT64_MIN/INT64_MAX (and at UINT64_MAX, which
	 * get_int64 reports as INT64_MAX), so a huge value stays out of range. */
	x = json_object_get_int64(v);
	if (x < min || x > max)
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"%s\" is out of range: must be an integer %" PRId64 "..%" PRId64,
			    key, min, max);
	*ret = x;
	return 0;
}

static int parse_ps(struct json_object *req, struct perfd_request *r,
		    struct perfd_request_error *e)
{
	int64_t interval = PERFD_PS_DEFAULT_INTERVAL;
	int k;

	k = get_int_field(req, "interval", 1, PERFD_PS_MAX_INTERVAL, false, &interval, e);
	if (k < 0)
		return k;
	r->interval_seconds = (unsigned)interval;
	return 0;
}

static int parse_duration(struct json_object *req, double *ret,
			  struct perfd_request_error *e)
{
	struct json_object *v;
	double d;

	if (!json_object_object_get_ex(req, "duration", &v))
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "missing \"duration\": seconds, a number 0 < duration <= %d",
			    PERFD_SNAPSHOT_MAX_SECONDS);
	if (!json_object_is_type(v, json_type_int) &&
	    !json_object_is_type(v, json_type_double))
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"duration\" must be a number of seconds, 0 < duration <= %d, not %s",
			    PERFD_SNAPSHOT_MAX_SECONDS,
			    json_type_to_name(json_object_get_type(v)));

	d = json_object_get_double(v);
	if (!isfinite(d) || !(d > 0) || d > PERFD_SNAPSHOT_MAX_SECONDS)
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"duration\" is out of range: must be 0 < duration <= %d seconds",
			    PERFD_SNAPSHOT_MAX_SECONDS);
	*ret = d;
	return 0;
}

static int parse_format(struct json_object *req, enum perfd_format *ret,
			struct perfd_request_error *e)
{
	struct json_object *v;
	const char *s;
	size_t len;
	char q[4 * REQUEST_QUOTE_MAX + 4];

	if (!json_object_object_get_ex(req, "format", &v)) {
		*ret = PERFD_FORMAT_FOLDED;
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"format\" must be a string, one of: folded");

	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	for (size_t i = 0; i < ELEMENTSOF(format_names); i++)
		if (strlen(format_names[i]) == len && memcmp(s, format_names[i], len) == 0) {
			*ret = (enum perfd_format)i;
			return 0;
		}

	quote(s, len, q, sizeof(q));
	return fail(e, PERFD_ERR_BAD_REQUEST,
		    "unknown \"format\" \"%s\": must be one of: folded", q);
}

/* An optional boolean field; *ret keeps its default when it is absent. */
static int parse_bool(struct json_object *req, const char *key, bool *ret,
		      struct perfd_request_error *e)
{
	struct json_object *v;

	if (!json_object_object_get_ex(req, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return fail(e, PERFD_ERR_BAD_REQUEST, "\"%s\" must be true or false", key);
	*ret = json_object_get_boolean(v);
	return 0;
}

static int parse_snapshot(struct json_object *req, struct perfd_request *r,
			  struct perfd_request_error *e)
{
	int64_t pid = 0;
	int k;

	k = get_int_field(req, "pid", 1, INT32_MAX, true, &pid, e);
	if (k < 0)
		return k;
	k = parse_duration(req, &r->duration_seconds, e);
	if (k < 0)
		return k;
	k = parse_format(req, &r->format, e);
	if (k < 0)
		return k;
	r->lines = false;
	r->python_lines = true;
	r->threads = false;
	if ((k = parse_bool(req, "lines", &r->lines, e)) < 0 ||
	    (k = parse_bool(req, "python_lines", &r->python_lines, e)) < 0 ||
	    (k = parse_bool(req, "threads", &r->threads, e)) < 0)
		return k;
	r->pid = (int32_t)pid;
	return 0;
}

static int parse_version(struct json_object *req, struct perfd_request_error *e)
{
	struct json_object *v;

	if (!json_object_object_get_ex(req, "version", &v))
		return fail(e, PERFD_ERR_VERSION,
			    "missing \"version\": this perfd speaks protocol version %d",
			    PERFD_PROTOCOL_VERSION);
	if (!json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) != PERFD_PROTOCOL_VERSION)
		return fail(e, PERFD_ERR_VERSION,
			    "unsupported protocol \"version\": this perfd speaks version %d only",
			    PERFD_PROTOCOL_VERSION);
	return 0;
}

/* Finds the command; a missing or non-string "command" is reported as
 * unknown_command too: there is no command the daemon could run. */
static int parse_command(struct json_object *req, enum perfd_command *ret,
			 struct perfd_request_error *e)
{
	struct json_object *v;
	const char *s;
	size_t len;
	char q[4 * REQUEST_QUOTE_MAX + 4];

	if (!json_object_object_get_ex(req, "command", &v))
		return fail(e, PERFD_ERR_UNKNOWN_COMMAND,
			    "missing \"command\": one of status, ps, snapshot");
	if (!json_object_is_type(v, json_type_string))
		return fail(e, PERFD_ERR_UNKNOWN_COMMAND,
			    "\"command\" must be a string, one of status, ps, snapshot");

	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	for (size_t i = 0; i < ELEMENTSOF(command_names); i++)
		if (strlen(command_names[i]) == len && memcmp(s, command_names[i], len) == 0) {
			*ret = (enum perfd_command)i;
			return 0;
		}

	quote(s, len, q, sizeof(q));
	return fail(e, PERFD_ERR_UNKNOWN_COMMAND,
		    "unknown command \"%s\": known commands are status, ps, snapshot", q);
}

int request_parse(const char *line, size_t len, struct perfd_request *ret,
		  struct perfd_request_error *ret_error)
{
	struct json_object *req = NULL;
	struct perfd_request r = {
		.interval_seconds = PERFD_PS_DEFAULT_INTERVAL,
		.format = PERFD_FORMAT_FOLDED,
	};
	int k;

	/* json_tokener takes an int length; the server caps lines far below. */
	if (len > INT32_MAX)
		return fail(ret_error, PERFD_ERR_TOO_LARGE, "request line is too large");

	k = parse_object(line, len, &req, ret_error);
	if (k < 0)
		return k;

	k = parse_version(req, ret_error);
	if (k >= 0)
		k = parse_command(req, &r.command, ret_error);
	if (k >= 0) {
		switch (r.command) {
		case PERFD_CMD_STATUS:
			break;
		case PERFD_CMD_PS:
			k = parse_ps(req, &r, ret_error);
			break;
		case PERFD_CMD_SNAPSHOT:
			k = parse_snapshot(req, &r, ret_error);
			break;
		}
	}
	json_object_put(req);
	if (k < 0)
		return k;

	*ret = r;
	return 0;
}
