/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - `perfctl snapshot`: profile one process for a while and
 * write the encoded profile out.
 *
 * Design: perfd answers only when the duration is over, so the wait is
 * bounded by duration + 30 s instead of the usual short timeout.  With -o,
 * the output goes to FILE.tmp and is renamed over FILE only once it is
 * complete and synced, so a failed or interrupted snapshot never leaves a
 * half-written FILE (an interrupted one can leave FILE.tmp).  The directory
 * is checked before the request goes out, so a typo does not cost the whole
 * duration.  The profile is written as the daemon encoded it; the
 * note and a one-line summary go to stderr, keeping stdout a clean profile
 * that pipes straight into flamegraph.pl.  With --json the whole answer
 * ({"version":1,"ok":true,pid,comm,...,"profile":"..."}) is written instead,
 * and with -o as well stdout gets {"ok":true,"output":FILE}, so --json runs
 * always print one object.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "call.h"
#include "format.h"
#include "output.h"
#include "perfctl.h"
#include "perfd/protocol.h"

/* The daemon may take a little longer than the duration to encode. */
#define SNAPSHOT_GRACE_MS (30 * 1000)

struct snapshot_opts {
	int64_t pid;
	double duration;
	const char *format;
	bool lines;           /* native frames with file:line */
	bool no_python_lines; /* Python frames per function, not per line */
	bool threads;         /* stacks rooted at their thread */
	const char *output; /* NULL: stdout */
};

/* A JSON number for seconds that prints as the user would write it ("0.1",
 * not "0.10000000000000001"); NULL on ENOMEM. */
static struct json_object *new_seconds(double d)
{
	char buf[32];

	if (d == floor(d))
		return json_object_new_int64((int64_t)d);
	(void)snprintf(buf, sizeof(buf), "%.15g", d);
	if (strtod(buf, NULL) == d)
		return json_object_new_double_s(d, buf);
	return json_object_new_double(d);
}

static int write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Checks early that path's directory can take a new file.  Returns 0 or
 * -errno. */
static int check_output_dir(const char *path)
{
	_cleanup_free_ char *copy = strdup(path);
	struct stat st;

	if (!copy)
		return -ENOMEM;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		/* A device or FIFO is written in place, see write_output(). */
		if (!S_ISREG(st.st_mode))
			return 0;
	}
	if (access(dirname(copy), W_OK | X_OK) < 0)
		return negative_errno();
	return 0;
}

/* Writes data to path through path.tmp and rename(), or straight into path
 * when it is an existing device or FIFO (where rename makes no sense).
 * Returns 0 or -errno; on failure path is untouched and path.tmp removed. */
static int write_output(const char *path, const char *data, size_t len)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -1;
	struct stat st;
	int k;

	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			return negative_errno();
		k = write_all(fd, data, len);
		if (k < 0)
			return k;
		return close(TAKE_FD(fd)) < 0 ? negative_errno() : 0;
	}

	if (asprintf(&tmp, "%s.tmp", path) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
	if (fd < 0)
		return negative_errno();

	k = write_all(fd, data, len);
	if (k >= 0 && fsync(fd) < 0)
		k = negative_errno();
	if (k >= 0 && close(TAKE_FD(fd)) < 0)
		k = negative_errno();
	if (k >= 0 && rename(tmp, path) < 0)
		k = negative_errno();
	if (k < 0)
		(void)unlink(tmp);
	return k;
}

static int parse_args(struct ctl_env *env, int argc, char **argv, struct snapshot_opts *o)
{
	static const struct option options[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "lines", no_argument, NULL, 'l' },
		{ "no-lines", no_argument, NULL, 'L' },
		{ "threads", no_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 'S' },
		{}
	};
	bool have_pid = false, have_duration = false;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:d:f:o:", options, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (ctl_parse_int64(optarg, 1, INT32_MAX, &o->pid) < 0) {
				ctl_error(env, CTL_ERR_USAGE,
					  "snapshot: --pid must be a process id, 1..%d, not '%s'",
					  INT32_MAX, optarg);
				return -EINVAL;
			}
			have_pid = true;
			break;
		case 'd':
			if (ctl_parse_seconds(optarg, 0, PERFD_SNAPSHOT_MAX_SECONDS, &o->duration) < 0) {
				ctl_error(env, CTL_ERR_USAGE,
					  "snapshot: --duration must be seconds, 0 < duration <= %d, not '%s'",
					  PERFD_SNAPSHOT_MAX_SECONDS, optarg);
				return -EINVAL;
			}
			have_duration = true;
			break;
		case 'f':
			/* Validated by perfd, so a newer daemon's formats work. */
			if (!*optarg) {
				ctl_error(env, CTL_ERR_USAGE, "snapshot: --format must not be empty");
				return -EINVAL;
			}
			o->format = optarg;
			break;
		case 'o':
			if (!*optarg) {
				ctl_error(env, CTL_ERR_USAGE, "snapshot: -o needs a file name");
				return -EINVAL;
			}
			o->output = optarg;
			break;
		case 'l':
			o->lines = true;
			break;
		case 'L':
			o->no_python_lines = true;
			break;
		case 't':
			o->threads = true;
			break;
		default:
			if (ctl_common_option(env, "snapshot", c, argv) < 0)
				return -EINVAL;
			break;
		}
	}
	if (optind < argc) {
		ctl_error(env, CTL_ERR_USAGE, "snapshot: unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	if (!have_pid || !have_duration) {
		ctl_error(env, CTL_ERR_USAGE, "snapshot: --pid PID and --duration SECONDS are required");
		return -EINVAL;
	}
	return 0;
}

static void print_summary(struct json_object *resp, const struct snapshot_opts *o)
{
	_cleanup_free_ char *comm = ctl_json_string_escaped(resp, "comm");
	_cleanup_free_ char *out = o->output ? ctl_escape(o->output, strlen(o->output)) : NULL;
	char samples[CTL_COUNT_MAX];
	double covered = o->duration;
	struct json_object *exited = ctl_json_path(resp, "exited");

	(void)ctl_json_double(resp, "duration_seconds", &covered);
	fprintf(stderr, "perfctl: %s samples of pid %" PRId64 " (%s) over %.1f s%s%s%s\n",
		ctl_json_count(resp, "samples", samples), o->pid, comm ? comm : "-", covered,
		json_object_get_boolean(exited) ? ", process exited" : "",
		out ? ", written to " : "", out ? out : "");
}

enum perfctl_exit do_snapshot(struct ctl_env *env, int argc, char **argv)
{
	struct snapshot_opts o = { .format = "folded" };
	_cleanup_(json_object_putp) struct json_object *req = NULL, *resp = NULL;
	struct json_object *profile, *note;
	const char *data;
	size_t len;
	enum perfctl_exit rc;
	int k;

	if (parse_args(env, argc, argv, &o) < 0)
		return PERFCTL_EXIT_USAGE;

	if (o.output) {
		k = check_output_dir(o.output);
		if (k < 0) {
			ctl_error(env, CTL_ERR_IO, "cannot write %s: %s", o.output, strerror(-k));
			return PERFCTL_EXIT_FAILURE;
		}
	}

	req = ctl_request_new("snapshot");
	if (!req || json_object_object_add(req, "pid", json_object_new_int64(o.pid)) < 0 ||
	    json_object_object_add(req, "duration", new_seconds(o.duration)) < 0 ||
	    json_object_object_add(req, "format", json_object_new_string(o.format)) < 0 ||
	    (o.lines && json_object_object_add(req, "lines", json_object_new_boolean(1)) < 0) ||
	    (o.no_python_lines &&
	     json_object_object_add(req, "python_lines", json_object_new_boolean(0)) < 0) ||
	    (o.threads && json_object_object_add(req, "threads", json_object_new_boolean(1)) < 0)) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}

	rc = ctl_call(env, req, (int)ceil(o.duration * 1000) + SNAPSHOT_GRACE_MS, &resp);
	if (rc != PERFCTL_EXIT_OK)
		return rc;

	profile = ctl_json_path(resp, "profile");
	if (!json_object_is_type(profile, json_type_string)) {
		ctl_error(env, CTL_ERR_PROTOCOL, "perfd's snapshot answer has no \"profile\" string");
		return PERFCTL_EXIT_FAILURE;
	}

	if (env->json && !o.output)
		return ctl_print_answer(env, resp);

	if (env->json) {
		data = json_object_to_json_string_length(resp, JSON_C_TO_STRING_PLAIN |
								       JSON_C_TO_STRING_NOSLASHESCAPE,
							 &len);
		if (!data) {
			ctl_error(env, CTL_ERR_IO, "out of memory formatting perfd's answer");
			return PERFCTL_EXIT_FAILURE;
		}
	} else {
		data = json_object_get_string(profile);
		len = (size_t)json_object_get_string_len(profile);
	}

	if (o.output) {
		k = write_output(o.output, data, len);
		if (k < 0) {
			ctl_error(env, CTL_ERR_IO, "cannot write %s: %s", o.output, strerror(-k));
			return PERFCTL_EXIT_FAILURE;
		}
		if (env->json) {
			/* stdout still gets the one JSON object: a short receipt. */
			_cleanup_(json_object_putp) struct json_object *r = json_object_new_object();

			if (!r || json_object_object_add(r, "ok", json_object_new_boolean(1)) < 0 ||
			    json_object_object_add(r, "output", json_object_new_string(o.output)) < 0) {
				ctl_error(env, CTL_ERR_IO, "out of memory");
				return PERFCTL_EXIT_FAILURE;
			}
			return ctl_print_answer(env, r);
		}
	} else if ((len > 0 && fwrite(data, 1, len, stdout) != len) || fflush(stdout) != 0) {
		/* main() reports the stdout error; no summary for a lost profile. */
		return PERFCTL_EXIT_FAILURE;
	}

	note = ctl_json_path(resp, "note");
	if (json_object_is_type(note, json_type_string) && json_object_get_string_len(note) > 0)
		ctl_message("note", json_object_get_string(note),
			    (size_t)json_object_get_string_len(note));
	print_summary(resp, &o);
	return PERFCTL_EXIT_OK;
}
