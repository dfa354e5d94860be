/* SPDX-License-Identifier: MIT */
/*
 * test-duration.c - parse_duration_seconds() (daemon/base/duration.c), the
 * one reader of "30s" / "10m" / "1h30m" / "2d" / plain seconds shared by
 * perfd's --retention and perfctl's durations: what it accepts, what it
 * refuses, and that a refusal leaves the output alone.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>

#include "base/duration.h"
#include "perfd/macro.h"

/* Criterion copies parameters into the test's process, which may map
 * string literals elsewhere: the texts live inside the structs. */
struct good_case {
	char text[16];
	double seconds;
};

static struct good_case good_cases[] = {
	{ "30s", 30 },   { "10m", 600 },  { "1h", 3600 },     { "2d", 172800 },
	{ "1.5", 1.5 },  { "90", 90 },    { "0.5m", 30 },     { "1.25h", 4500 },
	{ "1", 1 },      { "7d", 604800 }, { "0.001s", 0.001 },
	{ "1h30m", 5400 }, { "1m30s", 90 }, { "2d12h", 216000 }, { "1m30.5s", 90.5 },
	{ "1d1h1m1s", 90061 }, { "0m5s", 5 },
};

ParameterizedTestParameters(duration, accepted)
{
	return cr_make_param_array(struct good_case, good_cases, ELEMENTSOF(good_cases));
}

ParameterizedTest(struct good_case *c, duration, accepted)
{
	double v = -1;

	cr_assert_eq(parse_duration_seconds(c->text, &v), 0, "\"%s\" refused", c->text);
	cr_assert_float_eq(v, c->seconds, 1e-9, "\"%s\": %g, expected %g", c->text, v, c->seconds);
}

struct bad_case {
	char text[16];
};

static struct bad_case bad_cases[] = {
	{ "" },     { "10x" },  { "-5s" },  { "1h30" }, { "0" },   { "inf" },   { "0s" },
	{ "-0" },   { "+5" },   { " 5" },   { "5 " },   { "5s " }, { "s" },     { "h" },
	{ "nan" },  { "infs" }, { "5ss" },  { "5sm" },  { "1e999" }, { "5S" },  { "5 s" },
	{ "\t5" },  { "0.0m" }, { "-inf" }, { "5\n" },
	{ "30m1h" }, { "1h1h" }, { "1hm" },  { "m30s" }, { "1h 30m" }, { "1.2.3s" }, { "." },
	{ "0h0m" },  { "1h-5m" }, { "1e3" },
};

ParameterizedTestParameters(duration, refused)
{
	return cr_make_param_array(struct bad_case, bad_cases, ELEMENTSOF(bad_cases));
}

ParameterizedTest(struct bad_case *c, duration, refused)
{
	double v = 12345;

	cr_assert_eq(parse_duration_seconds(c->text, &v), -EINVAL, "\"%s\" accepted as %g",
		     c->text, v);
	cr_assert_eq(v, 12345, "\"%s\": output written on refusal", c->text);
}

Test(duration, null_is_refused)
{
	double v = 7;

	cr_assert_eq(parse_duration_seconds(NULL, &v), -EINVAL);
	cr_assert_eq(v, 7);
}
