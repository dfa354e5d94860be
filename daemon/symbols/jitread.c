/* SPDX-License-Identifier: MIT */
/* jitread.c - see jitread.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "symbols/jitdump.h"
#include "symbols/jitread.h"
#include "symbols/perfmap.h"

static void run(struct offload_job *j)
{
	jitread_run(jitread_of(j));
}

static void job_free(struct offload_job *j)
{
	jitread_free(jitread_of(j));
}

bool jitread_is(const struct offload_job *j)
{
	return j->run == run;
}

struct jitread *jitread_free(struct jitread *j)
{
	if (!j)
		return NULL;
	if (j->fd >= 0)
		close(j->fd);
	perfmap_free(j->map);
	free(j);
	return NULL;
}

int jitread_new(uint64_t key, int fd, const struct jitread_want *want, struct jitread **ret)
{
	struct jitread *j = calloc(1, sizeof(*j));
	int r;

	if (!j)
		return -ENOMEM;
	j->job = (struct offload_job){ .key = key, .run = run, .free = job_free };
	j->want = *want;
	j->error = -EAGAIN;
	j->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (j->fd < 0) {
		r = negative_errno();
		jitread_free(j);
		return r;
	}
	*ret = j;
	return 0;
}

/* Whether the perf map on fd has more lines than PERFMAP_MAX_ENTRIES or
 * more than PERFMAP_MAX_BYTES: counted before the parse, which would
 * otherwise hold up to the caps' memory (~100 MiB) before refusing it.
 * Returns 1 when it does, 0, or -errno. */
static int too_many_lines(int fd)
{
	char buf[65536];
	uint64_t bytes = 0;
	size_t lines = 0;

	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)bytes);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return negative_errno();
		if (n == 0)
			return 0;
		bytes += (uint64_t)n;
		for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + n - p))); p++)
			lines++;
		if (bytes > PERFMAP_MAX_BYTES || lines > PERFMAP_MAX_ENTRIES)
			return 1;
	}
}

/* Whether the map on fd is to be parsed: j->error set when not. */
static bool wanted(struct jitread *j, int fd)
{
	struct stat st;
	int r;

	if (fstat(fd, &st) < 0) {
		j->error = negative_errno();
		return false;
	}
	j->size = st.st_size;
	if (st.st_size == j->want.parsed_size || st.st_size == j->want.refused_size) {
		j->unchanged = true;
		j->error = 0;
		return false;
	}
	r = procfs_check_fd(fd, &j->want.rules);
	/* a file bigger than the whole cache is refused unread; parsed, a
	 * perf map takes more than its file's bytes (a jitdump, with its
	 * code, less), and one past the module's room is refused after the
	 * parse (symloads.c) */
	if (r >= 0 && st.st_size > j->want.max_size)
		r = -EFBIG;
	if (r < 0) {
		j->refused = true;
		j->error = r;
		return false;
	}
	return true;
}

void jitread_run(struct jitread *j)
{
	_cleanup_fclose_ FILE *f = NULL;
	uint8_t head[4];
	int fd = j->fd;

	j->fd = -1;
	if (!wanted(j, fd)) {
		close(fd);
		return;
	}
	f = fdopen(fd, "re");
	if (!f) {
		j->error = negative_errno();
		close(fd);
		return;
	}
	/* the dup shares its offset with the symbolizer's descriptor, which
	 * nothing else reads from: pread for the magic, then from the start */
	if (fseeko(f, 0, SEEK_SET) < 0) {
		j->error = negative_errno();
		return;
	}
	/* told by its content: a jitdump starts with its magic */
	if (pread(fd, head, sizeof(head), 0) == (ssize_t)sizeof(head) && jitdump_is(head, sizeof(head)))
		j->error = jitdump_parse(f, &j->map, NULL);
	else if ((j->error = too_many_lines(fd)) == 0)
		j->error = perfmap_parse(f, &j->map, NULL);
	else if (j->error > 0)
		j->error = -EFBIG;
}
