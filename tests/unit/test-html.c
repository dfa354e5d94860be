/* SPDX-License-Identifier: MIT */
/*
 * test-html.c - the flame graph page's encoder (daemon/encode/html.c and
 * the page writer flamepage.c): its escaping of the data for a <script>
 * element, and whole pages of models
 * built by hand (fakemodel.h), read back as a client gets them: the
 * answer's string, whose data element must hold exactly the JSON the page
 * parses, whatever the names hold.  The page itself is tested in a browser
 * by tests/integration/test_flamegraph.py.
 */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "encode/encode.h"
#include "encode/flame.h"
#include "fakemodel.h"
#include "flametest.h"

/* A name that would break out of a script element, a string, or a comment. */
static const char EVIL[] = "</script><script>alert(1)</script><!--x--> a&b \"q\" 'q' \\ Vec<T>";

FAKE_SUITE(html);

static char *escaped(const char *s)
{
	size_t n = html_script_escape(s, strlen(s), NULL);
	char *out = malloc(n + 1);

	cr_assert_not_null(out);
	cr_assert_eq(html_script_escape(s, strlen(s), out), n, "measured and written differ");
	out[n] = 0;
	return out;
}

Test(html, escape_leaves_no_angle_bracket_or_ampersand)
{
	char *e = escaped("\"</script>\" & <!-- \xe2\x80\xa8\xe2\x80\xa9 \xe2\x80\xa7 ok");

	cr_assert_str_eq(e, "\"\\u003c/script\\u003e\" \\u0026 \\u003c!-- \\u2028\\u2029 \xe2\x80\xa7 ok");
	free(e);
	e = escaped("");
	cr_assert_str_eq(e, "");
	free(e);
}

/* The page of model m, as a client reads it out of the answer. */
static char *encode_page(const struct model *m)
{
	struct encode_opts eo = { .period_ns = 10000000, .memory_sample_bytes = 4 << 20,
				  .time_unix_ns = 1700000000000000000ULL, .duration_ns = 5000000000ULL };

	return fake_encode_text(html_encode, m, &eo);
}

Test(html, hostile_names_stay_inside_the_data)
{
	static const struct fake_frame frames[] = {
		{ FRAME(1, 0x1), 1, { NATIVE(EVIL, NULL, 0, 1) } },
		{ FRAME(1, 0x2), 1, { NATIVE("main", NULL, 0, 1) } },
	};
	const uint64_t evil[] = { FRAME(1, 0x1), FRAME(1, 0x2) }, plain[] = { FRAME(1, 0x2) };
	struct model *m;
	json_object *d, *names;
	char *page;

	SET_FAKE_FRAMES(frames);
	fake_process(0, 42, "a</script>b", NULL);
	fake_add_kind(0, evil, 2, 0, 1, PROFILE_KIND_CPU, 3);
	fake_add_kind(0, plain, 1, 0, 1, PROFILE_KIND_CPU, 1);
	m = fake_build();
	page = encode_page(m);
	/* the template's two script elements and nothing more */
	cr_expect_eq(count(page, "<script"), 2);
	cr_expect_eq(count(page, "</script"), 2);
	cr_expect_eq(count(page, "<!--"), 1, "only the template's own comment");
	cr_expect(strstr(page, "@PERFD_DATA@") == NULL, "the marker left in the page");
	d = page_data(page);
	names = get(d, "names");
	cr_expect_geq(name_index(names, EVIL), 0, "the name did not arrive whole");
	cr_expect_geq(name_index(names, "a</script>b (pid 42)"), 0);
	cr_expect_eq(json_object_get_int64(get(d, "total")), 4);
	json_object_put(d);
	free(page);
	model_free(m);
}

Test(html, flat_nodes_with_kinds_one_root_per_process_and_pruning)
{
	static const struct fake_frame frames[] = {
		{ KFRAME(0x10), 1, { KERNEL("do_syscall_64") } },
		{ FRAME(1, 0x1), 1, { NATIVE("main", NULL, 0, 1) } },
		{ FRAME(1, 0x2), 1, { NATIVE("rare", NULL, 0, 1) } },
	};
	const uint64_t hot[] = { KFRAME(0x10), FRAME(1, 0x1) }, rare[] = { FRAME(1, 0x2), FRAME(1, 0x1) };
	struct model *m;
	json_object *d, *nodes, *names, *info, *pruned;
	char *page;
	int k;

	SET_FAKE_FRAMES(frames);
	fake_process(0, 7, "one", NULL);
	fake_process(1, 8, "two", NULL);
	fake_add_kind(0, hot, 2, 1, 1, PROFILE_KIND_CPU, 40000);
	fake_add_kind(0, rare, 2, 0, 1, PROFILE_KIND_CPU, 1); /* 1/50001: under 1/20000 */
	fake_add_kind(1, hot + 1, 1, 0, 1, PROFILE_KIND_CPU, 10000);
	m = fake_build();
	page = encode_page(m);
	d = page_data(page);
	nodes = get(d, "nodes");
	names = get(d, "names");
	info = get(d, "name_info");
	cr_expect_eq(json_object_get_int64(get(d, "roots")), 2);
	cr_expect_str_eq(json_object_get_string(get(d, "unit")), "samples");
	cr_expect_eq(json_object_get_int64(get(d, "period_ns")), 10000000);
	/* depth first: one (pid 7) -> main -> do_syscall_64, then two (pid 8) -> main */
	cr_assert_eq(json_object_array_length(nodes), 5 * 4);
	cr_expect_eq(at(nodes, 0), name_index(names, "one (pid 7)"));
	cr_expect_eq(at(nodes, 1), 40001);
	cr_expect_eq(at(nodes, 3), 1, "the rare child is pruned, main kept");
	cr_expect_eq(at(nodes, 4), name_index(names, "main"));
	cr_expect_eq(at(nodes, 5), 40001);
	cr_expect_eq(at(nodes, 6), 0);
	cr_expect_eq(at(nodes, 8), name_index(names, "do_syscall_64"));
	cr_expect_eq(at(nodes, 10), 40000, "self of the leaf");
	cr_expect_eq(at(nodes, 12), name_index(names, "two (pid 8)"));
	cr_expect_eq(at(nodes, 16), name_index(names, "main"), "one name for both mains");
	cr_expect_eq(name_index(names, "rare"), -1);
	k = name_index(names, "do_syscall_64");
	cr_expect_str_eq(json_object_get_string(json_object_array_get_idx(get(d, "kinds"), at(info, 2 * k))),
			 "kernel");
	k = name_index(names, "one (pid 7)");
	cr_expect_str_eq(json_object_get_string(json_object_array_get_idx(get(d, "kinds"), at(info, 2 * k))),
			 "process");
	k = name_index(names, "main");
	cr_expect_str_eq(json_object_get_string(json_object_array_get_idx(get(d, "modules"), at(info, 2 * k + 1))),
			 "/usr/bin/app");
	/* colours come with the data, one per name and per kind */
	cr_expect_eq(json_object_array_length(get(d, "name_colours")), json_object_array_length(names));
	cr_expect_eq(json_object_array_length(get(d, "kind_colours")),
		     json_object_array_length(get(d, "kinds")));
	k = name_index(names, "do_syscall_64");
	cr_expect_neq(at(get(d, "name_colours"), (size_t)k),
		      at(get(d, "name_colours"), (size_t)name_index(names, "main")));
	cr_expect(!json_object_object_get_ex(d, "diff", NULL), "a snapshot is no differential graph");
	pruned = get(d, "pruned");
	cr_expect_eq(json_object_get_int64(get(pruned, "nodes")), 1);
	cr_expect_eq(json_object_get_int64(get(pruned, "value")), 1);
	json_object_put(d);
	free(page);
	model_free(m);
}

Test(html, memory_in_bytes_and_an_empty_profile)
{
	const uint64_t s[] = { FRAME(1, 0x1) };
	struct model *m;
	json_object *d;
	char *page;

	fake_process(0, 9, "grow", NULL);
	fake_add_kind(0, s, 1, 0, 1, PROFILE_KIND_MEMORY, 8 << 20);
	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_MEMORY });
	page = encode_page(m);
	d = page_data(page);
	cr_expect_str_eq(json_object_get_string(get(d, "unit")), "bytes");
	cr_expect_eq(json_object_get_int64(get(d, "memory_sample_bytes")), 4 << 20);
	cr_expect_eq(json_object_get_int64(get(d, "total")), 8 << 20);
	json_object_put(d);
	free(page);
	model_free(m);

	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU });
	page = encode_page(m);
	d = page_data(page);
	cr_expect_eq(json_object_get_int64(get(d, "total")), 0);
	cr_expect_eq(json_object_array_length(get(d, "nodes")), 4, "the one process, empty");
	json_object_put(d);
	free(page);
	model_free(m);
}

/* 100k distinct stacks of one sample each, ten deep, four callees a frame:
 * the page keeps what is at least 1/20000 of the total (the callers) and
 * stays small. */
Test(html, a_100k_stack_profile_makes_a_small_page, .timeout = 60)
{
	enum { STACKS = 100000, DEPTH = 10 };
	struct model *m;
	json_object *d, *pruned;
	char *page;
	size_t size;

	m = fake_fanout_model(STACKS, DEPTH);
	cr_assert_eq(m->n_samples, STACKS);
	page = encode_page(m);
	size = strlen(page);
	d = page_data(page);
	pruned = get(d, "pruned");
	cr_expect_gt(json_object_get_int64(get(pruned, "nodes")), 50000, "the leaves are pruned");
	cr_expect_lt(json_object_array_length(get(d, "nodes")) / 4, 60000);
	cr_expect_lt(size, 4 << 20, "a page of %zu bytes", size);
	cr_log_info("100k stacks: a page of %zu bytes, %zu nodes", size,
		    json_object_array_length(get(d, "nodes")) / 4);
	json_object_put(d);
	free(page);
	model_free(m);
}
