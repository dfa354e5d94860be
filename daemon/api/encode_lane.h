/* SPDX-License-Identifier: MIT */
/*
 * encode_lane.h - an answer's model written (encoded, compressed) off the
 * loop: a snapshot's profile, top's function table.
 *
 * A big profile took seconds to encode: a 65k-sample pprof held the loop
 * 2.2-3.2 s (70% deflate, 12% pprof_encode), and every client, root's
 * status too, waited.  Once built, the model is self-contained (every
 * name is copied into its strings: profile/model.h) and an encoder reads
 * only the model and its encode_opts, so the encoding runs on a lane
 * (base/offload.h): the loop builds the model and writes the answer's
 * head, hands the model and the writer to a lane, and sends the answer
 * once the lane has written the profile into it and closed it.
 *
 * The client's request is pending meanwhile, as while it waits for names
 * (api/command.h): its data is the job.  A client that goes away leaves
 * the job to finish on its lane and be dropped when it comes back; a
 * "stop" meanwhile waits its turn and is answered on its own, "stopped":
 * false (the snapshot has ended).
 * The answer is queued as any other, under the per-client output caps
 * (api/server.h); a binary profile (pprof) is gathered whole, compressed,
 * before its answer's line can say its size, and sent as a frame of raw
 * bytes behind that line (a third smaller than the base64 it replaced).
 *
 * Two lanes, the first only for small answers (under
 * ENCODE_LANE_BIG_SAMPLES samples), so that a small answer never waits
 * behind a big one.  They run at the workloads' nice value, below the loop
 * (base/priority.h), not lower: at nice 10 beside the profiled workload
 * (two spinning threads on two CPUs) a 60k-sample pprof took 22.5 s
 * instead of 5.4 s, and the loop, a thread that sleeps, still gets its
 * time slices beside them.  Cost: every answer, small ones
 * too, crosses to a lane and back (an eventfd wake-up of the loop), and
 * each answer being encoded holds its model until it is: one per client
 * at most, as one request per client is in flight.  At shutdown an answer
 * being encoded gives up: a pprof at its next deflate chunk
 * (encode_opts.cancel), the other formats at their next write
 * (encode_cancel_sink in encode/sink.h).  The exporter's encodings have a lane
 * of their own (export/exporter.h).
 */
#ifndef PERFD_ENCODE_LANE_H
#define PERFD_ENCODE_LANE_H

#include <systemd/sd-event.h>

#include "base/jsonw.h"
#include "encode/encode.h"
#include "profile/model.h"

#define ENCODE_LANE_BIG_SAMPLES 4096

struct encode_lane;
struct client;

/* Starts the lanes and watches their finished jobs on event.  Returns 0
 * or -errno (offload's, sd-event's). */
int encode_lane_new(sd_event *event, struct encode_lane **ret);
/* Waits for the encoding in progress, drops the others (their clients are
 * gone: the server is freed first).  Accepts NULL. */
struct encode_lane *encode_lane_free(struct encode_lane *l);

struct encode_lane_stats {
	uint64_t written; /* answers written on the lanes */
	uint64_t writing; /* ... now */
	uint64_t longest_write_ns; /* of one answer on its lane */
};
/* Accepts NULL (no lanes: nothing written on them). */
struct encode_lane_stats encode_lane_get_stats(const struct encode_lane *l);

/* What a lane writes of a model into an answer: keys of w's open object.
 * args is the caller's (a copy); cancel is set at shutdown.  Reads only m
 * and args.  Returns 0 or -errno, or COMMAND_FRAMED (api/command.h) when
 * it closed the object itself and put a frame behind it. */
typedef int (*answer_write_t)(const struct model *m, const void *args,
			      const atomic_bool *cancel, struct jsonw *w);

/* Answers c: has write write m into w's open object, closes it and sends
 * w's text.  Takes m and w (w is reset); args (args_size bytes) is
 * copied; what names the writing in the log.  Off the loop, c's request
 * pending meanwhile (its data is then the job), or, with no lane (l NULL)
 * or no memory for the job, here and now. */
void encode_lane_write(struct encode_lane *l, struct client *c, answer_write_t write,
		       const void *args, size_t args_size, const char *what, struct model *m,
		       struct jsonw *w);
/* encode_lane_write of m encoded in e's format with o (copied; its
 * labels must be NULL: they are not): its "profile" key, or for a binary
 * format "encoding": "frame", "profile_bytes" and the frame when frame
 * (the client asked for one), else "encoding": "base64" and "profile"
 * (include/perfd/protocol.h). */
void encode_lane_answer(struct encode_lane *l, struct client *c, const struct encoder *e, bool frame,
			struct model *m, const struct encode_opts *o, struct jsonw *w);

#endif
