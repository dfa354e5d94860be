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
#include "base/log.h"
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
 * waits: api/command.h); then it goes with what is named. */
#define EXPORT_NAMES_POLL_MS 50
#define EXPORT_NAMES_WAIT_MS 10000

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
};

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
	if (asprintf(&name, "%s_%s_%u_%s.%s.pb.gz", host, when, pid, c, profile_kinds[kind].name) < 0)
		return NULL;
	return name;
}

/* The OTLP request of the same profile as like (the pprof item: its
 * process, kind and interval), into *ret.  Returns 0 or -ENOMEM. */
static int otlp_item(const struct exporter *x, const struct export_item *like, const struct model *m,
		     const struct encode_opts *eo, struct export_item **ret)
{
	const struct model_process *pr = &m->processes[0];
	char container[CONTAINER_ID_LEN + 1];
	struct otlp_resource res = {
		.host_name = x->hostname,
		.service_name = service_name(x, model_string(m, pr->comm), model_string(m, pr->unit)),
		.container_id = container_id_from_cgroup(model_string(m, pr->cgroup), container,
							 sizeof(container)) ?
					container :
					NULL,
	};
	struct export_item *it = calloc(1, sizeof(*it));
	int r;

	if (!it)
		return -ENOMEM;
	atomic_init(&it->refs, 1);
	it->kind = like->kind;
	it->pid = like->pid;
	it->from_unix = like->from_unix;
	it->to_unix = like->to_unix;
	it->sample_rate_hz = like->sample_rate_hz;
	r = otlp_encode_bytes(m, eo, &res, &it->data, &it->len);
	if (r < 0) {
		export_item_unref(it);
		return r;
	}
	*ret = it;
	return 0;
}

/* One process's profile of one kind, encoded, for the sinks; from_unix
 * is from_s as Unix time, the same for every profile of the interval.
 * Returns 0, 1 when it holds nothing, or -ENOMEM. */
static int export_part(struct exporter *x, struct profile_part *part, enum profile_kind kind,
		       uint64_t from_s, uint64_t to_s, double from_unix, struct batch *b)
{
	struct profile_parts one = { .parts = part, .n = 1, .cap = 1 };
	struct model_opts mo = x->src.model;
	const char *pairs[2 * (EXPORT_MAX_LABELS + 1)];
	struct encode_opts eo = {
		.period_ns = x->src.period_ns,
		.memory_sample_bytes = x->src.memory_sample_bytes,
		.duration_ns = (to_s - from_s) * NSEC_PER_SEC,
		.labels = pairs,
	};
	struct export_item *it = NULL, *ot = NULL;
	struct model *m = NULL;
	const char *comm, *unit, *cgroup;
	int r;

	pairs[0] = "hostname";
	pairs[1] = x->hostname;
	eo.n_labels = 1;
	for (size_t i = 0; i < x->n_labels; i++) {
		pairs[2 * eo.n_labels] = x->labels[i].key;
		pairs[2 * eo.n_labels + 1] = x->labels[i].value;
		eo.n_labels++;
	}
	mo.kind = kind;
	r = model_build(&mo, &one, aggregator_stacks(x->src.aggregator), &m);
	if (r < 0)
		return r;
	if (m->total == 0 || m->n_processes != 1 || b->names_pending ||
	    (b->may_wait && m->pending_frames)) {
		/* (the model's frames have started their tables' builds) */
		b->names_pending = b->names_pending || (b->may_wait && m->pending_frames);
		model_free(m);
		return 1;
	}
	if (b->n + 2 > b->cap) {
		size_t cap = MAX(16u, 2 * b->cap);
		struct export_item **items = realloc(b->items, cap * sizeof(*items));

		if (!items) {
			model_free(m);
			return -ENOMEM;
		}
		b->items = items;
		b->cap = cap;
	}
	it = calloc(1, sizeof(*it));
	if (!it) {
		model_free(m);
		return -ENOMEM;
	}
	atomic_init(&it->refs, 1);
	it->kind = kind;
	it->pid = m->processes[0].pid;
	it->from_unix = from_unix;
	it->to_unix = it->from_unix + (double)(to_s - from_s);
	it->sample_rate_hz = x->src.frequency_hz;
	eo.time_unix_ns = (uint64_t)(it->from_unix * 1e9);
	comm = model_string(m, m->processes[0].comm);
	unit = model_string(m, m->processes[0].unit);
	cgroup = model_string(m, m->processes[0].cgroup);
	r = pprof_encode_bytes(m, &eo, &it->data, &it->len);
	if (r >= 0 && x->files && !(it->file_name = file_name(x, it->from_unix, it->pid, comm, kind)))
		r = -ENOMEM;
	if (r >= 0 && x->push && !(it->push_name = push_name(x, it->pid, comm, unit, cgroup)))
		r = -ENOMEM;
	if (r >= 0 && x->otlp)
		r = otlp_item(x, it, m, &eo, &ot);
	model_free(m);
	if (r < 0) {
		export_item_unref(it);
		return r;
	}
	b->items[b->n++] = it;
	b->items[b->n++] = ot;
	return 0;
}

/* Sends the batch's profiles (send: else drops them) and empties it. */
static void batch_end(struct exporter *x, struct batch *b, bool send)
{
	for (size_t i = 0; i < b->n; i += 2) {
		if (send && x->files)
			export_worker_push(x->files, b->items[i]);
		if (send && x->push)
			export_worker_push(x->push, b->items[i]);
		if (send && b->items[i + 1])
			export_worker_push(x->otlp, b->items[i + 1]);
		export_item_unref(b->items[i + 1]);
		export_item_unref(b->items[i]);
	}
	free(b->items);
	*b = (struct batch){ 0 };
}

/* Every process's profiles of [from_s, to_s).  Returns 0, or -EAGAIN when
 * may_wait and a frame waits for its table: nothing is sent then, and the
 * caller asks again. */
static int export_interval(struct exporter *x, uint64_t from_s, uint64_t to_s, bool may_wait)
{
	struct selection sel = { .all = true };
	struct profile_parts parts = { 0 };
	struct batch b = { .may_wait = may_wait };
	uint64_t t0 = now_monotonic_ns(), first, end;
	/* once: each reading of the clocks differs by the time between them,
	 * and Pyroscope's whole seconds and the file names would too */
	double from_unix = monotonic_to_unix(from_s * NSEC_PER_SEC);
	size_t n_processes;
	double ms;

	/* Exports are the operator's, written or sent by perfd as root: they
	 * keep kernel addresses when the kernel would show them to root now
	 * (kptr_restrict 0 or 1), never with kptr_restrict 2. */
	x->src.model.kernel_addresses = ksyms_addresses_shown_now(true);
	if (aggregator_query(x->src.aggregator, &sel, from_s * NSEC_PER_SEC, to_s * NSEC_PER_SEC, &parts,
			     &first, &end) < 0) {
		x->stats.encode_errors++;
		return 0;
	}
	for (size_t i = 0; i < parts.n; i++)
		for (int k = 0; k < PROFILE_KINDS; k++) {
			int r;

			if (!parts.parts[i].prof.totals[k])
				continue;
			r = export_part(x, &parts.parts[i], (enum profile_kind)k, from_s, to_s, from_unix,
					&b);
			if (r < 0)
				x->stats.encode_errors++;
		}
	n_processes = parts.n; /* releasing them clears it */
	aggregator_release_parts(x->src.aggregator, &parts);
	if (b.names_pending) {
		batch_end(x, &b, false);
		x->stats.waits_for_names++;
		return -EAGAIN;
	}
	x->stats.profiles += b.n / 2;
	batch_end(x, &b, true);
	ms = (now_monotonic_ns() - t0) / 1e6;
	x->stats.intervals++;
	x->stats.last_export_unix = monotonic_to_unix(now_monotonic_ns());
	x->stats.last_encode_ms = ms;
	x->stats.longest_encode_ms = MAX(x->stats.longest_encode_ms, ms);
	log_debug("Exported %zu processes' profiles of %" PRIu64 " s in %.1f ms.", n_processes,
		  to_s - from_s, ms);
	return 0;
}

static int schedule(struct exporter *x)
{
	uint64_t at = (x->from_s + x->interval_s) * USEC_PER_SEC;

	return sd_event_source_set_time(x->timer, at);
}

/* Exports the closed interval [from_s, due_to_s), its records in, or has
 * it tried again soon when its frames wait for names (retry: this is such
 * a try).  Returns 0 or -errno (the timer could not be set). */
static int export_due(struct exporter *x, bool retry)
{
	uint64_t now = now_monotonic_ns();
	bool may_wait = now < x->names_deadline_ns;

	/* a retry rebuilds every process's models: not while the tables it
	 * waited for are still being built */
	if (retry && may_wait && x->src.loads_pending && x->src.loads_pending(x->src.ctx))
		return sd_event_source_set_time_relative(x->timer, EXPORT_NAMES_POLL_MS * 1000);
	if (export_interval(x, x->from_s, x->due_to_s, may_wait) == -EAGAIN)
		return sd_event_source_set_time_relative(x->timer, EXPORT_NAMES_POLL_MS * 1000);
	x->from_s = x->due_to_s;
	x->due_to_s = 0;
	return schedule(x);
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
	 * records come in: that interval goes first, and it sets the timer */
	if (x->ingest.waiting)
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

/* An interval closed and waiting for its records waits no more (its
 * from_s stays: the next interval takes it in). */
static void stop_waiting(struct exporter *x)
{
	if (x->src.ingest)
		ingest_wait_cancel(x->src.ingest, &x->ingest);
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
		if (!(ch[0].target = files_target_new(o)))
			r = -ENOMEM;
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

void exporter_finish(struct exporter *x)
{
	struct export_worker *const sinks[] = { x->files, x->push, x->otlp };
	const unsigned timeouts[] = { FINISH_FILES_MS, FINISH_PUSH_MS, FINISH_PUSH_MS };
	uint64_t to_s = now_monotonic_ns() / NSEC_PER_SEC + 1; /* the second under way too */

	stop_waiting(x); /* every record is in (exporter.h) */

	/* shutting down: the tables its frames wait for get a bounded time,
	 * then the interval goes as it is named */
	if (x->interval_s && to_s > x->from_s && (x->files || x->push || x->otlp)) {
		if (export_interval(x, x->from_s, to_s, true) == -EAGAIN) {
			if (x->src.settle)
				x->src.settle(x->src.ctx, FINISH_NAMES_MS);
			(void)export_interval(x, x->from_s, to_s, false);
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
	stop_waiting(x);
	export_worker_free(x->files);
	export_worker_free(x->push);
	export_worker_free(x->otlp);
	sd_event_source_disable_unref(x->timer);
	sd_event_unref(x->event);
	free(x);
	return NULL;
}
