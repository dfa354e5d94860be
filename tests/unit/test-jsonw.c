/* SPDX-License-Identifier: MIT */
/*
 * test-jsonw.c - the streaming JSON writer (daemon/base/jsonw.c): commas
 * and colons in the right places at every depth, escaping of quotes,
 * backslashes and control bytes, and invalid UTF-8 replaced by U+FFFD so
 * that json-c's strict, UTF-8 validating tokener takes every output.
 * (Out of memory is sticky by design; forcing realloc to fail is not worth
 * the machinery here.)
 */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "perfd/macro.h"

/* The writer's text, which must be what expected says, byte for byte. */
static void expect_text(struct jsonw *w, const char *expected)
{
	cr_assert_eq(jsonw_error(w), 0);
	cr_assert_not_null(w->buf);
	cr_assert_eq(w->len, strlen(w->buf), "text holds a NUL or len is off");
	cr_assert_str_eq(w->buf, expected);
}

/* Parses text strictly, validating UTF-8; NULL when json-c refuses it. */
static json_object *parse_strict(const char *text, size_t len)
{
	struct json_tokener *tok = json_tokener_new();
	json_object *o;

	cr_assert_not_null(tok);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, text, (int)len);
	if (o && json_tokener_get_parse_end(tok) != len) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

/* s (n bytes) written as one JSON string value, then parsed back. */
static json_object *round_trip(const char *s, size_t n, char **ret_text)
{
	struct jsonw w;
	json_object *o;

	jsonw_init(&w);
	jsonw_string_len(&w, s, n);
	cr_assert_eq(jsonw_error(&w), 0);
	o = parse_strict(w.buf, w.len);
	cr_assert_not_null(o, "json-c refuses the writer's output: %s", w.buf);
	cr_assert(json_object_is_type(o, json_type_string));
	*ret_text = strdup(w.buf);
	jsonw_done(&w);
	return o;
}

Test(jsonw, scalars_at_the_top)
{
	struct jsonw w;

	jsonw_init(&w);
	jsonw_u64(&w, UINT64_MAX);
	expect_text(&w, "18446744073709551615");
	jsonw_done(&w);

	jsonw_init(&w);
	jsonw_i64(&w, INT64_MIN);
	expect_text(&w, "-9223372036854775808");
	jsonw_done(&w);

	jsonw_init(&w);
	jsonw_bool(&w, false);
	expect_text(&w, "false");
	jsonw_done(&w);

	jsonw_init(&w);
	jsonw_string(&w, NULL);
	expect_text(&w, "\"\"");
	jsonw_done(&w);
}

Test(jsonw, separators_in_objects_and_arrays)
{
	struct jsonw w;

	jsonw_init(&w);
	jsonw_object_begin(&w);
	jsonw_kv_u64(&w, "a", 1);
	jsonw_kv_string(&w, "b", "x");
	jsonw_kv_bool(&w, "c", true);
	jsonw_kv_double(&w, "d", 0.5);
	jsonw_key(&w, "e");
	jsonw_array_begin(&w);
	jsonw_u64(&w, 1);
	jsonw_i64(&w, -2);
	jsonw_string(&w, "three");
	jsonw_bool(&w, false);
	jsonw_null(&w);
	jsonw_array_end(&w);
	jsonw_key(&w, "f");
	jsonw_raw(&w, "{\"g\":null}", 10);
	jsonw_object_end(&w);
	expect_text(&w, "{\"a\":1,\"b\":\"x\",\"c\":true,\"d\":0.5,\"e\":[1,-2,\"three\",false,null],"
			"\"f\":{\"g\":null}}");
	jsonw_done(&w);
}

Test(jsonw, empty_containers)
{
	struct jsonw w;

	jsonw_init(&w);
	jsonw_array_begin(&w);
	jsonw_object_begin(&w);
	jsonw_object_end(&w);
	jsonw_array_begin(&w);
	jsonw_array_end(&w);
	jsonw_object_begin(&w);
	jsonw_key(&w, "k");
	jsonw_array_begin(&w);
	jsonw_array_end(&w);
	jsonw_object_end(&w);
	jsonw_array_end(&w);
	expect_text(&w, "[{},[],{\"k\":[]}]");
	jsonw_done(&w);
}

/* A comma is owed per level: closing an inner container must not make
 * the outer one forget that it already has items, nor the other way. */
Test(jsonw, nesting_keeps_each_level_apart)
{
	struct jsonw w;
	json_object *o;

	jsonw_init(&w);
	jsonw_object_begin(&w);
	jsonw_key(&w, "a");
	jsonw_array_begin(&w);
	for (int i = 0; i < 3; i++) {
		jsonw_object_begin(&w);
		jsonw_kv_u64(&w, "i", (uint64_t)i);
		jsonw_key(&w, "children");
		jsonw_array_begin(&w);
		jsonw_array_begin(&w);
		jsonw_array_end(&w);
		jsonw_u64(&w, 7);
		jsonw_array_end(&w);
		jsonw_object_end(&w);
	}
	jsonw_array_end(&w);
	jsonw_kv_u64(&w, "after", 9);
	jsonw_object_end(&w);
	expect_text(&w, "{\"a\":[{\"i\":0,\"children\":[[],7]},{\"i\":1,\"children\":[[],7]},"
			"{\"i\":2,\"children\":[[],7]}],\"after\":9}");
	o = parse_strict(w.buf, w.len);
	cr_assert_not_null(o);
	json_object_put(o);
	jsonw_done(&w);
}

/* 800 levels, as a call tree of 400 frames nests: still valid JSON. */
Test(jsonw, deep_nesting)
{
	struct jsonw w;
	json_object *o;
	struct json_tokener *tok;

	jsonw_init(&w);
	for (int i = 0; i < 800; i++) {
		jsonw_array_begin(&w);
		jsonw_u64(&w, (uint64_t)i);
	}
	for (int i = 0; i < 800; i++)
		jsonw_array_end(&w);
	cr_assert_eq(jsonw_error(&w), 0);
	tok = json_tokener_new_ex(1000);
	o = json_tokener_parse_ex(tok, w.buf, (int)w.len);
	cr_assert_not_null(o, "%s", json_tokener_error_desc(json_tokener_get_error(tok)));
	json_object_put(o);
	json_tokener_free(tok);
	jsonw_done(&w);
}

Test(jsonw, deeper_than_tracked_is_an_error_not_bad_json)
{
	struct jsonw w;

	jsonw_init(&w);
	for (int i = 0; i <= JSONW_MAX_DEPTH; i++)
		jsonw_array_begin(&w);
	cr_assert_eq(jsonw_error(&w), -ENOMEM);
	jsonw_done(&w);
}

Test(jsonw, quotes_backslashes_and_control_bytes_are_escaped)
{
	const char s[] = "a\"b\\c\nd\te\x01\x1f\x7f/";
	struct jsonw w;
	json_object *o;

	jsonw_init(&w);
	jsonw_string_len(&w, s, sizeof(s) - 1);
	expect_text(&w, "\"a\\\"b\\\\c\\nd\\te\\u0001\\u001f\x7f/\"");
	for (size_t i = 0; i < w.len; i++)
		cr_assert_geq((unsigned char)w.buf[i], 0x20, "raw control byte at %zu", i);
	o = parse_strict(w.buf, w.len);
	cr_assert_not_null(o);
	cr_assert_eq((size_t)json_object_get_string_len(o), sizeof(s) - 1);
	cr_assert_eq(memcmp(json_object_get_string(o), s, sizeof(s) - 1), 0);
	json_object_put(o);
	jsonw_done(&w);
}

Test(jsonw, every_control_byte_and_nul_round_trips)
{
	char s[33], *text;
	json_object *o;

	for (int i = 0; i < 32; i++)
		s[i] = (char)i;
	s[32] = '"';
	o = round_trip(s, sizeof(s), &text);
	cr_assert_eq((size_t)json_object_get_string_len(o), sizeof(s));
	cr_assert_eq(memcmp(json_object_get_string(o), s, sizeof(s)), 0);
	json_object_put(o);
	free(text);
}

Test(jsonw, keys_are_escaped_too)
{
	struct jsonw w;

	jsonw_init(&w);
	jsonw_object_begin(&w);
	jsonw_kv_u64(&w, "we\"ird\n", 1);
	jsonw_object_end(&w);
	expect_text(&w, "{\"we\\\"ird\\n\":1}");
	jsonw_done(&w);
}

Test(jsonw, valid_utf8_passes_unchanged)
{
	/* 2-, 3- and 4-byte sequences, the largest code point included */
	const char s[] = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x94\xa5 \xf4\x8f\xbf\xbf";
	char *text;
	json_object *o = round_trip(s, sizeof(s) - 1, &text);

	cr_assert_eq(strncmp(text + 1, s, sizeof(s) - 1), 0, "%s", text);
	cr_assert_str_eq(json_object_get_string(o), s);
	json_object_put(o);
	free(text);
}

struct utf8_case {
	const char *in;
	const char *out; /* as the decoded string */
};

#define FFFD "\xef\xbf\xbd"
static const struct utf8_case utf8_cases[] = {
	{ "\xff", FFFD },                        /* never valid */
	{ "\x80x", FFFD "x" },                   /* lone continuation */
	{ "a\xc3", "a" FFFD },                   /* cut at the end */
	{ "\xc3(", FFFD "(" },                   /* continuation missing */
	{ "\xc0\xaf", FFFD FFFD },               /* overlong '/' */
	{ "\xe0\x80\xaf", FFFD FFFD FFFD },      /* overlong, 3 bytes */
	{ "\xed\xa0\x80", FFFD FFFD FFFD },      /* a surrogate */
	{ "\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD }, /* past U+10FFFF */
	{ "\xf8\x88\x80\x80\x80", FFFD FFFD FFFD FFFD FFFD }, /* 5-byte form */
	{ "ok\xe2\x82", "ok" FFFD FFFD },        /* 3-byte cut short */
};

Test(jsonw, invalid_utf8_becomes_replacement_characters)
{
	for (size_t i = 0; i < ELEMENTSOF(utf8_cases); i++) {
		const struct utf8_case *c = &utf8_cases[i];
		char *text;
		json_object *o = round_trip(c->in, strlen(c->in), &text);

		cr_assert_str_eq(json_object_get_string(o), c->out, "case %zu: %s", i, text);
		json_object_put(o);
		free(text);
	}
}

/* Every byte value, in every position a sequence could start: whatever
 * comes in, out comes strict JSON in valid UTF-8. */
Test(jsonw, arbitrary_bytes_always_parse)
{
	unsigned char buf[512];
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	for (int round = 0; round < 200; round++) {
		char *text;
		json_object *o;

		for (size_t i = 0; i < sizeof(buf); i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = round == 0 ? (unsigned char)i : (unsigned char)x;
		}
		o = round_trip((const char *)buf, sizeof(buf), &text);
		json_object_put(o);
		free(text);
	}
}

Test(jsonw, string_in_pieces_is_one_value)
{
	struct jsonw w;

	jsonw_init(&w);
	jsonw_array_begin(&w);
	jsonw_string(&w, "first");
	jsonw_string_begin(&w);
	jsonw_string_append(&w, "a;b", 3);
	jsonw_string_append(&w, " 1\n", 3);
	jsonw_string_append(&w, "\"", 1);
	jsonw_string_end(&w);
	jsonw_u64(&w, 2);
	jsonw_array_end(&w);
	expect_text(&w, "[\"first\",\"a;b 1\\n\\\"\",2]");
	jsonw_done(&w);
}

/* A multi-byte character split across two appends is two invalid pieces:
 * each is replaced, and the output stays valid. */
Test(jsonw, sequence_split_across_appends_stays_valid)
{
	struct jsonw w;
	json_object *o;

	jsonw_init(&w);
	jsonw_string_begin(&w);
	jsonw_string_append(&w, "\xe2\x82", 2);
	jsonw_string_append(&w, "\xac", 1);
	jsonw_string_end(&w);
	o = parse_strict(w.buf, w.len);
	cr_assert_not_null(o, "%s", w.buf);
	json_object_put(o);
	jsonw_done(&w);
}

Test(jsonw, doubles_are_finite_json_numbers)
{
	struct jsonw w;
	json_object *o;

	jsonw_init(&w);
	jsonw_array_begin(&w);
	jsonw_double(&w, 1.25);
	jsonw_double(&w, NAN);
	jsonw_double(&w, INFINITY);
	jsonw_double(&w, -INFINITY);
	jsonw_double(&w, 1e300);
	jsonw_array_end(&w);
	expect_text(&w, "[1.25,0,0,0,1e+300]");
	o = parse_strict(w.buf, w.len);
	cr_assert_not_null(o);
	json_object_put(o);
	jsonw_done(&w);
}

Test(jsonw, steal_hands_over_the_text)
{
	struct jsonw w;
	size_t len = 0;
	char *text;

	jsonw_init(&w);
	jsonw_object_begin(&w);
	jsonw_kv_string(&w, "k", "v");
	jsonw_object_end(&w);
	text = jsonw_steal(&w, &len);
	cr_assert_not_null(text);
	cr_assert_eq(len, strlen(text));
	cr_assert_str_eq(text, "{\"k\":\"v\"}");
	cr_assert_null(w.buf);
	cr_assert_eq(w.len, 0);
	jsonw_done(&w); /* nothing left to free */
	free(text);

	/* an empty writer still gives a text */
	jsonw_init(&w);
	text = jsonw_steal(&w, &len);
	cr_assert_not_null(text);
	cr_assert_eq(len, 0);
	cr_assert_str_eq(text, "");
	free(text);
}

Test(jsonw, large_output_grows_the_buffer)
{
	struct jsonw w;
	json_object *o;

	jsonw_init(&w);
	jsonw_array_begin(&w);
	for (int i = 0; i < 100000; i++)
		jsonw_string(&w, "frame;frame;frame");
	jsonw_array_end(&w);
	cr_assert_eq(jsonw_error(&w), 0);
	o = parse_strict(w.buf, w.len);
	cr_assert_not_null(o);
	cr_assert_eq(json_object_array_length(o), 100000);
	json_object_put(o);
	jsonw_done(&w);
}
