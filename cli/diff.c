/* SPDX-License-Identifier: MIT */
/*
 * diff.c - `perfctl diff BEFORE AFTER`: what changed between two profiles,
 * per function: its self and total value on each side, each as a share of
 * its own profile's total, and the change of the shares in points, the
 * largest change first.  BEFORE and AFTER are snapshot files perfd wrote,
 * in any of the formats that carry stacks (folded, json, pprof: told by
 * their content, profile_read.c), not necessarily the same one.
 *
 * The comparison is the analysis module's (analysis/diff.c: shares of
 * each side's total, matched by function name and side of the kernel
 * boundary), run here in perfctl on the files as report runs on one.
 * Memory profiles leave kernel frames out, as report does.  The kinds must
 * match: a memory profile in bytes against a CPU one in samples compares
 * nothing.  --format html|svg draws the same comparison as a differential
 * flame graph instead (diff_flame.c), to -o FILE (picked by its
 * extension) or stdout.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/kindtab.h"
#include "diff.h"
#include "format.h"
#include "outfile.h"
#include "output.h"
#include "perfctl.h"
#include "perfd/protocol.h"
#include "report.h"

/* --- the command ------------------------------------------------------------ */

enum diff_format { DIFF_TEXT, DIFF_HTML, DIFF_SVG };

struct diff_cmd {
	const char *before, *after;
	const char *kind; /* NULL: each file's own, which must then match */
	int64_t top;      /* 0: all */
	enum diff_format format;
	const char *output; /* -o FILE of a flame graph; NULL: stdout */
};

static int parse_format(struct ctl_env *env, const char *name, enum diff_format *ret)
{
	static const char *const names[] = { [DIFF_TEXT] = "text", [DIFF_HTML] = "html",
					      [DIFF_SVG] = "svg" };

	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (strcmp(names[i], name) == 0) {
			*ret = (enum diff_format)i;
			return 0;
		}
	ctl_error(env, CTL_ERR_USAGE, "diff: --format takes text, html or svg, not '%s'", name);
	return -EINVAL;
}

/* The format of -o FILE without --format: html or svg by its extension,
 * as snapshot picks them; the table has no file of its own. */
static int format_of_output(struct ctl_env *env, struct diff_cmd *o)
{
	const char *by_ext = ctl_format_by_extension(o->output);

	if (by_ext && (strcmp(by_ext, "html") == 0 || strcmp(by_ext, "svg") == 0))
		return parse_format(env, by_ext, &o->format);
	ctl_error(env, CTL_ERR_USAGE,
		  "diff: -o writes a flame graph: name the file .html or .svg, or give --format "
		  "html|svg (the table goes to stdout)");
	return -EINVAL;
}

enum { OPT_KIND = 256, OPT_TOP };

/* The options, as getopt_long() takes them; also what `perfctl
 * --complete-options diff` lists for the shell completion. */
static const struct option diff_options[] = {
	{ "kind", required_argument, NULL, OPT_KIND },
	{ "top", required_argument, NULL, OPT_TOP },
	{ "format", required_argument, NULL, 'f' },
	{ "output", required_argument, NULL, 'o' },
	{ "json", no_argument, NULL, 'j' },
	{ "socket", required_argument, NULL, 'S' },
	{}
};
static const char diff_shortopts[] = ":f:o:";

#define SORT_TEXT "the larger of |delta self%| and |delta total%|"

static int parse_args(struct ctl_env *env, int argc, char **argv, struct diff_cmd *o)
{
	bool have_format = false;
	int c;

	o->top = 20;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, diff_shortopts, diff_options, NULL)) != -1) {
		switch (c) {
		case OPT_KIND:
			if (report_parse_kind(env, "diff", optarg, &o->kind) < 0)
				return -EINVAL;
			break;
		case OPT_TOP:
			if (report_parse_top(env, "diff", optarg, &o->top) < 0)
				return -EINVAL;
			break;
		case 'f':
			if (parse_format(env, optarg, &o->format) < 0)
				return -EINVAL;
			have_format = true;
			break;
		case 'o':
			if (ctl_output_option(env, "diff", optarg, &o->output) < 0)
				return -EINVAL;
			break;
		default:
			if (ctl_common_option(env, "diff", c, argv) < 0)
				return -EINVAL;
			break;
		}
	}
	if (argc - optind != 2) {
		ctl_error(env, CTL_ERR_USAGE, "diff: takes two snapshot files, BEFORE and AFTER (%d given)",
			  argc - optind);
		return -EINVAL;
	}
	o->before = argv[optind];
	o->after = argv[optind + 1];
	if (o->output && !have_format)
		return format_of_output(env, o);
	if (o->output && o->format == DIFF_TEXT) {
		ctl_error(env, CTL_ERR_USAGE, "diff: -o writes a flame graph (--format html|svg); the "
					      "table goes to stdout");
		return -EINVAL;
	}
	if (env->json && o->format != DIFF_TEXT && !o->output) {
		ctl_error(env, CTL_ERR_USAGE, "diff: --json with --format %s needs -o FILE: the graph "
					      "is not JSON", o->format == DIFF_HTML ? "html" : "svg");
		return -EINVAL;
	}
	return 0;
}

static const char *kind_of(const struct profile *p)
{
	return profile_string(p, p->kind);
}

static void print_side(const char *path, const struct profile *p)
{
	_cleanup_free_ char *file = ctl_escape(path, strlen(path));
	_cleanup_free_ char *kind = ctl_escape(kind_of(p), strlen(kind_of(p)));
	char v[32];

	printf("%s (%s): %s, %s %s\n", file ? file : "?", profile_format_name(p->format),
	       kind ? kind : "?", report_format_value(p, p->total, v),
	       strcmp(profile_string(p, p->unit), "samples") == 0 ? "samples" : "in all");
}

/* Points as printed: a change that rounds to zero is zero, never -0.00. */
static double shown(double points)
{
	return fabs(points) < 0.005 ? 0.0 : points;
}

static void print_table(const struct diff *d, const struct diff_cmd *o, const struct profile *before,
			const struct profile *after)
{
	size_t n = o->top && (size_t)o->top < d->n_rows ? (size_t)o->top : d->n_rows;

	printf("before: ");
	print_side(o->before, before);
	printf("after:  ");
	print_side(o->after, after);
	printf("%zu functions%s; shares are percent of each profile's total, deltas in points "
	       "(after - before);\nsorted by %s", d->n_rows,
	       !kind_name_kernel_frames(kind_of(before)) ? " (kernel frames left out)" : "", SORT_TEXT);
	if (n < d->n_rows)
		printf(", the top %zu", n);
	printf(":\n\n");
	printf("%-45s  %s\n", "SELF", "TOTAL");
	printf("%10s %7s %10s %7s %8s  %10s %7s %10s %7s %8s  %s\n", "BEFORE", "%", "AFTER", "%",
	       "DELTA", "BEFORE", "%", "AFTER", "%", "DELTA", "FUNCTION");
	for (size_t i = 0; i < n; i++) {
		const struct diff_row *w = &d->rows[i];
		_cleanup_free_ char *label = ctl_escape(w->function, strlen(w->function));
		char a[32], b[32], c[32], e[32];

		printf("%10s %6.2f%% %10s %6.2f%% %+8.2f  %10s %6.2f%% %10s %6.2f%% %+8.2f  %s%s\n",
		       report_format_value(before, w->before.self, a), w->before.self_percent,
		       report_format_value(after, w->after.self, b), w->after.self_percent,
		       shown(w->self_delta), report_format_value(before, w->before.total, c),
		       w->before.total_percent, report_format_value(after, w->after.total, e),
		       w->after.total_percent, shown(w->total_delta), label ? label : "?",
		       w->kernel ? "_[k]" : "");
	}
}

/* One side's figures of a row: { self, self_ns, self_percent, total, ... }. */
static struct json_object *json_side(const struct profile *p, const struct diff_side *s)
{
	_cleanup_(json_object_putp) struct json_object *o = json_object_new_object();

	if (!o || !report_json_put_value(p, o, "self", s->self) ||
	    !ctl_json_put(o, "self_percent", report_json_points(s->self_percent)) ||
	    !report_json_put_value(p, o, "total", s->total) ||
	    !ctl_json_put(o, "total_percent", report_json_points(s->total_percent)))
		return NULL;
	return TAKE_PTR(o);
}

/* What is known of one input: { file, format, total, total_ns, period_ns }. */
static struct json_object *json_input(const char *path, const struct profile *p)
{
	_cleanup_(json_object_putp) struct json_object *o = json_object_new_object();

	if (!o || !ctl_json_put(o, "file", json_object_new_string(path)) ||
	    !ctl_json_put(o, "format", json_object_new_string(profile_format_name(p->format))) ||
	    !report_json_put_value(p, o, "total", p->total) ||
	    (p->period_ns && !ctl_json_put(o, "period_ns", json_object_new_uint64(p->period_ns))))
		return NULL;
	return TAKE_PTR(o);
}

static struct json_object *json_rows(const struct diff *d, const struct diff_cmd *o,
				     const struct profile *before, const struct profile *after)
{
	_cleanup_(json_object_putp) struct json_object *a = json_object_new_array();
	size_t n = o->top && (size_t)o->top < d->n_rows ? (size_t)o->top : d->n_rows;

	if (!a)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const struct diff_row *w = &d->rows[i];
		struct json_object *row = json_object_new_object();

		if (!row || json_object_array_add(a, row) < 0) {
			json_object_put(row);
			return NULL;
		}
		if (!ctl_json_put(row, "function", json_object_new_string(w->function)) ||
		    !ctl_json_put(row, "kernel", json_object_new_boolean(w->kernel)) ||
		    !ctl_json_put(row, "before", json_side(before, &w->before)) ||
		    !ctl_json_put(row, "after", json_side(after, &w->after)) ||
		    !ctl_json_put(row, "self_delta", report_json_points(w->self_delta)) ||
		    !ctl_json_put(row, "total_delta", report_json_points(w->total_delta)) ||
		    !ctl_json_put(row, "change", report_json_points(w->change)))
			return NULL;
	}
	return TAKE_PTR(a);
}

static enum perfctl_exit print_json(struct ctl_env *env, const struct diff *d,
				    const struct diff_cmd *o, const struct profile *before,
				    const struct profile *after)
{
	_cleanup_(json_object_putp) struct json_object *doc = json_object_new_object();
	bool ok = doc && ctl_json_put(doc, "version", json_object_new_int(PERFD_PROTOCOL_VERSION)) &&
		  ctl_json_put(doc, "ok", json_object_new_boolean(1)) &&
		  ctl_json_put(doc, "kind", json_object_new_string(kind_of(before))) &&
		  ctl_json_put(doc, "unit", json_object_new_string(profile_string(before, before->unit))) &&
		  ctl_json_put(doc, "before", json_input(o->before, before)) &&
		  ctl_json_put(doc, "after", json_input(o->after, after)) &&
		  ctl_json_put(doc, "kernel_frames",
				  json_object_new_boolean(kind_name_kernel_frames(kind_of(before)))) &&
		  ctl_json_put(doc, "sort", json_object_new_string("change")) &&
		  ctl_json_put(doc, "rows", json_object_new_uint64(d->n_rows)) &&
		  ctl_json_put(doc, "functions", json_rows(d, o, before, after));

	if (!ok) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	return ctl_print_answer(env, doc);
}

/* The differential flame graph, to -o FILE (and a line on stderr, or the
 * receipt {"ok":true,"output":FILE} with --json) or to stdout. */
static enum perfctl_exit write_flame(struct ctl_env *env, const struct diff_cmd *o,
				     const struct profile *before, const struct profile *after)
{
	const struct diff_flame_opts fo = {
		.svg = o->format == DIFF_SVG,
		.skip_kernel = !kind_name_kernel_frames(kind_of(before)),
		.before_source = o->before,
		.after_source = o->after,
	};
	_cleanup_free_ char *data = NULL, *shown = NULL;
	enum perfctl_exit rc;
	size_t len;
	int k;

	k = diff_flame(before, after, &fo, &data, &len);
	if (k < 0) {
		ctl_error(env, CTL_ERR_IO, "diff: %s", strerror(-k));
		return PERFCTL_EXIT_FAILURE;
	}
	if (!o->output)
		return fwrite(data, 1, len, stdout) == len ? PERFCTL_EXIT_OK : PERFCTL_EXIT_FAILURE;
	rc = ctl_output(env, o->output, data, len);
	if (rc != PERFCTL_EXIT_OK || env->json)
		return rc;
	shown = ctl_escape(o->output, strlen(o->output));
	fprintf(stderr, "perfctl: differential flame graph (%s) written to %s\n",
		o->format == DIFF_SVG ? "svg" : "html", shown ? shown : "?");
	return PERFCTL_EXIT_OK;
}

enum perfctl_exit do_diff(struct ctl_env *env, int argc, char **argv)
{
	struct diff_cmd o = { 0 };
	_cleanup_(profile_freep) struct profile *before = NULL, *after = NULL;
	_cleanup_(diff_freep) struct diff *d = NULL;
	enum perfctl_exit rc;
	int k;

	if (parse_args(env, argc, argv, &o) < 0)
		return PERFCTL_EXIT_USAGE;
	rc = report_read_file(env, "diff", o.before, o.kind, &before);
	if (rc == PERFCTL_EXIT_OK)
		rc = report_read_file(env, "diff", o.after, o.kind, &after);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	if (strcmp(kind_of(before), kind_of(after)) != 0 ||
	    strcmp(profile_string(before, before->unit), profile_string(after, after->unit)) != 0) {
		ctl_error(env, CTL_ERR_KIND_MISMATCH,
			  "diff: %s holds a %s profile (%s) and %s a %s one (%s): they do not compare; "
			  "--kind picks one kind of both",
			  o.before, kind_of(before), profile_string(before, before->unit), o.after,
			  kind_of(after), profile_string(after, after->unit));
		return PERFCTL_EXIT_FAILURE;
	}

	if (o.format != DIFF_TEXT)
		return write_flame(env, &o, before, after);
	k = diff_build(before, after, !kind_name_kernel_frames(kind_of(before)), &d);
	if (k < 0) {
		ctl_error(env, CTL_ERR_IO, "diff: %s", strerror(-k));
		return PERFCTL_EXIT_FAILURE;
	}
	if (env->json)
		return print_json(env, d, &o, before, after);
	print_table(d, &o, before, after);
	return PERFCTL_EXIT_OK;
}

const struct ctl_command ctl_cmd_diff = {
	.name = "diff",
	.fn = do_diff,
	.options = diff_options,
	.shortopts = diff_shortopts,
	.summary = "the change of each function's share between two profiles",
	.synopsis = "BEFORE AFTER [--kind " PERFD_KIND_NAMES("|", "|") "] [--top N]\n"
		    "    [--format text|html|svg] [-o FILE]",
	.help = "Per function, the change of its self and total share (percent of each\n"
		"profile's total) between two snapshot files of one kind, in any formats;\n"
		"the largest change first.\n"
		"  --top N                rows (default 20, 0: all)\n"
		"  --format html|svg      a differential flame graph of AFTER, red where a\n"
		"                         frame's share grew, blue where it shrank, to stdout\n"
		"                         or FILE (.html or .svg picks the format)\n",
};
