/* SPDX-License-Identifier: MIT */
/*
 * outfile.h - writing what a command made to the file of its -o FILE
 * (`snapshot`'s profiles, `diff`'s flame graphs): whole or not at all.
 */
#ifndef PERFCTL_OUTFILE_H
#define PERFCTL_OUTFILE_H

#include <stddef.h>

#include "perfctl.h"

/* Checks early that path's directory can take a new file (before a long
 * snapshot is asked for).  Returns 0 or -errno. */
int ctl_check_output(const char *path);

/* A file being written in pieces (a profile streamed from the socket):
 * into path.tmp, renamed over path only by ctl_outfile_commit(), or
 * straight into path when it is an existing device or FIFO. */
struct ctl_outfile {
	const char *path;
	char *tmp; /* NULL: written in place */
	int fd;
};

/* Opens f for path.  Returns 0 or -errno. */
int ctl_outfile_open(const char *path, struct ctl_outfile *f);
/* Appends data.  Returns 0 or -errno. */
int ctl_outfile_write(struct ctl_outfile *f, const void *data, size_t len);
/* Syncs f and renames it over its path.  Returns 0 or -errno; on failure
 * (and with ctl_outfile_abort(), for a write that did not finish) path is
 * untouched and path.tmp removed.  Either one ends f. */
int ctl_outfile_commit(struct ctl_outfile *f);
void ctl_outfile_abort(struct ctl_outfile *f);

/* Writes data to path whole or not at all (ctl_outfile_*).  Returns 0 or
 * -errno. */
int ctl_write_output(const char *path, const char *data, size_t len);

/* -o's argument, checked: 0 and *ret, or -EINVAL after a usage error
 * naming command. */
int ctl_output_option(struct ctl_env *env, const char *command, const char *arg,
		      const char **ret);

/* Writes data to path (ctl_write_output()) and then, with --json, prints
 * the receipt {"ok":true,"output":PATH} so that stdout still gets its one
 * JSON object.  Returns PERFCTL_EXIT_OK, or PERFCTL_EXIT_FAILURE after
 * saying "cannot write PATH: WHY". */
enum perfctl_exit ctl_output(struct ctl_env *env, const char *path, const char *data, size_t len);
/* The receipt alone, for a file written with ctl_outfile_*, or the
 * error k < 0 as ctl_output() says it. */
enum perfctl_exit ctl_output_done(struct ctl_env *env, const char *path, int k);

#endif
