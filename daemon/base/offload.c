/* SPDX-License-Identifier: MIT */
/* offload.c - see offload.h for the design and the ownership rules. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/offload.h"
#include "base/priority.h"
#include "perfd/macro.h"

/* offload_bump's requests waiting for a lane (a power of two): 4 KiB */
#define BUMP_SLOTS 256

/* How long offload_free waits for all of an offload's lanes together.  A
 * lane at work returns within one check of the cancel flag, which the long
 * jobs make between small steps, or one read of a file that answers: far
 * less than this even on a loaded host.  One still in run() (or idle())
 * after 2 s is in a syscall that does not return by itself (a FUSE or NFS
 * server that does not answer), and waiting longer only brings systemd's
 * TimeoutStopSec (90 s by default) closer; shutdown frees several
 * offloads one after another, so this can count a few times. */
#define OFFLOAD_JOIN_MAX_MS 2000

struct lane {
	struct offload *o;
	pthread_t thread;
	struct offload_job *running;
	bool small_only;
	bool started;
	bool busy; /* has work, or its idle() hook is still to run */
};

/* One of offload_bump's requests, in a bounded queue of many producers
 * and one consumer at a time (the lane holding the lock): seq says whose
 * turn the slot is, the producer's (== its ticket) or the consumer's
 * (== ticket + 1). */
struct bump_slot {
	_Atomic uint64_t seq;
	_Atomic uint64_t key; /* atomic: offload_bump reads the newest's */
};

struct offload {
	struct offload_opts opts;
	_Atomic size_t max_bytes;
	struct lane *lanes;
	unsigned n_lanes;
	/* the lanes' own: the queue, busy, kicks, stop */
	pthread_mutex_t lock;
	pthread_cond_t idle; /* for offload_wait_idle */
	/* a pool's newest first, an ordered lane's oldest first */
	struct offload_job *todo, **todo_tail;
	/* submitted, not yet in todo, newest first: submitters push with a
	 * compare-and-swap, a lane takes it whole under the lock; INBOX_CLOSED
	 * once offload_finish stopped taking jobs */
	_Atomic(struct offload_job *) inbox;
	struct bump_slot bumps[BUMP_SLOTS];
	_Atomic uint64_t bump_head; /* the next producer's ticket */
	uint64_t bump_tail;         /* the next to apply (lock held) */
	/* the lanes and offload_sleep wait on this word's change: it changes
	 * after each submission, kick, drop and stop, and sleepers says
	 * whether anyone is there to wake with a syscall */
	_Atomic uint32_t wake_seq;
	atomic_uint sleepers;
	/* finished jobs, newest first: lanes push, the loop takes them all,
	 * neither under the lock (offload.h: taking them never waits on a lane) */
	_Atomic(struct offload_job *) done;
	unsigned busy;  /* lanes busy */
	uint64_t kicks; /* offload_kick calls, so one during idle() is not lost */
	_Atomic uint64_t jobs, bytes, refused, dropped; /* offload_stats */
	bool stop;
	atomic_bool cancel; /* stop, for the jobs running */
	int event_fd;
	struct offload *next_abandoned; /* on the abandoned list */
};

/* The offloads offload_free gave up waiting for (offload.h): never freed,
 * since a lane may still come back to them, and kept here so that they
 * stay reachable, not leaks, for LeakSanitizer.  Pushed with a
 * compare-and-swap, never taken. */
static _Atomic(struct offload *) abandoned;

/* now + ms on clock: CLOCK_MONOTONIC for the waits here, but for
 * pthread_timedjoin_np, which counts only in CLOCK_REALTIME. */
static struct timespec deadline(clockid_t clock, unsigned ms)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

static struct offload_job inbox_closed;
#define INBOX_CLOSED (&inbox_closed)

static void free_list(struct offload_job *j)
{
	while (j) {
		struct offload_job *next = j->next;

		j->free(j);
		j = next;
	}
}

/* Sleeps while *word is val, until the absolute CLOCK_MONOTONIC time until
 * (NULL: no limit), or a wake-up. */
static void futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *until)
{
	(void)syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, val, until, NULL,
		      FUTEX_BITSET_MATCH_ANY);
}

/* Wakes whoever sleeps in futex_wait on wake_seq.  The word changes first,
 * so that a sleeper that read it before cannot go to sleep after; with
 * sequential consistency on both sides (a sleeper counts itself in
 * sleepers, then reads the word, then looks for work), either the sleeper
 * sees the work or this sees the sleeper. */
static void wake_all(struct offload *o)
{
	atomic_fetch_add(&o->wake_seq, 1);
	if (atomic_load(&o->sleepers))
		(void)syscall(SYS_futex, &o->wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
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

/* A job leaves the count when it is done or dropped, whichever is first
 * (lock held, which make_room also holds). */
static void uncount(struct offload *o, struct offload_job *j)
{
	if (atomic_load(&j->dropped))
		return;
	atomic_fetch_sub(&o->jobs, 1);
	atomic_fetch_sub(&o->bytes, j->bytes);
}

/* Drops the oldest jobs until the bytes are within the bound again (lock
 * held, a drop_oldest lane's): first the one running (it counts itself),
 * then the queue's, freed and counted.  The newest job always stays: it
 * alone fits, offload_submit saw to that. */
static void make_room(struct offload *o)
{
	size_t max = atomic_load(&o->max_bytes);
	struct offload_job *running = o->lanes[0].running;

	if (!max)
		return;
	if (running && atomic_load(&o->bytes) > max) {
		uncount(o, running);
		atomic_store(&running->dropped, true);
		wake_all(o); /* for its offload_sleep */
	}
	while (o->todo && o->todo->next && atomic_load(&o->bytes) > max) {
		struct offload_job *j = unlink_at(o, &o->todo);

		uncount(o, j);
		atomic_fetch_add(&o->dropped, 1);
		j->free(j);
	}
}

/* Moves the queued job of key, if any, to the front (lock held). */
static void bump_locked(struct offload *o, uint64_t key)
{
	for (struct offload_job **at = &o->todo; *at; at = &(*at)->next) {
		if ((*at)->key != key)
			continue;
		push_front(o, unlink_at(o, at));
		break;
	}
}

/* Moves what the inbox holds into todo, then applies the bumps asked for
 * since (lock held).  An ordered lane appends the inbox oldest first, a
 * pool puts it in front as it is, newest first.  Returns how many jobs
 * came in. */
static unsigned drain(struct offload *o)
{
	struct offload_job *in = atomic_load(&o->inbox), *list = NULL, *last;
	unsigned n = 0;

	if (in && in != INBOX_CLOSED)
		in = atomic_exchange_explicit(&o->inbox, NULL, memory_order_acquire);
	else
		in = NULL;
	if (o->opts.ordered) {
		while (in) { /* reversed: the order they were submitted in */
			struct offload_job *next = in->next;

			in->next = list;
			list = in;
			in = next;
		}
		for (; list; n++) {
			struct offload_job *next = list->next;

			push_back(o, list);
			list = next;
		}
	} else if (in) {
		for (last = in, n = 1; last->next; last = last->next)
			n++;
		last->next = o->todo;
		if (!o->todo)
			o->todo_tail = &last->next;
		o->todo = in;
	}
	for (;;) {
		struct bump_slot *s = &o->bumps[o->bump_tail % BUMP_SLOTS];

		if (atomic_load_explicit(&s->seq, memory_order_acquire) != o->bump_tail + 1)
			break; /* none, or its producer is still writing it */
		bump_locked(o, atomic_load_explicit(&s->key, memory_order_relaxed));
		atomic_store_explicit(&s->seq, o->bump_tail + BUMP_SLOTS, memory_order_release);
		o->bump_tail++;
	}
	if (n && o->opts.drop_oldest)
		make_room(o);
	return n;
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

static bool inbox_empty(struct offload *o)
{
	struct offload_job *in = atomic_load(&o->inbox);

	return !in || in == INBOX_CLOSED;
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
		uint32_t seq;

		if (o->stop)
			return NULL;
		(void)drain(o);
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
			if (--o->busy == 0 && !o->todo && inbox_empty(o))
				pthread_cond_broadcast(&o->idle);
		}
		/* wake_all's other half: counted, then the word, then the work */
		atomic_fetch_add(&o->sleepers, 1);
		seq = atomic_load(&o->wake_seq);
		if (inbox_empty(o) && !lane->busy) {
			pthread_mutex_unlock(&o->lock);
			futex_wait(&o->wake_seq, seq, NULL);
			pthread_mutex_lock(&o->lock);
		}
		atomic_fetch_sub(&o->sleepers, 1);
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
	/* Once stopping, the job is not freed here but left on the done list
	 * for offload_free: a job's free() is the owner's code, and a lane
	 * whose run() outlived offload_free's wait must touch nothing of the
	 * owner's (the offload itself is kept for it).  next_job then sees
	 * stop and the lane ends without its idle() hook. */
	if (!o->opts.take_back && !o->stop) {
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
	if (o->event_fd >= 0)
		(void)!write(o->event_fd, &one, sizeof(one));
}

static void *lane_main(void *arg)
{
	struct lane *lane = arg;
	struct offload *o = lane->o;
	struct offload_job *j;

	if (o->opts.background)
		priority_lower_lane();
	if (o->opts.name) {
		char name[16]; /* the kernel's limit, NUL included */

		snprintf(name, sizeof(name), "%s-%u", o->opts.name, (unsigned)(lane - o->lanes));
		(void)pthread_setname_np(pthread_self(), name);
	}
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
	atomic_init(&o->max_bytes, opts->max_bytes);
	o->todo_tail = &o->todo;
	for (uint64_t i = 0; i < BUMP_SLOTS; i++)
		atomic_init(&o->bumps[i].seq, i);
	o->event_fd = -1;
	pthread_mutex_init(&o->lock, NULL);
	/* offload_wait_idle counts in monotonic time */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
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
	/* busy: each runs its idle() hook once at the start; all counted
	 * before the first starts, which changes the count under the lock */
	for (unsigned i = 0; i < opts->lanes; i++)
		o->lanes[i] = (struct lane){ .o = o, .small_only = i < opts->small_lanes, .busy = true };
	o->busy = opts->lanes;
	for (unsigned i = 0; i < opts->lanes; i++) {
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

/* Joins the lanes; with may_abandon, all against one deadline
 * OFFLOAD_JOIN_MAX_MS from now (one already gone is joined even past it).
 * Returns how many were not, each detached: its thread ends on its own,
 * or with the process. */
static unsigned join_lanes(struct offload *o)
{
	struct timespec until = deadline(CLOCK_REALTIME, OFFLOAD_JOIN_MAX_MS);
	unsigned stuck = 0;

	for (unsigned i = 0; o->lanes && i < o->n_lanes; i++) {
		struct lane *lane = &o->lanes[i];

		if (!lane->started)
			continue;
		if (!o->opts.may_abandon) {
			pthread_join(lane->thread, NULL);
			continue;
		}
		if (pthread_timedjoin_np(lane->thread, NULL, &until) == 0)
			continue;
		(void)pthread_detach(lane->thread);
		stuck++;
	}
	return stuck;
}

/* Gives up on an offload whose lanes are not all back: nothing is freed,
 * since a lane's run() may still return and then go through the lock, the
 * done list, the counts and the eventfd, and its job's cancel flag and
 * offload_sleep() point into the offload. */
static void abandon(struct offload *o, unsigned stuck)
{
	o->next_abandoned = atomic_load(&abandoned);
	while (!atomic_compare_exchange_weak(&abandoned, &o->next_abandoned, o))
		;
	log_warning("%u offload lane(s) still busy %u ms after being asked to stop (a file system "
		    "or server that does not answer?): not waited for, the process will exit "
		    "without them.",
		    stuck, OFFLOAD_JOIN_MAX_MS);
}

struct offload *offload_free(struct offload *o)
{
	struct offload_job *in;
	unsigned stuck;

	if (!o)
		return NULL;
	pthread_mutex_lock(&o->lock);
	o->stop = true;
	atomic_store(&o->cancel, true);
	pthread_mutex_unlock(&o->lock);
	wake_all(o);
	stuck = join_lanes(o);
	if (stuck > 0) {
		abandon(o, stuck);
		return NULL;
	}
	free_list(o->todo);
	in = atomic_exchange(&o->inbox, INBOX_CLOSED);
	if (in != INBOX_CLOSED)
		free_list(in);
	free_list(atomic_load(&o->done));
	if (o->event_fd >= 0)
		close(o->event_fd);
	pthread_cond_destroy(&o->idle);
	pthread_mutex_destroy(&o->lock);
	free(o->lanes);
	free(o);
	return NULL;
}

/* Counts bytes against the bound for a job that may be refused: a
 * compare-and-swap that adds them only if they fit, so that two submitters
 * at once cannot both take the last room.  A drop_oldest lane takes them
 * anyway and makes room afterwards. */
static bool reserve(struct offload *o, size_t bytes)
{
	size_t max = atomic_load(&o->max_bytes);
	uint64_t had = atomic_load(&o->bytes);

	if (max && bytes > max)
		return false;
	if (!max || o->opts.drop_oldest) {
		atomic_fetch_add(&o->bytes, bytes);
		return true;
	}
	do {
		if (had + bytes > max)
			return false;
	} while (!atomic_compare_exchange_weak(&o->bytes, &had, had + bytes));
	return true;
}

int offload_submit(struct offload *o, struct offload_job *j)
{
	struct offload_job *head = atomic_load(&o->inbox);

	j->cancel = &o->cancel;
	j->owner = o;
	atomic_store(&j->dropped, false);
	if (head == INBOX_CLOSED) {
		atomic_fetch_add(&o->refused, 1);
		return -ESHUTDOWN;
	}
	if (!reserve(o, j->bytes)) {
		atomic_fetch_add(&o->refused, 1);
		return -ENOBUFS;
	}
	atomic_fetch_add(&o->jobs, 1);
	do {
		if (head == INBOX_CLOSED) { /* offload_finish came between */
			atomic_fetch_sub(&o->jobs, 1);
			atomic_fetch_sub(&o->bytes, j->bytes);
			atomic_fetch_add(&o->refused, 1);
			return -ESHUTDOWN;
		}
		j->next = head;
	} while (!atomic_compare_exchange_weak_explicit(&o->inbox, &head, j, memory_order_release,
							memory_order_relaxed));
	/* Over the bound, a drop_oldest lane drops now if its lock is free,
	 * which it is unless a lane is between two jobs: that lane then
	 * drains the inbox, and makes the room, before it sleeps or runs. */
	if (o->opts.drop_oldest && atomic_load(&o->bytes) > atomic_load(&o->max_bytes) &&
	    pthread_mutex_trylock(&o->lock) == 0) {
		(void)drain(o);
		pthread_mutex_unlock(&o->lock);
	}
	wake_all(o);
	return 0;
}

void offload_set_max_bytes(struct offload *o, size_t max_bytes)
{
	atomic_store(&o->max_bytes, max_bytes);
}

void offload_bump(struct offload *o, uint64_t key)
{
	uint64_t pos = atomic_load(&o->bump_head);

	if (pos) { /* the same key bumped last and not yet applied: done */
		struct bump_slot *s = &o->bumps[(pos - 1) % BUMP_SLOTS];

		if (atomic_load_explicit(&s->seq, memory_order_acquire) == pos &&
		    atomic_load_explicit(&s->key, memory_order_relaxed) == key)
			return;
	}
	for (;;) {
		struct bump_slot *s = &o->bumps[pos % BUMP_SLOTS];
		int64_t turn = (int64_t)(atomic_load_explicit(&s->seq, memory_order_acquire) - pos);

		if (turn == 0 && atomic_compare_exchange_weak(&o->bump_head, &pos, pos + 1)) {
			atomic_store_explicit(&s->key, key, memory_order_relaxed);
			atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
			return; /* applied at the next job a lane takes */
		}
		if (turn < 0)
			break; /* full */
		if (turn > 0)
			pos = atomic_load(&o->bump_head);
	}
	/* BUMP_SLOTS bumps and no lane between two jobs since (all are deep in
	 * run(), or starved): applied here if the lock is free, else lost (the
	 * job keeps its place; waiting here is what this file avoids) */
	if (pthread_mutex_trylock(&o->lock) == 0) {
		(void)drain(o);
		bump_locked(o, key);
		pthread_mutex_unlock(&o->lock);
	}
}

void offload_kick(struct offload *o)
{
	pthread_mutex_lock(&o->lock);
	o->kicks++;
	for (unsigned i = 0; i < o->n_lanes; i++)
		set_busy(&o->lanes[i]);
	pthread_mutex_unlock(&o->lock);
	wake_all(o);
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

static bool is_idle(struct offload *o)
{
	return !o->todo && !o->busy && inbox_empty(o);
}

/* Waits for the idle condition (lock held); false on timeout. */
static bool wait_idle_locked(struct offload *o, unsigned timeout_ms)
{
	struct timespec until =
		deadline(CLOCK_MONOTONIC, timeout_ms == OFFLOAD_FOREVER ? 0 : timeout_ms);

	while (!is_idle(o)) {
		if (o->stop)
			return false; /* no lane will take the rest */
		if (timeout_ms == OFFLOAD_FOREVER)
			pthread_cond_wait(&o->idle, &o->lock);
		else if (pthread_cond_timedwait(&o->idle, &o->lock, &until) == ETIMEDOUT)
			return is_idle(o);
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
	struct offload_job *in;
	size_t left;

	pthread_mutex_lock(&o->lock);
	if (o->stop) {
		pthread_mutex_unlock(&o->lock);
		return 0; /* counted by the first call */
	}
	(void)wait_idle_locked(o, timeout_ms);
	o->stop = true;
	atomic_store(&o->cancel, true);
	/* closed: a submission from now on is refused, and one that came
	 * before is in the queue, counted below */
	in = atomic_exchange(&o->inbox, INBOX_CLOSED);
	atomic_store(&o->inbox, in);
	(void)drain(o);
	atomic_store(&o->inbox, INBOX_CLOSED);
	/* the queued jobs; one running sees the cancel flag and counts
	 * itself by what became of it (a send may still succeed) */
	left = 0;
	for (struct offload_job *j = o->todo; j; j = j->next)
		left++;
	atomic_fetch_add(&o->dropped, left);
	pthread_mutex_unlock(&o->lock);
	wake_all(o);
	return left;
}

void offload_get_stats(struct offload *o, struct offload_stats *ret)
{
	*ret = (struct offload_stats){ .jobs = atomic_load(&o->jobs),
				       .bytes = atomic_load(&o->bytes),
				       .refused = atomic_load(&o->refused),
				       .dropped = atomic_load(&o->dropped) };
}

bool offload_sleep(struct offload_job *j, unsigned ms)
{
	struct offload *o = j->owner;
	struct timespec until = deadline(CLOCK_MONOTONIC, ms), now;
	bool woken;

	for (;;) {
		uint32_t seq;

		/* as in next_job: counted, then the word, then the flags */
		atomic_fetch_add(&o->sleepers, 1);
		seq = atomic_load(&o->wake_seq);
		woken = atomic_load(&o->cancel) || atomic_load(&j->dropped);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!woken && (now.tv_sec < until.tv_sec ||
			       (now.tv_sec == until.tv_sec && now.tv_nsec < until.tv_nsec)))
			futex_wait(&o->wake_seq, seq, &until);
		else {
			atomic_fetch_sub(&o->sleepers, 1);
			return !woken;
		}
		atomic_fetch_sub(&o->sleepers, 1);
	}
}
