/* SPDX-License-Identifier: MIT */
/* offload.c - see offload.h for the design and the ownership rules. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/offload.h"
#include "perfd/macro.h"

struct lane {
	struct offload *o;
	pthread_t thread;
	struct offload_job *running;
	bool small_only;
	bool started;
	bool busy; /* has work, or its idle() hook is still to run */
};

struct offload {
	struct offload_opts opts;
	struct lane *lanes;
	unsigned n_lanes;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* for the lanes and offload_sleep */
	pthread_cond_t idle; /* for offload_wait_idle */
	/* a pool's newest first, an ordered lane's oldest first */
	struct offload_job *todo, **todo_tail;
	/* finished jobs, newest first: lanes push, the loop takes them all,
	 * neither under the lock (offload.h: taking them never waits on a lane) */
	_Atomic(struct offload_job *) done;
	unsigned busy;      /* lanes busy */
	uint64_t kicks;     /* offload_kick calls, so one during idle() is not lost */
	struct offload_stats stats;
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

/* The queue's edits, keeping todo_tail right (lock held). */
static struct offload_job *unlink_at(struct offload *o, struct offload_job **at)
{
	struct offload_job *j = *at;

	*at = j->next;
	if (o->todo_tail == &j->next)
		o->todo_tail = at;
	j->next = NULL;
	return j;
}

static void push_front(struct offload *o, struct offload_job *j)
{
	j->next = o->todo;
	if (!o->todo)
		o->todo_tail = &j->next;
	o->todo = j;
}

static void push_back(struct offload *o, struct offload_job *j)
{
	j->next = NULL;
	*o->todo_tail = j;
	o->todo_tail = &j->next;
}

/* The job a lane serves next (the first; a small lane skips big ones),
 * unlinked from the queue, or NULL. */
static struct offload_job *take(struct offload *o, bool small_only)
{
	struct offload_job **at = &o->todo;

	while (*at && small_only && (*at)->big)
		at = &(*at)->next;
	return *at ? unlink_at(o, at) : NULL;
}

/* A job leaves the count when it is done or dropped, whichever is first
 * (lock held). */
static void uncount(struct offload *o, struct offload_job *j)
{
	if (atomic_load(&j->dropped))
		return;
	o->stats.jobs--;
	o->stats.bytes -= j->bytes;
}

static void set_busy(struct lane *lane)
{
	if (!lane->busy) {
		lane->busy = true;
		lane->o->busy++;
	}
}

/* The lane's next job, waiting for one; NULL once it is to stop (lock
 * held, released around the idle() hook and while it waits). */
static struct offload_job *next_job(struct lane *lane)
{
	struct offload *o = lane->o;
	bool hooked = false;

	for (;;) {
		struct offload_job *j;

		if (o->stop)
			return NULL;
		if ((j = take(o, lane->small_only))) {
			set_busy(lane);
			lane->running = j;
			return j;
		}
		if (lane->busy && o->opts.idle && !hooked) {
			uint64_t kicks = o->kicks;

			hooked = true;
			pthread_mutex_unlock(&o->lock);
			o->opts.idle(o->opts.userdata);
			pthread_mutex_lock(&o->lock);
			/* a kick that came meanwhile asks for the hook again */
			hooked = o->kicks == kicks;
			continue; /* work may have come meanwhile */
		}
		if (lane->busy) {
			lane->busy = false;
			if (--o->busy == 0 && !o->todo)
				pthread_cond_broadcast(&o->idle);
		}
		pthread_cond_wait(&o->wake, &o->lock);
	}
}

/* A job's run() returned: to the done list, or freed (lock held, released
 * around free()). */
static void finished(struct lane *lane, struct offload_job *j)
{
	struct offload *o = lane->o;
	const uint64_t one = 1;

	lane->running = NULL;
	uncount(o, j);
	if (!o->opts.take_back) {
		pthread_mutex_unlock(&o->lock);
		j->free(j);
		pthread_mutex_lock(&o->lock);
		return;
	}
	j->next = atomic_load_explicit(&o->done, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&o->done, &j->next, j, memory_order_release,
						      memory_order_relaxed))
		;
	/* a full counter (2^64 - 2 wake-ups unread) cannot happen */
	(void)!write(o->event_fd, &one, sizeof(one));
}

static void *lane_main(void *arg)
{
	struct lane *lane = arg;
	struct offload *o = lane->o;
	struct offload_job *j;

	/* best effort: a lane at the loop's priority is only slower to yield */
	if (o->opts.nice)
		(void)setpriority(PRIO_PROCESS, (id_t)gettid(), o->opts.nice);
	pthread_mutex_lock(&o->lock);
	while ((j = next_job(lane))) {
		pthread_mutex_unlock(&o->lock);
		j->run(j);
		pthread_mutex_lock(&o->lock);
		finished(lane, j);
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int offload_new(const struct offload_opts *opts, struct offload **ret)
{
	pthread_condattr_t ca;
	struct offload *o;
	int r;

	if (opts->lanes == 0 || opts->small_lanes >= opts->lanes ||
	    ((opts->ordered || opts->drop_oldest) && opts->lanes != 1) ||
	    (opts->drop_oldest && !opts->ordered))
		return -EINVAL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->opts = *opts;
	o->todo_tail = &o->todo;
	o->event_fd = -1;
	pthread_mutex_init(&o->lock, NULL);
	/* offload_sleep and offload_wait_idle count in monotonic time */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&o->wake, &ca);
	pthread_cond_init(&o->idle, &ca);
	pthread_condattr_destroy(&ca);
	o->lanes = calloc(opts->lanes, sizeof(*o->lanes));
	if (!o->lanes) {
		offload_free(o);
		return -ENOMEM;
	}
	o->n_lanes = opts->lanes;
	if (opts->take_back) {
		o->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (o->event_fd < 0) {
			r = negative_errno();
			offload_free(o);
			return r;
		}
	}
	for (unsigned i = 0; i < opts->lanes; i++) {
		/* busy: each runs its idle() hook once at the start */
		o->lanes[i] = (struct lane){ .o = o, .small_only = i < opts->small_lanes, .busy = true };
		o->busy++;
		r = -pthread_create(&o->lanes[i].thread, NULL, lane_main, &o->lanes[i]);
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
	free_list(atomic_load(&o->done));
	if (o->event_fd >= 0)
		close(o->event_fd);
	pthread_cond_destroy(&o->wake);
	pthread_cond_destroy(&o->idle);
	pthread_mutex_destroy(&o->lock);
	free(o->lanes);
	free(o);
	return NULL;
}

/* Drops the oldest jobs until need more bytes fit (lock held): first the
 * one running (it counts itself), then the queue's, freed and counted. */
static void make_room(struct offload *o, size_t need)
{
	struct offload_job *running = o->lanes[0].running;

	if (running && o->stats.bytes + need > o->opts.max_bytes) {
		uncount(o, running);
		atomic_store(&running->dropped, true);
		pthread_cond_broadcast(&o->wake); /* for its offload_sleep */
	}
	while (o->todo && o->stats.bytes + need > o->opts.max_bytes) {
		struct offload_job *j = unlink_at(o, &o->todo);

		uncount(o, j);
		o->stats.dropped++;
		j->free(j);
	}
}

int offload_submit(struct offload *o, struct offload_job *j)
{
	size_t max = o->opts.max_bytes;
	int r = 0;

	j->cancel = &o->cancel;
	j->owner = o;
	atomic_store(&j->dropped, false);
	pthread_mutex_lock(&o->lock);
	if (o->stop)
		r = -ESHUTDOWN;
	else if (max && j->bytes > max)
		r = -ENOBUFS;
	else if (max && o->stats.bytes + j->bytes > max && !o->opts.drop_oldest)
		r = -ENOBUFS;
	else if (max && o->opts.drop_oldest)
		make_room(o, j->bytes);
	if (r < 0) {
		o->stats.refused++;
		pthread_mutex_unlock(&o->lock);
		return r;
	}
	if (o->opts.ordered)
		push_back(o, j);
	else
		push_front(o, j);
	o->stats.jobs++;
	o->stats.bytes += j->bytes;
	pthread_cond_broadcast(&o->wake);
	pthread_mutex_unlock(&o->lock);
	return 0;
}

void offload_set_max_bytes(struct offload *o, size_t max_bytes)
{
	pthread_mutex_lock(&o->lock);
	o->opts.max_bytes = max_bytes;
	pthread_mutex_unlock(&o->lock);
}

void offload_bump(struct offload *o, uint64_t key)
{
	pthread_mutex_lock(&o->lock);
	for (struct offload_job **at = &o->todo; *at; at = &(*at)->next) {
		if ((*at)->key != key)
			continue;
		push_front(o, unlink_at(o, at));
		break;
	}
	pthread_mutex_unlock(&o->lock);
}

void offload_kick(struct offload *o)
{
	pthread_mutex_lock(&o->lock);
	o->kicks++;
	for (unsigned i = 0; i < o->n_lanes; i++)
		set_busy(&o->lanes[i]);
	pthread_cond_broadcast(&o->wake);
	pthread_mutex_unlock(&o->lock);
}

struct offload_job *offload_take_done(struct offload *o)
{
	struct offload_job *newest, *list = NULL;
	uint64_t n;

	(void)!read(o->event_fd, &n, sizeof(n));
	newest = atomic_exchange_explicit(&o->done, NULL, memory_order_acquire);
	while (newest) { /* reversed: the order they finished in */
		struct offload_job *next = newest->next;

		newest->next = list;
		list = newest;
		newest = next;
	}
	return list;
}

int offload_fd(const struct offload *o)
{
	return o->event_fd;
}

/* now + ms on CLOCK_MONOTONIC, the condition variables' clock. */
static struct timespec deadline(unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

/* Waits for the idle condition (lock held); false on timeout. */
static bool wait_idle_locked(struct offload *o, unsigned timeout_ms)
{
	struct timespec until = deadline(timeout_ms == OFFLOAD_FOREVER ? 0 : timeout_ms);

	while (o->todo || o->busy) {
		if (o->stop)
			return false; /* no lane will take the rest */
		if (timeout_ms == OFFLOAD_FOREVER)
			pthread_cond_wait(&o->idle, &o->lock);
		else if (pthread_cond_timedwait(&o->idle, &o->lock, &until) == ETIMEDOUT)
			return !o->todo && !o->busy;
	}
	return true;
}

int offload_wait_idle(struct offload *o, unsigned timeout_ms)
{
	bool idle;

	pthread_mutex_lock(&o->lock);
	idle = wait_idle_locked(o, timeout_ms);
	pthread_mutex_unlock(&o->lock);
	return idle ? 0 : -ETIMEDOUT;
}

size_t offload_finish(struct offload *o, unsigned timeout_ms)
{
	size_t left;

	pthread_mutex_lock(&o->lock);
	if (o->stop) {
		pthread_mutex_unlock(&o->lock);
		return 0; /* counted by the first call */
	}
	(void)wait_idle_locked(o, timeout_ms);
	o->stop = true;
	atomic_store(&o->cancel, true);
	pthread_cond_broadcast(&o->wake);
	/* the queued jobs; one running sees the cancel flag and counts
	 * itself by what became of it (a send may still succeed) */
	left = 0;
	for (struct offload_job *j = o->todo; j; j = j->next)
		left++;
	o->stats.dropped += left;
	pthread_mutex_unlock(&o->lock);
	return left;
}

void offload_get_stats(struct offload *o, struct offload_stats *ret)
{
	pthread_mutex_lock(&o->lock);
	*ret = o->stats;
	pthread_mutex_unlock(&o->lock);
}

bool offload_sleep(struct offload_job *j, unsigned ms)
{
	struct offload *o = j->owner;
	struct timespec until = deadline(ms);
	bool woken;

	pthread_mutex_lock(&o->lock);
	while (!(woken = atomic_load(&o->cancel) || atomic_load(&j->dropped)))
		if (pthread_cond_timedwait(&o->wake, &o->lock, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&o->lock);
	return !woken;
}
