/* SPDX-License-Identifier: MIT */
/*
 * cmd_status.c - "status": the daemon's counters, losses and limits, from
 * every module (the answer is built by query.c).  Counters only, no
 * process: every client may ask.  Root alone sees where the exporters
 * send (paths, queries, tenants) and the output directory; others see the
 * endpoints as scheme://host:port.  /metrics (api/metrics.h) serves the
 * same answer, as others see it, in the Prometheus format.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/auth.h"
#include "api/command.h"
#include "api/httpd.h"
#include "api/metrics.h"
#include "api/query.h"
#include "base/jsonw.h"
#include "base/clock.h"
#include "collect/drain.h"
#include "collect/sampler.h"
#include "interp/python/python.h"
#include "perfd/macro.h"
#include "symbols/symbolize.h"
#include "unwind/unwinder.h"

int daemon_status(struct daemon *d, bool root, struct jsonw *w)
{
	struct status_info info = {
		.uptime_seconds = (double)(now_monotonic_ns() - d->start_ns) / NSEC_PER_SEC,
		.frequency_hz = d->frequency_hz,
		.cpus = sampler_cpus(d->sampler),
		.period_ns = sampler_period_ns(d->sampler),
		.timer_period_ns = sampler_timer_period_ns(d->sampler),
		.fixed_period = sampler_fixed_period(d->sampler),
		.ringbuf_bytes = sampler_ringbuf_bytes(d->sampler),
		.memory_sample_bytes = sampler_memory_sample_bytes(d->sampler),
		.offcpu_rate = sampler_offcpu_rate(d->sampler),
		.limits = d->limits,
		.daemon_rss_bytes = daemon_rss_bytes(),
		.clients = server_clients(d->server),
		.accept_backoffs = server_accept_backoffs(d->server),
		.snapshots = d->n_snapshots,
		.root = root,
		.config = root ? d->config_json : d->config_json_users,
		.client_idle_timeout_s = server_idle_timeout_usec(d->server) / 1000000,
		.load = sampler_load_report(d->sampler),
	};

	daemon_refresh(d);
	if (sampler_read_counters(d->sampler, info.bpf) < 0)
		memset(info.bpf, 0, sizeof(info.bpf));
	aggregator_get_stats(d->aggregator, &info.agg);
	heap_get_stats(&info.heap);
	info.heap_age_ns = now_monotonic_ns() - info.heap.as_of_ns;
	symbolizer_get_stats(d->symbolizer, &info.sym);
	info.unwind_tables = d->unwinder != NULL;
	if (d->unwinder)
		unwinder_get_stats(d->unwinder, &info.unwind);
	python_get_stats(d->python, &info.python);
	drain_get_stats(d->drain, &info.drain);
	info.loop = d->loop;
	info.models = d->models;
	info.answers = encode_lane_get_stats(d->encode_lane);
	if (d->exporter)
		exporter_get_stats(d->exporter, &info.exporter);
	info.metrics = d->metrics != NULL;
	http_server_get_stats(d->metrics, &info.metrics_http);
	info.state = d->persist != NULL;
	if (d->persist)
		persist_get_stats(d->persist, &info.persist);
	return query_status(w, &info);
}

static int run_status(struct daemon *d, struct client *c, const void *args)
{
	struct jsonw w;

	command_reply_writer(c, &w, daemon_status(d, client_peer(c)->uid == 0, &w));
	return 0;
}

void daemon_metrics_page(struct daemon *d, const char *path, struct http_answer *ret)
{
	struct jsonw w;

	if (strcmp(path, "/metrics") != 0) {
		ret->status = 404;
		return;
	}
	ret->status = 500;
	if (daemon_status(d, false, &w) == 0 && metrics_render(w.buf, w.len, &ret->body, &ret->len) == 0) {
		ret->status = 200;
		ret->content_type = METRICS_CONTENT_TYPE;
	}
	jsonw_done(&w);
}

const struct command cmd_status = { .name = "status", .run = run_status };
