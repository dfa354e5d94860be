/* SPDX-License-Identifier: MIT */
/*
 * persist.h - the store on disk: what lets a restart, a crash or an
 * upgrade keep the last hour of every process's profile.
 *
 * The state directory (--state-dir, /var/lib/perfd) holds segments
 * (statefile.h's format), each a self-contained journal of records:
 *
 *   SEGMENT  when it was started: wall clock, CLOCK_MONOTONIC, the CPU
 *            sampling period its CPU values count in
 *   STRING   a name, file or path; numbered in the order they come
 *   FRAME    one frame word and what it resolved to when written: kind,
 *            function, module path and build-id, offset; file and line
 *            for Python frames (theirs cost nothing), not for native ones
 *            (reading a binary's DWARF line table costs up to seconds on
 *            the loop, and the first flush meets every binary sampled)
 *   STACK    a stack id and its frames
 *   PROCESS  who a process is: pid, start time, owner, comm, cgroup, its
 *            counts (all samples, and those its owner may count)
 *   WINDOW   one sealed window of a process: its span, owner, RSS and
 *            entries (stack, thread, kind, value)
 *
 * Each record is written before the first that needs it, once a segment,
 * so any segment can be read, or deleted, alone.  Frames go to disk
 * resolved: a profile read back names its code as it was named when it
 * ran, even when the binaries were upgraded since (the restart was for
 * that), and needs none of them.
 *
 * Every PERSIST_FLUSH_S (persist_flush, after the store's maintenance) the
 * windows sealed since the last flush are encoded on the loop (for
 * PERSIST_FLUSH_SLICE_NS a turn) and handed to the writer thread (writer.h), which appends them: a window
 * is in the file at most HISTORY_SEAL_AFTER_S + PERSIST_FLUSH_S + 1 s after it
 * ends (~6 s after a sample; on the disk itself within STATE_SYNC_NS more), unless its frames' symbol tables are still being built off the
 * loop (symbolize.h): then it, and its process's later windows, wait for
 * them, up to PERSIST_NAMES_WAIT_S past its end (a flush every second woke the writer and synced the disk every
 * second, on a daemon at rest too).  A new segment is
 * started every PERSIST_SEGMENT_S; a segment whose newest window is past
 * the retention is deleted, and the oldest go first past max_bytes.  At
 * SIGTERM the open windows are written too and the writer is waited for:
 * nothing is lost.  After kill -9, at most what was not flushed yet.
 *
 * A share per owner: one user's churn (every new process and stack is
 * defined again in each segment) must not push the others' history off
 * the disk.  A segment takes at most max_bytes / (retention /
 * PERSIST_SEGMENT_S + 1) bytes, so that the segments holding windows
 * within the retention, the one being written included, fit in max_bytes
 * and none goes early; once 3/4 of a segment's budget is used, an owner
 * (a window's uid) that wrote its share of it (the budget divided among
 * the owners that wrote to it) writes no more to it, so the last quarter
 * is left to the owners that wrote little.  A window held back is left
 * off the disk (still in memory) and counted by cause.
 *
 * At start (persist_restore) every segment of this boot is read back in
 * order into the store: processes (running ones are picked up again,
 * others are exited), stacks, windows.  Restored frames resolve from a
 * table here (persist_resolve), as FRAME_MODULE_STORED frames; it counts
 * inside the store's --max-memory, and at each flush what no stack names
 * any more (the windows that did expired or were evicted) is freed: all
 * of it when no stack names a restored frame, else a compacted copy once
 * half of what was named is gone.  Nothing in
 * the directory is trusted: a file that is not a state file, of another
 * version or of another boot (its CLOCK_MONOTONIC times mean nothing now)
 * is moved aside with a message; a damaged record ends what is read of its
 * segment (a torn tail, after a crash mid-write, is dropped and counted).
 */
#ifndef PERFD_PERSIST_H
#define PERFD_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/aggregate.h"
#include "profile/frame.h"
#include "profile/model.h"

#define PERSIST_DEFAULT_DIR "/var/lib/perfd"
#define PERSIST_DEFAULT_MAX_BYTES (256ULL << 20)
#define PERSIST_SEGMENT_S 300
/* How often what was sealed goes to disk.  With HISTORY_SEAL_AFTER_S, what
 * a kill -9 can take: a sample is in a 1 s window, sealed 2 s after it
 * ends at the maintenance of that second, and written at the next flush:
 * on disk at most ~6 s after it was taken (the ticks fall where they
 * fall).  Both are short for that: a
 * sample ingested later than the seal (waiting for its frames, at most
 * FRAMES_WAIT_NS) goes to the newest open window, a second or two off,
 * and a flush writes only when something was sealed. */
#define PERSIST_FLUSH_S 2
/* One flush writes windows for this long at most on the loop (the first
 * one whatever it takes); the rest go at the next maintenance, a second
 * later, and the flush is counted as cut. */
#define PERSIST_FLUSH_SLICE_NS (20 * 1000 * 1000ULL)
/* What the writer may fall behind by before a segment is cut short. */
#define PERSIST_MAX_QUEUED_BYTES (64u << 20)
/* How long past its end a window waits, at most, for the names of its
 * frames: symbol tables are built off the loop (symbolize.h), and a frame
 * is written once a segment, named as it is then. */
#define PERSIST_NAMES_WAIT_S 60

struct persist_opts {
	const char *dir;
	uint64_t max_bytes;   /* all segments; 0: PERSIST_DEFAULT_MAX_BYTES */
	uint64_t retention_s;
	/* No writer (no thread): segments are read back, nothing is written
	 * or removed, persist_flush does nothing.  The fuzz harness reads
	 * thousands of segments a second, each with a state of its own. */
	bool read_only;
};

/* How the daemon names a frame (its resolver routes FRAME_MODULE_STORED
 * frames back to persist_resolve). */
struct persist_names {
	frame_resolver_t resolve;
	module_describer_t describe;
	void *ctx;
	frame_pending_t pending; /* NULL: names never wait */
};

struct persist_stats {
	uint64_t segments, disk_bytes;
	uint64_t flushes;
	uint64_t flushes_cut; /* left processes for the next second (PERSIST_FLUSH_SLICE_NS) */
	double longest_flush_ms; /* one flush's encoding, on the loop */
	uint64_t windows_written, processes_written, stacks_written, frames_written;
	uint64_t windows_unwritten;  /* could not be queued (the writer fell behind) */
	uint64_t windows_waited_for_names; /* flushes a window waited at, for
					    * its frames' symbol tables */
	/* not written, held back by the share of the disk (see above): the
	 * segment was full, or its owner had written its share of it */
	uint64_t windows_refused_segment_full, windows_refused_owner_share;
	uint64_t segments_removed;   /* past the retention or max_bytes */
	/* the last restore */
	uint64_t processes_restored, windows_restored, samples_restored;
	uint64_t windows_skipped;    /* past the retention, or out of order */
	uint64_t records_rejected;   /* checked, but not meaningful (a stack of
				      * unknown frames, a window of no process) */
	uint64_t torn_bytes;         /* after the last whole record of a segment */
	uint64_t files_moved_aside;
	uint64_t restore_ms;
	size_t restored_frames, restored_bytes;
	/* the restored frames' table: dropped (no stack names one of its
	 * frames any more), made to fit what is still named */
	uint64_t restored_table_freed, restored_table_compacted;
	/* the writer's */
	uint64_t bytes_written, syncs, write_errors, appends_refused;
	int last_write_error;
};

struct persist;

/* Opens (creating it) and locks the state directory, and starts the
 * writer unless o->read_only.  Returns 0, -EBUSY (another perfd has it), -EPERM (not ours
 * alone: owned by another user, or writable by others) or -errno. */
int persist_open(const struct persist_opts *o, struct persist **ret);
struct persist *persist_free(struct persist *ps);
const char *persist_dir(const struct persist *ps);

/* Reads the segments back into a; CPU values written under another
 * sampling period are scaled to period_ns.  Logs what it moved aside. */
void persist_restore(struct persist *ps, struct aggregator *a, uint64_t period_ns,
		     uint64_t now_ns);

/* Reads one segment's bytes into a, as persist_restore does for each
 * file (its seq names it).  Returns 0, -EBADMSG (not a state file),
 * -EPROTONOSUPPORT (another version), -ESTALE (another boot), -EILSEQ (a
 * damaged record ended it: *ret_good bytes were whole) or -ENOMEM. */
int persist_read_segment(struct persist *ps, struct aggregator *a, uint64_t seq,
			 const uint8_t *data, size_t len, uint64_t period_ns, uint64_t now_ns,
			 size_t *ret_good);

/* Writes what was sealed since the last flush (final: the open windows
 * too, and waits for the disk).  period_ns: the CPU sampling period now. */
void persist_flush(struct persist *ps, struct aggregator *a, const struct persist_names *names,
		   uint64_t period_ns, uint64_t now_ns, bool final);

/* Module id module was given back (symbolize.h) and will name another
 * file: what this segment wrote of its frames no longer says what a frame
 * of that id is.  Cheap; the next flush forgets them. */
void persist_forget_module(struct persist *ps, uint16_t module);

/* Resolves a FRAME_MODULE_STORED frame (model.h's frame_resolver_t). */
size_t persist_resolve(const struct persist *ps, uint64_t frame, bool lines,
		       struct frame_record *out, size_t cap);
/* Path and build-id of a FRAME_MODULE_RESTORED_* module. */
bool persist_describe_module(const struct persist *ps, uint16_t module, const char **ret_path,
			     const char **ret_build_id);

void persist_get_stats(struct persist *ps, struct persist_stats *ret);

#endif
