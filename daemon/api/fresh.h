/* SPDX-License-Identifier: MIT */
/*
 * fresh.h - queries answered as of the moment they came, without holding
 * the loop while the samples before that moment are ingested.
 *
 * A query (ps, top, mem, a snapshot) answers with every sample taken
 * before it arrived.  Those may still sit in the ring buffer or in the
 * drain's queue (collect/drain.h), which the loop ingests in slices of a
 * bounded time.  So its client waits (pending, as for a live snapshot)
 * until the records queued when it came are in (collect/ingest_wait.h),
 * and then its command runs, on a turn of its own.  At rest the backlog
 * fits in one slice and the command runs at once.  A client that goes
 * away drops its wait; a "stop" that comes while a live snapshot waits
 * ends it as soon as it has started.  Cost: one parsed request kept per
 * waiting client (at most one per client: api/server.h).
 */
#ifndef PERFD_FRESH_H
#define PERFD_FRESH_H

struct daemon;
struct client;
struct perfd_request;

/* Runs req's command for c once the records queued before now are
 * ingested.  Returns what the command's run returns when that is at once,
 * else SERVER_PENDING (c waits; its cancel drops the wait). */
int fresh_dispatch(struct daemon *d, struct client *c, const struct perfd_request *req);

#endif
