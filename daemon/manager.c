/* SPDX-License-Identifier: MIT */
/* manager.c - see manager.h for the design and the path of one sample. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "base/clock.h"
#include "base/jsonw.h"
#include "encode/encode.h"
#include "profile/model.h"
#include "base/log.h"
#include "profile/frame.h"
#include "manager.h"
#include "interp/python/python.h"
#include "api/auth.h"
#include "api/query.h"
#include "api/request.h"
#include "collect/drain.h"
#include "collect/sampler.h"
#include "api/server.h"
#include "symbols/symbolize.h"
#include "unwind/unwinder.h"

#define USEC_PER_SEC 1000000ULL
/* How often the drain thread empties the ring buffer when the BPF side
 * does not ask sooner: short enough that ps and snapshots see fresh data. */
#define DRAIN_INTERVAL_MS 200
/* Records the loop may fall behind the drain thread by (collect/drain.h):
 * four default ring buffers. */
#define DRAIN_MAX_QUEUED_BYTES (32u << 20)
#define MAINTAIN_INTERVAL_USEC (1000 * 1000)
#define MAX_SNAPSHOTS 32
#define SNAPSHOT_TIMER_ACCURACY_USEC 1000
/* Python: interned functions in all, code objects cached per process. */
#define PYTHON_MAX_FUNCTIONS (1u << 20)
#define PYTHON_MAX_CODE_PER_PROCESS 65536
#define PYTHON_MAX_CODE_BYTES (64u << 20)
#define PYTHON_MAX_NAME_BYTES (64u << 20)

/* A snapshot from now on, waiting for its end. */
struct snapshot {
	struct manager *m;
	struct client *client;
	struct perfd_request req;
	struct collector c;
	sd_event_source *timer;
	sd_event_source *pidfd_io;
	int pidfd;
	struct snapshot *prev, *next;
};

struct manager {
	struct manager_opts opts;
	sd_event *event;
	struct sampler *sampler;
	struct symbolizer *symbolizer;
	struct aggregator *aggregator;
	struct server *server;
	struct unwinder *unwinder; /* NULL: frame pointers only */
	struct python *python;
	struct drain *drain; /* the thread that empties the ring buffer */
	sd_event_source *queue_io, *maintain_timer, *sigterm, *sigint;
	uint64_t start_ns;
	struct snapshot *snapshots;
	size_t n_snapshots;
	uint64_t malformed_records;
};

static int on_record(void *ctx, void *data, size_t size)
{
	struct manager *m = ctx;

	if (aggregator_ingest(m->aggregator, data, size) < 0)
		m->malformed_records++;
	return 0;
}

/* Ingests everything sampled until now: what the ring buffer holds too,
 * for answers that must see the latest samples. */
static void drain(struct manager *m)
{
	int r = drain_now(m->drain);

	if (r < 0)
		log_warning_errno(r, "Failed to drain the ring buffer, ignoring: %m");
	(void)drain_deliver(m->drain, on_record, m);
}

/* The drain thread queued records. */
static int on_queue_ready(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct manager *m = userdata;

	(void)drain_deliver(m->drain, on_record, m);
	return 0;
}

/* Once a second the store rolls windows up and lets old data go. */
static int on_maintain_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct manager *m = userdata;

	aggregator_maintain(m->aggregator, now_monotonic_ns());
	(void)sd_event_source_set_time_relative(s, MAINTAIN_INTERVAL_USEC);
	return 0;
}

/* --- replies -------------------------------------------------------- */

static void reply_json(struct client *c, json_object *o)
{
	size_t len;
	const char *text;

	if (!o) {
		static const char oom[] = "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"internal\","
					  "\"message\":\"perfd ran out of memory building the answer\"}}";
		(void)server_reply(c, oom, sizeof(oom) - 1);
		return;
	}
	text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
	(void)server_reply(c, text, len);
	json_object_put(o);
}

static uint64_t daemon_rss_bytes(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/statm", "re");
	unsigned long size, resident;

	if (!f || fscanf(f, "%lu %lu", &size, &resident) != 2)
		return 0;
	return (uint64_t)resident * sysconf(_SC_PAGESIZE);
}

static double uptime_seconds(const struct manager *m)
{
	return (double)(now_monotonic_ns() - m->start_ns) / NSEC_PER_SEC;
}

static json_object *build_status(struct manager *m)
{
	struct status_info info = {
		.uptime_seconds = uptime_seconds(m),
		.frequency_hz = m->opts.frequency_hz,
		.cpus = sampler_cpus(m->sampler),
		.period_ns = sampler_period_ns(m->sampler),
		.limits = m->opts.limits,
		.daemon_rss_bytes = daemon_rss_bytes(),
		.clients = server_clients(m->server),
		.snapshots = m->n_snapshots,
	};

	drain(m);
	if (sampler_read_counters(m->sampler, info.bpf) < 0)
		memset(info.bpf, 0, sizeof(info.bpf));
	aggregator_get_stats(m->aggregator, &info.agg);
	symbolizer_get_stats(m->symbolizer, &info.sym);
	info.unwind_tables = m->unwinder != NULL;
	if (m->unwinder)
		unwinder_get_stats(m->unwinder, &info.unwind);
	python_get_stats(m->python, &info.python);
	drain_get_stats(m->drain, &info.drain);
	return query_status(&info);
}

/* --- snapshots ------------------------------------------------------ */

/* Reads field 22 (starttime, clock ticks since boot) of /proc/PID/stat. */
static int read_start_ticks(pid_t pid, uint64_t *ret)
{
	char path[64], buf[1024], *p;
	_cleanup_close_ int fd = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : negative_errno();
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return n < 0 ? negative_errno() : -ESRCH;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* comm may hold anything, but not after this */
	if (!p)
		return -EIO;
	/* p is at the end of field 2; each space found starts the next one */
	for (int field = 2; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EIO;
	}
	if (sscanf(p, " %" SCNu64, ret) != 1)
		return -EIO;
	return 0;
}

static void snapshot_free(struct snapshot *s)
{
	struct manager *m = s->m;

	aggregator_remove_collector(m->aggregator, &s->c);
	aggregator_release_parts(m->aggregator, &s->c.parts);
	sd_event_source_disable_unref(s->timer);
	sd_event_source_disable_unref(s->pidfd_io);
	closep(&s->pidfd);
	if (s->prev)
		s->prev->next = s->next;
	else
		m->snapshots = s->next;
	if (s->next)
		s->next->prev = s->prev;
	m->n_snapshots--;
	free(s);
}

/* The model's view of frames: Python ones from interp/python, the rest
 * from the symbolizer. */
static size_t resolve_frame(void *ctx, uint64_t frame, bool lines, struct frame_record *out,
			    size_t cap, char *scratch, size_t size)
{
	struct manager *m = ctx;

	if (frame_module(frame) == FRAME_MODULE_PYTHON) {
		python_frame_resolve(m->python, frame, out);
		return 1;
	}
	return symbolizer_resolve(m->symbolizer, frame, lines, out, cap, scratch, size);
}

static bool describe_module(void *ctx, uint16_t module, const char **ret_path,
			    const char **ret_build_id)
{
	struct manager *m = ctx;

	return symbolizer_describe_module(m->symbolizer, module, ret_path, ret_build_id);
}

static bool peer_sees(void *userdata, const struct process *p)
{
	return auth_may_see(userdata, p->owner_uid);
}

/* What one snapshot answer says besides its profile. */
struct answer_info {
	uint64_t begin_ns, end_ns; /* CLOCK_MONOTONIC, the span covered */
	double requested_seconds;
	bool single;      /* one pid asked for */
	uint32_t pid;
	bool exited;      /* that process exited during a live snapshot */
	uint64_t samples;
};

static double monotonic_to_unix(uint64_t mono_ns)
{
	struct timespec rt, mt;

	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	return (double)rt.tv_sec + rt.tv_nsec / 1e9 - (mt.tv_sec + mt.tv_nsec / 1e9) +
	       (double)mono_ns / NSEC_PER_SEC;
}

static uint64_t unix_to_monotonic(double unix_s)
{
	double mono = unix_s - monotonic_to_unix(0);

	return mono <= 0 ? 0 : (uint64_t)(mono * NSEC_PER_SEC);
}

/* Answers a snapshot: the parts resolved into the model, encoded in the
 * format asked for, written into the answer with the JSON writer, whose
 * buffer the server then takes over. */
static void reply_profile(struct manager *m, struct client *client, const struct perfd_request *req,
			  const struct profile_parts *parts, const struct answer_info *ai)
{
	struct model_opts mo = {
		.kind = (enum profile_kind)req->kind,
		.lines = req->lines,
		.python_lines = req->python_lines,
		.threads = req->threads,
		.resolve = resolve_frame,
		.describe = describe_module,
		.ctx = m,
	};
	struct encode_opts eo = { .period_ns = sampler_period_ns(m->sampler) };
	double covered = ai->end_ns > ai->begin_ns ? (double)(ai->end_ns - ai->begin_ns) / NSEC_PER_SEC : 0;
	uint64_t t0 = now_monotonic_ns();
	struct model *model = NULL;
	struct jsonw w;
	char note[512] = "";
	size_t len;
	char *text;

	if (model_build(&mo, parts, aggregator_stacks(m->aggregator), &model) < 0) {
		reply_json(client, NULL);
		return;
	}
	if (ai->single && ai->exited)
		snprintf(note, sizeof(note),
			 "process %u exited %.1f s into the %.1f s snapshot; the profile holds what was sampled until then",
			 ai->pid, covered, ai->requested_seconds);
	else if (model->total == 0 && req->when == PERFD_WHEN_DURATION && ai->single)
		snprintf(note, sizeof(note),
			 "no samples: process %u did not run on a CPU during the snapshot", ai->pid);
	else if (model->total == 0)
		snprintf(note, sizeof(note), "no %s samples of the selected processes in that time",
			 profile_kinds[mo.kind].name);

	jsonw_init(&w);
	jsonw_object_begin(&w);
	jsonw_kv_u64(&w, "version", PERFD_PROTOCOL_VERSION);
	jsonw_kv_bool(&w, "ok", true);
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
	jsonw_kv_string(&w, "kind", profile_kinds[mo.kind].name);
	jsonw_kv_string(&w, "unit", profile_kinds[mo.kind].unit);
	jsonw_kv_u64(&w, "samples", mo.kind == PROFILE_KIND_CPU ? model->total : ai->samples);
	jsonw_kv_u64(&w, "value", model->total);
	jsonw_kv_u64(&w, "period_ns", eo.period_ns);
	jsonw_kv_bool(&w, "exited", ai->single && ai->exited);
	if (note[0])
		jsonw_kv_string(&w, "note", note);
	jsonw_kv_string(&w, "format", req->format->name);
	jsonw_key(&w, "profile");
	if (req->format->encode(model, &eo, &w) < 0) {
		jsonw_done(&w);
		model_free(model);
		reply_json(client, NULL);
		return;
	}
	jsonw_object_end(&w);
	log_debug("Snapshot: %zu processes, %zu samples, %zu locations encoded as %s in %.1f ms.",
		  model->n_processes, model->n_samples, model->n_locations, req->format->name,
		  (now_monotonic_ns() - t0) / 1e6);
	model_free(model);
	text = jsonw_steal(&w, &len);
	jsonw_done(&w);
	if (!text) {
		reply_json(client, NULL);
		return;
	}
	(void)server_reply_owned(client, text, len, len + 1);
}

static int on_snapshot_done(sd_event_source *es, uint64_t usec, void *userdata)
{
	struct snapshot *s = userdata;
	struct client *c = s->client;
	const struct collector *col = &s->c;
	struct answer_info ai = {
		.begin_ns = col->begin_ns,
		.requested_seconds = s->req.duration_seconds,
		.single = s->req.n_pids == 1,
		.pid = s->req.pids[0],
		.exited = col->exited,
		.samples = col->samples,
	};

	/* Samples up to now may still sit in the ring buffer. */
	drain(s->m);
	ai.end_ns = col->exited ? MIN(col->exit_ns, col->end_ns) : MIN(now_monotonic_ns(), col->end_ns);
	reply_profile(s->m, c, &s->req, &col->parts, &ai);
	client_set_data(c, NULL);
	snapshot_free(s);
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
static void request_selection(const struct perfd_request *req, struct client *client,
			      struct selection *sel)
{
	*sel = (struct selection){ .n_pids = req->n_pids, .all = req->all };
	memcpy(sel->pids, req->pids, req->n_pids * sizeof(*req->pids));
	snprintf(sel->comm, sizeof(sel->comm), "%s", req->comm);
	snprintf(sel->cgroup, sizeof(sel->cgroup), "%s", req->cgroup);
	snprintf(sel->unit, sizeof(sel->unit), "%s", req->unit);
	sel->visible = peer_sees;
	sel->visible_userdata = (void *)client_peer(client);
}

/* A snapshot of the past, answered at once from the store: returns an
 * error to send, or NULL once it has answered. */
static json_object *history_snapshot(struct manager *m, struct client *client,
				     const struct perfd_request *req)
{
	struct profile_parts parts = { 0 };
	struct answer_info ai = { .single = req->n_pids == 1, .pid = req->pids[0] };
	uint64_t now = now_monotonic_ns(), from, to;
	struct selection sel;

	drain(m);
	request_selection(req, client, &sel);
	if (req->when == PERFD_WHEN_SINCE) {
		to = now;
		from = now - MIN(now, (uint64_t)(req->since_seconds * NSEC_PER_SEC));
	} else {
		from = unix_to_monotonic(req->from_unix);
		to = req->to_unix ? unix_to_monotonic(req->to_unix) : now;
	}
	if (aggregator_query(m->aggregator, &sel, from, to, &parts, &ai.begin_ns, &ai.end_ns) < 0) {
		reply_json(client, NULL);
		return NULL;
	}
	if (parts.n == 0 && ai.single) {
		struct process *p = aggregator_find_process(m->aggregator, ai.pid);

		/* neither retained nor known (or not the client's to see) */
		if (!p || !peer_sees((void *)client_peer(client), p)) {
			aggregator_release_parts(m->aggregator, &parts);
			return query_error(PERFD_ERR_NO_SUCH_PROCESS,
					   "no process with pid %u in perfd's history", ai.pid);
		}
	}
	if (!ai.begin_ns) {
		ai.begin_ns = from;
		ai.end_ns = to;
	}
	reply_profile(m, client, req, &parts, &ai);
	aggregator_release_parts(m->aggregator, &parts);
	return NULL;
}

/* Starts a snapshot.  Returns an answer to send (an error), or NULL when
 * it answered already or will answer when the snapshot ends
 * (client_get_data() is then set). */
static json_object *start_snapshot(struct manager *m, struct client *client,
				   const struct perfd_request *req)
{
	struct snapshot *s;
	uint64_t ticks = 0, ticks_again;
	int r;

	if (req->when != PERFD_WHEN_DURATION)
		return history_snapshot(m, client, req);
	if (m->n_snapshots >= MAX_SNAPSHOTS)
		return query_error(PERFD_ERR_BUSY, "too many snapshots running (at most %d)",
				   MAX_SNAPSHOTS);
	if (req->n_pids == 1) {
		r = read_start_ticks(req->pids[0], &ticks);
		/* Another user's process answers exactly as a missing one. */
		if (r >= 0 && !auth_may_see_pid(client_peer(client), req->pids[0]))
			r = -ESRCH;
		if (r == -ESRCH)
			return query_error(PERFD_ERR_NO_SUCH_PROCESS, "no process with pid %u",
					   req->pids[0]);
		if (r < 0)
			return query_error(PERFD_ERR_INTERNAL, "cannot read /proc/%u/stat: %s",
					   req->pids[0], strerror(-r));
	}

	s = calloc(1, sizeof(*s));
	if (!s) {
		reply_json(client, NULL);
		return NULL;
	}
	s->m = m;
	s->client = client;
	s->pidfd = -1;
	s->req = *req;
	request_selection(req, client, &s->c.sel);
	s->c.sel.start_ticks = ticks;
	s->c.begin_ns = now_monotonic_ns();
	s->c.end_ns = s->c.begin_ns + (uint64_t)(req->duration_seconds * NSEC_PER_SEC);
	s->c.on_exit = on_collector_exit;
	s->c.userdata = s;

	/* Accuracy 1 ms: sd-event's default (0) lets a timer slip up to 250 ms
	 * to coalesce wake-ups, which a snapshot's caller would wait for. */
	r = sd_event_add_time(m->event, &s->timer, CLOCK_MONOTONIC,
			      s->c.end_ns / 1000 + 1, SNAPSHOT_TIMER_ACCURACY_USEC, on_snapshot_done, s);
	if (r < 0) {
		free(s);
		return query_error(PERFD_ERR_INTERNAL, "cannot arm a timer: %s", strerror(-r));
	}
	s->next = m->snapshots;
	if (m->snapshots)
		m->snapshots->prev = s;
	m->snapshots = s;
	m->n_snapshots++;
	aggregator_add_collector(m->aggregator, &s->c);

	/* A pidfd tells us of the exit even when the process never ran while
	 * we watched (the BPF exit event only covers sampled processes).
	 * Optional: without it the exit event still ends the snapshot. */
	if (req->n_pids == 1) {
		s->pidfd = syscall(SYS_pidfd_open, req->pids[0], 0);
		if (s->pidfd >= 0) {
			if (read_start_ticks(req->pids[0], &ticks_again) < 0 || ticks_again != ticks) {
				snapshot_free(s);
				return query_error(PERFD_ERR_NO_SUCH_PROCESS,
						   "process %u exited as the snapshot started",
						   req->pids[0]);
			}
			(void)sd_event_add_io(m->event, &s->pidfd_io, s->pidfd, EPOLLIN, on_pidfd, s);
		}
	}
	client_set_data(client, s);
	return NULL;
}

/* --- requests ------------------------------------------------------- */

static int on_request(void *userdata, struct client *c, const char *line, size_t len)
{
	struct manager *m = userdata;
	struct perfd_request req;
	struct perfd_request_error err;
	json_object *answer;

	if (request_parse(line, len, &req, &err) < 0) {
		reply_json(c, query_error(err.code, "%s", err.message));
		return 0;
	}
	switch (req.command) {
	case PERFD_CMD_STATUS:
		reply_json(c, build_status(m));
		return 0;
	case PERFD_CMD_PS:
		drain(m);
		reply_json(c, query_ps(m->aggregator, client_peer(c), now_monotonic_ns(),
				       req.interval_seconds,
				       m->start_ns, m->opts.frequency_hz));
		return 0;
	case PERFD_CMD_SNAPSHOT:
		answer = start_snapshot(m, c, &req);
		if (client_get_data(c))
			return SERVER_PENDING;
		if (answer)
			reply_json(c, answer);
		return 0;
	}
	reply_json(c, query_error(PERFD_ERR_UNKNOWN_COMMAND, "unknown command"));
	return 0;
}

static void on_cancel(void *userdata, struct client *c)
{
	struct snapshot *s = client_get_data(c);

	if (s)
		snapshot_free(s);
	client_set_data(c, NULL);
}

/* --- unwind tables follow the processes ---------------------------- */

static void on_maps_changed(void *userdata, struct process *p)
{
	struct manager *m = userdata;
	int r;

	if (!p->maps)
		return;
	if (m->unwinder) {
		r = unwinder_update_process(m->unwinder, p->pid, p->start_time_ns, p->maps,
					    p->map_modules);
		if (r < 0)
			log_debug("No unwind tables for pid %u (%s), using frame pointers: %s",
				  p->pid, p->comm, strerror(-r));
	}
	python_maps_changed(m->python, p);
}

static void on_process_gone(void *userdata, const struct process *p)
{
	struct manager *m = userdata;

	if (m->unwinder)
		unwinder_forget_process(m->unwinder, p->pid, p->start_time_ns);
	python_process_gone(m->python, p);
}

static size_t on_rewrite_user_frames(void *userdata, const struct process *p,
				     const struct perfd_sample *s, uint64_t *frames, size_t n,
				     size_t cap)
{
	struct manager *m = userdata;

	return python_merge(m->python, p, s, frames, n, cap);
}

static int setup_python(struct manager *m)
{
	struct python_limits limits = {
		.max_functions = PYTHON_MAX_FUNCTIONS,
		.max_code_per_process = PYTHON_MAX_CODE_PER_PROCESS,
		.max_code_bytes = PYTHON_MAX_CODE_BYTES,
		.max_name_bytes = PYTHON_MAX_NAME_BYTES,
	};
	struct aggregator_hooks hooks = {
		.maps_changed = on_maps_changed,
		.process_gone = on_process_gone,
		.rewrite_user_frames = on_rewrite_user_frames,
		.userdata = m,
	};
	int fd = m->opts.python ? sampler_python_map_fd(m->sampler) : -ECANCELED;

	if (fd == -ENOTSUP)
		log_notice("This kernel cannot walk Python frames (no bpf_loop()): Python processes show native frames only.");
	m->python = python_new(fd, m->symbolizer, &limits);
	if (!m->python)
		return -ENOMEM;
	aggregator_set_hooks(m->aggregator, &hooks);
	return 0;
}

static int setup_unwinder(struct manager *m)
{
	struct unwinder_opts uo = {
		.rows_capacity = m->opts.unwind_rows,
		.mappings_capacity = m->opts.unwind_mappings,
		.symbolizer = m->symbolizer,
	};
	if (!sampler_has_unwind_tables(m->sampler)) {
		if (m->opts.unwind_rows > 0)
			log_notice("This kernel lacks bpf_loop() or bpf_task_pt_regs(): user stacks are walked with frame pointers only.");
		return 0;
	}
	sampler_unwind_map_fds(m->sampler, &uo.rows_fd, &uo.mappings_fd, &uo.processes_fd);
	return unwinder_new(&uo, &m->unwinder);
}

/* --- setup ---------------------------------------------------------- */

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	log_info("Received %s, shutting down.", strsignal(si->ssi_signo));
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int get_listen_fd(void)
{
	int n = sd_listen_fds(1);

	if (n <= 0)
		return -1;
	if (n > 1 || sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <= 0) {
		log_warning("Ignoring the socket(s) passed by the service manager: expected one listening Unix stream socket.");
		return -1;
	}
	return SD_LISTEN_FDS_START;
}

int manager_new(const struct manager_opts *opts, struct manager **ret)
{
	struct sampler_opts so = {
		.frequency_hz = opts->frequency_hz,
		.ringbuf_bytes = opts->ringbuf_bytes,
		.unwind_rows = opts->unwind_rows,
		.unwind_mappings = opts->unwind_mappings,
		.unwind_processes = opts->limits.max_processes,
		.python_processes = opts->limits.max_processes,
		.on_record = drain_enqueue,
	};
	struct drain_opts dopts = {
		.max_queued_bytes = DRAIN_MAX_QUEUED_BYTES,
		.interval_ms = DRAIN_INTERVAL_MS,
	};
	struct server_opts sv = {
		.socket_path = opts->socket_path,
		.on_request = on_request,
		.on_cancel = on_cancel,
	};
	struct manager *m = calloc(1, sizeof(*m));
	const char *what = NULL;
	sigset_t mask;
	int r, kr;

	if (!m)
		return log_error_errno(ENOMEM, "Out of memory.");
	m->opts = *opts;
	m->start_ns = now_monotonic_ns();

	r = sd_event_default(&m->event);
	if (r < 0) {
		log_error_errno(r, "Failed to create the event loop: %m");
		goto fail;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if ((r = sd_event_add_signal(m->event, &m->sigterm, SIGTERM, on_signal, m)) < 0 ||
	    (r = sd_event_add_signal(m->event, &m->sigint, SIGINT, on_signal, m)) < 0) {
		log_error_errno(r, "Failed to watch SIGTERM/SIGINT: %m");
		goto fail;
	}
	(void)sd_event_set_watchdog(m->event, true);

	m->symbolizer = symbolizer_new(&(struct symbolizer_opts){ .kallsyms_path = opts->kallsyms_path,
								   .debug_dir = opts->debug_dir,
								   .cache_bytes = opts->symbol_cache_bytes,
								   .demangle = opts->demangle },
				       &kr);
	if (!m->symbolizer) {
		r = log_error_errno(ENOMEM, "Out of memory.");
		goto fail;
	}
	if (kr < 0)
		log_warning_errno(kr, "Kernel symbols unavailable (%s), kernel frames will print as [unknown]: %m",
				  opts->kallsyms_path);
	m->aggregator = aggregator_new(&opts->limits, m->symbolizer);
	if (!m->aggregator) {
		r = log_error_errno(ENOMEM, "Out of memory.");
		goto fail;
	}

	r = drain_new(&dopts, &m->drain);
	if (r < 0) {
		log_error_errno(r, "Failed to set up the drain thread: %m");
		goto fail;
	}
	so.ctx = m->drain;
	r = sampler_new(&so, &m->sampler, &what);
	if (r < 0) {
		log_error_errno(r, "Failed to %s: %m", what);
		goto fail;
	}
	r = setup_unwinder(m);
	if (r < 0) {
		log_error_errno(r, "Failed to set up the unwinder: %m");
		goto fail;
	}
	r = setup_python(m);
	if (r < 0) {
		log_error_errno(r, "Failed to set up Python frames: %m");
		goto fail;
	}
	r = sd_event_add_io(m->event, &m->queue_io, drain_fd(m->drain), EPOLLIN,
			    on_queue_ready, m);
	if (r >= 0)
		r = sd_event_add_time_relative(m->event, &m->maintain_timer, CLOCK_MONOTONIC,
					       MAINTAIN_INTERVAL_USEC, 0, on_maintain_timer, m);
	if (r >= 0)
		r = sd_event_source_set_enabled(m->maintain_timer, SD_EVENT_ON);
	if (r < 0) {
		log_error_errno(r, "Failed to watch the ring buffer: %m");
		goto fail;
	}
	/* Last: the thread inherits the blocked SIGTERM/SIGINT, which only
	 * the loop's signalfd takes. */
	r = drain_start(m->drain, m->sampler);
	if (r < 0) {
		log_error_errno(r, "Failed to start the drain thread: %m");
		goto fail;
	}

	sv.listen_fd = get_listen_fd();
	sv.userdata = m;
	r = server_new(m->event, &sv, &m->server);
	if (r == -EADDRINUSE) {
		log_error("Another perfd is already running on %s.", opts->socket_path);
		goto fail;
	}
	if (r < 0) {
		log_error_errno(r, "Failed to listen on %s: %m", opts->socket_path);
		goto fail;
	}
	*ret = m;
	return 0;
fail:
	manager_free(m);
	return r < 0 ? r : -EIO;
}

int manager_run(struct manager *m)
{
	int r;

	log_info("Sampling %u CPUs at %u Hz; listening on %s.", sampler_cpus(m->sampler),
		 m->opts.frequency_hz, m->opts.socket_path);
	(void)sd_notifyf(false, "READY=1\nSTATUS=Sampling %u CPUs at %u Hz",
			 sampler_cpus(m->sampler), m->opts.frequency_hz);
	r = sd_event_loop(m->event);
	(void)sd_notify(false, "STOPPING=1");
	if (r < 0)
		return log_error_errno(r, "Event loop failed: %m");
	return 0;
}

struct manager *manager_free(struct manager *m)
{
	if (!m)
		return NULL;
	/* Clients first: they own the snapshots' replies. */
	server_free(m->server);
	while (m->snapshots)
		snapshot_free(m->snapshots);
	/* The drain thread reads the sampler's ring: it goes first. */
	m->drain = drain_free(m->drain);
	sd_event_source_disable_unref(m->queue_io);
	sd_event_source_disable_unref(m->maintain_timer);
	sd_event_source_disable_unref(m->sigterm);
	sd_event_source_disable_unref(m->sigint);
	aggregator_free(m->aggregator);
	python_free(m->python);
	unwinder_free(m->unwinder);
	sampler_free(m->sampler);
	symbolizer_free(m->symbolizer);
	sd_event_unref(m->event);
	free(m);
	return NULL;
}
