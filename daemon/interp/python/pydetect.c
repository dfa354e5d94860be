/* SPDX-License-Identifier: MIT */
/* pydetect.c - see pydetect.h. */
#include "interp/python/pydetect.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "process/procfs.h"

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

bool pydetect_python_named(const char *path)
{
	const char *base = base_name(path);

	return strncmp(base, "python", 6) == 0 || strncmp(base, "libpython", 9) == 0;
}

bool pydetect_libc_named(const char *path)
{
	const char *base = base_name(path);

	return strncmp(base, "libc.so", 7) == 0 || strncmp(base, "libc-", 5) == 0;
}

static void run(struct offload_job *j)
{
	pydetect_run(pydetect_of(j));
}

static void job_free(struct offload_job *j)
{
	pydetect_free(pydetect_of(j));
}

struct pydetect *pydetect_free(struct pydetect *d)
{
	if (!d)
		return NULL;
	for (size_t i = 0; i < d->maps.n; i++)
		free(d->maps.maps[i].path);
	free(d->maps.maps);
	free(d);
	return NULL;
}

int pydetect_new(uint32_t pid, uint64_t start_time_ns, const struct procmaps *maps,
		 struct pydetect **ret)
{
	struct pydetect *d = calloc(1, sizeof(*d));
	const char *first = NULL;

	if (!d)
		return -ENOMEM;
	d->job = (struct offload_job){ .key = pid, .run = run, .free = job_free };
	d->pid = pid;
	d->start_time_ns = start_time_ns;
	d->r = d->tsd_r = -ENOENT;
	d->maps.maps = calloc(maps->n ? maps->n : 1, sizeof(*d->maps.maps));
	if (!d->maps.maps) {
		pydetect_free(d);
		return -ENOMEM;
	}
	for (size_t i = 0; i < maps->n; i++) {
		const struct procmap *m = &maps->maps[i];
		struct procmap *copy;

		if (m->path[0] != '/')
			continue;
		/* pyruntime_detect's first file: not a deleted one */
		if (!first && !strstr(m->path, " (deleted)"))
			first = m->path;
		if ((!first || strcmp(m->path, first) != 0) && !pydetect_python_named(m->path) &&
		    !pydetect_libc_named(m->path))
			continue;
		copy = &d->maps.maps[d->maps.n];
		*copy = *m;
		copy->path = strdup(m->path);
		if (!copy->path) {
			pydetect_free(d);
			return -ENOMEM;
		}
		d->maps.n++;
	}
	*ret = d;
	return 0;
}

/* The thread-data layout from the first libc the process maps that tells
 * it: 0, or -errno of the last that did not (-ENOENT: none mapped). */
static int read_tsd(struct pydetect *d)
{
	int r = -ENOENT;

	for (size_t i = 0; i < d->maps.n; i++) {
		const struct procmap *m = &d->maps.maps[i];
		_cleanup_close_ int fd = -1;
		struct stat st;

		if (!pydetect_libc_named(m->path) || (i && strcmp(m->path, d->maps.maps[i - 1].path) == 0))
			continue;
		fd = procfs_open_mapped_file((pid_t)d->pid, m->start, m->end, m->path,
					     makedev(m->dev_major, m->dev_minor), m->inode, &st);
		if (fd < 0) {
			r = fd;
			continue;
		}
		r = pthread_tsd_read(fd, &d->tsd);
		if (r == 0)
			break;
	}
	return r;
}

void pydetect_run(struct pydetect *d)
{
	d->r = pyruntime_detect((pid_t)d->pid, &d->maps, &d->rt);
	if (d->r == 0)
		d->tsd_r = read_tsd(d);
	/* a file that could not be opened says nothing about the file when
	 * the process is gone */
	d->alive = kill((pid_t)d->pid, 0) == 0;
}
