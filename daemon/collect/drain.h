/* SPDX-License-Identifier: MIT */
/*
 * drain.h - the thread that only drains the BPF ring buffer.
 *
 * Everything slow the daemon does (reading /proc and binaries when a
 * process appears, finding a runtime, naming and encoding a 100k-stack
 * snapshot) runs on the main thread, the sd-event loop, except building
 * unwind tables, which has a thread of its own (unwind/builder.h).  If that loop also drained the ring buffer, each of those would
 * stall sampling: the ring fills and the kernel drops samples.  So one
 * thread of its own drains it: on the ring's wake-ups, and every interval
 * when the BPF side does not ask sooner, it copies each record into a
 * queue of chunks in user space and tells the loop through an eventfd.
 * The loop ingests the queue in slices of a bounded size and time
 * (struct drain_budget): when a slice leaves records, the eventfd is made
 * readable again, so the loop serves the clients and timers that became
 * ready meanwhile and comes back for the next slice.  Records still queued
 * are not lost; only a queue that reaches its bound drops, counted.
 *
 * Ownership, the only rules that cross threads:
 *  - the ring buffer is consumed under ring_lock, by the drain thread or by
 *    the loop when it needs the very latest records (before answering
 *    status, ps or a snapshot: drain_now);
 *  - the queue (chunk list, byte count, drop counter) is under queue_lock;
 *    records enter it only from a consume and leave only through
 *    drain_deliver, on the loop, in the order they came;
 *  - nothing else is shared: the drain thread never touches the store,
 *    the symbolizer or a client.
 * The queue is bounded (max_queued_bytes): a loop that falls that far
 * behind loses records, counted as lost samples (queue_full), instead of
 * growing the daemon without end.  Cost: one memcpy per record and a lock
 * per consume.
 */
#ifndef PERFD_DRAIN_H
#define PERFD_DRAIN_H

#include <stddef.h>
#include <stdint.h>

struct sampler;

struct drain_opts {
	size_t max_queued_bytes;
	unsigned interval_ms; /* drain at least this often */
};

/* How much one drain_deliver may hand over: it stops after max_records
 * records or once max_ns have passed, whichever comes first (0: no bound
 * on that one).  At least one record goes per call, so a slice always
 * makes progress. */
struct drain_budget {
	size_t max_records;
	uint64_t max_ns;
};

struct drain_stats {
	uint64_t records, batches;
	uint64_t slices;              /* drain_deliver calls that handed over records */
	uint64_t slices_cut;          /* ... of which the budget ended with records left */
	uint64_t max_slice_records;   /* the most records one call handed over */
	uint64_t wakeups;             /* ... of which BPF woke before the interval */
	uint64_t dropped;             /* records lost: the queue was full */
	uint64_t dropped_samples;     /* ... of which samples */
	uint64_t max_consume_ns;      /* longest one consume held the drain thread */
	size_t queued_bytes, max_queued_bytes;
	uint64_t queued_records, queued_samples; /* waiting for the loop now */
};

struct drain;

int drain_new(const struct drain_opts *opts, struct drain **ret);
/* The sampler's on_record callback (ctx: the drain): queues a copy. */
int drain_enqueue(void *ctx, void *data, size_t size);
/* Starts the thread on the sampler's ring buffer.  Returns 0 or -errno. */
int drain_start(struct drain *d, struct sampler *s);
/* Readable when records are queued (an eventfd; the loop reads it empty). */
int drain_fd(const struct drain *d);
/* Consumes what the ring holds now into the queue (any thread). */
int drain_now(struct drain *d);
/* Hands queued records, oldest first, to fn until the queue is empty or
 * budget is spent (NULL: no bound).  What is left stays queued and
 * drain_fd is readable again.  Loop thread only.  Returns the count. */
size_t drain_deliver(struct drain *d, const struct drain_budget *budget,
		     int (*fn)(void *ctx, void *data, size_t size), void *ctx);
/* Records queued since the start (a mark: the ones queued up to now are
 * delivered once drain_delivered reaches it), and records handed to the
 * loop since the start. */
uint64_t drain_queued_mark(struct drain *d);
uint64_t drain_delivered(struct drain *d);
void drain_get_stats(struct drain *d, struct drain_stats *ret);
/* Stops and joins the thread, frees what is queued. */
struct drain *drain_free(struct drain *d);

#endif
