/* SPDX-License-Identifier: MIT */
/*
 * offload.h - threads that do the event loop's slow work, and the one
 * thread-and-queue mechanism of the daemon: building unwind tables
 * (unwind/builder.h), checking a debug file's CRC (symbols/debugsearch.h),
 * putting the state directory's bytes on disk (state/writer.h), handing
 * profiles to an exporter's sink (export/worker.h) and walking malloc's
 * arenas for their figures and to trim them (base/heap.h).
 *
 * A job is a struct the owner embeds a struct offload_job in, with a run()
 * the lanes call on their thread.  An offload is one of two kinds:
 *
 * - a pool (the default): lanes serve the queue newest first (the work of
 *   what runs now before a backlog; offload_bump moves an old job to the
 *   front), and the first small_lanes of them skip jobs marked big, so
 *   that a small job never waits behind a big one;
 * - an ordered lane (opts.ordered): one thread runs the jobs in the order
 *   they were submitted, for work whose order is its meaning (appends to
 *   a file, profiles sent oldest first).
 *
 * Either can be bounded: a job weighs its bytes from offload_submit until
 * its run() returns, and past max_bytes a new job is refused (the caller
 * sees -ENOBUFS and keeps its job), or, with drop_oldest (ordered lanes
 * only), the oldest jobs are dropped to make room: queued ones are freed
 * and counted, the one running is marked dropped (its run() sees
 * offload_dropped() and counts it by what became of it).  At shutdown
 * offload_finish waits, up to a time, for the queue to run empty, and
 * counts what was still queued as dropped; a job running then sees the
 * cancel flag and counts itself by what became of it.
 *
 * A finished job goes, with take_back, to the done list, and the eventfd
 * (offload_fd) says so: the loop takes the list with offload_take_done and
 * finishes each job itself; without it the lane frees the job.  The idle()
 * hook, if any, runs on the lane each time it runs out of work (the state
 * writer syncs what it appended, the files exporter prunes), and when
 * offload_kick asks.
 *
 * Ownership, the only rules that cross threads: a job is the owner's until
 * offload_submit, the lanes' until it is done (or freed), and the owner's
 * again from offload_take_done on.  run() touches only its own job (and
 * what the job owns, and what the owner gives the lane alone).  A run()
 * may be stuck in a syscall that does not return by itself (a read on a
 * FUSE or NFS mount whose server does not answer, or of /proc/PID/maps of
 * a process whose mmap lock such a read holds).  With opts.may_abandon,
 * offload_free waits for all the lanes up to OFFLOAD_JOIN_MAX_MS (2 s)
 * together, then leaves such a lane running, detached, and frees neither
 * the offload nor its jobs: so an offload may set it only if its run()
 * touches nothing but its job (and what the job owns), since the owner
 * frees the rest once offload_free returns, and its idle() hook, if any,
 * never blocks.  A lane that comes back after offload_free gave up touches
 * only its offload, never the owner's hooks nor a job's free().  Without
 * it offload_free waits for every lane, however long.
 *
 * Nothing the loop calls waits on a lock a lane holds: a lane runs at a
 * lower priority, and on a busy host one preempted while holding the
 * lanes' mutex kept the loop waiting up to 120 ms per take and 153 ms per
 * submission.  The mutex is the lanes' own: the queue, and who is busy.
 * - offload_submit counts the job's bytes with atomics (a compare-and-swap
 *   adds them only if they fit, so the bound is exact; a drop_oldest lane
 *   takes them, then drops), pushes the job onto an inbox with a
 *   compare-and-swap, and changes a futex word the lanes sleep on.  A lane
 *   takes the inbox whole, with an exchange, into its queue before it
 *   picks a job or sleeps; it sleeps only if the inbox is empty after it
 *   read the word, so a wake-up is never lost.  Over the bound, a
 *   drop_oldest lane's oldest jobs are dropped at once if the mutex is
 *   free (trylock), else by the lane that holds it, before it lets go.
 * - offload_bump writes the key into a bounded queue of requests (256)
 *   that a lane applies before it picks its next job; one full (the lanes
 *   all deep in run() since) is applied at once if the mutex is free, else
 *   lost: the job keeps its place.
 * - lanes push finished jobs onto the done list with a compare-and-swap,
 *   and offload_take_done takes it whole with an exchange.
 * - offload_get_stats reads atomics; offload_set_max_bytes writes one.
 * offload_kick, offload_wait_idle and offload_finish (a reload, shutdown)
 * still take the mutex.  Cost: a lane is a thread that sleeps on a futex
 * when there is no work; a submission is two compare-and-swaps and, when a
 * lane sleeps, a futex wake-up (measured with tests/bench/offloadbench.c).
 */
#ifndef PERFD_OFFLOAD_H
#define PERFD_OFFLOAD_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct offload;

struct offload_job {
	struct offload_job *next;
	uint64_t key;  /* the owner's name for the job, for offload_bump */
	size_t bytes;  /* what it weighs against max_bytes */
	bool big;      /* taken only by the lanes past small_lanes */
	void (*run)(struct offload_job *j);  /* on a lane's thread */
	void (*free)(struct offload_job *j); /* frees a job not taken back */
	/* set by offload_submit: true once the lanes are wanted back, for a
	 * long run() to check now and then and return early */
	const atomic_bool *cancel;
	/* the rest is set by offload_submit, for offload_dropped/_sleep */
	atomic_bool dropped;
	struct offload *owner;
};

struct offload_opts {
	unsigned lanes;       /* threads; an ordered offload has one */
	unsigned small_lanes; /* of them, those that skip big jobs */
	bool ordered;         /* one lane, jobs in submission order */
	bool background;      /* lanes at PRIORITY_BACKGROUND_NICE, not the creator's */
	size_t max_bytes;     /* bound on the jobs' bytes, 0: none */
	bool drop_oldest;     /* full: drop the oldest, not refuse the new */
	bool take_back;       /* finished jobs go to offload_take_done */
	bool may_abandon;     /* offload_free may leave a stuck lane (above) */
	const char *name;     /* the lanes' thread names, NAME-0.. (top -H, gdb); NULL: none */
	void (*idle)(void *userdata); /* on the lane, out of work (may be NULL) */
	void *userdata;
};

struct offload_stats {
	uint64_t jobs, bytes; /* submitted, not yet done nor dropped */
	uint64_t refused;     /* submits refused: full, too big, finished */
	uint64_t dropped;     /* queued jobs dropped: full, or at offload_finish */
};

/* For offload_wait_idle and offload_finish: no time limit. */
#define OFFLOAD_FOREVER UINT_MAX

/* Starts the lanes (a pool needs at least one more than small_lanes, so
 * that big jobs are served; ordered and drop_oldest need one lane).
 * Returns 0 or -errno (-EINVAL, -ENOMEM, pthread's). */
int offload_new(const struct offload_opts *opts, struct offload **ret);
/* Stops the lanes (after the job each is in, which its cancel flag asks to
 * end early) and frees, with their free(), the jobs queued or done but not
 * taken back.  With opts.may_abandon, lanes not back within
 * OFFLOAD_JOIN_MAX_MS are left running (the ownership rules above) and
 * logged once at warning level.  Accepts NULL. */
struct offload *offload_free(struct offload *o);

/* Queues j (its run, free and bytes set): at the front of a pool, at the
 * back of an ordered lane.  Returns 0, or -ENOBUFS when the bound refuses
 * it, -ESHUTDOWN after offload_finish; j is then still the caller's.  An
 * unbounded offload refuses nothing before offload_finish. */
int offload_submit(struct offload *o, struct offload_job *j);
/* A new bound, for the jobs submitted from now on. */
void offload_set_max_bytes(struct offload *o, size_t max_bytes);
/* Moves the queued job of key, if any, to the front of the queue. */
void offload_bump(struct offload *o, uint64_t key);
/* Runs the idle() hook once more on each lane, once it is out of work. */
void offload_kick(struct offload *o);
/* The jobs finished since the last call (a list through next, oldest
 * first), or NULL.  Reads the eventfd empty. */
struct offload_job *offload_take_done(struct offload *o);
/* Readable when offload_take_done has jobs to give (take_back only). */
int offload_fd(const struct offload *o);

/* Waits until no job is queued or running and the idle() hooks are done.
 * Returns 0, or -ETIMEDOUT after timeout_ms. */
int offload_wait_idle(struct offload *o, unsigned timeout_ms);
/* At shutdown: waits as offload_wait_idle, then stops taking jobs and
 * cancels the running ones; what was queued or running then counts as
 * dropped.  Returns how many that is.  The caller frees the offload next. */
size_t offload_finish(struct offload *o, unsigned timeout_ms);
void offload_get_stats(struct offload *o, struct offload_stats *ret);

/* For run(): whether a drop_oldest lane dropped this job while it ran. */
static inline bool offload_dropped(struct offload_job *j)
{
	return atomic_load(&j->dropped);
}
/* For run(): sleeps ms, or less if the job is cancelled or dropped
 * meanwhile.  Returns false when it is. */
bool offload_sleep(struct offload_job *j, unsigned ms);

#endif
