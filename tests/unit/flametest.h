/* SPDX-License-Identifier: MIT */
/*
 * flametest.h - what the flame graph suites (test-flame.c, test-html.c,
 * test-svg.c, test-diff-flame.c) read back: a page's data as its script
 * reads it (daemon/encode/flamepage.c), and texts counted in a page or an
 * SVG.  Header-only: each suite is one program.
 */
#ifndef PERFD_TEST_FLAMETEST_H
#define PERFD_TEST_FLAMETEST_H

#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "perfd/macro.h"

#define DATA_OPEN "<script type=\"application/json\" id=\"perfd-data\">"

/* The data the page parses: what its data element holds, up to the first
 * "</script" as an HTML parser ends it. */
_unused_ static json_object *page_data(const char *page)
{
	const char *at = strstr(page, DATA_OPEN), *end;
	json_object *o;
	char *text;

	cr_assert_not_null(at, "no data element");
	at += strlen(DATA_OPEN);
	end = strstr(at, "</script");
	cr_assert_not_null(end);
	text = strndup(at, (size_t)(end - at));
	cr_assert_eq(strpbrk(text, "<>&"), NULL, "a raw '<', '>' or '&' in the data: %s", text);
	o = json_tokener_parse(text);
	cr_assert_not_null(o, "the data is not JSON: %s", text);
	free(text);
	return o;
}

_unused_ static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	cr_assert(json_object_object_get_ex(o, key, &v), "no \"%s\"", key);
	return v;
}

_unused_ static int64_t at(json_object *array, size_t i)
{
	return json_object_get_int64(json_object_array_get_idx(array, i));
}

_unused_ static int name_index(json_object *names, const char *name)
{
	for (size_t i = 0; i < json_object_array_length(names); i++)
		if (strcmp(json_object_get_string(json_object_array_get_idx(names, i)), name) == 0)
			return (int)i;
	return -1;
}

/* How many times what occurs in s. */
_unused_ static size_t count(const char *s, const char *what)
{
	size_t n = 0;

	for (const char *p = s; (p = strstr(p, what)); p++)
		n++;
	return n;
}

#endif
