/* SPDX-License-Identifier: MIT */
/*
 * report.h - a profile's stacks summed per function, as `perfctl report`
 * prints them: self and total (inclusive) value of each function, and who
 * calls a function and what it calls, with their shares of it.  The
 * computation is the analysis module's (analysis/functions.h), the one
 * perfd's top runs too; the commands built on it share the rest here:
 * report_fetch() gets that profile from perfd (`report`, `diagnose`),
 * report_read_file() from a file (`report`, `diff`), report_row_label()
 * names a row, and the JSON and value helpers at the end print it.
 */
#ifndef PERFCTL_REPORT_H
#define PERFCTL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/functions.h"
#include "perfctl.h"
#include "perfd/macro.h"
#include "profile_read.h"

struct ctl_selection;
struct json_object;

/* "function_[k] (file.c:12)" of row (REPORT_ROOT: "(root)"), escaped for a
 * terminal.  NULL on ENOMEM; free() it. */
char *report_row_label(const struct report *r, uint32_t row);

/* What report_fetch() asks for besides the profile. */
enum report_fetch_flags {
	REPORT_FETCH_LINES = 1 << 0,   /* native frames with file:line */
	REPORT_FETCH_THREADS = 1 << 1, /* stacks rooted at "[thread TID COMM]" */
};

/* Asks perfd for a --format json snapshot of sel (kind NULL: cpu; flags:
 * enum report_fetch_flags) and reads its call tree.  Returns
 * PERFCTL_EXIT_OK with the profile in *ret (profile_free() it) and, when
 * ret_answer is not NULL, the whole answer in *ret_answer (put it); any
 * other exit code after the error has been reported.  A note of perfd's
 * goes to stderr. */
enum perfctl_exit report_fetch(struct ctl_env *env, const struct ctl_selection *sel,
			       const char *kind, unsigned flags, struct profile **ret,
			       struct json_object **ret_answer);

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

/* Adds key: value to o, dropping value when it cannot; false then. */

/* A percentage or a number of points with two decimals, printed as such
 * (never "-0.00"); NULL on ENOMEM. */
struct json_object *report_json_points(double v);

/* Adds the value v as key and, for CPU samples with a period, its time as
 * key_ns (left out should it not fit in 64 bits). */
bool report_json_put_value(const struct profile *p, struct json_object *o, const char *key,
			   uint64_t v);

#endif
