/* SPDX-License-Identifier: MIT */
/* writer.c - see writer.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "state/writer.h"

struct job {
	uint64_t seq;
	bool remove;
	struct sbuf data;
	struct job *next;
};

struct state_writer {
	int dirfd;
	size_t max_bytes;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	struct job *head, *tail;
	bool busy, stop;
	/* the thread's: the segment open for appending, and how much of it
	 * is whole */
	uint64_t open_seq;
	int open_fd;
	off_t open_len;
	uint64_t broken_seq; /* a segment whose write failed, 0: none */
	struct state_writer_stats stats;
};

void state_segment_name(uint64_t seq, char *buf, size_t size)
{
	snprintf(buf, size, "segment-%016" PRIx64 ".perfd", seq);
}

static void close_open(struct state_writer *w)
{
	if (w->open_fd >= 0)
		close(w->open_fd);
	w->open_fd = -1;
	w->open_seq = 0;
}

/* Runs one job, unlocked; returns -errno of a failed append. */
static int run(struct state_writer *w, struct job *j)
{
	char name[64];
	size_t done = 0;

	state_segment_name(j->seq, name, sizeof(name));
	if (j->remove) {
		if (w->open_seq == j->seq)
			close_open(w);
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

			/* back to the last whole record */
			if (ftruncate(w->open_fd, w->open_len) < 0) {
				/* the tail stays torn, which a reader drops
				 * (statefile.h): the write's error is the one
				 * to return */
			}
			return r;
		}
		done += (size_t)n;
	}
	w->open_len += (off_t)done;
	return 0;
}

static void *thread_main(void *userdata)
{
	struct state_writer *w = userdata;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct job *j;
		bool appended = false;

		while (!w->head && !w->stop)
			pthread_cond_wait(&w->wake, &w->lock);
		if (!w->head)
			break;
		w->busy = true;
		while ((j = w->head)) {
			int r = 0;
			bool skip;

			w->head = j->next;
			if (!w->head)
				w->tail = NULL;
			skip = !j->remove && j->seq == w->broken_seq;
			w->stats.queued_bytes -= j->data.len;
			pthread_mutex_unlock(&w->lock);
			if (!skip)
				r = run(w, j);
			pthread_mutex_lock(&w->lock);
			if (skip) {
				w->stats.refused++;
			} else if (r < 0) {
				w->stats.write_errors++;
				w->stats.last_error = r;
				if (!j->remove)
					w->broken_seq = j->seq;
			} else if (!j->remove) {
				w->stats.bytes_written += j->data.len;
				w->stats.appends++;
				appended = true;
			}
			sbuf_done(&j->data);
			free(j);
		}
		if (appended && w->open_fd >= 0) {
			int fd = w->open_fd;

			pthread_mutex_unlock(&w->lock);
			(void)fdatasync(fd);
			pthread_mutex_lock(&w->lock);
			w->stats.syncs++;
		}
		w->busy = false;
		pthread_cond_broadcast(&w->idle);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int state_writer_new(int dirfd, size_t max_bytes, struct state_writer **ret)
{
	struct state_writer *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	w->open_fd = -1;
	w->max_bytes = max_bytes;
	w->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (w->dirfd < 0) {
		r = -errno;
		free(w);
		return r;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	pthread_cond_init(&w->idle, NULL);
	r = -pthread_create(&w->thread, NULL, thread_main, w);
	if (r < 0) {
		close(w->dirfd);
		free(w);
		return r;
	}
	*ret = w;
	return 0;
}

static void push(struct state_writer *w, struct job *j)
{
	if (w->tail)
		w->tail->next = j;
	else
		w->head = j;
	w->tail = j;
	w->stats.queued_bytes += j->data.len;
	pthread_cond_signal(&w->wake);
}

bool state_writer_append(struct state_writer *w, uint64_t seq, struct sbuf *b)
{
	struct job *j;
	bool ok;

	if (!b->len || b->failed) {
		bool whole = !b->failed;

		sbuf_done(b);
		return whole;
	}
	j = calloc(1, sizeof(*j));
	pthread_mutex_lock(&w->lock);
	ok = j && seq != w->broken_seq && w->stats.queued_bytes + b->len <= w->max_bytes;
	if (ok) {
		j->seq = seq;
		j->data = *b;
		*b = (struct sbuf){ 0 };
		push(w, j);
	} else {
		w->stats.refused++;
	}
	pthread_mutex_unlock(&w->lock);
	if (!ok) {
		free(j);
		sbuf_done(b);
	}
	return ok;
}

void state_writer_remove(struct state_writer *w, uint64_t seq)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		return; /* left for the next start to find past the retention */
	j->seq = seq;
	j->remove = true;
	pthread_mutex_lock(&w->lock);
	push(w, j);
	pthread_mutex_unlock(&w->lock);
}

void state_writer_sync(struct state_writer *w)
{
	pthread_mutex_lock(&w->lock);
	while (w->head || w->busy)
		pthread_cond_wait(&w->idle, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

void state_writer_get_stats(struct state_writer *w, struct state_writer_stats *ret)
{
	pthread_mutex_lock(&w->lock);
	*ret = w->stats;
	pthread_mutex_unlock(&w->lock);
}

struct state_writer *state_writer_free(struct state_writer *w)
{
	if (!w)
		return NULL;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL); /* it finishes what is queued first */
	close_open(w);
	close(w->dirfd);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->wake);
	pthread_cond_destroy(&w->idle);
	free(w);
	return NULL;
}
