/* SPDX-License-Identifier: MIT */
/*
 * writer.h - the thread that puts the state directory's bytes on disk.
 *
 * The loop encodes (persist.c); this thread appends, syncs and deletes, so
 * a slow or full disk never stalls the loop.  The thread is an ordered
 * offload lane (base/offload.h): jobs run in order, append bytes to
 * segment N (creating it), remove segment N.  When the lane runs out of
 * work the segment appended to is fdatasync()ed: what a batch appended is
 * on disk before the next is taken.
 *
 * Bounded: past max_bytes queued or being written, an append is refused
 * (by the lane's bound, and counted) and
 * the caller starts a new segment, since later records of a segment may
 * need the refused ones.  A failed write (ENOSPC, EIO) truncates the
 * segment back to its last whole record and marks it broken: the next
 * append to it is refused too, with the same remedy.
 */
#ifndef PERFD_STATE_WRITER_H
#define PERFD_STATE_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/statefile.h"

struct state_writer_stats {
	uint64_t bytes_written, appends, syncs;
	uint64_t refused;      /* appends refused: queue full, or segment broken */
	uint64_t write_errors;
	size_t queued_bytes;
	int last_error;        /* -errno of the last failed write, 0 */
};

struct state_writer;

/* dirfd: the state directory (dup'ed).  Returns 0 or -errno. */
int state_writer_new(int dirfd, size_t max_bytes, struct state_writer **ret);
struct state_writer *state_writer_free(struct state_writer *w);

/* The name of segment seq in the state directory. */
void state_segment_name(uint64_t seq, char *buf, size_t size);

/* Queues b's bytes (taken: b is left empty) for segment seq.  Returns false
 * when refused: the caller must start another segment. */
bool state_writer_append(struct state_writer *w, uint64_t seq, struct sbuf *b);
void state_writer_remove(struct state_writer *w, uint64_t seq);
/* Waits until every job queued so far is done. */
void state_writer_sync(struct state_writer *w);
void state_writer_get_stats(struct state_writer *w, struct state_writer_stats *ret);

#endif
