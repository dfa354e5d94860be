/* SPDX-License-Identifier: MIT */
/* manager.c - see manager.h for the design and the path of one sample. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "api/command.h"
#include "api/encode_lane.h"
#include "api/httpd.h"
#include "api/server.h"
#include "base/clock.h"
#include "base/heap.h"
#include "base/log.h"
#include "collect/drain.h"
#include "collect/sampler.h"
#include "collect/tiers.h"
#include "config.h"
#include "daemon.h"
#include "export/exporter.h"
#include "interp/python/python.h"
#include "manager.h"
#include "perfd/unwind.h"
#include "state/persist.h"
#include "symbols/symbolize.h"
#include "unwind/unwinder.h"

#define USEC_PER_SEC 1000000ULL
/* How often the drain thread empties the ring buffer when the BPF side
 * does not ask sooner.  Queries move the ring's records into the queue
 * first and answer once those are ingested (api/fresh.h), so they see
 * fresh data whatever it is; BPF wakes the thread when the ring fills past
 * a quarter or a process is first sampled with a stack; so the
 * interval only paces the trickle of ordinary samples.  Each drain wakes
 * two threads, and on a guest with speculation mitigations a wake-up
 * costs tens of microseconds: at 200 ms they were a third of an idle
 * daemon's CPU (docs/notes/performance-history.md, "Daemon CPU under process churn"). */
#define DRAIN_INTERVAL_MS 1000
/* Records the loop may fall behind the drain thread by (collect/drain.h):
 * four default ring buffers. */
#define DRAIN_MAX_QUEUED_BYTES (32u << 20)
#define MAINTAIN_INTERVAL_USEC (1000 * 1000)
/* Python: interned functions in all, code objects cached per process. */
#define PYTHON_MAX_FUNCTIONS (1u << 20)
#define PYTHON_MAX_CODE_PER_PROCESS 65536
#define PYTHON_MAX_CODE_BYTES (64u << 20)
#define PYTHON_MAX_NAME_BYTES (64u << 20)

#define KALLSYMS_PATH "/proc/kallsyms"
#define KERNEL_NOTES_PATH "/sys/kernel/notes" /* the kernel's build-id */
#define UNWIND_MAPPINGS 65536

struct manager {
	struct config *config; /* the running one */
	const struct config_args *args; /* the caller's: read again at SIGHUP */
	struct daemon d; /* what the commands work on (daemon.h) */
	/* A reload that changes the frequency waits for the records queued
	 * at its SIGHUP (old-period samples) before it applies: */
	struct config *reload_next;    /* ... the configuration it applies then */
	struct ingest_wait reload_wait;
	bool reload_again; /* a SIGHUP came meanwhile: the file is read again after */
	sd_event_source *queue_io, *unwind_io, *debug_io, *maps_io, *python_io, *python_reader_io, *maintain_timer, *sigterm,
		*sigint, *sighup;
};

/* The drain thread queued records, or a slice left some (one slice a
 * turn: collect/drain.h). */
static int on_queue_ready(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct manager *m = userdata;

	daemon_deliver(&m->d);
	return 0;
}

static int on_request(void *userdata, struct client *c, const char *line, size_t len)
{
	struct manager *m = userdata;

	return command_dispatch(&m->d, c, line, len);
}

static void on_cancel(void *userdata, struct client *c)
{
	struct manager *m = userdata;

	command_cancel(&m->d, c);
}

static bool on_pending_line(void *userdata, struct client *c, const char *line, size_t len)
{
	struct manager *m = userdata;

	return command_pending_line(&m->d, c, line, len);
}

static void on_module_released(void *userdata, uint16_t module)
{
	struct manager *m = userdata;

	if (m->d.unwinder)
		unwinder_forget_module(m->d.unwinder, module);
	if (m->d.persist)
		persist_forget_module(m->d.persist, module);
}

/* Gives back the module ids nothing refers to any more (symbolize.h), when
 * the symbolizer asks: a process kept in the store maps the module, a
 * stack has a frame in it, or an unwind table of it is in use or being
 * built.  (An exited process kept for its history holds only what its
 * stacks name: a user's process that mapped thousands of files gives
 * their ids back once it is gone.)  A few milliseconds at most (every process's mappings, 64k
 * counters), and only while the table is half full. */
static void collect_modules(struct manager *m)
{
	_cleanup_free_ struct module_set *used = NULL;

	if (!symbolizer_wants_collection(m->d.symbolizer))
		return;
	used = calloc(1, sizeof(*used));
	if (!used)
		return;
	aggregator_mark_modules(m->d.aggregator, used);
	if (m->d.unwinder)
		unwinder_mark_modules(m->d.unwinder, used);
	if (symbolizer_release_unused(m->d.symbolizer, used, on_module_released, m) > 0)
		aggregator_forget_modules(m->d.aggregator, used);
}

/* Once a second the store rolls windows up and lets old data go, the
 * module ids nothing refers to any more are given back, and the daemon
 * notes its own counters (for rates: rates.h).  What these passes free
 * goes back to the kernel from the heap's own lane (base/heap.h), which
 * walks malloc's arenas so that the loop never does. */
static int on_maintain_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct manager *m = userdata;
	struct rates_reading now;

	uint64_t now_ns = now_monotonic_ns();

	aggregator_maintain(m->d.aggregator, now_ns);
	/* files opened again whose taking back another caller of
	 * symbolizer_complete saw first (the exporter's settle) */
	if (m->d.unwinder)
		unwinder_retry_opens(m->d.unwinder);
	collect_modules(m);
	/* after the ids given back: persist forgets their frames first */
	if (m->d.persist) {
		struct persist_names names = daemon_persist_names(&m->d);

		persist_flush(m->d.persist, m->d.aggregator, &names, sampler_period_ns(m->d.sampler),
			      now_ns, false);
	}
	daemon_read_rates(&m->d, &now);
	rates_note(&m->d.rates, &now);
	(void)sd_event_source_set_time_relative(s, MAINTAIN_INTERVAL_USEC);
	return 0;
}

/* --- unwind tables follow the processes ---------------------------- */

/* The builder thread finished tables (unwind/builder.h). */
static int on_tables_built(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct manager *m = userdata;

	unwinder_complete(m->d.unwinder);
	return 0;
}

/* The symbolizer's lane found debug files (symbols/debugsearch.h). */
static int on_debug_searched(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct manager *m = userdata;

	symbolizer_complete(m->d.symbolizer);
	if (m->d.unwinder) /* tables whose file was opened again */
		unwinder_retry_opens(m->d.unwinder);
	return 0;
}

/* The aggregator's lane read maps too long for the loop
 * (process/mapsread.h). */
static int on_maps_read(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct manager *m = userdata;

	aggregator_complete(m->d.aggregator);
	return 0;
}

/* Python first: it finds the perf trampolines of `-X perf` in the new
 * maps, which the unwinder then describes with the rest. */
static void on_maps_changed(void *userdata, struct process *p)
{
	struct manager *m = userdata;
	struct python_trampolines t;
	struct unwind_copies copies = { 0 };
	int r;

	if (!p->maps)
		return;
	python_maps_changed(m->d.python, p);
	/* the hook runs in a delivery, which sets the timer after it, but
	 * also when the maps read or the probes come back from their lane
	 * and at maintenance: the timer is set here for those */
	if (p->revisit_ns)
		daemon_revisit_by(&m->d, p->revisit_ns);
	if (!m->d.unwinder)
		return;
	if (python_trampolines(m->d.python, p, &t))
		copies = (struct unwind_copies){ t.code, t.code_size, t.arena_size,
						 t.starts, t.strides, t.n };
	r = unwinder_update_process(m->d.unwinder, p->pid, p->start_time_ns, p->maps,
				    p->map_modules, copies.n ? &copies : NULL);
	if (r < 0)
		log_debug("No unwind tables for pid %u (%s), using frame pointers: %s", p->pid,
			  p->comm, strerror(-r));
}

static void on_process_gone(void *userdata, const struct process *p)
{
	struct manager *m = userdata;

	if (m->d.unwinder)
		unwinder_forget_process(m->d.unwinder, p->pid, p->start_time_ns);
	python_process_gone(m->d.python, p);
}

static size_t on_rewrite_user_frames(void *userdata, const struct process *p,
				     const struct perfd_sample *s, uint64_t *frames, size_t n,
				     size_t cap)
{
	struct manager *m = userdata;

	return python_merge(m->d.python, p, s, frames, n, cap);
}

static const char *on_kernel_function(void *userdata, uint64_t frame, char *buf, size_t size)
{
	struct manager *m = userdata;

	return symbolizer_frame_name(m->d.symbolizer, frame, buf, size);
}

static bool on_frames_wait(void *userdata, const struct process *p, const struct perfd_sample *s)
{
	struct manager *m = userdata;

	return python_wait(m->d.python, p, s);
}

static void on_revisit(void *userdata, struct process *p)
{
	struct manager *m = userdata;

	python_revisit(m->d.python, p);
}

/* The lane has looked for CPython in a process: its maps are seen again,
 * by Python (which takes what it found in) and the unwinder (the perf
 * trampolines it may have found), as when they changed. */
static void on_python_detected(void *userdata, uint32_t pid, uint64_t start_time_ns)
{
	struct manager *m = userdata;
	struct process *p = aggregator_find_process(m->d.aggregator, pid);

	if (p && p->start_time_ns == start_time_ns)
		on_maps_changed(m, p);
}

/* The reader has read a process's memory: what it found of the
 * interpreter is taken in, and its samples that waited go in. */
static void on_python_read(void *userdata, uint32_t pid, uint64_t start_time_ns)
{
	struct manager *m = userdata;
	struct process *p = aggregator_find_process(m->d.aggregator, pid);

	if (!p || p->start_time_ns != start_time_ns)
		return;
	if (python_read_back(m->d.python, p))
		on_maps_changed(m, p); /* its trampolines, to the unwinder */
	if (p->revisit_ns)
		daemon_revisit_by(&m->d, p->revisit_ns);
	aggregator_frames_read(m->d.aggregator, p);
}

static int on_python_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	static const struct python_callbacks cb = { .detected = on_python_detected,
						    .read = on_python_read };
	struct manager *m = userdata;

	python_complete(m->d.python, &cb, m);
	return 0;
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
		.frames_wait = on_frames_wait,
		.revisit = on_revisit,
		.kernel_function = on_kernel_function,
		.userdata = m,
	};
	/* The loaded tier says whether Python frames are walked, and the log
	 * said why when they are not (log_load); processes are recognized
	 * either way. */
	int fd = !m->config->no_python ? sampler_python_map_fd(m->d.sampler) : -ECANCELED;

	int r = python_new(fd, &limits, &m->d.python);

	if (r < 0)
		return r;
	r = sd_event_add_io(m->d.event, &m->python_io, python_fd(m->d.python), EPOLLIN,
			    on_python_io, m);
	if (r < 0)
		return r;
	r = sd_event_add_io(m->d.event, &m->python_reader_io, python_reader_fd(m->d.python),
			    EPOLLIN, on_python_io, m);
	if (r < 0)
		return r;
	aggregator_set_hooks(m->d.aggregator, &hooks);
	return 0;
}

static uint32_t unwind_rows(const struct config *c)
{
	return (uint32_t)((c->unwind_mib << 20) / sizeof(struct perfd_unwind_row));
}

static int setup_unwinder(struct manager *m)
{
	struct unwinder_opts uo = {
		.rows_capacity = unwind_rows(m->config),
		.mappings_capacity = UNWIND_MAPPINGS,
		.loop_upload_max_rows = UNWINDER_LOOP_UPLOAD_MAX_ROWS,
		.max_build_ns = m->config->unwind_build_cpu_ms * 1000000ULL,
		.symbolizer = m->d.symbolizer,
	};
	int r;

	if (!sampler_has_unwind_tables(m->d.sampler))
		return 0; /* frame pointers only: log_load said why */
	sampler_unwind_map_fds(m->d.sampler, &uo.rows_fd, &uo.mappings_fd, &uo.processes_fd);
	r = unwinder_new(&uo, &m->d.unwinder);
	if (r < 0)
		return r;
	return sd_event_add_io(m->d.event, &m->unwind_io, unwinder_fd(m->d.unwinder), EPOLLIN,
			       on_tables_built, m);
}

/* --- the store on disk --------------------------------------------- */

/* Opens the state directory and reads it back into the store.  Without
 * one (--no-state, or it cannot be used) profiles live in memory only:
 * said once, not fatal. */
static void setup_persist(struct manager *m)
{
	const struct config *cfg = m->config;
	const char *dir = cfg->state_dir ? cfg->state_dir : PERSIST_DEFAULT_DIR;
	int r;

	if (cfg->no_state)
		return;
	r = persist_open(&(struct persist_opts){ .dir = dir, .max_bytes = cfg->state_max_bytes,
						  .retention_s = cfg->retention_s },
			 &m->d.persist);
	if (r == -EBUSY) {
		log_warning("State directory %s is in use by another perfd; keeping profiles in memory only.",
			    dir);
		return;
	}
	if (r == -EPERM) {
		log_warning("State directory %s is not root's alone (another owner, or writable by others); "
			    "keeping profiles in memory only.", dir);
		return;
	}
	if (r < 0) {
		log_warning_errno(r, "Cannot use the state directory %s (%m); keeping profiles in memory only.",
				  dir);
		return;
	}
	persist_restore(m->d.persist, m->d.aggregator, sampler_period_ns(m->d.sampler),
			now_monotonic_ns());
}

/* At SIGTERM, every record ingested: every window, open ones included,
 * to disk. */
static void persist_final(struct manager *m)
{
	struct persist_names names;

	if (!m->d.persist)
		return;
	names = daemon_persist_names(&m->d);
	persist_flush(m->d.persist, m->d.aggregator, &names, sampler_period_ns(m->d.sampler),
		      now_monotonic_ns(), true);
}

/* --- /metrics ------------------------------------------------------- */

static void on_metrics_page(void *userdata, const char *path, struct http_answer *ret)
{
	struct manager *m = userdata;

	daemon_metrics_page(&m->d, path, ret);
}

/* --metrics-address: a scraper's port.  One that cannot be listened on
 * stops the start, as the socket does: the operator asked for it. */
static int setup_metrics(struct manager *m)
{
	const char *address = m->config->metrics_address;
	int r;

	if (!address)
		return 0;
	r = http_server_new(m->d.event, address, on_metrics_page, m, &m->d.metrics);
	if (r == -EINVAL)
		return log_error_errno(r, "Bad --metrics-address %s: expected HOST:PORT, [IPV6]:PORT or :PORT.",
				       address);
	if (r < 0)
		return log_error_errno(r, "Failed to listen for metrics on %s: %m", address);
	log_info("Serving metrics at http://%s/metrics.", address);
	return 0;
}

/* --- setup ---------------------------------------------------------- */

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	log_info("Received %s, shutting down.", strsignal(si->ssi_signo));
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

/* The effective configuration, as status shows it to root and to others. */
static void publish_config(struct manager *m)
{
	char *o = config_to_json(m->config, true), *users = config_to_json(m->config, false);

	if (!o || !users) {
		free(o);
		free(users);
		return; /* out of memory: status keeps the one before */
	}
	free(m->d.config_json);
	free(m->d.config_json_users);
	m->d.config_json = o;
	m->d.config_json_users = users;
}

static void export_settle(void *ctx, unsigned timeout_ms)
{
	struct daemon *d = ctx;

	(void)symbolizer_settle(d->symbolizer, timeout_ms);
}

static bool export_loads_pending(void *ctx)
{
	struct daemon *d = ctx;

	return symbolizer_loads_pending(d->symbolizer) > 0;
}

static struct export_source export_source(struct manager *m)
{
	return (struct export_source){
		.aggregator = m->d.aggregator,
		.model = daemon_model_opts(&m->d, PROFILE_KIND_CPU, false, true, false),
		.period_ns = sampler_period_ns(m->d.sampler),
		.memory_sample_bytes = m->d.memory_sample_bytes,
		.frequency_hz = m->d.frequency_hz,
		.ingest = &m->d.ingest,
		.settle = export_settle,
		.loads_pending = export_loads_pending,
		.ctx = &m->d,
	};
}

/* A reload's new frequency, once the records queued at the reload's
 * SIGHUP are ingested, in the old period (reload()): the timers and the
 * BPF program's blocks change, then what the store holds is rescaled to
 * the new period (aggregator_scale_periods), since every answer states CPU
 * samples in the sampler's period as it is then: a range across the
 * change still adds up to its CPU time.  What is off: the samples taken
 * between the SIGHUP and the end of that wait (at rest one slice's
 * worth, a few ms; under a backlog as long as the loop takes to catch up,
 * serving its clients meanwhile) and with --fixed-period the part of the
 * old period a timer had run when it was restarted, a sample per CPU at
 * most: counted in the new period, or not at all. */
static int set_frequency(struct manager *m, unsigned frequency_hz)
{
	uint64_t old_ns = sampler_period_ns(m->d.sampler);
	size_t ring = sampler_ringbuf_bytes(m->d.sampler);
	int r;

	r = sampler_set_frequency(m->d.sampler, frequency_hz);
	if (r < 0)
		return r;
	aggregator_scale_periods(m->d.aggregator, old_ns, sampler_period_ns(m->d.sampler));
	m->d.frequency_hz = frequency_hz;
	exporter_set_sampling(m->d.exporter, sampler_period_ns(m->d.sampler), frequency_hz);
	if (!m->config->ringbuf_mib &&
	    sampler_default_ringbuf_bytes(frequency_hz, sampler_cpus(m->d.sampler)) > ring)
		log_warning("The ring buffer keeps the size it got at start (%zu KiB), small for %u Hz: "
			    "samples it cannot hold are counted as lost; a restart sizes it again.",
			    ring >> 10, frequency_hz);
	return 0;
}

static void reload(struct manager *m);

/* The end of a reload: the service manager sees it, and a SIGHUP that
 * came meanwhile starts the next. */
static void reload_done(struct manager *m)
{
	(void)sd_notify(false, "READY=1");
	if (m->reload_again) {
		m->reload_again = false;
		reload(m);
	}
}

/* The rest of a reload, once the samples of the old period are in. */
static void reload_apply(struct manager *m, struct config *next)
{
	char changed[512];
	size_t n;
	int r;

	if (next->frequency_hz != m->config->frequency_hz) {
		r = set_frequency(m, (unsigned)next->frequency_hz);
		if (r < 0) {
			log_error_errno(r, "Failed to sample at %" PRIu64 " Hz, keeping %" PRIu64 " Hz: %m",
					next->frequency_hz, m->config->frequency_hz);
			next->frequency_hz = m->config->frequency_hz;
		}
	}
	n = config_diff(m->config, next, changed, sizeof(changed));
	log_set_max_level(next->verbose ? LOG_DEBUG : LOG_INFO);
	config_free(m->config);
	m->config = next;
	publish_config(m);
	log_info("Reloaded the configuration%s%s: %s.", next->config_path ? " from " : "",
		 next->config_path ? next->config_path : "", n ? changed : "nothing changed");
	reload_done(m);
}

static void on_reload_ingested(struct ingest_wait *w)
{
	struct manager *m = container_of(w, struct manager, reload_wait);

	reload_apply(m, TAKE_PTR(m->reload_next));
}

/* The configuration again, from the same flags and the file as it is now
 * (config.h says what may change), which the service manager sees begin
 * and end (RELOADING=1 ... READY=1).  A bad file keeps the running
 * configuration whole.  A new frequency applies once the samples queued
 * until now are ingested in the old period, the loop serving its clients
 * meanwhile (set_frequency); the exporters' targets change at once. */
static void reload(struct manager *m)
{
	struct config *next = NULL;
	char err[CONFIG_ERROR_MAX], kept[512];
	int r;

	(void)sd_notifyf(false, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64, now_monotonic_ns() / 1000);
	r = config_load(m->args, &next, err, sizeof(err));
	if (r < 0) {
		log_error("Failed to reload the configuration, keeping the running one: %s", err);
		reload_done(m);
		return;
	}
	if (config_keep_restart_only(m->config, next, kept, sizeof(kept)) > 0)
		log_warning("The reloaded configuration changes %s: that takes a restart, keeping the running values.",
			    kept);
	r = exporter_configure(m->d.exporter, &next->export);
	if (r < 0) {
		log_error_errno(r, "Failed to apply the reloaded configuration, keeping the running one: %m");
		config_free(next);
		reload_done(m);
		return;
	}
	if (next->frequency_hz != m->config->frequency_hz &&
	    ingest_wait_start(&m->d.ingest, &m->reload_wait, on_reload_ingested) > 0) {
		m->reload_next = next;
		return;
	}
	reload_apply(m, next);
}

/* SIGHUP.  With the unit's ExecReload=kill the reload is only shown; a
 * Type=notify-reload unit (systemd >= 253) would also make `systemctl
 * reload` wait for it.  One that comes while a reload waits for its
 * samples runs after it, reading the file as it is then. */
static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct manager *m = userdata;

	if (m->reload_next)
		m->reload_again = true;
	else
		reload(m);
	return 0;
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

/* --max-module-fds, kept to half the descriptors perfd may open: the
 * other half is for connections, BPF, the state directory and the files
 * read on the lanes, which must not meet EMFILE because binaries hold
 * every descriptor there is.  Says so when it cuts. */
static uint64_t module_fds(const struct config *cfg)
{
	struct rlimit rl;
	uint64_t half;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return cfg->max_module_fds;
	half = MAX((uint64_t)rl.rlim_cur / 2, (uint64_t)16);
	if (cfg->max_module_fds <= half)
		return cfg->max_module_fds;
	log_warning("--max-module-fds %" PRIu64 " is more than half of the %" PRIu64
		    " descriptors perfd may open (RLIMIT_NOFILE): %" PRIu64 " are used.",
		    cfg->max_module_fds, (uint64_t)rl.rlim_cur, half);
	return half;
}

void manager_sampler_opts(const struct config *cfg, struct sampler_opts *ret)
{
	*ret = (struct sampler_opts){
		.frequency_hz = (unsigned)cfg->frequency_hz,
		.fixed_period = cfg->fixed_period,
		.ringbuf_bytes = cfg->ringbuf_mib << 20,
		.unwind_rows = unwind_rows(cfg),
		.unwind_mappings = UNWIND_MAPPINGS,
		.unwind_processes = (uint32_t)MIN(cfg->max_processes, UINT32_MAX),
		.python_processes = cfg->no_python ? 0 : (uint32_t)MIN(cfg->max_processes, UINT32_MAX),
		.memory_sample_bytes = cfg->no_memory ? 0 : cfg->memory_sample_bytes,
		.offcpu_rate = cfg->no_offcpu ? 0 : cfg->offcpu_rate,
		.test_refuse = cfg->test_refuse,
		.on_record = drain_enqueue,
	};
}

/* Says once what the load lost and why: a refusal by the verifier is a
 * warning (this kernel could run more, a newer perfd may), a feature the
 * kernel lacks a notice. */
static void log_load(const struct sampler_load_report *r)
{
	unsigned lost = load_report_lost(r);

	for (int i = 0; i < TIER_N_FEATURES; i++) {
		unsigned f = tier_features[i];
		char text[LOAD_REASON_MAX + 256];

		if (!(lost & f))
			continue;
		load_report_describe_loss(r, f, text, sizeof(text));
		if (r->supported & f)
			log_warning("%s.", text);
		else
			log_notice("%c%s.", toupper((unsigned char)text[0]), text + 1);
	}
}

int manager_new(struct config *cfg, const struct config_args *args, struct manager **ret)
{
	struct module_registry modules;
	struct aggregator_limits limits = {
		.max_processes = cfg->max_processes,
		.max_stacks = cfg->max_stacks,
		.max_frames = cfg->max_frames,
		.max_memory_bytes = cfg->max_memory_mib << 20,
		.retention_s = cfg->retention_s,
	};
	struct sampler_opts so;
	struct sampler_load_report report;
	struct drain_opts dopts = {
		.max_queued_bytes = DRAIN_MAX_QUEUED_BYTES,
		.interval_ms = DRAIN_INTERVAL_MS,
	};
	struct server_opts sv = {
		.socket_path = cfg->socket_path,
		.idle_timeout_usec = cfg->client_idle_timeout_s * 1000000,
		.on_request = on_request,
		.on_cancel = on_cancel,
		.on_pending_line = on_pending_line,
	};
	struct manager *m = calloc(1, sizeof(*m));
	const char *what = NULL;
	sigset_t mask;
	int r, kr;

	if (!m) {
		config_free(cfg);
		return log_error_errno(ENOMEM, "Out of memory.");
	}
	manager_sampler_opts(cfg, &so);
	m->config = cfg;
	m->args = args;
	m->d.frequency_hz = (unsigned)cfg->frequency_hz;
	m->d.limits = limits;
	m->d.start_ns = now_monotonic_ns();
	publish_config(m);

	r = sd_event_default(&m->d.event);
	if (r < 0) {
		log_error_errno(r, "Failed to create the event loop: %m");
		goto fail;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if ((r = sd_event_add_signal(m->d.event, &m->sigterm, SIGTERM, on_signal, m)) < 0 ||
	    (r = sd_event_add_signal(m->d.event, &m->sigint, SIGINT, on_signal, m)) < 0 ||
	    (r = sd_event_add_signal(m->d.event, &m->sighup, SIGHUP, on_sighup, m)) < 0) {
		log_error_errno(r, "Failed to watch SIGTERM/SIGINT/SIGHUP: %m");
		goto fail;
	}
	(void)sd_event_set_watchdog(m->d.event, true);
	/* the first of the lanes: with the signals above blocked, as they inherit */
	r = heap_start(HEAP_PERIOD_MS, HEAP_TRIM_MIN_FREE_BYTES);
	if (r < 0) {
		log_error_errno(r, "Failed to start the heap's lane: %m");
		goto fail;
	}

	r = symbolizer_new(&(struct symbolizer_opts){ .kallsyms_path = KALLSYMS_PATH,
						      .kernel_notes_path = KERNEL_NOTES_PATH,
						      .debug_dir = cfg->debug_dir,
						      .cache_bytes = cfg->symbol_cache_mib << 20,
						      .max_fds = module_fds(cfg),
						      .max_modules = cfg->max_modules,
						      .demangle = !cfg->no_demangle },
			   &m->d.symbolizer, &kr);
	if (r < 0) {
		log_error_errno(r, "Failed to start the symbolizer: %m");
		goto fail;
	}
	r = sd_event_add_io(m->d.event, &m->debug_io, symbolizer_fd(m->d.symbolizer), EPOLLIN,
			    on_debug_searched, m);
	if (r < 0) {
		log_error_errno(r, "Failed to watch the symbolizer's debug searches: %m");
		goto fail;
	}
	if (kr < 0)
		log_warning_errno(kr, "Kernel symbols unavailable (%s), kernel frames will print as [unknown]: %m",
				  KALLSYMS_PATH);
	{
		const char *kpath, *kbuild_id;

		if (symbolizer_describe_module(m->d.symbolizer, FRAME_MODULE_KERNEL, &kpath,
					       &kbuild_id) && !kbuild_id[0])
			log_info("No kernel build-id in %s, the kernel's mapping in profiles goes without one.",
				 KERNEL_NOTES_PATH);
	}
	modules = symbolizer_modules(m->d.symbolizer);
	r = aggregator_new(&limits, &modules, &m->d.aggregator);
	if (r < 0) {
		log_error_errno(r, "Failed to make the profile store: %m");
		goto fail;
	}
	r = aggregator_start_maps_lane(m->d.aggregator);
	if (r < 0) {
		log_error_errno(r, "Failed to start the thread reading process maps: %m");
		goto fail;
	}
	r = sd_event_add_io(m->d.event, &m->maps_io, aggregator_fd(m->d.aggregator), EPOLLIN,
			    on_maps_read, m);
	if (r < 0) {
		log_error_errno(r, "Failed to watch the process maps reads: %m");
		goto fail;
	}

	r = encode_lane_new(m->d.event, &m->d.encode_lane);
	if (r < 0) {
		log_error_errno(r, "Failed to start the threads encoding answers: %m");
		goto fail;
	}

	r = drain_new(&dopts, &m->d.drain);
	if (r < 0) {
		log_error_errno(r, "Failed to set up the drain thread: %m");
		goto fail;
	}
	ingest_waits_init(&m->d.ingest, m->d.event, m->d.drain, daemon_deliver, &m->d);
	so.ctx = m->d.drain;
	r = sampler_load(&so, &m->d.sampler, &report);
	if (r < 0) {
		log_error("Failed to load the BPF programs: %s", report.error);
		goto fail;
	}
	log_load(&report);
	r = sampler_start(m->d.sampler, &so, &what);
	if (r < 0) {
		log_error_errno(r, "Failed to %s: %m", what);
		goto fail;
	}
	m->d.memory_sample_bytes = sampler_memory_sample_bytes(m->d.sampler);
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
	setup_persist(m);
	{
		struct rates_reading first; /* the base of the first second's rates */

		daemon_read_rates(&m->d, &first);
		rates_note(&m->d.rates, &first);
	}
	r = sd_event_add_io(m->d.event, &m->queue_io, drain_fd(m->d.drain), EPOLLIN,
			    on_queue_ready, m);
	if (r >= 0)
		r = sd_event_add_time_relative(m->d.event, &m->maintain_timer, CLOCK_MONOTONIC,
					       MAINTAIN_INTERVAL_USEC, 0, on_maintain_timer, m);
	if (r >= 0)
		r = sd_event_source_set_enabled(m->maintain_timer, SD_EVENT_ON);
	if (r < 0) {
		log_error_errno(r, "Failed to watch the ring buffer: %m");
		goto fail;
	}
	/* Last: the thread inherits the blocked SIGTERM/SIGINT, which only
	 * the loop's signalfd takes. */
	r = drain_start(m->d.drain, m->d.sampler);
	if (r < 0) {
		log_error_errno(r, "Failed to start the drain thread: %m");
		goto fail;
	}

	{
		struct export_source src = export_source(m);

		r = exporter_new(m->d.event, &src, &m->d.exporter);
	}
	if (r >= 0)
		r = exporter_configure(m->d.exporter, &cfg->export);
	if (r < 0) {
		log_error_errno(r, "Failed to set up the exporters: %m");
		goto fail;
	}

	sv.listen_fd = get_listen_fd();
	sv.userdata = m;
	r = server_new(m->d.event, &sv, &m->d.server);
	if (r == -EADDRINUSE) {
		log_error("Another perfd is already running on %s.", cfg->socket_path);
		goto fail;
	}
	if (r < 0) {
		log_error_errno(r, "Failed to listen on %s: %m", cfg->socket_path);
		goto fail;
	}
	r = setup_metrics(m);
	if (r < 0)
		goto fail;
	*ret = m;
	return 0;
fail:
	manager_free(m);
	return r < 0 ? r : -EIO;
}

int manager_run(struct manager *m)
{
	int r;

	if (sampler_fixed_period(m->d.sampler))
		log_info("Sampling %u CPUs at %u Hz, every %" PRIu64 " ns%s; listening on %s.",
			 sampler_cpus(m->d.sampler), m->d.frequency_hz, sampler_period_ns(m->d.sampler),
			 m->config->fixed_period ? "" : " (the timer cannot run faster for jittered sampling)",
			 m->config->socket_path);
	else
		log_info("Sampling %u CPUs at %u Hz, jittered: one tick of a %" PRIu64
			 " ns timer at a random instant of each %" PRIu64 " ns; listening on %s.",
			 sampler_cpus(m->d.sampler), m->d.frequency_hz,
			 sampler_timer_period_ns(m->d.sampler), sampler_period_ns(m->d.sampler),
			 m->config->socket_path);
	(void)sd_notifyf(false, "READY=1\nSTATUS=Sampling %u CPUs at %u Hz",
			 sampler_cpus(m->d.sampler), m->d.frequency_hz);
	r = loop_run(m->d.event, &m->d.loop);
	(void)sd_notify(false, "STOPPING=1");
	/* the loop has ended: nothing waits for it any more */
	daemon_drain_at_exit(&m->d);
	persist_final(m);
	if (m->d.exporter)
		exporter_finish(m->d.exporter);
	if (r < 0)
		return log_error_errno(r, "Event loop failed: %m");
	return 0;
}

struct manager *manager_free(struct manager *m)
{
	if (!m)
		return NULL;
	/* Clients first: their pending commands (snapshots, models being built)
	 * are cancelled with them, while the store they hold parts of is there */
	server_free(m->d.server);
	m->d.metrics = http_server_free(m->d.metrics);
	snapshots_free_all(&m->d);
	/* after the clients: its jobs answer them */
	m->d.encode_lane = encode_lane_free(m->d.encode_lane);
	/* its threads hold no store data, only encoded profiles */
	m->d.exporter = exporter_free(m->d.exporter);
	ingest_wait_cancel(&m->d.ingest, &m->reload_wait);
	config_free(m->reload_next);
	ingest_waits_free(&m->d.ingest);
	/* The drain thread reads the sampler's ring: it goes first. */
	m->d.drain = drain_free(m->d.drain);
	sd_event_source_disable_unref(m->queue_io);
	sd_event_source_disable_unref(m->unwind_io);
	sd_event_source_disable_unref(m->debug_io);
	sd_event_source_disable_unref(m->maps_io);
	sd_event_source_disable_unref(m->python_io);
	sd_event_source_disable_unref(m->python_reader_io);
	sd_event_source_disable_unref(m->maintain_timer);
	sd_event_source_disable_unref(m->d.revisit_timer);
	sd_event_source_disable_unref(m->d.names_timer);
	sd_event_source_disable_unref(m->sigterm);
	sd_event_source_disable_unref(m->sigint);
	sd_event_source_disable_unref(m->sighup);
	m->d.persist = persist_free(m->d.persist);
	aggregator_free(m->d.aggregator);
	python_free(m->d.python);
	unwinder_free(m->d.unwinder);
	sampler_free(m->d.sampler);
	symbolizer_free(m->d.symbolizer);
	sd_event_unref(m->d.event);
	free(m->d.config_json);
	free(m->d.config_json_users);
	config_free(m->config);
	heap_stop();
	free(m);
	return NULL;
}
