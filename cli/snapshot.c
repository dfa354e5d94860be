/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - `perfctl snapshot`: the profile of some processes (--pid,
 * --comm, --cgroup, --unit, --all) from now on (--duration) or from
 * perfd's history (--since, --from/--to), written out in a format.
 *
 * Design: perfd answers only when the duration is over, so the wait is
 * bounded by duration + 30 s instead of the usual short timeout; live.c
 * shows its progress and turns Ctrl-C into an early end that keeps the
 * profile.  A binary format is refused before asking when it would go to
 * a terminal.  With -o,
 * the output is written whole or not at all (outfile.c), and the directory
 * is checked before the request goes out, so a typo does not cost the whole
 * duration.  The profile is written as the daemon encoded it: a binary
 * format's bytes, which follow the answer's line as a frame ("encoding":
 * "frame"), are streamed from the socket to the file or stdout as they
 * come, never held whole; a frame cut short leaves no file.  The
 * note and a one-line summary go to stderr, keeping stdout a clean profile
 * that pipes straight into flamegraph.pl.  With --json the whole answer
 * ({"version":1,"ok":true,pid,comm,...,"profile":"..."}, a binary profile
 * in base64 there, "encoding": "base64") is written instead,
 * and with -o as well stdout gets {"ok":true,"output":FILE}, so --json runs
 * always print one object.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "call.h"
#include "client.h"
#include "format.h"
#include "live.h"
#include "outfile.h"
#include "output.h"
#include "perfctl.h"
#include "selection.h"
#include "snapshot.h"
#include "base/base64.h"
#include "perfd/kinds.h"
#include "perfd/protocol.h"

/* getopt_long() codes of the output options: 'f' and 'o' have short forms
 * (-f, -o), the others are above any character and the selection's
 * codes. */
enum {
	CTL_SNAP_FORMAT = 'f',
	CTL_SNAP_OUTPUT = 'o',
	CTL_SNAP_KIND = 0x2000,
	CTL_SNAP_LINES,
	CTL_SNAP_NO_LINES,
	CTL_SNAP_THREADS,
};

#define CTL_SNAPSHOT_OUTPUT_OPTIONS                                            \
	{ "kind", required_argument, NULL, CTL_SNAP_KIND },                    \
	{ "format", required_argument, NULL, CTL_SNAP_FORMAT },                \
	{ "output", required_argument, NULL, CTL_SNAP_OUTPUT },                \
	{ "lines", no_argument, NULL, CTL_SNAP_LINES },                        \
	{ "no-lines", no_argument, NULL, CTL_SNAP_NO_LINES },                  \
	{ "threads", no_argument, NULL, CTL_SNAP_THREADS }

/* Takes what getopt_long() returned when it is an output option.  Returns
 * 1 when it was (stored in o), 0 when not, -EINVAL after a usage error
 * worded for command. */
static int output_option(struct ctl_env *env, const char *command, int c,
			 struct ctl_snapshot_opts *o)
{
	switch (c) {
	case CTL_SNAP_KIND:
		o->kind = optarg; /* validated by perfd */
		return 1;
	case CTL_SNAP_FORMAT:
		/* Validated by perfd, so a newer daemon's formats work. */
		if (!*optarg) {
			ctl_error(env, CTL_ERR_USAGE, "%s: --format must not be empty", command);
			return -EINVAL;
		}
		o->format = optarg;
		return 1;
	case CTL_SNAP_OUTPUT:
		return ctl_output_option(env, command, optarg, &o->output) < 0 ? -EINVAL : 1;
	case CTL_SNAP_LINES:
		o->lines = true;
		return 1;
	case CTL_SNAP_NO_LINES:
		o->no_python_lines = true;
		return 1;
	case CTL_SNAP_THREADS:
		o->threads = true;
		return 1;
	}
	return 0;
}

/* The options of snapshot, and of record (no selection, and '+': the
 * first word that is not an option is CMD), as getopt_long() takes them;
 * also what `perfctl --complete-options` lists for the shell completion. */
static const struct option snapshot_options[] = {
	CTL_SELECTION_OPTIONS,
	CTL_SNAPSHOT_OUTPUT_OPTIONS,
	{ "json", no_argument, NULL, 'j' },
	{ "socket", required_argument, NULL, 'S' },
	{}
};
static const char snapshot_shortopts[] = ":p:d:f:o:";
const struct option ctl_record_options[] = {
	CTL_SNAPSHOT_OUTPUT_OPTIONS,
	{ "json", no_argument, NULL, 'j' },
	{ "socket", required_argument, NULL, 'S' },
	{}
};
const char ctl_record_shortopts[] = "+:f:o:";

int ctl_snapshot_parse(struct ctl_env *env, const char *command, int argc, char **argv,
		       bool selection, struct ctl_snapshot_opts *o)
{
	int c, k;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, selection ? snapshot_shortopts : ctl_record_shortopts,
				selection ? snapshot_options : ctl_record_options, NULL)) != -1) {
		if ((selection && (k = ctl_selection_option(env, command, c, &o->sel)) != 0) ||
		    (k = output_option(env, command, c, o)) != 0) {
			if (k < 0)
				return k;
			continue;
		}
		if (ctl_common_option(env, command, c, argv) < 0)
			return -EINVAL;
	}
	return optind;
}

static int parse_args(struct ctl_env *env, int argc, char **argv, struct ctl_snapshot_opts *o)
{
	int at = ctl_snapshot_parse(env, "snapshot", argc, argv, true, o);

	if (at < 0)
		return at;
	if (at < argc) {
		ctl_error(env, CTL_ERR_USAGE, "snapshot: unexpected argument '%s'", argv[at]);
		return -EINVAL;
	}
	if (ctl_selection_check(env, "snapshot", &o->sel) < 0)
		return -EINVAL;
	return 0;
}

enum perfctl_exit ctl_snapshot_prepare(struct ctl_env *env, const char *command,
				       struct ctl_snapshot_opts *o)
{
	int k;

	if (!o->format) {
		/* by the whole extension: ".pb.gz" is more than its last dot */
		o->format = o->output ? ctl_format_by_extension(o->output) : NULL;
		if (!o->format)
			o->format = "folded";
	}
	if (!o->output && !env->json && ctl_format_is_binary(o->format) && isatty(STDOUT_FILENO)) {
		ctl_error(env, CTL_ERR_USAGE,
			  "%s: --format %s is binary and stdout is a terminal: give -o FILE or redirect stdout",
			  command, o->format);
		return PERFCTL_EXIT_USAGE;
	}
	if (o->output) {
		k = ctl_check_output(o->output);
		if (k < 0) {
			ctl_error(env, CTL_ERR_IO, "cannot write %s: %s", o->output, strerror(-k));
			return PERFCTL_EXIT_FAILURE;
		}
	}
	return PERFCTL_EXIT_OK;
}

/* Adds key: value to obj; false when out of memory. */
static bool add(struct json_object *obj, const char *key, struct json_object *value)
{
	return value && json_object_object_add(obj, key, value) == 0;
}

struct json_object *ctl_snapshot_request(const struct ctl_snapshot_opts *o)
{
	struct json_object *req = ctl_request_new("snapshot");
	bool ok = req != NULL;

	ok = ok && ctl_selection_add(&o->sel, req) == 0 &&
	     (!o->kind || add(req, "kind", json_object_new_string(o->kind))) &&
	     add(req, "format", json_object_new_string(o->format)) &&
	     (!o->lines || add(req, "lines", json_object_new_boolean(1))) &&
	     (!o->no_python_lines || add(req, "python_lines", json_object_new_boolean(0))) &&
	     (!o->threads || add(req, "threads", json_object_new_boolean(1))) &&
	     /* a binary profile's bytes as a frame after the line, not
	      * base64 in it (an older perfd ignores this and sends base64) */
	     (!ctl_format_is_binary(o->format) || add(req, "frame", json_object_new_boolean(1)));
	if (!ok)
		json_object_put(req);
	return ok ? req : NULL;
}

static void print_summary(struct json_object *resp, const struct ctl_snapshot_opts *o)
{
	_cleanup_free_ char *comm = ctl_json_string_escaped(resp, "comm");
	_cleanup_free_ char *out = o->output ? ctl_escape(o->output, strlen(o->output)) : NULL;
	char samples[CTL_COUNT_MAX + CTL_SIZE_MAX + 64];
	double covered = o->sel.duration;
	struct json_object *exited = ctl_json_path(resp, "exited");
	struct json_object *procs = ctl_json_path(resp, "processes");
	size_t n = json_object_is_type(procs, json_type_array) ? json_object_array_length(procs) : 0;
	char who[64];

	(void)ctl_json_double(resp, "duration_seconds", &covered);
	if (o->sel.n_pids == 1)
		snprintf(who, sizeof(who), "pid %" PRId64 " (%s)", o->sel.pids[0], comm ? comm : "-");
	else
		snprintf(who, sizeof(who), "%zu process%s", n, n == 1 ? "" : "es");
	/* CPU in samples; a kind counted in bytes says its bytes, one in
	 * nanoseconds (off-CPU, wall) its seconds */
	if (json_object_get_string(ctl_json_path(resp, "unit")) &&
	    strcmp(json_object_get_string(ctl_json_path(resp, "unit")), "nanoseconds") == 0) {
		int64_t v = 0;

		(void)ctl_json_int(resp, "value", &v);
		snprintf(samples, sizeof(samples), "%.3f s of %s time", (double)v / 1e9,
			 json_object_get_string(ctl_json_path(resp, "kind")) ?: "off-CPU");
	} else if (json_object_get_string(ctl_json_path(resp, "unit")) &&
	    strcmp(json_object_get_string(ctl_json_path(resp, "unit")), "bytes") == 0) {
		int64_t v = 0;
		char size[CTL_SIZE_MAX];

		(void)ctl_json_int(resp, "value", &v);
		snprintf(samples, sizeof(samples), "%s of %s", ctl_format_size(v > 0 ? (uint64_t)v : 0, size),
			 json_object_get_string(ctl_json_path(resp, "kind")) ?: "memory");
	} else {
		_cleanup_free_ char *how = ctl_json_string_escaped(resp, "sampling");
		int64_t period = 0;
		size_t len;

		(void)ctl_json_count(resp, "samples", samples);
		strncat(samples, " samples", sizeof(samples) - strlen(samples) - 1);
		/* what a sample stands for: a folded profile carries no period */
		len = strlen(samples);
		if (ctl_json_int(resp, "period_ns", &period) && period > 0)
			snprintf(samples + len, sizeof(samples) - len, " (mean period %.3f ms%s%.16s)",
				 (double)period / 1e6, how ? ", " : "", how ? how : "");
	}
	fprintf(stderr, "perfctl: %s of %s over %.1f s%s%s%s\n", samples, who, covered,
		json_object_get_boolean(exited) ? ", process exited" : "",
		out ? ", written to " : "", out ? out : "");
}

enum perfctl_exit do_snapshot(struct ctl_env *env, int argc, char **argv)
{
	struct ctl_snapshot_opts o = { 0 };
	_cleanup_(json_object_putp) struct json_object *req = NULL, *resp = NULL;
	_cleanup_close_ int fd = -1;
	enum perfctl_exit rc;

	if (parse_args(env, argc, argv, &o) < 0)
		return PERFCTL_EXIT_USAGE;
	rc = ctl_snapshot_prepare(env, "snapshot", &o);
	if (rc != PERFCTL_EXIT_OK)
		return rc;

	req = ctl_snapshot_request(&o);
	if (!req) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}

	if (o.sel.duration > 0)
		rc = ctl_live_call(env, req, ctl_selection_timeout_ms(&o.sel),
				   &(struct ctl_live_opts){ .seconds = o.sel.duration }, &resp, &fd);
	else
		rc = ctl_call_keep(env, req, ctl_selection_timeout_ms(&o.sel), &resp, &fd);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	return ctl_snapshot_write(env, fd, resp, &o);
}

/* The size of the frame that follows resp, a binary profile's answer with
 * its "encoding" (protocol.h), into *ret.  Returns PERFCTL_EXIT_OK or
 * PERFCTL_EXIT_FAILURE after saying why. */
static enum perfctl_exit frame_size(struct ctl_env *env, struct json_object *resp,
				    struct json_object *encoding, uint64_t *ret)
{
	int64_t n;

	if (!json_object_is_type(encoding, json_type_string) ||
	    strcmp(json_object_get_string(encoding), "frame") != 0) {
		ctl_error(env, CTL_ERR_PROTOCOL, "perfd's snapshot answer has an unknown \"encoding\"");
		return PERFCTL_EXIT_FAILURE;
	}
	if (!json_object_is_type(ctl_json_path(resp, "profile_bytes"), json_type_int) ||
	    !ctl_json_int(resp, "profile_bytes", &n) || n < 0) {
		ctl_error(env, CTL_ERR_PROTOCOL,
			  "perfd's snapshot answer has no \"profile_bytes\" for its frame");
		return PERFCTL_EXIT_FAILURE;
	}
	*ret = (uint64_t)n;
	return PERFCTL_EXIT_OK;
}

/* Where a frame's bytes go as they come (ctl_client_recv_frame's put). */
static int put_outfile(void *userdata, const void *data, size_t len)
{
	return ctl_outfile_write(userdata, data, len);
}

static int put_stdout(void *userdata, const void *data, size_t len)
{
	return fwrite(data, 1, len, stdout) == len ? 0 : -EIO;
}

struct memory {
	char *data;
	size_t len;
};

static int put_memory(void *userdata, const void *data, size_t len)
{
	struct memory *m = userdata;

	memcpy(m->data + m->len, data, len);
	m->len += len;
	return 0;
}

/* Reads the frame of n bytes on fd into put, saying what went wrong (of
 * writing to what, or of the connection).  Returns PERFCTL_EXIT_OK or
 * PERFCTL_EXIT_FAILURE. */
static enum perfctl_exit receive_frame(struct ctl_env *env, int fd, uint64_t n,
				       int (*put)(void *, const void *, size_t), void *userdata,
				       const char *what)
{
	uint64_t got = 0;
	int k = ctl_client_recv_frame(fd, CTL_CALL_TIMEOUT_MS, n, put, userdata, &got);

	if (k >= 0)
		return PERFCTL_EXIT_OK;
	if (got < n && (k == -EPROTO || k == -ETIMEDOUT || k == -ECONNRESET))
		ctl_error(env, CTL_ERR_PROTOCOL,
			  "%s after %" PRIu64 " of the profile's %" PRIu64 " bytes%s%s",
			  ctl_client_strerror(k), got, n, what ? "; not written: " : "",
			  what ? what : "");
	else if (what || k != -EIO) /* stdout's own errors: main() reports them */
		ctl_error(env, CTL_ERR_IO, "cannot write %s: %s", what ? what : "stdout",
			  strerror(-k));
	return PERFCTL_EXIT_FAILURE;
}

/* A binary profile's frame (n bytes on fd) streamed to o's file or to
 * stdout, never held whole; with --json and no file, put into resp as
 * "profile", base64, as perfctl's document always had it (the one place
 * it is held whole, under the answer's cap). */
static enum perfctl_exit write_frame(struct ctl_env *env, int fd, uint64_t n,
				     struct json_object *resp, const struct ctl_snapshot_opts *o)
{
	struct ctl_outfile f;
	struct memory m = { 0 };
	_cleanup_free_ char *text = NULL;
	enum perfctl_exit rc;
	int k;

	if (o->output) {
		k = ctl_outfile_open(o->output, &f);
		if (k < 0)
			return ctl_output_done(env, o->output, k);
		rc = receive_frame(env, fd, n, put_outfile, &f, o->output);
		if (rc != PERFCTL_EXIT_OK) {
			ctl_outfile_abort(&f);
			return rc;
		}
		k = ctl_outfile_commit(&f);
		return k < 0 || env->json ? ctl_output_done(env, o->output, k) : PERFCTL_EXIT_OK;
	}
	if (!env->json) {
		rc = receive_frame(env, fd, n, put_stdout, NULL, NULL);
		/* main() reports the stdout error; no summary for a lost profile. */
		return rc == PERFCTL_EXIT_OK && fflush(stdout) != 0 ? PERFCTL_EXIT_FAILURE : rc;
	}
	if (n > CTL_CLIENT_MAX_RESPONSE_BYTES / 2) {
		ctl_error(env, CTL_ERR_PROTOCOL, "%s", ctl_client_strerror(-EMSGSIZE));
		return PERFCTL_EXIT_FAILURE;
	}
	m.data = malloc(n ? n : 1);
	text = malloc(BASE64_ENCODED_LEN(n) + 1);
	if (!m.data || !text) {
		free(m.data);
		ctl_error(env, CTL_ERR_IO, "out of memory reading the profile");
		return PERFCTL_EXIT_FAILURE;
	}
	rc = receive_frame(env, fd, n, put_memory, &m, NULL);
	if (rc == PERFCTL_EXIT_OK) {
		size_t len = base64_encode(m.data, m.len, text);

		json_object_object_del(resp, "profile_bytes");
		if (!ctl_json_put(resp, "encoding", json_object_new_string("base64")) ||
		    !ctl_json_put(resp, "profile", json_object_new_string_len(text, (int)len))) {
			ctl_error(env, CTL_ERR_IO, "out of memory");
			rc = PERFCTL_EXIT_FAILURE;
		}
	}
	free(m.data);
	return rc != PERFCTL_EXIT_OK ? rc : ctl_print_answer(env, resp);
}

/* A text or JSON profile, in the answer: to stdout or o's file, or the
 * whole answer with --json. */
static enum perfctl_exit write_profile(struct ctl_env *env, struct json_object *resp,
				       const struct ctl_snapshot_opts *o)
{
	struct json_object *profile = ctl_json_path(resp, "profile");
	const char *data;
	size_t len;

	if (!profile) {
		ctl_error(env, CTL_ERR_PROTOCOL, "perfd's snapshot answer has no \"profile\"");
		return PERFCTL_EXIT_FAILURE;
	}
	if (env->json && !o->output)
		return ctl_print_answer(env, resp);

	if (env->json) {
		data = json_object_to_json_string_length(resp, JSON_C_TO_STRING_PLAIN |
								       JSON_C_TO_STRING_NOSLASHESCAPE,
							 &len);
		if (!data) {
			ctl_error(env, CTL_ERR_IO, "out of memory formatting perfd's answer");
			return PERFCTL_EXIT_FAILURE;
		}
	} else if (json_object_is_type(profile, json_type_string)) {
		data = json_object_get_string(profile);
		len = (size_t)json_object_get_string_len(profile);
	} else {
		/* a structured format (json): the object, as one document */
		data = json_object_to_json_string_length(profile, JSON_C_TO_STRING_PLAIN |
									  JSON_C_TO_STRING_NOSLASHESCAPE,
							 &len);
		if (!data) {
			ctl_error(env, CTL_ERR_IO, "out of memory formatting the profile");
			return PERFCTL_EXIT_FAILURE;
		}
	}

	if (o->output)
		return ctl_output(env, o->output, data, len);
	if ((len > 0 && fwrite(data, 1, len, stdout) != len) || fflush(stdout) != 0) {
		/* main() reports the stdout error; no summary for a lost profile. */
		return PERFCTL_EXIT_FAILURE;
	}
	return PERFCTL_EXIT_OK;
}

/* A binary profile in base64 in the answer (from a perfd before frames,
 * which ignores "frame"): its bytes, decoded, to o's file or stdout; with
 * --json and no file the answer as it is, as with a frame. */
static enum perfctl_exit write_base64(struct ctl_env *env, struct json_object *resp,
				      const struct ctl_snapshot_opts *o)
{
	struct json_object *profile = ctl_json_path(resp, "profile");
	_cleanup_free_ char *bytes = NULL;
	ssize_t n;
	size_t len;

	if (env->json && !o->output)
		return ctl_print_answer(env, resp);
	if (!json_object_is_type(profile, json_type_string)) {
		ctl_error(env, CTL_ERR_PROTOCOL, "perfd's snapshot answer has no \"profile\"");
		return PERFCTL_EXIT_FAILURE;
	}
	len = (size_t)json_object_get_string_len(profile);
	bytes = malloc(len / 4 * 3 + 1);
	if (!bytes) {
		ctl_error(env, CTL_ERR_IO, "out of memory reading the profile");
		return PERFCTL_EXIT_FAILURE;
	}
	n = base64_decode(json_object_get_string(profile), len, bytes);
	if (n < 0) {
		ctl_error(env, CTL_ERR_PROTOCOL,
			  "perfd's snapshot answer has a \"profile\" that is not base64");
		return PERFCTL_EXIT_FAILURE;
	}
	if (o->output)
		return ctl_output(env, o->output, bytes, (size_t)n);
	if ((n > 0 && fwrite(bytes, 1, (size_t)n, stdout) != (size_t)n) || fflush(stdout) != 0)
		return PERFCTL_EXIT_FAILURE; /* main() reports the stdout error */
	return PERFCTL_EXIT_OK;
}

enum perfctl_exit ctl_snapshot_write(struct ctl_env *env, int fd, struct json_object *resp,
				     const struct ctl_snapshot_opts *o)
{
	struct json_object *note, *encoding = ctl_json_path(resp, "encoding");
	enum perfctl_exit rc;
	uint64_t n;

	if (json_object_is_type(encoding, json_type_string) &&
	    strcmp(json_object_get_string(encoding), "base64") == 0) {
		rc = write_base64(env, resp, o);
	} else if (encoding) {
		rc = frame_size(env, resp, encoding, &n);
		if (rc == PERFCTL_EXIT_OK)
			rc = write_frame(env, fd, n, resp, o);
	} else {
		rc = write_profile(env, resp, o);
	}
	if (rc != PERFCTL_EXIT_OK || env->json)
		return rc;

	if (!o->stop_is_end && json_object_get_boolean(ctl_json_path(resp, "stopped"))) {
		double covered = 0;

		(void)ctl_json_double(resp, "duration_seconds", &covered);
		fprintf(stderr,
			"perfctl: note: stopped %.1f s into the %.1f s snapshot; the profile holds what was sampled until then\n",
			covered, o->sel.duration);
	}
	note = ctl_json_path(resp, "note");
	if (json_object_is_type(note, json_type_string) && json_object_get_string_len(note) > 0)
		ctl_message("note", json_object_get_string(note),
			    (size_t)json_object_get_string_len(note));
	print_summary(resp, o);
	return PERFCTL_EXIT_OK;
}

const struct ctl_command ctl_cmd_snapshot = {
	.name = "snapshot",
	.fn = do_snapshot,
	.options = snapshot_options,
	.shortopts = snapshot_shortopts,
	.summary = "the profile of some processes, from now on or from perfd's history",
	.synopsis = "(--pid PID... | --comm NAME | --cgroup PATH | --unit NAME | --all)\n"
		    "    (--duration DURATION | --since DURATION | --from TIME [--to TIME])\n"
		    "    [--kind " PERFD_KIND_NAMES("|", "|") "] [--format folded|json|pprof|speedscope|html|svg]\n"
		    "    [--lines] [--no-lines] [--threads] [-o FILE]",
	.help = "The profile of those processes from now on for DURATION (at most 1h), or\n"
		"from perfd's history: the last DURATION, or a range of times.\n"
		"A DURATION is seconds (90) or 90s, 10m, 1h30m.  A TIME is RFC 3339\n"
		"(2026-12-01T08:00:00Z), Unix seconds, local time (2026-12-01 08:00, or\n"
		"08:00[:SS]: today, yesterday when that is still to come) or relative to\n"
		"now (-15m).\n"
		"The profile goes to stdout, or to FILE (replaced only when complete; its\n"
		"extension picks the format when --format is absent); a note and a summary\n"
		"go to stderr.  A binary format (pprof) is not written to a terminal: give\n"
		"-o FILE or a pipe.  A live snapshot shows its progress on stderr when that\n"
		"is a terminal; Ctrl-C ends it early and keeps what was sampled (a second\n"
		"Ctrl-C abandons it).\n"
		"  --lines                native frames as function (file:line)\n"
		"  --no-lines             Python frames per function, not per line\n"
		"  --threads              each stack rooted at [thread TID COMM]\n",
};
