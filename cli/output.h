/* SPDX-License-Identifier: MIT */
/*
 * output.h - how perfctl's subcommands talk to the user: errors in the
 * right form for the mode, JSON on stdout, and tolerant accessors for the
 * fields of an answer that human output shows.
 */
#ifndef PERFCTL_OUTPUT_H
#define PERFCTL_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "format.h"
#include "perfd/macro.h"
#include "perfctl.h"

/* json_object_putp(), for _cleanup_(json_object_putp). */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct json_object, json_object_put)

/* Error codes perfctl itself puts in JSON errors, beside the daemon's
 * PERFD_ERR_* codes which pass through unchanged. */
#define CTL_ERR_USAGE "usage"
#define CTL_ERR_CONNECT "cannot_connect"
#define CTL_ERR_PROTOCOL "protocol_error" /* the daemon's answer is unusable */
#define CTL_ERR_IO "io_error"
#define CTL_ERR_BAD_PROFILE "bad_profile"      /* a file that is not a readable profile */
#define CTL_ERR_NO_FUNCTION "no_such_function" /* report --callers/--callees */
#define CTL_ERR_KIND_MISMATCH "kind_mismatch"  /* diff of profiles of two kinds */

/* Reports an error: "perfctl: MESSAGE" on stderr, or in JSON mode
 * {"ok":false,"error":{"code":CODE,"message":MESSAGE}} on stdout.  Control
 * bytes in MESSAGE are escaped in human mode. */
_printf_(3, 4) void ctl_error(const struct ctl_env *env, const char *code,
			      const char *fmt, ...);

/* Handles what getopt_long() returned for an option every subcommand takes
 * (--json as 'j', --socket as 'S'), or reports an option it refused (it
 * must run with opterr = 0 and an optstring starting with ':').  Returns 0
 * when handled, -EINVAL after reporting a usage error. */
int ctl_common_option(struct ctl_env *env, const char *command, int c, char **argv);

/* Prints "perfctl: PREFIX: TEXT" on stderr with TEXT escaped (text from the
 * daemon may hold any byte).  prefix may be NULL. */
void ctl_message(const char *prefix, const char *text, size_t len);

/* Writes obj to f as one line of plain JSON.  Returns 0 or -errno. */
int ctl_print_json(FILE *f, struct json_object *obj);

/* Prints perfd's answer (or any object) as one line of JSON on stdout.
 * Returns PERFCTL_EXIT_OK, or PERFCTL_EXIT_FAILURE after reporting ENOMEM;
 * a write error is left for main(), which checks stdout before exiting. */
enum perfctl_exit ctl_print_answer(const struct ctl_env *env, struct json_object *answer);

/* Looks up a dotted path ("samples.lost.ringbuf_full") below root.  Returns
 * the value (owned by root) or NULL when a step is missing or not an object. */
struct json_object *ctl_json_path(struct json_object *root, const char *path);

/* Adds key: value to o, or drops value (NULL allowed: out of memory) when
 * it cannot.  Returns false then, so a document is built as one chain of
 * &&s. */
bool ctl_json_put(struct json_object *o, const char *key, struct json_object *value);

/* The number at path as an integer (a double is truncated).  Returns false
 * when it is missing or not a number. */
bool ctl_json_int(struct json_object *root, const char *path, int64_t *ret);

/* The number at path as a double.  Returns false when missing or not a
 * number. */
bool ctl_json_double(struct json_object *root, const char *path, double *ret);

/* The string at path, escaped for a terminal; "-" when missing or not a
 * string.  NULL only on ENOMEM.  free() it. */
char *ctl_json_string_escaped(struct json_object *root, const char *path);

/* The integer at path in decimal, or "-" when missing.  Returns buf. */
#define CTL_COUNT_MAX 24
char *ctl_json_count(struct json_object *root, const char *path, char buf[static CTL_COUNT_MAX]);

/* The byte count at path as ctl_format_size writes it, or "-" when it is
 * missing, not a number or negative.  Returns buf. */
char *ctl_json_size(struct json_object *root, const char *path, char buf[static CTL_SIZE_MAX]);

/* The Unix time at path as ctl_format_clock writes it ("-" when missing).
 * Returns buf. */
char *ctl_json_clock(struct json_object *root, const char *path, char buf[static CTL_CLOCK_MAX]);

#endif
