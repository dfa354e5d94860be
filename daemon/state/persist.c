/* SPDX-License-Identifier: MIT */
/* persist.c - see persist.h for the design and the records, and
 * persist_internal.h for how the store on disk is split: here, the state
 * directory opened, locked and its segments listed, and the statistics. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/u64map.h"
#include "perfd/macro.h"
#include "state/statefile.h"
#include "state/writer.h"
#include "state/persist_internal.h"

/* ---- the directory ---- */

int persist_open(const struct persist_opts *o, struct persist **ret)
{
	_cleanup_free_ struct persist *ps = calloc(1, sizeof(*ps));
	struct stat st;
	int r;

	if (!ps)
		return -ENOMEM;
	ps->dirfd = ps->lockfd = -1;
	snprintf(ps->dir, sizeof(ps->dir), "%s", o->dir);
	ps->max_bytes = o->max_bytes ? o->max_bytes : PERSIST_DEFAULT_MAX_BYTES;
	ps->retention_s = o->retention_s;
	/* the segments that can hold windows within the retention, the one
	 * being written included, fit in max_bytes together */
	ps->segment_budget = ps->max_bytes / (MAX(ps->retention_s / PERSIST_SEGMENT_S, 1) + 1);
	r = statefile_boot_id(ps->boot_id);
	if (r < 0)
		return r;
	if (mkdir(o->dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	ps->dirfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ps->dirfd < 0)
		return -errno;
	r = -EPERM;
	if (fstat(ps->dirfd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022))
		goto fail;
	ps->lockfd = openat(ps->dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ps->lockfd < 0) {
		r = -errno;
		goto fail;
	}
	if (flock(ps->lockfd, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto fail;
	}
	r = o->read_only ? 0 : state_writer_new(ps->dirfd, PERSIST_MAX_QUEUED_BYTES, &ps->writer);
	if (r < 0)
		goto fail;
	ps->next_seq = 1;
	*ret = ps;
	ps = NULL;
	return 0;
fail:
	if (ps->lockfd >= 0)
		close(ps->lockfd);
	close(ps->dirfd);
	return r;
}

struct persist *persist_free(struct persist *ps)
{
	if (!ps)
		return NULL;
	state_writer_free(ps->writer);
	u64map_done(&ps->frames_written);
	u64map_done(&ps->strings_written);
	u64map_done(&ps->owner_bytes);
	stored_done(&ps->stored);
	free(ps->segments);
	close(ps->lockfd);
	close(ps->dirfd);
	free(ps);
	return NULL;
}

const char *persist_dir(const struct persist *ps)
{
	return ps->dir;
}

struct segment *persist_segment_add(struct persist *ps, uint64_t seq, uint64_t bytes)
{
	struct segment *s;

	s = realloc(ps->segments, (ps->n_segments + 1) * sizeof(*s));
	if (!s)
		return NULL;
	ps->segments = s;
	s = &ps->segments[ps->n_segments++];
	*s = (struct segment){ .seq = seq, .bytes = bytes };
	return s;
}

void persist_move_aside(struct persist *ps, const char *name, const char *why, const char *what)
{
	char to[NAME_MAX + 1];

	snprintf(to, sizeof(to), "%s.%s", name, why);
	if (renameat(ps->dirfd, name, ps->dirfd, to) < 0)
		(void)unlinkat(ps->dirfd, name, 0);
	ps->stats.files_moved_aside++;
	log_warning("State file %s/%s %s; moved aside to %s/%s.", ps->dir, name, what, ps->dir, to);
}


void persist_get_stats(struct persist *ps, struct persist_stats *ret)
{
	struct state_writer_stats ws;

	*ret = ps->stats;
	ret->segments = ps->n_segments;
	ret->disk_bytes = 0;
	for (size_t i = 0; i < ps->n_segments; i++)
		ret->disk_bytes += ps->segments[i].bytes;
	ret->restored_frames = ps->stored.n_frames;
	ret->restored_bytes = stored_memory(&ps->stored);
	if (!ps->writer)
		return;
	state_writer_get_stats(ps->writer, &ws);
	ret->bytes_written = ws.bytes_written;
	ret->syncs = ws.syncs;
	ret->write_errors = ws.write_errors;
	ret->appends_refused = ws.refused;
	ret->last_write_error = ws.last_error;
}
