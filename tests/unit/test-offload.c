/* SPDX-License-Identifier: MIT */
/*
 * test-offload.c - daemon/base/offload.c's ordered lane: jobs run in the
 * order they were submitted, the byte bound refuses (or, with
 * drop_oldest, drops the oldest, the one running first), the idle() hook
 * runs before offload_wait_idle returns, and offload_finish counts what
 * it leaves; the done list gives every finished job back once, in the
 * order it finished; offload_free joins lanes that stop and frees every
 * job, and gives up after its deadline on a lane stuck in a syscall, which
 * then touches nothing of the owner's when it comes back; each lane
 * carries its offload's name.  The first job
 * of most tests waits at a gate the test opens, so that the others queue
 * behind it, and order and bound are the queue's doing, not the
 * scheduler's.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "base/offload.h"

#define MAX_JOBS 512

struct tjob {
	struct offload_job job; /* first */
	unsigned id;
	bool gated;
	bool saw_dropped; /* offload_dropped() once through the gate */
};

/* What the lane did, under lock. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
	bool at_gate;
	unsigned ran[MAX_JOBS], n_ran;
	unsigned freed_unrun;
	unsigned freed;
	unsigned idles;
	bool dropped_seen[MAX_JOBS];
} t = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void reset(void)
{
	pthread_mutex_lock(&t.lock);
	t.open = t.at_gate = false;
	t.n_ran = t.freed_unrun = t.freed = t.idles = 0;
	pthread_mutex_unlock(&t.lock);
}

static void tjob_run(struct offload_job *j)
{
	struct tjob *tj = (struct tjob *)j;

	pthread_mutex_lock(&t.lock);
	if (tj->gated) {
		t.at_gate = true;
		pthread_cond_broadcast(&t.cond);
		while (!t.open && !atomic_load(j->cancel)) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 10 * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&t.cond, &t.lock, &ts);
		}
	}
	t.dropped_seen[tj->id] = offload_dropped(j);
	t.ran[t.n_ran++] = tj->id;
	pthread_mutex_unlock(&t.lock);
}

static void tjob_free(struct offload_job *j)
{
	struct tjob *tj = (struct tjob *)j;

	bool ran = false;

	pthread_mutex_lock(&t.lock);
	for (unsigned i = 0; i < t.n_ran; i++)
		ran |= t.ran[i] == tj->id;
	if (!ran)
		t.freed_unrun++;
	t.freed++;
	pthread_mutex_unlock(&t.lock);
	free(tj);
}

/* Counts at its end, after a while: an offload_wait_idle that returned
 * while the hook still ran would see the count not yet grown. */
static void on_idle(void *userdata)
{
	(void)userdata;
	usleep(100 * 1000);
	pthread_mutex_lock(&t.lock);
	t.idles++;
	pthread_mutex_unlock(&t.lock);
}

static unsigned idles(void)
{
	unsigned n;

	pthread_mutex_lock(&t.lock);
	n = t.idles;
	pthread_mutex_unlock(&t.lock);
	return n;
}

static struct tjob *tjob(unsigned id, size_t bytes, bool gated)
{
	struct tjob *tj = calloc(1, sizeof(*tj));

	cr_assert(tj);
	tj->job.run = tjob_run;
	tj->job.free = tjob_free;
	tj->job.bytes = bytes;
	tj->id = id;
	tj->gated = gated;
	return tj;
}

static int submit(struct offload *o, unsigned id, size_t bytes, bool gated)
{
	struct tjob *tj = tjob(id, bytes, gated);
	int r = offload_submit(o, &tj->job);

	if (r < 0)
		free(tj); /* refused: still ours */
	return r;
}

/* Waits until the gated job is at the gate (fails the test after 10 s). */
static void wait_at_gate(void)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&t.lock);
	while (!t.at_gate)
		if (pthread_cond_timedwait(&t.cond, &t.lock, &until) == ETIMEDOUT)
			break;
	cr_assert(t.at_gate, "the first job never ran");
	pthread_mutex_unlock(&t.lock);
}

/* Job 0, of bytes, runs and waits at the gate. */
static void start_gated(struct offload *o, size_t bytes)
{
	cr_assert_eq(submit(o, 0, bytes, true), 0);
	wait_at_gate();
}

static void open_gate(void)
{
	pthread_mutex_lock(&t.lock);
	t.open = true;
	pthread_cond_broadcast(&t.cond);
	pthread_mutex_unlock(&t.lock);
}

static struct offload *ordered(size_t max_bytes, bool drop_oldest)
{
	struct offload *o = NULL;

	cr_assert_eq(offload_new(&(struct offload_opts){ .lanes = 1, .ordered = true,
							 .max_bytes = max_bytes,
							 .drop_oldest = drop_oldest, .idle = on_idle },
				 &o),
		     0);
	return o;
}

/* Fails the test unless the offload's counts are these. */
static void assert_counts(struct offload *o, uint64_t jobs, uint64_t bytes, uint64_t refused,
			  uint64_t dropped)
{
	struct offload_stats st;

	offload_get_stats(o, &st);
	cr_assert(st.jobs == jobs && st.bytes == bytes && st.refused == refused &&
		  st.dropped == dropped,
		  "jobs %lu bytes %lu refused %lu dropped %lu, expected %lu %lu %lu %lu",
		  (unsigned long)st.jobs, (unsigned long)st.bytes, (unsigned long)st.refused,
		  (unsigned long)st.dropped, (unsigned long)jobs, (unsigned long)bytes,
		  (unsigned long)refused, (unsigned long)dropped);
}

TestSuite(offload, .init = reset, .timeout = 30);

Test(offload, an_ordered_lane_runs_jobs_in_submission_order)
{
	struct offload *o = ordered(0, false);

	start_gated(o, 0);
	for (unsigned i = 1; i < MAX_JOBS; i++)
		cr_assert_eq(submit(o, i, 10, false), 0);
	open_gate();
	cr_assert_eq(offload_wait_idle(o, 10000), 0);
	cr_assert_eq(t.n_ran, MAX_JOBS);
	for (unsigned i = 0; i < MAX_JOBS; i++)
		cr_assert_eq(t.ran[i], i, "job %u ran as number %u", t.ran[i], i);
	offload_free(o);
}

Test(offload, the_bound_refuses_what_does_not_fit_and_counts_it)
{
	struct offload *o = ordered(250, false);

	start_gated(o, 100);
	/* the running job still weighs: 100 + 100 fit, a third does not */
	cr_assert_eq(submit(o, 1, 100, false), 0);
	cr_assert_eq(submit(o, 2, 100, false), -ENOBUFS);
	cr_assert_eq(submit(o, 3, 251, false), -ENOBUFS);
	cr_assert_eq(submit(o, 4, 50, false), 0);
	assert_counts(o, 3, 250, 2, 0);
	open_gate();
	cr_assert_eq(offload_wait_idle(o, 10000), 0);
	cr_assert_eq(t.n_ran, 3);
	cr_assert(t.ran[0] == 0 && t.ran[1] == 1 && t.ran[2] == 4);
	assert_counts(o, 0, 0, 2, 0);
	/* room again once the lane is through */
	cr_assert_eq(submit(o, 5, 250, false), 0);
	cr_assert_eq(offload_wait_idle(o, 10000), 0);
	cr_assert_eq(t.n_ran, 4);
	offload_free(o);
}

Test(offload, drop_oldest_drops_the_running_job_then_the_queued_ones)
{
	struct offload *o = ordered(250, true);

	start_gated(o, 100);
	cr_assert_eq(submit(o, 1, 100, false), 0);
	cr_assert_eq(submit(o, 2, 100, false), 0); /* 0, running, is marked */
	cr_assert_eq(submit(o, 3, 100, false), 0); /* 1, queued, is freed */
	assert_counts(o, 2, 200, 0, 1); /* the running one counts itself */
	cr_assert_eq(t.freed_unrun, 1);
	open_gate();
	cr_assert_eq(offload_wait_idle(o, 10000), 0);
	cr_assert_eq(t.n_ran, 3);
	cr_assert(t.ran[0] == 0 && t.ran[1] == 2 && t.ran[2] == 3);
	cr_assert(t.dropped_seen[0], "job 0 did not see it was dropped");
	cr_assert(!t.dropped_seen[2] && !t.dropped_seen[3]);
	assert_counts(o, 0, 0, 0, 1);
	offload_free(o);
}

Test(offload, wait_idle_includes_the_idle_hook)
{
	struct offload *o = ordered(0, false);
	unsigned before;

	cr_assert_eq(offload_wait_idle(o, 10000), 0);
	before = idles(); /* the lane's first, at its start */
	cr_assert_eq(submit(o, 0, 0, true), 0);
	cr_assert_eq(submit(o, 1, 0, false), 0);
	cr_assert_eq(offload_wait_idle(o, 50), -ETIMEDOUT);
	open_gate();
	cr_assert_eq(offload_wait_idle(o, 10000), 0);
	cr_assert_eq(idles(), before + 1, "one batch, one idle()");
	offload_free(o);
}

Test(offload, finish_cancels_and_counts_what_it_leaves)
{
	struct offload *o = ordered(0, false);
	struct offload_stats st;

	start_gated(o, 10);
	cr_assert_eq(submit(o, 1, 10, false), 0);
	cr_assert_eq(submit(o, 2, 10, false), 0);
	/* the gate never opens: job 0 returns on the cancel flag, and,
	 * running, counts itself; the two queued are finish's */
	cr_assert_eq(offload_finish(o, 50), 2);
	cr_assert_eq(submit(o, 3, 10, false), -ESHUTDOWN);
	offload_get_stats(o, &st);
	cr_assert_eq(st.dropped, 2);
	cr_assert_eq(st.refused, 1);
	offload_free(o);
	cr_assert_eq(t.n_ran, 1);
	cr_assert_eq(t.freed_unrun, 2);
}

static long ms_between(const struct timespec *t0, const struct timespec *t1)
{
	return (t1->tv_sec - t0->tv_sec) * 1000 + (t1->tv_nsec - t0->tv_nsec) / 1000000;
}

/* Nothing stuck: a pool's offload_free joins at once, the jobs running
 * returning on the cancel flag, and frees every job, those included (left
 * on the done list by their lanes, since they finished while stopping). */
Test(offload, free_joins_lanes_that_stop_and_frees_every_job)
{
	struct offload *o = NULL;
	struct timespec t0, t1;

	cr_assert_eq(offload_new(&(struct offload_opts){ .lanes = 3, .small_lanes = 1 }, &o), 0);
	start_gated(o, 10);
	cr_assert_eq(submit(o, 1, 10, true), 0);
	cr_assert_eq(submit(o, 2, 10, true), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	offload_free(o);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_lt(ms_between(&t0, &t1), 1000, "offload_free waited for lanes that stopped");
	cr_assert_eq(t.freed, 3);
}

/* A run() stuck in a syscall that does not return by itself (here a poll
 * on an eventfd nobody writes, as a read on a FUSE mount whose server does
 * not answer).  What the test watches it by is outside the job, so that
 * once offload_free gave up, only the offload's abandoned list still
 * reaches the offload and the job. */
static struct {
	int fd;
	atomic_bool entered, returned;
	atomic_uint freed;
} stuck;

static void stuck_run(struct offload_job *j)
{
	struct pollfd p = { .fd = stuck.fd, .events = POLLIN };

	atomic_store(&stuck.entered, true);
	(void)poll(&p, 1, 30 * 1000); /* blind to the cancel flag */
	atomic_store(&stuck.returned, true);
}

static void stuck_free(struct offload_job *j)
{
	atomic_fetch_add(&stuck.freed, 1);
	free(j);
}

/* The owner's, freed once offload_free returns: an idle() hook called
 * after that would be a use after free (ASan says so). */
struct stuck_owner {
	atomic_uint idles; /* both lanes run it at their start */
};

static void stuck_idle(void *userdata)
{
	struct stuck_owner *ow = userdata;

	atomic_fetch_add(&ow->idles, 1);
}

static bool wait_flag(atomic_bool *flag)
{
	for (int i = 0; i < 10000 && !atomic_load(flag); i++)
		usleep(1000);
	return atomic_load(flag);
}

/* On a thread of its own: starts a job that gets stuck, frees its offload
 * and the owner's userdata, and puts how long offload_free took in *arg,
 * in ms.  Returns NULL, or what went wrong.  A thread, not the test's own:
 * what it allocates is not under Criterion's frames, which lsan.supp
 * suppresses, and its pointers to the offload and the job are gone with
 * it, so that the leak check below sees only what offload.c keeps. */
static void *free_with_a_stuck_lane(void *arg)
{
	long *ret_ms = arg;
	struct stuck_owner *ow = calloc(1, sizeof(*ow));
	struct offload_job *j = calloc(1, sizeof(*j));
	struct offload *o = NULL;
	struct timespec t0, t1;

	if (!ow || !j)
		return "out of memory";
	j->run = stuck_run;
	j->free = stuck_free;
	/* two lanes: one stuck, the other joined; no take_back, so that a
	 * lane would free the job itself if it did not know better */
	if (offload_new(&(struct offload_opts){ .lanes = 2,
						 .may_abandon = true,
						 .idle = stuck_idle,
						 .userdata = ow },
			&o) < 0)
		return "offload_new failed";
	if (offload_wait_idle(o, 10000) < 0) /* the lanes' first idle() */
		return "the lanes never went idle";
	if (offload_submit(o, j) < 0)
		return "offload_submit failed";
	if (!wait_flag(&stuck.entered))
		return "the job never ran";
	clock_gettime(CLOCK_MONOTONIC, &t0);
	o = offload_free(o);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	free(ow);
	*ret_ms = ms_between(&t0, &t1);
	return NULL;
}

Test(offload, free_gives_up_on_a_stuck_lane_and_the_lane_touches_no_owner_memory_after)
{
	uint64_t one = 1;
	pthread_t th;
	void *failed;
	long ms = 0;

	stuck.fd = eventfd(0, EFD_CLOEXEC);
	cr_assert_geq(stuck.fd, 0);
	cr_assert_eq(pthread_create(&th, NULL, free_with_a_stuck_lane, &ms), 0);
	cr_assert_eq(pthread_join(th, &failed), 0);
	cr_assert_null(failed, "%s", (const char *)failed);
	cr_log_info("offload_free with a stuck lane took %ld ms", ms);
	/* it waited (not given up at once), but not for the job; generous
	 * above the 2 s for a loaded host */
	cr_assert_geq(ms, 1500, "offload_free took %ld ms: it did not wait", ms);
	cr_assert_lt(ms, 5000, "offload_free took %ld ms: it waited for the stuck lane", ms);
	cr_assert(!atomic_load(&stuck.returned));

	/* the server answers at last: the lane comes back, leaves the job
	 * (the abandoned offload keeps it) and ends, with no idle() and no
	 * free() of the owner's */
	cr_assert_eq(write(stuck.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	cr_assert(wait_flag(&stuck.returned), "the stuck job never returned");
	usleep(200 * 1000); /* for the lane to go through its end */
	close(stuck.fd);
	cr_assert_eq(atomic_load(&stuck.freed), 0);
#ifdef __SANITIZE_ADDRESS__
	/* the offload and the job are reachable, not leaks */
	cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "LeakSanitizer saw a leak");
#endif
}

/* Takes finished jobs until n came back or 10 s passed; counts each id
 * and notes their order in order[] (the test's own thread, as the loop). */
static unsigned take_all(struct offload *o, unsigned n, unsigned *seen, unsigned *order)
{
	unsigned got = 0;

	for (int tries = 0; got < n && tries < 10000; tries++) {
		struct offload_job *j = offload_take_done(o);

		if (!j)
			usleep(1000);
		while (j) {
			struct offload_job *next = j->next;
			struct tjob *tj = (struct tjob *)j;

			cr_assert_lt(tj->id, MAX_JOBS);
			seen[tj->id]++;
			if (order)
				order[got] = tj->id;
			got++;
			j->free(j);
			j = next;
		}
	}
	return got;
}

Test(offload, the_done_list_gives_each_job_back_once_in_the_order_it_finished)
{
	static unsigned seen[MAX_JOBS], order[MAX_JOBS];
	struct offload *o = NULL;

	cr_assert_eq(offload_new(&(struct offload_opts){ .lanes = 1, .ordered = true,
							 .take_back = true },
				 &o),
		     0);
	start_gated(o, 0);
	for (unsigned i = 1; i < MAX_JOBS; i++)
		cr_assert_eq(submit(o, i, 10, false), 0);
	open_gate();
	cr_assert_eq(take_all(o, MAX_JOBS, seen, order), MAX_JOBS);
	for (unsigned i = 0; i < MAX_JOBS; i++) {
		cr_assert_eq(seen[i], 1, "job %u came back %u times", i, seen[i]);
		cr_assert_eq(order[i], i, "job %u came back at %u", order[i], i);
	}
	offload_free(o);
}

/* Four lanes push onto the done list at once while this thread takes
 * from it: none is lost, none comes twice. */
Test(offload, lanes_finishing_at_once_lose_no_job_and_give_none_twice)
{
	static unsigned seen[MAX_JOBS];
	struct offload *o = NULL;

	cr_assert_eq(offload_new(&(struct offload_opts){ .lanes = 4, .take_back = true }, &o), 0);
	for (unsigned i = 0; i < MAX_JOBS; i++)
		cr_assert_eq(submit(o, i, 10, false), 0);
	cr_assert_eq(take_all(o, MAX_JOBS, seen, NULL), MAX_JOBS);
	for (unsigned i = 0; i < MAX_JOBS; i++)
		cr_assert_eq(seen[i], 1, "job %u came back %u times", i, seen[i]);
	offload_free(o);
}

/* Bumps reorder a pool's queue, newest bump first, even past the slots
 * offload_bump keeps for a lane (the lane is at the gate then, its lock
 * free, so the ones past them are applied at once). */
Test(offload, bumps_move_jobs_to_the_front_in_the_order_they_came)
{
	struct offload *o = NULL;
	const unsigned n = 400, bumped = 300;

	cr_assert_eq(offload_new(&(struct offload_opts){ .lanes = 1 }, &o), 0);
	start_gated(o, 0);
	for (unsigned i = 1; i <= n; i++) {
		struct tjob *tj = tjob(i, 0, false);

		tj->job.key = i;
		cr_assert_eq(offload_submit(o, &tj->job), 0);
	}
	/* 1, 2, ..., 300 bumped in turn: 300 ends in front */
	for (unsigned i = 1; i <= bumped; i++)
		offload_bump(o, i);
	open_gate();
	cr_assert_eq(offload_wait_idle(o, 10000), 0);
	cr_assert_eq(t.n_ran, n + 1);
	for (unsigned i = 0; i < bumped; i++)
		cr_assert_eq(t.ran[1 + i], bumped - i, "ran %u as number %u", t.ran[1 + i], 1 + i);
	for (unsigned i = bumped; i < n; i++) /* the rest newest first */
		cr_assert_eq(t.ran[1 + i], n - (i - bumped), "ran %u as number %u", t.ran[1 + i],
			     1 + i);
	offload_free(o);
}

/* Many jobs submitted while the lanes take them, the submitter pausing now
 * and then so that lanes go to sleep between jobs and must be woken. */
#define MANY 100000

static struct {
	_Atomic unsigned char runs[MANY];
	atomic_uint ran, out_of_order, last;
} many;

struct mjob {
	struct offload_job job; /* first */
	unsigned id;
};

static void mjob_run(struct offload_job *j)
{
	unsigned id = ((struct mjob *)j)->id;

	atomic_fetch_add(&many.runs[id], 1);
	/* an ordered lane runs one at a time: the previous is id - 1 */
	if (id && atomic_exchange(&many.last, id) != id - 1)
		atomic_fetch_add(&many.out_of_order, 1);
	atomic_fetch_add(&many.ran, 1);
}

static void mjob_free(struct offload_job *j)
{
	free(j);
}

/* Submits MANY jobs of 8 bytes; every so often waits (up to 10 s) for all
 * submitted so far to have run: a lane that missed its wake-up would
 * leave one waiting there. */
static void submit_many(struct offload *o)
{
	unsigned seed = 27;

	memset(&many, 0, sizeof(many));
	for (unsigned i = 0; i < MANY; i++) {
		struct mjob *mj = calloc(1, sizeof(*mj));

		cr_assert(mj);
		mj->id = i;
		mj->job.run = mjob_run;
		mj->job.free = mjob_free;
		mj->job.bytes = 8;
		mj->job.big = i % 3 == 0;
		cr_assert_eq(offload_submit(o, &mj->job), 0);
		if (rand_r(&seed) % 16 == 0)
			usleep((unsigned)rand_r(&seed) % 200);
		if (rand_r(&seed) % 64 == 0) {
			for (int tries = 0; atomic_load(&many.ran) <= i && tries < 100000; tries++)
				usleep(100);
			cr_assert_gt(atomic_load(&many.ran), i, "job %u waits: a lost wake-up", i);
		}
	}
	cr_assert_eq(offload_wait_idle(o, 20000), 0);
	cr_assert_eq(atomic_load(&many.ran), MANY);
	for (unsigned i = 0; i < MANY; i++)
		cr_assert_eq(many.runs[i], 1, "job %u ran %u times", i, many.runs[i]);
	assert_counts(o, 0, 0, 0, 0);
}

Test(offload, an_ordered_lane_fed_while_it_runs_keeps_order_and_misses_no_wake_up, .timeout = 120)
{
	struct offload *o = NULL;

	/* no idle() hook: ordered()'s takes 100 ms, each time the lane waits */
	cr_assert_eq(offload_new(&(struct offload_opts){ .lanes = 1, .ordered = true,
							 .max_bytes = 1 << 20 },
				 &o),
		     0);
	submit_many(o);
	cr_assert_eq(atomic_load(&many.out_of_order), 0);
	offload_free(o);
}

Test(offload, a_pool_fed_while_it_runs_runs_each_job_once, .timeout = 120)
{
	struct offload *o = NULL;

	cr_assert_eq(offload_new(&(struct offload_opts){ .lanes = 3, .small_lanes = 1,
							 .max_bytes = 1 << 20 },
				 &o),
		     0);
	submit_many(o);
	offload_free(o);
}

/* Two submitters race for the last room under the bound: what is admitted
 * never weighs more than it, and refused plus run is what was offered. */
struct racer {
	struct offload *o;
	unsigned admitted, refused;
};

static atomic_uint racing_bytes, racing_peak;

static void rjob_run(struct offload_job *j)
{
	unsigned now = atomic_load(&racing_bytes), peak = atomic_load(&racing_peak);

	while (now > peak && !atomic_compare_exchange_weak(&racing_peak, &peak, now))
		;
	usleep(10);
	atomic_fetch_sub(&racing_bytes, (unsigned)j->bytes);
}

static void *race(void *arg)
{
	struct racer *r = arg;

	for (unsigned i = 0; i < 20000; i++) {
		struct offload_job *j = calloc(1, sizeof(*j));

		cr_assert(j);
		j->run = rjob_run;
		j->free = mjob_free;
		j->bytes = 100;
		/* counted before it is offered: its run() may come first */
		atomic_fetch_add(&racing_bytes, 100);
		if (offload_submit(r->o, j) == 0) {
			r->admitted++;
		} else {
			atomic_fetch_sub(&racing_bytes, 100);
			free(j);
			r->refused++;
		}
	}
	return NULL;
}

Test(offload, racing_submitters_never_pass_the_bound, .timeout = 120)
{
	struct racer r[2] = { 0 };
	pthread_t th[2];
	struct offload_stats st;
	struct offload *o = NULL;

	cr_assert_eq(offload_new(&(struct offload_opts){ .lanes = 2, .max_bytes = 1000 }, &o), 0);
	for (int i = 0; i < 2; i++) {
		r[i].o = o;
		cr_assert_eq(pthread_create(&th[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(offload_wait_idle(o, 20000), 0);
	offload_get_stats(o, &st);
	cr_assert_eq(st.refused, r[0].refused + r[1].refused);
	cr_assert_eq(st.jobs, 0);
	cr_assert_eq(st.bytes, 0);
	cr_assert_gt(r[0].refused + r[1].refused, 0, "the bound never filled: no race tested");
	/* a run() sees its own job's bytes and those admitted or being offered
	 * (two at most, one per submitter, 100 each) */
	cr_assert_leq(atomic_load(&racing_peak), 1000 + 2 * 100);
	offload_free(o);
}

/* The lanes carry their offload's name, NAME-INDEX, where top -H, perf and
 * gdb show it. */
struct name_job {
	struct offload_job job; /* first */
	char name[16];
};

static void name_run(struct offload_job *j)
{
	struct name_job *nj = (struct name_job *)j;

	(void)pthread_getname_np(pthread_self(), nj->name, sizeof(nj->name));
}

static void name_free(struct offload_job *j)
{
	(void)j;
}

Test(offload, each_lane_is_named_after_its_offload)
{
	struct offload *o;
	struct name_job nj = { .job = { .run = name_run, .free = name_free } };

	cr_assert_eq(offload_new(&(struct offload_opts){ .lanes = 1, .ordered = true,
							 .name = "perfd-test" },
				 &o),
		     0);
	cr_assert_eq(offload_submit(o, &nj.job), 0);
	cr_assert_eq(offload_wait_idle(o, OFFLOAD_FOREVER), 0);
	cr_assert_str_eq(nj.name, "perfd-test-0");
	offload_free(o);
}
