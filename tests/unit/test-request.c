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

#include "base/kindtab.h"
#include "perfd/formats.h"
#include "perfd/macro.h"
#include "perfd/protocol.h"
#include "api/cmd_ps.h"
#include "api/cmd_snapshot.h"
#include "api/cmd_top.h"
#include "api/request.h"
#include "encode/encode.h"
#include "profile/profile.h"

/* A parsed request's arguments, as its command has them. */
#define PS_ARGS(r) REQUEST_ARGS(&(r), struct ps_args)
#define SNAP_ARGS(r) REQUEST_ARGS(&(r), struct snapshot_args)
#define TOP_ARGS(r) REQUEST_ARGS(&(r), struct top_args)

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
	cr_expect_eq(PS_ARGS(r)->interval_seconds, PERFD_PS_DEFAULT_INTERVAL);
}

Test(request, ps_interval_bounds)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"ps\",\"interval\":1}", &r, &e), 0);
	cr_expect_eq(PS_ARGS(r)->interval_seconds, 1);
	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"ps\",\"interval\":60}", &r, &e), 0);
	cr_expect_eq(PS_ARGS(r)->interval_seconds, PERFD_PS_MAX_INTERVAL);
}

Test(request, snapshot_defaults)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"snapshot\",\"pid\":42,\"duration\":5}",
			       &r, &e), 0, "%s", e.message);
	cr_expect_eq(r.command, PERFD_CMD_SNAPSHOT);
	cr_expect_eq(SNAP_ARGS(r)->n_pids, 1);
	cr_expect_eq(SNAP_ARGS(r)->pids[0], 42);
	cr_expect_eq(SNAP_ARGS(r)->when, SNAPSHOT_DURATION);
	cr_expect_float_eq(SNAP_ARGS(r)->duration_seconds, 5.0, 1e-12);
	cr_assert_not_null(SNAP_ARGS(r)->format);
	cr_expect_str_eq(SNAP_ARGS(r)->format->name, "folded");
	cr_expect_eq(SNAP_ARGS(r)->kind, PROFILE_KIND_CPU);
	cr_expect_not(SNAP_ARGS(r)->all);
	cr_expect_str_eq(SNAP_ARGS(r)->comm, "");
	cr_expect_str_eq(SNAP_ARGS(r)->cgroup, "");
	cr_expect_str_eq(SNAP_ARGS(r)->unit, "");
}

Test(request, snapshot_fractional_and_limits)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"snapshot\",\"pid\":2147483647,"
			       "\"duration\":0.25,\"format\":\"folded\"}", &r, &e), 0, "%s", e.message);
	cr_expect_eq(SNAP_ARGS(r)->pids[0], INT32_MAX);
	cr_expect_float_eq(SNAP_ARGS(r)->duration_seconds, 0.25, 1e-12);
	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"snapshot\",\"pid\":1,\"duration\":3600}",
			       &r, &e), 0);
	cr_expect_float_eq(SNAP_ARGS(r)->duration_seconds, 3600.0, 1e-12);
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
	cr_expect_eq(PS_ARGS(r)->interval_seconds, PERFD_PS_DEFAULT_INTERVAL);
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
}

#define SNAP_LINE "{\"version\":1,\"command\":\"snapshot\",\"pid\":[1,2,3],\"duration\":5,\"kind\":\"gpu\"}"

Test(request, output_untouched_on_error)
{
	struct perfd_request r, before;
	struct perfd_request_error e;

	memset(&r, 0x5a, sizeof(r));
	before = r;
	cr_assert_eq(request_parse("{}", 2, &r, &e), -EINVAL);
	cr_expect_eq(memcmp(&r, &before, sizeof(r)), 0);
	/* an error found after some fields were read */
	cr_assert_eq(request_parse(SNAP_LINE, strlen(SNAP_LINE), &r, &e), -EINVAL);
	cr_expect_eq(memcmp(&r, &before, sizeof(r)), 0);
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
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":\"nosuchformat\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":\"FOLDED\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":\"\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":\"folded\\u0000\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":0"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":null"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":\"Json\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":42,\"duration\":5,\"format\":[\"json\"]"), PERFD_ERR_BAD_REQUEST),
	/* snapshot: pid arrays */
	BAD(SNAP("\"pid\":[],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[0],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[1,-1],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[1,2147483648],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[18446744073709551615],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[1.5],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[2.0],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[\"1\"],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[null],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[true],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[[1]],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":[{}],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	/* snapshot: the other selectors */
	BAD(SNAP("\"all\":false,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"all\":1,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"all\":\"true\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"all\":null,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"comm\":\"\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"comm\":\"sixteen-bytes-xx\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"comm\":42,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"comm\":null,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"comm\":[\"app\"],\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"cgroup\":\"\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"cgroup\":true,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"unit\":\"\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"unit\":{},\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	/* a valid selector does not excuse a bad one */
	BAD(SNAP("\"pid\":1,\"comm\":\"\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"all\":true,\"pid\":0,\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	/* names with control bytes */
	BAD(SNAP("\"comm\":\"a\\u0001b\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"comm\":\"a\\nb\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"comm\":\"a\\tb\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"comm\":\"\\u001b[31m\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"comm\":\"a\\u0000b\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"comm\":\"a\\u007fb\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"cgroup\":\"/a\\u001fb\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"cgroup\":\"/a\\u007f\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"unit\":\"x\\r.service\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"unit\":\"x.service\\u0000\",\"duration\":5"), PERFD_ERR_BAD_REQUEST),
	/* when: exactly one of duration, since, from (to only with from) */
	BAD(SNAP("\"pid\":1,\"duration\":5,\"since\":60"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"duration\":5,\"from\":1700000000"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"since\":60,\"from\":1700000000"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"since\":60,\"from\":1700000000,\"to\":1700000100"),
	    PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"to\":1700000000"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"since\":60,\"to\":1700000000"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"duration\":5,\"to\":1700000000"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":1700000100,\"to\":1700000000"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":1700000000,\"to\":1700000000"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":0"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":-5"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":\"2024-01-01T00:00:00Z\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":null"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":true"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":1e999"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":NaN"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":1700000000,\"to\":-1"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"from\":1700000000,\"to\":\"now\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"since\":0"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"since\":-1"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"since\":604801"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"since\":\"1h\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"since\":null"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"since\":1e999"), PERFD_ERR_BAD_REQUEST),
	/* kind */
	BAD(SNAP("\"pid\":1,\"duration\":5,\"kind\":\"CPU\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"duration\":5,\"kind\":\"gpu\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"duration\":5,\"kind\":\"\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"duration\":5,\"kind\":\"cpu \""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"duration\":5,\"kind\":\"cpu\\u0000\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"duration\":5,\"kind\":\"mem\""), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"duration\":5,\"kind\":0"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"duration\":5,\"kind\":null"), PERFD_ERR_BAD_REQUEST),
	BAD(SNAP("\"pid\":1,\"duration\":5,\"kind\":[\"cpu\"]"), PERFD_ERR_BAD_REQUEST),
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
	cr_assert(SNAP_ARGS(r)->lines);
	cr_assert_eq(request_parse(dflt, sizeof(dflt) - 1, &r, &e), 0);
	cr_assert_not(SNAP_ARGS(r)->lines);
	cr_assert_eq(request_parse(bad, sizeof(bad) - 1, &r, &e), -EINVAL);
	cr_assert_str_eq(e.code, PERFD_ERR_BAD_REQUEST);
}

/* python_lines defaults to true, threads to false; both take booleans only,
 * and the error names the field. */
/* "frame" asks for a binary profile's bytes after the line; without it
 * they come in base64, as before frames (protocol.h). */
Test(request, snapshot_frame_flag)
{
	struct perfd_request r;
	struct perfd_request_error e;
	const char ok[] = "{\"version\":1,\"command\":\"snapshot\",\"pid\":5,\"since\":1,\"format\":\"pprof\",\"frame\":true}";
	const char dflt[] = "{\"version\":1,\"command\":\"snapshot\",\"pid\":5,\"since\":1,\"format\":\"pprof\"}";
	const char bad[] = "{\"version\":1,\"command\":\"snapshot\",\"pid\":5,\"since\":1,\"frame\":\"yes\"}";

	cr_assert_eq(request_parse(ok, sizeof(ok) - 1, &r, &e), 0, "%s", e.message);
	cr_assert(SNAP_ARGS(r)->frame);
	cr_assert_eq(request_parse(dflt, sizeof(dflt) - 1, &r, &e), 0, "%s", e.message);
	cr_assert_not(SNAP_ARGS(r)->frame);
	cr_assert_eq(request_parse(bad, sizeof(bad) - 1, &r, &e), -EINVAL);
	cr_assert_str_eq(e.code, PERFD_ERR_BAD_REQUEST);
}

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
	cr_assert(SNAP_ARGS(r)->python_lines);
	cr_assert_not(SNAP_ARGS(r)->threads);
	cr_assert_eq(request_parse(set, sizeof(set) - 1, &r, &e), 0);
	cr_assert_not(SNAP_ARGS(r)->python_lines);
	cr_assert(SNAP_ARGS(r)->threads);
	cr_assert_not(SNAP_ARGS(r)->lines);
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		cr_assert_eq(request_parse(bad[i], strlen(bad[i]), &r, &e), -EINVAL);
		cr_assert_str_eq(e.code, PERFD_ERR_BAD_REQUEST);
		cr_assert_not_null(strstr(e.message, field[i]), "%s", e.message);
	}
}

/* ---- snapshot: which processes -------------------------------------- */

Test(request, snapshot_pid_array)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str(SNAP("\"pid\":[3,1,2147483647],\"duration\":5"), &r, &e), 0, "%s",
		     e.message);
	cr_expect_eq(SNAP_ARGS(r)->n_pids, 3);
	cr_expect_eq(SNAP_ARGS(r)->pids[0], 3);
	cr_expect_eq(SNAP_ARGS(r)->pids[1], 1);
	cr_expect_eq(SNAP_ARGS(r)->pids[2], INT32_MAX);
	cr_assert_eq(parse_str(SNAP("\"pid\":[7],\"duration\":5"), &r, &e), 0, "%s", e.message);
	cr_expect_eq(SNAP_ARGS(r)->n_pids, 1);
	cr_expect_eq(SNAP_ARGS(r)->pids[0], 7);
}

/* PERFD_SNAPSHOT_MAX_PIDS pids, and one more. */
Test(request, snapshot_pid_array_limit)
{
	struct perfd_request r;
	struct perfd_request_error e;
	char line[2048];

	for (int n = PERFD_SNAPSHOT_MAX_PIDS; n <= PERFD_SNAPSHOT_MAX_PIDS + 1; n++) {
		int at = snprintf(line, sizeof(line), "{\"version\":1,\"command\":\"snapshot\",\"pid\":[");

		for (int i = 0; i < n; i++)
			at += snprintf(line + at, sizeof(line) - at, "%s%d", i ? "," : "", 1000 + i);
		at += snprintf(line + at, sizeof(line) - at, "],\"duration\":5}");
		cr_assert_lt((size_t)at, sizeof(line));
		if (n == PERFD_SNAPSHOT_MAX_PIDS) {
			cr_assert_eq(parse(line, (size_t)at, &r, &e), 0, "%s", e.message);
			cr_expect_eq(SNAP_ARGS(r)->n_pids, PERFD_SNAPSHOT_MAX_PIDS);
			cr_expect_eq(SNAP_ARGS(r)->pids[PERFD_SNAPSHOT_MAX_PIDS - 1], 1000 + PERFD_SNAPSHOT_MAX_PIDS - 1);
		} else {
			expect_error(line, (size_t)at, PERFD_ERR_BAD_REQUEST, "65 pids");
			cr_assert_eq(parse(line, (size_t)at, &r, &e), -EINVAL);
			cr_expect_not_null(strstr(e.message, "64"), "%s", e.message);
		}
	}
}

Test(request, snapshot_selectors_without_pid)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str(SNAP("\"comm\":\"fifteen-bytes-x\",\"duration\":5"), &r, &e), 0, "%s",
		     e.message);
	cr_expect_str_eq(SNAP_ARGS(r)->comm, "fifteen-bytes-x");
	cr_expect_eq(SNAP_ARGS(r)->n_pids, 0);
	cr_expect_not(SNAP_ARGS(r)->all);
	cr_assert_eq(parse_str(SNAP("\"comm\":\"caf\xc3\xa9\",\"duration\":5"), &r, &e), 0, "%s",
		     e.message);
	cr_expect_str_eq(SNAP_ARGS(r)->comm, "caf\xc3\xa9");
	cr_assert_eq(parse_str(SNAP("\"cgroup\":\"/system.slice/web.service\",\"since\":60"), &r, &e),
		     0, "%s", e.message);
	cr_expect_str_eq(SNAP_ARGS(r)->cgroup, "/system.slice/web.service");
	cr_assert_eq(parse_str(SNAP("\"unit\":\"web.service\",\"since\":60"), &r, &e), 0, "%s",
		     e.message);
	cr_expect_str_eq(SNAP_ARGS(r)->unit, "web.service");
	cr_assert_eq(parse_str(SNAP("\"all\":true,\"since\":60"), &r, &e), 0, "%s", e.message);
	cr_expect(SNAP_ARGS(r)->all);
	cr_expect_eq(SNAP_ARGS(r)->n_pids, 0);
	/* several together: each is kept */
	cr_assert_eq(parse_str(SNAP("\"pid\":[1,2],\"comm\":\"web\",\"unit\":\"w.service\","
				    "\"all\":true,\"duration\":1"), &r, &e), 0, "%s", e.message);
	cr_expect_eq(SNAP_ARGS(r)->n_pids, 2);
	cr_expect_str_eq(SNAP_ARGS(r)->comm, "web");
	cr_expect_str_eq(SNAP_ARGS(r)->unit, "w.service");
	cr_expect(SNAP_ARGS(r)->all);
}

Test(request, snapshot_cgroup_length)
{
	struct perfd_request r;
	struct perfd_request_error e;
	char line[512], path[300];

	for (size_t len = 255; len <= 256; len++) {
		memset(path, 'c', len);
		path[0] = '/';
		path[len] = 0;
		snprintf(line, sizeof(line), SNAP("\"cgroup\":\"%s\",\"since\":60"), path);
		if (len == 255) {
			cr_assert_eq(parse_str(line, &r, &e), 0, "%s", e.message);
			cr_expect_str_eq(SNAP_ARGS(r)->cgroup, path);
		} else {
			expect_error(line, strlen(line), PERFD_ERR_BAD_REQUEST, "256-byte cgroup");
		}
	}
}

Test(request, snapshot_selector_messages)
{
	struct perfd_request r;
	struct perfd_request_error e;
	static const char *const selectors[] = { "pid", "comm", "cgroup", "unit", "all" };

	cr_assert_eq(parse_str(SNAP("\"duration\":5"), &r, &e), -EINVAL);
	for (size_t i = 0; i < ELEMENTSOF(selectors); i++)
		cr_expect_not_null(strstr(e.message, selectors[i]), "%s not named: %s", selectors[i],
				   e.message);
	cr_assert_eq(parse_str(SNAP("\"comm\":\"a\\u0007b\",\"duration\":5"), &r, &e), -EINVAL);
	cr_expect_not_null(strstr(e.message, "comm"), "%s", e.message);
	cr_expect_null(strchr(e.message, '\a'), "control byte copied into the message");
	cr_assert_eq(parse_str(SNAP("\"unit\":\"a\\u007fb\",\"duration\":5"), &r, &e), -EINVAL);
	cr_expect_not_null(strstr(e.message, "unit"), "%s", e.message);
}

/* ---- snapshot: when ---------------------------------------------------- */

Test(request, snapshot_since)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str(SNAP("\"pid\":1,\"since\":90.5"), &r, &e), 0, "%s", e.message);
	cr_expect_eq(SNAP_ARGS(r)->when, SNAPSHOT_SINCE);
	cr_expect_float_eq(SNAP_ARGS(r)->since_seconds, 90.5, 1e-12);
	cr_assert_eq(parse_str(SNAP("\"pid\":1,\"since\":604800"), &r, &e), 0, "%s", e.message);
	cr_expect_float_eq(SNAP_ARGS(r)->since_seconds, (double)PERFD_MAX_RETENTION_SECONDS, 1e-9);
	/* a since longer than a live snapshot may last */
	cr_assert_eq(parse_str(SNAP("\"pid\":1,\"since\":7200"), &r, &e), 0, "%s", e.message);
}

Test(request, snapshot_from_and_to)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str(SNAP("\"all\":true,\"from\":1700000000.25"), &r, &e), 0, "%s",
		     e.message);
	cr_expect_eq(SNAP_ARGS(r)->when, SNAPSHOT_RANGE);
	cr_expect_float_eq(SNAP_ARGS(r)->from_unix, 1700000000.25, 1e-6);
	cr_expect_eq(SNAP_ARGS(r)->to_unix, 0, "to defaults to now (0)");
	cr_assert_eq(parse_str(SNAP("\"all\":true,\"from\":1700000000,\"to\":1700000000.5"), &r, &e),
		     0, "%s", e.message);
	cr_expect_eq(SNAP_ARGS(r)->when, SNAPSHOT_RANGE);
	cr_expect_float_eq(SNAP_ARGS(r)->to_unix, 1700000000.5, 1e-6);
}

Test(request, snapshot_when_messages)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str(SNAP("\"pid\":1"), &r, &e), -EINVAL);
	cr_expect_not_null(strstr(e.message, "duration"), "%s", e.message);
	cr_expect_not_null(strstr(e.message, "since"), "%s", e.message);
	cr_expect_not_null(strstr(e.message, "from"), "%s", e.message);
	cr_assert_eq(parse_str(SNAP("\"pid\":1,\"duration\":5,\"since\":5"), &r, &e), -EINVAL);
	cr_expect_not_null(strstr(e.message, "once"), "%s", e.message);
	/* "to" alone is "to" without "from", whatever its value */
	cr_assert_eq(parse_str(SNAP("\"pid\":1,\"to\":1700000000"), &r, &e), -EINVAL);
	cr_expect_not_null(strstr(e.message, "needs a \"from\""), "%s", e.message);
	cr_assert_eq(parse_str(SNAP("\"pid\":1,\"from\":1700000001,\"to\":1700000000"), &r, &e),
		     -EINVAL);
	cr_expect_not_null(strstr(e.message, "before"), "%s", e.message);
	cr_assert_eq(parse_str(SNAP("\"pid\":1,\"since\":604801"), &r, &e), -EINVAL);
	cr_expect_not_null(strstr(e.message, "since"), "%s", e.message);
	cr_expect_not_null(strstr(e.message, "604800"), "%s", e.message);
}

/* ---- snapshot: how ----------------------------------------------------- */

Test(request, snapshot_kind_names)
{
	struct perfd_request r;
	struct perfd_request_error e;
	char line[256];

	for (int k = 0; k < PROFILE_KINDS; k++) {
		snprintf(line, sizeof(line), SNAP("\"pid\":1,\"since\":5,\"kind\":\"%s\""),
			 kind_infos[k].name);
		cr_assert_eq(parse_str(line, &r, &e), 0, "%s: %s", kind_infos[k].name, e.message);
		cr_expect_eq(SNAP_ARGS(r)->kind, k);
	}
	cr_expect_str_eq(kind_infos[PROFILE_KIND_CPU].name, "cpu");
	cr_expect_str_eq(kind_infos[PROFILE_KIND_MEMORY].name, "memory");
	cr_expect_str_eq(kind_infos[PROFILE_KIND_OFFCPU].name, "offcpu");
	cr_assert_eq(parse_str(SNAP("\"pid\":1,\"since\":5,\"kind\":\"gpu\""), &r, &e), -EINVAL);
	for (int k = 0; k < PROFILE_KINDS; k++)
		cr_expect_not_null(strstr(e.message, kind_infos[k].name), "%s", e.message);
	cr_expect_not_null(strstr(e.message, "gpu"), "%s", e.message);
}

/* Every row of include/perfd/formats.h is a format the request takes, by
 * its name alone, and the refusal lists them all. */
#define COUNT_ROW(name, ext, binary) +1
Test(request, snapshot_format_names_come_from_the_table)
{
	struct perfd_request r;
	struct perfd_request_error e;
	char line[256];

	cr_assert_eq(n_encoders, 0 PERFD_FORMATS(COUNT_ROW));
	cr_assert_geq(n_encoders, 2);
	for (size_t i = 0; i < n_encoders; i++) {
		snprintf(line, sizeof(line), SNAP("\"pid\":1,\"since\":5,\"format\":\"%s\""),
			 encoders[i].name);
		cr_assert_eq(parse_str(line, &r, &e), 0, "%s: %s", encoders[i].name, e.message);
		cr_expect_eq(SNAP_ARGS(r)->format, &encoders[i]);
		cr_expect_eq(encoder_find(encoders[i].name, strlen(encoders[i].name)), &encoders[i]);
		cr_expect_eq(encoders[i].extension[0], '.');
	}
	cr_expect_str_eq(encoders[0].name, "folded", "the default is not the first row");
	cr_assert_eq(parse_str(SNAP("\"pid\":1,\"since\":5,\"format\":\"nosuchformat\""), &r, &e),
		     -EINVAL);
	for (size_t i = 0; i < n_encoders; i++)
		cr_expect_not_null(strstr(e.message, encoders[i].name), "%s", e.message);
	cr_expect_null(encoder_find("json", 3));
	cr_expect_null(encoder_find("", 0));
}

Test(request, top_defaults_and_limits)
{
	struct perfd_request r;
	struct perfd_request_error e;

	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"top\"}", &r, &e), 0, "%s", e.message);
	cr_expect_eq(r.command, PERFD_CMD_TOP);
	cr_expect_eq(TOP_ARGS(r)->interval_seconds, PERFD_TOP_DEFAULT_INTERVAL);
	cr_expect_eq(TOP_ARGS(r)->rows, PERFD_TOP_DEFAULT_ROWS);
	cr_expect_eq(TOP_ARGS(r)->depth, PERFD_TOP_DEFAULT_DEPTH);
	cr_expect_eq(TOP_ARGS(r)->offset, 0);
	cr_expect_eq(TOP_ARGS(r)->pid, 0);
	cr_expect_eq(TOP_ARGS(r)->filter[0], 0);
	cr_expect_eq(TOP_ARGS(r)->function_kind, -1);

	cr_assert_eq(parse_str("{\"version\":1,\"command\":\"top\",\"view\":\"functions\","
			       "\"pid\":42,\"kind\":\"memory\",\"sort\":\"total\",\"rows\":1000,"
			       "\"depth\":8,\"function\":\"main\",\"function_kind\":\"native\","
			       "\"filter\":\"spin\",\"interval\":60}", &r, &e), 0, "%s", e.message);
	cr_expect_eq(TOP_ARGS(r)->pid, 42);
	cr_expect_eq(TOP_ARGS(r)->kind, PROFILE_KIND_MEMORY);
	cr_expect_eq(TOP_ARGS(r)->sort, 1);
	cr_expect_eq(TOP_ARGS(r)->rows, PERFD_TOP_MAX_ROWS);
	cr_expect_eq(TOP_ARGS(r)->depth, PERFD_TOP_MAX_DEPTH);
	cr_expect_str_eq(TOP_ARGS(r)->function, "main");
	cr_expect_str_eq(TOP_ARGS(r)->filter, "spin");
	cr_expect_eq(TOP_ARGS(r)->interval_seconds, PERFD_TOP_MAX_INTERVAL);
}

Test(request, top_refuses_what_it_caps_or_does_not_know)
{
	static const char *const bad[] = {
		"{\"version\":1,\"command\":\"top\",\"rows\":1001}",
		"{\"version\":1,\"command\":\"top\",\"rows\":0}",
		"{\"version\":1,\"command\":\"top\",\"depth\":9}",
		"{\"version\":1,\"command\":\"top\",\"offset\":100001}",
		"{\"version\":1,\"command\":\"top\",\"interval\":61}",
		"{\"version\":1,\"command\":\"top\",\"view\":\"threads\"}",
		"{\"version\":1,\"command\":\"top\",\"sort\":\"self\"}",
		"{\"version\":1,\"command\":\"top\",\"view\":\"functions\",\"sort\":\"rss\"}",
		"{\"version\":1,\"command\":\"top\",\"pid\":1}",
		"{\"version\":1,\"command\":\"top\",\"view\":\"functions\",\"kind\":\"wall\"}",
		"{\"version\":1,\"command\":\"top\",\"kind\":\"offcpu\"}",
		"{\"version\":1,\"command\":\"top\",\"filter\":\"sixteen-bytes-xx\"}",
		"{\"version\":1,\"command\":\"top\",\"filter\":\"a\\u0001\"}",
		"{\"version\":1,\"command\":\"top\",\"view\":\"functions\",\"function_kind\":\"perl\"}",
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		expect_error(bad[i], strlen(bad[i]), PERFD_ERR_BAD_REQUEST, bad[i]);
}
