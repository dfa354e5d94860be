/* SPDX-License-Identifier: MIT */
/* exporter.c - see exporter.h: the interval timer, one pprof per process
 * and kind, handed to the sinks' workers. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/kindtab.h"
#include "base/log.h"
#include "base/loopstep.h"
#include "base/offload.h"
#include "encode/encode.h"
#include "export/container.h"
#include "export/exporter.h"
#include "export/http.h"
#include "export/sinks.h"
#include "perfd/macro.h"
#include "symbols/ksyms.h"

#define USEC_PER_SEC 1000000ULL
#define TIMER_ACCURACY_USEC 1000
#define HOST_MAX 64
#define NAME_TEXT_MAX 4096
/* An interval whose frames wait for symbol tables is tried again every
 * EXPORT_NAMES_POLL_MS, for at most EXPORT_NAMES_WAIT_MS (as an answer
 * waits: daemon.h); then it goes with what is named. */
#define EXPORT_NAMES_POLL_MS 50
#define EXPORT_NAMES_WAIT_MS 10000
/* Models handed to the lane and not encoded yet hold at most this much
 * (one always goes): past it the building waits for the lane. */
#define EXPORT_ENCODE_MAX_BYTES (32u << 20)

/* One interval's profiles, encoded, pushed to the sinks together once
 * none of their frames waits for a symbol table being built off the loop
 * (symbols/symload.h), or the wait is over: a profile sent is not sent
 * again, so it is not sent with frames that would be named a moment
 * later.  Items are (pprof, OTLP or NULL) pairs. */
struct batch {
	struct export_item **items;
	size_t n, cap;
	bool may_wait;      /* the interval's wait for names is not over */
	bool names_pending; /* a frame waits for its table: send nothing */
};

/* The interval being exported: its parts built into models a few per
 * loop turn, each model encoded on the lane, the batch sent once every
 * encoding is back.  One at a time: the next interval, and a retry of
 * this one, wait until it has ended and no job of an abandoned one is on
 * the lane (its jobs read the labels copied here). */
struct run {
	bool active;
	uint64_t gen; /* its jobs carry it: one of an abandoned run is dropped */
	uint64_t from_s, to_s;
	double from_unix;
	struct profile_parts parts; /* released once every model is built */
	size_t next;                /* the part and kind built next */
	int kind;
	struct model_builder *mb;   /* ... its model, when one turn was not
				     * enough (profile/model.h) */
	struct profile_parts one;   /* ... what mb builds: that part */
	size_t n_processes;
	size_t on_lane; /* its jobs not back yet */
	struct batch b;
	uint64_t t0_ns;
	const char *pairs[2 * (EXPORT_MAX_LABELS + 1)];
	size_t n_pairs;
	struct export_label labels[EXPORT_MAX_LABELS];
};

struct exporter {
	sd_event *event;
	struct export_source src;
	sd_event_source *timer;
	uint64_t interval_s;
	uint64_t from_s; /* CLOCK_MONOTONIC second the next interval starts at */
	struct export_worker *files, *push, *otlp;
	char hostname[HOST_MAX + 1];
	struct export_label labels[EXPORT_MAX_LABELS];
	size_t n_labels;
	struct exporter_stats stats;
	uint64_t due_to_s;          /* a closed interval not exported yet: its end */
	uint64_t names_deadline_ns; /* ... when it stops waiting for names */
	struct ingest_wait ingest;  /* ... its records coming in */
	struct run run;
	struct loop_step step;      /* builds the run's next models */
	struct offload *lane;       /* encodes them (export_job) */
	sd_event_source *done_io;
	size_t on_lane;             /* jobs on the lane, of any run ... */
	size_t on_lane_bytes;       /* ... and their models' bytes */
};

/* s with every byte outside [A-Za-z0-9._-] as '_' (file names, and
 * Pyroscope's application names, take no others). */
static void name_safe(char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '.' || *s == '_' || *s == '-'))
			*s = '_';
}

/* A label value for Pyroscope's "{k=v,...}": none of ,{}=" or control. */
static void value_safe(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f || strchr(",{}=\"", *s))
			*s = '_';
}

static const char *label_value(const struct exporter *x, const char *key, const char *fallback)
{
	for (size_t i = 0; i < x->n_labels; i++)
		if (!strcmp(x->labels[i].key, key))
			return x->labels[i].value;
	return fallback;
}

/* Appends ",key=value" (value made safe) to buf at *at. */
static void put_label(char *buf, size_t len, size_t *at, const char *key, const char *value)
{
	char v[EXPORT_LABEL_VALUE_MAX + 1];
	int k;

	if (!value || !value[0] || *at >= len)
		return;
	snprintf(v, sizeof(v), "%s", value);
	value_safe(v);
	k = snprintf(buf + *at, len - *at, "%s%s=%s", buf[*at - 1] == '{' ? "" : ",", key, v);
	*at = MIN(len, *at + (size_t)MAX(k, 0));
}

/* A process's service: the label service_name, else its systemd unit,
 * else its comm (Pyroscope's service_name, OTLP's service.name). */
static const char *service_name(const struct exporter *x, const char *comm, const char *unit)
{
	return label_value(x, "service_name", unit && unit[0] ? unit : comm[0] ? comm : "unknown");
}

/* Pyroscope's name for one process's profile: SERVICE{labels}, SERVICE
 * its service_name() with only the bytes an application name takes. */
static char *push_name(const struct exporter *x, uint32_t pid, const char *comm, const char *unit,
		       const char *cgroup)
{
	char service[EXPORT_LABEL_VALUE_MAX + 1], pidtext[16], *buf = malloc(NAME_TEXT_MAX);
	size_t at;

	if (!buf)
		return NULL;
	snprintf(service, sizeof(service), "%s", service_name(x, comm, unit));
	name_safe(service);
	snprintf(pidtext, sizeof(pidtext), "%u", pid);
	at = (size_t)snprintf(buf, NAME_TEXT_MAX, "%s{", service);
	put_label(buf, NAME_TEXT_MAX, &at, "hostname", x->hostname);
	put_label(buf, NAME_TEXT_MAX, &at, "pid", pidtext);
	put_label(buf, NAME_TEXT_MAX, &at, "comm", comm);
	put_label(buf, NAME_TEXT_MAX, &at, "unit", unit);
	put_label(buf, NAME_TEXT_MAX, &at, "cgroup", cgroup);
	/* config.c refuses the keys above; service_name is SERVICE */
	for (size_t i = 0; i < x->n_labels; i++)
		if (strcmp(x->labels[i].key, "service_name"))
			put_label(buf, NAME_TEXT_MAX, &at, x->labels[i].key, x->labels[i].value);
	if (at + 2 > NAME_TEXT_MAX) {
		free(buf);
		return NULL;
	}
	buf[at++] = '}';
	buf[at] = '\0';
	return buf;
}

/* HOST_YYYYMMDDTHHMMSSZ_PID_COMM.KIND.pb.gz, the time the interval's
 * start in UTC. */
static char *file_name(const struct exporter *x, double from_unix, uint32_t pid, const char *comm,
		       enum profile_kind kind)
{
	char host[HOST_MAX + 1], c[PERFD_TASK_COMM_LEN + 1], when[32], *name;
	time_t t = (time_t)from_unix;
	struct tm tm;

	snprintf(host, sizeof(host), "%s", x->hostname);
	snprintf(c, sizeof(c), "%s", comm[0] ? comm : "unknown");
	name_safe(host);
	name_safe(c);
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm);
	if (asprintf(&name, "%s_%s_%u_%s.%s.pb.gz", host, when, pid, c, kind_infos[kind].name) < 0)
		return NULL;
	return name;
}

/* One process's profile of one kind: its model, built on the loop, and
 * what the lane makes of it.  The lane reads the model, the names copied
 * here and the run's labels (struct run), and writes the items' bytes. */
struct export_job {
	struct offload_job job;
	uint64_t gen;        /* the run's */
	struct model *model; /* freed by the lane once encoded */
	size_t model_bytes;  /* counted in on_lane_bytes until it is back */
	struct encode_opts eo;
	char service[EXPORT_LABEL_VALUE_MAX + 1];
	char container[CONTAINER_ID_LEN + 1]; /* "": none */
	struct export_item *it, *ot; /* pprof, and OTLP or NULL */
	int r;
};

static struct export_job *job_of(struct offload_job *j)
{
	return container_of(j, struct export_job, job);
}

static void job_free(struct offload_job *oj)
{
	struct export_job *j = job_of(oj);

	model_free(j->model);
	export_item_unref(j->it);
	export_item_unref(j->ot);
	free(j);
}

/* What a model holds, for the bound on those waiting for the lane. */
static size_t model_bytes(const struct model *m)
{
	return sizeof(*m) + m->strings_cap + m->cap_functions * sizeof(*m->functions) +
	       m->cap_lines * sizeof(*m->lines) + m->cap_locations * sizeof(*m->locations) +
	       m->cap_mappings * sizeof(*m->mappings) + m->cap_pool * sizeof(*m->stack_pool) +
	       m->cap_samples * sizeof(*m->samples) + m->n_processes * sizeof(*m->processes);
}

static struct export_item *item_new(const struct export_item *like)
{
	struct export_item *it = calloc(1, sizeof(*it));

	if (!it)
		return NULL;
	atomic_init(&it->refs, 1);
	if (like) {
		it->kind = like->kind;
		it->pid = like->pid;
		it->from_unix = like->from_unix;
		it->to_unix = like->to_unix;
		it->sample_rate_hz = like->sample_rate_hz;
	}
	return it;
}

/* Hands b's bytes over to it (b is left empty). */
static void item_take(struct export_item *it, struct encode_buffer *b)
{
	it->data = TAKE_PTR(b->data);
	it->len = b->len;
}

/* On the lane, or in place at shutdown: the pprof (and OTLP) bytes, what
 * took the loop 0.3 to 1.1 s an interval.  Looks at the lane's cancel
 * flag (in place there is none: NULL). */
static void job_encode(struct export_job *j)
{
	struct otlp_resource res = {
		.host_name = j->eo.labels[1], /* the run's "hostname" pair */
		.service_name = j->service,
		.container_id = j->container[0] ? j->container : NULL,
	};

	struct encode_buffer pb, ot;

	j->eo.cancel = j->job.cancel;
	encode_buffer_init(&pb);
	encode_buffer_init(&ot);
	j->r = pprof_encode(j->model, &j->eo, &pb.sink);
	if (j->r >= 0 && j->ot)
		j->r = otlp_encode(j->model, &j->eo, &res, &ot.sink);
	if (j->r >= 0) {
		item_take(j->it, &pb);
		if (j->ot)
			item_take(j->ot, &ot);
	}
	encode_buffer_done(&pb);
	encode_buffer_done(&ot);
	j->model = model_free(j->model);
}

static void job_run(struct offload_job *oj)
{
	job_encode(job_of(oj));
}

/* The job of m (taken: freed on every path), a part's model of kind,
 * into *ret.  Returns 0, 1 when there is nothing to encode (nothing in
 * it, or its frames wait for names: b->names_pending), or -ENOMEM. */
static int job_new(struct exporter *x, struct model *m, enum profile_kind kind,
		   struct export_job **ret)
{
	struct run *run = &x->run;
	struct batch *b = &run->b;
	struct export_job *j;
	const char *comm, *unit, *cgroup;
	int r;

	if (m->total == 0 || m->n_processes != 1 || b->names_pending ||
	    (b->may_wait && m->pending_frames)) {
		/* (the model's frames have started their tables' builds) */
		b->names_pending = b->names_pending || (b->may_wait && m->pending_frames);
		model_free(m);
		return 1;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		model_free(m);
		return -ENOMEM;
	}
	j->job = (struct offload_job){ .run = job_run, .free = job_free };
	j->gen = run->gen;
	j->model = m;
	j->model_bytes = model_bytes(m);
	j->eo = (struct encode_opts){
		.period_ns = x->src.period_ns,
		.memory_sample_bytes = x->src.memory_sample_bytes,
		.duration_ns = (run->to_s - run->from_s) * NSEC_PER_SEC,
		.time_unix_ns = (uint64_t)(run->from_unix * 1e9),
		.labels = run->pairs,
		.n_labels = run->n_pairs,
	};
	comm = model_string(m, m->processes[0].comm);
	unit = model_string(m, m->processes[0].unit);
	cgroup = model_string(m, m->processes[0].cgroup);
	snprintf(j->service, sizeof(j->service), "%s", service_name(x, comm, unit));
	if (!container_id_from_cgroup(cgroup, j->container, sizeof(j->container)))
		j->container[0] = '\0';
	r = -ENOMEM;
	if (!(j->it = item_new(NULL)))
		goto fail;
	j->it->kind = kind;
	j->it->pid = m->processes[0].pid;
	j->it->from_unix = run->from_unix;
	j->it->to_unix = run->from_unix + (double)(run->to_s - run->from_s);
	j->it->sample_rate_hz = x->src.frequency_hz;
	if (x->files && !(j->it->file_name = file_name(x, run->from_unix, j->it->pid, comm, kind)))
		goto fail;
	if (x->push && !(j->it->push_name = push_name(x, j->it->pid, comm, unit, cgroup)))
		goto fail;
	if (x->otlp && !(j->ot = item_new(j->it)))
		goto fail;
	*ret = j;
	return 0;
fail:
	job_free(&j->job);
	return r;
}

/* A job back from the lane (or encoded in place): its items join its
 * run's batch, unless that run was abandoned.  Frees j. */
static void job_done(struct exporter *x, struct export_job *j)
{
	struct run *run = &x->run;
	struct batch *b = &run->b;

	if (j->gen != run->gen || !run->active) {
		job_free(&j->job);
		return;
	}
	if (j->r < 0) {
		if (j->r != -ECANCELED)
			x->stats.encode_errors++;
		job_free(&j->job);
		return;
	}
	if (b->n + 2 > b->cap) {
		size_t cap = MAX(16u, 2 * b->cap);
		struct export_item **items = realloc(b->items, cap * sizeof(*items));

		if (!items) {
			x->stats.encode_errors++;
			job_free(&j->job);
			return;
		}
		b->items = items;
		b->cap = cap;
	}
	b->items[b->n++] = TAKE_PTR(j->it);
	b->items[b->n++] = TAKE_PTR(j->ot);
	job_free(&j->job);
}

/* Sends the batch's profiles (send: else drops them) and empties it.  A
 * sink turned on or off while the batch was made gets what was made for
 * it, or nothing. */
static void batch_end(struct exporter *x, struct batch *b, bool send)
{
	for (size_t i = 0; i < b->n; i += 2) {
		if (send && x->files && b->items[i]->file_name)
			export_worker_push(x->files, b->items[i]);
		if (send && x->push && b->items[i]->push_name)
			export_worker_push(x->push, b->items[i]);
		if (send && x->otlp && b->items[i + 1])
			export_worker_push(x->otlp, b->items[i + 1]);
		export_item_unref(b->items[i + 1]);
		export_item_unref(b->items[i]);
	}
	free(b->items);
	*b = (struct batch){ 0 };
}

/* Starts the export of [from_s, to_s): the store's parts of every
 * process, the labels the lane reads.  Returns 0 or -ENOMEM. */
static int run_start(struct exporter *x, uint64_t from_s, uint64_t to_s, bool may_wait)
{
	struct run *run = &x->run;
	struct selection sel = { .all = true };
	uint64_t first, end;
	int r;

	/* Exports are the operator's, written or sent by perfd as root: they
	 * keep kernel addresses when the kernel would show them to root now
	 * (kptr_restrict 0 or 1), never with kptr_restrict 2. */
	x->src.model.kernel_addresses = ksyms_addresses_shown_now(true);
	*run = (struct run){ .gen = run->gen + 1, .from_s = from_s, .to_s = to_s,
			     .b = { .may_wait = may_wait } };
	run->t0_ns = now_monotonic_ns();
	/* once: each reading of the clocks differs by the time between them,
	 * and Pyroscope's whole seconds and the file names would too */
	run->from_unix = monotonic_to_unix(from_s * NSEC_PER_SEC);
	r = aggregator_query(x->src.aggregator, &sel, from_s * NSEC_PER_SEC, to_s * NSEC_PER_SEC,
			     &run->parts, &first, &end);
	if (r < 0)
		return r;
	run->n_processes = run->parts.n;
	memcpy(run->labels, x->labels, x->n_labels * sizeof(x->labels[0]));
	run->pairs[0] = "hostname";
	run->pairs[1] = x->hostname;
	run->n_pairs = 1;
	for (size_t i = 0; i < x->n_labels; i++) {
		run->pairs[2 * run->n_pairs] = run->labels[i].key;
		run->pairs[2 * run->n_pairs + 1] = run->labels[i].value;
		run->n_pairs++;
	}
	run->active = true;
	return 0;
}

/* Builds the model of the run's part and kind being built until until_ns
 * (UINT64_MAX: in one go), in the run's builder: a process of tens of
 * thousands of stacks takes more than a turn.  Returns 1 with the model
 * in *ret, 0 when the turn ended first (the builder goes on at the next),
 * or -ENOMEM. */
static int run_model(struct exporter *x, uint64_t until_ns, struct model **ret)
{
	struct run *run = &x->run;
	const struct model_budget budget = { .deadline_ns = until_ns };
	int r;

	if (!run->mb) {
		struct model_opts mo = x->src.model;

		mo.kind = (enum profile_kind)run->kind;
		run->one = (struct profile_parts){ .parts = &run->parts.parts[run->next], .n = 1,
						   .cap = 1 };
		r = model_builder_new(&mo, &run->one, aggregator_stacks(x->src.aggregator),
				      &run->mb);
		if (r < 0)
			return r;
	}
	r = model_builder_step(run->mb, until_ns == UINT64_MAX ? NULL : &budget);
	if (r == 1 && model_builder_finish(run->mb, ret) < 0)
		r = -ENOMEM;
	if (r != 0)
		run->mb = model_builder_free(run->mb);
	return r;
}

/* Builds the run's next models until until_ns, each encoded in place
 * (in_place) or handed to the lane, while the models on the lane stay
 * under EXPORT_ENCODE_MAX_BYTES.  Returns true once every model is built
 * (the parts are released then), false when the time or the bound ended
 * the turn. */
static bool run_build(struct exporter *x, uint64_t until_ns, bool in_place)
{
	struct run *run = &x->run;

	while (run->next < run->parts.n) {
		enum profile_kind kind = (enum profile_kind)run->kind;
		struct export_job *j;
		struct model *m;
		int r;

		if (!in_place && x->on_lane && x->on_lane_bytes >= EXPORT_ENCODE_MAX_BYTES)
			return false;
		if (run->mb || run->parts.parts[run->next].prof.totals[kind]) {
			r = run_model(x, in_place ? UINT64_MAX : until_ns, &m);
			if (r == 0)
				return false;
			r = r < 0 ? r : job_new(x, m, kind, &j);
			if (r < 0)
				x->stats.encode_errors++;
			if (r == 0 && (in_place || offload_submit(x->lane, &j->job) < 0)) {
				job_encode(j); /* no lane: the loop encodes it */
				job_done(x, j);
			} else if (r == 0) {
				run->on_lane++;
				x->on_lane++;
				x->on_lane_bytes += j->model_bytes;
				x->stats.max_encoding_bytes = MAX(x->stats.max_encoding_bytes,
								  x->on_lane_bytes);
			}
		}
		if (++run->kind == PROFILE_KINDS) {
			run->kind = 0;
			run->next++;
		}
		if (now_monotonic_ns() >= until_ns)
			break;
	}
	if (run->next < run->parts.n)
		return false;
	aggregator_release_parts(x->src.aggregator, &run->parts);
	return true;
}

/* Ends the run whose models are built and back: sends its batch, or, when
 * a frame waits for names, drops it and returns -EAGAIN (the interval is
 * tried again).  Returns 0 or -EAGAIN. */
static int run_end(struct exporter *x)
{
	struct run *run = &x->run;
	double ms;

	run->active = false;
	if (run->b.names_pending) {
		batch_end(x, &run->b, false);
		x->stats.waits_for_names++;
		return -EAGAIN;
	}
	x->stats.profiles += run->b.n / 2;
	batch_end(x, &run->b, true);
	ms = (now_monotonic_ns() - run->t0_ns) / 1e6;
	x->stats.intervals++;
	x->stats.last_export_unix = monotonic_to_unix(now_monotonic_ns());
	x->stats.last_encode_ms = ms;
	x->stats.longest_encode_ms = MAX(x->stats.longest_encode_ms, ms);
	log_debug("Exported %zu processes' profiles of %" PRIu64 " s in %.1f ms.", run->n_processes,
		  run->to_s - run->from_s, ms);
	return 0;
}

/* Drops the run (its jobs on the lane are dropped when they come back). */
static void run_abandon(struct exporter *x)
{
	struct run *run = &x->run;

	if (!run->active)
		return;
	run->mb = model_builder_free(run->mb);
	aggregator_release_parts(x->src.aggregator, &run->parts);
	batch_end(x, &run->b, false);
	run->active = false;
	loop_step_disarm(&x->step);
}

static int schedule(struct exporter *x)
{
	uint64_t at = (x->from_s + x->interval_s) * USEC_PER_SEC;

	return sd_event_source_set_time(x->timer, at);
}

/* The run has ended on the loop: the next interval is scheduled, or this
 * one tried again soon when its frames waited for names. */
static void run_ended(struct exporter *x)
{
	int r;

	if (run_end(x) == -EAGAIN) {
		r = sd_event_source_set_time_relative(x->timer, EXPORT_NAMES_POLL_MS * 1000);
	} else {
		x->from_s = x->due_to_s;
		x->due_to_s = 0;
		r = schedule(x);
	}
	if (r < 0)
		log_warning_errno(r, "Failed to set the export timer: %m");
}

/* Has the run's next slice built at a later turn (base/loopstep.h). */
static void step_arm(struct exporter *x)
{
	int r = loop_step_arm(&x->step);

	if (r < 0) {
		/* the next interval's timer finds the run still active and
		 * waits: abandon it rather than stall the exporter */
		log_warning_errno(r, "Failed to schedule the export's next step, interval dropped: %m");
		x->stats.encode_errors++;
		run_abandon(x);
		x->due_to_s = 0;
		(void)schedule(x);
	}
}

/* Counts a loop turn of the export that began at t0_ns. */
static void note_step(struct exporter *x, uint64_t t0_ns)
{
	uint64_t now = now_monotonic_ns();

	x->stats.steps++;
	x->stats.longest_step_ms = MAX(x->stats.longest_step_ms, (now - t0_ns) / 1e6);
}

/* One loop turn of the run: a slice of its models built. */
static void on_step(void *userdata)
{
	struct exporter *x = userdata;
	uint64_t t0 = now_monotonic_ns();
	bool built = run_build(x, t0 + MODEL_SLICE_NS, false);

	note_step(x, t0);
	if (built && !x->run.on_lane)
		run_ended(x);
	else if (!built && !(x->on_lane && x->on_lane_bytes >= EXPORT_ENCODE_MAX_BYTES))
		step_arm(x);
	/* else on_done goes on once the lane gives models back */
}

static int on_done(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct exporter *x = userdata;
	struct offload_job *done = offload_take_done(x->lane), *next;
	struct run *run = &x->run;
	bool building = run->active && run->next < run->parts.n;
	uint64_t t0 = now_monotonic_ns();

	for (; done; done = next) {
		struct export_job *j = job_of(done);

		next = done->next;
		x->on_lane--;
		x->on_lane_bytes -= j->model_bytes;
		if (j->gen == run->gen && run->active)
			run->on_lane--;
		job_done(x, j);
	}
	if (!run->active)
		return 0;
	if (!building && !run->on_lane)
		run_ended(x);
	note_step(x, t0);
	if (building && !loop_step_armed(&x->step))
		step_arm(x); /* it waited for the bound */
	return 0;
}

/* Starts exporting the closed interval [from_s, due_to_s), its records
 * in, or has it tried again soon while an earlier run's jobs are on the
 * lane or its frames' tables are being built (retry: this is such a try).
 * Returns 0 or -errno (the timer could not be set). */
static int export_due(struct exporter *x, bool retry)
{
	uint64_t now = now_monotonic_ns();
	bool may_wait = now < x->names_deadline_ns;

	/* a retry rebuilds every process's models: not while the tables it
	 * waited for are still being built */
	if (x->on_lane || (retry && may_wait && x->src.loads_pending &&
			   x->src.loads_pending(x->src.ctx)))
		return sd_event_source_set_time_relative(x->timer, EXPORT_NAMES_POLL_MS * 1000);
	if (run_start(x, x->from_s, x->due_to_s, may_wait) < 0) {
		x->stats.encode_errors++;
		x->from_s = x->due_to_s;
		x->due_to_s = 0;
		return schedule(x);
	}
	step_arm(x);
	/* run_ended sets it */
	return sd_event_source_set_time(x->timer, UINT64_MAX);
}

static void on_ingested(struct ingest_wait *w)
{
	int r = export_due(container_of(w, struct exporter, ingest), false);

	if (r < 0)
		log_warning_errno(r, "Failed to set the export timer: %m");
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct exporter *x = userdata;
	uint64_t now = now_monotonic_ns();

	/* rescheduled (exporter_configure) while the closed interval's
	 * records come in or its profiles are made: that interval goes
	 * first, and it sets the timer */
	if (x->ingest.waiting || x->run.active)
		return sd_event_source_set_time(s, UINT64_MAX);
	if (x->due_to_s)
		return export_due(x, true);
	if (now / NSEC_PER_SEC <= x->from_s)
		return schedule(x);
	/* The interval closes now; its profiles are built once the records
	 * queued until now are ingested, the loop serving its clients
	 * meanwhile.  What is ingested meanwhile falls in later windows. */
	x->due_to_s = now / NSEC_PER_SEC;
	x->names_deadline_ns = now + EXPORT_NAMES_WAIT_MS * 1000000ULL;
	if (x->src.ingest && ingest_wait_start(x->src.ingest, &x->ingest, on_ingested) > 0)
		return sd_event_source_set_time(s, UINT64_MAX);
	return export_due(x, false);
}

/* An interval closed and not exported yet is not: its wait for records
 * and its run end (its from_s stays: the next interval takes it in). */
static void stop_waiting(struct exporter *x)
{
	if (x->src.ingest)
		ingest_wait_cancel(x->src.ingest, &x->ingest);
	run_abandon(x);
	x->due_to_s = 0;
}

int exporter_new(sd_event *event, const struct export_source *src, struct exporter **ret)
{
	struct exporter *x = calloc(1, sizeof(*x));
	int r;

	if (!x)
		return -ENOMEM;
	x->event = sd_event_ref(event);
	x->src = *src;
	if (gethostname(x->hostname, sizeof(x->hostname) - 1) < 0 || !x->hostname[0])
		snprintf(x->hostname, sizeof(x->hostname), "localhost");
	r = sd_event_add_time(event, &x->timer, CLOCK_MONOTONIC, UINT64_MAX, TIMER_ACCURACY_USEC,
			      on_timer, x);
	if (r >= 0)
		r = sd_event_source_set_description(x->timer, "export");
	if (r >= 0)
		r = sd_event_source_set_enabled(x->timer, SD_EVENT_OFF);
	if (r >= 0)
		r = loop_step_init(&x->step, event, "export-step", on_step, x);
	/* one lane at the workloads' nice value, as the answers' encode lanes
	 * (api/encode_lane.h), for the same reason; ordered, so that the
	 * batch, and the sinks, get the profiles in the order they were built
	 * (by process, CPU before memory), not newest first as from a pool */
	if (r >= 0)
		r = offload_new(&(struct offload_opts){ .lanes = 1, .ordered = true,
							.background = true, .take_back = true,
							.name = "perfd-export" },
				&x->lane);
	if (r >= 0)
		r = sd_event_add_io(event, &x->done_io, offload_fd(x->lane), EPOLLIN, on_done, x);
	if (r < 0) {
		exporter_free(x);
		return r;
	}
	*ret = x;
	return 0;
}

/* One sink of a configuration being applied: its new target (NULL: off)
 * and, when it was off, the worker made for it in the first phase. */
struct sink_change {
	struct export_worker **w;
	const struct export_sink_ops *ops;
	void *target;
	const char *describe;
	struct export_worker *fresh;
};

/* Starts, retargets or stops one sink, as its change says; cannot fail
 * (the workers it may need were made before). */
static void sink_apply(struct sink_change *c, size_t max_bytes)
{
	if (c->fresh) {
		*c->w = TAKE_PTR(c->fresh);
		c->target = NULL; /* the worker has it */
	} else if (c->target && *c->w) {
		export_worker_retarget(*c->w, TAKE_PTR(c->target), c->describe, max_bytes);
	} else if (!c->target) {
		*c->w = export_worker_free(*c->w);
	}
}

/* All or nothing: the targets are made, then the workers of the sinks that
 * were off; only once all of that worked does anything running change, so
 * a failure (a SIGHUP's) leaves the exporters as they were. */
int exporter_configure(struct exporter *x, const struct export_opts *o)
{
	char push_describe[256] = "", otlp_describe[256] = "";
	struct sink_change ch[] = {
		{ &x->files, &files_sink_ops, NULL, o->output_dir, NULL },
		{ &x->push, &pyroscope_sink_ops, NULL, push_describe, NULL },
		{ &x->otlp, &otlp_sink_ops, NULL, otlp_describe, NULL },
	};
	bool was_on = x->files || x->push || x->otlp;
	int r = 0;

	if (o->output_dir) {
		/* the worker reports a directory that still cannot be used */
		(void)mkdir(o->output_dir, 0750);
		r = files_target_new(o, &ch[0].target);
	}
	if (r >= 0 && (o->push.url || o->otlp.url))
		r = http_global_init();
	if (r >= 0 && o->push.url && (r = pyroscope_target_new(o, &ch[1].target)) >= 0)
		http_describe(o->push.url, push_describe, sizeof(push_describe));
	if (r >= 0 && o->otlp.url && (r = otlp_target_new(o, &ch[2].target)) >= 0)
		http_describe(o->otlp.url, otlp_describe, sizeof(otlp_describe));
	for (size_t i = 0; r >= 0 && i < ELEMENTSOF(ch); i++)
		if (ch[i].target && !*ch[i].w) {
			/* export_worker_new takes the target, whatever it returns */
			r = export_worker_new(ch[i].ops, TAKE_PTR(ch[i].target), ch[i].describe,
					      o->queue_max_bytes, &ch[i].fresh);
		}
	if (r < 0) {
		for (size_t i = 0; i < ELEMENTSOF(ch); i++) {
			export_worker_free(ch[i].fresh);
			ch[i].ops->free_target(ch[i].target);
		}
		return r;
	}
	for (size_t i = 0; i < ELEMENTSOF(ch); i++)
		sink_apply(&ch[i], o->queue_max_bytes);

	memcpy(x->labels, o->labels, o->n_labels * sizeof(o->labels[0]));
	x->n_labels = o->n_labels;
	if (!x->files && !x->push && !x->otlp) {
		/* an interval closed and not exported yet goes nowhere */
		stop_waiting(x);
		return sd_event_source_set_enabled(x->timer, SD_EVENT_OFF);
	}
	if (!was_on)
		x->from_s = now_monotonic_ns() / NSEC_PER_SEC;
	if (!was_on || x->interval_s != o->interval_s) {
		x->interval_s = o->interval_s;
		r = schedule(x);
		if (r >= 0)
			r = sd_event_source_set_enabled(x->timer, SD_EVENT_ON);
		if (r < 0)
			return r;
	}
	return 0;
}

void exporter_set_sampling(struct exporter *x, uint64_t period_ns, unsigned frequency_hz)
{
	x->src.period_ns = period_ns;
	x->src.frequency_hz = frequency_hz;
}

void exporter_get_stats(struct exporter *x, struct exporter_stats *ret)
{
	*ret = x->stats;
	ret->enabled = x->files || x->push || x->otlp;
	ret->interval_s = x->interval_s;
	ret->encoding = x->on_lane;
	ret->encoding_bytes = x->on_lane_bytes;
	ret->n_sinks = 0;
	if (x->files)
		export_worker_get_stats(x->files, &ret->sinks[ret->n_sinks++]);
	if (x->push)
		export_worker_get_stats(x->push, &ret->sinks[ret->n_sinks++]);
	if (x->otlp)
		export_worker_get_stats(x->otlp, &ret->sinks[ret->n_sinks++]);
}

/* How long each sink may take to send what is queued at shutdown: files
 * are written in milliseconds; a backend that does not answer must not
 * hold the stop past systemd's patience. */
#define FINISH_FILES_MS 10000
#define FINISH_PUSH_MS 3000
/* ... and the symbol tables the last interval's frames wait for */
#define FINISH_NAMES_MS 5000

/* [from_s, to_s) exported here and now, every model encoded in place
 * (the loop has ended).  Returns 0 or -EAGAIN as run_end. */
static int export_in_place(struct exporter *x, uint64_t from_s, uint64_t to_s, bool may_wait)
{
	if (run_start(x, from_s, to_s, may_wait) < 0) {
		x->stats.encode_errors++;
		return 0;
	}
	(void)run_build(x, UINT64_MAX, true);
	return run_end(x);
}

void exporter_finish(struct exporter *x)
{
	struct export_worker *const sinks[] = { x->files, x->push, x->otlp };
	const unsigned timeouts[] = { FINISH_FILES_MS, FINISH_PUSH_MS, FINISH_PUSH_MS };
	uint64_t to_s = now_monotonic_ns() / NSEC_PER_SEC + 1; /* the second under way too */

	/* An interval being encoded on the lane is exported again below,
	 * from the same from_s: its encodings are cancelled (the encoders see
	 * the lane's flag) rather than waited for, and logged; with the lane
	 * gone, what follows encodes in place. */
	if (x->on_lane)
		log_info("Export: %zu profiles being encoded at shutdown cancelled; their interval is "
			 "written with the one under way.",
			 x->on_lane);
	x->done_io = sd_event_source_disable_unref(x->done_io);
	x->lane = offload_free(x->lane);
	stop_waiting(x); /* every record is in (exporter.h) */

	/* shutting down: the tables its frames wait for get a bounded time,
	 * then the interval goes as it is named */
	if (x->interval_s && to_s > x->from_s && (x->files || x->push || x->otlp)) {
		if (export_in_place(x, x->from_s, to_s, true) == -EAGAIN) {
			if (x->src.settle)
				x->src.settle(x->src.ctx, FINISH_NAMES_MS);
			(void)export_in_place(x, x->from_s, to_s, false);
		}
		x->from_s = to_s;
	}
	for (size_t i = 0; i < ELEMENTSOF(sinks); i++) {
		struct export_worker_stats st;
		size_t left;

		if (!sinks[i])
			continue;
		left = export_worker_finish(sinks[i], timeouts[i]);
		export_worker_get_stats(sinks[i], &st);
		if (left)
			log_warning("Exporter %s: %zu profiles not sent by shutdown, dropped (%" PRIu64
				    " dropped in all).", st.name, left, st.dropped);
	}
}

struct exporter *exporter_free(struct exporter *x)
{
	if (!x)
		return NULL;
	/* first: its jobs read the run's labels; a job in progress sees the
	 * cancel flag */
	x->done_io = sd_event_source_disable_unref(x->done_io);
	x->lane = offload_free(x->lane);
	stop_waiting(x);
	export_worker_free(x->files);
	export_worker_free(x->push);
	export_worker_free(x->otlp);
	loop_step_done(&x->step);
	sd_event_source_disable_unref(x->timer);
	sd_event_unref(x->event);
	free(x);
	return NULL;
}
