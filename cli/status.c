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

/* A line of counts: each %s of text is the count at the next of keys, or
 * "-" when the daemon did not send it. */
struct count_line {
	const char *text;
	const char *keys[8];
};

static const struct count_line sample_lines[] = {
	{ "Samples:      received %s, profiled %s, idle %s\n",
	  { "samples.received", "samples.profiled", "samples.idle" } },
	{ "              idle in ticks the kernel did not deliver %s\n",
	  { "samples.idle_undelivered" } },
	{ "              due before a context switch %s (charged to the task switched out); "
	  "given the stack it left at %s, left without one %s\n",
	  { "samples.context_switch", "samples.context_switch_stacked",
	    "samples.context_switch_bare" } },
	{ "Lost:         %s total (ring buffer full %s, evicted %s, not delivered by the kernel %s)\n",
	  { "samples.lost_total", "samples.lost.ringbuf_full", "samples.lost.evicted",
	    "samples.lost.undelivered" } },
	{ "Truncated:    kernel stack %s, user stack %s, stack limit %s\n",
	  { "samples.truncated.kernel_stack", "samples.truncated.user_stack",
	    "samples.truncated.stack_limit" } },
	{ "Exit events:  received %s, lost %s\n", { "exit_events.received", "exit_events.lost" } },
	{ "Processes:    tracked %s, exited %s, evicted %s\n",
	  { "processes.tracked", "processes.exited", "processes.evicted" } },
	{ "Interned:     stacks %s, frames %s, modules %s\n",
	  { "stacks.interned", "stacks.frames", "stacks.modules" } },
};

/* After "Unwinding:    METHOD; " */
static const struct count_line unwind_line = {
	"%s stacks with tables, %s truncated, %s frames by frame pointer; "
	"%s before tables not reaching an entry\n",
	{ "unwind.stacks_with_tables", "unwind.stacks_truncated", "unwind.frames_by_frame_pointer",
	  "unwind.stacks_unrooted_before_tables" }
};

static const struct count_line python_line = {
	"Python:       %s processes (%s unsupported), %s samples (%s without a thread state, "
	"%s truncated), %s functions\n",
	{ "python.processes", "python.unsupported", "python.samples",
	  "python.samples_without_thread_state", "python.samples_truncated", "python.functions" }
};

static const struct count_line limit_lines[] = {
	{ "Modules:      %s of %s (%s refused, %s released), descriptors %s of %s "
	  "(%s closed, %s reopened)\n",
	  { "symbols.modules", "limits.max_modules", "symbols.modules_refused",
	    "symbols.modules_released", "symbols.module_fds_open", "limits.max_module_fds",
	    "symbols.module_fds_evicted", "symbols.module_fds_reopened" } },
	{ "Limits:       processes %s, stacks %s, frames %s\n",
	  { "limits.max_processes", "limits.max_stacks", "limits.max_frames" } },
};

static void print_count_lines(struct json_object *r, const struct count_line *lines, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *const *key = lines[i].keys;

		for (const char *p = lines[i].text; *p; p++) {
			char count[CTL_COUNT_MAX];

			if (p[0] == '%' && p[1] == 's' && *key) {
				fputs(ctl_json_count(r, *key++, count), stdout);
				p++;
			} else {
				putchar(*p);
			}
		}
	}
}

/* What unwinding does, and its tables when it has them. */
static void print_unwind(struct json_object *r)
{
	_cleanup_free_ char *method = ctl_json_string_escaped(r, "unwind.method");
	char a[CTL_COUNT_MAX], b[CTL_COUNT_MAX], c[CTL_COUNT_MAX], d[CTL_COUNT_MAX],
		e[CTL_COUNT_MAX], f[CTL_COUNT_MAX], g[CTL_COUNT_MAX];
	double table_bytes;

	printf("Unwinding:    %s; ", method ? method : "-");
	print_count_lines(r, &unwind_line, 1);
	if (ctl_json_double(r, "unwind.table_bytes", &table_bytes))
		printf("Tables:       %s binaries (%s without CFI, %s abandoned past the "
		       "time cap, %s past the size cap), %s processes, %.1f MiB, rows %s of %s\n",
		       ctl_json_count(r, "unwind.tables", a), ctl_json_count(r, "unwind.tables_failed", b),
		       ctl_json_count(r, "unwind.tables_abandoned", f),
		       ctl_json_count(r, "unwind.tables_oversized", g),
		       ctl_json_count(r, "unwind.processes", c), table_bytes / (1024.0 * 1024.0),
		       ctl_json_count(r, "unwind.rows_used", d),
		       ctl_json_count(r, "unwind.rows_capacity", e));
}

static void print_status(struct json_object *r)
{
	_cleanup_free_ char *version = ctl_json_string_escaped(r, "daemon_version");
	char a[CTL_COUNT_MAX], b[CTL_COUNT_MAX], c[CTL_COUNT_MAX];
	char up[CTL_DURATION_MAX];
	double uptime = -1, rss, cache = 0, limit = 0;
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
	print_count_lines(r, sample_lines, ELEMENTSOF(sample_lines));
	print_unwind(r);
	print_count_lines(r, &python_line, 1);
	(void)ctl_json_double(r, "symbols.cache_bytes", &cache);
	(void)ctl_json_double(r, "symbols.cache_limit_bytes", &limit);
	printf("Symbols:      cache %.1f of %.0f MiB, hits %s, misses %s, evictions %s\n",
	       cache / (1024.0 * 1024.0), limit / (1024.0 * 1024.0),
	       ctl_json_count(r, "symbols.cache_hits", a), ctl_json_count(r, "symbols.cache_misses", b),
	       ctl_json_count(r, "symbols.cache_evictions", c));
	print_count_lines(r, limit_lines, ELEMENTSOF(limit_lines));
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

/* The options, as getopt_long() takes them; also what `perfctl
 * --complete-options status` lists for the shell completion. */
static const struct option status_options[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "socket", required_argument, NULL, 'S' },
	{}
};
static const char status_shortopts[] = ":";

enum perfctl_exit do_status(struct ctl_env *env, int argc, char **argv)
{
	_cleanup_(json_object_putp) struct json_object *req = NULL, *resp = NULL;
	enum perfctl_exit rc;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, status_shortopts, status_options, NULL)) != -1) {
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

const struct ctl_command ctl_cmd_status = {
	.name = "status",
	.fn = do_status,
	.options = status_options,
	.shortopts = status_shortopts,
	.summary = "perfd's counters, losses and limits",
	.synopsis = "",
	.help = "perfd's counters: samples taken and lost (by cause), processes and stacks\n"
		"held, the store's memory, symbolization, unwinding and export, and the\n"
		"limits it runs with.\n",
};
