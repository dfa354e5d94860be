/* SPDX-License-Identifier: MIT */
/*
 * perfctl.c - perfctl's main(): global options, the subcommand table and
 * the overview.
 *
 * Design: like bpftool, a table of { "name", do_name } dispatches the first
 * word; each subcommand parses its own options (and accepts the global ones
 * after its name too) and keeps its help next to it (struct ctl_command),
 * from which `perfctl --help` and `perfctl NAME --help` are printed.
 * main() alone owns the process's fate: after a usage error (one line, said
 * where it was found) it adds only a hint at the help, checks stdout for write errors (a full disk or
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

static const struct ctl_command *const commands[] = {
	&ctl_cmd_status, &ctl_cmd_ps,       &ctl_cmd_snapshot, &ctl_cmd_mem,
	&ctl_cmd_report, &ctl_cmd_diff,     &ctl_cmd_diagnose, &ctl_cmd_top,
	&ctl_cmd_record,
};

static void options_and_exit_status(FILE *f)
{
	fprintf(f,
		"Options (before or after the command):\n"
		"  --socket PATH          perfd's socket; default $%s, else %s\n"
		"  --json                 print exactly one JSON object on stdout: perfd's\n"
		"                         answer as it came ({\"version\":1,\"ok\":true,...}), or\n"
		"                         {\"ok\":false,\"error\":{\"code\":...,\"message\":...}}\n"
		"  -h, --help             the overview, or after a command its own help\n"
		"  --version              perfctl's version\n"
		"\n"
		"Exit status:\n"
		"  %d  success\n"
		"  %d  failure: perfd reported an error, or an I/O or protocol error\n"
		"  %d  usage error: bad or missing arguments, unknown command\n"
		"  %d  cannot connect to perfd\n"
		"  %d  no such process (snapshot, report, diagnose, top --pid)\n",
		PERFD_SOCKET_ENV, PERFD_DEFAULT_SOCKET, PERFCTL_EXIT_OK, PERFCTL_EXIT_FAILURE,
		PERFCTL_EXIT_USAGE, PERFCTL_EXIT_CONNECT, PERFCTL_EXIT_NO_PROCESS);
}

/* `perfctl --help`: every command in a line, from the table. */
static void usage(FILE *f)
{
	fprintf(f, "Usage: perfctl [--socket PATH] [--json] COMMAND [OPTIONS]\n\nCommands:\n");
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
	fprintf(f, "  %-10s %s\n\n", "help", "this text");
	fprintf(f, "Run 'perfctl COMMAND --help' for a command's options.\n\n");
	options_and_exit_status(f);
}

/* `perfctl NAME --help`: that command's synopsis and help only. */
static void command_usage(FILE *f, const struct ctl_command *cmd)
{
	fprintf(f, "Usage: perfctl %s%s%s\n\n%s\n", cmd->name, *cmd->synopsis ? " " : "",
		cmd->synopsis, cmd->help);
	fprintf(f, "Every command also takes --socket PATH, --json and -h/--help; the exit\n"
		   "status is described by 'perfctl --help'.\n");
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

#define COMPLETE_OPTIONS "complete-options"

/* Whether short option c of shortopts (getopt's string) is one. */
static bool is_short(const char *shortopts, int c)
{
	return c > 0 && c < 128 && c != ':' && c != '+' && strchr(shortopts, c);
}

/* `perfctl --complete-options NAME` (not in the help: the shell
 * completion's, packaging/completion/): the options of NAME's table, the
 * one it parses with, one a line: "--long", then its short form when it
 * has one ("--output -o"), "=" after the long name of one that takes a
 * value ("--output= -o"); then the short ones without a long name, and
 * -h/--help, which every command takes.  For NAME "": perfctl's own (but
 * this one), then the commands, one a line.  So the completion cannot
 * drift from what perfctl parses.  Returns usage's exit code for an
 * unknown NAME. */
static enum perfctl_exit complete_options(const char *name, const struct option *own,
					  const char *own_shortopts)
{
	const struct ctl_command *cmd = NULL;
	const struct option *options;
	const char *shortopts;

	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (strcmp(commands[i]->name, name) == 0)
			cmd = commands[i];
	if (*name && !cmd)
		return PERFCTL_EXIT_USAGE;
	options = cmd ? cmd->options : own;
	shortopts = cmd ? cmd->shortopts : own_shortopts;
	for (const struct option *o = options; o->name; o++) {
		if (strcmp(o->name, COMPLETE_OPTIONS) == 0)
			continue;
		printf("--%s%s", o->name, o->has_arg == required_argument ? "=" : "");
		if (!o->flag && is_short(shortopts, o->val))
			printf(" -%c", o->val);
		printf("\n");
	}
	for (const char *c = shortopts; *c; c++) {
		const struct option *o = options;

		while (o->name && (o->flag || o->val != *c))
			o++;
		if (is_short(shortopts, *c) && !o->name)
			printf("-%c%s\n", *c, c[1] == ':' ? "=" : "");
	}
	if (cmd) {
		printf("--help -h\n");
		return PERFCTL_EXIT_OK;
	}
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		printf("%s\n", commands[i]->name);
	printf("help\n");
	return PERFCTL_EXIT_OK;
}

/* Runs the command line; *ret_command is the command it named (NULL:
 * none known), for the hint after a usage error. */
static enum perfctl_exit run(struct ctl_env *env, int argc, char **argv,
			     const struct ctl_command **ret_command)
{
	static const struct option options[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ COMPLETE_OPTIONS, required_argument, NULL, 'C' }, /* hidden */
		{}
	};
	static const char shortopts[] = "+:h";
	const char *name;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, options, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return PERFCTL_EXIT_OK;
		case 'V':
			printf("perfctl %s\n", perfd_version);
			return PERFCTL_EXIT_OK;
		case 'C':
			return complete_options(optarg, options, shortopts);
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
		if (strcmp(name, commands[i]->name) != 0)
			continue;
		*ret_command = commands[i];
		if (wants_help(argc - optind, argv + optind)) {
			command_usage(stdout, commands[i]);
			return PERFCTL_EXIT_OK;
		}
		return commands[i]->fn(env, argc - optind, argv + optind);
	}
	ctl_error(env, CTL_ERR_USAGE, "unknown command '%s'", name);
	return PERFCTL_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	struct ctl_env env = { .socket_path = PERFD_DEFAULT_SOCKET };
	const struct ctl_command *command = NULL;
	const char *s = getenv(PERFD_SOCKET_ENV);
	enum perfctl_exit rc;

	if (s && *s)
		env.socket_path = s;
	(void)signal(SIGPIPE, SIG_IGN);

	rc = run(&env, argc, argv, &command);
	if (rc == PERFCTL_EXIT_USAGE && !env.exit_is_cmds)
		fprintf(stderr, "Try 'perfctl%s%s --help'.\n", command ? " " : "",
			command ? command->name : "");

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
