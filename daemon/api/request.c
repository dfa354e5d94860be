/* SPDX-License-Identifier: MIT */
/*
 * request.c - turn one request line of the perfd protocol into a
 * struct perfd_request (its command and that command's arguments), or
 * into an error code and a message for the client.
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
#include "api/command.h"
#include "api/request.h"

/* Requests are flat objects; a little headroom lets future versions nest. */
#define REQUEST_MAX_DEPTH 16

/* How much of a client-supplied string is quoted back in a message. */
#define REQUEST_QUOTE_MAX 32

#define NAME(name, NAME) [PERFD_CMD_##NAME] = #name,
static const char *const command_names[] = { PERFD_COMMANDS(NAME) };
#undef NAME

const char *perfd_command_to_string(enum perfd_command c)
{
	if ((size_t)c >= ELEMENTSOF(command_names))
		return NULL;
	return command_names[c];
}

/* Fills *e with code and a formatted message; returns -EINVAL so callers can
 * "return request_fail(...)". */
int request_fail(struct perfd_request_error *e, const char *code, const char *fmt, ...)
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
void request_quote(const char *s, size_t len, char *buf, size_t size)
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
		return request_fail(e, PERFD_ERR_BAD_REQUEST, "request contains a NUL byte");

	/* Decide "not an object" before json-c sees the line: a bare number
	 * at the end of the buffer would only ever be "incomplete" to it. */
	while (i < len && strchr(" \t\r", line[i]))
		i++;
	if (i == len)
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "empty request: expected a JSON object");
	if (line[i] != '{')
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "request must be a JSON object ({\"version\": %d, \"command\": ...})",
			    PERFD_PROTOCOL_VERSION);

	tok = json_tokener_new_ex(REQUEST_MAX_DEPTH);
	if (!tok)
		return request_fail(e, PERFD_ERR_INTERNAL, "out of memory parsing the request");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);

	obj = json_tokener_parse_ex(tok, line, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);

	if (!obj) {
		if (jerr == json_tokener_continue)
			return request_fail(e, PERFD_ERR_BAD_REQUEST,
				    "request is not valid JSON: the object is incomplete");
		if (jerr == json_tokener_error_depth)
			return request_fail(e, PERFD_ERR_BAD_REQUEST,
				    "request is not valid JSON: nested deeper than %d levels",
				    REQUEST_MAX_DEPTH);
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "request is not valid JSON: %s at byte %zu",
			    json_tokener_error_desc(jerr), end);
	}

	/* Strict mode already refuses trailing bytes other than whitespace;
	 * this keeps that promise independent of json-c's version. */
	for (; end < len; end++)
		if (!strchr(" \t\r\n", line[end])) {
			json_object_put(obj);
			return request_fail(e, PERFD_ERR_BAD_REQUEST,
				    "request has trailing bytes after the JSON object");
		}

	if (!json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		return request_fail(e, PERFD_ERR_BAD_REQUEST, "request must be a JSON object");
	}

	*ret = obj;
	return 0;
}

/* Reads an optional integer field into *ret within [min, max].  Absent
 * leaves *ret alone; a double (even 5.0), a bool or a string is an error. */
int request_get_int(struct json_object *req, const char *key, int64_t min, int64_t max,
		    bool required, int64_t *ret, struct perfd_request_error *e)
{
	struct json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(req, key, &v)) {
		if (required)
			return request_fail(e, PERFD_ERR_BAD_REQUEST,
				    "missing \"%s\": an integer %" PRId64 "..%" PRId64,
				    key, min, max);
		return 0;
	}
	if (!json_object_is_type(v, json_type_int))
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"%s\" must be an integer %" PRId64 "..%" PRId64 ", not %s",
			    key, min, max, json_type_to_name(json_object_get_type(v)));

	/* json-c saturates at INT64_MIN/INT64_MAX (and at UINT64_MAX, which
	 * get_int64 reports as INT64_MAX), so a huge value stays out of range. */
	x = json_object_get_int64(v);
	if (x < min || x > max)
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"%s\" is out of range: must be an integer %" PRId64 "..%" PRId64,
			    key, min, max);
	*ret = x;
	return 0;
}

/* A number field of seconds in (0, max]; absent leaves *ret alone and
 * returns 0, present returns 1. */
int request_get_seconds(struct json_object *req, const char *key, double max, double *ret,
			struct perfd_request_error *e)
{
	struct json_object *v;
	double d;

	if (!json_object_object_get_ex(req, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_int) &&
	    !json_object_is_type(v, json_type_double))
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"%s\" must be a number of seconds, 0 < %s <= %.0f, not %s", key, key,
			    max, json_type_to_name(json_object_get_type(v)));
	d = json_object_get_double(v);
	if (!isfinite(d) || !(d > 0) || d > max)
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"%s\" is out of range: must be 0 < %s <= %.0f seconds", key, key, max);
	*ret = d;
	return 1;
}

/* An optional boolean field; *ret keeps its default when it is absent. */
int request_get_bool(struct json_object *req, const char *key, bool *ret,
		     struct perfd_request_error *e)
{
	struct json_object *v;

	if (!json_object_object_get_ex(req, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return request_fail(e, PERFD_ERR_BAD_REQUEST, "\"%s\" must be true or false", key);
	*ret = json_object_get_boolean(v);
	return 0;
}

/* names[0..n) as "a, b, c" into buf. */
static void join_names(const char *const *names, size_t n, char *buf, size_t size)
{
	buf[0] = 0;
	for (size_t i = 0, at = 0; i < n && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? ", " : "", names[i]);
}

int request_get_choice(struct json_object *req, const char *key, const char *const *names,
		       size_t n, int *ret, struct perfd_request_error *e)
{
	char q[REQUEST_QUOTE_SIZE], list[256];
	struct json_object *v;
	const char *s;
	size_t len;

	join_names(names, n, list, sizeof(list));
	if (!json_object_object_get_ex(req, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return request_fail(e, PERFD_ERR_BAD_REQUEST, "\"%s\" must be a string, one of: %s",
			    key, list);
	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	for (size_t i = 0; i < n; i++)
		if (strlen(names[i]) == len && memcmp(s, names[i], len) == 0) {
			*ret = (int)i;
			return 0;
		}
	request_quote(s, len, q, sizeof(q));
	return request_fail(e, PERFD_ERR_BAD_REQUEST, "unknown \"%s\" \"%s\": must be one of: %s",
		    key, q, list);
}

/* An optional string field of 1..size-1 bytes without NUL or control
 * bytes; absent leaves buf empty. */
int request_get_name(struct json_object *req, const char *key, char *buf, size_t size,
		     struct perfd_request_error *e)
{
	struct json_object *v;
	const char *s;
	size_t len;

	buf[0] = 0;
	if (!json_object_object_get_ex(req, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return request_fail(e, PERFD_ERR_BAD_REQUEST, "\"%s\" must be a string", key);
	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	if (len == 0 || len >= size)
		return request_fail(e, PERFD_ERR_BAD_REQUEST, "\"%s\" must be 1 to %zu bytes long", key,
			    size - 1);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return request_fail(e, PERFD_ERR_BAD_REQUEST, "\"%s\" must not hold control bytes", key);
	memcpy(buf, s, len + 1);
	return 0;
}

static int parse_version(struct json_object *req, struct perfd_request_error *e)
{
	struct json_object *v;

	if (!json_object_object_get_ex(req, "version", &v))
		return request_fail(e, PERFD_ERR_VERSION,
			    "missing \"version\": this perfd speaks protocol version %d",
			    PERFD_PROTOCOL_VERSION);
	if (!json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) != PERFD_PROTOCOL_VERSION)
		return request_fail(e, PERFD_ERR_VERSION,
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
	char q[4 * REQUEST_QUOTE_MAX + 4], list[256];

	join_names(command_names, ELEMENTSOF(command_names), list, sizeof(list));
	if (!json_object_object_get_ex(req, "command", &v))
		return request_fail(e, PERFD_ERR_UNKNOWN_COMMAND,
			    "missing \"command\": one of %s", list);
	if (!json_object_is_type(v, json_type_string))
		return request_fail(e, PERFD_ERR_UNKNOWN_COMMAND,
			    "\"command\" must be a string, one of %s", list);

	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	for (size_t i = 0; i < ELEMENTSOF(command_names); i++)
		if (strlen(command_names[i]) == len && memcmp(s, command_names[i], len) == 0) {
			*ret = (enum perfd_command)i;
			return 0;
		}

	request_quote(s, len, q, sizeof(q));
	return request_fail(e, PERFD_ERR_UNKNOWN_COMMAND,
		    "unknown command \"%s\": known commands are %s", q, list);
}

int request_parse(const char *line, size_t len, struct perfd_request *ret,
		  struct perfd_request_error *ret_error)
{
	struct json_object *req = NULL;
	struct perfd_request r = { 0 };
	int k;

	/* json_tokener takes an int length; the server caps lines far below. */
	if (len > INT32_MAX)
		return request_fail(ret_error, PERFD_ERR_TOO_LARGE, "request line is too large");

	k = parse_object(line, len, &req, ret_error);
	if (k < 0)
		return k;

	k = parse_version(req, ret_error);
	if (k >= 0)
		k = parse_command(req, &r.command, ret_error);
	if (k >= 0 && commands[r.command]->parse)
		k = commands[r.command]->parse(req, r.args, ret_error);
	json_object_put(req);
	if (k < 0)
		return k;

	*ret = r;
	return 0;
}
