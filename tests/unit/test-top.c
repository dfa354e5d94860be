/* SPDX-License-Identifier: MIT */
/*
 * test-top.c - the function view of `perfctl top` (daemon/api/cmd_top.c,
 * top_write_function_table): models built by hand (fakemodel.h), answers
 * read back with json-c as perfctl reads them.  The refresh as a whole,
 * against the real daemon and a terminal, is tests/integration/test_top.py.
 */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <string.h>

#include "api/cmd_top.h"
#include "api/command.h"
#include "base/jsonw.h"
#include "fakemodel.h"

FAKE_SUITE(top);

/* leaf, called by a (51) and by b (49); a by a1 and b by b1, both by main. */
static const struct fake_frame two_callers[] = {
	{ FRAME(1, 0x1), 1, { NATIVE("main", NULL, 0, 1) } },
	{ FRAME(1, 0x2), 1, { NATIVE("a1", NULL, 0, 1) } },
	{ FRAME(1, 0x3), 1, { NATIVE("b1", NULL, 0, 1) } },
	{ FRAME(1, 0x4), 1, { NATIVE("a", NULL, 0, 1) } },
	{ FRAME(1, 0x5), 1, { NATIVE("b", NULL, 0, 1) } },
	{ FRAME(1, 0x6), 1, { NATIVE("leaf", NULL, 0, 1) } },
};

static struct model *two_callers_model(void)
{
	SET_FAKE_FRAMES(two_callers);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 51, FRAME(1, 0x6), FRAME(1, 0x4), FRAME(1, 0x2), FRAME(1, 0x1));
	FAKE_ADD(0, 49, FRAME(1, 0x6), FRAME(1, 0x5), FRAME(1, 0x3), FRAME(1, 0x1));
	return fake_build();
}

/* The function view of m that a asks for, as perfctl gets it. */
static json_object *answer(const struct model *m, const struct top_args *a)
{
	struct jsonw w;
	json_object *o;

	jsonw_init(&w);
	jsonw_object_begin(&w);
	cr_assert_eq(top_write_function_table(a, m, &w), 0);
	jsonw_object_end(&w);
	cr_assert_eq(jsonw_error(&w), 0);
	o = json_tokener_parse(w.buf);
	cr_assert_not_null(o, "not JSON: %s", w.buf);
	jsonw_done(&w);
	return o;
}

static const char *name_at(json_object *list, size_t i)
{
	cr_assert_lt(i, json_object_array_length(list));
	return json_object_get_string(fake_get(json_object_array_get_idx(list, i), "function"));
}

/* The callers' or callees' tree (key) of function in the view of m of
 * rows nodes, 3 levels deep; *ret_answer holds it: json_object_put() it. */
static json_object *tree(const struct model *m, const char *function, unsigned rows,
			 const char *key, json_object **ret_answer)
{
	struct top_args a = { .view = TOP_FUNCTIONS, .rows = rows, .depth = 3, .function_kind = -1 };

	(void)snprintf(a.function, sizeof(a.function), "%s", function);
	*ret_answer = answer(m, &a);
	return fake_get(fake_get(*ret_answer, "function"), key);
}

static size_t children(json_object *list, size_t i, const char *key)
{
	return json_object_array_length(fake_get(json_object_array_get_idx(list, i), key));
}

Test(top, callers_are_spent_level_by_level)
{
	struct model *m = two_callers_model();
	json_object *o, *callers;

	/* two nodes: both direct callers, not a (51 %) and a's own caller */
	callers = tree(m, "leaf", 2, "callers", &o);
	cr_assert_eq(json_object_array_length(callers), 2, "%s", json_object_to_json_string(callers));
	cr_expect_str_eq(name_at(callers, 0), "a");
	cr_expect_str_eq(name_at(callers, 1), "b");
	cr_expect_eq(children(callers, 0, "callers"), 0);
	json_object_put(o);

	/* four: the next level too (a1 under a, b1 under b) */
	callers = tree(m, "leaf", 4, "callers", &o);
	cr_assert_eq(json_object_array_length(callers), 2);
	cr_expect_str_eq(name_at(fake_get(json_object_array_get_idx(callers, 0), "callers"), 0), "a1");
	cr_expect_str_eq(name_at(fake_get(json_object_array_get_idx(callers, 1), "callers"), 0), "b1");
	json_object_put(o);

	/* three: of the next level the largest, a1; b's own caller left out */
	callers = tree(m, "leaf", 3, "callers", &o);
	cr_expect_eq(children(callers, 0, "callers"), 1);
	cr_expect_eq(children(callers, 1, "callers"), 0);
	json_object_put(o);
	model_free(m);
}

Test(top, callees_are_spent_level_by_level)
{
	struct model *m = two_callers_model();
	json_object *o, *callees = tree(m, "main", 2, "callees", &o);

	cr_assert_eq(json_object_array_length(callees), 2, "%s", json_object_to_json_string(callees));
	cr_expect_str_eq(name_at(callees, 0), "a1");
	cr_expect_str_eq(name_at(callees, 1), "b1");
	json_object_put(o);
	model_free(m);
}

Test(top, a_function_sampled_is_sent_without_the_list)
{
	struct model *m = two_callers_model();
	struct top_args a = { .view = TOP_FUNCTIONS, .rows = 50, .depth = 3, .function_kind = -1 };
	json_object *o, *v;

	strcpy(a.function, "b");
	o = answer(m, &a);
	cr_expect_not(json_object_object_get_ex(o, "functions", NULL), "%s", json_object_to_json_string(o));
	cr_expect_str_eq(json_object_get_string(fake_get(fake_get(o, "function"), "function")), "b");
	cr_expect_eq(json_object_get_int64(fake_get(fake_get(o, "function"), "total")), 49);
	cr_expect_eq(json_object_get_int64(fake_get(o, "matched")), 6);
	json_object_put(o);

	/* not sampled: null, and the list (the screen shows it under a note) */
	strcpy(a.function, "nowhere");
	o = answer(m, &a);
	cr_expect(json_object_is_type(fake_get(o, "function"), json_type_null));
	v = fake_get(o, "functions");
	cr_assert_eq(json_object_array_length(v), 6);
	cr_expect_str_eq(name_at(v, 0), "leaf", "by self first");
	json_object_put(o);
	model_free(m);
}
