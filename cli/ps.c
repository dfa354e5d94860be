/* SPDX-License-Identifier: MIT */
/*
 * ps.c - `perfctl ps`: which processes were on CPU, or grew or shrank, in
 * the last interval (--all: every live process perfd knows); a steady RSS
 * rise is marked with its rate.
 *
 * Design: perfd already sorts and computes %CPU, so this file only prints.
 * --json passes perfd's answer through unchanged ({"version":1,"ok":true,
 * "interval_seconds":N,"processes":[{pid, comm, samples, cpu_percent,
 * wait_percent, waits, rss_bytes, peak_rss_bytes, ...}]}), every field the
 * daemon sends included.  %WAIT is the off-CPU time over the interval (of
 * one thread's time: threads add up, as for %CPU), WAITING what most of it
 * was for (the first of perfd's waits, the most first).
 * The human table escapes COMM, since a process can name itself anything,
 * escape sequences included.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <json-c/json.h>

#include "call.h"
#include "format.h"
#include "output.h"
#include "perfctl.h"
#include "perfd/protocol.h"

static int print_table(const struct ctl_env *env, struct json_object *resp)
{
	struct json_object *procs = ctl_json_path(resp, "processes");
	size_t n;

	if (!json_object_is_type(procs, json_type_array)) {
		ctl_error(env, CTL_ERR_PROTOCOL, "perfd's ps answer has no \"processes\" array");
		return -EBADMSG;
	}

	printf("%7s %-16s %9s %6s %6s %-10s %8s %8s %10s  %s\n", "PID", "COMM", "SAMPLES", "%CPU",
	       "%WAIT", "WAITING", "RSS", "PEAK", "GROWTH/s", "RUNTIME");
	n = json_object_array_length(procs);
	for (size_t i = 0; i < n; i++) {
		struct json_object *p = json_object_array_get_idx(procs, i);
		_cleanup_free_ char *comm = ctl_json_string_escaped(p, "comm");
		_cleanup_free_ char *runtime = ctl_json_string_escaped(p, "runtime");
		char pid[CTL_COUNT_MAX], samples[CTL_COUNT_MAX], cpu[16], wait[16] = "-";
		char waiting[16] = "-";
		char rss[CTL_SIZE_MAX], peak[CTL_SIZE_MAX], growth[CTL_SIZE_MAX + 2] = "-";
		struct json_object *exited = ctl_json_path(p, "exited");
		double pct;

		if (ctl_json_double(p, "cpu_percent", &pct))
			(void)snprintf(cpu, sizeof(cpu), "%.1f", pct);
		else
			(void)snprintf(cpu, sizeof(cpu), "-");
		if (ctl_json_double(p, "wait_percent", &pct))
			(void)snprintf(wait, sizeof(wait), "%.1f", pct);
		/* the waits come the most first: the first is what it waited for */
		if (json_object_is_type(ctl_json_path(p, "waits"), json_type_object)) {
			json_object_object_foreach(ctl_json_path(p, "waits"), cls, share) {
				(void)share;
				/* one word a column ("page fault") */
				(void)snprintf(waiting, sizeof(waiting), "%s", cls);
				for (char *c = waiting; *c; c++)
					*c = *c == ' ' ? '-' : *c;
				break;
			}
		}
		(void)ctl_json_size(p, "rss_bytes", rss);
		(void)ctl_json_size(p, "peak_rss_bytes", peak);
		/* a steady rise is marked: a leak suspect */
		if (json_object_get_boolean(ctl_json_path(p, "growing")) &&
		    ctl_json_double(p, "rss_growth_bytes_per_second", &pct) && pct > 0) {
			char size[CTL_SIZE_MAX];

			(void)ctl_format_size((uint64_t)pct, size);
			(void)snprintf(growth, sizeof(growth), "+%s!", size);
		}

		printf("%7s %-16s %9s %6s %6s %-10.10s %8s %8s %10s  %s%s\n",
		       ctl_json_count(p, "pid", pid), comm ? comm : "-",
		       ctl_json_count(p, "samples", samples), cpu, wait, waiting, rss, peak, growth,
		       runtime ? runtime : "-",
		       json_object_get_boolean(exited) ? "  (exited)" : "");
	}
	return 0;
}

/* The options, as getopt_long() takes them; also what `perfctl
 * --complete-options ps` lists for the shell completion. */
static const struct option ps_options[] = {
	{ "interval", required_argument, NULL, 'i' },
	{ "all", no_argument, NULL, 'a' },
	{ "json", no_argument, NULL, 'j' },
	{ "socket", required_argument, NULL, 'S' },
	{}
};
static const char ps_shortopts[] = ":i:";

enum perfctl_exit do_ps(struct ctl_env *env, int argc, char **argv)
{
	_cleanup_(json_object_putp) struct json_object *req = NULL, *resp = NULL;
	int64_t interval = PERFD_PS_DEFAULT_INTERVAL;
	double seconds;
	bool all = false;
	enum perfctl_exit rc;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ps_shortopts, ps_options, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (ctl_parse_duration(optarg, 1 - 1e-9, PERFD_PS_MAX_INTERVAL, &seconds) < 0 ||
			    seconds != floor(seconds)) {
				ctl_error(env, CTL_ERR_USAGE,
					  "ps: --interval: expected whole seconds (10, 30s, 1m), 1 to %d s, not '%s'",
					  PERFD_PS_MAX_INTERVAL, optarg);
				return PERFCTL_EXIT_USAGE;
			}
			interval = (int64_t)seconds;
			break;
		case 'a':
			all = true;
			break;
		default:
			if (ctl_common_option(env, "ps", c, argv) < 0)
				return PERFCTL_EXIT_USAGE;
			break;
		}
	}
	if (optind < argc) {
		ctl_error(env, CTL_ERR_USAGE, "ps: unexpected argument '%s'", argv[optind]);
		return PERFCTL_EXIT_USAGE;
	}

	req = ctl_request_new("ps");
	if (!req || json_object_object_add(req, "interval", json_object_new_int64(interval)) < 0 ||
	    (all && json_object_object_add(req, "all", json_object_new_boolean(1)) < 0)) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	rc = ctl_call(env, req, CTL_CALL_TIMEOUT_MS, &resp);
	if (rc != PERFCTL_EXIT_OK)
		return rc;

	if (env->json)
		return ctl_print_answer(env, resp);
	return print_table(env, resp) < 0 ? PERFCTL_EXIT_FAILURE : PERFCTL_EXIT_OK;
}

const struct ctl_command ctl_cmd_ps = {
	.name = "ps",
	.fn = do_ps,
	.options = ps_options,
	.shortopts = ps_shortopts,
	.summary = "processes on CPU or whose memory moved, busiest first",
	.synopsis = "[--interval DURATION] [--all]",
	.help = "The processes seen on CPU, or whose memory moved, in the last DURATION\n"
		"(whole seconds, 1s to " CTL_STR(PERFD_PS_MAX_INTERVAL) "s, default "
		CTL_STR(PERFD_PS_DEFAULT_INTERVAL) "s), busiest first; a steady RSS rise\n"
		"shows as +RATE! (a leak suspect).\n"
		"  --all                  every live process perfd knows\n",
};
