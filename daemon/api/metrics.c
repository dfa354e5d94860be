/* SPDX-License-Identifier: MIT */
/* metrics.c - see metrics.h for the design. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "api/metrics.h"
#include "perfd/macro.h"

enum metric_type { COUNTER, GAUGE };

/* How the figure at path becomes series. */
enum metric_shape {
	ONE,     /* a number (or a boolean, as 0/1) */
	MEMBERS, /* an object of numbers: a series per member, label = its name */
	ELEMENTS, /* an array of objects: a series per element, label = its "name",
		   * value = its member `field` */
	INFO,    /* a string: one series valued 1, label = the string */
	LIST,    /* an array of objects: a series valued 1 per element, label = its `field` */
};

struct metric {
	const char *name; /* after "perfd_" */
	enum metric_type type;
	enum metric_shape shape;
	const char *path;  /* dotted, in the status answer */
	const char *label; /* MEMBERS, ELEMENTS, INFO, LIST */
	const char *field; /* ELEMENTS: the value's member; LIST: the label's */
	const char *help;
};

#define N(n, t, p, h) { n, t, ONE, p, NULL, NULL, h }
#define BY(n, t, p, l, h) { n, t, MEMBERS, p, l, NULL, h }
#define EACH(n, t, p, l, f, h) { n, t, ELEMENTS, p, l, f, h }

static const struct metric metrics[] = {
	{ "build_info", GAUGE, INFO, "daemon_version", "version", NULL, "perfd's version, valued 1" },
	N("uptime_seconds", GAUGE, "uptime_seconds", "Seconds since perfd started"),
	N("sampling_frequency_hertz", GAUGE, "frequency_hz", "Samples per second per CPU"),
	N("cpus", GAUGE, "cpus", "CPUs sampled"),
	N("resident_memory_bytes", GAUGE, "daemon_rss_bytes", "perfd's resident memory"),
	N("clients", GAUGE, "clients", "Clients connected to the socket"),
	N("snapshots", GAUGE, "snapshots", "Live snapshots running"),
	N("accept_backoffs_total", COUNTER, "accept_backoffs",
	  "Pauses in accepting clients after running out of file descriptors"),

	{ "bpf_tier_info", GAUGE, INFO, "bpf.tier", "tier", NULL,
	  "The features the BPF programs were loaded with, valued 1" },
	{ "bpf_feature_lost", GAUGE, LIST, "bpf.lost", "feature", "feature",
	  "Features this kernel or its verifier refused, valued 1" },
	EACH("bpf_program_verified_instructions", GAUGE, "bpf.programs", "program", "verified_insns",
	     "Instructions the verifier processed for each loaded BPF program"),
	N("ringbuf_bytes", GAUGE, "ringbuf_bytes", "Size of the BPF ring buffer"),

	N("samples_taken_total", COUNTER, "samples.taken", "CPU samples taken by the BPF program"),
	N("samples_idle_total", COUNTER, "samples.idle", "Samples of idle CPUs"),
	N("samples_received_total", COUNTER, "samples.received", "Samples the store received"),
	BY("samples_lost_total", COUNTER, "samples.lost", "cause",
	   "Samples lost, by cause (ring buffer full, drain queue full, evicted from the store, "
	   "undelivered)"),
	BY("samples_truncated_total", COUNTER, "samples.truncated", "where",
	   "Samples whose stack was cut short, by where"),
	N("memory_samples_total", COUNTER, "memory.samples", "Memory-growth samples"),
	N("memory_samples_lost_total", COUNTER, "memory.samples_lost", "Memory-growth samples lost"),
	N("rss_updates_lost_total", COUNTER, "memory.rss_updates_lost", "RSS updates lost"),
	N("exit_events_lost_total", COUNTER, "exit_events.lost", "Process exit, exec and fork events lost"),
	N("offcpu_blocks_total", COUNTER, "offcpu.blocks", "Times a user task left its CPU"),
	N("offcpu_blocks_sampled_total", COUNTER, "offcpu.blocks_sampled",
	  "Off-CPU blocks whose stack was taken"),
	N("offcpu_lost_total", COUNTER, "offcpu.lost", "Off-CPU records lost: no room in the ring"),
	N("offcpu_stacks_dropped_total", COUNTER, "offcpu.stacks_dropped",
	  "Off-CPU stacks dropped: too many waiting for their ends"),

	N("processes", GAUGE, "processes.tracked", "Processes in the store"),
	N("processes_evicted_total", COUNTER, "processes.evicted",
	  "Processes evicted to make room for others"),
	N("stacks", GAUGE, "stacks.interned", "Unique stacks in the store"),
	N("frames", GAUGE, "stacks.frames", "Frames in the store's stacks"),
	N("store_bytes", GAUGE, "store.memory_bytes", "Memory the profile store holds"),
	N("store_limit_bytes", GAUGE, "limits.max_memory_bytes", "The store's cap (--max-memory)"),
	N("store_windows", GAUGE, "store.windows", "Time windows held"),
	N("store_windows_evicted_total", COUNTER, "store.windows_evicted",
	  "Windows evicted before their retention ended"),
	BY("store_evictions_total", COUNTER, "store.evictions", "reason",
	   "Eviction steps, by what ran out and whose data went"),
	BY("store_values_evicted_total", COUNTER, "store.values_evicted", "kind",
	   "Sampled values evicted before their retention ended, by kind"),
	N("snapshot_bytes", GAUGE, "store.snapshot_bytes", "Memory live snapshots hold"),

	N("symbol_modules", GAUGE, "symbols.modules", "Binaries and JIT maps known"),
	N("symbol_modules_refused_total", COUNTER, "symbols.modules_refused",
	  "Binaries refused a module id (table full)"),
	N("symbol_module_fds", GAUGE, "symbols.module_fds_open", "Descriptors of binaries held open"),
	N("symbol_module_fds_closing", GAUGE, "symbols.module_fds_closing",
	  "Descriptors of binaries being closed off the loop"),
	N("symbol_lookups_total", COUNTER, "symbols.lookups", "Addresses symbolized"),
	N("symbol_cache_hits_total", COUNTER, "symbols.cache_hits", "Symbol table cache hits"),
	N("symbol_cache_misses_total", COUNTER, "symbols.cache_misses", "Symbol table cache misses"),
	N("symbol_cache_evictions_total", COUNTER, "symbols.cache_evictions",
	  "Symbol tables evicted from the cache"),
	N("symbol_cache_bytes", GAUGE, "symbols.cache_bytes", "Memory the symbol cache holds"),
	N("symbol_cache_limit_bytes", GAUGE, "symbols.cache_limit_bytes", "The symbol cache's cap"),
	N("symbol_tables_loading", GAUGE, "symbols.symtab_loads_pending",
	  "Symbol tables being built off the loop"),
	N("line_tables_loading", GAUGE, "symbols.line_loads_pending",
	  "DWARF line tables being opened or indexed off the loop"),
	N("line_units_refused_total", COUNTER, "symbols.line_units_refused",
	  "Compile units not indexed: past their time, size or memory cap"),
	N("debug_files_refused_total", COUNTER, "symbols.debug_files_refused",
	  "Debug files refused (too large, or not the binary's)"),

	N("unwind_tables", GAUGE, "unwind.tables", "Unwind tables loaded in the kernel"),
	N("unwind_tables_built_total", COUNTER, "unwind.tables_built", "Unwind tables built"),
	N("unwind_tables_failed_total", COUNTER, "unwind.tables_failed", "Unwind table builds failed"),
	N("unwind_tables_abandoned_total", COUNTER, "unwind.tables_abandoned",
	  "Unwind table builds abandoned past their time cap"),
	N("unwind_tables_refused_total", COUNTER, "unwind.tables_refused",
	  "Unwind tables refused for want of room"),
	N("unwind_stacks_with_tables_total", COUNTER, "unwind.stacks_with_tables",
	  "Stacks unwound with tables"),
	N("unwind_stacks_truncated_total", COUNTER, "unwind.stacks_truncated",
	  "Stacks the table unwinder cut short"),
	N("unwind_table_rows", GAUGE, "unwind.rows_used", "Unwind table rows in use"),
	N("unwind_table_rows_capacity", GAUGE, "unwind.rows_capacity",
	  "Unwind table rows the kernel map holds"),

	N("python_processes", GAUGE, "python.processes", "CPython processes recognized"),
	N("python_detections_pending", GAUGE, "python.detections_pending",
	  "Processes being looked at for CPython off the loop"),
	N("python_reads_pending", GAUGE, "python.reads_pending",
	  "Python processes whose memory is being read off the loop"),
	N("python_reads_deferred", GAUGE, "python.reads_deferred",
	  "Python processes whose memory read waits for their user's other reads"),
	N("python_frames_not_read_total", COUNTER, "python.frames_not_read",
	  "Python frames stored before their code object could be read"),
	N("python_samples_total", COUNTER, "python.samples", "Samples with Python frames walked"),
	N("python_samples_truncated_total", COUNTER, "python.samples_truncated",
	  "Samples whose Python stack was cut short"),

	N("drain_records_total", COUNTER, "drain.records", "Records read from the ring buffer"),
	N("drain_dropped_total", COUNTER, "drain.dropped",
	  "Records dropped because the loop fell behind the drain thread"),
	N("drain_queued_bytes", GAUGE, "drain.queued_bytes", "Records waiting for the loop"),
	N("loop_slow_turns_total", COUNTER, "loop.slow_turns",
	  "Turns of the event loop longer than loop.slow_turn_ms"),

	N("export_intervals_total", COUNTER, "export.intervals", "Export intervals completed"),
	N("export_encode_errors_total", COUNTER, "export.encode_errors",
	  "Profiles that failed to encode for export"),
	N("export_waits_for_names_total", COUNTER, "export.waits_for_names",
	  "Export intervals tried again because symbol tables were being built"),
	EACH("export_sent_total", COUNTER, "export.exporters", "sink", "sent",
	     "Profiles sent, per exporter"),
	EACH("export_sent_bytes_total", COUNTER, "export.exporters", "sink", "sent_bytes",
	     "Bytes sent, per exporter"),
	EACH("export_failed_total", COUNTER, "export.exporters", "sink", "failed",
	     "Failed sends, per exporter"),
	EACH("export_dropped_total", COUNTER, "export.exporters", "sink", "dropped",
	     "Profiles dropped (queue full or shutdown), per exporter"),
	EACH("export_retries_total", COUNTER, "export.exporters", "sink", "retries",
	     "Sends retried, per exporter"),
	EACH("export_queued_bytes", GAUGE, "export.exporters", "sink", "queued_bytes",
	     "Bytes waiting to be sent, per exporter"),

	N("metrics_scrapes_total", COUNTER, "metrics.scrapes", "Answers of /metrics before this one"),
	N("metrics_errors_total", COUNTER, "metrics.errors",
	  "Requests to the metrics port answered with an error or timed out"),

	N("state_disk_bytes", GAUGE, "state.disk_bytes", "Disk the state directory takes"),
	N("state_segments", GAUGE, "state.segments", "Segments in the state directory"),
	N("state_flushes_total", COUNTER, "state.flushes", "Flushes of the store to disk"),
	N("state_write_errors_total", COUNTER, "state.write_errors", "Failed writes to the state directory"),
	N("state_windows_unwritten_total", COUNTER, "state.windows_unwritten",
	  "Windows that could not be written to disk"),
};

/* The value at a dotted path; NULL when the answer has none. */
static json_object *lookup(json_object *o, const char *path)
{
	char key[64];

	while (o && *path) {
		size_t n = strcspn(path, ".");

		if (n >= sizeof(key))
			return NULL;
		memcpy(key, path, n);
		key[n] = '\0';
		if (!json_object_object_get_ex(o, key, &o))
			return NULL;
		path += n + (path[n] == '.');
	}
	return o;
}

/* A label value as the format wants it: \\, \" and \n escaped. */
static void put_label(FILE *f, const char *label, const char *value)
{
	fprintf(f, "{%s=\"", label);
	for (const char *p = value; *p; p++) {
		if (*p == '\\' || *p == '"')
			fputc('\\', f);
		if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputs("\"}", f);
}

static bool is_number(json_object *v)
{
	return json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double) ||
	       json_object_is_type(v, json_type_boolean);
}

static void put_name(FILE *f, const char *name, const char *label, const char *label_value)
{
	fprintf(f, "perfd_%s", name);
	if (label)
		put_label(f, label, label_value);
}

/* One series; a value that is not a number is no series. */
static void put_series(FILE *f, const char *name, const char *label, const char *label_value,
		       json_object *v)
{
	if (!is_number(v))
		return;
	put_name(f, name, label, label_value);
	if (json_object_is_type(v, json_type_double))
		fprintf(f, " %.15g\n", json_object_get_double(v));
	else if (json_object_is_type(v, json_type_boolean))
		fprintf(f, " %d\n", json_object_get_boolean(v));
	else
		fprintf(f, " %" PRIu64 "\n", json_object_get_uint64(v));
}

/* A series valued 1 that says what is, by its label. */
static void put_info(FILE *f, const char *name, const char *label, const char *label_value)
{
	put_name(f, name, label, label_value);
	fputs(" 1\n", f);
}

static void put_metric(FILE *f, const struct metric *m, json_object *v)
{
	fprintf(f, "# HELP perfd_%s %s\n# TYPE perfd_%s %s\n", m->name, m->help, m->name,
		m->type == COUNTER ? "counter" : "gauge");
	switch (m->shape) {
	case ONE:
		put_series(f, m->name, NULL, NULL, v);
		break;
	case MEMBERS: {
		json_object_object_foreach(v, key, member)
			put_series(f, m->name, m->label, key, member);
		break;
	}
	case INFO:
		put_info(f, m->name, m->label, json_object_get_string(v));
		break;
	case ELEMENTS:
	case LIST:
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			json_object *e = json_object_array_get_idx(v, i), *name, *value;

			if (m->shape == LIST) {
				if (json_object_object_get_ex(e, m->field, &name))
					put_info(f, m->name, m->label, json_object_get_string(name));
			} else if (json_object_object_get_ex(e, "name", &name) &&
				   json_object_object_get_ex(e, m->field, &value)) {
				put_series(f, m->name, m->label, json_object_get_string(name), value);
			}
		}
		break;
	}
}

/* Whether the figure has the shape the row expects: a row whose figure
 * is missing or of another type is left out whole. */
static bool has_shape(const struct metric *m, json_object *v)
{
	switch (m->shape) {
	case ONE: return is_number(v);
	case MEMBERS: return json_object_is_type(v, json_type_object);
	case INFO: return json_object_is_type(v, json_type_string);
	case ELEMENTS:
	case LIST: return json_object_is_type(v, json_type_array);
	}
	return false;
}

int metrics_render(const char *status_json, size_t status_len, char **ret, size_t *len)
{
	json_tokener *tok = json_tokener_new();
	json_object *status;
	char *text = NULL;
	size_t n = 0;
	FILE *f;

	if (!tok)
		return -ENOMEM;
	status = status_len <= INT_MAX ? json_tokener_parse_ex(tok, status_json, (int)status_len) : NULL;
	json_tokener_free(tok);
	if (!status)
		return -EINVAL; /* the writer's own output: never, short of a bug */
	f = open_memstream(&text, &n);
	if (!f) {
		json_object_put(status);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ELEMENTSOF(metrics); i++) {
		json_object *v = lookup(status, metrics[i].path);

		if (has_shape(&metrics[i], v))
			put_metric(f, &metrics[i], v);
	}
	json_object_put(status);
	if (fclose(f) != 0) {
		free(text);
		return -ENOMEM;
	}
	*ret = text;
	*len = n;
	return 0;
}
