/* SPDX-License-Identifier: MIT */
/*
 * functions.c - self and total per function, callers and callees
 * (functions.h), on the analysis model.
 *
 * Design: rows are made once by sorting the profile's interned frames by
 * (function, file, side of the kernel boundary[, line]) and numbering the
 * runs, so each frame maps to its row by an array lookup; then one pass
 * over the stacks sums self and total.  A function is counted once per
 * stack however often it recurses in it (a per-row stamp of the last stack
 * that counted it), so no total exceeds the profile's.  Callers and callees
 * are another pass each, into a tree keyed by (parent, row) in a hash map:
 * a stack's value goes along the frames above the function's outermost
 * call (callers) or below its innermost one (callees, or to its self at
 * the leaf), so the shares of each level add up to exactly 100% of the
 * function's total, recursion included.  One level is report's edges; top
 * asks for several and cuts them to what its screen holds.  Cost:
 * O(frames log frames) for the rows, O(frame references) a pass, 12 bytes
 * a frame, 40 a row and ~56 a tree node.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/functions.h"
#include "base/array.h"

static int frame_key_cmp(const void *x, const void *y, void *arg)
{
	const struct report *r = arg;
	const struct profile_frame *a = &r->p->frames[*(const uint32_t *)x];
	const struct profile_frame *b = &r->p->frames[*(const uint32_t *)y];

	if (a->function != b->function)
		return a->function < b->function ? -1 : 1;
	if (!r->opts.by_name && a->file != b->file)
		return a->file < b->file ? -1 : 1;
	if (a->kernel != b->kernel)
		return a->kernel ? 1 : -1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (r->opts.lines && a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return 0;
}

/* Rows by name, file, line and side: the order of ties everywhere. */
static int row_name_cmp(const struct report *r, uint32_t x, uint32_t y)
{
	const struct report_row *a = &r->rows[x], *b = &r->rows[y];
	int c = strcmp(profile_string(r->p, a->function), profile_string(r->p, b->function));

	if (c == 0)
		c = strcmp(profile_string(r->p, a->file), profile_string(r->p, b->file));
	if (c == 0 && a->line != b->line)
		c = a->line < b->line ? -1 : 1;
	if (c == 0 && a->kernel != b->kernel)
		c = a->kernel ? 1 : -1;
	if (c == 0 && a->kind != b->kind)
		c = a->kind < b->kind ? -1 : 1;
	return c;
}

/* The rows of stack s, root first, into buf (PROFILE_MAX_DEPTH entries);
 * returns how many. */
static size_t stack_rows(const struct report *r, const struct profile_stack *s, uint32_t *buf)
{
	size_t n = 0;

	for (uint32_t i = 0; i < s->depth && n < PROFILE_MAX_DEPTH; i++) {
		uint32_t f = r->p->pool[s->first + i];

		if (!(r->opts.skip_kernel && r->p->frames[f].kernel))
			buf[n++] = r->frame_row[f];
	}
	return n;
}

int report_build(const struct profile *p, const struct report_opts *o, struct report **ret)
{
	_cleanup_(report_freep) struct report *r = calloc(1, sizeof(*r));
	_cleanup_free_ uint32_t *order = NULL, *buf = NULL;
	_cleanup_free_ uint64_t *stamp = NULL;

	if (!r)
		return -ENOMEM;
	r->p = p;
	r->opts = *o;
	r->total = p->total;
	order = malloc((p->n_frames ? p->n_frames : 1) * sizeof(*order));
	r->frame_row = malloc((p->n_frames ? p->n_frames : 1) * sizeof(*r->frame_row));
	r->rows = calloc(p->n_frames ? p->n_frames : 1, sizeof(*r->rows));
	buf = malloc(PROFILE_MAX_DEPTH * sizeof(*buf));
	if (!order || !r->frame_row || !r->rows || !buf)
		return -ENOMEM;

	for (size_t i = 0; i < p->n_frames; i++)
		order[i] = (uint32_t)i;
	if (p->n_frames > 1)
		qsort_r(order, p->n_frames, sizeof(*order), frame_key_cmp, r);
	for (size_t i = 0; i < p->n_frames; i++) {
		const struct profile_frame *f = &p->frames[order[i]];
		struct report_row *row;

		if (i == 0 || frame_key_cmp(&order[i - 1], &order[i], r) != 0)
			r->rows[r->n_rows++] = (struct report_row){
				.function = f->function, .file = f->file, .kernel = f->kernel, .kind = f->kind,
			};
		row = &r->rows[r->n_rows - 1];
		if (f->line && (!row->line || f->line < row->line))
			row->line = f->line;
		r->frame_row[order[i]] = (uint32_t)(r->n_rows - 1);
	}

	stamp = calloc(r->n_rows ? r->n_rows : 1, sizeof(*stamp));
	if (!stamp)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_stacks; i++) {
		const struct profile_stack *s = &p->stacks[i];
		size_t n = stack_rows(r, s, buf);

		if (n == 0)
			continue;
		r->rows[buf[n - 1]].self += s->value;
		for (size_t j = 0; j < n; j++)
			if (stamp[buf[j]] != i + 1) {
				stamp[buf[j]] = i + 1;
				r->rows[buf[j]].total += s->value;
			}
	}
	*ret = TAKE_PTR(r);
	return 0;
}

static int order_cmp(const void *x, const void *y, void *arg)
{
	const struct report *r = ((const void **)arg)[0];
	enum report_sort sort = *(const enum report_sort *)((const void **)arg)[1];
	const struct report_row *a = &r->rows[*(const uint32_t *)x];
	const struct report_row *b = &r->rows[*(const uint32_t *)y];
	uint64_t ka = sort == REPORT_SORT_SELF ? a->self : a->total;
	uint64_t kb = sort == REPORT_SORT_SELF ? b->self : b->total;
	uint64_t la = sort == REPORT_SORT_SELF ? a->total : a->self;
	uint64_t lb = sort == REPORT_SORT_SELF ? b->total : b->self;

	if (sort != REPORT_SORT_NAME && ka != kb)
		return ka > kb ? -1 : 1;
	if (sort != REPORT_SORT_NAME && la != lb)
		return la > lb ? -1 : 1;
	return row_name_cmp(r, *(const uint32_t *)x, *(const uint32_t *)y);
}

void report_order(const struct report *r, enum report_sort sort, uint32_t *order)
{
	const void *ctx[2] = { r, &sort };

	for (size_t i = 0; i < r->n_rows; i++)
		order[i] = (uint32_t)i;
	if (r->n_rows > 1)
		qsort_r(order, r->n_rows, sizeof(*order), order_cmp, ctx);
}

int report_first(const struct report *r, enum report_sort sort, uint32_t *ret_row)
{
	_cleanup_free_ uint32_t *order = NULL;

	if (r->n_rows == 0)
		return -ENOENT;
	order = malloc(r->n_rows * sizeof(*order));
	if (!order)
		return -ENOMEM;
	report_order(r, sort, order);
	*ret_row = order[0];
	return 0;
}

size_t report_match(const struct report *r, const char *name, bool *match)
{
	size_t len = strlen(name), n = 0;
	bool kernel = len > 4 && strcmp(name + len - 4, "_[k]") == 0;

	for (int pass = 0; pass < 2 && n == 0; pass++) {
		for (size_t i = 0; i < r->n_rows; i++) {
			const struct report_row *row = &r->rows[i];
			const char *fn = profile_string(r->p, row->function);
			bool want_kernel = kernel || pass == 1;

			match[i] = row->kernel == want_kernel &&
				   (kernel ? strlen(fn) == len - 4 && strncmp(fn, name, len - 4) == 0 :
					     strcmp(fn, name) == 0);
			n += match[i];
		}
		if (kernel)
			break;
	}
	return n;
}

/* The order of siblings in a tree, and of edges: the largest value first,
 * then the rows' fixed order, the root after the functions. */
static int sibling_cmp(const struct report *r, uint32_t a, uint64_t va, uint32_t b, uint64_t vb)
{
	if (va != vb)
		return va > vb ? -1 : 1;
	if (a == REPORT_ROOT || b == REPORT_ROOT)
		return (a == REPORT_ROOT) - (b == REPORT_ROOT);
	return row_name_cmp(r, a, b);
}

/* Adds value along path[0..n) (nearest the function first, step apart) to
 * t, to at most depth levels; a path shorter than depth ends at
 * REPORT_ROOT when root_at_end (callers: the function's outermost call was
 * the stack's root). */
static int tree_add(struct report_tree *t, const uint32_t *path, size_t n, ptrdiff_t step,
		    unsigned depth, bool root_at_end, uint64_t value)
{
	uint32_t parent = REPORT_TOP;

	for (unsigned level = 0; level < depth; level++) {
		uint32_t row;
		uint64_t *slot;
		bool added;

		if (level < n)
			row = path[(ptrdiff_t)level * step];
		else if (root_at_end && level == n)
			row = REPORT_ROOT;
		else
			break;
		slot = u64map_upsert(&t->index, ((uint64_t)parent + 1) << 32 | row, &added);
		if (!slot)
			return -ENOMEM;
		if (added) {
			if (array_grow((void **)&t->nodes, &t->cap, t->n + 1, sizeof(*t->nodes), 64) < 0) {
				u64map_remove(&t->index, ((uint64_t)parent + 1) << 32 | row);
				return -ENOMEM;
			}
			t->nodes[t->n] = (struct report_node){ .parent = parent, .row = row };
			*slot = t->n++;
		}
		t->nodes[*slot].value += value;
		parent = (uint32_t)*slot;
		if (row == REPORT_ROOT)
			break;
	}
	return 0;
}

static int node_cmp(const void *x, const void *y, void *arg)
{
	const struct report_tree *t = arg;
	const struct report_node *a = &t->nodes[*(const uint32_t *)x];
	const struct report_node *b = &t->nodes[*(const uint32_t *)y];

	if (a->parent != b->parent)
		return a->parent < b->parent ? -1 : 1; /* REPORT_TOP, the first level, last */
	return sibling_cmp(t->r, a->row, a->value, b->row, b->value);
}

/* Orders the nodes by parent and value, and links each to its children. */
static int tree_index(struct report_tree *t)
{
	t->order = calloc(t->n + 1, sizeof(*t->order));
	if (!t->order)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++)
		t->order[i] = (uint32_t)i;
	if (t->n > 1)
		qsort_r(t->order, t->n, sizeof(*t->order), node_cmp, t);
	for (size_t i = t->n; i-- > 0;) {
		struct report_node *node = &t->nodes[t->order[i]];

		if (node->parent != REPORT_TOP) {
			t->nodes[node->parent].first_child = (uint32_t)i;
			t->nodes[node->parent].n_children++;
		}
	}
	return 0;
}

int report_tree_build(const struct report *r, const bool *match, bool callers, unsigned depth,
		      struct report_tree *ret)
{
	_cleanup_free_ uint32_t *buf = malloc(PROFILE_MAX_DEPTH * sizeof(*buf));

	*ret = (struct report_tree){ .r = r };
	u64map_init(&ret->index);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < r->p->n_stacks; i++) {
		const struct profile_stack *s = &r->p->stacks[i];
		size_t n = stack_rows(r, s, buf), j;
		int k = 0;

		/* j: the outermost call's index (callers), or the innermost's
		 * counted from the leaf (callees) */
		for (j = 0; j < n && !match[buf[callers ? j : n - 1 - j]]; j++)
			;
		if (j == n)
			continue;
		ret->total += s->value;
		if (callers)
			k = tree_add(ret, j > 0 ? &buf[j - 1] : buf, j, -1, depth, true, s->value);
		else if (j == 0)
			ret->self += s->value; /* the innermost call is the leaf */
		else
			k = tree_add(ret, &buf[n - j], j, 1, depth, false, s->value);
		if (k < 0)
			return k;
	}
	return tree_index(ret);
}

static int node_value_cmp(const void *x, const void *y, void *arg)
{
	const struct report_tree *t = arg;
	const struct report_node *a = &t->nodes[*(const uint32_t *)x];
	const struct report_node *b = &t->nodes[*(const uint32_t *)y];

	return sibling_cmp(t->r, a->row, a->value, b->row, b->value);
}

int report_tree_choose(struct report_tree *t, size_t budget)
{
	_cleanup_free_ uint32_t *level = calloc(t->n + 1, sizeof(*level));
	size_t n = 0, taken;

	t->sent = calloc(t->n + 1, sizeof(*t->sent));
	if (!level || !t->sent)
		return -ENOMEM;
	/* the first level sorts last in order[] */
	for (size_t i = t->n; i > 0 && t->nodes[t->order[i - 1]].parent == REPORT_TOP; i--)
		level[n++] = t->order[i - 1];
	while (n > 0 && budget > 0) {
		size_t next = 0;

		qsort_r(level, n, sizeof(*level), node_value_cmp, t);
		taken = MIN(n, budget);
		budget -= taken;
		for (size_t i = 0; i < taken; i++)
			t->sent[level[i]] = true;
		/* the next level: the children of the nodes taken, in place
		 * (there are never more nodes than t->n) */
		for (size_t i = 0; i < t->n; i++) {
			const struct report_node *node = &t->nodes[i];

			if (node->parent != REPORT_TOP && t->sent[node->parent] && !t->sent[i])
				level[next++] = (uint32_t)i;
		}
		n = next;
	}
	return 0;
}

void report_tree_children(const struct report_tree *t, uint32_t node, size_t *ret_first,
			  size_t *ret_n)
{
	size_t first;

	if (node != REPORT_TOP) {
		*ret_first = t->nodes[node].first_child;
		*ret_n = t->nodes[node].n_children;
		return;
	}
	for (first = t->n; first > 0 && t->nodes[t->order[first - 1]].parent == REPORT_TOP;)
		first--;
	*ret_first = first;
	*ret_n = t->n - first;
}

void report_tree_done(struct report_tree *t)
{
	free(t->nodes);
	free(t->order);
	free(t->sent);
	u64map_done(&t->index);
	*t = (struct report_tree){ 0 };
}

/* One level of the tree of name's callers or callees, as edges. */
static int relatives(const struct report *r, const char *name, bool callers,
		     struct report_relatives *ret)
{
	_cleanup_free_ bool *match = calloc(r->n_rows ? r->n_rows : 1, sizeof(*match));
	_cleanup_(report_tree_done) struct report_tree t = { 0 };
	struct report_relatives rel = { 0 };
	size_t first, n;
	int k;

	if (!match)
		return -ENOMEM;
	if (report_match(r, name, match) == 0)
		return -ENOENT;
	k = report_tree_build(r, match, callers, 1, &t);
	if (k < 0)
		return k;
	report_tree_children(&t, REPORT_TOP, &first, &n);
	rel.edges = calloc(n ? n : 1, sizeof(*rel.edges));
	if (!rel.edges)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct report_node *node = &t.nodes[t.order[first + i]];

		rel.edges[rel.n_edges++] = (struct report_edge){ node->row, node->value };
	}
	rel.total = t.total;
	rel.self = t.self;
	*ret = rel;
	return 0;
}

int report_callers(const struct report *r, const char *name, struct report_relatives *ret)
{
	return relatives(r, name, true, ret);
}

int report_callees(const struct report *r, const char *name, struct report_relatives *ret)
{
	return relatives(r, name, false, ret);
}

/* The name report_callers() and report_callees() take for row. */
static char *row_name(const struct report *r, uint32_t row)
{
	char *s;

	if (asprintf(&s, "%s%s", profile_string(r->p, r->rows[row].function),
		     r->rows[row].kernel ? "_[k]" : "") < 0)
		return NULL;
	return s;
}

/* The wrapper above row (see report_dominant()): 1 and its row, 0 when
 * there is none or it is on path already (recursion), or -ENOMEM. */
static int wrapper_above(const struct report *r, double pass_through, uint32_t row,
			 const uint32_t *path, size_t n_path, uint32_t *ret)
{
	_cleanup_free_ char *name = row_name(r, row), *caller_name = NULL;
	struct report_relatives up = { 0 }, down = { 0 };
	uint32_t caller;
	int k;

	if (!name)
		return -ENOMEM;
	k = report_callers(r, name, &up);
	if (k < 0)
		return k;
	caller = up.n_edges > 0 && (double)up.edges[0].value >= pass_through * (double)up.total ?
			 up.edges[0].row : REPORT_ROOT;
	free(up.edges);
	if (caller == REPORT_ROOT || caller == row)
		return 0;
	for (size_t i = 0; i < n_path; i++)
		if (path[i] == caller)
			return 0;
	caller_name = row_name(r, caller);
	if (!caller_name)
		return -ENOMEM;
	k = report_callees(r, caller_name, &down);
	if (k < 0)
		return k;
	k = down.n_edges > 0 && down.edges[0].row == row &&
	    (double)down.edges[0].value >= pass_through * (double)down.total;
	free(down.edges);
	if (k)
		*ret = caller;
	return k;
}

int report_dominant(const struct report *r, double pass_through, uint32_t *path, size_t max_path,
		    size_t *ret_n_path, uint32_t *ret_row, struct report_relatives *ret_callees)
{
	size_t n = 0;
	uint32_t row, above;
	int k;

	k = report_first(r, REPORT_SORT_TOTAL, &row);
	if (k < 0)
		return k;
	/* up: path holds the wrappers found, innermost last, as it goes */
	while (n < max_path && (k = wrapper_above(r, pass_through, row, path, n, &above)) != 0) {
		if (k < 0)
			return k;
		memmove(path + 1, path, n * sizeof(*path));
		path[0] = above;
		n++;
		row = above;
	}
	/* down, from the outermost, through every callee that carries it */
	n = 0;
	for (;;) {
		_cleanup_free_ char *name = row_name(r, row);
		struct report_relatives rel = { 0 };

		if (!name)
			return -ENOMEM;
		k = report_callees(r, name, &rel);
		if (k < 0)
			return k;
		if (rel.n_edges > 0 && rel.edges[0].row != REPORT_ROOT &&
		    (double)rel.edges[0].value >= pass_through * (double)rel.total && n < max_path) {
			path[n++] = row;
			row = rel.edges[0].row;
			free(rel.edges);
			continue;
		}
		*ret_n_path = n;
		*ret_row = row;
		*ret_callees = rel;
		return 0;
	}
}

struct report *report_free(struct report *r)
{
	if (!r)
		return NULL;
	free(r->rows);
	free(r->frame_row);
	free(r);
	return NULL;
}

double report_percent(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}
