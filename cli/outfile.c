/* SPDX-License-Identifier: MIT */
/*
 * outfile.c - see outfile.h.  A file is written to FILE.tmp, synced and
 * renamed over FILE only once complete, so a failed or interrupted write
 * never leaves a half-written FILE (an interrupted one can leave
 * FILE.tmp); a device or FIFO, where rename makes no sense, is written in
 * place.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "output.h"
#include "perfd/macro.h"

static int write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

int ctl_check_output(const char *path)
{
	_cleanup_free_ char *copy = strdup(path);
	struct stat st;

	if (!copy)
		return -ENOMEM;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		/* A device or FIFO is written in place, see ctl_write_output(). */
		if (!S_ISREG(st.st_mode))
			return 0;
	}
	if (access(dirname(copy), W_OK | X_OK) < 0)
		return negative_errno();
	return 0;
}

int ctl_write_output(const char *path, const char *data, size_t len)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -1;
	struct stat st;
	int k;

	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			return negative_errno();
		k = write_all(fd, data, len);
		if (k < 0)
			return k;
		return close(TAKE_FD(fd)) < 0 ? negative_errno() : 0;
	}

	if (asprintf(&tmp, "%s.tmp", path) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
	if (fd < 0)
		return negative_errno();

	k = write_all(fd, data, len);
	if (k >= 0 && fsync(fd) < 0)
		k = negative_errno();
	if (k >= 0 && close(TAKE_FD(fd)) < 0)
		k = negative_errno();
	if (k >= 0 && rename(tmp, path) < 0)
		k = negative_errno();
	if (k < 0)
		(void)unlink(tmp);
	return k;
}

int ctl_output_option(struct ctl_env *env, const char *command, const char *arg,
		      const char **ret)
{
	if (!*arg) {
		ctl_error(env, CTL_ERR_USAGE, "%s: -o needs a file name", command);
		return -EINVAL;
	}
	*ret = arg;
	return 0;
}

enum perfctl_exit ctl_output(struct ctl_env *env, const char *path, const char *data, size_t len)
{
	_cleanup_(json_object_putp) struct json_object *r = NULL;
	int k = ctl_write_output(path, data, len);

	if (k < 0) {
		ctl_error(env, CTL_ERR_IO, "cannot write %s: %s", path, strerror(-k));
		return PERFCTL_EXIT_FAILURE;
	}
	if (!env->json)
		return PERFCTL_EXIT_OK;
	r = json_object_new_object();
	if (!r || !ctl_json_put(r, "ok", json_object_new_boolean(1)) ||
	    !ctl_json_put(r, "output", json_object_new_string(path))) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	return ctl_print_answer(env, r);
}
