/* SPDX-License-Identifier: MIT */
/*
 * test-diff-flame.c - perfctl diff's flame graph (cli/diff_flame.c) of
 * profiles written as folded text, read back from the page's data as its
 * script reads it (flametest.h) and from the SVG's text: one tree of both
 * sides matched by the path of names from the root, each node with both
 * sides' values and coloured by the change of its share (so profiles of
 * different sizes compare), frames of BEFORE only kept with width 0,
 * kernel frames named apart (and left out for memory), and an empty side.
 * The page and the SVG themselves are opened in Chromium by
 * tests/integration/test_diff.py.
 */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "flametest.h"

static struct profile *folded(const char *text)
{
	char err[PROFILE_ERROR_MAX] = "";
	struct profile *p = NULL;

	cr_assert_eq(profile_read(text, strlen(text), NULL, &p, err), 0, "%s", err);
	return p;
}

/* The graph of before -> after, as a NUL-terminated text. */
static char *graph(const char *before, const char *after, bool svg, bool skip_kernel)
{
	struct profile *a = folded(before), *b = folded(after);
	const struct diff_flame_opts o = { .svg = svg, .skip_kernel = skip_kernel,
					   .before_source = "before.folded",
					   .after_source = "after.folded" };
	char *out = NULL, *text;
	size_t len = 0;

	cr_assert_eq(diff_flame(a, b, &o, &out, &len), 0);
	text = strndup(out, len);
	cr_assert_not_null(text);
	free(out);
	profile_free(a);
	profile_free(b);
	return text;
}

/* A node of the page's data: its index among the nodes, and its figures. */
struct node {
	int64_t total, self, children, before_total, before_self, colour;
};

/* The first node (depth first) named name; false when none is. */
static bool find(json_object *d, const char *name, struct node *ret)
{
	json_object *nodes = get(d, "nodes"), *before = get(get(d, "diff"), "nodes");
	int k = name_index(get(d, "names"), name);

	if (k < 0)
		return false;
	for (size_t i = 0; i < json_object_array_length(nodes) / 4; i++) {
		if (at(nodes, 4 * i) != k)
			continue;
		*ret = (struct node){ at(nodes, 4 * i + 1), at(nodes, 4 * i + 2), at(nodes, 4 * i + 3),
				      at(before, 3 * i), at(before, 3 * i + 1), at(before, 3 * i + 2) };
		return true;
	}
	return false;
}

static struct node node(json_object *d, const char *name)
{
	struct node n;

	cr_assert(find(d, name, &n), "no node %s", name);
	return n;
}

/* Blue by at least margin over red, and the other way round. */
static bool blue(int64_t c, int margin)
{
	return (c & 0xff) > (c >> 16 & 0xff) + margin;
}

static bool red(int64_t c, int margin)
{
	return (c >> 16 & 0xff) > (c & 0xff) + margin;
}

/* 4:1 before, 1:1 after, after 10x the size; gone_fn in BEFORE only. */
#define BEFORE "t;main;work_hot 400\nt;main;work_other 100\nt;main;gone_fn;deeper 50\n"
#define AFTER "t;main;work_hot 2500\nt;main;work_other 2500\n"

Test(diff_flame, one_tree_of_both_sides_coloured_by_change_of_share)
{
	char *page = graph(BEFORE, AFTER, false, false);
	json_object *d = page_data(page), *diff = get(d, "diff");
	struct node hot = node(d, "work_hot"), other = node(d, "work_other"), main_ = node(d, "main");
	struct node gone = node(d, "gone_fn"), deeper = node(d, "deeper");

	cr_expect_eq(json_object_get_int64(get(d, "total")), 5000);
	cr_expect_eq(json_object_get_int64(get(diff, "before_total")), 550);
	cr_expect_str_eq(json_object_get_string(get(diff, "before_source")), "before.folded");
	cr_expect_str_eq(json_object_get_string(get(diff, "after_source")), "after.folded");
	cr_expect_eq(json_object_get_int64(get(d, "roots")), 1, "main: the folded comm is no frame");
	cr_expect(!json_object_object_get_ex(d, "name_colours", NULL), "colours are the change's");
	cr_expect_eq(main_.children, 3, "work_hot, work_other and gone_fn");
	cr_expect_eq(hot.total, 2500);
	cr_expect_eq(hot.before_total, 400);
	cr_expect_eq(hot.before_self, 400);
	cr_expect_eq(other.before_total, 100);
	/* 72.7 % -> 50 %: blue; 18.2 % -> 50 %: red, the largest change */
	cr_expect(blue(hot.colour, 100), "%06lx", (long)hot.colour);
	cr_expect(red(other.colour, 100), "%06lx", (long)other.colour);
	cr_expect_float_eq(json_object_get_double(get(diff, "full_change")), 100.0 * (0.5 - 100.0 / 550),
			   0.01);
	cr_expect_eq(main_.colour, 0xe8e8e8, "100 %% on both sides: no change");
	/* BEFORE only: width 0, kept with its BEFORE value, counted once */
	cr_expect_eq(gone.total, 0);
	cr_expect_eq(gone.before_total, 50);
	cr_expect_eq(deeper.before_self, 50);
	cr_expect(blue(gone.colour, 20), "paler: -9 points of 32: %06lx", (long)gone.colour);
	cr_expect_gt(gone.colour >> 8 & 0xff, hot.colour >> 8 & 0xff);
	cr_expect_eq(json_object_get_int64(get(get(diff, "gone"), "nodes")), 1);
	cr_expect_eq(json_object_get_int64(get(get(diff, "gone"), "value")), 50);
	json_object_put(d);
	free(page);
}

/* Frames match by the path of names: work_hot under another caller is
 * another node, and a name found on both sides is one name. */
Test(diff_flame, frames_match_by_path_and_kernel_names_stay_apart)
{
	char *page = graph("t;main;a;leaf 10\nt;main;read;read_[k] 10\n",
			   "t;main;b;leaf 10\nt;main;read 10\nt;main;read;read_[k] 10\n", false, false);
	json_object *d = page_data(page), *names = get(d, "names");
	struct node leaf;

	cr_expect_geq(name_index(names, "read_[k]"), 0, "a kernel frame named as diff names it");
	cr_expect_geq(name_index(names, "read"), 0);
	cr_expect_eq(node(d, "read_[k]").before_total, 10);
	cr_expect_eq(node(d, "read").self, 10);
	cr_expect_eq(node(d, "read").before_self, 0);
	cr_expect_eq(node(d, "a").total, 0, "a: BEFORE only");
	cr_expect_eq(node(d, "b").before_total, 0, "b: AFTER only");
	/* leaf under b first (the kept children come largest AFTER first) */
	leaf = node(d, "leaf");
	cr_expect_eq(leaf.total, 10);
	cr_expect_eq(leaf.before_total, 0, "leaf under b is not leaf under a");
	json_object_put(d);
	free(page);
}

Test(diff_flame, memory_leaves_kernel_frames_out_and_an_empty_side_draws)
{
	char *page = graph("t;main;grow;page_fault_[k] 30\n", "t;main;grow;page_fault_[k] 10\n", false,
			   true);
	json_object *d = page_data(page);

	cr_expect_eq(name_index(get(d, "names"), "page_fault_[k]"), -1);
	cr_expect_eq(node(d, "grow").self, 10);
	cr_expect_eq(node(d, "grow").before_self, 30);
	json_object_put(d);
	free(page);

	page = graph("", "t;main 5\n", false, false);
	d = page_data(page);
	cr_expect_eq(json_object_get_int64(get(get(d, "diff"), "before_total")), 0);
	cr_expect_eq(node(d, "main").total, 5);
	json_object_put(d);
	free(page);
}

Test(diff_flame, the_svg_of_the_same_graph)
{
	char *svg = graph(BEFORE, AFTER, true, false);

	cr_expect(strncmp(svg, "<?xml ", 6) == 0);
	cr_expect(strstr(svg, "perfd differential flame graph") != NULL);
	cr_expect(strstr(svg, "<title>work_hot\nuser\nafter:  total 2,500 samples (50.00%), self 2,500 "
			      "samples (50.00%)\nbefore: total 400 samples (72.73%), self 400 samples "
			      "(72.73%)\nchange: total -22.73 points, self -22.73 points</title>") != NULL,
		  "%s", svg);
	cr_expect(strstr(svg, "in BEFORE only, below it: 1 frame, 9.09% of BEFORE: gone_fn (9.09%)") != NULL);
	cr_expect(strstr(svg, "1 frame is in BEFORE only (together 9.09% of BEFORE)") != NULL);
	cr_expect(strstr(svg, "</svg>\n") != NULL);
	free(svg);
}
