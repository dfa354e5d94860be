/* SPDX-License-Identifier: MIT */
/*
 * top_text.c - one `perfctl top` answer as lines of text: the header (the
 * host, then the view and its keys), the column titles, one line per
 * process or function, and a function's callers and callees as indented
 * trees.  Batch mode prints these lines, the screen draws them, so the two
 * never disagree.
 *
 * Design: perfd already sorted and cut the rows to what is shown, so this
 * only formats.  Every text that came from perfd (names, files, units) is
 * escaped (ctl_escape): a process can name itself anything, escape
 * sequences included.  A missing field prints "-", as ps does.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "format.h"
#include "output.h"
#include "top.h"

const char *const top_process_sorts[4] = { "cpu", "rss", "peak", "growth" };
const char *const top_function_sorts[2] = { "self", "total" };
const char *const top_kinds[3] = { "cpu", "memory", "offcpu" };
/* What the function view's values are, and what a value per second is
 * titled. */
static const char *const values_titles[3] = { "CPU samples", "memory growth", "off-CPU time" };

static const char *const process_sort_titles[4] = { "CPU", "RSS", "peak RSS", "growth" };

/* Appends a line of kind; NULL on ENOMEM. */
_printf_(3, 4) static struct top_line *add_line(struct top_frame *f, enum top_line_kind kind,
						 const char *fmt, ...)
{
	struct top_line *l;
	va_list ap;
	char *text;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 64;
		struct top_line *lines = realloc(f->lines, cap * sizeof(*lines));

		if (!lines) {
			free(text);
			return NULL;
		}
		f->lines = lines;
		f->cap = cap;
	}
	l = &f->lines[f->n++];
	*l = (struct top_line){ .kind = kind, .text = text };
	f->rows += kind == TOP_LINE_ROW;
	return l;
}

void top_frame_done(struct top_frame *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->lines[i].text);
		free(f->lines[i].function);
	}
	free(f->lines);
	*f = (struct top_frame){ 0 };
}

static double number(struct json_object *o, const char *path, double dflt)
{
	double v;

	return ctl_json_double(o, path, &v) ? v : dflt;
}

/* A growth rate: "+1.5M", "-512K", "0" (under 1 KiB/s either way). */
static char *format_rate(double bytes_per_second, char buf[static CTL_SIZE_MAX + 1])
{
	char size[CTL_SIZE_MAX];

	if (!isfinite(bytes_per_second) || fabs(bytes_per_second) < 1024) {
		(void)snprintf(buf, CTL_SIZE_MAX + 1, "0");
		return buf;
	}
	(void)ctl_format_size((uint64_t)fabs(bytes_per_second), size);
	(void)snprintf(buf, CTL_SIZE_MAX + 1, "%c%s", bytes_per_second > 0 ? '+' : '-', size);
	return buf;
}

static int header_host(struct top_frame *f, struct json_object *a)
{
	char when[CTL_CLOCK_MAX], rss[CTL_SIZE_MAX], rate[32] = "-", lost[64] = "-", cpu[32] = "-";
	double v;
	int64_t cpus = 0, hz = 0, lost_total = 0;

	(void)ctl_json_int(a, "host.cpus", &cpus);
	(void)ctl_json_int(a, "host.frequency_hz", &hz);
	(void)ctl_json_int(a, "host.samples_lost_total", &lost_total);
	if (ctl_json_double(a, "host.samples_per_second", &v))
		(void)snprintf(rate, sizeof(rate), "%.0f", v);
	if (ctl_json_double(a, "host.samples_lost", &v))
		(void)snprintf(lost, sizeof(lost), "%.0f (%lld in all)", v, (long long)lost_total);
	if (ctl_json_double(a, "host.daemon_cpu_percent", &v))
		(void)snprintf(cpu, sizeof(cpu), "%.1f%%", v);
	return add_line(f, TOP_LINE_HEADER,
			"perfd top - %s - last %.0fs - %lld CPUs at %lld Hz - %s samples/s - "
			"lost %s - perfd %s CPU, %s RSS",
			ctl_json_clock(a, "time", when), number(a, "interval_seconds", 0), (long long)cpus, (long long)hz, rate,
			lost, cpu, ctl_json_size(a, "host.daemon_rss_bytes", rss)) ? 0 : -ENOMEM;
}

static int process_lines(struct top_frame *f, const struct top_query *q, struct json_object *a)
{
	struct json_object *procs = ctl_json_path(a, "processes");
	_cleanup_free_ char *filter = ctl_escape(q->filter, strlen(q->filter));
	size_t n;

	if (!filter ||
	    !add_line(f, TOP_LINE_HEADER,
		      "Processes: %zu %s, by %s [c m p g] - filter: %s [/] - kernel threads: %s [k] - "
		      "Enter: functions, f: all functions, q: quit",
		      f->matched, q->all ? "live" : "active", process_sort_titles[q->process_sort],
		      q->filter[0] ? filter : "none", q->kernel_threads ? "shown" : "hidden") ||
	    !add_line(f, TOP_LINE_COLUMNS, "%7s %-8s %-15s %-22s %6s %6s %8s %8s %9s  %s", "PID",
		      "USER", "COMM", "UNIT", "%CPU", "%WAIT", "RSS", "PEAK", "GROWTH/s", "TOP FUNCTION"))
		return -ENOMEM;
	n = json_object_is_type(procs, json_type_array) ? json_object_array_length(procs) : 0;
	for (size_t i = 0; i < n; i++) {
		struct json_object *p = json_object_array_get_idx(procs, i);
		_cleanup_free_ char *comm = ctl_json_string_escaped(p, "comm");
		_cleanup_free_ char *user = ctl_json_string_escaped(p, "user");
		_cleanup_free_ char *unit = ctl_json_string_escaped(p, "unit");
		_cleanup_free_ char *fn = ctl_json_string_escaped(p, "top_function");
		const char *fn_kind = json_object_get_string(ctl_json_path(p, "top_function_kind"));
		char rss[CTL_SIZE_MAX], peak[CTL_SIZE_MAX], growth[CTL_SIZE_MAX + 2], top[16] = "";
		int64_t pid = 0;
		struct top_line *l;
		double share;

		if (!comm || !user || !unit || !fn)
			return -ENOMEM;
		(void)ctl_json_int(p, "pid", &pid);
		(void)format_rate(number(p, "rss_growth_bytes_per_second", 0), growth);
		if (json_object_get_boolean(ctl_json_path(p, "growing")))
			strcat(growth, "!");
		/* its share first: a long (C++) name is what the edge cuts */
		if (ctl_json_double(p, "top_function_percent", &share))
			(void)snprintf(top, sizeof(top), "%3.0f%% ", share);
		l = add_line(f, TOP_LINE_ROW, "%7lld %-8.8s %-15.15s %-22.22s %6.1f %6.1f %8s %8s %9s  %s%s%s%s",
			     (long long)pid, user, comm, unit, number(p, "cpu_percent", 0),
			     number(p, "wait_percent", 0),
			     ctl_json_size(p, "rss_bytes", rss), ctl_json_size(p, "peak_rss_bytes", peak), growth,
			     json_object_get_boolean(ctl_json_path(p, "exited")) ? "(exited) " : "", top,
			     fn, fn_kind && strcmp(fn_kind, "kernel") == 0 ? "_[k]" : "");
		if (!l)
			return -ENOMEM;
		l->pid = (uint32_t)pid;
	}
	return 0;
}

/* "spin.c:26", "libc.so.6", "[kernel]" or "-": where a function is. */
static char *where(struct json_object *o, char *buf, size_t size)
{
	struct json_object *file = ctl_json_path(o, "file"), *module = ctl_json_path(o, "module");
	const char *kind = json_object_get_string(ctl_json_path(o, "kind"));
	int64_t line = 0;

	(void)ctl_json_int(o, "line", &line);
	if (json_object_is_type(file, json_type_string)) {
		const char *s = json_object_get_string(file), *base = strrchr(s, '/');

		(void)snprintf(buf, size, line > 0 ? "%s:%lld" : "%s", base ? base + 1 : s,
			       (long long)line);
	} else if (kind && strcmp(kind, "kernel") == 0) {
		(void)snprintf(buf, size, "[kernel]");
	} else if (json_object_is_type(module, json_type_string)) {
		(void)snprintf(buf, size, "%s", json_object_get_string(module));
	} else {
		(void)snprintf(buf, size, "-");
	}
	return buf;
}

/* A function's name as folded output has it: kernel ones end in "_[k]";
 * escaped, malloc'ed. */
static char *display_name(struct json_object *o)
{
	const char *kind = json_object_get_string(ctl_json_path(o, "kind"));
	_cleanup_free_ char *name = ctl_json_string_escaped(o, "function");
	char *s;

	if (!name)
		return NULL;
	if (!kind || strcmp(kind, "kernel") != 0)
		return TAKE_PTR(name);
	return asprintf(&s, "%s_[k]", name) < 0 ? NULL : s;
}

/* Marks line l as the function o stands for. */
static int set_function(struct top_line *l, struct json_object *o)
{
	struct json_object *name = ctl_json_path(o, "function");
	const char *kind = json_object_get_string(ctl_json_path(o, "kind"));

	if (!json_object_is_type(name, json_type_string))
		return 0;
	l->function = strdup(json_object_get_string(name));
	if (!l->function)
		return -ENOMEM;
	(void)snprintf(l->function_kind, sizeof(l->function_kind), "%s", kind ? kind : "");
	return 0;
}

/* A value of the view: samples, bytes per second of growth, or seconds
 * of waiting per second (each wait counted whole in the second it ended:
 * a 10 s sleep is 10 s in one refresh). */
static char *value_text(const struct top_query *q, double v, double seconds, char *buf, size_t size)
{
	double per_second = seconds > 0 ? v / seconds : 0;
	char s[CTL_SIZE_MAX];

	switch (q->values) {
	case TOP_VALUES_MEMORY:
		(void)snprintf(buf, size, "%s/s", ctl_format_size((uint64_t)per_second, s));
		break;
	case TOP_VALUES_OFFCPU:
		(void)snprintf(buf, size, "%.2fs/s", per_second / 1e9);
		break;
	default:
		(void)snprintf(buf, size, "%.0f", v);
		break;
	}
	return buf;
}

/* The subject of a function view: "pid 1978 (spin)" or "all processes". */
static char *subject(const struct top_query *q, struct json_object *a)
{
	_cleanup_free_ char *comm = ctl_json_string_escaped(a, "comm");
	int64_t n = 0;
	char *s;

	(void)ctl_json_int(a, "processes_sampled", &n);
	if (!comm)
		return NULL;
	if (q->pid)
		return asprintf(&s, "pid %u (%s)", q->pid, comm) < 0 ? NULL : s;
	return asprintf(&s, "all processes (%lld sampled)", (long long)n) < 0 ? NULL : s;
}

static int tree_lines(struct top_frame *f, struct json_object *node_list, const char *key,
		      unsigned level)
{
	size_t n = json_object_is_type(node_list, json_type_array) ? json_object_array_length(node_list) : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_array_get_idx(node_list, i);
		_cleanup_free_ char *name = NULL;
		char at[256];
		struct top_line *l;
		int r;

		if (json_object_get_boolean(ctl_json_path(o, "root"))) {
			if (!add_line(f, TOP_LINE_TEXT, "  %6.2f%%  %*s[root: the outermost frame]",
				      number(o, "percent", 0), (int)(2 * level), ""))
				return -ENOMEM;
			continue;
		}
		name = display_name(o);
		if (!name)
			return -ENOMEM;
		l = add_line(f, TOP_LINE_ROW, "  %6.2f%%  %*s%s  %s", number(o, "percent", 0),
			     (int)(2 * level), "", name, where(o, at, sizeof(at)));
		if (!l || set_function(l, o) < 0)
			return -ENOMEM;
		r = tree_lines(f, ctl_json_path(o, key), key, level + 1);
		if (r < 0)
			return r;
	}
	return 0;
}

static int function_detail(struct top_frame *f, const struct top_query *q, struct json_object *a,
			   struct json_object *fn, const char *what, double seconds)
{
	_cleanup_free_ char *name = display_name(fn), *subj = subject(q, a);
	char at[256], total[64];

	if (!name || !subj)
		return -ENOMEM;
	if (!add_line(f, TOP_LINE_HEADER,
		      "%s (%s) in %s: self %.2f%%, total %.2f%% of %s %s over %.0fs - Esc: back, "
		      "Enter: that function",
		      name, where(fn, at, sizeof(at)), subj, number(fn, "self_percent", 0),
		      number(fn, "total_percent", 0),
		      value_text(q, number(a, "total", 0), seconds, total, sizeof(total)), what, seconds) ||
	    !add_line(f, TOP_LINE_TEXT, "Callers (who calls %s; share of its total):", name) ||
	    tree_lines(f, ctl_json_path(fn, "callers"), "callers", 0) < 0 ||
	    !add_line(f, TOP_LINE_TEXT, "Callees (what %s calls; share of its total):", name) ||
	    !add_line(f, TOP_LINE_TEXT, "  %6.2f%%  [self]", number(fn, "total", 0) > 0 ?
			      100.0 * number(fn, "self", 0) / number(fn, "total", 1) : 0) ||
	    tree_lines(f, ctl_json_path(fn, "callees"), "callees", 0) < 0)
		return -ENOMEM;
	return 0;
}

static int function_lines(struct top_frame *f, const struct top_query *q, struct json_object *a)
{
	struct json_object *list = ctl_json_path(a, "functions"), *fn = ctl_json_path(a, "function");
	double seconds = number(a, "interval_seconds", 0);
	const char *what = values_titles[q->values];
	bool rates = q->values != TOP_VALUES_CPU;
	_cleanup_free_ char *subj = subject(q, a);
	char total[64];
	size_t n;

	if (!subj)
		return -ENOMEM;
	if (q->function[0] && json_object_is_type(fn, json_type_object))
		return function_detail(f, q, a, fn, what, seconds);
	if (!add_line(f, TOP_LINE_HEADER,
		      "Functions of %s: %s, %s in %.0fs; %zu functions, by %s [s t] - M: %s, W: %s - "
		      "Enter: callers and callees, Esc: back",
		      subj, what, value_text(q, number(a, "total", 0), seconds, total, sizeof(total)),
		      seconds, f->matched, top_function_sorts[q->function_sort],
		      q->values == TOP_VALUES_MEMORY ? "CPU" : "memory growth",
		      q->values == TOP_VALUES_OFFCPU ? "CPU" : "waits") ||
	    !add_line(f, TOP_LINE_COLUMNS, "%7s %7s %10s %10s  %-40s %s", "SELF%", "TOTAL%",
		      rates ? "SELF/s" : "SELF", rates ? "TOTAL/s" : "TOTAL", "FUNCTION", "WHERE"))
		return -ENOMEM;
	if (q->function[0] && !add_line(f, TOP_LINE_TEXT, "  (%s was not sampled in this interval)",
					q->function))
		return -ENOMEM;
	n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_array_get_idx(list, i);
		_cleanup_free_ char *name = display_name(o);
		char self[32], tot[32], at[256];
		struct top_line *l;

		if (!name)
			return -ENOMEM;
		l = add_line(f, TOP_LINE_ROW, "%6.2f%% %6.2f%% %10s %10s  %-40s %s",
			     number(o, "self_percent", 0), number(o, "total_percent", 0),
			     value_text(q, number(o, "self", 0), seconds, self, sizeof(self)),
			     value_text(q, number(o, "total", 0), seconds, tot, sizeof(tot)), name,
			     where(o, at, sizeof(at)));
		if (!l || set_function(l, o) < 0)
			return -ENOMEM;
	}
	return 0;
}

int top_frame_build(struct top_frame *f, const struct top_query *q, struct json_object *answer)
{
	int64_t matched = 0;

	*f = (struct top_frame){ 0 };
	(void)ctl_json_int(answer, "matched", &matched);
	f->matched = matched > 0 ? (size_t)matched : 0;
	if (header_host(f, answer) < 0)
		return -ENOMEM;
	return q->view == TOP_VIEW_PROCESSES ? process_lines(f, q, answer) : function_lines(f, q, answer);
}
