/* SPDX-License-Identifier: MIT */
/*
 * test-request.c - request_parse() against valid requests of every command
 * and a broad table of malformed lines.  Each malformed case must give the
 * documented error code and a non-empty message; the generated cases (deep
 * nesting, 60 KiB of garbage) check that hostile input neither crashes nor
 * slips through.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "perfd/macro.h"
#include "perfd/protocol.h"
#include "api/request.h"

static int parse(const char *line, size_t len, struct perfd_request *r,
		 struct perfd_request_error *e)
{
	memset(r, 0xa5, sizeof(*r));
	memset(e, 0, sizeof(*e));
	return request_parse(line, len, r, e);
}

static int parse_str(const char *line, struct perfd_request *r,
		     struct perfd_request_error *e)
{
	return parse(line, strlen(line), r, e);
}

static void expect_error(const char *line, size_t len, const char *code, const char *what)
{
	struct perfd_request r;
	struct perfd_request_error e;
	int k = parse(line, len, &r, &e);

	cr_expect_eq(k, -EINVAL, "%s: expected -EINVAL, got %d", what, k);
	cr_expect_not_null(e.code, "%s: no error code", what);
	if (e.code)
		cr_expect_str_eq(e.code, code, "%s: code %s, expected %s (message: %s)",
				 what, e.code, code, e.message);
	cr_expect_gt(strlen(e.message), 0, "%s: empty message", what);
	cr_expect_lt(strlen(e.message), sizeof(e.message), "%s: message not terminated", what);
}

/* ---- valid requests ------------------------------------------------ */

Test(request, status)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"status\"}", &r, &e), 0,
		     "%s", e.message);
	cr_expect_eq(r.command, PERFD_CMD_STATUS);
}

Test(request, ps_default_interval)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"ps\"}", &r, &e), 0, "%s", e.message);
	cr_expect_eq(r.command, PERFD_CMD_PS);
	cr_expect_eq(r.interval_seconds, PERFD_PS_DEFAULT_INTERVAL);
}

Test(request, ps_interval_bounds)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"ps\",\"interval\":1}", &r, &e), 0);
	cr_expect_eq(r.interval_seconds, 1);
	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"ps\",\"interval\":60}", &r, &e), 0);
	cr_expect_eq(r.interval_seconds, PERFD_PS_MAX_INTERVAL);
}

Test(request, snapshot_defaults)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"snapshot\",\"pid\":42,\"duration\":5}",
			       &r, &e), 0, "%s", e.message);
	cr_expect_eq(r.command, PERFD_CMD_SNAPSHOT);
	cr_expect_eq(r.pid, 42);
	cr_expect_float_eq(r.duration_seconds, 5.0, 1e-12);
	cr_expect_eq(r.format, PERFD_FORMAT_FOLDED);
}

Test(request, snapshot_fractional_and_limits)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"snapshot\",\"pid\":2147483647,"
			       "\"duration\":0.25,\"format\":\"folded\"}", &r, &e), 0, "%s", e.message);
	cr_expect_eq(r.pid, INT32_MAX);
	cr_expect_float_eq(r.duration_seconds, 0.25, 1e-12);
	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"snapshot\",\"pid\":1,\"duration\":3600}",
			       &r, &e), 0);
	cr_expect_float_eq(r.duration_seconds, 3600.0, 1e-12);
	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"snapshot\",\"pid\":1,\"duration\":1e-3}",
			       &r, &e), 0);
}

Test(request, extra_fields_whitespace_and_order_are_accepted)
{
	struct perfd_request r;
	struct perfd_request_error e;
	const char *line = "  {\"future\":{\"nested\":[1,2,{\"x\":null}]},\t\"command\" : \"ps\","
			   " \"pid\":\"ignored for ps\", \"version\" : 1 }\r";

	cr_assert_eq(parse_str(line, &r, &e), 0, "%s", e.message);
	cr_expect_eq(r.command, PERFD_CMD_PS);
	cr_expect_eq(r.interval_seconds, PERFD_PS_DEFAULT_INTERVAL);
}

Test(request, length_is_explicit_not_nul_terminated)
{
	/* Only the first len bytes count: the rest of the buffer is junk. */
	const char buf[] = "{\"version\":1,\"command\":\"status\"}GARBAGE";
	struct perfd_request r;
	struct perfd_request_error e;

	cr_expect_eq(parse(buf, strlen(buf) - strlen("GARBAGE"), &r, &e), 0, "%s", e.message);
	cr_expect_eq(parse(buf, strlen(buf), &r, &e), -EINVAL);
}

Test(request, names)
{
	cr_expect_str_eq(perfd_command_to_string(PERFD_CMD_STATUS), "status");
	cr_expect_str_eq(perfd_command_to_string(PERFD_CMD_PS), "ps");
	cr_expect_str_eq(perfd_command_to_string(PERFD_CMD_SNAPSHOT), "snapshot");
	cr_expect_null(perfd_command_to_string((enum perfd_command)99));
	cr_expect_str_eq(perfd_format_to_string(PERFD_FORMAT_FOLDED), "folded");
	cr_expect_null(perfd_format_to_string((enum perfd_format)7));
}

Test(request, output_untouched_on_error)
{
	struct perfd_request r = { .pid = 77 };
	struct perfd_request_error e;

	cr_assert_eq(request_parse("{}", 2, &r, &e), -EINVAL);
	cr_expect_eq(r.pid, 77);
}

/* ---- malformed requests -------------------------------------------- */

struct bad_case {
	char input[160];
	size_t len; /* 0: strlen(input) */
	char code[32];
};

#define BAD(s, c) { .input = s, .code = c }
#define BADN(s, c) { .input = s, .len = sizeof(s) - 1, .code = c }
#define SNAP(args) "{\"version\":1,\"command\":\"snapshot\"," args "}"
#define PS(args) "{\"version\":1,\"command\":\"ps\"," args "}"

static struct bad_case bad_cases[] = {
	/* not a JSON object */
	BADN("", PERFD_ERR_BAD_REQUEST),
	BAD("   ", PERFD_ERR_BAD_REQUEST),
	BAD("{", PERFD_ERR_BAD_REQUEST),
	BAD("}", PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":1,", PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":1,\"command\":\"status\"", PERFD_ERR_BAD_REQUEST),
	BAD("[]", PERFD_ERR_BAD_REQUEST),
	BAD("[{\"version\":1,\"command\":\"status\"}]", PERFD_ERR_BAD_REQUEST),
	BAD("null", PERFD_ERR_BAD_REQUEST),
	BAD("true", PERFD_ERR_BAD_REQUEST),
	BAD("0", PERFD_ERR_BAD_REQUEST),
	BAD("123", PERFD_ERR_BAD_REQUEST),
	BAD("-1.5e300", PERFD_ERR_BAD_REQUEST),
	BAD("99999999999999999999999999999", PERFD_ERR_BAD_REQUEST),
	BAD("NaN", PERFD_ERR_BAD_REQUEST),
	BAD("\"status\"", PERFD_ERR_BAD_REQUEST),
	BAD("status", PERFD_ERR_BAD_REQUEST),
	BAD("{version:1,command:\"status\"}", PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":1,\"command\":\"status\",}", PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":01,\"command\":\"status\"}", PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":1 \"command\":\"status\"}", PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":1,\"command\":\"st\xff\xfe\"}", PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":1,\"command\":\"status\\q\"}", PERFD_ERR_BAD_REQUEST),
	/* embedded NUL, trailing junk */
	BADN("{\"version\":1,\"command\":\"status\"}\0", PERFD_ERR_BAD_REQUEST),
	BADN("{\"version\":1,\0\"command\":\"status\"}", PERFD_ERR_BAD_REQUEST),
	BADN("\0{\"version\":1,\"command\":\"status\"}", PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":1,\"command\":\"status\"}x", PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":1,\"command\":\"status\"} {}", PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":1,\"command\":\"status\"}\n{\"version\":1,\"command\":\"ps\"}",
	    PERFD_ERR_BAD_REQUEST),
	BAD("{\"version\":1,\"command\":\"status\"}}", PERFD_ERR_BAD_REQUEST),
	/* version */
	BAD("{}", PERFD_ERR_VERSION),
	BAD("{\"command\":\"status\"}", PERFD_ERR_VERSION),
	BAD("{\"version\":2,\"command\":\"status\"}", PERFD_ERR_VERSION),
	BAD("{\"version\":0,\"command\":\"status\"}", PERFD_ERR_VERSION),
	BAD("{\"version\":-1,\"command\":\"status\"}", PERFD_ERR_VERSION),
	BAD("{\"version\":1.0,\"command\":\"status\"}", PERFD_ERR_VERSION),
	BAD("{\"version\":\"1\",\"command\":\"status\"}", PERFD_ERR_VERSION),
	BAD("{\"version\":true,\"command\":\"status\"}", PERFD_ERR_VERSION),
	BAD("{\"version\":null,\"command\":\"status\"}", PERFD_ERR_VERSION),
	BAD("{\"version\":[1],\"command\":\"status\"}", PERFD_ERR_VERSION),
	BAD("{\"version\":18446744073709551617,\"command\":\"status\"}", PERFD_ERR_VERSION),
	BAD("{\"version\":4294967297,\"command\":\"status\"}", PERFD_ERR_VERSION),
	/* command */
	BAD("{\"version\":1}", PERFD_ERR_UNKNOWN_COMMAND),
	BAD("{\"version\":1,\"command\":null}", PERFD_ERR_UNKNOWN_COMMAND),
	BAD("{\"version\":1,\"command\":1}", PERFD_ERR_UNKNOWN_COMMAND),
	BAD("{\"version\":1,\"command\":[\"status\"]}", PERFD_ERR_UNKNOWN_COMMAND),
	BAD("{\"version\":1,\"command\":\"\"}", PERFD_ERR_UNKNOWN_COMMAND),
	BAD("{\"version\":1,\"command\":\"STATUS\"}", PERFD_ERR_UNKNOWN_COMMAND),
	BAD("{\"version\":1,\"command\":\"status \"}", PERFD_ERR_UNKNOWN_COMMAND),
	BAD("{\"version\":1,\"command\":\"stat\"}", PERFD_ERR_UNKNOWN_COMMAND),
	BAD("{\"version\":1,\"command\":\"status\\u0000\"}", PERFD_ERR_UNKNOWN_COMMAND),
	BAD("{\"version\":1,\"command\":\"rm -rf /\\n\\u001b[31m\"}", PERFD_ERR_UNKNOWN_COMMAND),
	/* ps interval */
	BAD(PS("\"interval\":0"), PERFD_ERR_BAD_REQUEST),
	BAD(PS("\"interval\":61"), PERFD_ERR_BAD_REQUEST),
	BAD(PS("\"interval\":-5"), PERFD_ERR_BAD_REQUEST),
	BAD(PS("\"interval\":2.5"), PERFD_ERR_BAD_REQUEST),
	BAD(PS("\"interval\":10.0"), PERFD_ERR_BAD_REQUEST),
	BAD(PS("\"interval\":\"10\""), PERFD_ERR_BAD_REQUEST),
	BAD(PS("\"interval\":null"), PERFD_ERR_BAD_REQUEST),
	BAD(PS("\"interval\":true"), PERFD_ERR_BAD_REQUEST),
	BAD(PS("\"interval\":4294967297"), PERFD_ERR_BAD_REQUEST),
	BAD(PS("\"interval\":99999999999999999999999"), PERFD_ERR_BAD_REQUEST),
	/* snapshot pid */
	BAD(SNAP("\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":0,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":-1,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":2147483648,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":4294967297,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":18446744073709551615,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":-99999999999999999999,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42.0,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1e3,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":\"42\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":null,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":{},\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	/* snapshot duration */
	BAD(SNAP("\"pid\":42"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":0"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":0.0"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":-0.0"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":-1"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":3600.5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":3601"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":1e9"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":1e999"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":-1e999"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":1e-999"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":NaN"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":nan"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":Infinity"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":-Infinity"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":\"5\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":true"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":null"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":[5]"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":99999999999999999999999"), PERFD_ERR_BAD_REQUEST),
	/* snapshot format */
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":\"pprof\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":\"FOLDED\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":\"\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":\"folded\\u0000\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":0"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":null"), PERFD_ERR_BAD_REQUEST),
};

ParameterizedTestParameters(request, malformed)
{
	return cr_make_param_array(struct bad_case, bad_cases, ELEMENTSOF(bad_cases));
}

ParameterizedTest(struct bad_case *c, request, malformed)
{
	size_t len = c->len ? c->len : strlen(c->input);

	expect_error(c->input, len, c->code, c->input);
}

/* ---- generated hostile input --------------------------------------- */

static char *repeat(const char *head, const char *unit, size_t n, const char *tail, size_t *ret_len)
{
	size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
	size_t len = hl + ul * n + tl;
	char *s = malloc(len + 1);

	cr_assert_not_null(s);
	memcpy(s, head, hl);
	for (size_t i = 0; i < n; i++)
		memcpy(s + hl + i * ul, unit, ul);
	memcpy(s + hl + ul * n, tail, tl);
	s[len] = '\0';
	*ret_len = len;
	return s;
}

Test(request, deeply_nested_arrays)
{
	size_t len;
	char *head = repeat("{\"version\":1,\"command\":\"status\",\"x\":", "[", 10000, "", &len);
	char *tail = repeat("", "]", 10000, "}", &len);
	char *line;

	cr_assert(asprintf(&line, "%s%s", head, tail) > 0);
	expect_error(line, strlen(line), PERFD_ERR_BAD_REQUEST, "10000 nested arrays");
	free(line);
	free(head);
	free(tail);
}

Test(request, deeply_nested_objects_unterminated)
{
	size_t len;
	char *line = repeat("", "{\"a\":", 10000, "", &len);

	expect_error(line, len, PERFD_ERR_BAD_REQUEST, "10000 nested objects, unterminated");
	free(line);
}

Test(request, deeply_nested_objects_terminated)
{
	size_t hl, tl;
	char *head = repeat("", "{\"a\":", 10000, "1", &hl);
	char *tail = repeat("", "}", 10000, "", &tl);
	char *line = malloc(hl + tl);

	cr_assert_not_null(line);
	memcpy(line, head, hl);
	memcpy(line + hl, tail, tl);
	expect_error(line, hl + tl, PERFD_ERR_BAD_REQUEST, "10000 nested objects");
	free(line);
	free(head);
	free(tail);
}

/* 60 KiB of bytes from a fixed xorshift sequence: all 256 values occur,
 * control bytes and NULs included.  starts_with picks the first byte so both
 * the early "not an object" path and json-c's tokenizer get exercised. */
static void garbage(char *buf, size_t len, uint64_t seed, int starts_with)
{
	uint64_t x = seed;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (char)(x & 0xff);
	}
	if (starts_with >= 0)
		buf[0] = (char)starts_with;
}

Test(request, garbage_60k)
{
	const size_t len = 60 * 1024;
	char *buf = malloc(len);

	cr_assert_not_null(buf);
	for (uint64_t seed = 1; seed <= 16; seed++) {
		garbage(buf, len, seed * 0x9e3779b97f4a7c15ull, seed % 2 ? '{' : -1);
		expect_error(buf, len, PERFD_ERR_BAD_REQUEST, "60 KiB of random bytes");
	}
	free(buf);
}

Test(request, garbage_control_bytes_without_nul)
{
	const size_t len = 60 * 1024;
	char *buf = malloc(len);

	cr_assert_not_null(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)(1 + i % 31); /* every control byte except NUL */
	expect_error(buf, len, PERFD_ERR_BAD_REQUEST, "60 KiB of control bytes");
	buf[0] = '{';
	expect_error(buf, len, PERFD_ERR_BAD_REQUEST, "{ and 60 KiB of control bytes");
	free(buf);
}

Test(request, valid_request_padded_with_60k_whitespace)
{
	/* Whitespace before and after is JSON; the server, not the parser,
	 * bounds the length. */
	const char *req = "{\"version\":1,\"command\":\"status\"}";
	size_t n = strlen(req), len = 60 * 1024;
	char *buf = malloc(len);
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_not_null(buf);
	memset(buf, ' ', len);
	memcpy(buf + 30 * 1024, req, n);
	cr_expect_eq(parse(buf, len, &r, &e), 0, "%s", e.message);
	cr_expect_eq(r.command, PERFD_CMD_STATUS);
	free(buf);
}

Test(request, long_unknown_command_is_quoted_short)
{
	size_t len;
	char *line = repeat("{\"version\":1,\"command\":\"", "\\u001b", 5000, "\"}", &len);
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse(line, len, &r, &e), -EINVAL);
	cr_expect_str_eq(e.code, PERFD_ERR_UNKNOWN_COMMAND);
	cr_expect_null(strchr(e.message, '\x1b'), "control byte copied into message: %s", e.message);
	cr_expect_not_null(strstr(e.message, "..."), "cut not marked: %s", e.message);
	free(line);
}

Test(request, messages_name_the_field_and_range)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str(SNAP("\"pid\":0,\"duration\":5"), &r, &e), -EINVAL);
	cr_expect_not_null(strstr(e.message, "pid"), "%s", e.message);
	cr_expect_not_null(strstr(e.message, "2147483647"), "%s", e.message);

	cr_assert_eq(parse_str(SNAP("\"pid\":1,\"duration\":0"), &r, &e), -EINVAL);
	cr_expect_not_null(strstr(e.message, "duration"), "%s", e.message);
	cr_expect_not_null(strstr(e.message, "3600"), "%s", e.message);

	cr_assert_eq(parse_str(PS("\"interval\":61"), &r, &e), -EINVAL);
	cr_expect_not_null(strstr(e.message, "interval"), "%s", e.message);
	cr_expect_not_null(strstr(e.message, "1..60"), "%s", e.message);
}

Test(request, snapshot_lines_flag)
{
	struct perfd_request r;
	struct perfd_request_error e;
	const char ok[] = "{\"version\":1,\"command\":\"snapshot\",\"pid\":5,\"duration\":1,\"lines\":true}";
	const char dflt[] = "{\"version\":1,\"command\":\"snapshot\",\"pid\":5,\"duration\":1}";
	const char bad[] = "{\"version\":1,\"command\":\"snapshot\",\"pid\":5,\"duration\":1,\"lines\":1}";

	cr_assert_eq(request_parse(ok, sizeof(ok) - 1, &r, &e), 0);
	cr_assert(r.lines);
	cr_assert_eq(request_parse(dflt, sizeof(dflt) - 1, &r, &e), 0);
	cr_assert_not(r.lines);
	cr_assert_eq(request_parse(bad, sizeof(bad) - 1, &r, &e), -EINVAL);
	cr_assert_str_eq(e.code, PERFD_ERR_BAD_REQUEST);
}

/* python_lines defaults to true, threads to false; both take booleans only,
 * and the error names the field. */
Test(request, snapshot_python_lines_and_threads)
{
	struct perfd_request r;
	struct perfd_request_error e;
	const char dflt[] = "{\"version\":1,\"command\":\"snapshot\",\"pid\":5,\"duration\":1}";
	const char set[] = "{\"version\":1,\"command\":\"snapshot\",\"pid\":5,\"duration\":1,"
			   "\"python_lines\":false,\"threads\":true}";
	static const char *const bad[] = {
		"{\"version\":1,\"command\":\"snapshot\",\"pid\":5,\"duration\":1,\"python_lines\":0}",
		"{\"version\":1,\"command\":\"snapshot\",\"pid\":5,\"duration\":1,\"threads\":\"yes\"}",
	};
	static const char *const field[] = { "python_lines", "threads" };

	cr_assert_eq(request_parse(dflt, sizeof(dflt) - 1, &r, &e), 0);
	cr_assert(r.python_lines);
	cr_assert_not(r.threads);
	cr_assert_eq(request_parse(set, sizeof(set) - 1, &r, &e), 0);
	cr_assert_not(r.python_lines);
	cr_assert(r.threads);
	cr_assert_not(r.lines);
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		cr_assert_eq(request_parse(bad[i], strlen(bad[i]), &r, &e), -EINVAL);
		cr_assert_str_eq(e.code, PERFD_ERR_BAD_REQUEST);
		cr_assert_not_null(strstr(e.message, field[i]), "%s", e.message);
	}
}
