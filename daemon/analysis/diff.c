/* SPDX-License-Identifier: MIT */
/*
 * diff.c - two profiles compared per function (diff.h).
 *
 * Design: shares, not values, are compared, so a 10 s run and a 60 s run
 * (or a 99 Hz and a 999 Hz one) compare; the cost is that a function that
 * got faster makes every other one look slower, which is what a profile
 * can tell anyway.  Each side is summed by report_build() (functions.h)
 * with a row per function name and side of the kernel boundary (by_name: a
 * folded file has no files to match on), then both sides' rows are put in
 * one array, sorted by (name, side) and merged, so a function found on one
 * side only gets zeros on the other.  The order is by the larger of
 * |delta self| and |delta total|: a function whose callees changed moves
 * its total, a leaf its self, and either is a change to look at.  Cost:
 * two reports and O(rows log rows).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/diff.h"
#include "analysis/functions.h"

struct side_row {
	const char *function;
	bool kernel, after;
	uint64_t self, total;
};

static int side_row_cmp(const void *x, const void *y)
{
	const struct side_row *a = x, *b = y;
	int c = strcmp(a->function, b->function);

	if (c == 0 && a->kernel != b->kernel)
		c = a->kernel ? 1 : -1;
	return c;
}

static int row_cmp(const void *x, const void *y)
{
	const struct diff_row *a = x, *b = y;
	int c;

	if (a->change != b->change)
		return a->change > b->change ? -1 : 1;
	c = strcmp(a->function, b->function);
	if (c == 0 && a->kernel != b->kernel)
		c = a->kernel ? 1 : -1;
	return c;
}

/* Appends r's rows, marked with the side they come from. */
static size_t add_side(const struct report *r, bool after, struct side_row *out)
{
	for (size_t i = 0; i < r->n_rows; i++)
		out[i] = (struct side_row){
			.function = profile_string(r->p, r->rows[i].function),
			.kernel = r->rows[i].kernel,
			.after = after,
			.self = r->rows[i].self,
			.total = r->rows[i].total,
		};
	return r->n_rows;
}

static void set_shares(struct diff_side *s, uint64_t whole)
{
	s->self_percent = report_percent(s->self, whole);
	s->total_percent = report_percent(s->total, whole);
}

int diff_build(const struct profile *before, const struct profile *after, bool skip_kernel,
	       struct diff **ret)
{
	const struct report_opts ro = { .skip_kernel = skip_kernel, .by_name = true };
	_cleanup_(report_freep) struct report *a = NULL, *b = NULL;
	_cleanup_(diff_freep) struct diff *d = calloc(1, sizeof(*d));
	_cleanup_free_ struct side_row *all = NULL;
	size_t n;
	int k;

	if (!d)
		return -ENOMEM;
	k = report_build(before, &ro, &a);
	if (k < 0)
		return k;
	k = report_build(after, &ro, &b);
	if (k < 0)
		return k;
	n = a->n_rows + b->n_rows;
	all = malloc((n ? n : 1) * sizeof(*all));
	d->rows = calloc(n ? n : 1, sizeof(*d->rows));
	if (!all || !d->rows)
		return -ENOMEM;
	d->before_total = before->total;
	d->after_total = after->total;

	n = add_side(a, false, all);
	n += add_side(b, true, all + n);
	qsort(all, n, sizeof(*all), side_row_cmp);
	for (size_t i = 0; i < n; i++) {
		struct diff_row *row;
		struct diff_side *s;

		if (i == 0 || side_row_cmp(&all[i - 1], &all[i]) != 0)
			d->rows[d->n_rows++] = (struct diff_row){
				.function = all[i].function, .kernel = all[i].kernel,
			};
		row = &d->rows[d->n_rows - 1];
		s = all[i].after ? &row->after : &row->before;
		s->self += all[i].self;
		s->total += all[i].total;
	}
	/* Rows in no stack on either side (a memory profile's kernel frames,
	 * zero-valued stacks) tell nothing: left out. */
	n = d->n_rows;
	d->n_rows = 0;
	for (size_t i = 0; i < n; i++)
		if (d->rows[i].before.total || d->rows[i].after.total)
			d->rows[d->n_rows++] = d->rows[i];
	for (size_t i = 0; i < d->n_rows; i++) {
		struct diff_row *row = &d->rows[i];

		set_shares(&row->before, d->before_total);
		set_shares(&row->after, d->after_total);
		row->self_delta = row->after.self_percent - row->before.self_percent;
		row->total_delta = row->after.total_percent - row->before.total_percent;
		row->change = fmax(fabs(row->self_delta), fabs(row->total_delta));
	}
	if (d->n_rows > 1)
		qsort(d->rows, d->n_rows, sizeof(*d->rows), row_cmp);
	*ret = TAKE_PTR(d);
	return 0;
}

struct diff *diff_free(struct diff *d)
{
	if (!d)
		return NULL;
	free(d->rows);
	free(d);
	return NULL;
}
