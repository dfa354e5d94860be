/* SPDX-License-Identifier: MIT */
/* query.c - see query.h. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/kindtab.h"
#include "perfd/macro.h"
#include "perfd/protocol.h"
#include "perfd/unwind.h"
#include "perfd/version.h"
#include "api/auth.h"
#include "api/command.h"
#include "api/limits.h"
#include "api/query.h"
#include "base/array.h"
#include "base/jsonw.h"
#include "export/http.h"
#include "process/procfs.h"
#include "profile/rss.h"


static void add_u64(json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

json_object *query_ok(void)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "version", json_object_new_int(PERFD_PROTOCOL_VERSION));
	json_object_object_add(o, "ok", json_object_new_boolean(1));
	return o;
}

void query_ok_begin(struct jsonw *w)
{
	jsonw_init(w);
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "version", PERFD_PROTOCOL_VERSION);
	jsonw_kv_bool(w, "ok", true);
}

json_object *query_error(const char *code, const char *fmt, ...)
{
	json_object *o = json_object_new_object(), *e = json_object_new_object();
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_object_object_add(e, "code", json_object_new_string(code));
	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(o, "version", json_object_new_int(PERFD_PROTOCOL_VERSION));
	json_object_object_add(o, "ok", json_object_new_boolean(0));
	json_object_object_add(o, "error", e);
	return o;
}

static json_object *unix_time_or_null(double t)
{
	return t > 0 ? json_object_new_double(t) : NULL;
}

/* "export": the interval's figures, then one object per exporter. */
static json_object *export_status(const struct exporter_stats *x, bool root)
{

	static const struct {
		const char *key;
		size_t offset;
	} counters[] = {
		{ "queued", offsetof(struct export_worker_stats, queued) },
		{ "queued_bytes", offsetof(struct export_worker_stats, queued_bytes) },
		{ "max_queued_bytes", offsetof(struct export_worker_stats, max_queued_bytes) },
		{ "sent", offsetof(struct export_worker_stats, sent) },
		{ "sent_bytes", offsetof(struct export_worker_stats, sent_bytes) },
		{ "dropped", offsetof(struct export_worker_stats, dropped) },
		{ "failed", offsetof(struct export_worker_stats, failed) },
		{ "retries", offsetof(struct export_worker_stats, retries) },
	};
	json_object *o = json_object_new_object(), *list = json_object_new_array();

	json_object_object_add(o, "enabled", json_object_new_boolean(x->enabled));
	add_u64(o, "interval_seconds", x->interval_s);
	add_u64(o, "intervals", x->intervals);
	add_u64(o, "profiles", x->profiles);
	add_u64(o, "encode_errors", x->encode_errors);
	json_object_object_add(o, "last_export", unix_time_or_null(x->last_export_unix));
	json_object_object_add(o, "last_encode_ms", json_object_new_double(x->last_encode_ms));
	json_object_object_add(o, "longest_encode_ms", json_object_new_double(x->longest_encode_ms));
	add_u64(o, "waits_for_names", x->waits_for_names);
	add_u64(o, "steps", x->steps);
	json_object_object_add(o, "longest_step_ms", json_object_new_double(x->longest_step_ms));
	add_u64(o, "encoding", x->encoding);
	add_u64(o, "encoding_bytes", x->encoding_bytes);
	add_u64(o, "max_encoding_bytes", x->max_encoding_bytes);
	for (size_t i = 0; i < x->n_sinks; i++) {
		const struct export_worker_stats *w = &x->sinks[i];
		json_object *e = json_object_new_object();

		char origin[sizeof(w->target)];

		json_object_object_add(e, "name", json_object_new_string(w->name));
		if (root) {
			json_object_object_add(e, "target", json_object_new_string(w->target));
		} else if (strstr(w->target, "://")) {
			http_describe_origin(w->target, origin, sizeof(origin));
			json_object_object_add(e, "target", json_object_new_string(origin));
		}
		json_object_object_add(e, "state", json_object_new_string(w->retrying ? "retrying" :
									   w->last_success_unix > 0 ? "ok" : "idle"));
		for (size_t k = 0; k < ELEMENTSOF(counters); k++)
			add_u64(e, counters[k].key, *(const uint64_t *)((const char *)w + counters[k].offset));
		json_object_object_add(e, "last_success", unix_time_or_null(w->last_success_unix));
		json_object_object_add(e, "last_error_time", unix_time_or_null(w->last_error_unix));
		json_object_object_add(e, "last_error", root && w->last_error[0] ?
				       json_object_new_string(w->last_error) : NULL);
		json_object_array_add(list, e);
	}
	json_object_object_add(o, "exporters", list);
	return o;
}

/* "state": the store on disk (state/persist.h). */
static json_object *state_status(const struct status_info *in)
{
	static const struct {
		const char *key;
		size_t offset;
	} counters[] = {
#define C(f) { #f, offsetof(struct persist_stats, f) }
		C(segments), C(disk_bytes), C(flushes), C(flushes_cut), C(windows_written),
		C(processes_written), C(stacks_written), C(frames_written), C(windows_unwritten), C(segments_removed),
		C(processes_restored), C(windows_restored), C(samples_restored), C(windows_skipped),
		C(records_rejected), C(torn_bytes), C(files_moved_aside), C(restore_ms),
		C(bytes_written), C(syncs), C(write_errors), C(appends_refused),
		C(restored_table_freed), C(restored_table_compacted),
		C(windows_refused_segment_full), C(windows_refused_owner_share),
		C(windows_waited_for_names),
#undef C
	};
	json_object *o = json_object_new_object();

	json_object_object_add(o, "enabled", json_object_new_boolean(in->state));
	if (!in->state)
		return o;
	for (size_t k = 0; k < ELEMENTSOF(counters); k++)
		add_u64(o, counters[k].key,
			*(const uint64_t *)((const char *)&in->persist + counters[k].offset));
	add_u64(o, "restored_frames", in->persist.restored_frames);
	add_u64(o, "restored_bytes", in->persist.restored_bytes);
	json_object_object_add(o, "longest_flush_ms",
			       json_object_new_double(in->persist.longest_flush_ms));
	return o;
}

/* "bpf": the tier loaded, the features lost with why, and every program
 * of the object: loaded with the verifier's count, or why not. */
static json_object *load_json(const struct sampler_load_report *r)
{
	json_object *o = json_object_new_object(), *lost = json_object_new_array(),
		    *progs = json_object_new_array();
	unsigned lost_features = load_report_lost(r);
	char name[TIER_NAME_MAX];

	json_object_object_add(o, "tier", json_object_new_string(tier_name(r->tier, name, sizeof(name))));
	for (int i = 0; i < TIER_N_FEATURES; i++) {
		json_object *e;

		if (!(lost_features & tier_features[i]))
			continue;
		e = json_object_new_object();
		json_object_object_add(e, "feature", json_object_new_string(tier_feature_name(tier_features[i])));
		json_object_object_add(e, "reason", json_object_new_string(load_report_why(r, tier_features[i])));
		json_object_array_add(lost, e);
	}
	json_object_object_add(o, "lost", lost);
	for (size_t i = 0; i < r->n_programs; i++) {
		const struct load_program *p = &r->programs[i];
		json_object *e = json_object_new_object();

		json_object_object_add(e, "name", json_object_new_string(p->name));
		json_object_object_add(e, "loaded", json_object_new_boolean(p->loaded));
		if (p->loaded)
			add_u64(e, "verified_insns", p->verified_insns);
		else
			json_object_object_add(e, "error", json_object_new_string(p->error));
		json_object_array_add(progs, e);
	}
	json_object_object_add(o, "programs", progs);
	return o;
}

json_object *query_status(const struct status_info *in)
{
	json_object *o = query_ok(), *samples = json_object_new_object(),
		    *lost = json_object_new_object(), *trunc = json_object_new_object(),
		    *exits = json_object_new_object(), *procs = json_object_new_object(),
		    *stacks = json_object_new_object(), *limits = json_object_new_object(),
		    *syms = json_object_new_object();
	uint64_t lost_total = in->bpf[PERFD_CNT_RINGBUF_FULL] + in->drain.dropped_samples +
			      in->agg.samples_evicted + in->bpf[PERFD_CNT_UNDELIVERED_LOST];

	json_object_object_add(o, "daemon_version", json_object_new_string(perfd_version));
	json_object_object_add(o, "protocol_version", json_object_new_int(PERFD_PROTOCOL_VERSION));
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	json_object_object_add(o, "uptime_seconds", json_object_new_double(in->uptime_seconds));
	json_object_object_add(o, "frequency_hz", json_object_new_int(in->frequency_hz));
	json_object_object_add(o, "sample_period_ns", json_object_new_uint64(in->period_ns));
	json_object_object_add(o, "sampling", json_object_new_string(in->fixed_period ? "fixed" : "jittered"));
	json_object_object_add(o, "timer_period_ns", json_object_new_uint64(in->timer_period_ns));
	json_object_object_add(o, "cpus", json_object_new_int(in->cpus));
	json_object_object_add(o, "ringbuf_bytes", json_object_new_uint64(in->ringbuf_bytes));
	if (in->load)
		json_object_object_add(o, "bpf", load_json(in->load));

	add_u64(samples, "taken", in->bpf[PERFD_CNT_SAMPLES]);
	add_u64(samples, "idle", in->bpf[PERFD_CNT_IDLE]);
	add_u64(samples, "idle_undelivered", in->bpf[PERFD_CNT_UNDELIVERED_IDLE]);
	add_u64(samples, "ticks_thinned", in->bpf[PERFD_CNT_THINNED]);
	add_u64(samples, "ticks_clocked", in->bpf[PERFD_CNT_TICKS_CLOCKED]);
	add_u64(samples, "context_switch", in->bpf[PERFD_CNT_SWITCHED]);
	add_u64(samples, "received", in->agg.samples);
	add_u64(samples, "queued", in->drain.queued_samples);
	add_u64(samples, "profiled", in->agg.samples - MIN(in->agg.samples, in->agg.samples_evicted));
	add_u64(lost, "ringbuf_full", in->bpf[PERFD_CNT_RINGBUF_FULL]);
	add_u64(lost, "queue_full", in->drain.dropped_samples);
	add_u64(lost, "evicted", in->agg.samples_evicted);
	add_u64(lost, "undelivered", in->bpf[PERFD_CNT_UNDELIVERED_LOST]);
	json_object_object_add(samples, "lost", lost);
	add_u64(samples, "lost_total", lost_total);
	add_u64(trunc, "kernel_stack", in->bpf[PERFD_CNT_KSTACK_ERROR]);
	add_u64(trunc, "user_stack", in->bpf[PERFD_CNT_USTACK_ERROR]);
	add_u64(trunc, "stack_limit", in->agg.stack_limit);
	json_object_object_add(samples, "truncated", trunc);
	json_object_object_add(o, "samples", samples);

	{
		json_object *mem = json_object_new_object();

		json_object_object_add(mem, "enabled", json_object_new_boolean(in->memory_sample_bytes > 0));
		add_u64(mem, "sample_bytes", in->memory_sample_bytes);
		add_u64(mem, "events", in->bpf[PERFD_CNT_MEMORY_EVENTS]);
		add_u64(mem, "samples", in->agg.memory_samples);
		add_u64(mem, "samples_lost", in->bpf[PERFD_CNT_MEMORY_LOST]);
		add_u64(mem, "rss_updates", in->agg.rss_updates);
		add_u64(mem, "rss_updates_lost", in->bpf[PERFD_CNT_RSS_LOST]);
		json_object_object_add(o, "memory", mem);
	}
	add_u64(exits, "received", in->agg.exit_events);
	add_u64(exits, "lost", in->bpf[PERFD_CNT_EXIT_LOST] + in->bpf[PERFD_CNT_EXEC_LOST] +
				       in->bpf[PERFD_CNT_FORK_LOST]);
	json_object_object_add(o, "exit_events", exits);

	add_u64(procs, "tracked", in->agg.processes);
	add_u64(procs, "exited", in->agg.processes_exited);
	add_u64(procs, "evicted", in->agg.processes_evicted);
	add_u64(procs, "expired", in->agg.processes_expired);
	{
		json_object *maps = json_object_new_object();

		/* maps too long for the loop, read on the lane (mapsread.h) */
		add_u64(maps, "reads_offloaded", in->agg.maps_reads_offloaded);
		add_u64(maps, "reads_pending", in->agg.maps_reads_pending);
		add_u64(maps, "truncated", in->agg.maps_truncated);
		add_u64(maps, "samples_waited", in->agg.samples_waited_for_maps);
		add_u64(maps, "samples_not_waiting", in->agg.samples_not_waiting);
		json_object_object_add(procs, "maps", maps);
	}
	json_object_object_add(o, "processes", procs);

	add_u64(stacks, "interned", in->agg.stacks);
	add_u64(stacks, "frames", in->agg.frames);
	add_u64(stacks, "modules", in->sym.modules);
	add_u64(stacks, "aggregation_bytes", in->agg.memory_bytes);
	json_object_object_add(o, "stacks", stacks);
	{
		json_object *st = json_object_new_object(), *ev = json_object_new_object();

		add_u64(st, "memory_bytes", in->agg.memory_bytes);
		add_u64(st, "history_bytes", in->agg.history_bytes);
		add_u64(st, "windows", in->agg.windows);
		add_u64(st, "windows_expired", in->agg.windows_expired);
		add_u64(st, "windows_evicted", in->agg.windows_evicted);
		add_u64(st, "samples_expired", in->agg.samples_expired);
		json_object *why = json_object_new_object(), *refused = json_object_new_object();

		for (int k = 0; k < PROFILE_KINDS; k++)
			add_u64(ev, kind_infos[k].name, in->agg.values_evicted[k]);
		json_object_object_add(st, "values_evicted", ev);
		/* eviction steps, by what ran out and by whose data went */
		add_u64(why, "memory", in->agg.evictions_memory);
		add_u64(why, "process_limit", in->agg.evictions_process_limit);
		add_u64(why, "stack_limit", in->agg.evictions_stack_limit);
		add_u64(why, "admitting_owners_own", in->agg.evictions_own);
		add_u64(why, "heaviest_owners", in->agg.evictions_heaviest);
		json_object_object_add(st, "evictions", why);
		add_u64(st, "snapshot_bytes", in->agg.snapshot_bytes);
		add_u64(st, "restored_names_bytes", in->agg.restored_table_bytes);
		add_u64(refused, "memory_share", in->agg.snapshot_samples_refused_memory);
		add_u64(refused, "process_share", in->agg.snapshot_samples_refused_pins);
		json_object_object_add(st, "snapshot_samples_refused", refused);
		json_object_object_add(o, "store", st);
	}

	add_u64(syms, "modules", in->sym.modules);
	add_u64(syms, "modules_refused", in->sym.modules_refused);
	add_u64(syms, "modules_refused_share", in->sym.modules_refused_share);
	add_u64(syms, "modules_released", in->sym.modules_released);
	add_u64(syms, "module_collections", in->sym.collections);
	add_u64(syms, "module_fds_open", in->sym.fds_open);
	add_u64(syms, "module_fds_evicted", in->sym.fds_evicted);
	add_u64(syms, "module_fds_reopened", in->sym.fds_reopened);
	add_u64(syms, "module_fds_reopen_failed", in->sym.fds_reopen_failed);
	add_u64(syms, "modules_loaded", in->sym.modules_loaded);
	add_u64(syms, "modules_failed", in->sym.modules_failed);
	add_u64(syms, "kernel_symbols", in->sym.kernel_symbols);
	add_u64(syms, "jit_maps_read", in->sym.jit_maps);
	add_u64(syms, "jit_maps_refused", in->sym.jit_maps_refused);
	add_u64(syms, "jit_maps_pending", in->sym.jit_maps_pending);
	add_u64(syms, "debug_files", in->sym.debug_files);
	add_u64(syms, "debug_files_refused", in->sym.debug_files_refused);
	add_u64(syms, "minidebuginfo", in->sym.minidebuginfo);
	add_u64(syms, "debug_searches_pending", in->sym.debug_searches_pending);
	add_u64(syms, "symtab_loads_pending", in->sym.symtab_loads_pending);
	add_u64(syms, "line_loads_pending", in->sym.line_loads_pending);
	add_u64(syms, "tables_refused", in->sym.tables_refused);
	add_u64(syms, "line_units_refused", in->sym.line_units_refused);
	add_u64(syms, "lookups", in->sym.lookups);
	add_u64(syms, "demangle_cache_hits", in->sym.demangle_cache_hits);
	add_u64(syms, "demangle_cache_misses", in->sym.demangle_cache_misses);
	add_u64(syms, "cache_hits", in->sym.cache_hits);
	add_u64(syms, "cache_misses", in->sym.cache_misses);
	add_u64(syms, "cache_evictions", in->sym.cache_evictions);
	add_u64(syms, "cache_bytes", in->sym.cache_bytes);
	add_u64(syms, "cache_limit_bytes", in->sym.cache_limit);
	add_u64(syms, "memory_bytes", in->sym.memory_bytes);
	json_object_object_add(o, "symbols", syms);

	{
		json_object *uw = json_object_new_object();

		json_object_object_add(uw, "method",
				       json_object_new_string(in->unwind_tables ? "tables" : "frame_pointers"));
		add_u64(uw, "stacks_with_tables", in->bpf[PERFD_CNT_UNWIND_DWARF]);
		add_u64(uw, "stacks_truncated", in->bpf[PERFD_CNT_UNWIND_TRUNCATED]);
		add_u64(uw, "stacks_pending", in->bpf[PERFD_CNT_UNWIND_PENDING]);
		add_u64(uw, "frames_by_frame_pointer", in->bpf[PERFD_CNT_UNWIND_FP_FRAMES]);
		add_u64(uw, "stacks_unrooted_before_tables", in->bpf[PERFD_CNT_UNWIND_FP_UNROOTED]);
		add_u64(uw, "tables", in->unwind.tables);
		add_u64(uw, "tables_idle", in->unwind.tables_idle);
		add_u64(uw, "tables_evicted", in->unwind.tables_evicted);
		add_u64(uw, "tables_built", in->unwind.tables_built);
		add_u64(uw, "tables_building", in->unwind.tables_building);
		add_u64(uw, "tables_failed", in->unwind.tables_failed);
		add_u64(uw, "tables_oversized", in->unwind.tables_oversized);
		add_u64(uw, "tables_abandoned", in->unwind.tables_abandoned);
		add_u64(uw, "tables_refused", in->unwind.tables_refused);
		add_u64(uw, "copy_tables", in->unwind.copy_tables);
		add_u64(uw, "copy_templates_refused", in->unwind.copy_templates_refused);
		add_u64(uw, "processes", in->unwind.processes);
		add_u64(uw, "processes_refused", in->unwind.processes_refused);
		add_u64(uw, "rows_used", in->unwind.rows_used);
		add_u64(uw, "rows_capacity", in->unwind.rows_capacity);
		add_u64(uw, "mappings_used", in->unwind.mappings_used);
		add_u64(uw, "mappings_capacity", in->unwind.mappings_capacity);
		add_u64(uw, "table_bytes", in->unwind.rows_used * sizeof(struct perfd_unwind_row));
		add_u64(uw, "cfi_bytes_read", in->unwind.cfi_bytes);
		json_object_object_add(uw, "build_seconds",
				       json_object_new_double(in->unwind.build_ns / 1e9));
		json_object_object_add(uw, "upload_seconds",
				       json_object_new_double(in->unwind.upload_ns / 1e9));
		add_u64(uw, "completions_cut", in->unwind.completions_cut);
		json_object_object_add(o, "unwind", uw);
	}
	{
		json_object *py = json_object_new_object();
		const struct python_stats *ps = &in->python;

		add_u64(py, "processes", ps->processes);
		add_u64(py, "unsupported", ps->unsupported);
		add_u64(py, "samples", in->bpf[PERFD_CNT_PYTHON_WALKS]);
		add_u64(py, "samples_without_thread_state", in->bpf[PERFD_CNT_PYTHON_NO_THREAD_STATE]);
		add_u64(py, "samples_truncated", in->bpf[PERFD_CNT_PYTHON_TRUNCATED]);
		add_u64(py, "code_tags_cached", in->bpf[PERFD_CNT_PYTHON_TAGS_CACHED]);
		add_u64(py, "code_tags_read", in->bpf[PERFD_CNT_PYTHON_TAGS_READ]);
		add_u64(py, "frames", ps->frames);
		add_u64(py, "frames_unmatched", ps->unmatched);
		add_u64(py, "functions", ps->functions);
		add_u64(py, "code_objects", ps->code_objects);
		add_u64(py, "code_reads", ps->code_reads);
		add_u64(py, "code_read_errors", ps->code_read_errors);
		add_u64(py, "code_reused", ps->code_reused);
		add_u64(py, "cache_resets", ps->cache_resets);
		add_u64(py, "function_table_full", ps->function_table_full);
		add_u64(py, "trampoline_arenas", ps->trampoline_arenas);
		add_u64(py, "memory_bytes", ps->memory_bytes);
		json_object_object_add(o, "python", py);
	}
	add_u64(limits, "max_processes", in->limits.max_processes);
	add_u64(limits, "max_stacks", in->limits.max_stacks);
	add_u64(limits, "max_frames", in->limits.max_frames);
	add_u64(limits, "max_memory_bytes", in->limits.max_memory_bytes);
	add_u64(limits, "retention_seconds", in->limits.retention_s);
	add_u64(limits, "max_clients", LIMITS_MAX_CLIENTS);
	add_u64(limits, "max_clients_per_uid", LIMITS_CLIENTS_PER_UID);
	add_u64(limits, "clients_reserved_for_root", LIMITS_CLIENTS_ROOT_RESERVE);
	add_u64(limits, "max_client_output_bytes", LIMITS_CLIENT_OUTPUT_BYTES);
	add_u64(limits, "client_idle_timeout_seconds", in->client_idle_timeout_s);
	add_u64(limits, "max_snapshots", LIMITS_MAX_SNAPSHOTS);
	add_u64(limits, "max_modules", in->sym.modules_limit);
	add_u64(limits, "max_module_fds", in->sym.fds_limit);
	add_u64(limits, "max_unwind_builds_queued", UNWINDER_MAX_BUILDS);
	add_u64(limits, "max_unwind_mappings_per_process", UNWINDER_MAX_PROCESS_MAPPINGS);
	add_u64(limits, "max_snapshots_per_uid", LIMITS_SNAPSHOTS_PER_UID);
	add_u64(limits, "snapshots_reserved_for_root", LIMITS_SNAPSHOTS_ROOT_RESERVE);
	add_u64(limits, "max_snapshot_process_seconds_per_uid", LIMITS_SNAPSHOT_PROCESS_SECONDS);
	add_u64(limits, "max_snapshot_bytes_per_uid",
		in->limits.max_memory_bytes / AGG_SNAPSHOT_MEMORY_SHARE);
	add_u64(limits, "max_snapshot_processes_per_uid",
		MAX(in->limits.max_processes / AGG_SNAPSHOT_PIN_SHARE, (size_t)1));
	json_object_object_add(o, "limits", limits);

	{
		json_object *dr = json_object_new_object();

		add_u64(dr, "records", in->drain.records);
		add_u64(dr, "batches", in->drain.batches);
		add_u64(dr, "wakeups", in->drain.wakeups);
		add_u64(dr, "dropped", in->drain.dropped);
		json_object_object_add(dr, "longest_consume_ms",
				       json_object_new_double(in->drain.max_consume_ns / 1e6));
		add_u64(dr, "queued_bytes", in->drain.queued_bytes);
		add_u64(dr, "max_queued_bytes", in->drain.max_queued_bytes);
		add_u64(dr, "queued_records", in->drain.queued_records);
		add_u64(dr, "slices", in->drain.slices);
		add_u64(dr, "slices_cut", in->drain.slices_cut);
		add_u64(dr, "max_slice_records", in->drain.max_slice_records);
		json_object_object_add(o, "drain", dr);
	}
	{
		json_object *lp = json_object_new_object();

		add_u64(lp, "turns", in->loop.turns);
		add_u64(lp, "slow_turns", in->loop.slow_turns);
		json_object_object_add(lp, "slow_turn_ms",
				       json_object_new_double(LOOP_SLOW_TURN_NS / 1e6));
		json_object_object_add(lp, "longest_turn_ms",
				       json_object_new_double(in->loop.max_turn_ns / 1e6));
		/* answers' models, built in slices (api/model_slices.h) */
		add_u64(lp, "models_built", in->models.built);
		add_u64(lp, "models_building", in->models.building);
		add_u64(lp, "model_builds_cancelled", in->models.cancelled);
		add_u64(lp, "model_slices", in->models.slices);
		json_object_object_add(lp, "longest_model_slice_ms",
				       json_object_new_double(in->models.max_slice_ns / 1e6));
		/* their profiles and tables, written on lanes (api/encode_lane.h) */
		add_u64(lp, "answers_written_on_lanes", in->answers.written);
		add_u64(lp, "answers_writing", in->answers.writing);
		json_object_object_add(o, "loop", lp);
	}
	add_u64(o, "clients", in->clients);
	add_u64(o, "accept_backoffs", in->accept_backoffs);
	add_u64(o, "snapshots", in->snapshots);
	add_u64(o, "daemon_rss_bytes", in->daemon_rss_bytes);
	{
		json_object *heap = json_object_new_object();

		add_u64(heap, "in_use_bytes", in->heap.in_use_bytes);
		add_u64(heap, "free_bytes", in->heap.free_bytes);
		add_u64(heap, "arena_bytes", in->heap.arena_bytes);
		add_u64(heap, "mmapped_bytes", in->heap.mmapped_bytes);
		add_u64(heap, "trims", in->heap.trims);
		add_u64(heap, "trims_returning_memory", in->heap.trimmed);
		json_object_object_add(heap, "longest_trim_ms",
					json_object_new_double(in->heap.longest_trim_ns / 1e6));
		add_u64(heap, "readings", in->heap.readings);
		json_object_object_add(heap, "age_ms", json_object_new_double(in->heap_age_ns / 1e6));
		json_object_object_add(o, "heap", heap);
	}
	if (in->config)
		json_object_object_add(o, "config", json_object_get(in->config));
	json_object_object_add(o, "export", export_status(&in->exporter, in->root));
	json_object_object_add(o, "state", state_status(in));
	{
		json_object *mt = json_object_new_object();

		json_object_object_add(mt, "enabled", json_object_new_boolean(in->metrics));
		add_u64(mt, "scrapes", in->metrics_http.requests);
		add_u64(mt, "errors", in->metrics_http.errors);
		add_u64(mt, "closed_for_room", in->metrics_http.closed_for_room);
		json_object_object_add(o, "metrics", mt);
	}
	return o;
}

bool query_process_active(const struct process *p, const struct query_window *w, bool all,
			  const struct owner_filter *owners, uint64_t *ret_samples)
{
	uint64_t n = process_window_samples(p, w->first_second, w->end_second, owners);

	/* on CPU in the window, or its memory moved, or every live one */
	if (n == 0 && !(all && !p->exited) &&
	    !rss_changed(p, w->first_second * NSEC_PER_SEC, w->end_second * NSEC_PER_SEC, owners))
		return false;
	*ret_samples = n;
	return true;
}

void query_rss_trend(const struct process *p, const struct query_window *w,
		     const struct owner_filter *owners, struct rss_trend *ret)
{
	/* 1 s windows: at most a point a second, and one each side */
	struct rss_point pts[QUERY_MAX_TREND_SECONDS + 2];
	uint64_t from = w->first_second * NSEC_PER_SEC;

	/* not across an exec: before it, the RSS was of the old image, and
	 * so may be the last reading of the 1 s window it fell in */
	if (p->exec_ns && p->exec_ns + NSEC_PER_SEC > from)
		from = p->exec_ns + NSEC_PER_SEC;
	rss_trend(pts, rss_timeline(p, from, w->end_second * NSEC_PER_SEC, owners, pts,
				    ELEMENTSOF(pts)), ret);
}

void query_window_last(uint64_t now_ns, unsigned interval, uint64_t start_ns,
		       struct query_window *ret)
{
	uint64_t end_second = now_ns / NSEC_PER_SEC;
	uint64_t first_second = end_second - MIN(interval, end_second);
	double covered = interval;

	/* The window is the last `interval` whole seconds: samples are counted
	 * per second of their timestamp, and a whole second has a known length
	 * (the current one does not, and would make short windows noisy).  In
	 * the daemon's first seconds it is the time since the start. */
	if (first_second * NSEC_PER_SEC < start_ns) {
		if (end_second * NSEC_PER_SEC > start_ns) {
			covered = (double)(end_second * NSEC_PER_SEC - start_ns) / NSEC_PER_SEC;
		} else {
			/* not one whole second yet: take the partial one */
			end_second++;
			covered = (double)(now_ns - start_ns) / NSEC_PER_SEC;
		}
	}
	*ret = (struct query_window){ first_second, end_second, MAX(covered, 1e-3) };
}

const char *const query_sort_names[QUERY_SORTS] = { "cpu", "rss", "peak", "growth" };

struct list_ctx {
	const struct query_list_opts *o;
	struct query_process_row *rows;
	size_t n, cap;
	int error;
};

static void collect_process(struct process *p, void *userdata)
{
	struct list_ctx *l = userdata;
	const struct query_list_opts *o = l->o;
	struct owner_filter owners = daemon_peer_owners(o->peer);
	struct query_process_row *row;
	uint64_t n;

	/* another user's process is absent, not hidden */
	if (l->error || !auth_may_see(o->peer, p->owner_uid) ||
	    (o->takes && !o->takes(o->userdata, p)) || !query_process_active(p, o->window, o->all, &owners, &n))
		return;
	if (array_grow((void **)&l->rows, &l->cap, l->n + 1, sizeof(*l->rows), 64) < 0) {
		l->error = -ENOMEM;
		return;
	}
	row = &l->rows[l->n++];
	*row = (struct query_process_row){ .p = p, .samples = n, .rss_bytes = process_rss_bytes(p),
					   .peak_rss_bytes = process_peak_rss_bytes(p) };
	switch (o->sort) {
	case QUERY_SORT_CPU:
	case QUERY_SORTS:
		row->key = (double)n;
		break;
	case QUERY_SORT_RSS:
		row->key = (double)row->rss_bytes;
		break;
	case QUERY_SORT_PEAK:
		row->key = (double)row->peak_rss_bytes;
		break;
	case QUERY_SORT_GROWTH:
		query_rss_trend(p, o->growth, &owners, &row->trend);
		row->trend_known = true;
		row->key = row->trend.bytes_per_second;
		break;
	}
}

static int row_cmp(const void *x, const void *y)
{
	const struct query_process_row *a = x, *b = y;

	if (a->key != b->key)
		return a->key < b->key ? 1 : -1;
	if (a->samples != b->samples)
		return a->samples < b->samples ? 1 : -1;
	return a->p->pid < b->p->pid ? -1 : a->p->pid > b->p->pid;
}

int query_list_processes(struct aggregator *a, const struct query_list_opts *o,
			 struct query_process_row **ret, size_t *ret_n)
{
	struct list_ctx l = { .o = o };

	aggregator_foreach_process(a, collect_process, &l);
	if (l.error < 0) {
		free(l.rows);
		return l.error;
	}
	qsort_safe(l.rows, l.n, sizeof(*l.rows), row_cmp);
	*ret = l.rows;
	*ret_n = l.n;
	return 0;
}

void query_write_process_fields(struct jsonw *w, const struct query_list_opts *o,
				struct query_process_row *row)
{
	const struct process *p = row->p;
	double possible = o->frequency_hz * o->window->seconds;

	if (!row->trend_known) {
		struct owner_filter owners = daemon_peer_owners(o->peer);

		query_rss_trend(p, o->growth, &owners, &row->trend);
		row->trend_known = true;
	}
	jsonw_kv_u64(w, "pid", p->pid);
	jsonw_kv_u64(w, "ns_pid", p->ns_pid);
	jsonw_kv_u64(w, "start_time_ns", p->start_time_ns);
	jsonw_kv_string(w, "comm", p->comm);
	if (p->cgroup) {
		const char *unit = procfs_cgroup_unit(p->cgroup);

		jsonw_kv_string(w, "cgroup", p->cgroup);
		if (unit) {
			jsonw_key(w, "unit");
			jsonw_string_len(w, unit, strcspn(unit, "/"));
		}
	}
	if (p->runtime[0])
		jsonw_kv_string(w, "runtime", p->runtime);
	jsonw_kv_bool(w, "exited", p->exited);
	jsonw_kv_u64(w, "samples", row->samples);
	jsonw_kv_double(w, "cpu_percent", possible > 0 ? 100.0 * (double)row->samples / possible : 0);
	jsonw_kv_u64(w, "rss_bytes", row->rss_bytes);
	jsonw_kv_u64(w, "peak_rss_bytes", row->peak_rss_bytes);
	jsonw_kv_double(w, "rss_growth_bytes_per_second", row->trend.bytes_per_second);
	jsonw_kv_bool(w, "growing", row->trend.growing);
}

int query_ps(struct jsonw *w, struct aggregator *a, const struct perfd_peer *peer,
	     uint64_t now_ns, unsigned interval, bool all, uint64_t start_ns, unsigned frequency_hz)
{
	struct query_window win;
	/* ps's trends are over its interval, and it sorts by CPU */
	struct query_list_opts o = { .peer = peer, .window = &win, .growth = &win, .all = all,
				     .sort = QUERY_SORT_CPU, .frequency_hz = frequency_hz };
	_cleanup_free_ struct query_process_row *rows = NULL;
	size_t n;
	int r;

	query_window_last(now_ns, interval, start_ns, &win);
	r = query_list_processes(a, &o, &rows, &n);
	if (r < 0)
		return r;
	jsonw_kv_double(w, "interval_seconds", win.seconds);
	jsonw_key(w, "processes");
	jsonw_array_begin(w);
	for (size_t i = 0; i < n; i++) {
		const struct process *p = rows[i].p;

		jsonw_object_begin(w);
		query_write_process_fields(w, &o, &rows[i]);
		jsonw_kv_u64(w, "rss_anon_bytes", p->rss_pages[PERFD_RSS_ANON] * p->page_size);
		jsonw_kv_u64(w, "rss_file_bytes", p->rss_pages[PERFD_RSS_FILE] * p->page_size);
		jsonw_kv_u64(w, "rss_shmem_bytes", p->rss_pages[PERFD_RSS_SHMEM] * p->page_size);
		/* all of them only to whom every owner's are shown */
		jsonw_kv_u64(w, "total_samples", peer->privileged ? p->total_samples : p->owner_samples);
		jsonw_object_end(w);
	}
	jsonw_array_end(w);
	return 0;
}
