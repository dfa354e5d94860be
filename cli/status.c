/* SPDX-License-Identifier: MIT */
/*
 * status.c - `perfctl status`: the daemon's health at a glance.
 *
 * Design: --json prints perfd's whole answer unchanged ({"version":1,
 * "ok":true, ...result}), so scripts see every counter, including ones
 * added after this perfctl was written.  Human output picks the fields a
 * person checks first (is it sampling, is it losing samples, is it near its
 * limits) and prints "-" for any field the daemon did not send.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "call.h"
#include "format.h"
#include "output.h"
#include "perfctl.h"

/* One line per exporter: where to, its state, its queue and losses. */
static void print_export(struct json_object *r)
{
	struct json_object *x = json_object_object_get(r, "export"), *list;
	char a[CTL_COUNT_MAX], b[CTL_COUNT_MAX];
	double ms = 0;

	if (!json_object_object_get_ex(x, "exporters", &list) ||
	    !json_object_is_type(list, json_type_array))
		return;
	if (!json_object_get_boolean(json_object_object_get(x, "enabled"))) {
		printf("Export:       off (no output-dir, push-url or otlp-url)\n");
		return;
	}
	(void)ctl_json_double(r, "export.last_encode_ms", &ms);
	printf("Export:       every %s s, %s profiles encoded, last interval in %.1f ms\n",
	       ctl_json_count(r, "export.interval_seconds", a), ctl_json_count(r, "export.profiles", b), ms);
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		struct json_object *e = json_object_array_get_idx(list, i);
		_cleanup_free_ char *name = ctl_json_string_escaped(e, "name"),
				    *target = ctl_json_string_escaped(e, "target"),
				    *state = ctl_json_string_escaped(e, "state"), *error = NULL;
		char c[CTL_COUNT_MAX], d[CTL_COUNT_MAX], f[CTL_COUNT_MAX];
		double sent_bytes = 0;

		if (json_object_is_type(json_object_object_get(e, "last_error"), json_type_string))
			error = ctl_json_string_escaped(e, "last_error");
		(void)ctl_json_double(e, "sent_bytes", &sent_bytes);
		printf("  %-11s %s: %s; sent %s (%.1f KiB), queued %s, dropped %s, failed %s, retries %s\n",
		       name ? name : "-", target ? target : "-", state ? state : "-",
		       ctl_json_count(e, "sent", a), sent_bytes / 1024.0, ctl_json_count(e, "queued", b),
		       ctl_json_count(e, "dropped", c), ctl_json_count(e, "failed", d),
		       ctl_json_count(e, "retries", f));
		if (error)
			printf("  %-11s last error: %s\n", "", error);
	}
}

/* The effective configuration, one option a line. */
static void print_config(struct json_object *r)
{
	struct json_object *cfg = json_object_object_get(r, "config");
	bool has_file = json_object_is_type(json_object_object_get(cfg, "config_file"), json_type_string);
	_cleanup_free_ char *file = has_file ? ctl_json_string_escaped(r, "config.config_file") : NULL;

	if (!cfg || !json_object_is_type(cfg, json_type_object))
		return;
	printf("Configuration: %s\n", file ? file : "no file, defaults and flags");
	json_object_object_foreach(cfg, key, value) {
		_cleanup_free_ char *text = NULL;
		const char *s;

		if (!strcmp(key, "config_file"))
			continue;
		s = value ? json_object_to_json_string_ext(value, JSON_C_TO_STRING_PLAIN) : "-";
		if (value && json_object_is_type(value, json_type_string))
			s = json_object_get_string(value);
		text = ctl_escape(s, strlen(s));
		printf("  %-22s %s\n", key, text ? text : "-");
	}
}

/* The tier the BPF programs run in, and each feature lost with why. */
static void print_bpf(struct json_object *r)
{
	_cleanup_free_ char *tier = ctl_json_string_escaped(r, "bpf.tier");
	struct json_object *lost;

	if (!tier)
		return;
	printf("BPF:          %s\n", tier);
	if (!json_object_object_get_ex(json_object_object_get(r, "bpf"), "lost", &lost) ||
	    !json_object_is_type(lost, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(lost); i++) {
		struct json_object *e = json_object_array_get_idx(lost, i);
		_cleanup_free_ char *feature = ctl_json_string_escaped(e, "feature"),
				    *reason = ctl_json_string_escaped(e, "reason");

		printf("  lost %s: %s\n", feature ? feature : "-", reason ? reason : "-");
	}
}

static void print_status(struct json_object *r)
{
	_cleanup_free_ char *version = ctl_json_string_escaped(r, "daemon_version");
	char a[CTL_COUNT_MAX], b[CTL_COUNT_MAX], c[CTL_COUNT_MAX], lost_buf[CTL_COUNT_MAX];
	char up[CTL_DURATION_MAX];
	double uptime = -1, rss;
	int64_t hz;

	(void)ctl_json_double(r, "uptime_seconds", &uptime);
	printf("perfd %s (protocol %s), pid %s, up %s\n", version ? version : "-",
	       ctl_json_count(r, "protocol_version", a), ctl_json_count(r, "pid", b),
	       ctl_format_duration(uptime, up));

	if (ctl_json_int(r, "frequency_hz", &hz))
		printf("Sampling:     %" PRId64 " Hz on %s CPUs (period %s ns)\n", hz,
		       ctl_json_count(r, "cpus", a), ctl_json_count(r, "sample_period_ns", b));
	else
		printf("Sampling:     - Hz on %s CPUs\n", ctl_json_count(r, "cpus", a));

	print_bpf(r);
	printf("Samples:      received %s, profiled %s, idle %s\n",
	       ctl_json_count(r, "samples.received", a), ctl_json_count(r, "samples.profiled", b),
	       ctl_json_count(r, "samples.idle", c));
	printf("              idle in ticks the kernel did not deliver %s\n",
	       ctl_json_count(r, "samples.idle_undelivered", a));
	printf("              due before a context switch %s (charged to the task switched out)\n",
	       ctl_json_count(r, "samples.context_switch", a));
	printf("Lost:         %s total (ring buffer full %s, evicted %s, not delivered by the kernel %s)\n",
	       ctl_json_count(r, "samples.lost_total", a),
	       ctl_json_count(r, "samples.lost.ringbuf_full", b),
	       ctl_json_count(r, "samples.lost.evicted", c),
	       ctl_json_count(r, "samples.lost.undelivered", lost_buf));
	printf("Truncated:    kernel stack %s, user stack %s, stack limit %s\n",
	       ctl_json_count(r, "samples.truncated.kernel_stack", a),
	       ctl_json_count(r, "samples.truncated.user_stack", b),
	       ctl_json_count(r, "samples.truncated.stack_limit", c));
	printf("Exit events:  received %s, lost %s\n",
	       ctl_json_count(r, "exit_events.received", a),
	       ctl_json_count(r, "exit_events.lost", b));
	printf("Processes:    tracked %s, exited %s, evicted %s\n",
	       ctl_json_count(r, "processes.tracked", a), ctl_json_count(r, "processes.exited", b),
	       ctl_json_count(r, "processes.evicted", c));
	printf("Interned:     stacks %s, frames %s, modules %s\n",
	       ctl_json_count(r, "stacks.interned", a), ctl_json_count(r, "stacks.frames", b),
	       ctl_json_count(r, "stacks.modules", c));
	{
		_cleanup_free_ char *method = ctl_json_string_escaped(r, "unwind.method");
		char d[CTL_COUNT_MAX], e[CTL_COUNT_MAX], f[CTL_COUNT_MAX], g[CTL_COUNT_MAX];
		double table_bytes;

		printf("Unwinding:    %s; %s stacks with tables, %s truncated, "
		       "%s frames by frame pointer; %s before tables not reaching an entry\n",
		       method ? method : "-", ctl_json_count(r, "unwind.stacks_with_tables", a),
		       ctl_json_count(r, "unwind.stacks_truncated", b),
		       ctl_json_count(r, "unwind.frames_by_frame_pointer", c),
		       ctl_json_count(r, "unwind.stacks_unrooted_before_tables", d));
		if (ctl_json_double(r, "unwind.table_bytes", &table_bytes))
			printf("Tables:       %s binaries (%s without CFI, %s abandoned past the "
			       "time cap, %s past the size cap), %s processes, %.1f MiB, rows %s of %s\n",
			       ctl_json_count(r, "unwind.tables", a),
			       ctl_json_count(r, "unwind.tables_failed", b),
			       ctl_json_count(r, "unwind.tables_abandoned", f),
			       ctl_json_count(r, "unwind.tables_oversized", g),
			       ctl_json_count(r, "unwind.processes", c), table_bytes / (1024.0 * 1024.0),
			       ctl_json_count(r, "unwind.rows_used", d),
			       ctl_json_count(r, "unwind.rows_capacity", e));
	}
	{
		char d[CTL_COUNT_MAX], e_buf[CTL_COUNT_MAX], f_buf[CTL_COUNT_MAX];

		printf("Python:       %s processes (%s unsupported), %s samples (%s without a "
		       "thread state, %s truncated), %s functions\n",
		       ctl_json_count(r, "python.processes", a),
		       ctl_json_count(r, "python.unsupported", b),
		       ctl_json_count(r, "python.samples", c),
		       ctl_json_count(r, "python.samples_without_thread_state", d),
		       ctl_json_count(r, "python.samples_truncated", e_buf),
		       ctl_json_count(r, "python.functions", f_buf));
	}
	{
		char d[CTL_COUNT_MAX], e[CTL_COUNT_MAX], f[CTL_COUNT_MAX], g[CTL_COUNT_MAX],
			h[CTL_COUNT_MAX];
		double cache = 0, limit = 0;

		(void)ctl_json_double(r, "symbols.cache_bytes", &cache);
		(void)ctl_json_double(r, "symbols.cache_limit_bytes", &limit);
		printf("Symbols:      cache %.1f of %.0f MiB, hits %s, misses %s, evictions %s\n",
		       cache / (1024.0 * 1024.0), limit / (1024.0 * 1024.0),
		       ctl_json_count(r, "symbols.cache_hits", a),
		       ctl_json_count(r, "symbols.cache_misses", b),
		       ctl_json_count(r, "symbols.cache_evictions", c));
		printf("Modules:      %s of %s (%s refused, %s released), descriptors %s of %s "
		       "(%s closed, %s reopened)\n",
		       ctl_json_count(r, "symbols.modules", a),
		       ctl_json_count(r, "limits.max_modules", b),
		       ctl_json_count(r, "symbols.modules_refused", c),
		       ctl_json_count(r, "symbols.modules_released", d),
		       ctl_json_count(r, "symbols.module_fds_open", e),
		       ctl_json_count(r, "limits.max_module_fds", f),
		       ctl_json_count(r, "symbols.module_fds_evicted", g),
		       ctl_json_count(r, "symbols.module_fds_reopened", h));
	}
	printf("Limits:       processes %s, stacks %s, frames %s\n",
	       ctl_json_count(r, "limits.max_processes", a),
	       ctl_json_count(r, "limits.max_stacks", b),
	       ctl_json_count(r, "limits.max_frames", c));
	if (ctl_json_double(r, "daemon_rss_bytes", &rss)) {
		double in_use, free_bytes;

		printf("Daemon RSS:   %.1f MiB", rss / (1024.0 * 1024.0));
		if (ctl_json_double(r, "heap.in_use_bytes", &in_use) &&
		    ctl_json_double(r, "heap.free_bytes", &free_bytes))
			printf(" (malloc: %.1f MiB in use, %.1f MiB free)", in_use / (1024.0 * 1024.0),
			       free_bytes / (1024.0 * 1024.0));
		printf("\n");
	} else
		printf("Daemon RSS:   -\n");
	print_export(r);
	print_config(r);
}

enum perfctl_exit do_status(struct ctl_env *env, int argc, char **argv)
{
	static const struct option options[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 'S' },
		{}
	};
	_cleanup_(json_object_putp) struct json_object *req = NULL, *resp = NULL;
	enum perfctl_exit rc;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
		switch (c) {
		default:
			if (ctl_common_option(env, "status", c, argv) < 0)
				return PERFCTL_EXIT_USAGE;
			break;
		}
	}
	if (optind < argc) {
		ctl_error(env, CTL_ERR_USAGE, "status: unexpected argument '%s'", argv[optind]);
		return PERFCTL_EXIT_USAGE;
	}

	req = ctl_request_new("status");
	if (!req) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	rc = ctl_call(env, req, CTL_CALL_TIMEOUT_MS, &resp);
	if (rc != PERFCTL_EXIT_OK)
		return rc;

	if (env->json)
		return ctl_print_answer(env, resp);
	print_status(resp);
	return PERFCTL_EXIT_OK;
}
