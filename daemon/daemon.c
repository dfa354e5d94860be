/* SPDX-License-Identifier: MIT */
/* daemon.c - the daemon's core: ingest, revisits, resolvers, the names
 * wait (see daemon.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "collect/drain.h"
#include "collect/sampler.h"
#include "daemon.h"
#include "interp/python/python.h"
#include "perfd/macro.h"
#include "state/persist.h"
#include "symbols/symbolize.h"

void daemon_read_rates(struct daemon *d, struct rates_reading *ret)
{
	uint64_t bpf[PERFD_CNT_MAX] = { 0 };
	struct aggregator_stats agg;
	struct drain_stats dr;
	struct timespec cpu;

	if (sampler_read_counters(d->sampler, bpf) < 0)
		memset(bpf, 0, sizeof(bpf));
	aggregator_get_stats(d->aggregator, &agg);
	drain_get_stats(d->drain, &dr);
	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) < 0)
		cpu = (struct timespec){ 0 };
	*ret = (struct rates_reading){
		.ns = now_monotonic_ns(),
		.cpu_ns = (uint64_t)cpu.tv_sec * NSEC_PER_SEC + (uint64_t)cpu.tv_nsec,
		.samples = agg.samples,
		.lost = bpf[PERFD_CNT_RINGBUF_FULL] + dr.dropped_samples + agg.samples_evicted,
	};
}

uint64_t daemon_rss_bytes(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/statm", "re");
	unsigned long size, resident;

	if (!f || fscanf(f, "%lu %lu", &size, &resident) != 2)
		return 0;
	return (uint64_t)resident * sysconf(_SC_PAGESIZE);
}

int daemon_ingest(void *ctx, void *data, size_t size)
{
	struct daemon *d = ctx;

	if (aggregator_ingest(d->aggregator, data, size) < 0)
		d->malformed_records++;
	return 0;
}

/* Revisits due sooner than this get a timer; later ones run at a delivery,
 * which comes at least once a second (the drain interval), so that a
 * process whose interpreter never starts (it only links libpython), looked
 * at again every second, wakes the daemon no more often than it wakes. */
#define REVISIT_TIMER_MAX_NS (500 * 1000 * 1000ULL)

static int on_revisit_timer(sd_event_source *s, uint64_t usec, void *userdata);

/* Sets the revisit timer for next (0: none), or leaves it off when next
 * is later than REVISIT_TIMER_MAX_NS from now. */
static void set_revisit_timer(struct daemon *d, uint64_t now, uint64_t next)
{
	int r;

	if (!next || next > now + REVISIT_TIMER_MAX_NS) {
		if (d->revisit_timer)
			(void)sd_event_source_set_enabled(d->revisit_timer, SD_EVENT_OFF);
		return;
	}
	/* a millisecond of slack: the looks again are 4 ms apart at first */
	if (!d->revisit_timer)
		r = sd_event_add_time(d->event, &d->revisit_timer, CLOCK_MONOTONIC,
				      next / 1000 + 1, 1000, on_revisit_timer, d);
	else
		r = sd_event_source_set_time(d->revisit_timer, next / 1000 + 1);
	if (r >= 0)
		r = sd_event_source_set_enabled(d->revisit_timer, SD_EVENT_ONESHOT);
	if (r < 0)
		log_warning_errno(r, "Failed to set the revisit timer, revisiting at the next drain: %m");
}

/* Runs the revisits due now and sets the timer for the next one
 * (aggregator_revisit): a process's look again must not wait for records
 * to arrive, which at rest is up to a drain interval. */
static void revisit(struct daemon *d)
{
	uint64_t now = now_monotonic_ns();

	set_revisit_timer(d, now, aggregator_revisit(d->aggregator, now));
}

void daemon_revisit_by(struct daemon *d, uint64_t at_ns)
{
	uint64_t usec;
	int enabled;

	if (d->revisit_timer && sd_event_source_get_enabled(d->revisit_timer, &enabled) >= 0 &&
	    enabled != SD_EVENT_OFF && sd_event_source_get_time(d->revisit_timer, &usec) >= 0 &&
	    usec <= at_ns / 1000 + 1)
		return; /* set for sooner */
	set_revisit_timer(d, now_monotonic_ns(), at_ns);
}

static int on_revisit_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	revisit(userdata);
	return 0;
}

/* One slice of the ingest (collect/drain.h): 10 ms leaves the loop free
 * for status's 100 ms under any backlog, and at 2 CPUs x 1999 Hz holds
 * about a drain interval's records at rest. */
#define DELIVER_SLICE_RECORDS 8192
#define DELIVER_SLICE_NS (10 * 1000 * 1000ULL)

void daemon_deliver(void *ctx)
{
	static const struct drain_budget slice = { DELIVER_SLICE_RECORDS, DELIVER_SLICE_NS };
	struct daemon *d = ctx;

	if (drain_deliver(d->drain, &slice, daemon_ingest, d))
		ingest_waits_delivered(&d->ingest);
	revisit(d);
}

static void drain_ring(struct daemon *d)
{
	int r = drain_now(d->drain);

	if (r < 0)
		log_warning_errno(r, "Failed to drain the ring buffer, ignoring: %m");
}

void daemon_drain_at_exit(struct daemon *d)
{
	uint64_t mark, delivered;

	drain_ring(d);
	mark = drain_queued_mark(d->drain);
	delivered = drain_delivered(d->drain);
	if (mark > delivered)
		(void)drain_deliver(d->drain, &(struct drain_budget){ .max_records = mark - delivered },
				    daemon_ingest, d);
	aggregator_settle(d->aggregator);
	revisit(d);
}

void daemon_refresh(struct daemon *d)
{
	drain_ring(d);
	daemon_deliver(d);
}

static size_t resolve_frame(void *ctx, uint64_t frame, bool lines, struct frame_record *out,
			    size_t cap, char *scratch, size_t size)
{
	struct daemon *d = ctx;

	if (frame_module(frame) == FRAME_MODULE_PYTHON) {
		python_frame_resolve(d->python, frame, out);
		return 1;
	}
	if (frame_module(frame) == FRAME_MODULE_STORED && d->persist)
		return persist_resolve(d->persist, frame, lines, out, cap);
	return symbolizer_resolve(d->symbolizer, frame, lines, out, cap, scratch, size);
}

static bool frame_pending(void *ctx, uint64_t frame, bool lines)
{
	struct daemon *d = ctx;

	return symbolizer_frame_pending(d->symbolizer, frame, lines);
}

static bool describe_module(void *ctx, uint16_t module, const char **ret_path,
			    const char **ret_build_id)
{
	struct daemon *d = ctx;

	if (module >= FRAME_MODULE_RESTORED_FIRST && module <= FRAME_MODULE_RESTORED_LAST)
		return d->persist && persist_describe_module(d->persist, module, ret_path, ret_build_id);
	return symbolizer_describe_module(d->symbolizer, module, ret_path, ret_build_id);
}

struct persist_names daemon_persist_names(struct daemon *d)
{
	return (struct persist_names){ .resolve = resolve_frame, .describe = describe_module,
				       .pending = frame_pending, .ctx = d };
}

struct model_opts daemon_model_opts(struct daemon *d, enum profile_kind kind, bool lines,
				    bool python_lines, bool threads)
{
	return (struct model_opts){
		.kind = kind,
		.period_ns = sampler_period_ns(d->sampler),
		.lines = lines,
		.python_lines = python_lines,
		.threads = threads,
		.resolve = resolve_frame,
		.describe = describe_module,
		.pending = frame_pending,
		.ctx = d,
	};
}

/* --- names before an answer ------------------------------------------- */

static int on_names_timer(sd_event_source *es, uint64_t usec, void *userdata)
{
	struct daemon *d = userdata;
	bool settled = symbolizer_loads_pending(d->symbolizer) == 0;
	uint64_t now = now_monotonic_ns();
	struct names_wait *ready = NULL, **pp = &d->names_waits;

	/* taken off the list first: an answer may start or end waits */
	while (*pp) {
		struct names_wait *w = *pp;

		if (settled || now >= w->deadline_ns) {
			*pp = w->next;
			w->next = ready;
			ready = w;
		} else {
			pp = &w->next;
		}
	}
	while (ready) {
		struct names_wait *w = ready;

		ready = w->next;
		w->next = NULL;
		/* a table built may have started another (the line tables
		 * follow the symbols): it waits again, within its time */
		d->names_final = now >= w->deadline_ns;
		w->ready(d, w);
		d->names_final = false;
	}
	if (d->names_waits && sd_event_source_set_time_relative(es, DAEMON_NAMES_POLL_MS * 1000) >= 0)
		(void)sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
	return 0;
}

int daemon_wait_for_names(struct daemon *d, struct names_wait *w)
{
	int r;

	if (!d->names_timer)
		r = sd_event_add_time_relative(d->event, &d->names_timer, CLOCK_MONOTONIC,
					       DAEMON_NAMES_POLL_MS * 1000, 1000, on_names_timer, d);
	else if (!d->names_waits)
		r = sd_event_source_set_time_relative(d->names_timer, DAEMON_NAMES_POLL_MS * 1000);
	else
		r = 0;
	if (r >= 0)
		r = sd_event_source_set_enabled(d->names_timer, SD_EVENT_ONESHOT);
	if (r < 0)
		return r;
	if (!w->deadline_ns)
		w->deadline_ns = now_monotonic_ns() + DAEMON_NAMES_WAIT_MS * 1000000ULL;
	w->next = d->names_waits;
	d->names_waits = w;
	return 0;
}

void daemon_stop_waiting(struct daemon *d, struct names_wait *w)
{
	for (struct names_wait **pp = &d->names_waits; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			w->next = NULL;
			return;
		}
}
