/* SPDX-License-Identifier: MIT */
/* mapsread.c - see mapsread.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "perfd/macro.h"
#include "process/mapsread.h"
#include "process/procfs.h"

static void run(struct offload_job *j)
{
	mapsread_run(mapsread_of(j));
}

static void job_free(struct offload_job *j)
{
	mapsread_free(mapsread_of(j));
}

struct mapsread *mapsread_free(struct mapsread *j)
{
	if (!j)
		return NULL;
	if (j->fd >= 0)
		close(j->fd);
	free(j->buf);
	procmaps_free(j->maps);
	free(j);
	return NULL;
}

/* Reads j->fd into j->buf until end of file or limit bytes in all.
 * Returns 1 at end of file, 0 when limit was reached first, or -errno. */
static int read_upto(struct mapsread *j, size_t limit)
{
	while (j->len < limit) {
		ssize_t n;

		if (j->cap - j->len < 4096 && j->cap < limit + 1) {
			size_t cap = MIN(MAX(j->cap * 2, (size_t)16384), (size_t)limit + 1);
			char *grown = realloc(j->buf, cap);

			if (!grown)
				return -ENOMEM;
			j->buf = grown;
			j->cap = cap;
		}
		n = read(j->fd, j->buf + j->len, MIN(j->cap - 1, limit) - j->len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			return 1;
		j->len += (size_t)n;
	}
	return 0;
}

/* Parses j->buf[0..len) into j->maps. */
static int parse(struct mapsread *j)
{
	_cleanup_fclose_ FILE *f = NULL;

	if (j->len == 0) { /* an exiting process: no mappings, not an error */
		j->maps = calloc(1, sizeof(*j->maps));
		return j->maps ? 0 : -ENOMEM;
	}
	f = fmemopen(j->buf, j->len, "r");
	if (!f)
		return negative_errno();
	return procmaps_parse(f, j->exec_only, &j->maps);
}

/* What the loop reads into: one buffer, not one per read, since every new
 * process's maps are read (a malloc and free of up to 48 KiB each, which
 * a sanitizer's quarantine keeps, grew an ASan daemon by ~100 MiB on a
 * host of heavy process churn).  Only the thread of the loop starts reads. */
static char loop_buf[MAPSREAD_LOOP_BYTES + 1];

int mapsread_start(int dirfd, bool exec_only, size_t loop_bytes, struct procmaps **ret_maps,
		   struct mapsread **ret_job)
{
	struct mapsread *j = calloc(1, sizeof(*j));
	bool scratch = loop_bytes <= MAPSREAD_LOOP_BYTES;
	uint64_t t0 = now_monotonic_ns();
	int r;

	if (!j)
		return -ENOMEM;
	j->job = (struct offload_job){ .run = run, .free = job_free };
	j->exec_only = exec_only;
	if (scratch) {
		j->buf = loop_buf;
		j->cap = sizeof(loop_buf);
	}
	j->fd = procfs_open_file(dirfd, "maps");
	r = j->fd;
	if (r >= 0)
		r = read_upto(j, loop_bytes);
	if (r == 0 && scratch) { /* the lane reads on into a buffer of the job's */
		char *own = malloc(j->len + 16384);

		if (own) {
			memcpy(own, j->buf, j->len);
			j->buf = own;
			j->cap = j->len + 16384;
		} else {
			r = -ENOMEM;
		}
	}
	if (r == 0) {
		j->read_ns = now_monotonic_ns() - t0;
		*ret_maps = NULL;
		*ret_job = j;
		return 0;
	}
	if (r > 0)
		r = parse(j);
	if (r >= 0) {
		*ret_maps = TAKE_PTR(j->maps);
		*ret_job = NULL;
	}
	if (j->buf == loop_buf)
		j->buf = NULL;
	mapsread_free(j);
	return r < 0 ? r : 0;
}

void mapsread_run(struct mapsread *j)
{
	uint64_t t0 = now_monotonic_ns();
	int r = read_upto(j, MAPSREAD_MAX_BYTES);

	if (r == 0) {
		/* the cap: keep the whole lines before it */
		char *nl = memrchr(j->buf, '\n', j->len);

		j->len = nl ? (size_t)(nl - j->buf) + 1 : 0;
		j->truncated = true;
	}
	close(j->fd);
	j->fd = -1;
	j->error = r < 0 ? r : parse(j);
	free(j->buf);
	j->buf = NULL;
	j->read_ns += now_monotonic_ns() - t0;
}
