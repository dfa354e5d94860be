/* SPDX-License-Identifier: MIT */
/*
 * files.c - the files exporter: each profile a .pb.gz file in output-dir,
 * written so that a crash never leaves a half-written file under a final
 * name, and old ones removed by age and by the total size.
 *
 * A file is written under a temporary name in the same directory
 * (".perfd-tmp-NAME", O_EXCL, mode 0640: profiles name every process on
 * the host, so not for every user), fsync'ed, renamed to NAME (atomic
 * within one file system), and the directory fsync'ed so the rename
 * survives a power cut.  A failed write (a full or read-only disk, the
 * directory gone) removes the temporary file and says -EAGAIN: the worker
 * retries with backoff, status shows the error, the daemon goes on.
 *
 * Pruning runs on the worker thread (the sink's tidy()) when its queue ran
 * empty and before each retry of a failed write, so that a disk perfd's
 * own files filled gets room again (the queue never runs empty while its
 * head waits), at most once a second: one pass over the directory,
 * looking only at names this exporter writes (ending ".pb.gz", and
 * temporary files a crash left, older than a minute); those older than
 * output-max-age go, then the oldest until the rest fit output-max-bytes.
 * Cost: one readdir and a stat per file, a sort of the ones kept.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "export/sinks.h"
#include "perfd/macro.h"

#define TMP_PREFIX ".perfd-tmp-"
#define SUFFIX ".pb.gz"
#define STALE_TMP_S 60
#define PRUNE_EVERY_NS NSEC_PER_SEC
#define MAX_FILES_SEEN 1000000

struct files_target {
	char *dir;
	uint64_t max_age_s, max_bytes;
	uint64_t pruned_ns;
};

static void files_free_target(void *t)
{
	struct files_target *f = t;

	if (f) {
		free(f->dir);
		free(f);
	}
}

int files_target_new(const struct export_opts *o, void **ret)
{
	struct files_target *f = calloc(1, sizeof(*f));

	if (!f || !(f->dir = strdup(o->output_dir))) {
		free(f);
		return -ENOMEM;
	}
	f->max_age_s = o->output_max_age_s;
	f->max_bytes = o->output_max_bytes;
	*ret = f;
	return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int files_send(void *target, const struct export_item *it, const atomic_bool *stop,
		      char *err, size_t len)
{
	struct files_target *f = target;
	_cleanup_close_ int dirfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int fd = -1;
	char tmp[NAME_MAX + 1];
	const char *step;
	int r;

	if (dirfd < 0) {
		r = -errno;
		snprintf(err, len, "cannot open %s: %s", f->dir, strerror(-r));
		return -EAGAIN;
	}
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s", it->file_name);
	step = "create";
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (fd < 0 && errno == EEXIST) {
		/* a crash's leftover of this very name */
		(void)unlinkat(dirfd, tmp, 0);
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
	}
	if (fd < 0) {
		r = -errno;
		goto fail;
	}
	step = "write";
	if ((r = write_all(fd, it->data, it->len)) < 0)
		goto fail_unlink;
	step = "fsync";
	if (fsync(fd) < 0 || close(TAKE_FD(fd)) < 0) {
		r = -errno;
		goto fail_unlink;
	}
	step = "rename";
	if (renameat(dirfd, tmp, dirfd, it->file_name) < 0) {
		r = -errno;
		goto fail_unlink;
	}
	/* the rename itself, to disk; the file is complete either way */
	(void)fsync(dirfd);
	return 0;
fail_unlink:
	(void)unlinkat(dirfd, tmp, 0);
fail:
	snprintf(err, len, "cannot %s %s/%s: %s", step, f->dir, step[0] == 'r' ? it->file_name : tmp,
		 strerror(-r));
	/* a full, read-only or vanished disk may come back: try again */
	return -EAGAIN;
}

struct seen {
	char *name;
	uint64_t size;
	time_t mtime;
};

static int by_age(const void *a, const void *b)
{
	const struct seen *x = a, *y = b;

	return x->mtime != y->mtime ? (x->mtime < y->mtime ? -1 : 1) : strcmp(x->name, y->name);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

static void files_prune(void *target)
{
	struct files_target *f = target;
	uint64_t now_ns = now_monotonic_ns(), total = 0;
	struct seen *seen = NULL;
	size_t n = 0, cap = 0;
	time_t now = time(NULL);
	struct dirent *de;
	DIR *d;

	if (f->pruned_ns && now_ns - f->pruned_ns < PRUNE_EVERY_NS)
		return;
	f->pruned_ns = now_ns;
	d = opendir(f->dir);
	if (!d)
		return;
	while ((de = readdir(d)) && n < MAX_FILES_SEEN) {
		bool tmp = !strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX));
		struct stat st;

		if ((!tmp && !ends_with(de->d_name, SUFFIX)) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (tmp) {
			if (now - st.st_mtime > STALE_TMP_S)
				(void)unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (f->max_age_s && now - st.st_mtime > (time_t)f->max_age_s) {
			(void)unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (n == cap) {
			size_t c = MAX(2 * cap, (size_t)64);
			struct seen *q = realloc(seen, c * sizeof(*q));

			if (!q)
				break;
			seen = q;
			cap = c;
		}
		if (!(seen[n].name = strdup(de->d_name)))
			break;
		seen[n].size = (uint64_t)st.st_size;
		seen[n].mtime = st.st_mtime;
		total += seen[n].size;
		n++;
	}
	qsort_safe(seen, n, sizeof(*seen), by_age);
	for (size_t i = 0; i < n; i++) {
		if (f->max_bytes && total > f->max_bytes &&
		    unlinkat(dirfd(d), seen[i].name, 0) == 0)
			total -= seen[i].size;
		free(seen[i].name);
	}
	free(seen);
	closedir(d);
}

const struct export_sink_ops files_sink_ops = {
	.name = "files",
	.send = files_send,
	.tidy = files_prune,
	.free_target = files_free_target,
};
