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

/* Writes data to path through path.tmp and rename(), or straight into path
 * when it is an existing device or FIFO.  Returns 0 or -errno; on failure
 * path is untouched and path.tmp removed. */
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

#endif
