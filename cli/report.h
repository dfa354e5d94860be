/* SPDX-License-Identifier: MIT */
/*
 * report.h - a profile's stacks summed per function, as `perfctl report`
 * prints them: self and total (inclusive) value of each function, and who
 * calls a function and what it calls, with their shares of it.  The
 * computation is pure, on a struct profile (profile_read.h), no I/O; the
 * commands built on it share the rest: report_fetch() gets that profile
 * from perfd (`report`, `diagnose`), report_read_file() from a file
 * (`report`, `diff`), report_row_label() names a row, and the JSON and
 * value helpers at the end print it.
 */
#ifndef PERFCTL_REPORT_H
#define PERFCTL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfctl.h"
#include "perfd/macro.h"
#include "profile_read.h"

struct ctl_selection;
struct json_object;

enum report_sort {
	REPORT_SORT_SELF,
	REPORT_SORT_TOTAL,
	REPORT_SORT_NAME,
};

struct report_opts {
	bool lines;       /* a row per function and line, not per function */
	bool skip_kernel; /* leave kernel frames out of every stack */
	bool by_name;     /* a row per name and side, whatever the file (diff: a
			   * folded file knows no files); the row's file is one
			   * of them */
};

/* One function (or, with lines, one line of a function). */
struct report_row {
	uint32_t function, file; /* string ids of the profile; file 0: unknown */
	uint32_t line;           /* with lines, the row's; else the lowest seen; 0: unknown */
	bool kernel;
	uint64_t self;  /* of the stacks it is the leaf of */
	uint64_t total; /* of the stacks it is in, once per stack */
};

struct report {
	const struct profile *p; /* not owned; must outlive the report */
	struct report_opts opts;
	struct report_row *rows;
	size_t n_rows;
	uint32_t *frame_row; /* profile frame id -> row */
	uint64_t total;      /* the profile's */
};

/* A caller of a function, or a callee; row REPORT_ROOT stands for "none":
 * the function was the outermost frame of the stack. */
#define REPORT_ROOT UINT32_MAX
struct report_edge {
	uint32_t row;
	uint64_t value;
};

struct report_relatives {
	uint64_t total; /* of the stacks holding the function */
	uint64_t self;  /* of those it is the leaf of (callees only) */
	struct report_edge *edges; /* largest first */
	size_t n_edges;
};

/* Sums p's stacks per row.  Returns 0 and the report in *ret
 * (report_free() it), or -ENOMEM. */
int report_build(const struct profile *p, const struct report_opts *o, struct report **ret);

/* The rows' indexes in the order asked for (ties: a fixed order by name,
 * file and line), into order (n_rows entries). */
void report_order(const struct report *r, enum report_sort sort, uint32_t *order);

/* Who calls the function named name ("name_[k]" for a kernel one; a plain
 * name takes the user-space function, else the kernel one): per stack
 * holding it, the frame above its outermost call, so the edges' values
 * add up to its total, recursion counted once.  Returns 0 and the callers
 * in *ret (free its edges), -ENOENT when no row has that name, -ENOMEM. */
int report_callers(const struct report *r, const char *name, struct report_relatives *ret);

/* What it calls: per stack holding it, the frame below its innermost call,
 * or its self when that call is the leaf; edges plus self add up to its
 * total.  Returns as report_callers(). */
int report_callees(const struct report *r, const char *name, struct report_relatives *ret);

/* Where the time goes through the wrappers: from the function with the
 * largest total, up through the callers that wrap it (its caller in at
 * least pass_through of its stacks, passing at least pass_through of their
 * own to it: stacks cut short hold the inner functions and not main, so the
 * largest total is not always the outermost wrapper's), then down through
 * every callee that carries at least pass_through of its caller, to the
 * first function whose time is divided or spent in itself.  Returns 0, that
 * function's row in *ret_row and its callees in *ret_callees (free its
 * edges), and the wrappers passed through, outermost first, in path (at
 * most max_path, their number in *ret_n_path); -ENOENT for an empty
 * report, -ENOMEM. */
int report_dominant(const struct report *r, double pass_through, uint32_t *path, size_t max_path,
		    size_t *ret_n_path, uint32_t *ret_row, struct report_relatives *ret_callees);

/* "function_[k] (file.c:12)" of row (REPORT_ROOT: "(root)"), escaped for a
 * terminal.  NULL on ENOMEM; free() it. */
char *report_row_label(const struct report *r, uint32_t row);

/* Asks perfd for a --format json snapshot of sel (kind NULL: cpu; lines:
 * native frames with file:line) and reads its call tree.  Returns
 * PERFCTL_EXIT_OK with the profile in *ret (profile_free() it) and, when
 * ret_answer is not NULL, the whole answer in *ret_answer (put it); any
 * other exit code after the error has been reported.  A note of perfd's
 * goes to stderr. */
enum perfctl_exit report_fetch(struct ctl_env *env, const struct ctl_selection *sel,
			       const char *kind, bool lines, struct profile **ret,
			       struct json_object **ret_answer);

struct report *report_free(struct report *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct report, report_free)

/* --- shared with the other commands that compute on profiles (diff.c) --- */

struct ctl_env;
struct json_object;

/* Reads the snapshot file at path (profile_read_file()) and says what went
 * wrong as "COMMAND: cannot read PATH: WHY" (code "bad_profile" for a file
 * that is not a readable profile).  Returns PERFCTL_EXIT_OK and *ret, or
 * PERFCTL_EXIT_FAILURE. */
enum perfctl_exit report_read_file(struct ctl_env *env, const char *command, const char *path,
				   const char *kind, struct profile **ret);

/* The options --kind KIND and --top N (0 for all rows), checked: 0 and
 * *ret, or -EINVAL after a usage error naming command. */
#define REPORT_MAX_TOP 1000000
int report_parse_kind(struct ctl_env *env, const char *command, const char *arg,
		      const char **ret);
int report_parse_top(struct ctl_env *env, const char *command, const char *arg, int64_t *ret);

/* A value in p's unit for people: samples as a count, bytes as a size,
 * nanoseconds as a time.  Returns buf. */
char *report_format_value(const struct profile *p, uint64_t v, char buf[static 32]);

/* 100 * part / whole, 0 for an empty whole. */
double report_percent(uint64_t part, uint64_t whole);

/* Adds key: value to o, dropping value when it cannot; false then. */

/* A percentage or a number of points with two decimals, printed as such
 * (never "-0.00"); NULL on ENOMEM. */
struct json_object *report_json_points(double v);

/* Adds the value v as key and, for CPU samples with a period, its time as
 * key_ns (left out should it not fit in 64 bits). */
bool report_json_put_value(const struct profile *p, struct json_object *o, const char *key,
			   uint64_t v);

#endif
