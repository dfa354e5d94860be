/* SPDX-License-Identifier: MIT */
/*
 * writer.h - the thread that puts the state directory's bytes on disk.
 *
 * The loop encodes (persist.c); this thread appends, syncs and deletes, so
 * a slow or full disk never stalls the loop.  The thread is an ordered
 * offload lane (base/offload.h): jobs run in order, append bytes to
 * segment N (creating it), remove segment N.  What is appended is in the
 * kernel at once, so perfd's own death (kill -9, a watchdog, a crash)
 * loses none of it; it goes to the disk itself (fdatasync) when the lane
 * runs out of work and STATE_SYNC_NS passed since the last time, when a
 * segment is left for the next, and at state_writer_wait(, true) (SIGTERM): the
 * machine's crash loses at most the last STATE_SYNC_NS.  A sync every
 * batch (2 s) slept the thread four times a flush, half of a daemon at
 * rest's wake-ups, and wrote the disk every 2 s for nothing a perfd
 * crash needs.
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

/* As the kernel's own writeback of dirty pages (dirty_expire_centisecs). */
#define STATE_SYNC_NS (30ULL * 1000 * 1000 * 1000)

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
/* Waits until every job queued so far is done (and the lane's idle
 * sync), and with to_disk until what they appended is on the disk. */
void state_writer_wait(struct state_writer *w, bool to_disk);
void state_writer_get_stats(struct state_writer *w, struct state_writer_stats *ret);

#endif
