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
 * The loop then takes the whole queue at once and ingests it.
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

struct drain_stats {
	uint64_t records, batches;
	uint64_t wakeups;             /* ... of which BPF woke before the interval */
	uint64_t dropped;             /* records lost: the queue was full */
	uint64_t dropped_samples;     /* ... of which samples */
	uint64_t max_consume_ns;      /* longest one consume held the drain thread */
	size_t queued_bytes, max_queued_bytes;
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
/* Hands every queued record, oldest first, to fn.  Loop thread only.
 * Returns the count. */
size_t drain_deliver(struct drain *d, int (*fn)(void *ctx, void *data, size_t size), void *ctx);
void drain_get_stats(struct drain *d, struct drain_stats *ret);
/* Stops and joins the thread, frees what is queued. */
struct drain *drain_free(struct drain *d);

#endif
