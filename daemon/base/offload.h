/* SPDX-License-Identifier: MIT */
/*
 * offload.h - threads that do the event loop's slow file work: building
 * unwind tables (unwind/builder.h), checking a debug file's CRC
 * (symbols/debugsearch.h).  One mechanism for every such job, so that the
 * loop never reads a whole file a process's owner chose.
 *
 * A job is a struct the owner embeds a struct offload_job in, with a run()
 * the lanes call on their thread.  Lanes serve the queue newest first (the
 * work of what runs now before a backlog; offload_bump moves an old job to
 * the front), and the first small_lanes of them skip jobs marked big, so
 * that a small job never waits behind a big one.  A finished job goes to
 * the done list and the eventfd (offload_fd) says so; the loop takes the
 * list with offload_take_done and finishes each job itself.
 *
 * Ownership, the only rules that cross threads: a job is the owner's until
 * offload_submit, the lanes' until it is done, and the owner's again from
 * offload_take_done on.  run() touches only its own job (and what the job
 * owns); the queue and the done list are under one mutex.  Cost: a lane is
 * a thread that sleeps on a condition variable when there is no work.
 *
 * Lanes run at nice 10: on a machine of two CPUs, a lane reading a debug
 * file for its CRC and the process being profiled take both, and the
 * loop, which answers status, must not wait for a time slice behind them
 * (CFS then gives it about nine tenths of a CPU they share).
 */
#ifndef PERFD_OFFLOAD_H
#define PERFD_OFFLOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct offload_job {
	struct offload_job *next;
	uint64_t key;  /* the owner's name for the job, for offload_bump */
	bool big;      /* taken only by the lanes past small_lanes */
	void (*run)(struct offload_job *j);  /* on a lane's thread */
	void (*free)(struct offload_job *j); /* frees a job never taken back */
	/* set by offload_submit: true once offload_free wants the lanes back,
	 * for a long run() to check now and then and return early */
	const atomic_bool *cancel;
};

struct offload;

/* Starts lanes threads (at least one more than small_lanes, so that big
 * jobs are served).  Returns 0 or -errno (-EINVAL, -ENOMEM, pthread's). */
int offload_new(unsigned lanes, unsigned small_lanes, struct offload **ret);
/* Stops the lanes (after the job each is in, which its cancel flag asks to
 * end early) and frees, with their free(), the jobs queued or done but not
 * taken back.  Accepts NULL. */
struct offload *offload_free(struct offload *o);

/* Queues j (its run and free set) at the front and wakes the lanes. */
void offload_submit(struct offload *o, struct offload_job *j);
/* Moves the queued job of key, if any, to the front of the queue. */
void offload_bump(struct offload *o, uint64_t key);
/* The jobs finished since the last call (a list through next, oldest
 * first), or NULL.  Reads the eventfd empty. */
struct offload_job *offload_take_done(struct offload *o);
/* Readable when offload_take_done has jobs to give. */
int offload_fd(const struct offload *o);

#endif
