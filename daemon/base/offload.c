/* SPDX-License-Identifier: MIT */
/* offload.c - see offload.h for the design and the ownership rules. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/offload.h"
#include "perfd/macro.h"

/* Lanes run at this nice value (offload.h). */
#define LANE_NICE 10

struct lane {
	struct offload *o;
	pthread_t thread;
	bool small_only;
	bool started;
};

struct offload {
	struct lane *lanes;
	unsigned n_lanes;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct offload_job *todo;              /* newest first */
	struct offload_job *done, **done_tail; /* FIFO */
	bool stop;
	atomic_bool cancel; /* stop, for the jobs running */
	int event_fd;
};

static void free_list(struct offload_job *j)
{
	while (j) {
		struct offload_job *next = j->next;

		j->free(j);
		j = next;
	}
}

/* The job a lane serves next (the newest; a small lane skips big ones),
 * unlinked from the queue, or NULL. */
static struct offload_job *take(struct offload *o, bool small_only)
{
	struct offload_job **at = &o->todo, *j;

	while (*at && small_only && (*at)->big)
		at = &(*at)->next;
	j = *at;
	if (j)
		*at = j->next;
	return j;
}

static void *run(void *arg)
{
	struct lane *lane = arg;
	struct offload *o = lane->o;
	const uint64_t one = 1;

	/* best effort: a lane at the loop's priority is only slower to yield */
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), LANE_NICE);
	pthread_mutex_lock(&o->lock);
	for (;;) {
		struct offload_job *j = NULL;

		while (!o->stop && !(j = take(o, lane->small_only)))
			pthread_cond_wait(&o->wake, &o->lock);
		if (o->stop) {
			if (j) { /* back where it was, for offload_free */
				j->next = o->todo;
				o->todo = j;
			}
			break;
		}
		pthread_mutex_unlock(&o->lock);

		j->run(j);

		pthread_mutex_lock(&o->lock);
		j->next = NULL;
		*o->done_tail = j;
		o->done_tail = &j->next;
		/* a full counter (2^64 - 2 wake-ups unread) cannot happen */
		(void)!write(o->event_fd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int offload_new(unsigned lanes, unsigned small_lanes, struct offload **ret)
{
	struct offload *o;
	int r;

	if (lanes == 0 || small_lanes >= lanes)
		return -EINVAL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->done_tail = &o->done;
	o->event_fd = -1;
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->wake, NULL);
	o->lanes = calloc(lanes, sizeof(*o->lanes));
	if (!o->lanes) {
		offload_free(o);
		return -ENOMEM;
	}
	o->n_lanes = lanes;
	o->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (o->event_fd < 0) {
		r = negative_errno();
		offload_free(o);
		return r;
	}
	for (unsigned i = 0; i < lanes; i++) {
		o->lanes[i] = (struct lane){ .o = o, .small_only = i < small_lanes };
		r = -pthread_create(&o->lanes[i].thread, NULL, run, &o->lanes[i]);
		if (r < 0) {
			offload_free(o);
			return r;
		}
		o->lanes[i].started = true;
	}
	*ret = o;
	return 0;
}

struct offload *offload_free(struct offload *o)
{
	if (!o)
		return NULL;
	pthread_mutex_lock(&o->lock);
	o->stop = true;
	atomic_store(&o->cancel, true);
	pthread_cond_broadcast(&o->wake);
	pthread_mutex_unlock(&o->lock);
	for (unsigned i = 0; o->lanes && i < o->n_lanes; i++)
		if (o->lanes[i].started)
			pthread_join(o->lanes[i].thread, NULL);
	free_list(o->todo);
	free_list(o->done);
	if (o->event_fd >= 0)
		close(o->event_fd);
	pthread_cond_destroy(&o->wake);
	pthread_mutex_destroy(&o->lock);
	free(o->lanes);
	free(o);
	return NULL;
}

void offload_submit(struct offload *o, struct offload_job *j)
{
	j->cancel = &o->cancel;
	pthread_mutex_lock(&o->lock);
	j->next = o->todo;
	o->todo = j;
	pthread_cond_broadcast(&o->wake);
	pthread_mutex_unlock(&o->lock);
}

void offload_bump(struct offload *o, uint64_t key)
{
	pthread_mutex_lock(&o->lock);
	for (struct offload_job **at = &o->todo; *at; at = &(*at)->next) {
		struct offload_job *j = *at;

		if (j->key != key)
			continue;
		*at = j->next;
		j->next = o->todo;
		o->todo = j;
		break;
	}
	pthread_mutex_unlock(&o->lock);
}

struct offload_job *offload_take_done(struct offload *o)
{
	struct offload_job *list;
	uint64_t n;

	(void)!read(o->event_fd, &n, sizeof(n));
	pthread_mutex_lock(&o->lock);
	list = o->done;
	o->done = NULL;
	o->done_tail = &o->done;
	pthread_mutex_unlock(&o->lock);
	return list;
}

int offload_fd(const struct offload *o)
{
	return o->event_fd;
}
