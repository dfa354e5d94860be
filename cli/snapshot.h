/* SPDX-License-Identifier: MIT */
/*
 * snapshot.h - what `snapshot` and `record` share: the options that say
 * how a profile is made and written (--kind, --format, -o, --lines,
 * --no-lines, --threads), the request, and writing the answer out, so the
 * two read, check and write a profile the same way.
 */
#ifndef PERFCTL_SNAPSHOT_H
#define PERFCTL_SNAPSHOT_H

#include <stdbool.h>

#include "perfctl.h"
#include "selection.h"

struct json_object;

struct ctl_snapshot_opts {
	struct ctl_selection sel;
	const char *kind;
	const char *format;   /* NULL: by -o's extension, else folded */
	bool lines;           /* native frames with file:line */
	bool no_python_lines; /* Python frames per function, not per line */
	bool threads;         /* stacks rooted at their thread */
	const char *output;   /* NULL: stdout */
	bool stop_is_end;     /* record: a stopped snapshot is no news */
};

/* record's options (ctl_snapshot_parse() without the selection). */
extern const struct option ctl_record_options[];
extern const char ctl_record_shortopts[];

/* Parses command's options into o: the output options, --json, --socket
 * and, when selection, the selection's (ctl_selection_option()); without
 * it, parsing stops at the first word that is not an option (record's
 * CMD).  Returns the index of the first word left, or -EINVAL after a
 * usage error. */
int ctl_snapshot_parse(struct ctl_env *env, const char *command, int argc, char **argv,
		       bool selection, struct ctl_snapshot_opts *o);

/* Before asking perfd: picks the format (by -o's extension, else folded),
 * refuses a binary one for a terminal (usage error) and checks that -o's
 * directory takes a file.  Returns PERFCTL_EXIT_OK or the exit code after
 * reporting. */
enum perfctl_exit ctl_snapshot_prepare(struct ctl_env *env, const char *command,
				       struct ctl_snapshot_opts *o);

/* The "snapshot" request for o; NULL on ENOMEM. */
struct json_object *ctl_snapshot_request(const struct ctl_snapshot_opts *o);

/* Writes perfd's snapshot answer resp out as o asks (the profile to stdout
 * or -o FILE, or the answer with --json), then its note and a one-line
 * summary to stderr; a binary profile's frame is read from fd, the
 * connection resp came on.  Returns the exit code. */
enum perfctl_exit ctl_snapshot_write(struct ctl_env *env, int fd, struct json_object *resp,
				     const struct ctl_snapshot_opts *o);

#endif
