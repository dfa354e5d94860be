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
#include "process/mapsread.h"
#include "process/procfs.h"
#include "profile/rss.h"
#include "profile/waitclass.h"
#include "symbols/debuginfo.h"
#include "symbols/elfsym.h"
#include "symbols/perfmap.h"
#include "symbols/srcline.h"
#include "unwind/builder.h"


void query_ok_begin(struct jsonw *w)
{
	jsonw_init(w);
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "version", PERFD_PROTOCOL_VERSION);
	jsonw_kv_bool(w, "ok", true);
}

void query_verror(struct jsonw *w, const char *code, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	jsonw_init(w);
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "version", PERFD_PROTOCOL_VERSION);
	jsonw_kv_bool(w, "ok", false);
	jsonw_key(w, "error");
	jsonw_object_begin(w);
	jsonw_kv_string(w, "code", code);
	jsonw_kv_string(w, "message", msg);
	jsonw_object_end(w);
	jsonw_object_end(w);
}

void query_error(struct jsonw *w, const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	query_verror(w, code, fmt, ap);
	va_end(ap);
}

/* "key": a Unix time, or null when t is not one (0: never). */
static void kv_unix_time(struct jsonw *w, const char *key, double t)
{
	jsonw_key(w, key);
	if (t > 0)
		jsonw_double(w, t);
	else
		jsonw_null(w);
}

/* The n counters of a stats struct, each "key": its uint64_t field. */
struct counter_field {
	const char *key;
	size_t offset;
};

static void kv_counters(struct jsonw *w, const void *stats, const struct counter_field *f, size_t n)
{
	for (size_t k = 0; k < n; k++)
		jsonw_kv_u64(w, f[k].key, *(const uint64_t *)((const char *)stats + f[k].offset));
}

/* "export": the interval's figures, then one object per exporter. */
static void export_status(struct jsonw *w, const struct exporter_stats *x, bool root)
{
	static const struct counter_field counters[] = {
		{ "queued", offsetof(struct export_worker_stats, queued) },
		{ "queued_bytes", offsetof(struct export_worker_stats, queued_bytes) },
		{ "max_queued_bytes", offsetof(struct export_worker_stats, max_queued_bytes) },
		{ "sent", offsetof(struct export_worker_stats, sent) },
		{ "sent_bytes", offsetof(struct export_worker_stats, sent_bytes) },
		{ "dropped", offsetof(struct export_worker_stats, dropped) },
		{ "failed", offsetof(struct export_worker_stats, failed) },
		{ "retries", offsetof(struct export_worker_stats, retries) },
	};

	jsonw_key(w, "export");
	jsonw_object_begin(w);
	jsonw_kv_bool(w, "enabled", x->enabled);
	jsonw_kv_u64(w, "interval_seconds", x->interval_s);
	jsonw_kv_u64(w, "intervals", x->intervals);
	jsonw_kv_u64(w, "profiles", x->profiles);
	jsonw_kv_u64(w, "encode_errors", x->encode_errors);
	kv_unix_time(w, "last_export", x->last_export_unix);
	jsonw_kv_double(w, "last_encode_ms", x->last_encode_ms);
	jsonw_kv_double(w, "longest_encode_ms", x->longest_encode_ms);
	jsonw_kv_u64(w, "waits_for_names", x->waits_for_names);
	jsonw_kv_u64(w, "steps", x->steps);
	jsonw_kv_double(w, "longest_step_ms", x->longest_step_ms);
	jsonw_kv_u64(w, "encoding", x->encoding);
	jsonw_kv_u64(w, "encoding_bytes", x->encoding_bytes);
	jsonw_kv_u64(w, "max_encoding_bytes", x->max_encoding_bytes);
	jsonw_key(w, "exporters");
	jsonw_array_begin(w);
	for (size_t i = 0; i < x->n_sinks; i++) {
		const struct export_worker_stats *e = &x->sinks[i];
		char origin[sizeof(e->target)];

		jsonw_object_begin(w);
		jsonw_kv_string(w, "name", e->name);
		if (root) {
			jsonw_kv_string(w, "target", e->target);
		} else if (strstr(e->target, "://")) {
			http_describe_origin(e->target, origin, sizeof(origin));
			jsonw_kv_string(w, "target", origin);
		}
		jsonw_kv_string(w, "state", e->retrying ? "retrying" : e->last_success_unix > 0 ? "ok" : "idle");
		kv_counters(w, e, counters, ELEMENTSOF(counters));
		kv_unix_time(w, "last_success", e->last_success_unix);
		kv_unix_time(w, "last_error_time", e->last_error_unix);
		jsonw_key(w, "last_error");
		if (root && e->last_error[0])
			jsonw_string(w, e->last_error);
		else
			jsonw_null(w);
		jsonw_object_end(w);
	}
	jsonw_array_end(w);
	jsonw_object_end(w);
}

/* "state": the store on disk (state/persist.h). */
static void state_status(struct jsonw *w, const struct status_info *in)
{
	static const struct counter_field counters[] = {
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

	jsonw_key(w, "state");
	jsonw_object_begin(w);
	jsonw_kv_bool(w, "enabled", in->state);
	if (in->state) {
		kv_counters(w, &in->persist, counters, ELEMENTSOF(counters));
		jsonw_kv_u64(w, "restored_frames", in->persist.restored_frames);
		jsonw_kv_u64(w, "restored_bytes", in->persist.restored_bytes);
		jsonw_kv_double(w, "longest_flush_ms", in->persist.longest_flush_ms);
	}
	jsonw_object_end(w);
}

/* "bpf": the tier loaded, the features lost with why, and every program
 * of the object: loaded with the verifier's count, or why not. */
static void load_status(struct jsonw *w, const struct sampler_load_report *r)
{
	unsigned lost_features = load_report_lost(r);
	char name[TIER_NAME_MAX];

	jsonw_key(w, "bpf");
	jsonw_object_begin(w);
	jsonw_kv_string(w, "tier", tier_name(r->tier, name, sizeof(name)));
	jsonw_key(w, "lost");
	jsonw_array_begin(w);
	for (int i = 0; i < TIER_N_FEATURES; i++) {
		if (!(lost_features & tier_features[i]))
			continue;
		jsonw_object_begin(w);
		jsonw_kv_string(w, "feature", tier_feature_name(tier_features[i]));
		jsonw_kv_string(w, "reason", load_report_why(r, tier_features[i]));
		jsonw_object_end(w);
	}
	jsonw_array_end(w);
	jsonw_key(w, "programs");
	jsonw_array_begin(w);
	for (size_t i = 0; i < r->n_programs; i++) {
		const struct load_program *p = &r->programs[i];

		jsonw_object_begin(w);
		jsonw_kv_string(w, "name", p->name);
		jsonw_kv_bool(w, "loaded", p->loaded);
		if (p->loaded)
			jsonw_kv_u64(w, "verified_insns", p->verified_insns);
		else
			jsonw_kv_string(w, "error", p->error);
		jsonw_object_end(w);
	}
	jsonw_array_end(w);
	jsonw_object_end(w);
}

/* "samples": taken, lost by where, truncated by which stack. */
static void samples_status(struct jsonw *w, const struct status_info *in)
{
	uint64_t lost_total = in->bpf[PERFD_CNT_RINGBUF_FULL] + in->drain.dropped_samples +
			      in->agg.samples_evicted + in->bpf[PERFD_CNT_UNDELIVERED_LOST];

	jsonw_key(w, "samples");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "taken", in->bpf[PERFD_CNT_SAMPLES]);
	jsonw_kv_u64(w, "idle", in->bpf[PERFD_CNT_IDLE]);
	jsonw_kv_u64(w, "idle_undelivered", in->bpf[PERFD_CNT_UNDELIVERED_IDLE]);
	jsonw_kv_u64(w, "ticks_thinned", in->bpf[PERFD_CNT_THINNED]);
	jsonw_kv_u64(w, "ticks_clocked", in->bpf[PERFD_CNT_TICKS_CLOCKED]);
	jsonw_kv_u64(w, "context_switch", in->bpf[PERFD_CNT_SWITCHED]);
	jsonw_kv_u64(w, "context_switch_stacked", in->agg.switched_stacked);
	jsonw_kv_u64(w, "context_switch_bare", in->agg.switched_bare);
	jsonw_kv_u64(w, "received", in->agg.samples);
	jsonw_kv_u64(w, "queued", in->drain.queued_samples);
	jsonw_kv_u64(w, "profiled", in->agg.samples - MIN(in->agg.samples, in->agg.samples_evicted));
	jsonw_key(w, "lost");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "ringbuf_full", in->bpf[PERFD_CNT_RINGBUF_FULL]);
	jsonw_kv_u64(w, "queue_full", in->drain.dropped_samples);
	jsonw_kv_u64(w, "evicted", in->agg.samples_evicted);
	jsonw_kv_u64(w, "undelivered", in->bpf[PERFD_CNT_UNDELIVERED_LOST]);
	jsonw_object_end(w);
	jsonw_kv_u64(w, "lost_total", lost_total);
	jsonw_key(w, "truncated");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "kernel_stack", in->bpf[PERFD_CNT_KSTACK_ERROR]);
	jsonw_kv_u64(w, "user_stack", in->bpf[PERFD_CNT_USTACK_ERROR]);
	jsonw_kv_u64(w, "stack_limit", in->agg.stack_limit);
	jsonw_object_end(w);
	jsonw_object_end(w);

	jsonw_key(w, "memory");
	jsonw_object_begin(w);
	jsonw_kv_bool(w, "enabled", in->memory_sample_bytes > 0);
	jsonw_kv_u64(w, "sample_bytes", in->memory_sample_bytes);
	jsonw_kv_u64(w, "events", in->bpf[PERFD_CNT_MEMORY_EVENTS]);
	jsonw_kv_u64(w, "samples", in->agg.memory_samples);
	jsonw_kv_u64(w, "samples_lost", in->bpf[PERFD_CNT_MEMORY_LOST]);
	jsonw_kv_u64(w, "rss_updates", in->agg.rss_updates);
	jsonw_kv_u64(w, "rss_updates_lost", in->bpf[PERFD_CNT_RSS_LOST]);
	jsonw_object_end(w);

	/* off-CPU blocks: seen, their stacks taken, and the nanoseconds of
	 * those taken and not (bpf/offcpu.bpf.h); joined (profile/offcpu.c) */
	jsonw_key(w, "offcpu");
	jsonw_object_begin(w);
	jsonw_kv_bool(w, "enabled", in->offcpu_rate > 0);
	jsonw_kv_u64(w, "stacks_per_cpu_second", in->offcpu_rate);
	jsonw_kv_u64(w, "blocks", in->bpf[PERFD_CNT_OFFCPU_BLOCKS]);
	jsonw_kv_u64(w, "blocks_sampled", in->bpf[PERFD_CNT_OFFCPU_SAMPLED]);
	jsonw_kv_u64(w, "blocks_sampled_for_ticks", in->bpf[PERFD_CNT_OFFCPU_FOR_TICK]);
	jsonw_kv_u64(w, "sampled_ns", in->bpf[PERFD_CNT_OFFCPU_SAMPLED_NS]);
	jsonw_kv_u64(w, "skipped_ns", in->bpf[PERFD_CNT_OFFCPU_SKIPPED_NS]);
	jsonw_kv_u64(w, "lost", in->bpf[PERFD_CNT_OFFCPU_LOST]);
	jsonw_kv_u64(w, "joined", in->agg.offcpu_joined);
	jsonw_kv_u64(w, "estimated_ns", in->agg.offcpu_ns);
	jsonw_kv_u64(w, "stacks_waiting", in->agg.offcpu_waiting);
	jsonw_kv_u64(w, "stacks_replaced", in->agg.offcpu_stacks_replaced);
	jsonw_kv_u64(w, "stacks_dropped", in->agg.offcpu_stacks_dropped);
	jsonw_kv_u64(w, "ends_unmatched", in->agg.offcpu_ends_unmatched);
	jsonw_kv_u64(w, "unmatched_ns", in->agg.offcpu_unmatched_ns);
	jsonw_object_end(w);

	jsonw_key(w, "exit_events");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "received", in->agg.exit_events);
	jsonw_kv_u64(w, "lost", in->bpf[PERFD_CNT_EXIT_LOST] + in->bpf[PERFD_CNT_EXEC_LOST] +
					in->bpf[PERFD_CNT_FORK_LOST]);
	jsonw_object_end(w);
}

/* "processes", "stacks" and "store": what the store holds and let go. */
static void store_status(struct jsonw *w, const struct status_info *in)
{
	jsonw_key(w, "processes");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "tracked", in->agg.processes);
	jsonw_kv_u64(w, "exited", in->agg.processes_exited);
	jsonw_kv_u64(w, "evicted", in->agg.processes_evicted);
	jsonw_kv_u64(w, "expired", in->agg.processes_expired);
	/* maps too long for the loop, read on the lane (mapsread.h) */
	jsonw_key(w, "maps");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "reads_offloaded", in->agg.maps_reads_offloaded);
	jsonw_kv_u64(w, "reads_pending", in->agg.maps_reads_pending);
	jsonw_kv_u64(w, "truncated", in->agg.maps_truncated);
	jsonw_kv_u64(w, "samples_waited", in->agg.samples_waited_for_maps);
	jsonw_kv_u64(w, "samples_not_waiting", in->agg.samples_not_waiting);
	/* their new files identified off the loop (profile/procread.c) */
	jsonw_kv_u64(w, "file_probes", in->agg.module_probes);
	jsonw_kv_u64(w, "file_probes_pending", in->agg.module_probes_pending);
	jsonw_kv_u64(w, "file_probes_late", in->agg.module_probes_late);
	jsonw_object_end(w);
	jsonw_object_end(w);

	jsonw_key(w, "stacks");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "interned", in->agg.stacks);
	jsonw_kv_u64(w, "frames", in->agg.frames);
	jsonw_kv_u64(w, "modules", in->sym.modules);
	jsonw_kv_u64(w, "aggregation_bytes", in->agg.memory_bytes);
	jsonw_object_end(w);

	jsonw_key(w, "store");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "memory_bytes", in->agg.memory_bytes);
	jsonw_kv_u64(w, "history_bytes", in->agg.history_bytes);
	jsonw_kv_u64(w, "windows", in->agg.windows);
	jsonw_kv_u64(w, "windows_expired", in->agg.windows_expired);
	jsonw_kv_u64(w, "windows_evicted", in->agg.windows_evicted);
	jsonw_kv_u64(w, "samples_expired", in->agg.samples_expired);
	jsonw_key(w, "values_evicted");
	jsonw_object_begin(w);
	for (int k = 0; k < PROFILE_KINDS; k++)
		jsonw_kv_u64(w, kind_infos[k].name, in->agg.values_evicted[k]);
	jsonw_object_end(w);
	/* eviction steps, by what ran out and by whose data went */
	jsonw_key(w, "evictions");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "memory", in->agg.evictions_memory);
	jsonw_kv_u64(w, "process_limit", in->agg.evictions_process_limit);
	jsonw_kv_u64(w, "stack_limit", in->agg.evictions_stack_limit);
	jsonw_kv_u64(w, "admitting_owners_own", in->agg.evictions_own);
	jsonw_kv_u64(w, "heaviest_owners", in->agg.evictions_heaviest);
	jsonw_object_end(w);
	jsonw_kv_u64(w, "snapshot_bytes", in->agg.snapshot_bytes);
	jsonw_kv_u64(w, "restored_names_bytes", in->agg.restored_table_bytes);
	jsonw_key(w, "snapshot_samples_refused");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "memory_share", in->agg.snapshot_samples_refused_memory);
	jsonw_kv_u64(w, "process_share", in->agg.snapshot_samples_refused_pins);
	jsonw_object_end(w);
	jsonw_object_end(w);
}

/* "symbols": the symbolizer's modules, files, caches and lookups. */
static void symbols_status(struct jsonw *w, const struct symbolizer_stats *s)
{
	jsonw_key(w, "symbols");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "modules", s->modules);
	jsonw_kv_u64(w, "modules_refused", s->modules_refused);
	jsonw_kv_u64(w, "modules_refused_share", s->modules_refused_share);
	jsonw_kv_u64(w, "modules_released", s->modules_released);
	jsonw_kv_u64(w, "module_collections", s->collections);
	jsonw_kv_u64(w, "module_fds_open", s->fds_open);
	jsonw_kv_u64(w, "module_fds_evicted", s->fds_evicted);
	jsonw_kv_u64(w, "module_fds_reopened", s->fds_reopened);
	jsonw_kv_u64(w, "module_fds_reopen_failed", s->fds_reopen_failed);
	jsonw_kv_u64(w, "module_fds_reopening", s->fds_reopening);
	jsonw_kv_u64(w, "module_fds_closing", s->fds_closing);
	jsonw_kv_u64(w, "modules_loaded", s->modules_loaded);
	jsonw_kv_u64(w, "modules_failed", s->modules_failed);
	jsonw_kv_u64(w, "kernel_symbols", s->kernel_symbols);
	jsonw_kv_u64(w, "jit_maps_read", s->jit_maps);
	jsonw_kv_u64(w, "jit_maps_refused", s->jit_maps_refused);
	jsonw_kv_u64(w, "jit_maps_pending", s->jit_maps_pending);
	jsonw_kv_u64(w, "debug_files", s->debug_files);
	jsonw_kv_u64(w, "debug_files_refused", s->debug_files_refused);
	jsonw_kv_u64(w, "minidebuginfo", s->minidebuginfo);
	jsonw_kv_u64(w, "debug_searches_pending", s->debug_searches_pending);
	jsonw_kv_u64(w, "symtab_loads_pending", s->symtab_loads_pending);
	jsonw_kv_u64(w, "line_loads_pending", s->line_loads_pending);
	jsonw_kv_u64(w, "tables_refused", s->tables_refused);
	jsonw_kv_u64(w, "line_units_refused", s->line_units_refused);
	jsonw_kv_u64(w, "lookups", s->lookups);
	jsonw_kv_u64(w, "demangle_cache_hits", s->demangle_cache_hits);
	jsonw_kv_u64(w, "demangle_cache_misses", s->demangle_cache_misses);
	jsonw_kv_u64(w, "cache_hits", s->cache_hits);
	jsonw_kv_u64(w, "cache_misses", s->cache_misses);
	jsonw_kv_u64(w, "cache_evictions", s->cache_evictions);
	jsonw_kv_u64(w, "cache_bytes", s->cache_bytes);
	jsonw_kv_u64(w, "cache_limit_bytes", s->cache_limit);
	jsonw_kv_u64(w, "memory_bytes", s->memory_bytes);
	jsonw_object_end(w);
}

/* "unwind": the stacks BPF unwound, and the tables it used. */
static void unwind_status(struct jsonw *w, const struct status_info *in)
{
	jsonw_key(w, "unwind");
	jsonw_object_begin(w);
	jsonw_kv_string(w, "method", in->unwind_tables ? "tables" : "frame_pointers");
	jsonw_kv_u64(w, "stacks_with_tables", in->bpf[PERFD_CNT_UNWIND_DWARF]);
	jsonw_kv_u64(w, "stacks_truncated", in->bpf[PERFD_CNT_UNWIND_TRUNCATED]);
	jsonw_kv_u64(w, "stacks_pending", in->bpf[PERFD_CNT_UNWIND_PENDING]);
	jsonw_kv_u64(w, "frames_by_frame_pointer", in->bpf[PERFD_CNT_UNWIND_FP_FRAMES]);
	jsonw_kv_u64(w, "stacks_unrooted_before_tables", in->bpf[PERFD_CNT_UNWIND_FP_UNROOTED]);
	jsonw_kv_u64(w, "tables", in->unwind.tables);
	jsonw_kv_u64(w, "tables_idle", in->unwind.tables_idle);
	jsonw_kv_u64(w, "tables_evicted", in->unwind.tables_evicted);
	jsonw_kv_u64(w, "tables_built", in->unwind.tables_built);
	jsonw_kv_u64(w, "tables_building", in->unwind.tables_building);
	jsonw_kv_u64(w, "tables_failed", in->unwind.tables_failed);
	jsonw_kv_u64(w, "tables_oversized", in->unwind.tables_oversized);
	jsonw_kv_u64(w, "tables_abandoned", in->unwind.tables_abandoned);
	jsonw_kv_u64(w, "tables_refused", in->unwind.tables_refused);
	jsonw_kv_u64(w, "copy_tables", in->unwind.copy_tables);
	jsonw_kv_u64(w, "copy_templates_refused", in->unwind.copy_templates_refused);
	jsonw_kv_u64(w, "processes", in->unwind.processes);
	jsonw_kv_u64(w, "processes_refused", in->unwind.processes_refused);
	jsonw_kv_u64(w, "rows_used", in->unwind.rows_used);
	jsonw_kv_u64(w, "rows_capacity", in->unwind.rows_capacity);
	jsonw_kv_u64(w, "mappings_used", in->unwind.mappings_used);
	jsonw_kv_u64(w, "mappings_capacity", in->unwind.mappings_capacity);
	jsonw_kv_u64(w, "table_bytes", in->unwind.rows_used * sizeof(struct perfd_unwind_row));
	jsonw_kv_u64(w, "cfi_bytes_read", in->unwind.cfi_bytes);
	jsonw_kv_double(w, "build_seconds", in->unwind.build_ns / 1e9);
	jsonw_kv_double(w, "upload_seconds", in->unwind.upload_ns / 1e9);
	jsonw_kv_u64(w, "completions_cut", in->unwind.completions_cut);
	jsonw_object_end(w);
}

/* "python": the CPython reader's processes, frames and caches. */
static void python_status(struct jsonw *w, const struct status_info *in)
{
	const struct python_stats *ps = &in->python;

	jsonw_key(w, "python");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "processes", ps->processes);
	jsonw_kv_u64(w, "unsupported", ps->unsupported);
	jsonw_kv_u64(w, "detections_pending", ps->detections_pending);
	/* code objects read off the loop (pyread.h): jobs out, samples that
	 * waited for them, waits given up on, exits that went after samples
	 * waiting, frames that went in unread */
	jsonw_kv_u64(w, "reads_pending", ps->reads_pending);
	jsonw_kv_u64(w, "reads_deferred", ps->reads_deferred);
	jsonw_kv_u64(w, "samples_waited", in->agg.samples_waited_for_frames);
	jsonw_kv_u64(w, "waits_late", in->agg.frames_waits_late);
	jsonw_kv_u64(w, "exits_waited", in->agg.exits_waited);
	jsonw_kv_u64(w, "frames_not_read", ps->frames_not_read);
	jsonw_kv_u64(w, "samples", in->bpf[PERFD_CNT_PYTHON_WALKS]);
	jsonw_kv_u64(w, "samples_without_thread_state", in->bpf[PERFD_CNT_PYTHON_NO_THREAD_STATE]);
	jsonw_kv_u64(w, "samples_truncated", in->bpf[PERFD_CNT_PYTHON_TRUNCATED]);
	jsonw_kv_u64(w, "code_tags_cached", in->bpf[PERFD_CNT_PYTHON_TAGS_CACHED]);
	jsonw_kv_u64(w, "code_tags_read", in->bpf[PERFD_CNT_PYTHON_TAGS_READ]);
	jsonw_kv_u64(w, "frames", ps->frames);
	jsonw_kv_u64(w, "frames_unmatched", ps->unmatched);
	jsonw_kv_u64(w, "functions", ps->functions);
	jsonw_kv_u64(w, "code_objects", ps->code_objects);
	jsonw_kv_u64(w, "code_reads", ps->code_reads);
	jsonw_kv_u64(w, "code_read_errors", ps->code_read_errors);
	jsonw_kv_u64(w, "code_reused", ps->code_reused);
	jsonw_kv_u64(w, "cache_resets", ps->cache_resets);
	jsonw_kv_u64(w, "function_table_full", ps->function_table_full);
	jsonw_kv_u64(w, "trampoline_arenas", ps->trampoline_arenas);
	jsonw_kv_u64(w, "memory_bytes", ps->memory_bytes);
	jsonw_object_end(w);
}

/* "limits": every cap a client or a workload meets. */
static void limits_status(struct jsonw *w, const struct status_info *in)
{
	jsonw_key(w, "limits");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "max_processes", in->limits.max_processes);
	jsonw_kv_u64(w, "max_stacks", in->limits.max_stacks);
	jsonw_kv_u64(w, "max_frames", in->limits.max_frames);
	jsonw_kv_u64(w, "max_memory_bytes", in->limits.max_memory_bytes);
	jsonw_kv_u64(w, "retention_seconds", in->limits.retention_s);
	jsonw_kv_u64(w, "max_clients", LIMITS_MAX_CLIENTS);
	jsonw_kv_u64(w, "max_clients_per_uid", LIMITS_CLIENTS_PER_UID);
	jsonw_kv_u64(w, "clients_reserved_for_root", LIMITS_CLIENTS_ROOT_RESERVE);
	jsonw_kv_u64(w, "max_client_output_bytes", LIMITS_CLIENT_OUTPUT_BYTES);
	jsonw_kv_u64(w, "client_idle_timeout_seconds", in->client_idle_timeout_s);
	jsonw_kv_u64(w, "max_snapshots", LIMITS_MAX_SNAPSHOTS);
	jsonw_kv_u64(w, "max_modules", in->sym.modules_limit);
	jsonw_kv_u64(w, "max_module_fds", in->sym.fds_limit);
	jsonw_kv_u64(w, "max_unwind_builds_queued", UNWINDER_MAX_BUILDS);
	jsonw_kv_u64(w, "max_unwind_mappings_per_process", UNWINDER_MAX_PROCESS_MAPPINGS);
	jsonw_kv_u64(w, "max_snapshots_per_uid", LIMITS_SNAPSHOTS_PER_UID);
	jsonw_kv_u64(w, "snapshots_reserved_for_root", LIMITS_SNAPSHOTS_ROOT_RESERVE);
	jsonw_kv_u64(w, "max_snapshot_process_seconds_per_uid", LIMITS_SNAPSHOT_PROCESS_SECONDS);
	jsonw_kv_u64(w, "max_snapshot_bytes_per_uid",
		     in->limits.max_memory_bytes / AGG_SNAPSHOT_MEMORY_SHARE);
	jsonw_kv_u64(w, "max_snapshot_processes_per_uid",
		     MAX(in->limits.max_processes / AGG_SNAPSHOT_PIN_SHARE, (size_t)1));
	/* what perfd reads of a file or a process on a workload's behalf */
	jsonw_kv_u64(w, "max_maps_bytes", MAPSREAD_MAX_BYTES);
	jsonw_kv_u64(w, "max_symbol_table_bytes", ELFSYM_MAX_TABLE_BYTES);
	jsonw_kv_u64(w, "max_debug_file_bytes", DEBUGINFO_MAX_BYTES);
	jsonw_kv_u64(w, "max_debuglink_crc_bytes", DEBUGINFO_CRC_MAX_BYTES);
	jsonw_kv_u64(w, "max_line_table_bytes", SRCLINE_MAX_LINE_BYTES);
	jsonw_kv_u64(w, "max_perf_map_bytes", PERFMAP_MAX_BYTES);
	jsonw_kv_u64(w, "max_perf_map_entries", PERFMAP_MAX_ENTRIES);
	jsonw_kv_u64(w, "max_cfi_bytes", BUILDER_MAX_CFI_BYTES);
	jsonw_object_end(w);
}

/* "drain", "loop" and "heap": the daemon's own work and memory. */
static void loop_status(struct jsonw *w, const struct status_info *in)
{
	jsonw_key(w, "drain");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "records", in->drain.records);
	jsonw_kv_u64(w, "batches", in->drain.batches);
	jsonw_kv_u64(w, "wakeups", in->drain.wakeups);
	jsonw_kv_u64(w, "dropped", in->drain.dropped);
	jsonw_kv_double(w, "longest_consume_ms", in->drain.max_consume_ns / 1e6);
	jsonw_kv_u64(w, "queued_bytes", in->drain.queued_bytes);
	jsonw_kv_u64(w, "max_queued_bytes", in->drain.max_queued_bytes);
	jsonw_kv_u64(w, "queued_records", in->drain.queued_records);
	jsonw_kv_u64(w, "slices", in->drain.slices);
	jsonw_kv_u64(w, "slices_cut", in->drain.slices_cut);
	jsonw_kv_u64(w, "max_slice_records", in->drain.max_slice_records);
	jsonw_object_end(w);

	jsonw_key(w, "loop");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "turns", in->loop.turns);
	jsonw_kv_u64(w, "slow_turns", in->loop.slow_turns);
	jsonw_kv_double(w, "slow_turn_ms", LOOP_SLOW_TURN_NS / 1e6);
	jsonw_kv_double(w, "longest_turn_ms", in->loop.max_turn_ns / 1e6);
	/* answers' models, built in slices (api/model_slices.h) */
	jsonw_kv_u64(w, "models_built", in->models.built);
	jsonw_kv_u64(w, "models_building", in->models.building);
	jsonw_kv_u64(w, "model_builds_cancelled", in->models.cancelled);
	jsonw_kv_u64(w, "model_slices", in->models.slices);
	jsonw_kv_double(w, "longest_model_slice_ms", in->models.max_slice_ns / 1e6);
	/* their profiles and tables, written on lanes (api/encode_lane.h) */
	jsonw_kv_u64(w, "answers_written_on_lanes", in->answers.written);
	jsonw_kv_u64(w, "answers_writing", in->answers.writing);
	jsonw_kv_double(w, "longest_answer_write_ms", in->answers.longest_write_ns / 1e6);
	jsonw_object_end(w);
	jsonw_kv_u64(w, "clients", in->clients);
	jsonw_kv_u64(w, "accept_backoffs", in->accept_backoffs);
	jsonw_kv_u64(w, "snapshots", in->snapshots);
	jsonw_kv_u64(w, "daemon_rss_bytes", in->daemon_rss_bytes);

	jsonw_key(w, "heap");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "in_use_bytes", in->heap.in_use_bytes);
	jsonw_kv_u64(w, "free_bytes", in->heap.free_bytes);
	jsonw_kv_u64(w, "arena_bytes", in->heap.arena_bytes);
	jsonw_kv_u64(w, "mmapped_bytes", in->heap.mmapped_bytes);
	jsonw_kv_u64(w, "trims", in->heap.trims);
	jsonw_kv_u64(w, "trims_returning_memory", in->heap.trimmed);
	jsonw_kv_double(w, "longest_trim_ms", in->heap.longest_trim_ns / 1e6);
	jsonw_kv_u64(w, "readings", in->heap.readings);
	jsonw_kv_double(w, "age_ms", in->heap_age_ns / 1e6);
	jsonw_object_end(w);
}

int query_status(struct jsonw *w, const struct status_info *in)
{
	query_ok_begin(w);
	jsonw_kv_string(w, "daemon_version", perfd_version);
	jsonw_kv_u64(w, "protocol_version", PERFD_PROTOCOL_VERSION);
	jsonw_kv_u64(w, "pid", (uint64_t)getpid());
	jsonw_kv_double(w, "uptime_seconds", in->uptime_seconds);
	jsonw_kv_u64(w, "frequency_hz", in->frequency_hz);
	jsonw_kv_u64(w, "sample_period_ns", in->period_ns);
	jsonw_kv_string(w, "sampling", in->fixed_period ? "fixed" : "jittered");
	jsonw_kv_u64(w, "timer_period_ns", in->timer_period_ns);
	jsonw_kv_u64(w, "cpus", in->cpus);
	jsonw_kv_u64(w, "ringbuf_bytes", in->ringbuf_bytes);
	if (in->load)
		load_status(w, in->load);
	samples_status(w, in);
	store_status(w, in);
	symbols_status(w, &in->sym);
	unwind_status(w, in);
	python_status(w, in);
	limits_status(w, in);
	loop_status(w, in);
	if (in->config) {
		jsonw_key(w, "config");
		jsonw_raw(w, in->config, strlen(in->config));
	}
	export_status(w, &in->exporter, in->root);
	state_status(w, in);
	jsonw_key(w, "metrics");
	jsonw_object_begin(w);
	jsonw_kv_bool(w, "enabled", in->metrics);
	jsonw_kv_u64(w, "scrapes", in->metrics_http.requests);
	jsonw_kv_u64(w, "errors", in->metrics_http.errors);
	jsonw_kv_u64(w, "closed_for_room", in->metrics_http.closed_for_room);
	jsonw_object_end(w);
	jsonw_object_end(w);
	return jsonw_error(w);
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

/* p's off-CPU time over o->window: all of it, and by class, the most
 * first, as percent of one thread's time. */
static void write_waits(struct jsonw *w, const struct query_list_opts *o, const struct process *p)
{
	struct owner_filter owners = daemon_peer_owners(o->peer);
	uint64_t ns[WAIT_CLASSES], sum;
	double span_ns = o->window->seconds * 1e9;
	bool done[WAIT_CLASSES] = { false };

	sum = process_window_waits(o->aggregator, p, o->window->first_second, o->window->end_second,
				   &owners, ns);
	jsonw_kv_double(w, "wait_percent", span_ns > 0 ? 100.0 * (double)sum / span_ns : 0);
	jsonw_key(w, "waits");
	jsonw_object_begin(w);
	for (unsigned n = 0; n < WAIT_CLASSES; n++) {
		unsigned best = WAIT_CLASSES;

		for (unsigned c = 0; c < WAIT_CLASSES; c++)
			if (!done[c] && ns[c] && (best == WAIT_CLASSES || ns[c] > ns[best]))
				best = c;
		if (best == WAIT_CLASSES)
			break;
		done[best] = true;
		jsonw_kv_double(w, wait_class_name(best), 100.0 * (double)ns[best] / span_ns);
	}
	jsonw_object_end(w);
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
	if (o->aggregator)
		write_waits(w, o, p);
}

int query_ps(struct jsonw *w, struct aggregator *a, const struct perfd_peer *peer,
	     uint64_t now_ns, unsigned interval, bool all, uint64_t start_ns, unsigned frequency_hz)
{
	struct query_window win;
	/* ps's trends are over its interval, and it sorts by CPU */
	struct query_list_opts o = { .peer = peer, .window = &win, .growth = &win, .all = all,
				     .sort = QUERY_SORT_CPU, .frequency_hz = frequency_hz,
				     .aggregator = a };
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
