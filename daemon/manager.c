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
#include "encode/folded.h"
#include "base/log.h"
#include "profile/frame.h"
#include "manager.h"
#include "interp/python/python.h"
#include "api/auth.h"
#include "api/query.h"
#include "api/request.h"
#include "collect/sampler.h"
#include "api/server.h"
#include "symbols/symbolize.h"
#include "unwind/unwinder.h"

#define USEC_PER_SEC 1000000ULL
/* How often the ring buffer is drained when the BPF side does not ask
 * sooner: short enough that ps and snapshots see fresh data. */
#define DRAIN_INTERVAL_USEC (200 * 1000)
#define MAX_SNAPSHOTS 32
#define SNAPSHOT_TIMER_ACCURACY_USEC 1000
/* Python: interned functions in all, code objects cached per process. */
#define PYTHON_MAX_FUNCTIONS (1u << 20)
#define PYTHON_MAX_CODE_PER_PROCESS 65536
#define PYTHON_MAX_CODE_BYTES (64u << 20)
#define PYTHON_MAX_NAME_BYTES (64u << 20)

struct snapshot {
	struct manager *m;
	struct client *client;
	struct collector c;
	sd_event_source *timer;
	sd_event_source *pidfd_io;
	int pidfd;
	double requested_seconds;
	bool lines, python_lines;
	char comm[PERFD_TASK_COMM_LEN];
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
	sd_event_source *ring_io, *drain_timer, *sigterm, *sigint;
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

static void drain(struct manager *m)
{
	int r = sampler_drain(m->sampler);

	if (r < 0)
		log_warning_errno(r, "Failed to drain the ring buffer, ignoring: %m");
}

static int on_ring_ready(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	drain(userdata);
	return 0;
}

static int on_drain_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	drain(userdata);
	(void)sd_event_source_set_time_relative(s, DRAIN_INTERVAL_USEC);
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

/* Names the frames of one snapshot: Python and thread frames here, the
 * rest by the symbolizer. */
static const char *name_frame(void *ctx, uint64_t frame, char *buf, size_t size)
{
	const struct snapshot *s = ctx;
	uint16_t module = frame_module(frame);

	if (module == FRAME_MODULE_PYTHON)
		return python_frame_name(s->m->python, frame, s->python_lines, buf, size);
	if (module == FRAME_MODULE_SPECIAL && (frame_address(frame) & FRAME_SPECIAL_THREAD)) {
		uint32_t tid = (uint32_t)frame_address(frame);
		const char *comm = collector_thread_comm(&s->c, tid);

		snprintf(buf, size, "[thread %u%s%s]", tid, comm ? " " : "", comm ? comm : "");
		return buf;
	}
	if (s->lines)
		return symbolizer_frame_name_lines(s->m->symbolizer, frame, buf, size);
	return symbolizer_frame_name(s->m->symbolizer, frame, buf, size);
}

/* Answers a snapshot.  The profile can be tens of MiB: its rendered lines
 * are escaped straight into the answer buffer, which the server then takes
 * over, rather than going through json-c (a copy to build, one to print,
 * one to queue). */
static void reply_snapshot(struct snapshot *s)
{
	struct manager *m = s->m;
	const struct collector *c = &s->c;
	uint64_t end = c->exited ? MIN(c->exit_ns, c->end_ns) : MIN(now_monotonic_ns(), c->end_ns);
	double covered = end > c->begin_ns ? (double)(end - c->begin_ns) / NSEC_PER_SEC : 0;
	static const char profile_key[] = ",\"profile\":\"";
	struct folded *fd = NULL;
	char *buf, note[512] = "";
	size_t hlen, elen, size;
	const char *header;
	json_object *o;

	uint64_t t0 = now_monotonic_ns();

	if (c->process)
		memcpy(s->comm, c->process->comm, sizeof(s->comm));
	if (folded_build(s->comm, &c->counts, aggregator_stacks(m->aggregator),
			 name_frame, s, &fd) < 0)
		goto oom;

	if (c->exited)
		snprintf(note, sizeof(note),
			 "process %u exited %.1f s into the %.1f s snapshot; the profile holds what was sampled until then",
			 c->pid, covered, s->requested_seconds);
	else if (c->samples == 0)
		snprintf(note, sizeof(note),
			 "no samples: process %u did not run on a CPU during the snapshot", c->pid);

	o = query_ok();
	json_object_object_add(o, "pid", json_object_new_int64(c->pid));
	json_object_object_add(o, "comm", json_object_new_string(s->comm));
	if (c->process) {
		json_object_object_add(o, "start_time_ns",
				       json_object_new_uint64(c->process->start_time_ns));
		json_object_object_add(o, "ns_pid", json_object_new_int64(c->process->ns_pid));
	}
	json_object_object_add(o, "duration_seconds", json_object_new_double(covered));
	json_object_object_add(o, "samples", json_object_new_uint64(c->samples));
	json_object_object_add(o, "exited", json_object_new_boolean(c->exited));
	if (note[0])
		json_object_object_add(o, "note", json_object_new_string(note));
	json_object_object_add(o, "format", json_object_new_string("folded"));
	header = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &hlen);

	/* header without its closing brace, then "profile":"...", then "}" */
	elen = folded_json_string(fd, NULL);
	size = hlen - 1 + sizeof(profile_key) - 1 + elen + 2 + 1;
	buf = malloc(size);
	if (!buf) {
		json_object_put(o);
		goto oom;
	}
	memcpy(buf, header, hlen - 1);
	memcpy(buf + hlen - 1, profile_key, sizeof(profile_key) - 1);
	folded_json_string(fd, buf + hlen - 1 + sizeof(profile_key) - 1);
	memcpy(buf + size - 3, "\"}", 2);
	json_object_put(o);
	log_debug("Snapshot of pid %u: %zu lines, %zu bytes encoded in %.1f ms.", c->pid,
		  folded_lines(fd), size, (now_monotonic_ns() - t0) / 1e6);
	folded_free(fd);
	(void)server_reply_owned(s->client, buf, size - 1, size);
	return;
oom:
	folded_free(fd);
	reply_json(s->client, NULL);
}

static int on_snapshot_done(sd_event_source *es, uint64_t usec, void *userdata)
{
	struct snapshot *s = userdata;
	struct client *c = s->client;

	/* Samples up to now may still sit in the ring buffer. */
	drain(s->m);
	reply_snapshot(s);
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

static json_object *start_snapshot(struct manager *m, struct client *client,
				   const struct perfd_request *req)
{
	struct snapshot *s;
	uint64_t ticks, ticks_again;
	struct process *p;
	int r;

	if (m->n_snapshots >= MAX_SNAPSHOTS)
		return query_error(PERFD_ERR_BUSY, "too many snapshots running (at most %d)",
				   MAX_SNAPSHOTS);
	r = read_start_ticks(req->pid, &ticks);
	/* Another user's process answers exactly as a missing one. */
	if (r >= 0 && !auth_may_see_pid(client_peer(client), req->pid))
		r = -ESRCH;
	if (r == -ESRCH)
		return query_error(PERFD_ERR_NO_SUCH_PROCESS, "no process with pid %d", req->pid);
	if (r < 0)
		return query_error(PERFD_ERR_INTERNAL, "cannot read /proc/%d/stat: %s", req->pid,
				   strerror(-r));

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->m = m;
	s->client = client;
	s->pidfd = -1;
	s->requested_seconds = req->duration_seconds;
	s->lines = req->lines;
	s->python_lines = req->python_lines;
	s->c.threads = req->threads;
	s->c.pid = req->pid;
	s->c.start_ticks = ticks;
	s->c.begin_ns = now_monotonic_ns();
	s->c.end_ns = s->c.begin_ns + (uint64_t)(req->duration_seconds * NSEC_PER_SEC);
	s->c.on_exit = on_collector_exit;
	s->c.userdata = s;
	p = aggregator_find_process(m->aggregator, req->pid);
	if (p)
		memcpy(s->comm, p->comm, sizeof(s->comm));
	else
		snprintf(s->comm, sizeof(s->comm), "%d", req->pid);

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
	s->pidfd = syscall(SYS_pidfd_open, req->pid, 0);
	if (s->pidfd >= 0) {
		if (read_start_ticks(req->pid, &ticks_again) < 0 || ticks_again != ticks) {
			snapshot_free(s);
			return query_error(PERFD_ERR_NO_SUCH_PROCESS,
					   "process %d exited as the snapshot started", req->pid);
		}
		(void)sd_event_add_io(m->event, &s->pidfd_io, s->pidfd, EPOLLIN, on_pidfd, s);
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
		if (!answer && client_get_data(c))
			return SERVER_PENDING;
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
		.on_record = on_record,
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

	so.ctx = m;
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
	r = sd_event_add_io(m->event, &m->ring_io, sampler_fd(m->sampler), EPOLLIN,
			    on_ring_ready, m);
	if (r >= 0)
		r = sd_event_add_time_relative(m->event, &m->drain_timer, CLOCK_MONOTONIC,
					       DRAIN_INTERVAL_USEC, 0, on_drain_timer, m);
	if (r >= 0)
		r = sd_event_source_set_enabled(m->drain_timer, SD_EVENT_ON);
	if (r < 0) {
		log_error_errno(r, "Failed to watch the ring buffer: %m");
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
	sd_event_source_disable_unref(m->ring_io);
	sd_event_source_disable_unref(m->drain_timer);
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
