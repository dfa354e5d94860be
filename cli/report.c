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
 * The computation (rows, self and total, callers and callees) is the
 * analysis module's (analysis/functions.c), the code perfd's top runs on
 * its live store: here it runs in perfctl, because a file has no daemon,
 * and a snapshot from perfd takes the same path as a file so that the two
 * read alike.  This file is the command: options, the round trip, and
 * the table printed for people or as JSON.
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
				const char *kind, unsigned flags, struct profile **ret,
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
	    ((flags & REPORT_FETCH_LINES) &&
	     json_object_object_add(req, "lines", json_object_new_boolean(1)) < 0) ||
	    ((flags & REPORT_FETCH_THREADS) &&
	     json_object_object_add(req, "threads", json_object_new_boolean(1)) < 0)) {
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
	k = profile_read_json(profile, kind, flags & REPORT_FETCH_THREADS, ret, err);
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
		      report_fetch(env, &o.sel, o.kind, o.lines ? REPORT_FETCH_LINES : 0, &p, NULL);
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
