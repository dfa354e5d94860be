/* SPDX-License-Identifier: MIT */
/*
 * report.c - `perfctl report`: a pstats-like table of a profile, one row per
 * function with its self value (stacks it is the leaf of) and its total
 * (stacks it is in), and on request who calls a function and what it
 * calls, each with its share of that function's total.  The profile comes
 * from a file perfd wrote (folded, json or pprof: profile_read.c) or from
 * perfd itself, as a --format json snapshot of the selection and range
 * snapshot takes (selection.c).
 *
 * Design: rows are made once by sorting the profile's interned frames by
 * (function, file, side of the kernel boundary[, line]) and numbering the
 * runs, so each frame maps to its row by an array lookup; then one pass
 * over the stacks sums self and total.  A function is counted once per
 * stack however often it recurses in it (a per-row stamp of the last stack
 * that counted it), so no total exceeds the profile's.  Callers and callees
 * are another pass each: a stack's value goes to the frame above the
 * function's outermost call (callers) or below its innermost one (callees,
 * or to its self at the leaf), so the shares add up to exactly 100% of the
 * function's total, recursion included.  Cost: O(frames log frames) for
 * the rows, O(frame references) a pass, 12 bytes a frame and 40 a row.
 *
 * A memory profile's kernel frames are left out: they are the page-fault
 * path under every sample (rss_stat fires there), never the code that
 * grew, so self lands on the innermost frame of the process's own code,
 * as `perfctl mem` attributes it.  Values print in the kind's unit (CPU
 * samples with their time from the period, bytes and nanoseconds for
 * people); --json gives the same table as numbers (protocol.h, "report").
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/kindtab.h"
#include "call.h"
#include "format.h"
#include "output.h"
#include "perfctl.h"
#include "report.h"
#include "selection.h"

/* --- the computation -------------------------------------------------------- */

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
				.function = f->function, .file = f->file, .kernel = f->kernel,
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

/* Marks the rows of the function named name (see report_callers()). */
static size_t match_rows(const struct report *r, const char *name, bool *match)
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

static int edge_cmp(const void *x, const void *y, void *arg)
{
	const struct report *r = arg;
	const struct report_edge *a = x, *b = y;

	if (a->value != b->value)
		return a->value > b->value ? -1 : 1;
	if (a->row == REPORT_ROOT || b->row == REPORT_ROOT)
		return (a->row == REPORT_ROOT) - (b->row == REPORT_ROOT);
	return row_name_cmp(r, a->row, b->row);
}

static int relatives(const struct report *r, const char *name, bool callers,
		     struct report_relatives *ret)
{
	_cleanup_free_ bool *match = calloc(r->n_rows ? r->n_rows : 1, sizeof(*match));
	_cleanup_free_ uint64_t *acc = calloc(r->n_rows + 1, sizeof(*acc));
	_cleanup_free_ uint32_t *buf = malloc(PROFILE_MAX_DEPTH * sizeof(*buf));
	struct report_relatives rel = { 0 };
	size_t n_edges = 0;

	if (!match || !acc || !buf)
		return -ENOMEM;
	if (match_rows(r, name, match) == 0)
		return -ENOENT;
	for (size_t i = 0; i < r->p->n_stacks; i++) {
		const struct profile_stack *s = &r->p->stacks[i];
		size_t n = stack_rows(r, s, buf), j;

		for (j = 0; j < n && !match[buf[callers ? j : n - 1 - j]]; j++)
			;
		if (j == n)
			continue;
		rel.total += s->value;
		if (callers)
			acc[j > 0 ? buf[j - 1] : r->n_rows] += s->value;
		else if (j == 0)
			rel.self += s->value; /* the innermost call is the leaf */
		else
			acc[buf[n - j]] += s->value;
	}

	for (size_t i = 0; i <= r->n_rows; i++)
		n_edges += acc[i] > 0;
	rel.edges = calloc(n_edges ? n_edges : 1, sizeof(*rel.edges));
	if (!rel.edges)
		return -ENOMEM;
	for (size_t i = 0; i <= r->n_rows; i++)
		if (acc[i] > 0)
			rel.edges[rel.n_edges++] = (struct report_edge){
				i == r->n_rows ? REPORT_ROOT : (uint32_t)i, acc[i]
			};
	if (rel.n_edges > 1)
		qsort_r(rel.edges, rel.n_edges, sizeof(*rel.edges), edge_cmp, (void *)r);
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
	_cleanup_free_ uint32_t *order = NULL;
	size_t n = 0;
	uint32_t row, above;
	int k;

	if (r->n_rows == 0)
		return -ENOENT;
	order = malloc(r->n_rows * sizeof(*order));
	if (!order)
		return -ENOMEM;
	report_order(r, REPORT_SORT_TOTAL, order);
	row = order[0];
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

/* --- the command ------------------------------------------------------------ */

struct report_cmd {
	struct ctl_selection sel;
	const char *file; /* NULL: from perfd */
	const char *kind; /* NULL: the file's, or cpu */
	enum report_sort sort;
	int64_t top; /* 0: all */
	const char *callers, *callees;
	bool lines;
};

static const char *const sort_names[] = {
	[REPORT_SORT_SELF] = "self",
	[REPORT_SORT_TOTAL] = "total",
	[REPORT_SORT_NAME] = "name",
};

int report_parse_kind(struct ctl_env *env, const char *command, const char *arg,
		      const char **ret)
{
	if (!kind_by_name(arg)) {
		ctl_error(env, CTL_ERR_USAGE, "%s: --kind is " PERFD_KIND_NAMES(", ", " or ") ", not '%s'",
			  command, arg);
		return -EINVAL;
	}
	*ret = arg;
	return 0;
}

int report_parse_top(struct ctl_env *env, const char *command, const char *arg, int64_t *ret)
{
	if (ctl_parse_int64(arg, 0, REPORT_MAX_TOP, ret) < 0) {
		ctl_error(env, CTL_ERR_USAGE, "%s: --top takes 0 (all) to %d rows, not '%s'", command,
			  REPORT_MAX_TOP, arg);
		return -EINVAL;
	}
	return 0;
}

enum { OPT_KIND = 256, OPT_SORT, OPT_TOP, OPT_CALLERS, OPT_CALLEES, OPT_LINES };

/* The options, as getopt_long() takes them; also what `perfctl
 * --complete-options report` lists for the shell completion. */
static const struct option report_options[] = {
	CTL_SELECTION_OPTIONS,
	{ "kind", required_argument, NULL, OPT_KIND },
	{ "sort", required_argument, NULL, OPT_SORT },
	{ "top", required_argument, NULL, OPT_TOP },
	{ "callers", required_argument, NULL, OPT_CALLERS },
	{ "callees", required_argument, NULL, OPT_CALLEES },
	{ "lines", no_argument, NULL, OPT_LINES },
	{ "json", no_argument, NULL, 'j' },
	{ "socket", required_argument, NULL, 'S' },
	{}
};
static const char report_shortopts[] = ":p:d:";

static int parse_args(struct ctl_env *env, int argc, char **argv, struct report_cmd *o)
{
	int c, k;

	o->top = 20;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, report_shortopts, report_options, NULL)) != -1) {
		if ((k = ctl_selection_option(env, "report", c, &o->sel)) != 0) {
			if (k < 0)
				return k;
			continue;
		}
		switch (c) {
		case OPT_KIND:
			if (report_parse_kind(env, "report", optarg, &o->kind) < 0)
				return -EINVAL;
			break;
		case OPT_SORT:
			for (k = 0; k < (int)ELEMENTSOF(sort_names); k++)
				if (strcmp(optarg, sort_names[k]) == 0)
					break;
			if (k == (int)ELEMENTSOF(sort_names)) {
				ctl_error(env, CTL_ERR_USAGE,
					  "report: --sort is self, total or name, not '%s'", optarg);
				return -EINVAL;
			}
			o->sort = (enum report_sort)k;
			break;
		case OPT_TOP:
			if (report_parse_top(env, "report", optarg, &o->top) < 0)
				return -EINVAL;
			break;
		case OPT_CALLERS:
		case OPT_CALLEES:
			if (!*optarg) {
				ctl_error(env, CTL_ERR_USAGE, "report: %s needs a function name",
					  c == OPT_CALLERS ? "--callers" : "--callees");
				return -EINVAL;
			}
			*(c == OPT_CALLERS ? &o->callers : &o->callees) = optarg;
			break;
		case OPT_LINES:
			o->lines = true;
			break;
		default:
			if (ctl_common_option(env, "report", c, argv) < 0)
				return -EINVAL;
			break;
		}
	}
	if (optind < argc)
		o->file = argv[optind++];
	if (optind < argc) {
		ctl_error(env, CTL_ERR_USAGE, "report: unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	if (o->file && ctl_selection_given(&o->sel)) {
		ctl_error(env, CTL_ERR_USAGE,
			  "report: a FILE or processes and a time to ask perfd about, not both");
		return -EINVAL;
	}
	if (!o->file && !ctl_selection_given(&o->sel)) {
		ctl_error(env, CTL_ERR_USAGE,
			  "report: say what: a snapshot FILE, or processes (--pid, --comm, --cgroup, --unit, --all) and a time");
		return -EINVAL;
	}
	return o->file ? 0 : ctl_selection_check(env, "report", &o->sel);
}

enum perfctl_exit report_read_file(struct ctl_env *env, const char *command, const char *path,
				   const char *kind, struct profile **ret)
{
	char err[PROFILE_ERROR_MAX] = "";
	int k = profile_read_file(path, kind, ret, err);

	if (k >= 0)
		return PERFCTL_EXIT_OK;
	ctl_error(env, k == -ENOMEM ? CTL_ERR_IO : err[0] ? CTL_ERR_BAD_PROFILE : CTL_ERR_IO,
		  "%s: cannot read %s: %s", command, path, k != -ENOMEM && err[0] ? err : strerror(-k));
	return PERFCTL_EXIT_FAILURE;
}

/* A live report's profile: a json snapshot from perfd (see report.h). */
enum perfctl_exit report_fetch(struct ctl_env *env, const struct ctl_selection *sel,
				const char *kind, bool lines, struct profile **ret,
				struct json_object **ret_answer)
{
	_cleanup_(json_object_putp) struct json_object *req = ctl_request_new("snapshot"), *resp = NULL;
	struct json_object *profile, *note;
	char err[PROFILE_ERROR_MAX] = "";
	enum perfctl_exit rc;
	int k;

	if (!req || ctl_selection_add(sel, req) < 0 ||
	    json_object_object_add(req, "format", json_object_new_string("json")) < 0 ||
	    (kind && json_object_object_add(req, "kind", json_object_new_string(kind)) < 0) ||
	    (lines && json_object_object_add(req, "lines", json_object_new_boolean(1)) < 0)) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	rc = ctl_call(env, req, ctl_selection_timeout_ms(sel), &resp);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	profile = ctl_json_path(resp, "profile");
	if (!json_object_is_type(profile, json_type_object)) {
		ctl_error(env, CTL_ERR_PROTOCOL, "perfd's snapshot answer has no \"profile\" object");
		return PERFCTL_EXIT_FAILURE;
	}
	k = profile_read_json(profile, kind, ret, err);
	if (k < 0) {
		ctl_error(env, CTL_ERR_PROTOCOL, "perfd's call tree cannot be read: %s",
			  err[0] ? err : strerror(-k));
		return PERFCTL_EXIT_FAILURE;
	}
	note = ctl_json_path(resp, "note");
	if (json_object_is_type(note, json_type_string) && json_object_get_string_len(note) > 0)
		ctl_message("note", json_object_get_string(note),
			    (size_t)json_object_get_string_len(note));
	if (ret_answer)
		*ret_answer = TAKE_PTR(resp);
	return PERFCTL_EXIT_OK;
}

/* --- printing --------------------------------------------------------------- */

static bool is_unit(const struct profile *p, const char *unit)
{
	return strcmp(profile_string(p, p->unit), unit) == 0;
}

/* Nanoseconds for people: "0", "850ns", "12.5us", "3.21ms", "4.02s". */
static char *format_ns(double ns, char buf[static 32])
{
	if (ns == 0)
		(void)snprintf(buf, 32, "0");
	else if (ns < 1e3)
		(void)snprintf(buf, 32, "%.0fns", ns);
	else if (ns < 1e6)
		(void)snprintf(buf, 32, "%.1fus", ns / 1e3);
	else if (ns < 1e9)
		(void)snprintf(buf, 32, "%.2fms", ns / 1e6);
	else
		(void)snprintf(buf, 32, "%.2fs", ns / 1e9);
	return buf;
}

char *report_format_value(const struct profile *p, uint64_t v, char buf[static 32])
{
	if (is_unit(p, "bytes"))
		return ctl_format_size(v, buf);
	if (is_unit(p, "nanoseconds"))
		return format_ns((double)v, buf);
	(void)snprintf(buf, 32, "%" PRIu64, v);
	return buf;
}

/* The CPU time v samples stand for, or "" without a period. */
static char *format_time(const struct profile *p, uint64_t v, char buf[static 32])
{
	if (!p->period_ns)
		return strcpy(buf, "");
	return format_ns((double)v * (double)p->period_ns, buf);
}

double report_percent(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

char *report_row_label(const struct report *r, uint32_t row)
{
	const struct report_row *w;
	_cleanup_free_ char *text = NULL;
	const char *file, *base;
	int n;

	if (row == REPORT_ROOT)
		return strdup("(root)");
	w = &r->rows[row];
	file = profile_string(r->p, w->file);
	base = strrchr(file, '/');
	base = base ? base + 1 : file;
	if (!*file)
		n = asprintf(&text, "%s%s", profile_string(r->p, w->function), w->kernel ? "_[k]" : "");
	else if (w->line)
		n = asprintf(&text, "%s%s (%s:%" PRIu32 ")", profile_string(r->p, w->function),
			     w->kernel ? "_[k]" : "", base, w->line);
	else
		n = asprintf(&text, "%s%s (%s)", profile_string(r->p, w->function),
			     w->kernel ? "_[k]" : "", base);
	if (n < 0) {
		text = NULL;
		return NULL;
	}
	return ctl_escape(text, (size_t)n);
}

static void print_header(const struct report *r, const struct report_cmd *o)
{
	const struct profile *p = r->p;
	_cleanup_free_ char *file = o->file ? ctl_escape(o->file, strlen(o->file)) : NULL;
	_cleanup_free_ char *kind = ctl_escape(profile_string(p, p->kind), strlen(profile_string(p, p->kind)));
	char v[32], t[32], per[32];

	printf("%s%s%s%s: %s, %s %s", file ? file : "perfd", file ? " (" : "",
	       file ? profile_format_name(p->format) : "", file ? ")" : "", kind ? kind : "-",
	       report_format_value(p, r->total, v), is_unit(p, "samples") ? "samples" : "in all");
	if (p->period_ns && is_unit(p, "samples"))
		printf(" = %s at %s a sample", format_time(p, r->total, t),
		       format_ns((double)p->period_ns, per));
	printf("; %zu %s%s\n", r->n_rows, r->opts.lines ? "lines" : "functions",
	       r->opts.skip_kernel ? " (kernel frames left out)" : "");
}

static void print_table(const struct report *r, const struct report_cmd *o)
{
	_cleanup_free_ uint32_t *order = malloc((r->n_rows ? r->n_rows : 1) * sizeof(*order));
	const struct profile *p = r->p;
	bool timed = p->period_ns && is_unit(p, "samples");
	size_t n = o->top && (size_t)o->top < r->n_rows ? (size_t)o->top : r->n_rows;

	if (!order) {
		fprintf(stderr, "perfctl: out of memory\n");
		return;
	}
	report_order(r, o->sort, order);
	if (n < r->n_rows)
		printf("sorted by %s, the top %zu:\n\n", sort_names[o->sort], n);
	else
		printf("sorted by %s:\n\n", sort_names[o->sort]);
	if (timed)
		printf("%10s %9s %7s  %10s %9s %7s  %s\n", "SELF", "TIME", "%", "TOTAL", "TIME", "%",
		       r->opts.lines ? "FUNCTION (FILE:LINE)" : "FUNCTION");
	else
		printf("%10s %7s  %10s %7s  %s\n", "SELF", "%", "TOTAL", "%",
		       r->opts.lines ? "FUNCTION (FILE:LINE)" : "FUNCTION");
	for (size_t i = 0; i < n; i++) {
		const struct report_row *w = &r->rows[order[i]];
		_cleanup_free_ char *label = report_row_label(r, order[i]);
		char a[32], b[32], c[32], d[32];

		if (timed)
			printf("%10s %9s %6.2f%%  %10s %9s %6.2f%%  %s\n", report_format_value(p, w->self, a),
			       format_time(p, w->self, b), report_percent(w->self, r->total),
			       report_format_value(p, w->total, c), format_time(p, w->total, d),
			       report_percent(w->total, r->total), label ? label : "?");
		else
			printf("%10s %6.2f%%  %10s %6.2f%%  %s\n", report_format_value(p, w->self, a),
			       report_percent(w->self, r->total), report_format_value(p, w->total, c),
			       report_percent(w->total, r->total), label ? label : "?");
	}
}

static void print_relatives(const struct report *r, const struct report_cmd *o, const char *name,
			    const struct report_relatives *rel, bool callers)
{
	_cleanup_free_ char *fn = ctl_escape(name, strlen(name));
	const struct profile *p = r->p;
	size_t n = o->top && (size_t)o->top < rel->n_edges ? (size_t)o->top : rel->n_edges;
	char a[32], b[32];

	printf("\n%s of %s: %s %s", callers ? "Callers" : "Callees", fn ? fn : "?",
	       report_format_value(p, rel->total, a), is_unit(p, "samples") ? "samples" : "in all");
	if (p->period_ns && is_unit(p, "samples"))
		printf(" = %s", format_time(p, rel->total, b));
	printf(", %.2f%% of the profile\n", report_percent(rel->total, r->total));
	printf("%10s %9s %7s  %s\n", "VALUE", p->period_ns ? "TIME" : "", "SHARE",
	       callers ? "CALLER" : "CALLEE");
	if (!callers)
		printf("%10s %9s %6.2f%%  (self)\n", report_format_value(p, rel->self, a),
		       format_time(p, rel->self, b), report_percent(rel->self, rel->total));
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *label = report_row_label(r, rel->edges[i].row);

		printf("%10s %9s %6.2f%%  %s\n", report_format_value(p, rel->edges[i].value, a),
		       format_time(p, rel->edges[i].value, b),
		       report_percent(rel->edges[i].value, rel->total), label ? label : "?");
	}
}

/* --- JSON ------------------------------------------------------------------- */

struct json_object *report_json_points(double v)
{
	char text[32];

	(void)snprintf(text, sizeof(text), "%.2f", v);
	if (strcmp(text, "-0.00") == 0)
		strcpy(text, "0.00");
	return json_object_new_double_s(strtod(text, NULL), text);
}

static struct json_object *new_percent(uint64_t part, uint64_t whole)
{
	return report_json_points(report_percent(part, whole));
}

bool report_json_put_value(const struct profile *p, struct json_object *o, const char *key, uint64_t v)
{
	char ns_key[32];
	uint64_t ns;

	if (!ctl_json_put(o, key, json_object_new_uint64(v)))
		return false;
	if (!p->period_ns || !is_unit(p, "samples") || __builtin_mul_overflow(v, p->period_ns, &ns))
		return true;
	(void)snprintf(ns_key, sizeof(ns_key), "%s_ns", key);
	return ctl_json_put(o, ns_key, json_object_new_uint64(ns));
}

/* The row's identity: function, kernel, file and line where known. */
static bool put_row_name(const struct report *r, struct json_object *o, uint32_t row)
{
	const struct report_row *w = &r->rows[row];

	if (row == REPORT_ROOT)
		return ctl_json_put(o, "root", json_object_new_boolean(1));
	return ctl_json_put(o, "function", json_object_new_string(profile_string(r->p, w->function))) &&
	       ctl_json_put(o, "kernel", json_object_new_boolean(w->kernel)) &&
	       (!w->file || ctl_json_put(o, "file", json_object_new_string(profile_string(r->p, w->file)))) &&
	       (!w->line || ctl_json_put(o, "line", json_object_new_int64(w->line)));
}

static struct json_object *json_rows(const struct report *r, const struct report_cmd *o)
{
	_cleanup_free_ uint32_t *order = malloc((r->n_rows ? r->n_rows : 1) * sizeof(*order));
	_cleanup_(json_object_putp) struct json_object *a = json_object_new_array();
	size_t n = o->top && (size_t)o->top < r->n_rows ? (size_t)o->top : r->n_rows;

	if (!order || !a)
		return NULL;
	report_order(r, o->sort, order);
	for (size_t i = 0; i < n; i++) {
		const struct report_row *w = &r->rows[order[i]];
		struct json_object *row = json_object_new_object();

		if (!row || json_object_array_add(a, row) < 0) {
			json_object_put(row);
			return NULL;
		}
		if (!put_row_name(r, row, order[i]) || !report_json_put_value(r->p, row, "self", w->self) ||
		    !ctl_json_put(row, "self_percent", new_percent(w->self, r->total)) ||
		    !report_json_put_value(r->p, row, "total", w->total) ||
		    !ctl_json_put(row, "total_percent", new_percent(w->total, r->total)))
			return NULL;
	}
	return TAKE_PTR(a);
}

static struct json_object *json_relatives(const struct report *r, const struct report_cmd *o,
					  const char *name, const struct report_relatives *rel,
					  bool callers)
{
	_cleanup_(json_object_putp) struct json_object *obj = json_object_new_object();
	struct json_object *a = json_object_new_array();
	size_t n = o->top && (size_t)o->top < rel->n_edges ? (size_t)o->top : rel->n_edges;

	if (!obj || !ctl_json_put(obj, callers ? "callers" : "callees", a) ||
	    !ctl_json_put(obj, "function", json_object_new_string(name)) ||
	    !report_json_put_value(r->p, obj, "total", rel->total) ||
	    !ctl_json_put(obj, "total_percent", new_percent(rel->total, r->total)) ||
	    (!callers && (!report_json_put_value(r->p, obj, "self", rel->self) ||
			  !ctl_json_put(obj, "self_percent", new_percent(rel->self, rel->total)))))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_new_object();

		if (!e || json_object_array_add(a, e) < 0) {
			json_object_put(e);
			return NULL;
		}
		if (!put_row_name(r, e, rel->edges[i].row) ||
		    !report_json_put_value(r->p, e, "value", rel->edges[i].value) ||
		    !ctl_json_put(e, "percent", new_percent(rel->edges[i].value, rel->total)))
			return NULL;
	}
	return TAKE_PTR(obj);
}

static enum perfctl_exit print_json(struct ctl_env *env, const struct report *r,
				    const struct report_cmd *o,
				    const struct report_relatives *callers,
				    const struct report_relatives *callees)
{
	_cleanup_(json_object_putp) struct json_object *doc = json_object_new_object();
	const struct profile *p = r->p;
	bool ok = doc && ctl_json_put(doc, "version", json_object_new_int(PERFD_PROTOCOL_VERSION)) &&
		  ctl_json_put(doc, "ok", json_object_new_boolean(1)) &&
		  ctl_json_put(doc, "source", json_object_new_string(o->file ? "file" : "perfd")) &&
		  (!o->file || ctl_json_put(doc, "file", json_object_new_string(o->file))) &&
		  ctl_json_put(doc, "format", json_object_new_string(profile_format_name(p->format))) &&
		  ctl_json_put(doc, "kind", json_object_new_string(profile_string(p, p->kind))) &&
		  ctl_json_put(doc, "unit", json_object_new_string(profile_string(p, p->unit))) &&
		  (!p->period_ns || ctl_json_put(doc, "period_ns", json_object_new_uint64(p->period_ns))) &&
		  report_json_put_value(p, doc, "total", r->total) &&
		  ctl_json_put(doc, "kernel_frames", json_object_new_boolean(!r->opts.skip_kernel)) &&
		  ctl_json_put(doc, "lines", json_object_new_boolean(r->opts.lines)) &&
		  ctl_json_put(doc, "sort", json_object_new_string(sort_names[o->sort])) &&
		  ctl_json_put(doc, "rows", json_object_new_uint64(r->n_rows)) &&
		  ctl_json_put(doc, "functions", json_rows(r, o)) &&
		  (!o->callers || ctl_json_put(doc, "callers", json_relatives(r, o, o->callers, callers, true))) &&
		  (!o->callees || ctl_json_put(doc, "callees", json_relatives(r, o, o->callees, callees, false)));

	if (!ok) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	return ctl_print_answer(env, doc);
}

static void relatives_done(struct report_relatives *rel)
{
	free(rel->edges);
}

enum perfctl_exit do_report(struct ctl_env *env, int argc, char **argv)
{
	struct report_cmd o = { 0 };
	_cleanup_(profile_freep) struct profile *p = NULL;
	_cleanup_(report_freep) struct report *r = NULL;
	_cleanup_(relatives_done) struct report_relatives callers = { 0 }, callees = { 0 };
	struct report_opts ro;
	enum perfctl_exit rc;
	int k;

	if (parse_args(env, argc, argv, &o) < 0)
		return PERFCTL_EXIT_USAGE;
	rc = o.file ? report_read_file(env, "report", o.file, o.kind, &p) :
		      report_fetch(env, &o.sel, o.kind, o.lines, &p, NULL);
	if (rc != PERFCTL_EXIT_OK)
		return rc;

	ro = (struct report_opts){
		.lines = o.lines,
		.skip_kernel = !kind_name_kernel_frames(profile_string(p, p->kind)),
	};
	k = report_build(p, &ro, &r);
	if (k >= 0 && o.callers)
		k = report_callers(r, o.callers, &callers);
	if (k >= 0 && o.callees)
		k = report_callees(r, o.callees, &callees);
	if (k == -ENOENT) {
		const char *fn = o.callers && !callers.edges ? o.callers : o.callees;

		ctl_error(env, CTL_ERR_NO_FUNCTION, "report: no function '%s' in the profile", fn);
		return PERFCTL_EXIT_FAILURE;
	}
	if (k < 0) {
		ctl_error(env, CTL_ERR_IO, "report: %s", strerror(-k));
		return PERFCTL_EXIT_FAILURE;
	}

	if (env->json)
		return print_json(env, r, &o, &callers, &callees);
	print_header(r, &o);
	if (!o.callers && !o.callees)
		print_table(r, &o);
	if (o.callers)
		print_relatives(r, &o, o.callers, &callers, true);
	if (o.callees)
		print_relatives(r, &o, o.callees, &callees, false);
	return PERFCTL_EXIT_OK;
}

const struct ctl_command ctl_cmd_report = {
	.name = "report",
	.fn = do_report,
	.options = report_options,
	.shortopts = report_shortopts,
	.summary = "a table of functions, self and total, from a file or from perfd",
	.synopsis = "(FILE | SELECTION WHEN) [--kind " PERFD_KIND_NAMES("|", "|") "]\n"
		    "    [--sort self|total|name] [--top N] [--callers FUNC] [--callees FUNC]\n"
		    "    [--lines]",
	.help = "A table of functions, self and total value with their shares, from a\n"
		"snapshot FILE (folded, json or pprof, told by its content) or from perfd,\n"
		"for the processes and time snapshot takes (SELECTION WHEN: see\n"
		"'perfctl snapshot --help').\n"
		"  --top N                rows (default 20, 0: all)\n"
		"  --callers FUNC, --callees FUNC\n"
		"                         who calls FUNC and what it calls, with their shares\n"
		"                         of its total\n"
		"  --lines                a row per function and line\n",
};
