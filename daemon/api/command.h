/* SPDX-License-Identifier: MIT */
/*
 * command.h - what a command is, and the daemon state commands work on.
 *
 * A request line is parsed once (request.c: JSON, version, which command)
 * and handed to its row of the table: parse() reads its arguments into the
 * struct perfd_request, run() answers the client, now or later.  A command
 * that answers later (a snapshot from now on) keeps its state as the
 * client's data, starting with a struct command_pending that names the
 * command, so that a client that goes away cancels it through cancel(),
 * and a "stop" sent on the same connection meanwhile ends it early through
 * stop() (the stop gets no answer of its own: the command's is the answer).
 *
 * struct daemon is the state commands may use, owned by manager.c, which
 * creates it, runs the loop and tears it down.  Everything in it is the
 * loop thread's (see collect/drain.h for the one thing that is not).
 */
#ifndef PERFD_COMMAND_H
#define PERFD_COMMAND_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "api/rates.h"
#include "api/request.h"
#include "api/server.h"
#include "base/clock.h"
#include "base/loopturn.h"
#include "collect/ingest_wait.h"
#include "profile/aggregate.h"
#include "profile/model.h"
#include "state/persist.h"

struct sampler;
struct drain;
struct symbolizer;
struct python;
struct unwinder;
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
	json_object *config_json;       /* the effective configuration (config.h), root's view */
	json_object *config_json_users; /* the same as others see it */
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

struct command {
	const char *name;
	/* Reads the arguments (NULL: none).  Returns 0, or -EINVAL with *e set
	 * (request.h's helpers do both). */
	int (*parse)(struct json_object *req, struct perfd_request *r, struct perfd_request_error *e);
	/* Answers c.  Returns 0 when it has, SERVER_PENDING when it will. */
	int (*run)(struct daemon *d, struct client *c, const struct perfd_request *req);
	/* Drops what a pending run kept for c (the client went away). */
	void (*cancel)(struct daemon *d, struct client *c);
	/* Ends a pending run early, at the client's "stop": it answers soon,
	 * with what it has (NULL: the command cannot stop early). */
	void (*stop)(struct daemon *d, struct client *c);
	/* Answers with every sample taken before the request came: runs once
	 * those are ingested (api/fresh.h). */
	bool fresh;
};

/* The first member of a pending command's client data. */
struct command_pending {
	const struct command *command;
};

#define DECLARE(name, NAME) extern const struct command cmd_##name;
PERFD_COMMANDS(DECLARE)
#undef DECLARE

extern const struct command *const commands[PERFD_CMD_COUNT];

/* Parses a request line and runs its command; a bad request gets its
 * error answer.  Returns 0 or SERVER_PENDING (server.h). */
int command_dispatch(struct daemon *d, struct client *c, const char *line, size_t len);
/* The client of a pending command went away. */
void command_cancel(struct daemon *d, struct client *c);
/* A line the client sent while its command is pending (server.h's
 * on_pending_line): a "stop" request is taken and stops the pending
 * command, which then answers; anything else waits its turn (false). */
bool command_pending_line(struct daemon *d, struct client *c, const char *line, size_t len);

/* Names before an answer: a query whose model named frames as
 * module+offset because their tables were being built off the loop
 * (model.pending_frames, symbolize.h) frees it and waits, without holding
 * the loop, until no table is being built, and then builds its model
 * again (api/model_slices.h does, for every answer); it may wait again (a symbol table built starts the line tables)
 * until COMMAND_NAMES_WAIT_MS have passed since it first waited, and then
 * answers with what there is.  Checked every COMMAND_NAMES_POLL_MS. */
#define COMMAND_NAMES_WAIT_MS 10000
#define COMMAND_NAMES_POLL_MS 20
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

/* Ends every snapshot still waiting (the daemon stops). */
void snapshots_free_all(struct daemon *d);

/* Sends o (taking it), or the out-of-memory error when o is NULL. */
void command_reply_json(struct client *c, json_object *o);
struct jsonw;
/* Sends what w holds (a whole answer object) when r is 0 and w has no
 * error, else the out-of-memory error; frees w's buffer either way. */
void command_reply_writer(struct client *c, struct jsonw *w, int r);

/* Options for resolving a profile of d into the model: Python frames
 * through interp/python, the rest through the symbolizer. */
struct model_opts daemon_model_opts(struct daemon *d, enum profile_kind kind, bool lines,
				    bool python_lines, bool threads);
/* How d names frames, for what persist writes (state/persist.h). */
struct persist_names daemon_persist_names(struct daemon *d);
/* A selection's visible(): the client (a struct perfd_peer) may see p. */
bool daemon_peer_sees(void *peer, const struct process *p);
/* A selection's owners: the client may see what was taken under owner
 * (the history of a process that changed owner, history.h). */
bool daemon_peer_sees_owner(void *peer, uint32_t owner);
struct owner_filter daemon_peer_owners(const struct perfd_peer *peer);

/* The status answer (api/query.h), as root or as others see it; a new
 * reference, NULL when out of memory. */
json_object *daemon_status(struct daemon *d, bool root);
struct http_answer;
/* The page at path of the --metrics-address server (api/httpd.h): /metrics,
 * the status answer others see in the Prometheus format (api/metrics.h). */
void daemon_metrics_page(struct daemon *d, const char *path, struct http_answer *ret);

/* The daemon's own counters now (api/rates.h); manager.c notes one a
 * second into d->rates. */
void daemon_read_rates(struct daemon *d, struct rates_reading *ret);
/* The daemon's resident set now, from /proc/self/statm (0 when unreadable). */
uint64_t daemon_rss_bytes(void);

/* cmd_top.c's function view of model m as the fields of the answer
 * (sort ... functions, function) that args ask for, into w; a unit of its
 * own for tests/unit/test-top.c.  Returns 0 or -ENOMEM. */
int top_write_function_table(const struct perfd_top_args *args, const struct model *m,
			     struct jsonw *w);

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
/* Moves what the ring buffer holds into the queue and ingests one slice:
 * for an answer that must not wait (status), whose counters then count
 * what is still queued as such (drain.queued_samples). */
void daemon_refresh(struct daemon *d);
/* The drain thread's records reach the store through this. */
int daemon_ingest(void *ctx, void *data, size_t size);

#endif
