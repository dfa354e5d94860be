/* SPDX-License-Identifier: MIT */
/*
 * top.c - `perfctl top`: the live view of where CPU and memory go, every
 * -d seconds, on a screen (top_screen.c) or in batch mode (-b) as plain
 * frames or, with --json, one JSON object per line per refresh.
 *
 * Design: perfd computes each refresh from its live aggregates ("top",
 * include/perfd/protocol.h) and sends only the rows shown, so perfctl asks
 * again every refresh on one connection kept open for the session, and
 * formats (top_text.c).  The one thing perfctl adds is the user name of
 * each process's uid: names are the client's to look up (NSS may be
 * slow or remote, and must not stall perfd's loop), cached per uid.
 * perfd counts whole seconds, so a delay of 0.5 s still shows the last
 * second.  A connection perfd closes ends the session: exit 1 with the
 * reason, the terminal restored.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "call.h"
#include "format.h"
#include "output.h"
#include "perfctl.h"
#include "top.h"

/* How long one refresh may take perfd (the function view of every process
 * builds a model of all of them). */
#define TOP_CALL_TIMEOUT_MS (30 * 1000)
#define TOP_USER_CACHE 64

struct user_name {
	uint32_t uid;
	char name[64];
};

static struct user_name users[TOP_USER_CACHE];
static size_t n_users;

/* The name of uid (its number when it has none), cached. */
static const char *user_name(uint32_t uid)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	struct user_name *u;

	for (size_t i = 0; i < n_users; i++)
		if (users[i].uid == uid)
			return users[i].name;
	u = &users[n_users < TOP_USER_CACHE ? n_users++ : uid % TOP_USER_CACHE];
	u->uid = uid;
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res)
		(void)snprintf(u->name, sizeof(u->name), "%s", pw.pw_name);
	else
		(void)snprintf(u->name, sizeof(u->name), "%u", uid);
	return u->name;
}

/* Gives each process of answer its "user". */
static int add_users(struct json_object *answer)
{
	struct json_object *procs = ctl_json_path(answer, "processes");
	size_t n = json_object_is_type(procs, json_type_array) ? json_object_array_length(procs) : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *p = json_object_array_get_idx(procs, i);
		int64_t uid;

		/* a process whose uids differ has none: null (json-c's NULL) */
		if (!ctl_json_int(p, "uid", &uid) || uid < 0 || uid > UINT32_MAX) {
			if (json_object_object_add(p, "user", NULL) < 0)
				return -ENOMEM;
		} else if (!ctl_json_put(p, "user", json_object_new_string(user_name((uint32_t)uid)))) {
			return -ENOMEM;
		}
	}
	return 0;
}

static struct json_object *top_request(const struct top_query *q)
{
	struct json_object *req = ctl_request_new("top");
	bool functions = q->view == TOP_VIEW_FUNCTIONS;

	if (!req)
		return NULL;
	if (!ctl_json_put(req, "view", json_object_new_string(functions ? "functions" : "processes")) ||
	    !ctl_json_put(req, "interval", json_object_new_int64(q->interval)) ||
	    !ctl_json_put(req, "rows", json_object_new_int64(q->rows)) ||
	    !ctl_json_put(req, "offset", json_object_new_int64(q->offset)) ||
	    !ctl_json_put(req, "kernel_threads", json_object_new_boolean(q->kernel_threads)) ||
	    !ctl_json_put(req, "all", json_object_new_boolean(q->all)) ||
	    (q->filter[0] && !ctl_json_put(req, "filter", json_object_new_string(q->filter))) ||
	    !ctl_json_put(req, "sort", json_object_new_string(functions ?
					 top_function_sorts[q->function_sort] :
					 top_process_sorts[q->process_sort])))
		goto fail;
	if (functions &&
	    (!ctl_json_put(req, "kind", json_object_new_string(top_kinds[q->values])) ||
	     !ctl_json_put(req, "depth", json_object_new_int64(q->depth)) ||
	     (q->pid && !ctl_json_put(req, "pid", json_object_new_int64(q->pid))) ||
	     (q->function[0] && !ctl_json_put(req, "function", json_object_new_string(q->function))) ||
	     (q->function[0] && q->function_kind[0] &&
	      !ctl_json_put(req, "function_kind", json_object_new_string(q->function_kind)))))
		goto fail;
	return req;
fail:
	json_object_put(req);
	return NULL;
}

enum perfctl_exit top_fetch(struct top_session *s, struct json_object **ret)
{
	_cleanup_(json_object_putp) struct json_object *req = top_request(&s->q), *resp = NULL;
	enum perfctl_exit rc;

	if (!req) {
		ctl_error(s->env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	rc = ctl_exchange(s->env, s->fd, req, TOP_CALL_TIMEOUT_MS, &resp);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	if (add_users(resp) < 0) {
		ctl_error(s->env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	*ret = TAKE_PTR(resp);
	return PERFCTL_EXIT_OK;
}

static int print_frame(const struct top_query *q, struct json_object *answer)
{
	struct top_frame f;
	int r = top_frame_build(&f, q, answer);

	for (size_t i = 0; r == 0 && i < f.n; i++)
		if (puts(f.lines[i].text) == EOF)
			r = -errno;
	top_frame_done(&f);
	return r;
}

/* Sleeps until deadline (CLOCK_MONOTONIC seconds). */
static void sleep_until(double deadline)
{
	struct timespec ts = { .tv_sec = (time_t)deadline,
			       .tv_nsec = (long)((deadline - floor(deadline)) * 1e9) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

double top_next_due(double due, double started, double delay)
{
	return MAX(due, started) + delay;
}

static enum perfctl_exit run_batch(struct top_session *s)
{
	double next = top_now();

	for (long i = 0; s->iterations == 0 || i < s->iterations; i++) {
		_cleanup_(json_object_putp) struct json_object *answer = NULL;
		enum perfctl_exit rc;

		if (i > 0)
			sleep_until(next);
		next = top_next_due(next, top_now(), s->delay);
		rc = top_fetch(s, &answer);
		if (rc != PERFCTL_EXIT_OK)
			return rc;
		if (s->env->json) {
			if (ctl_print_json(stdout, answer) < 0)
				return PERFCTL_EXIT_FAILURE;
		} else if (print_frame(&s->q, answer) < 0 || (s->iterations != i + 1 && puts("") == EOF)) {
			return PERFCTL_EXIT_FAILURE;
		}
		/* each frame as it is made: a log or a pipe sees it at once */
		if (fflush(stdout) != 0)
			return PERFCTL_EXIT_FAILURE;
	}
	return PERFCTL_EXIT_OK;
}

static int sort_index(const char *name, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, names[i]) == 0)
			return (int)i;
	return -1;
}

/* The options, as getopt_long() takes them; also what `perfctl
 * --complete-options top` lists for the shell completion. */
static const struct option top_options[] = {
	{ "batch", no_argument, NULL, 'b' },
	{ "iterations", required_argument, NULL, 'n' },
	{ "delay", required_argument, NULL, 'd' },
	{ "pid", required_argument, NULL, 'P' },
	{ "functions", no_argument, NULL, 'f' },
	{ "sort", required_argument, NULL, 's' },
	{ "filter", required_argument, NULL, 'F' },
	{ "memory", no_argument, NULL, 'M' },
	{ "wait", no_argument, NULL, 'W' },
	{ "kernel-threads", no_argument, NULL, 'k' },
	{ "all", no_argument, NULL, 'a' },
	{ "rows", required_argument, NULL, 'r' },
	{ "json", no_argument, NULL, 'j' },
	{ "socket", required_argument, NULL, 'S' },
	{}
};
static const char top_shortopts[] = ":bn:d:fkMWa";

enum perfctl_exit do_top(struct ctl_env *env, int argc, char **argv)
{
	struct top_session s = {
		.env = env,
		.fd = -1,
		.delay = PERFD_TOP_DEFAULT_INTERVAL,
		.q = { .depth = 3 },
	};
	const char *sort = NULL;
	bool batch = false, rows_given = false;
	int64_t v;
	enum perfctl_exit rc;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, top_shortopts, top_options, NULL)) != -1) {
		switch (c) {
		case 'b':
			batch = true;
			break;
		case 'n':
			if (ctl_parse_int64(optarg, 1, INT32_MAX, &v) < 0) {
				ctl_error(env, CTL_ERR_USAGE, "top: -n must be a positive number of refreshes, not '%s'",
					  optarg);
				return PERFCTL_EXIT_USAGE;
			}
			s.iterations = (long)v;
			break;
		case 'd':
			if (ctl_parse_duration(optarg, 0.1 - 1e-9, PERFD_TOP_MAX_INTERVAL, &s.delay) < 0) {
				ctl_error(env, CTL_ERR_USAGE, "top: -d: expected a duration (2, 0.5, 1s, 1m) of 0.1 to %d s, not '%s'",
					  PERFD_TOP_MAX_INTERVAL, optarg);
				return PERFCTL_EXIT_USAGE;
			}
			break;
		case 'P':
			if (ctl_parse_int64(optarg, 1, INT32_MAX, &v) < 0) {
				ctl_error(env, CTL_ERR_USAGE, "top: --pid must be a process id, not '%s'", optarg);
				return PERFCTL_EXIT_USAGE;
			}
			s.q.pid = (uint32_t)v;
			s.q.view = TOP_VIEW_FUNCTIONS;
			break;
		case 'f':
			s.q.view = TOP_VIEW_FUNCTIONS;
			break;
		case 's':
			sort = optarg;
			break;
		case 'F':
			if (!*optarg || strlen(optarg) >= sizeof(s.q.filter)) {
				ctl_error(env, CTL_ERR_USAGE, "top: --filter must be 1 to %zu bytes of a comm",
					  sizeof(s.q.filter) - 1);
				return PERFCTL_EXIT_USAGE;
			}
			(void)snprintf(s.q.filter, sizeof(s.q.filter), "%s", optarg);
			break;
		case 'M':
			s.q.values = TOP_VALUES_MEMORY;
			break;
		case 'W':
			s.q.values = TOP_VALUES_OFFCPU;
			break;
		case 'k':
			s.q.kernel_threads = true;
			break;
		case 'a':
			s.q.all = true;
			break;
		case 'r':
			if (ctl_parse_int64(optarg, 1, PERFD_TOP_MAX_ROWS, &v) < 0) {
				ctl_error(env, CTL_ERR_USAGE, "top: --rows must be 1..%d, not '%s'",
					  PERFD_TOP_MAX_ROWS, optarg);
				return PERFCTL_EXIT_USAGE;
			}
			s.q.rows = (unsigned)v;
			rows_given = true;
			break;
		default:
			if (ctl_common_option(env, "top", c, argv) < 0)
				return PERFCTL_EXIT_USAGE;
			break;
		}
	}
	if (optind < argc) {
		ctl_error(env, CTL_ERR_USAGE, "top: unexpected argument '%s'", argv[optind]);
		return PERFCTL_EXIT_USAGE;
	}
	if (sort) {
		int k = s.q.view == TOP_VIEW_PROCESSES ?
				sort_index(sort, top_process_sorts, ELEMENTSOF(top_process_sorts)) :
				sort_index(sort, top_function_sorts, ELEMENTSOF(top_function_sorts));

		if (k < 0) {
			ctl_error(env, CTL_ERR_USAGE, "top: --sort must be %s, not '%s'",
				  s.q.view == TOP_VIEW_PROCESSES ? "cpu, rss, peak or growth" : "self or total",
				  sort);
			return PERFCTL_EXIT_USAGE;
		}
		if (s.q.view == TOP_VIEW_PROCESSES)
			s.q.process_sort = k;
		else
			s.q.function_sort = k;
	}
	if (s.q.values != TOP_VALUES_CPU && s.q.view != TOP_VIEW_FUNCTIONS) {
		ctl_error(env, CTL_ERR_USAGE, "top: --%s is for the function view (--pid or -f)",
			  s.q.values == TOP_VALUES_MEMORY ? "memory" : "wait");
		return PERFCTL_EXIT_USAGE;
	}
	if (!batch && (env->json || s.iterations)) {
		ctl_error(env, CTL_ERR_USAGE, "top: %s is for batch mode (-b)", env->json ? "--json" : "-n");
		return PERFCTL_EXIT_USAGE;
	}
	if (!batch && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))) {
		ctl_error(env, CTL_ERR_USAGE, "top: the live view needs a terminal; -b prints frames instead");
		return PERFCTL_EXIT_USAGE;
	}
	/* perfd counts whole seconds: the last ceil(delay) of them */
	s.q.interval = (unsigned)MAX(1.0, ceil(s.delay - 1e-9));
	if (!rows_given)
		s.q.rows = batch ? PERFD_TOP_MAX_ROWS : PERFD_TOP_DEFAULT_ROWS;

	rc = ctl_connect(env, &s.fd);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	rc = batch ? run_batch(&s) : top_screen_run(&s);
	close(s.fd);
	return rc;
}

const struct ctl_command ctl_cmd_top = {
	.name = "top",
	.fn = do_top,
	.options = top_options,
	.shortopts = top_shortopts,
	.summary = "the live view of processes and functions",
	.synopsis = "[-b [-n N] [--json]] [-d DURATION] [--pid PID | -f] [--sort KEY]\n"
		    "    [--filter TEXT] [-M | -W] [-k] [-a] [--rows N]",
	.help = "The live view, every DURATION (default " CTL_STR(PERFD_TOP_DEFAULT_INTERVAL)
		"s): processes with CPU %, RSS, peak,\n"
		"growth and top function; the functions of one (--pid, Enter) or all (-f),\n"
		"self and total, CPU, memory growth (-M) or off-CPU time (-W: where\n"
		"threads wait); a function's callers and callees (Enter).  Keys: c m p g\n"
		"sort, / filter, k kernel threads, a all, s t sort, M memory, W wait,\n"
		"Esc back, q quit.\n"
		"  -b                     plain frames (--json: one object a line)\n",
};
