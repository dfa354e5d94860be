/* SPDX-License-Identifier: MIT */
/*
 * test-report.c - the report's computation (cli/report.c) on profiles
 * written as folded text: self and total per function, a recursive
 * function counted once per stack, the orders of --sort, rows per line,
 * kernel frames left out when asked, and callers and callees whose shares
 * add up to the function's total.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "report.h"

static struct profile *folded(const char *text)
{
	char err[PROFILE_ERROR_MAX] = "";
	struct profile *p = NULL;

	cr_assert_eq(profile_read(text, strlen(text), NULL, &p, err), 0, "%s", err);
	return p;
}

static struct report *build(const struct profile *p, bool lines, bool skip_kernel)
{
	struct report_opts o = { .lines = lines, .skip_kernel = skip_kernel };
	struct report *r = NULL;

	cr_assert_eq(report_build(p, &o, &r), 0);
	return r;
}

/* The row of function name (the only one with that name and side). */
static const struct report_row *row(const struct report *r, const char *name, bool kernel)
{
	const struct report_row *found = NULL;

	for (size_t i = 0; i < r->n_rows; i++)
		if (strcmp(profile_string(r->p, r->rows[i].function), name) == 0 &&
		    r->rows[i].kernel == kernel) {
			cr_assert_null(found, "two rows of %s", name);
			found = &r->rows[i];
		}
	cr_assert_not_null(found, "no row of %s", name);
	return found;
}

static const char *name_of(const struct report *r, uint32_t i)
{
	return i == REPORT_ROOT ? "(root)" : profile_string(r->p, r->rows[i].function);
}

static const char coordinated[] = "app;main;coord;leaf_a 30\n"
				  "app;main;coord;leaf_b 10\n"
				  "app;main;coord 1\n"
				  "app;main;other;leaf_a 5\n"
				  "app;main;coord;leaf_a;sys_[k] 4\n";

Test(report, self_and_total)
{
	struct profile *p = folded(coordinated);
	struct report *r = build(p, false, false);

	cr_assert_eq(r->total, 50);
	cr_assert_eq(row(r, "main", false)->self, 0);
	cr_assert_eq(row(r, "main", false)->total, 50);
	cr_assert_eq(row(r, "coord", false)->self, 1);
	cr_assert_eq(row(r, "coord", false)->total, 45);
	cr_assert_eq(row(r, "leaf_a", false)->self, 35);
	cr_assert_eq(row(r, "leaf_a", false)->total, 39);
	cr_assert_eq(row(r, "sys", true)->self, 4);
	report_free(r);
	profile_free(p);
}

Test(report, recursion_counts_once_per_stack)
{
	struct profile *p = folded("app;f;g;f;g;f 3\napp;f;g 2\n");
	struct report *r = build(p, false, false);

	cr_assert_eq(row(r, "f", false)->total, 5, "not 3 x 3 + 2");
	cr_assert_eq(row(r, "f", false)->self, 3);
	cr_assert_eq(row(r, "g", false)->total, 5);
	cr_assert_eq(row(r, "g", false)->self, 2);
	report_free(r);
	profile_free(p);
}

Test(report, orders)
{
	struct profile *p = folded(coordinated);
	struct report *r = build(p, false, false);
	uint32_t order[16];

	cr_assert_lt(r->n_rows, 16);
	report_order(r, REPORT_SORT_SELF, order);
	cr_assert_str_eq(name_of(r, order[0]), "leaf_a");
	cr_assert_str_eq(name_of(r, order[1]), "leaf_b");
	cr_assert_str_eq(name_of(r, order[2]), "sys");
	cr_assert_str_eq(name_of(r, order[3]), "coord", "self 1, above the zeros");
	cr_assert_str_eq(name_of(r, order[4]), "main", "self 0, then by total");
	report_order(r, REPORT_SORT_TOTAL, order);
	cr_assert_str_eq(name_of(r, order[0]), "main");
	cr_assert_str_eq(name_of(r, order[1]), "coord");
	cr_assert_str_eq(name_of(r, order[2]), "leaf_a");
	report_order(r, REPORT_SORT_NAME, order);
	for (size_t i = 1; i < r->n_rows; i++)
		cr_assert_leq(strcmp(name_of(r, order[i - 1]), name_of(r, order[i])), 0);
	report_free(r);
	profile_free(p);
}

Test(report, callers_share_the_total_of_the_outermost_call)
{
	struct profile *p = folded(coordinated);
	struct report *r = build(p, false, false);
	struct report_relatives c = { 0 };

	cr_assert_eq(report_callers(r, "leaf_a", &c), 0);
	cr_assert_eq(c.total, 39);
	cr_assert_eq(c.n_edges, 2);
	cr_assert_str_eq(name_of(r, c.edges[0].row), "coord");
	cr_assert_eq(c.edges[0].value, 34);
	cr_assert_str_eq(name_of(r, c.edges[1].row), "other");
	cr_assert_eq(c.edges[1].value, 5);
	free(c.edges);

	cr_assert_eq(report_callers(r, "main", &c), 0);
	cr_assert_eq(c.n_edges, 1);
	cr_assert_eq(c.edges[0].row, REPORT_ROOT, "main is the outermost frame");
	cr_assert_eq(c.edges[0].value, 50);
	free(c.edges);
	cr_assert_eq(report_callers(r, "nothing", &c), -ENOENT);
	report_free(r);
	profile_free(p);
}

Test(report, callees_and_self_add_up_to_the_total)
{
	struct profile *p = folded(coordinated);
	struct report *r = build(p, false, false);
	struct report_relatives c = { 0 };
	uint64_t sum;

	cr_assert_eq(report_callees(r, "coord", &c), 0);
	cr_assert_eq(c.total, 45);
	cr_assert_eq(c.self, 1);
	cr_assert_eq(c.n_edges, 2);
	cr_assert_str_eq(name_of(r, c.edges[0].row), "leaf_a");
	cr_assert_eq(c.edges[0].value, 34);
	cr_assert_str_eq(name_of(r, c.edges[1].row), "leaf_b");
	cr_assert_eq(c.edges[1].value, 10);
	sum = c.self;
	for (size_t i = 0; i < c.n_edges; i++)
		sum += c.edges[i].value;
	cr_assert_eq(sum, c.total);
	free(c.edges);
	report_free(r);
	profile_free(p);
}

Test(report, recursive_relatives_add_up_too)
{
	struct profile *p = folded("app;f;g;f;h 3\napp;f;f 2\napp;m;f 1\n");
	struct report *r = build(p, false, false);
	struct report_relatives c = { 0 };

	/* callers: above the outermost f; callees: below the innermost */
	cr_assert_eq(report_callers(r, "f", &c), 0);
	cr_assert_eq(c.total, 6);
	cr_assert_eq(c.n_edges, 2);
	cr_assert_eq(c.edges[0].row, REPORT_ROOT);
	cr_assert_eq(c.edges[0].value, 5);
	cr_assert_str_eq(name_of(r, c.edges[1].row), "m");
	free(c.edges);
	cr_assert_eq(report_callees(r, "f", &c), 0);
	cr_assert_eq(c.total, 6);
	cr_assert_eq(c.self, 3, "f f and m f end in f");
	cr_assert_eq(c.n_edges, 1);
	cr_assert_str_eq(name_of(r, c.edges[0].row), "h");
	cr_assert_eq(c.edges[0].value, 3);
	free(c.edges);
	report_free(r);
	profile_free(p);
}

Test(report, kernel_names_and_sides)
{
	struct profile *p = folded("app;read;read_[k] 2\napp;x;read_[k] 1\n");
	struct report *r = build(p, false, false);
	struct report_relatives c = { 0 };

	cr_assert_eq(report_callers(r, "read_[k]", &c), 0);
	cr_assert_eq(c.total, 3, "the kernel's read");
	free(c.edges);
	cr_assert_eq(report_callers(r, "read", &c), 0);
	cr_assert_eq(c.total, 2, "a plain name is the user-space function");
	free(c.edges);
	cr_assert_eq(report_callers(r, "x_[k]", &c), -ENOENT);
	report_free(r);
	profile_free(p);

	p = folded("app;main;sys_[k] 2\n");
	r = build(p, false, false);
	cr_assert_eq(report_callers(r, "sys", &c), 0, "no user-space sys: the kernel's");
	cr_assert_eq(c.total, 2);
	free(c.edges);
	report_free(r);
	profile_free(p);
}

Test(report, lines_make_rows_of_their_own)
{
	struct profile *p = folded("app;main (m.c:9);work (w.c:12) 3\n"
				   "app;main (m.c:8);work (w.c:14) 1\n");
	struct report *r = build(p, false, false);

	cr_assert_eq(r->n_rows, 2);
	cr_assert_eq(row(r, "work", false)->line, 12, "the lowest line seen");
	cr_assert_eq(row(r, "work", false)->total, 4);
	report_free(r);

	r = build(p, true, false);
	cr_assert_eq(r->n_rows, 4);
	report_free(r);
	profile_free(p);
}

Test(report, kernel_frames_left_out_move_self_to_the_process_code)
{
	struct profile *p = folded("app;main;grow;fault_[k];rss_[k] 8\napp;main;small;fault_[k] 2\n"
				   "app;kthread_[k] 1\n");
	struct report *r = build(p, false, true);
	uint32_t order[8];

	cr_assert_eq(r->n_rows, 6, "rows exist for every frame");
	report_order(r, REPORT_SORT_SELF, order);
	cr_assert_str_eq(name_of(r, order[0]), "grow");
	cr_assert_eq(row(r, "grow", false)->self, 8);
	cr_assert_eq(row(r, "fault", true)->total, 0);
	cr_assert_eq(r->total, 11, "what was left out still counts in the whole");
	report_free(r);
	profile_free(p);
}

Test(report, empty_profile)
{
	struct profile *p = folded("");
	struct report *r = build(p, false, false);
	struct report_relatives c = { 0 };

	cr_assert_eq(r->n_rows, 0);
	report_order(r, REPORT_SORT_SELF, NULL);
	cr_assert_eq(report_callers(r, "main", &c), -ENOENT);
	report_free(r);
	profile_free(p);
}

/* Stacks cut short (rooted at a placeholder, or at an inner frame) hold
 * coord and not main, so coord has the largest total: the walk must still
 * pass through _start and main to it, and stop there, where its time
 * divides between its leaves. */
Test(report, dominant_goes_up_through_the_wrappers_of_cut_stacks)
{
	struct profile *p = folded("app;_start;main;coord;leaf_a 60\n"
				   "app;_start;main;coord;leaf_b 20\n"
				   "app;[unwind table pending];coord;leaf_a 5\n");
	struct report *r = build(p, false, false);
	struct report_relatives callees = { 0 };
	uint32_t path[8], dominant;
	size_t n_path = 0;

	cr_assert_eq(report_dominant(r, 0.9, path, 8, &n_path, &dominant, &callees), 0);
	cr_assert_str_eq(name_of(r, dominant), "coord");
	cr_assert_eq(n_path, 2);
	cr_assert_str_eq(name_of(r, path[0]), "_start");
	cr_assert_str_eq(name_of(r, path[1]), "main");
	cr_assert_eq(callees.total, 85);
	cr_assert_str_eq(name_of(r, callees.edges[0].row), "leaf_a");
	cr_assert_eq(callees.edges[0].value, 65);
	free(callees.edges);
	report_free(r);
	profile_free(p);
}

/* Recursion and a full path end the walk; a caller that passes on less
 * than the threshold is not a wrapper. */
Test(report, dominant_stops_at_recursion_and_divided_callers)
{
	struct profile *p = folded("app;main;rec;rec;rec;work 10\n"
				   "app;main;other 3\n");
	struct report *r = build(p, false, false);
	struct report_relatives callees = { 0 };
	uint32_t path[1], dominant;
	size_t n_path = 0;

	cr_assert_eq(report_dominant(r, 0.9, path, 1, &n_path, &dominant, &callees), 0);
	/* main passes 10 of 13 to rec: below 0.9, so main is where it divides */
	cr_assert_str_eq(name_of(r, dominant), "main", "got %s", name_of(r, dominant));
	cr_assert_eq(n_path, 0);
	free(callees.edges);
	report_free(r);
	profile_free(p);

	p = folded("app;main;rec;rec;rec;work 10\n");
	r = build(p, false, false);
	cr_assert_eq(report_dominant(r, 0.9, path, 1, &n_path, &dominant, &callees), 0);
	cr_assert_eq(n_path, 1, "the path holds one wrapper at most");
	free(callees.edges);
	report_free(r);
	profile_free(p);
}
