/* SPDX-License-Identifier: MIT */
/* debugsearch.c - see debugsearch.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "symbols/debuginfo.h"
#include "symbols/debugsearch.h"

static void run(struct offload_job *j)
{
	debugsearch_run(debugsearch_of(j));
}

static void job_free(struct offload_job *j)
{
	debugsearch_free(debugsearch_of(j));
}

struct debugsearch *debugsearch_free(struct debugsearch *q)
{
	if (!q)
		return NULL;
	if (q->fd >= 0)
		close(q->fd);
	if (q->debug_fd >= 0)
		close(q->debug_fd);
	free(q->image);
	free(q->path);
	free(q->root);
	free(q->debug_dir);
	free(q);
	return NULL;
}

int debugsearch_new(uint64_t key, int fd, const char *path, const char *root,
		    const char *debug_dir, struct debugsearch **ret)
{
	struct debugsearch *q = calloc(1, sizeof(*q));
	int r;

	if (!q)
		return -ENOMEM;
	/* big: a lane of the symbolizer's is kept for JIT maps (jitread.h) */
	q->job = (struct offload_job){ .key = key, .big = true, .run = run, .free = job_free };
	q->debug_fd = -ENOENT;
	q->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (q->fd < 0) {
		r = negative_errno();
		debugsearch_free(q);
		return r;
	}
	q->path = path ? strdup(path) : NULL;
	q->root = root ? strdup(root) : NULL;
	q->debug_dir = debug_dir ? strdup(debug_dir) : NULL;
	if ((path && !q->path) || (root && !q->root) || (debug_dir && !q->debug_dir)) {
		debugsearch_free(q);
		return -ENOMEM;
	}
	*ret = q;
	return 0;
}

void debugsearch_run(struct debugsearch *q)
{
	q->debug_fd = debuginfo_find(q->fd, q->path, q->root, q->debug_dir, DEBUGINFO_BY_LINK, NULL,
				     &q->refused);
	if (q->debug_fd < 0)
		(void)debuginfo_minidebuginfo(q->fd, &q->image, &q->image_size);
	close(q->fd);
	q->fd = -1;
}
