/* SPDX-License-Identifier: MIT */
/*
 * mem.c - `perfctl mem`: one process's memory, as perfd's store knows it:
 * RSS now by kind, the peak and when, the growth rate, a sparkline of the
 * RSS timeline, the code sites whose growth was sampled (self and total
 * bytes, file:line, like a line-level memory profiler's report) and what
 * built the peak.  --json prints perfd's answer as it came.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "call.h"
#include "format.h"
#include "output.h"
#include "perfctl.h"
#include "perfd/protocol.h"

#define SPARK_COLUMNS 60

/* The timeline as one line of block characters, each column the highest
 * reading of the points it covers, scaled between the lowest and highest. */
static void print_sparkline(struct json_object *timeline)
{
	static const char *const blocks[] = { "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█" };
	size_t n = json_object_is_type(timeline, json_type_array) ? json_object_array_length(timeline) : 0;
	double col[SPARK_COLUMNS] = { 0 }, lo = INFINITY, hi = 0;
	size_t cols = n < SPARK_COLUMNS ? n : SPARK_COLUMNS;
	char a[CTL_SIZE_MAX], b[CTL_SIZE_MAX];

	if (n == 0) {
		printf("Timeline:  (no readings in this range)\n");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		double v = 0;
		size_t c = i * cols / n;

		(void)ctl_json_double(json_object_array_get_idx(timeline, i), "max_bytes", &v);
		col[c] = col[c] > v ? col[c] : v;
	}
	for (size_t c = 0; c < cols; c++) {
		lo = col[c] < lo ? col[c] : lo;
		hi = col[c] > hi ? col[c] : hi;
	}
	printf("Timeline:  ");
	for (size_t c = 0; c < cols; c++)
		fputs(blocks[hi > lo ? (size_t)((col[c] - lo) / (hi - lo) * 7.999) : 0], stdout);
	printf("  %s .. %s\n", ctl_format_size((uint64_t)lo, a), ctl_format_size((uint64_t)hi, b));
}

static void print_sites(struct json_object *sites, double whole)
{
	size_t n = json_object_is_type(sites, json_type_array) ? json_object_array_length(sites) : 0;

	if (n == 0) {
		printf("  (no growth sampled)\n");
		return;
	}
	printf("  %8s %6s %8s  %s\n", "SELF", "%", "TOTAL", "SITE");
	for (size_t i = 0; i < n; i++) {
		struct json_object *s = json_object_array_get_idx(sites, i);
		_cleanup_free_ char *fn = ctl_json_string_escaped(s, "function");
		_cleanup_free_ char *file = ctl_json_path(s, "file") ? ctl_json_string_escaped(s, "file") : NULL;
		char self[CTL_SIZE_MAX], total[CTL_SIZE_MAX], where[64] = "";
		double v = 0;
		int64_t line = 0;

		(void)ctl_json_double(s, "self_bytes", &v);
		if (file) {
			const char *base = strrchr(file, '/');

			if (ctl_json_int(s, "line", &line))
				snprintf(where, sizeof(where), " (%s:%" PRId64 ")", base ? base + 1 : file, line);
			else
				snprintf(where, sizeof(where), " (%s)", base ? base + 1 : file);
		}
		printf("  %8s %6.1f %8s  %s%s\n", ctl_json_size(s, "self_bytes", self),
		       whole > 0 ? 100.0 * v / whole : 0.0, ctl_json_size(s, "total_bytes", total),
		       fn ? fn : "-", where);
	}
}

static void print_mem(struct json_object *r)
{
	_cleanup_free_ char *comm = ctl_json_string_escaped(r, "comm");
	char a[CTL_SIZE_MAX], b[CTL_SIZE_MAX], c[CTL_SIZE_MAX], d[CTL_SIZE_MAX], t[CTL_CLOCK_MAX];
	struct json_object *pa = ctl_json_path(r, "peak_attribution");
	double rate = 0, attributed = 0;

	printf("pid %s (%s)%s\n", ctl_json_count(r, "pid", (char[CTL_COUNT_MAX]){ 0 }), comm ? comm : "-",
	       json_object_get_boolean(ctl_json_path(r, "exited")) ? ", exited" : "");
	printf("RSS:       %s (anon %s, file %s, shmem %s)\n", ctl_json_size(r, "rss.bytes", a),
	       ctl_json_size(r, "rss.anon_bytes", b), ctl_json_size(r, "rss.file_bytes", c),
	       ctl_json_size(r, "rss.shmem_bytes", d));
	printf("Peak:      %s at %s (%s)\n", ctl_json_size(r, "peak.bytes", a),
	       ctl_json_clock(r, "peak.time", t),
	       json_object_get_string(ctl_json_path(r, "peak.source")) ?: "-");
	(void)ctl_json_double(r, "growth.bytes_per_second", &rate);
	printf("Growth:    %s%s/s over the range%s\n", rate < 0 ? "-" : "+",
	       ctl_format_size((uint64_t)fabs(rate), a),
	       json_object_get_boolean(ctl_json_path(r, "growth.growing")) ? ", growing steadily (a leak?)" : "");
	print_sparkline(ctl_json_path(r, "timeline"));
	(void)ctl_json_double(r, "attributed_bytes", &attributed);
	printf("Growth sites (%s sampled, one sample per %s on average):\n",
	       ctl_json_size(r, "attributed_bytes", a), ctl_json_size(r, "sample_bytes", b));
	print_sites(ctl_json_path(r, "sites"), attributed);
	if (json_object_is_type(pa, json_type_object)) {
		double peak = 0, explained = 0;

		(void)ctl_json_double(pa, "peak_bytes", &peak);
		(void)ctl_json_double(pa, "explained_bytes", &explained);
		printf("The peak:  %s at %s, built from %s at %s; the sampled sites explain %s (%.0f%%), %s unexplained:\n",
		       ctl_json_size(pa, "peak_bytes", a), ctl_json_clock(pa, "peak_time", t),
		       ctl_json_size(pa, "trough_bytes", b), ctl_json_clock(pa, "trough_time", (char[CTL_CLOCK_MAX]){ 0 }),
		       ctl_json_size(pa, "explained_bytes", c), peak > 0 ? 100 * explained / peak : 0.0,
		       ctl_json_size(pa, "unexplained_bytes", d));
		print_sites(ctl_json_path(pa, "sites"), explained);
	}
}

/* The options, as getopt_long() takes them; also what `perfctl
 * --complete-options mem` lists for the shell completion. */
static const struct option mem_options[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "since", required_argument, NULL, 's' },
	{ "top", required_argument, NULL, 'n' },
	{ "json", no_argument, NULL, 'j' },
	{ "socket", required_argument, NULL, 'S' },
	{}
};
static const char mem_shortopts[] = ":p:s:n:";

enum perfctl_exit do_mem(struct ctl_env *env, int argc, char **argv)
{
	_cleanup_(json_object_putp) struct json_object *req = NULL, *resp = NULL;
	int64_t pid = 0, top = 10;
	double since = 0;
	enum perfctl_exit rc;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, mem_shortopts, mem_options, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (ctl_parse_int64(optarg, 1, INT32_MAX, &pid) < 0) {
				ctl_error(env, CTL_ERR_USAGE, "mem: --pid must be a process id, not '%s'", optarg);
				return PERFCTL_EXIT_USAGE;
			}
			break;
		case 's':
			if (ctl_parse_duration(optarg, 0, INFINITY, &since) < 0) {
				ctl_error(env, CTL_ERR_USAGE,
					  "mem: --since: expected a duration (30s, 10m, 1h30m), not '%s'", optarg);
				return PERFCTL_EXIT_USAGE;
			}
			break;
		case 'n':
			if (ctl_parse_int64(optarg, 1, 100, &top) < 0) {
				ctl_error(env, CTL_ERR_USAGE, "mem: --top takes 1..100, not '%s'", optarg);
				return PERFCTL_EXIT_USAGE;
			}
			break;
		default:
			if (ctl_common_option(env, "mem", c, argv) < 0)
				return PERFCTL_EXIT_USAGE;
			break;
		}
	}
	if (optind < argc || !pid) {
		ctl_error(env, CTL_ERR_USAGE, optind < argc ? "mem: unexpected argument '%s'" :
							       "mem: --pid PID is required%s",
			  optind < argc ? argv[optind] : "");
		return PERFCTL_EXIT_USAGE;
	}
	req = ctl_request_new("mem");
	if (!req || json_object_object_add(req, "pid", json_object_new_int64(pid)) < 0 ||
	    json_object_object_add(req, "top", json_object_new_int64(top)) < 0 ||
	    (since > 0 && json_object_object_add(req, "since", json_object_new_double(since)) < 0)) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	rc = ctl_call(env, req, CTL_CALL_TIMEOUT_MS, &resp);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	if (env->json)
		return ctl_print_answer(env, resp);
	print_mem(resp);
	return PERFCTL_EXIT_OK;
}

const struct ctl_command ctl_cmd_mem = {
	.name = "mem",
	.fn = do_mem,
	.options = mem_options,
	.shortopts = mem_shortopts,
	.summary = "a process's memory: RSS, peak, growth and the code that grew it",
	.synopsis = "--pid PID [--since DURATION] [--top N]",
	.help = "The process's memory: RSS now by kind, the peak and when, the growth rate,\n"
		"the RSS timeline (default the last 10m), the code sites whose growth was\n"
		"sampled, with file:line, and what built the peak.\n",
};
