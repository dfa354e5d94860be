/* SPDX-License-Identifier: MIT */
/*
 * perfctl.c - perfctl's main(): global options, the subcommand table and
 * the usage text.
 *
 * Design: like bpftool, a table of { "name", do_name } dispatches the first
 * word; each subcommand parses its own options (and accepts the global ones
 * after its name too).  main() alone owns the process's fate: it prints the
 * usage after a usage error, checks stdout for write errors (a full disk or
 * a closed pipe must not look like success) and returns the exit code the
 * subcommand chose.  SIGPIPE is ignored so that a closed pipe shows up as
 * EPIPE on stdout and is reported, rather than killing perfctl silently.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "perfctl.h"
#include "perfd/macro.h"
#include "perfd/protocol.h"
#include "perfd/version.h"

static const struct command {
	const char *name;
	ctl_command_fn fn;
} commands[] = {
	{ "status", do_status },
	{ "ps", do_ps },
	{ "snapshot", do_snapshot },
	{ "mem", do_mem },
	{ "report", do_report },
	{ "diff", do_diff },
	{ "diagnose", do_diagnose },
	{ "top", do_top },
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: perfctl [--socket PATH] [--json] COMMAND [OPTIONS]\n"
		"\n"
		"Commands:\n"
		"  status                 perfd's counters, losses and limits\n"
		"  ps [--interval S] [--all]\n"
		"                         processes seen on CPU, or whose memory moved, in the\n"
		"                         last S seconds (1..%d, default %d), busiest first;\n"
		"                         a steady RSS rise shows as +RATE! (a leak suspect);\n"
		"                         --all: every live process perfd knows\n"
		"  snapshot (--pid PID... | --comm NAME | --cgroup PATH | --unit NAME | --all)\n"
		"           (--duration SECONDS | --since DURATION | --from TIME [--to TIME])\n"
		"           [--kind cpu|memory|offcpu] [--format folded|json|pprof|speedscope|html|svg]\n"
		"           [--lines] [--no-lines] [--threads] [-o FILE]\n"
		"                         the profile of those processes from now on for\n"
		"                         0 < SECONDS <= %d, or from perfd's history: the\n"
		"                         last DURATION (30s, 10m, 1h) or a range of times\n"
		"                         (RFC 3339 or Unix seconds); written to stdout, or to\n"
		"                         FILE (replaced only when complete; its extension picks\n"
		"                         the format when --format is absent); a note and a\n"
		"                         summary go to stderr.\n"
		"                         --lines: native frames as function (file:line);\n"
		"                         --no-lines: Python frames per function, not per line;\n"
		"                         --threads: each stack rooted at [thread TID COMM]\n"
		"  mem --pid PID [--since DURATION] [--top N]\n"
		"                         the process's memory: RSS now by kind, the peak and\n"
		"                         when, the growth rate, the RSS timeline (default the\n"
		"                         last 10m), the code sites whose growth was sampled,\n"
		"                         with file:line, and what built the peak\n"
		"  report (FILE | SELECTION WHEN) [--kind cpu|memory|offcpu]\n"
		"         [--sort self|total|name] [--top N] [--callers FUNC] [--callees FUNC]\n"
		"         [--lines]\n"
		"                         a table of functions, self and total value with\n"
		"                         their shares, from a snapshot FILE (folded, json or\n"
		"                         pprof, told by its content) or from perfd, for the\n"
		"                         processes and time snapshot takes; --top N rows\n"
		"                         (default 20, 0: all); --callers/--callees FUNC: who\n"
		"                         calls FUNC and what it calls, with their shares of\n"
		"                         its total; --lines: a row per function and line\n"
		"  diff BEFORE AFTER [--kind cpu|memory|offcpu] [--top N]\n"
		"       [--format text|html|svg] [-o FILE]\n"
		"                         per function, the change of its self and total share\n"
		"                         (percent of each profile's total) between two snapshot\n"
		"                         files of one kind, in any formats; the largest change\n"
		"                         first; --top N rows (default 20, 0: all); html, svg:\n"
		"                         a differential flame graph of AFTER, red where a\n"
		"                         frame's share grew, blue where it shrank, to stdout or\n"
		"                         FILE (.html or .svg picks the format)\n"
		"  diagnose SELECTION WHEN\n"
		"                         a few sentences on where the time and the memory\n"
		"                         of those processes went: the window and samples,\n"
		"                         the dominant function by self and by total (and\n"
		"                         whether it only coordinates callees), the peak RSS,\n"
		"                         the top growth site and the trend, and what the\n"
		"                         samples cannot show (too few, mostly waiting)\n"
		"  top [-b [-n N] [--json]] [-d SECONDS] [--pid PID | -f] [--sort KEY]\n"
		"      [--filter TEXT] [-M] [-k] [-a] [--rows N]\n"
		"                         the live view, every SECONDS (default %d): processes\n"
		"                         with CPU %%, RSS, peak, growth and top function; the\n"
		"                         functions of one (--pid, Enter) or all (-f), self and\n"
		"                         total, CPU or memory growth (-M); a function's callers\n"
		"                         and callees (Enter); keys: c m p g sort, / filter,\n"
		"                         k kernel threads, a all, s t sort, M memory, Esc back,\n"
		"                         q quit.  -b: plain frames (--json: one object a line)\n"
		"  help                   this text\n"
		"\n"
		"Options (before or after the command):\n"
		"  --socket PATH          perfd's socket; default $%s, else %s\n"
		"  --json                 print exactly one JSON object on stdout: perfd's\n"
		"                         answer as it came ({\"version\":1,\"ok\":true,...}), or\n"
		"                         {\"ok\":false,\"error\":{\"code\":...,\"message\":...}}\n"
		"  -h, --help             this text\n"
		"  --version              perfctl's version\n"
		"\n"
		"Exit status:\n"
		"  %d  success\n"
		"  %d  failure: perfd reported an error, or an I/O or protocol error\n"
		"  %d  usage error: bad or missing arguments, unknown command\n"
		"  %d  cannot connect to perfd\n"
		"  %d  no such process (snapshot, report, diagnose, top --pid)\n",
		PERFD_PS_MAX_INTERVAL, PERFD_PS_DEFAULT_INTERVAL, PERFD_SNAPSHOT_MAX_SECONDS,
		PERFD_TOP_DEFAULT_INTERVAL, PERFD_SOCKET_ENV, PERFD_DEFAULT_SOCKET, PERFCTL_EXIT_OK, PERFCTL_EXIT_FAILURE,
		PERFCTL_EXIT_USAGE, PERFCTL_EXIT_CONNECT, PERFCTL_EXIT_NO_PROCESS);
}

/* True when the words after a command ask for help.  A "--" ends options. */
static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return false;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return true;
	}
	return false;
}

static enum perfctl_exit run(struct ctl_env *env, int argc, char **argv)
{
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{}
	};
	const char *name;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", options, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return PERFCTL_EXIT_OK;
		case 'V':
			printf("perfctl %s\n", perfd_version);
			return PERFCTL_EXIT_OK;
		default:
			if (ctl_common_option(env, "perfctl", c, argv) < 0)
				return PERFCTL_EXIT_USAGE;
			break;
		}
	}
	if (optind >= argc) {
		ctl_error(env, CTL_ERR_USAGE, "missing command");
		return PERFCTL_EXIT_USAGE;
	}

	name = argv[optind];
	if (strcmp(name, "help") == 0) {
		usage(stdout);
		return PERFCTL_EXIT_OK;
	}
	for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
		if (strcmp(name, commands[i].name) != 0)
			continue;
		if (wants_help(argc - optind, argv + optind)) {
			usage(stdout);
			return PERFCTL_EXIT_OK;
		}
		return commands[i].fn(env, argc - optind, argv + optind);
	}
	ctl_error(env, CTL_ERR_USAGE, "unknown command '%s'", name);
	return PERFCTL_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	struct ctl_env env = { .socket_path = PERFD_DEFAULT_SOCKET };
	const char *s = getenv(PERFD_SOCKET_ENV);
	enum perfctl_exit rc;

	if (s && *s)
		env.socket_path = s;
	(void)signal(SIGPIPE, SIG_IGN);

	rc = run(&env, argc, argv);
	if (rc == PERFCTL_EXIT_USAGE)
		usage(stderr);

	/* errno still holds the cause when a subcommand stopped at a failed
	 * write; fflush() sets it when the failure happens here. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "perfctl: cannot write to stdout: %s\n",
			strerror(errno ? errno : EIO));
		if (rc == PERFCTL_EXIT_OK)
			rc = PERFCTL_EXIT_FAILURE;
	}
	return rc;
}
