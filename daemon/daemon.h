/* SPDX-License-Identifier: MIT */
/*
 * daemon.h - the daemon's core: the state every command, the exporter and
 * the loop work on, and what joins the parts below it together.
 *
 * struct daemon is owned by manager.c, which creates it, runs the loop and
 * tears it down.  Everything in it is the loop thread's (see
 * collect/drain.h for the one thing that is not).  Here: the records'
 * way from the drain into the store (ingest, a slice a turn, and the
 * store's revisits on a timer of their own), the resolvers a model names
 * its frames through (symbols/, interp/python/, state/persist.c for the
 * processes of the past), and the wait for names an answer may make.
 * The protocol, who may see what and the commands are api/'s.
 */
#ifndef PERFD_DAEMON_H
#define PERFD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "base/clock.h"
#include "base/loopturn.h"
#include "collect/ingest_wait.h"
#include "profile/aggregate.h"
#include "profile/model.h"
#include "rates.h"
#include "state/persist.h"

struct sampler;
struct drain;
struct symbolizer;
struct python;
struct unwinder;
struct server;
struct http_server;
struct snapshot;
struct exporter;
struct encode_lane;
struct names_wait;

/* The answers' models built in slices (api/model_slices.h), for status
 * (its "loop"). */
struct model_slices_stats {
	uint64_t built;     /* models handed to their caller */
	uint64_t cancelled; /* builds freed before that (their client went away) */
	uint64_t building;  /* builds now: in slices or waiting for names */
	uint64_t slices;
	uint64_t max_slice_ns;
};

struct daemon {
	unsigned frequency_hz;
	uint64_t memory_sample_bytes; /* 0: memory growth not sampled */
	struct aggregator_limits limits;
	sd_event *event;
	struct sampler *sampler;
	struct drain *drain;
	struct aggregator *aggregator;
	struct symbolizer *symbolizer;
	struct python *python;
	struct unwinder *unwinder; /* NULL: frame pointers only */
	struct server *server;
	struct http_server *metrics; /* --metrics-address (api/httpd.h), or NULL */
	struct exporter *exporter;
	struct encode_lane *encode_lane; /* snapshots' encoding (api/encode_lane.h) */
	struct persist *persist; /* NULL: profiles are kept in memory only */
	char *config_json;       /* the effective configuration (config.h) as JSON, root's view */
	char *config_json_users; /* the same as others see it */
	uint64_t start_ns;
	uint64_t malformed_records;
	struct snapshot *snapshots; /* cmd_snapshot.c's, waiting for their end */
	size_t n_snapshots;
	struct rates rates; /* the daemon's own counters, once a second */
	sd_event_source *revisit_timer; /* aggregator_revisit's next, or off */
	struct names_wait *names_waits; /* answers waiting for names (below) */
	sd_event_source *names_timer;   /* looks at them, while there are any */
	bool names_final; /* answering one that waited its time: no waiting again */
	struct ingest_waits ingest; /* what waits for the records queued before it */
	struct loop_stats loop; /* manager.c's turns of the loop */
	struct model_slices_stats models; /* the answers' models built in slices */
};

/* Names before an answer: a query whose model named frames as
 * module+offset because their tables were being built off the loop
 * (model.pending_frames, symbolize.h) frees it and waits, without holding
 * the loop, until no table is being built, and then builds its model
 * again (api/model_slices.h does, for every answer); it may wait
 * again (a symbol table built starts the line tables) until DAEMON_NAMES_WAIT_MS have passed since it first waited, and then
 * answers with what there is.  Checked every DAEMON_NAMES_POLL_MS. */
#define DAEMON_NAMES_WAIT_MS 10000
#define DAEMON_NAMES_POLL_MS 20
struct names_wait {
	struct names_wait *next;
	uint64_t deadline_ns; /* 0 until it first waits */
	/* the names are there, or the time is up: answer (d->names_final) */
	void (*ready)(struct daemon *d, struct names_wait *w);
};
/* Starts w's wait (its ready set).  Returns 0 or -errno (no timer: the
 * caller answers now). */
int daemon_wait_for_names(struct daemon *d, struct names_wait *w);
/* Ends w's wait without an answer (its client went away).  Accepts a w
 * that does not wait. */
void daemon_stop_waiting(struct daemon *d, struct names_wait *w);

/* Options for resolving a profile of d into the model: Python frames
 * through interp/python, the rest through the symbolizer. */
struct model_opts daemon_model_opts(struct daemon *d, enum profile_kind kind, bool lines,
				    bool python_lines, bool threads);
/* How d names frames, for what persist writes (state/persist.h). */
struct persist_names daemon_persist_names(struct daemon *d);
/* The daemon's own counters now (rates.h); manager.c notes one a
 * second into d->rates. */
void daemon_read_rates(struct daemon *d, struct rates_reading *ret);
/* The daemon's resident set now, from /proc/self/statm (0 when unreadable). */
uint64_t daemon_rss_bytes(void);

/* Ingests every record sampled until now (the ring buffer's too), all at
 * once, holding the loop as long as that takes: only once the loop has
 * ended (shutdown).  Everything else waits for its records without
 * holding the loop (collect/ingest_wait.h, d->ingest; a command sets
 * .fresh: api/fresh.h). */
void daemon_drain_at_exit(struct daemon *d);
/* Ingests one slice of what the drain thread queued (DELIVER_SLICE_*),
 * then runs the revisits due (aggregator_revisit) and sets their timer.
 * ctx: the daemon (d->ingest's deliver). */
void daemon_deliver(void *ctx);
/* Has the revisits run by at_ns (a process's revisit_ns, set by a hook,
 * in a delivery or not: when a lane's job came back), unless the timer is
 * set for sooner.  A revisit left to the next delivery would wait up to a
 * drain interval: a short process would end before it. */
void daemon_revisit_by(struct daemon *d, uint64_t at_ns);
/* Moves what the ring buffer holds into the queue and ingests one slice:
 * for an answer that must not wait (status), whose counters then count
 * what is still queued as such (drain.queued_samples). */
void daemon_refresh(struct daemon *d);
/* The drain thread's records reach the store through this. */
int daemon_ingest(void *ctx, void *data, size_t size);

#endif
