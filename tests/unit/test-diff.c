/* SPDX-License-Identifier: MIT */
/*
 * test-diff.c - the diff's computation (cli/diff.c) on profiles written as
 * folded text: shares of each profile's own total (so profiles of
 * different sizes compare), functions found on one side only, the order by
 * the larger of the two changes with its ties, kernel functions kept apart
 * from user ones of the same name, and kernel frames left out on request.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "diff.h"

static struct profile *folded(const char *text)
{
	char err[PROFILE_ERROR_MAX] = "";
	struct profile *p = NULL;

	cr_assert_eq(profile_read(text, strlen(text), NULL, &p, err), 0, "%s", err);
	return p;
}

static struct diff *build(const struct profile *a, const struct profile *b, bool skip_kernel)
{
	struct diff *d = NULL;

	cr_assert_eq(diff_build(a, b, skip_kernel, &d), 0);
	return d;
}

static const struct diff_row *row(const struct diff *d, const char *name, bool kernel)
{
	const struct diff_row *found = NULL;

	for (size_t i = 0; i < d->n_rows; i++)
		if (strcmp(d->rows[i].function, name) == 0 && d->rows[i].kernel == kernel) {
			cr_assert_null(found, "two rows of %s", name);
			found = &d->rows[i];
		}
	cr_assert_not_null(found, "no row of %s", name);
	return found;
}

static void done(struct diff *d, struct profile *a, struct profile *b)
{
	diff_free(d);
	profile_free(a);
	profile_free(b);
}

#define assert_near(a, b) cr_assert(fabs((a) - (b)) < 1e-9, "%s = %f, not %f", #a, (double)(a), (double)(b))

/* 4:1 before, 1:1 after, the after profile 10x the size: shares compare. */
Test(diff, shares_of_each_profiles_own_total)
{
	struct profile *a = folded("t;main;work_hot 400\nt;main;work_other 100\n");
	struct profile *b = folded("t;main;work_hot 2500\nt;main;work_other 2500\n");
	struct diff *d = build(a, b, false);
	const struct diff_row *hot = row(d, "work_hot", false), *other = row(d, "work_other", false);
	const struct diff_row *m = row(d, "main", false);

	cr_assert_eq(d->before_total, 500);
	cr_assert_eq(d->after_total, 5000);
	cr_assert_eq(hot->before.self, 400);
	cr_assert_eq(hot->after.self, 2500);
	assert_near(hot->before.self_percent, 80.0);
	assert_near(hot->after.self_percent, 50.0);
	assert_near(hot->self_delta, -30.0);
	assert_near(hot->total_delta, -30.0);
	assert_near(other->self_delta, 30.0);
	assert_near(hot->change, 30.0);
	/* main holds everything on both sides: no change of its total share,
	 * though its total grew 10x */
	cr_assert_eq(m->before.total, 500);
	cr_assert_eq(m->after.total, 5000);
	assert_near(m->total_delta, 0.0);
	assert_near(m->change, 0.0);
	done(d, a, b);
}

Test(diff, a_function_on_one_side_has_zeros_on_the_other)
{
	struct profile *a = folded("t;main;old_fn 30\nt;main;kept 70\n");
	struct profile *b = folded("t;main;new_fn 10\nt;main;kept 90\n");
	struct diff *d = build(a, b, false);
	const struct diff_row *old = row(d, "old_fn", false), *new = row(d, "new_fn", false);

	cr_assert_eq(d->n_rows, 4, "main, kept, old_fn, new_fn: %zu rows", d->n_rows);
	cr_assert_eq(old->before.self, 30);
	cr_assert_eq(old->after.self, 0);
	cr_assert_eq(old->after.total, 0);
	assert_near(old->after.self_percent, 0.0);
	assert_near(old->self_delta, -30.0);
	cr_assert_eq(new->before.self, 0);
	cr_assert_eq(new->before.total, 0);
	cr_assert_eq(new->after.self, 10);
	assert_near(new->self_delta, 10.0);
	assert_near(row(d, "kept", false)->self_delta, 20.0);
	done(d, a, b);
}

/* The largest |change| first, a drop as large as a rise; a caller whose
 * callees moved ranks by its total; ties by name. */
Test(diff, largest_absolute_change_first)
{
	struct profile *a = folded("t;main;coord;leaf 50\n"
				   "t;main;drop 40\n"
				   "t;main;zz_same 5\n"
				   "t;main;aa_same 5\n");
	struct profile *b = folded("t;main;coord;leaf 10\n"
				   "t;main;drop 25\n"
				   "t;main;rise 55\n"
				   "t;main;zz_same 5\n"
				   "t;main;aa_same 5\n");
	struct diff *d = build(a, b, false);
	const char *want[] = { "rise", "coord", "leaf", "drop", "aa_same", "main", "zz_same" };

	cr_assert_eq(d->n_rows, ELEMENTSOF(want));
	/* rise +55; coord's self 0 -> 0 but total 50 -> 10: -40, as leaf's
	 * self and total (tie: by name); drop -15; the rest 0 */
	assert_near(row(d, "coord", false)->self_delta, 0.0);
	assert_near(row(d, "coord", false)->change, 40.0);
	for (size_t i = 0; i < ELEMENTSOF(want); i++)
		cr_assert_str_eq(d->rows[i].function, want[i], "row %zu is %s, not %s", i,
				 d->rows[i].function, want[i]);
	for (size_t i = 1; i < d->n_rows; i++)
		cr_assert_geq(d->rows[i - 1].change, d->rows[i].change);
	done(d, a, b);
}

Test(diff, kernel_and_user_functions_of_one_name_stay_apart)
{
	struct profile *a = folded("t;main;read;read_[k] 10\nt;main 10\n");
	struct profile *b = folded("t;main;read;read_[k] 10\nt;main;read 10\n");
	struct diff *d = build(a, b, false);

	cr_assert_eq(row(d, "read", false)->before.self, 0);
	cr_assert_eq(row(d, "read", false)->after.self, 10);
	cr_assert_eq(row(d, "read", true)->before.self, 10);
	cr_assert_eq(row(d, "read", true)->after.self, 10);
	assert_near(row(d, "read", false)->self_delta, 50.0);
	assert_near(row(d, "read", true)->self_delta, 0.0);
	done(d, a, b);
}

/* As report does for memory: the fault path's kernel frames are left out,
 * and self lands on the process's own innermost frame. */
Test(diff, kernel_frames_left_out_on_request)
{
	struct profile *a = folded("t;main;grow;page_fault_[k] 30\nt;main;other 10\n");
	struct profile *b = folded("t;main;grow;page_fault_[k] 10\nt;main;other 30\n");
	struct diff *d = build(a, b, true);

	for (size_t i = 0; i < d->n_rows; i++)
		cr_assert_not(d->rows[i].kernel, "kernel row %s", d->rows[i].function);
	cr_assert_eq(row(d, "grow", false)->before.self, 30);
	assert_near(row(d, "grow", false)->self_delta, -50.0);
	cr_assert_str_eq(d->rows[0].function, "grow");
	done(d, a, b);
}

/* A function recursing in a stack counts once there: no share above 100. */
Test(diff, recursion_counts_once_per_stack)
{
	struct profile *a = folded("t;f;g;f;g;f 3\nt;h 1\n");
	struct profile *b = folded("t;h 1\n");
	struct diff *d = build(a, b, false);

	assert_near(row(d, "f", false)->before.total_percent, 75.0);
	assert_near(row(d, "f", false)->total_delta, -75.0);
	done(d, a, b);
}

Test(diff, empty_profiles)
{
	struct profile *a = folded("");
	struct profile *b = folded("t;main 5\n");
	struct diff *d = build(a, b, false);

	cr_assert_eq(d->before_total, 0);
	assert_near(row(d, "main", false)->before.total_percent, 0.0);
	assert_near(row(d, "main", false)->total_delta, 100.0);
	done(d, a, b);
}
