/* SPDX-License-Identifier: MIT */
/* writer.c - see writer.h: the jobs of an ordered offload lane. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/offload.h"
#include "base/clock.h"
#include "perfd/macro.h"
#include "state/writer.h"

struct job {
	struct offload_job job; /* first: the lane's part */
	struct state_writer *w;
	uint64_t seq;
	bool remove;
	bool sync; /* no bytes: what was appended goes to disk now */
	struct sbuf data;
};

struct state_writer {
	int dirfd;
	struct offload *lane;
	pthread_mutex_t lock; /* for what the loop reads too: */
	uint64_t broken_seq;  /* a segment whose write failed, 0: none */
	struct state_writer_stats stats;
	/* the lane's: the segment open for appending, how much of it is
	 * whole, and whether it was appended to since the last sync */
	uint64_t open_seq;
	int open_fd;
	off_t open_len;
	bool appended;
	uint64_t synced_ns; /* when what was appended last went to disk */
};

void state_segment_name(uint64_t seq, char *buf, size_t size)
{
	snprintf(buf, size, "segment-%016" PRIx64 ".perfd", seq);
}

/* On the lane: what was appended to the open segment goes to disk. */
static void sync_open(struct state_writer *w)
{
	if (!w->appended || w->open_fd < 0)
		return;
	w->appended = false;
	w->synced_ns = now_monotonic_ns();
	(void)fdatasync(w->open_fd);
	pthread_mutex_lock(&w->lock);
	w->stats.syncs++;
	pthread_mutex_unlock(&w->lock);
}

static void close_open(struct state_writer *w)
{
	sync_open(w); /* a segment left is whole on disk */
	if (w->open_fd >= 0)
		close(w->open_fd);
	w->open_fd = -1;
	w->open_seq = 0;
}

/* Does one job; returns -errno of a failed append. */
static int do_job(struct state_writer *w, struct job *j)
{
	char name[64];
	size_t done = 0;

	if (j->sync) {
		sync_open(w);
		return 0;
	}
	state_segment_name(j->seq, name, sizeof(name));
	if (j->remove) {
		if (w->open_seq == j->seq) {
			w->appended = false; /* going: nothing to sync */
			close_open(w);
		}
		if (unlinkat(w->dirfd, name, 0) < 0 && errno != ENOENT)
			return -errno;
		return 0;
	}
	if (w->open_seq != j->seq) {
		close_open(w);
		w->open_fd = openat(w->dirfd, name,
				    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (w->open_fd < 0)
			return -errno;
		w->open_seq = j->seq;
		w->open_len = lseek(w->open_fd, 0, SEEK_END);
		(void)fsync(w->dirfd); /* the new name, before what it holds counts */
	}
	while (done < j->data.len) {
		ssize_t n = write(w->open_fd, j->data.data + done, j->data.len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int r = n < 0 ? -errno : -EIO;

			/* back to the last whole record; if that fails too,
			 * the tail stays torn, which a reader drops
			 * (statefile.h): the write's error is the one to
			 * return */
			(void)!ftruncate(w->open_fd, w->open_len);
			return r;
		}
		done += (size_t)n;
	}
	w->open_len += (off_t)done;
	return 0;
}

static struct job *job_of(struct offload_job *j)
{
	return (struct job *)j;
}

static void job_free(struct offload_job *oj)
{
	struct job *j = job_of(oj);

	sbuf_done(&j->data);
	free(j);
}

/* On the lane: one job, and what became of it in the stats. */
static void job_run(struct offload_job *oj)
{
	struct job *j = job_of(oj);
	struct state_writer *w = j->w;
	bool skip;
	int r = 0;

	pthread_mutex_lock(&w->lock);
	skip = !j->remove && !j->sync && j->seq == w->broken_seq;
	pthread_mutex_unlock(&w->lock);
	if (!skip)
		r = do_job(w, j);
	pthread_mutex_lock(&w->lock);
	if (skip) {
		w->stats.refused++;
	} else if (r < 0) {
		w->stats.write_errors++;
		w->stats.last_error = r;
		if (!j->remove)
			w->broken_seq = j->seq;
	} else if (!j->remove && !j->sync) {
		w->stats.bytes_written += j->data.len;
		w->stats.appends++;
		w->appended = true;
	}
	pthread_mutex_unlock(&w->lock);
}

/* On the lane, out of work: what the batches appended goes to disk, once
 * STATE_SYNC_NS passed since the last time. */
static void sync_batch(void *userdata)
{
	struct state_writer *w = userdata;

	if (now_monotonic_ns() - w->synced_ns >= STATE_SYNC_NS)
		sync_open(w);
}

int state_writer_new(int dirfd, size_t max_bytes, struct state_writer **ret)
{
	struct state_writer *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	w->open_fd = -1;
	w->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (w->dirfd < 0) {
		r = -errno;
		free(w);
		return r;
	}
	pthread_mutex_init(&w->lock, NULL);
	r = offload_new(&(struct offload_opts){ .lanes = 1, .ordered = true, .max_bytes = max_bytes,
						.idle = sync_batch, .userdata = w, .name = "perfd-state" },
			&w->lane);
	if (r < 0) {
		pthread_mutex_destroy(&w->lock);
		close(w->dirfd);
		free(w);
		return r;
	}
	*ret = w;
	return 0;
}

static struct job *job_new(struct state_writer *w, uint64_t seq)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->job.run = job_run;
	j->job.free = job_free;
	j->w = w;
	j->seq = seq;
	return j;
}

bool state_writer_append(struct state_writer *w, uint64_t seq, struct sbuf *b)
{
	struct job *j;
	bool broken;

	if (!b->len || b->failed) {
		bool whole = !b->failed;

		sbuf_done(b);
		return whole;
	}
	pthread_mutex_lock(&w->lock);
	broken = seq == w->broken_seq;
	pthread_mutex_unlock(&w->lock);
	j = broken ? NULL : job_new(w, seq);
	if (!j) {
		pthread_mutex_lock(&w->lock);
		w->stats.refused++;
		pthread_mutex_unlock(&w->lock);
		sbuf_done(b);
		return false;
	}
	j->data = *b;
	j->job.bytes = b->len;
	*b = (struct sbuf){ 0 };
	if (offload_submit(w->lane, &j->job) < 0) { /* the lane counts it */
		job_free(&j->job);
		return false;
	}
	return true;
}

void state_writer_remove(struct state_writer *w, uint64_t seq)
{
	struct job *j = job_new(w, seq);

	if (!j)
		return; /* left for the next start to find past the retention */
	j->remove = true;
	/* weighs nothing: the bound never refuses it */
	if (offload_submit(w->lane, &j->job) < 0)
		job_free(&j->job);
}

void state_writer_wait(struct state_writer *w, bool to_disk)
{
	struct job *j = to_disk ? job_new(w, 0) : NULL;

	if (j) {
		j->sync = true;
		if (offload_submit(w->lane, &j->job) < 0)
			job_free(&j->job);
	}
	(void)offload_wait_idle(w->lane, OFFLOAD_FOREVER);
}

void state_writer_get_stats(struct state_writer *w, struct state_writer_stats *ret)
{
	struct offload_stats os;

	pthread_mutex_lock(&w->lock);
	*ret = w->stats;
	pthread_mutex_unlock(&w->lock);
	offload_get_stats(w->lane, &os);
	ret->queued_bytes = os.bytes;
	ret->refused += os.refused; /* finished with no time limit: none dropped */
}

struct state_writer *state_writer_free(struct state_writer *w)
{
	if (!w)
		return NULL;
	/* what is queued is written first */
	(void)offload_finish(w->lane, OFFLOAD_FOREVER);
	offload_free(w->lane);
	close_open(w);
	close(w->dirfd);
	pthread_mutex_destroy(&w->lock);
	free(w);
	return NULL;
}
