/* SPDX-License-Identifier: MIT */
/*
 * outfile.c - see outfile.h.  A file is written to FILE.tmp, synced and
 * renamed over FILE only once complete, so a failed or interrupted write
 * never leaves a half-written FILE (an interrupted one can leave
 * FILE.tmp); a device or FIFO, where rename makes no sense, is written in
 * place.  A file can be written in pieces as they come (ctl_outfile_*: a
 * profile streamed from perfd's socket) with the same promise.
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

int ctl_outfile_open(const char *path, struct ctl_outfile *f)
{
	struct stat st;

	*f = (struct ctl_outfile){ .path = path, .fd = -1 };
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		f->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		return f->fd < 0 ? negative_errno() : 0;
	}
	if (asprintf(&f->tmp, "%s.tmp", path) < 0) {
		f->tmp = NULL;
		return -ENOMEM;
	}
	f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
	if (f->fd < 0) {
		int k = negative_errno();

		free(f->tmp);
		f->tmp = NULL;
		return k;
	}
	return 0;
}

int ctl_outfile_write(struct ctl_outfile *f, const void *data, size_t len)
{
	return write_all(f->fd, data, len);
}

void ctl_outfile_abort(struct ctl_outfile *f)
{
	closep(&f->fd);
	if (f->tmp)
		(void)unlink(f->tmp);
	free(f->tmp);
	f->tmp = NULL;
}

int ctl_outfile_commit(struct ctl_outfile *f)
{
	int k = 0;

	if (f->tmp && fsync(f->fd) < 0)
		k = negative_errno();
	if (k >= 0 && close(TAKE_FD(f->fd)) < 0)
		k = negative_errno();
	if (k >= 0 && f->tmp && rename(f->tmp, f->path) < 0)
		k = negative_errno();
	if (k < 0) {
		ctl_outfile_abort(f);
		return k;
	}
	free(f->tmp);
	f->tmp = NULL;
	return 0;
}

int ctl_write_output(const char *path, const char *data, size_t len)
{
	struct ctl_outfile f;
	int k = ctl_outfile_open(path, &f);

	if (k < 0)
		return k;
	k = ctl_outfile_write(&f, data, len);
	if (k < 0) {
		ctl_outfile_abort(&f);
		return k;
	}
	return ctl_outfile_commit(&f);
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

enum perfctl_exit ctl_output_done(struct ctl_env *env, const char *path, int k)
{
	_cleanup_(json_object_putp) struct json_object *r = NULL;

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

enum perfctl_exit ctl_output(struct ctl_env *env, const char *path, const char *data, size_t len)
{
	return ctl_output_done(env, path, ctl_write_output(path, data, len));
}
