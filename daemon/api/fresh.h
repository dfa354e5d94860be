/* SPDX-License-Identifier: MIT */
/*
 * fresh.h - queries answered as of the moment they came, without holding
 * the loop while the samples before that moment are ingested.
 *
 * A query (ps, top, mem, a snapshot) answers with every sample taken
 * before it arrived.  Those may still sit in the ring buffer or in the
 * drain's queue (collect/drain.h), which the loop ingests in slices of a
 * bounded time.  Ingesting them all inside the request would hold every
 * other client, status included, for as long as the backlog takes:
 * seconds, once the loop has fallen behind.  So the request moves what the
 * ring holds into the queue, notes the queue's mark, and its client waits
 * (pending, as for a live snapshot) until the slices have delivered up to
 * that mark; then its command runs, from an event source of its own, not
 * from inside a slice.  At rest the backlog fits in one slice and the
 * command runs at once.  A "stop" that comes while a live snapshot waits
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
/* After a delivery: the waits it satisfied run soon (on their own turn). */
void fresh_delivered(struct daemon *d);
/* Drops the event source (the waits go with their clients). */
void fresh_free(struct daemon *d);

#endif
