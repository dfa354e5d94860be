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
#include "encode/encode.h"
#include "profile/profile.h"

/* Requests are flat objects; a little headroom lets future versions nest. */
#define REQUEST_MAX_DEPTH 16

/* How much of a client-supplied string is quoted back in a message. */
#define REQUEST_QUOTE_MAX 32

static const char *const command_names[] = {
	[PERFD_CMD_STATUS] = "status",
	[PERFD_CMD_PS] = "ps",
	[PERFD_CMD_SNAPSHOT] = "snapshot",
};

const char *perfd_command_to_string(enum perfd_command c)
{
	if ((size_t)c >= ELEMENTSOF(command_names))
		return NULL;
	return command_names[c];
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

/* A number field of seconds in (0, max]; absent leaves *ret alone and
 * returns 0, present returns 1. */
static int parse_seconds(struct json_object *req, const char *key, double max, double *ret,
			 struct perfd_request_error *e)
{
	struct json_object *v;
	double d;

	if (!json_object_object_get_ex(req, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_int) &&
	    !json_object_is_type(v, json_type_double))
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"%s\" must be a number of seconds, 0 < %s <= %.0f, not %s", key, key,
			    max, json_type_to_name(json_object_get_type(v)));
	d = json_object_get_double(v);
	if (!isfinite(d) || !(d > 0) || d > max)
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"%s\" is out of range: must be 0 < %s <= %.0f seconds", key, key, max);
	*ret = d;
	return 1;
}

static int parse_format(struct json_object *req, const struct encoder **ret,
			struct perfd_request_error *e)
{
	struct json_object *v;
	const char *s;
	size_t len;
	char q[4 * REQUEST_QUOTE_MAX + 4], names[256] = "";

	for (size_t i = 0, at = 0; i < n_encoders && at < sizeof(names); i++)
		at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s", i ? ", " : "",
				       encoders[i].name);
	if (!json_object_object_get_ex(req, "format", &v)) {
		*ret = &encoders[0];
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return fail(e, PERFD_ERR_BAD_REQUEST, "\"format\" must be a string, one of: %s",
			    names);
	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	*ret = encoder_find(s, len);
	if (*ret)
		return 0;
	quote(s, len, q, sizeof(q));
	return fail(e, PERFD_ERR_BAD_REQUEST, "unknown \"format\" \"%s\": must be one of: %s", q,
		    names);
}

static int parse_kind(struct json_object *req, int *ret, struct perfd_request_error *e)
{
	struct json_object *v;
	char q[4 * REQUEST_QUOTE_MAX + 4];
	int k;

	*ret = PROFILE_KIND_CPU;
	if (!json_object_object_get_ex(req, "kind", &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"kind\" must be a string: cpu, memory or offcpu");
	k = profile_kind_from_name(json_object_get_string(v),
				   (size_t)json_object_get_string_len(v));
	if (k < 0) {
		quote(json_object_get_string(v), (size_t)json_object_get_string_len(v), q, sizeof(q));
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "unknown \"kind\" \"%s\": must be cpu, memory or offcpu", q);
	}
	*ret = k;
	return 0;
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

/* An optional string field of 1..size-1 bytes without NUL or control
 * bytes; absent leaves buf empty. */
static int parse_name(struct json_object *req, const char *key, char *buf, size_t size,
		      struct perfd_request_error *e)
{
	struct json_object *v;
	const char *s;
	size_t len;

	buf[0] = 0;
	if (!json_object_object_get_ex(req, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return fail(e, PERFD_ERR_BAD_REQUEST, "\"%s\" must be a string", key);
	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	if (len == 0 || len >= size)
		return fail(e, PERFD_ERR_BAD_REQUEST, "\"%s\" must be 1 to %zu bytes long", key,
			    size - 1);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20)
			return fail(e, PERFD_ERR_BAD_REQUEST, "\"%s\" must not hold control bytes", key);
	memcpy(buf, s, len + 1);
	return 0;
}

/* "pid": an integer or an array of 1..PERFD_SNAPSHOT_MAX_PIDS of them. */
static int parse_pids(struct json_object *req, struct perfd_request *r,
		      struct perfd_request_error *e)
{
	struct json_object *v;
	size_t n;

	if (!json_object_object_get_ex(req, "pid", &v))
		return 0;
	if (!json_object_is_type(v, json_type_array)) {
		int64_t pid = 0;
		int k = get_int_field(req, "pid", 1, INT32_MAX, true, &pid, e);

		if (k < 0)
			return k;
		r->pids[r->n_pids++] = (uint32_t)pid;
		return 0;
	}
	n = json_object_array_length(v);
	if (n == 0 || n > PERFD_SNAPSHOT_MAX_PIDS)
		return fail(e, PERFD_ERR_BAD_REQUEST, "\"pid\" must list 1 to %d pids",
			    PERFD_SNAPSHOT_MAX_PIDS);
	for (size_t i = 0; i < n; i++) {
		struct json_object *x = json_object_array_get_idx(v, i);
		int64_t pid;

		if (!json_object_is_type(x, json_type_int) ||
		    (pid = json_object_get_int64(x)) < 1 || pid > INT32_MAX)
			return fail(e, PERFD_ERR_BAD_REQUEST,
				    "\"pid\" must hold integers 1..%d", INT32_MAX);
		r->pids[r->n_pids++] = (uint32_t)pid;
	}
	return 0;
}

/* "from"/"to": seconds since the epoch (perfctl turns RFC 3339 into
 * them); "to" absent means now. */
static int parse_range(struct json_object *req, struct perfd_request *r,
		       struct perfd_request_error *e)
{
	static const char *const keys[] = { "from", "to" };
	double *dst[] = { &r->from_unix, &r->to_unix };

	for (size_t i = 0; i < 2; i++) {
		struct json_object *v;

		if (!json_object_object_get_ex(req, keys[i], &v))
			continue;
		if ((!json_object_is_type(v, json_type_int) &&
		     !json_object_is_type(v, json_type_double)) ||
		    !isfinite(json_object_get_double(v)) || json_object_get_double(v) <= 0)
			return fail(e, PERFD_ERR_BAD_REQUEST,
				    "\"%s\" must be a time in seconds since the epoch", keys[i]);
		*dst[i] = json_object_get_double(v);
	}
	if (r->to_unix && r->from_unix >= r->to_unix)
		return fail(e, PERFD_ERR_BAD_REQUEST, "\"from\" must be before \"to\"");
	if (r->to_unix && !r->from_unix)
		return fail(e, PERFD_ERR_BAD_REQUEST, "\"to\" needs a \"from\"");
	return 0;
}

static int parse_snapshot(struct json_object *req, struct perfd_request *r,
			  struct perfd_request_error *e)
{
	int k, has_duration, has_since;

	if ((k = parse_pids(req, r, e)) < 0 ||
	    (k = parse_name(req, "comm", r->comm, sizeof(r->comm), e)) < 0 ||
	    (k = parse_name(req, "cgroup", r->cgroup, sizeof(r->cgroup), e)) < 0 ||
	    (k = parse_name(req, "unit", r->unit, sizeof(r->unit), e)) < 0 ||
	    (k = parse_bool(req, "all", &r->all, e)) < 0)
		return k;
	if (!r->n_pids && !r->comm[0] && !r->cgroup[0] && !r->unit[0] && !r->all)
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "missing which processes: \"pid\", \"comm\", \"cgroup\", \"unit\" or \"all\"");

	has_duration = parse_seconds(req, "duration", PERFD_SNAPSHOT_MAX_SECONDS,
				     &r->duration_seconds, e);
	if (has_duration < 0)
		return has_duration;
	has_since = parse_seconds(req, "since", PERFD_MAX_RETENTION_SECONDS, &r->since_seconds, e);
	if (has_since < 0)
		return has_since;
	if ((k = parse_range(req, r, e)) < 0)
		return k;
	if (has_duration + has_since + (r->from_unix > 0) != 1)
		return fail(e, PERFD_ERR_BAD_REQUEST,
			    "say when, once: \"duration\" (seconds from now on, 0 < duration <= %d), "
			    "\"since\" (the last seconds) or \"from\" (and \"to\")",
			    PERFD_SNAPSHOT_MAX_SECONDS);
	r->when = has_duration ? PERFD_WHEN_DURATION :
		  has_since    ? PERFD_WHEN_SINCE :
				 PERFD_WHEN_RANGE;

	if ((k = parse_format(req, &r->format, e)) < 0 || (k = parse_kind(req, &r->kind, e)) < 0)
		return k;
	r->lines = false;
	r->python_lines = true;
	r->threads = false;
	if ((k = parse_bool(req, "lines", &r->lines, e)) < 0 ||
	    (k = parse_bool(req, "python_lines", &r->python_lines, e)) < 0 ||
	    (k = parse_bool(req, "threads", &r->threads, e)) < 0)
		return k;
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
		.format = &encoders[0],
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
