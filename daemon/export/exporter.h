/* SPDX-License-Identifier: MIT */
/*
 * exporter.h - continuous export: every interval, each process's profiles
 * of that interval leave the host, as pprof files (files.c), pushed to
 * Pyroscope (pyroscope.c) and sent as OTLP profiles (otlp.c).
 *
 * One pprof per process and kind, not one per host with the processes
 * told apart by labels: Pyroscope keys a series by the request's labels
 * (service_name, pid, comm...), so one request per process is what it
 * ingests as separate series; a file per process is named by what it
 * holds (host, time, pid, comm, kind), opens alone in go tool pprof, and
 * is removed by age like any other; an OTLP request per process carries
 * that process as its resource (process.pid, service.name...), as OTLP
 * wants a resource to be one producer.  The cost is one model and one
 * encode per format per process with data in the interval (idle
 * processes export nothing), and the same frames resolved again for each
 * (the symbolizer caches them); OTLP's dictionary is not shared between
 * processes, so their common libraries are named again in each request.
 *
 * On the loop: an sd-event timer, at whole seconds of CLOCK_MONOTONIC so
 * that the store's 1 s windows split exactly between intervals, closes the
 * interval at [previous end, now); once the records queued until then are
 * ingested (collect/ingest_wait.h: the loop serves its clients meanwhile,
 * and the samples ingested meanwhile fall in later windows), it queries
 * the store for that interval of every process and builds each part's
 * model (the symbolizer is the loop's alone), in slices: a step
 * (base/loopstep.h), behind the clients but never starved by them, builds
 * for MODEL_SLICE_NS a turn (a
 * process's model bigger than that goes on in the next turn, through
 * profile/model.h's builder) and hands each model to the exporter's
 * own encode lane (base/offload.h), which makes its pprof (and OTLP)
 * bytes.  Once every model is built and every encoding back, the batch
 * goes to the sinks' workers, or, when a frame waited for names, nothing
 * does and the interval is tried again (a profile is never sent twice);
 * the next interval waits meanwhile.  Before, one interval was built and
 * encoded in one turn: 0.3 to 1.1 s when its processes flooded it with
 * unique stacks, 6.8 s once under load, every client waiting.
 *
 * The lane is the exporter's own, not the answers' (api/encode_lane.h):
 * export/ is below api/, and an interval of hundreds of processes must
 * not queue ahead of a client's answer.  Models handed to it hold at most
 * EXPORT_ENCODE_MAX_BYTES (status "export.encoding_bytes"); past that the
 * building waits for the lane.  The model is self-contained (profile/
 * model.h); a job reads only it, the names copied into it and the run's
 * labels (a run starts only once no job of an earlier one is on the lane).
 *
 * At shutdown the loop has ended: encodings on the lane are cancelled (the
 * encoders look at the lane's cancel flag), the lane is freed, and the
 * interval under way since the last one exported is built and encoded in
 * place, then the sinks get a bounded time.  Everything that can block —
 * disks, the network, retries — is on the workers' threads (worker.h),
 * behind bounded queues.
 */
#ifndef PERFD_EXPORTER_H
#define PERFD_EXPORTER_H

#include <stdint.h>
#include <systemd/sd-event.h>

#include "collect/ingest_wait.h"
#include "export/export_opts.h"
#include "export/worker.h"
#include "profile/aggregate.h"
#include "profile/model.h"

struct export_source {
	struct aggregator *aggregator;
	struct model_opts model; /* how frames resolve; kind set per profile */
	uint64_t period_ns, memory_sample_bytes;
	unsigned frequency_hz;
	/* how an interval waits for the records queued at its close (NULL:
	 * it does not; exporter_finish's caller ingests everything first) */
	struct ingest_waits *ingest;
	/* waits up to timeout_ms for the symbol tables being built, which the
	 * loop would otherwise take in later (at shutdown, which has no later) */
	void (*settle)(void *ctx, unsigned timeout_ms);
	/* whether symbol tables are being built now (may be NULL) */
	bool (*loads_pending)(void *ctx);
	void *ctx; /* settle's and loads_pending's */
};

#define EXPORTER_MAX_SINKS 3

struct exporter_stats {
	bool enabled;
	uint64_t interval_s;
	uint64_t intervals;            /* exported so far */
	uint64_t profiles;             /* encoded */
	uint64_t encode_errors;
	uint64_t waits_for_names;      /* an interval tried again: tables building */
	double last_export_unix;       /* 0: none yet */
	/* one interval, from its start to its profiles handed to the sinks,
	 * the loop serving its clients between its steps */
	double last_encode_ms, longest_encode_ms;
	uint64_t steps;                /* loop turns of the export (builds, encodings back) */
	double longest_step_ms;        /* the longest of them */
	uint64_t encoding, encoding_bytes; /* models on the lane, and their bytes */
	uint64_t max_encoding_bytes;   /* the most they held */

	size_t n_sinks;
	struct export_worker_stats sinks[EXPORTER_MAX_SINKS];
};

struct exporter;

int exporter_new(sd_event *event, const struct export_source *src, struct exporter **ret);
/* Starts, stops or retargets each sink as o says (the queues keep their
 * profiles), and the timer at o's interval.  Copies what it keeps.
 * Returns 0 or -errno: a target or a worker that cannot be made (out of
 * memory, libcurl, a thread) changes nothing. */
int exporter_configure(struct exporter *x, const struct export_opts *o);
/* A reload changed the sampling frequency: the profiles exported from now
 * on state this period and rate (the store holds its samples in it). */
void exporter_set_sampling(struct exporter *x, uint64_t period_ns, unsigned frequency_hz);
void exporter_get_stats(struct exporter *x, struct exporter_stats *ret);
/* At SIGTERM, once every record is ingested: exports the interval under
 * way (up to now, the current second included) and waits a bounded time for each sink to send what is
 * queued; what it could not is counted as dropped and logged. */
void exporter_finish(struct exporter *x);
struct exporter *exporter_free(struct exporter *x);

#endif
