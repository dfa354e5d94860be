/* SPDX-License-Identifier: MIT */
/*
 * cmd_snapshot.c - "snapshot": the profile of the selected processes, from
 * now on or from the store's history, resolved into the model and encoded
 * in the format asked for.
 *
 * From now on, the snapshot is a collector in the store (aggregate.h) and
 * a timer; when the window ends (or the one process it watches by pid
 * exits: the BPF exit event or a pidfd, or the client sends "stop"), it
 * takes no sample from later on, waits without holding the loop for the
 * records queued until then (collect/ingest_wait.h), and the collector's
 * parts are answered.  From the past, aggregator_query answers at once.  Either way
 * the parts are resolved on the loop, in slices between which it serves
 * others (api/model_slices.h; profile/model.c: Python frames through
 * interp/python, the rest through the symbolizer), maybe again once the
 * names are there (daemon.h), and written by the format's encoder, on
 * an encode lane (api/encode_lane.h), into the answer with the JSON
 * writer, whose buffer the server then takes over: a 100k-stack profile
 * is not copied again.  Meanwhile the request is pending, its client's
 * data the answer being built (struct answer), which holds the parts.
 */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "api/auth.h"
#include "api/cmd_snapshot.h"
#include "api/command.h"
#include "api/encode_lane.h"
#include "api/limits.h"
#include "api/model_slices.h"
#include "api/query.h"
#include "base/clock.h"
#include "base/jsonw.h"
#include "base/kindtab.h"
#include "base/log.h"
#include "collect/sampler.h"
#include "encode/encode.h"
#include "interp/python/python.h"
#include "perfd/macro.h"
#include "process/procfs.h"
#include "profile/frame.h"
#include "profile/model.h"
#include "symbols/symbolize.h"

#define SNAPSHOT_TIMER_ACCURACY_USEC 1000

/* What one snapshot answer says besides its profile. */
struct answer_info {
	uint64_t begin_ns, end_ns; /* CLOCK_MONOTONIC, the span covered */
	double requested_seconds;
	bool single;      /* one pid asked for */
	uint32_t pid;
	bool exited;      /* that process exited during a live snapshot */
	bool stopped;     /* the client stopped the live snapshot early */
	uint64_t samples;
	uint64_t samples_refused;            /* left out: its uid's shares were full */
	enum collector_refusal refused_by;
	uint32_t uid;
};

/* A snapshot from now on, waiting for its end and its records; then its
 * parts are answered (struct answer). */
struct snapshot {
	struct command_pending pending; /* first: the client's data */
	struct daemon *d;
	struct client *client;
	struct snapshot_args req;
	struct collector c;
	sd_event_source *timer;
	sd_event_source *pidfd_io;
	int pidfd;
	double process_seconds; /* what it counts against its uid's budget */
	bool stopped;           /* the client's "stop" ended it early */
	bool ended;             /* its records are awaited */
	struct ingest_wait ingest;
	struct snapshot *prev, *next;
};

static int parse_format(struct json_object *req, const struct encoder **ret,
			struct perfd_request_error *e)
{
	struct json_object *v;
	const char *s;
	size_t len;
	char q[REQUEST_QUOTE_SIZE], names[256] = "";

	for (size_t i = 0, at = 0; i < n_encoders && at < sizeof(names); i++)
		at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s", i ? ", " : "",
				       encoders[i].name);
	if (!json_object_object_get_ex(req, "format", &v)) {
		*ret = &encoders[0];
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return request_fail(e, PERFD_ERR_BAD_REQUEST, "\"format\" must be a string, one of: %s",
			    names);
	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	*ret = encoder_find(s, len);
	if (*ret)
		return 0;
	request_quote(s, len, q, sizeof(q));
	return request_fail(e, PERFD_ERR_BAD_REQUEST, "unknown \"format\" \"%s\": must be one of: %s", q,
		    names);
}

static int parse_kind(struct json_object *req, int *ret, struct perfd_request_error *e)
{
	struct json_object *v;
	char q[REQUEST_QUOTE_SIZE];
	int k;

	*ret = PROFILE_KIND_CPU;
	if (!json_object_object_get_ex(req, "kind", &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"kind\" must be a string: " PERFD_KIND_NAMES(", ", " or "));
	k = kind_find(json_object_get_string(v), (size_t)json_object_get_string_len(v));
	if (k < 0) {
		request_quote(json_object_get_string(v), (size_t)json_object_get_string_len(v), q, sizeof(q));
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "unknown \"kind\" \"%s\": must be " PERFD_KIND_NAMES(", ", " or "), q);
	}
	*ret = k;
	return 0;
}

/* "pid": an integer or an array of 1..PERFD_SNAPSHOT_MAX_PIDS of them. */
static int parse_pids(struct json_object *req, struct snapshot_args *r,
		      struct perfd_request_error *e)
{
	struct json_object *v;
	size_t n;

	if (!json_object_object_get_ex(req, "pid", &v))
		return 0;
	if (!json_object_is_type(v, json_type_array)) {
		int64_t pid = 0;
		int k = request_get_int(req, "pid", 1, INT32_MAX, true, &pid, e);

		if (k < 0)
			return k;
		r->pids[r->n_pids++] = (uint32_t)pid;
		return 0;
	}
	n = json_object_array_length(v);
	if (n == 0 || n > PERFD_SNAPSHOT_MAX_PIDS)
		return request_fail(e, PERFD_ERR_BAD_REQUEST, "\"pid\" must list 1 to %d pids",
			    PERFD_SNAPSHOT_MAX_PIDS);
	for (size_t i = 0; i < n; i++) {
		struct json_object *x = json_object_array_get_idx(v, i);
		int64_t pid;

		if (!json_object_is_type(x, json_type_int) ||
		    (pid = json_object_get_int64(x)) < 1 || pid > INT32_MAX)
			return request_fail(e, PERFD_ERR_BAD_REQUEST,
				    "\"pid\" must hold integers 1..%d", INT32_MAX);
		r->pids[r->n_pids++] = (uint32_t)pid;
	}
	return 0;
}

/* "from"/"to": seconds since the epoch (perfctl turns RFC 3339 into
 * them); "to" absent means now. */
static int parse_range(struct json_object *req, struct snapshot_args *r,
		       struct perfd_request_error *e)
{
	static const char *const keys[] = { "from", "to" };
	double *dst[] = { &r->from_unix, &r->to_unix };

	for (size_t i = 0; i < 2; i++) {
		struct json_object *v;

		if (!json_object_object_get_ex(req, keys[i], &v))
			continue;
		if ((!json_object_is_type(v, json_type_int) &&
		     !json_object_is_type(v, json_type_double)) ||
		    !isfinite(json_object_get_double(v)) || json_object_get_double(v) <= 0)
			return request_fail(e, PERFD_ERR_BAD_REQUEST,
				    "\"%s\" must be a time in seconds since the epoch", keys[i]);
		*dst[i] = json_object_get_double(v);
	}
	if (r->to_unix && r->from_unix >= r->to_unix)
		return request_fail(e, PERFD_ERR_BAD_REQUEST, "\"from\" must be before \"to\"");
	if (r->to_unix && !r->from_unix)
		return request_fail(e, PERFD_ERR_BAD_REQUEST, "\"to\" needs a \"from\"");
	return 0;
}

static int parse_snapshot(struct json_object *req, void *args, struct perfd_request_error *e)
{
	struct snapshot_args *r = args;
	int k, has_duration, has_since;
	int64_t tree = 0;

	if ((k = parse_pids(req, r, e)) < 0 ||
	    (k = request_get_name(req, "comm", r->comm, sizeof(r->comm), e)) < 0 ||
	    (k = request_get_name(req, "cgroup", r->cgroup, sizeof(r->cgroup), e)) < 0 ||
	    (k = request_get_name(req, "unit", r->unit, sizeof(r->unit), e)) < 0 ||
	    (k = request_get_bool(req, "all", &r->all, e)) < 0 ||
	    (k = request_get_int(req, "tree", 1, INT32_MAX, false, &tree, e)) < 0)
		return k;
	r->tree = (uint32_t)tree;
	if (!r->n_pids && !r->comm[0] && !r->cgroup[0] && !r->unit[0] && !r->all && !r->tree)
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "missing which processes: \"pid\", \"tree\", \"comm\", \"cgroup\", \"unit\" or \"all\"");

	has_duration = request_get_seconds(req, "duration", PERFD_SNAPSHOT_MAX_SECONDS,
				     &r->duration_seconds, e);
	if (has_duration < 0)
		return has_duration;
	has_since = request_get_seconds(req, "since", PERFD_MAX_RETENTION_SECONDS, &r->since_seconds, e);
	if (has_since < 0)
		return has_since;
	if ((k = parse_range(req, r, e)) < 0)
		return k;
	if (has_duration + has_since + (r->from_unix > 0) != 1)
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "say when, once: \"duration\" (seconds from now on, 0 < duration <= %d), "
			    "\"since\" (the last seconds) or \"from\" (and \"to\")",
			    PERFD_SNAPSHOT_MAX_SECONDS);
	r->when = has_duration ? SNAPSHOT_DURATION :
		  has_since    ? SNAPSHOT_SINCE :
				 SNAPSHOT_RANGE;
	r->started = false;
	if ((k = request_get_bool(req, "started", &r->started, e)) < 0)
		return k;
	if (r->started && r->when != SNAPSHOT_DURATION)
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"started\" is for a snapshot from now on (\"duration\")");

	if ((k = parse_format(req, &r->format, e)) < 0 || (k = parse_kind(req, &r->kind, e)) < 0)
		return k;
	r->lines = false;
	r->python_lines = true;
	r->threads = false;
	if ((k = request_get_bool(req, "lines", &r->lines, e)) < 0 ||
	    (k = request_get_bool(req, "python_lines", &r->python_lines, e)) < 0 ||
	    (k = request_get_bool(req, "threads", &r->threads, e)) < 0 ||
	    (k = request_get_bool(req, "frame", &r->frame, e)) < 0)
		return k;
	return 0;
}

/* The start time of pid in clock ticks, -ESRCH when there is none. */
static int read_start_ticks(pid_t pid, uint64_t *ret)
{
	_cleanup_close_ int dirfd = -1;
	int r = procfs_open_pid(pid, PROCFS_START_ANY, &dirfd);

	return r < 0 ? r : procfs_start_ticks(dirfd, ret);
}

/* The tree s followed is followed no more (collect/sampler.h), but for
 * the processes another snapshot's tree still takes. */
static void unfollow_tree(struct snapshot *s)
{
	struct daemon *d = s->d;

	if (!s->req.tree)
		return;
	if (!aggregator_follows(d->aggregator, s->req.tree, &s->c))
		sampler_unfollow(d->sampler, s->req.tree);
	if (!s->c.sel.tree_members)
		return;
	U64MAP_FOREACH(slot, s->c.sel.tree_members)
		if (!aggregator_follows(d->aggregator, (uint32_t)slot->key, &s->c))
			sampler_unfollow(d->sampler, (uint32_t)slot->key);
}

static void snapshot_free(struct snapshot *s)
{
	struct daemon *d = s->d;

	unfollow_tree(s);
	aggregator_remove_collector(d->aggregator, &s->c);
	aggregator_release_parts(d->aggregator, &s->c.parts);
	ingest_wait_cancel(&d->ingest, &s->ingest);
	sd_event_source_disable_unref(s->timer);
	sd_event_source_disable_unref(s->pidfd_io);
	closep(&s->pidfd);
	if (s->prev)
		s->prev->next = s->next;
	else
		d->snapshots = s->next;
	if (s->next)
		s->next->prev = s->prev;
	d->n_snapshots--;
	free(s);
}


/* An answer on its way: its parts resolved into the model in slices,
 * then maybe again once the names are there, then encoded.  Its client's
 * data meanwhile. */
struct answer {
	struct command_pending pending; /* first: the client's data */
	struct daemon *d;
	struct client *client;
	struct snapshot_args req;
	struct profile_parts parts; /* held until it is answered */
	struct answer_info ai;
	struct model_slices *build; /* the build in progress */
};

static void answer_free(struct answer *a)
{
	model_slices_free(a->build);
	aggregator_release_parts(a->d->aggregator, &a->parts);
	free(a);
}

static void answer_cancel(struct daemon *d, struct client *c)
{
	answer_free(client_get_data(c));
}

/* The snapshot has ended: it answers with what it has, as a "stop" that
 * came too late always did (a stop must find a handler to be taken). */
static void answer_stop(struct daemon *d, struct client *c)
{
}

static const struct command answering = { .name = "snapshot answer", .cancel = answer_cancel,
					  .stop = answer_stop };

/* Writes a's answer around model m (taken) and hands it to an encode lane
 * (api/encode_lane.h), which may make a's client's data its job. */
static void reply_profile(struct answer *a, struct model *model)
{
	struct daemon *d = a->d;
	const struct snapshot_args *req = &a->req;
	const struct answer_info *ai = &a->ai;
	enum profile_kind kind = (enum profile_kind)req->kind;
	struct encode_opts eo = {
		.period_ns = sampler_period_ns(d->sampler),
		.memory_sample_bytes = d->memory_sample_bytes,
		.time_unix_ns = ai->begin_ns ? (uint64_t)(monotonic_to_unix(ai->begin_ns) * 1e9) : 0,
		.duration_ns = ai->end_ns > ai->begin_ns ? ai->end_ns - ai->begin_ns : 0,
	};
	double covered = (double)eo.duration_ns / NSEC_PER_SEC;
	struct jsonw w;
	char note[512] = "";

	/* one stopped early says so in "stopped": the client asked for it */
	if (ai->single && ai->exited && !ai->stopped)
		snprintf(note, sizeof(note),
			 "process %u exited %.1f s into the %.1f s snapshot; the profile holds what was sampled until then",
			 ai->pid, covered, ai->requested_seconds);
	else if (model->total == 0 && req->when == SNAPSHOT_DURATION && ai->single)
		snprintf(note, sizeof(note),
			 "no samples: process %u did not run on a CPU during the snapshot", ai->pid);
	else if (model->total == 0)
		snprintf(note, sizeof(note), "no %s samples of the selected processes in that time",
			 kind_infos[kind].name);
	if (ai->samples_refused) {
		size_t at = strlen(note);

		snprintf(note + at, sizeof(note) - at, "%s%" PRIu64 " samples left out: the live snapshots of uid %"
			 PRIu32 " hold at most %s", at ? "; " : "", ai->samples_refused, ai->uid,
			 ai->refused_by == COLLECTOR_REFUSED_PINS ?
				 "a quarter of the store's process slots (--max-processes)" :
				 "a quarter of the store's memory (--max-memory)");
	}

	query_ok_begin(&w);
	if (ai->single) {
		jsonw_kv_u64(&w, "pid", ai->pid);
		if (model->n_processes == 1) {
			jsonw_kv_string(&w, "comm", model_string(model, model->processes[0].comm));
			jsonw_kv_u64(&w, "start_time_ns", model->processes[0].start_time_ns);
			jsonw_kv_u64(&w, "ns_pid", model->processes[0].ns_pid);
		}
	}
	jsonw_key(&w, "processes");
	jsonw_array_begin(&w);
	for (size_t i = 0; i < model->n_processes; i++) {
		const struct model_process *p = &model->processes[i];

		jsonw_object_begin(&w);
		jsonw_kv_u64(&w, "pid", p->pid);
		jsonw_kv_string(&w, "comm", model_string(model, p->comm));
		jsonw_kv_u64(&w, "start_time_ns", p->start_time_ns);
		jsonw_kv_u64(&w, "ns_pid", p->ns_pid);
		if (p->cgroup)
			jsonw_kv_string(&w, "cgroup", model_string(model, p->cgroup));
		if (p->unit)
			jsonw_kv_string(&w, "unit", model_string(model, p->unit));
		jsonw_kv_bool(&w, "exited", p->exited);
		jsonw_kv_u64(&w, "value", p->total);
		jsonw_object_end(&w);
	}
	jsonw_array_end(&w);
	jsonw_kv_double(&w, "from", ai->begin_ns ? monotonic_to_unix(ai->begin_ns) : 0);
	jsonw_kv_double(&w, "to", ai->end_ns ? monotonic_to_unix(ai->end_ns) : 0);
	jsonw_kv_double(&w, "duration_seconds", covered);
	jsonw_kv_string(&w, "kind", kind_infos[kind].name);
	jsonw_kv_string(&w, "unit", kind_infos[kind].unit);
	/* a kind counted in periods holds its samples; another's are counted apart */
	jsonw_kv_u64(&w, "samples", kind_infos[kind].period == PERFD_KIND_PERIOD_PERIODS ? model->total :
										       ai->samples);
	jsonw_kv_u64(&w, "value", model->total);
	jsonw_kv_u64(&w, "period_ns", eo.period_ns);
	jsonw_kv_string(&w, "sampling", sampler_fixed_period(d->sampler) ? "fixed" : "jittered");
	jsonw_kv_bool(&w, "exited", ai->single && ai->exited);
	if (req->when == SNAPSHOT_DURATION)
		jsonw_kv_bool(&w, "stopped", ai->stopped);
	if (ai->samples_refused)
		jsonw_kv_u64(&w, "samples_refused", ai->samples_refused);
	if (note[0])
		jsonw_kv_string(&w, "note", note);
	jsonw_kv_string(&w, "format", req->format->name);
	/* the model is built: the encoding needs nothing of the loop's */
	encode_lane_answer(d->encode_lane, a->client, req->format, req->frame, model, &eo, &w);
}

/* The model is built: a answers. */
static void answer_built(struct model_slices *build, struct model *m, int r, void *userdata)
{
	struct answer *a = userdata;
	struct client *c = a->client;

	a->build = model_slices_free(build);
	client_set_data(c, NULL);
	if (r < 0)
		command_reply_oom(c);
	else
		reply_profile(a, m); /* may make c's data the encoding */
	answer_free(a);
}

/* Answers parts (taken) for client, whose request stays pending until
 * then: its data is the answer. */
static void answer_parts(struct daemon *d, struct client *client, const struct snapshot_args *req,
			 struct profile_parts *parts, const struct answer_info *ai)
{
	struct model_opts mo = daemon_model_opts(d, (enum profile_kind)req->kind, req->lines,
						 req->python_lines, req->threads);
	struct answer *a = calloc(1, sizeof(*a));

	if (!a) {
		aggregator_release_parts(d->aggregator, parts);
		command_reply_oom(client);
		return;
	}
	*a = (struct answer){ .pending.command = &answering, .d = d, .client = client,
			      .req = *req, .parts = *parts, .ai = *ai };
	*parts = (struct profile_parts){ 0 };
	/* decided now, as the kernel decides at each open of /proc/kallsyms */
	mo.kernel_addresses = auth_may_see_kernel_addresses(client_peer(client));
	if (model_slices_start(d, &mo, &a->parts, answer_built, a, &a->build) < 0) {
		command_reply_oom(client);
		answer_free(a);
		return;
	}
	client_set_data(client, a);
}

/* The records queued until its end are in: it answers. */
static void snapshot_ingested(struct ingest_wait *w)
{
	struct snapshot *s = container_of(w, struct snapshot, ingest);
	struct collector *col = &s->c;
	struct answer_info ai = {
		.begin_ns = col->begin_ns,
		.requested_seconds = s->req.duration_seconds,
		.single = s->req.n_pids == 1,
		.pid = s->req.pids[0],
		.exited = col->exited,
		.stopped = s->stopped,
		.samples = col->samples,
		.samples_refused = col->samples_refused,
		.refused_by = col->refused_by,
		.uid = col->uid,
	};
	ai.end_ns = col->exited ? MIN(col->exit_ns, col->end_ns) : col->end_ns;
	/* what it answers is what it has now, names aside */
	aggregator_remove_collector(s->d->aggregator, col);
	client_set_data(s->client, NULL);
	answer_parts(s->d, s->client, &s->req, &col->parts, &ai);
	snapshot_free(s);
}

static int on_snapshot_done(sd_event_source *es, uint64_t usec, void *userdata)
{
	struct snapshot *s = userdata;

	if (s->ended)
		return 0;
	s->ended = true;
	/* Its span ends now: the collector takes no sample from later on.
	 * Those from before may still sit in the ring or the queue. */
	s->c.end_ns = MIN(now_monotonic_ns(), s->c.end_ns);
	if (ingest_wait_start(&s->d->ingest, &s->ingest, snapshot_ingested) == 0)
		snapshot_ingested(&s->ingest);
	return 0;
}

/* The process is gone: finish on the next loop iteration (never from
 * inside the ring-buffer callback that told us). */
static void snapshot_finish_soon(struct snapshot *s)
{
	(void)sd_event_source_set_time(s->timer, 1);
}

static void on_collector_exit(struct collector *c, void *userdata)
{
	snapshot_finish_soon(userdata);
}

static int on_pidfd(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct snapshot *s = userdata;

	if (!s->c.exited) {
		s->c.exited = true;
		s->c.exit_ns = now_monotonic_ns();
	}
	(void)sd_event_source_set_enabled(es, SD_EVENT_OFF);
	snapshot_finish_soon(s);
	return 0;
}

/* The selection a request asks for, limited to what the client may see. */
static void request_selection(const struct snapshot_args *req, struct client *client,
			      struct selection *sel)
{
	*sel = (struct selection){ .n_pids = req->n_pids, .all = req->all, .tree = req->tree };
	memcpy(sel->pids, req->pids, req->n_pids * sizeof(*req->pids));
	snprintf(sel->comm, sizeof(sel->comm), "%s", req->comm);
	snprintf(sel->cgroup, sizeof(sel->cgroup), "%s", req->cgroup);
	snprintf(sel->unit, sizeof(sel->unit), "%s", req->unit);
	sel->visible = daemon_peer_sees;
	sel->visible_userdata = (void *)client_peer(client);
	sel->owners = daemon_peer_owners(client_peer(client));
}

/* A snapshot of the past, answered at once from the store (an error
 * too). */
static void history_snapshot(struct daemon *d, struct client *client,
			     const struct snapshot_args *req)
{
	struct profile_parts parts = { 0 };
	struct answer_info ai = { .single = req->n_pids == 1, .pid = req->pids[0] };
	uint64_t now = now_monotonic_ns(), from, to;
	struct selection sel;

	request_selection(req, client, &sel);
	if (req->when == SNAPSHOT_SINCE) {
		to = now;
		from = now - MIN(now, (uint64_t)(req->since_seconds * NSEC_PER_SEC));
	} else {
		from = unix_to_monotonic(req->from_unix);
		to = req->to_unix ? unix_to_monotonic(req->to_unix) : now;
	}
	if (aggregator_query(d->aggregator, &sel, from, to, &parts, &ai.begin_ns, &ai.end_ns) < 0) {
		command_reply_oom(client);
		return;
	}
	if (parts.n == 0 && ai.single) {
		struct process *p = aggregator_find_process(d->aggregator, ai.pid);

		/* neither retained nor known (or not the client's to see) */
		if (!p || !daemon_peer_sees((void *)client_peer(client), p)) {
			aggregator_release_parts(d->aggregator, &parts);
			command_reply_error(client, PERFD_ERR_NO_SUCH_PROCESS,
					    "no process with pid %u in perfd's history", ai.pid);
			return;
		}
	}
	if (!ai.begin_ns) {
		ai.begin_ns = from;
		ai.end_ns = to;
	}
	answer_parts(d, client, req, &parts, &ai);
}

static size_t snapshots_of_uid(const struct daemon *d, uint32_t uid)
{
	size_t n = 0;

	for (const struct snapshot *s = d->snapshots; s; s = s->next)
		n += client_peer(s->client)->uid == uid;
	return n;
}

/* Whether uid may start one more live snapshot (api/limits.h): 0,
 * -EUSERS past its share, -EBUSY past what is not root's. */
static int admit_snapshot(const struct daemon *d, uint32_t uid)
{
	return limits_admit(uid, snapshots_of_uid(d, uid), d->n_snapshots, LIMITS_MAX_SNAPSHOTS,
			    LIMITS_SNAPSHOTS_PER_UID, LIMITS_SNAPSHOTS_ROOT_RESERVE);
}

static double process_seconds_of_uid(const struct daemon *d, uint32_t uid)
{
	double n = 0;

	for (const struct snapshot *s = d->snapshots; s; s = s->next)
		if (client_peer(s->client)->uid == uid)
			n += s->process_seconds;
	return n;
}

struct scope_count {
	struct aggregator *a;
	const struct selection *sel;
	size_t n;
};

static void count_in_scope(struct process *p, void *userdata)
{
	struct scope_count *sc = userdata;

	sc->n += !p->exited && selection_matches(sc->a, sc->sel, p);
}

/* The processes a live snapshot's selection takes now, for the budget of
 * api/limits.h: the pids it names, else the live ones the store has that
 * match and the client may see; at least one. */
static size_t snapshot_scope(struct daemon *d, const struct snapshot_args *req,
			     const struct selection *sel)
{
	struct scope_count sc = { .a = d->aggregator, .sel = sel };

	if (req->n_pids)
		return req->n_pids;
	aggregator_foreach_process(d->aggregator, count_in_scope, &sc);
	return MAX(sc.n, (size_t)1);
}

/* Tells the client that asked for it ("started") that the snapshot now
 * takes every sample of its selection: a client holding a command until
 * then (perfctl record) lets it run.  A line ahead of the answer, which
 * stays pending. */
static void announce_started(struct client *client)
{
	struct jsonw w;
	size_t len;
	char *text;

	query_ok_begin(&w);
	jsonw_kv_bool(&w, "started", true);
	jsonw_object_end(&w);
	/* out of memory: the client's wait ends with the answer */
	text = jsonw_error(&w) ? NULL : jsonw_steal(&w, &len);
	if (text)
		(void)server_send_line(client, text, len);
	free(text);
	jsonw_done(&w);
}

/* Starts a snapshot, or answers at once (an error, or the past): when it
 * will answer as the snapshot ends, client_get_data() is set. */
static void start_snapshot(struct daemon *d, struct client *client, const struct snapshot_args *req)
{
	struct snapshot *s;
	uint64_t ticks = 0, ticks_again;
	uint32_t uid = client_peer(client)->uid;
	struct selection sel;
	size_t scope;
	double held;
	int r;

	if (req->when != SNAPSHOT_DURATION) {
		history_snapshot(d, client, req);
		return;
	}
	if ((r = admit_snapshot(d, uid)) == -EUSERS) {
		command_reply_error(client, PERFD_ERR_BUSY, "%zu of %d snapshots for uid %" PRIu32,
				    snapshots_of_uid(d, uid), LIMITS_SNAPSHOTS_PER_UID, uid);
		return;
	}
	if (r < 0) {
		command_reply_error(client, PERFD_ERR_BUSY, "too many snapshots running (%zu of %d)",
				    d->n_snapshots, LIMITS_MAX_SNAPSHOTS);
		return;
	}
	/* the processes in scope as of now: .fresh */
	request_selection(req, client, &sel);
	scope = snapshot_scope(d, req, &sel);
	held = process_seconds_of_uid(d, uid);
	if (uid != 0 && held + (double)scope * req->duration_seconds > LIMITS_SNAPSHOT_PROCESS_SECONDS) {
		command_reply_error(client, PERFD_ERR_BUSY,
				    "%.0f of %d process-seconds for uid %" PRIu32
				    ": this snapshot would add %zu processes x %.0f s to the %.0f its snapshots hold",
				    held + (double)scope * req->duration_seconds,
				    LIMITS_SNAPSHOT_PROCESS_SECONDS, uid, scope, req->duration_seconds, held);
		return;
	}
	if (req->n_pids == 1) {
		r = read_start_ticks(req->pids[0], &ticks);
		/* Another user's process answers exactly as a missing one. */
		if (r >= 0 && !auth_may_see_pid(client_peer(client), req->pids[0]))
			r = -ESRCH;
		if (r == -ESRCH) {
			command_reply_error(client, PERFD_ERR_NO_SUCH_PROCESS, "no process with pid %u",
					    req->pids[0]);
			return;
		}
		if (r < 0) {
			command_reply_error(client, PERFD_ERR_INTERNAL, "cannot read /proc/%u/stat: %s",
					    req->pids[0], strerror(-r));
			return;
		}
	}

	s = calloc(1, sizeof(*s));
	if (!s) {
		command_reply_oom(client);
		return;
	}
	s->pending.command = &cmd_snapshot;
	s->d = d;
	s->client = client;
	s->pidfd = -1;
	s->req = *req;
	s->process_seconds = (double)scope * req->duration_seconds;
	s->c.sel = sel;
	s->c.uid = uid;
	s->c.sel.start_ticks = ticks;
	s->c.begin_ns = now_monotonic_ns();
	s->c.end_ns = s->c.begin_ns + (uint64_t)(req->duration_seconds * NSEC_PER_SEC);
	s->c.on_exit = on_collector_exit;
	s->c.userdata = s;

	/* Accuracy 1 ms: sd-event's default (0) lets a timer slip up to 250 ms
	 * to coalesce wake-ups, which a snapshot's caller would wait for. */
	r = sd_event_add_time(d->event, &s->timer, CLOCK_MONOTONIC,
			      s->c.end_ns / 1000 + 1, SNAPSHOT_TIMER_ACCURACY_USEC, on_snapshot_done, s);
	if (r < 0) {
		free(s);
		command_reply_error(client, PERFD_ERR_INTERNAL, "cannot arm a timer: %s", strerror(-r));
		return;
	}
	s->next = d->snapshots;
	if (d->snapshots)
		d->snapshots->prev = s;
	d->snapshots = s;
	d->n_snapshots++;
	/* its descendants from their fork on, and its exec (which comes with
	 * a look at the new image) whether it was sampled or not; without,
	 * by the parents /proc gives */
	if (req->tree && (r = sampler_follow(d->sampler, req->tree)) < 0)
		log_warning_errno(r, "Failed to follow the forks of pid %u, finding its descendants by their parents instead: %m",
				  req->tree);
	aggregator_add_collector(d->aggregator, &s->c);

	/* A pidfd tells us of the exit even when the process never ran while
	 * we watched (the BPF exit event only covers sampled processes).
	 * Optional: without it the exit event still ends the snapshot. */
	if (req->n_pids == 1) {
		s->pidfd = syscall(SYS_pidfd_open, req->pids[0], 0);
		if (s->pidfd >= 0) {
			if (read_start_ticks(req->pids[0], &ticks_again) < 0 || ticks_again != ticks) {
				snapshot_free(s);
				command_reply_error(client, PERFD_ERR_NO_SUCH_PROCESS,
						    "process %u exited as the snapshot started", req->pids[0]);
				return;
			}
			(void)sd_event_add_io(d->event, &s->pidfd_io, s->pidfd, EPOLLIN, on_pidfd, s);
		}
	}
	client_set_data(client, s);
	if (req->started)
		announce_started(client);
}


static int run_snapshot(struct daemon *d, struct client *c, const void *args)
{
	const struct snapshot_args *req = args;

	start_snapshot(d, c, req);
	return client_get_data(c) ? SERVER_PENDING : 0;
}

static void cancel_snapshot(struct daemon *d, struct client *c)
{
	snapshot_free(client_get_data(c));
}

/* The client asked to end it now: it answers as at its end, with the
 * span it covered. */
static void stop_snapshot(struct daemon *d, struct client *c)
{
	struct snapshot *s = client_get_data(c);

	if (s->ended)
		return; /* too late: it answers as it ended */
	s->stopped = true;
	snapshot_finish_soon(s);
}

void snapshots_free_all(struct daemon *d)
{
	while (d->snapshots)
		snapshot_free(d->snapshots);

}

const struct command cmd_snapshot = {
	.name = "snapshot",
	.args_size = COMMAND_ARGS_SIZE(struct snapshot_args),
	.parse = parse_snapshot,
	.run = run_snapshot,
	.cancel = cancel_snapshot,
	.stop = stop_snapshot,
	.fresh = true,
};
