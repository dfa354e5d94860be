/* SPDX-License-Identifier: MIT */
/*
 * perfctl.h - what perfctl's main() shares with its subcommands: the exit
 * codes (a stable interface for scripts, listed in the usage text too), the
 * global settings, and one do_<name>() and its help per subcommand.
 *
 * Subcommands return an enum perfctl_exit rather than -errno: they are the
 * layer that decides what an error means to the user, and main() passes the
 * value on unchanged.  Nothing below main() calls exit().
 */
#ifndef PERFCTL_H
#define PERFCTL_H

#include <getopt.h>
#include <stdbool.h>

enum perfctl_exit {
	PERFCTL_EXIT_OK = 0,
	PERFCTL_EXIT_FAILURE = 1,    /* daemon error, I/O error, bad answer */
	PERFCTL_EXIT_USAGE = 2,      /* bad or missing arguments, unknown command */
	PERFCTL_EXIT_CONNECT = 3,    /* cannot connect to perfd's socket */
	PERFCTL_EXIT_NO_PROCESS = 4, /* perfd answered no_such_process */
};

struct ctl_env {
	const char *socket_path;
	bool json; /* print JSON on stdout, errors included */
	bool exit_is_cmds; /* record: the exit code is its command's, not a verdict */
};

/* Each takes the words from the subcommand's name on (argv[0] is the name)
 * and may set env->json or env->socket_path from options given after it.
 * On PERFCTL_EXIT_USAGE the specific complaint has been printed (one line)
 * and main() adds the hint "Try 'perfctl NAME --help'." */
typedef enum perfctl_exit (*ctl_command_fn)(struct ctl_env *env, int argc, char **argv);

/* A subcommand: its function and its help, defined next to it (one place
 * per subcommand); perfctl.c's table lists them, and `perfctl --help`'s
 * overview and `perfctl NAME --help` are printed from these. */
struct ctl_command {
	const char *name;
	ctl_command_fn fn;
	const char *summary;  /* one line, for the overview */
	const char *synopsis; /* the words after "perfctl NAME", lines joined by
			       * "\n" and indented by four */
	const char *help;     /* what it does and its options, "\n"-ended lines */
	/* What it parses with getopt_long(): its long options and its short
	 * ones; `perfctl --complete-options NAME` lists them, and the shell
	 * completion asks it (packaging/completion/). */
	const struct option *options;
	const char *shortopts;
};

/* A number macro as a string literal, for the help texts. */
#define CTL_STR_(x) #x
#define CTL_STR(x) CTL_STR_(x)

extern const struct ctl_command ctl_cmd_status, ctl_cmd_ps, ctl_cmd_snapshot, ctl_cmd_mem,
	ctl_cmd_report, ctl_cmd_diff, ctl_cmd_diagnose, ctl_cmd_top, ctl_cmd_record;

enum perfctl_exit do_status(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_ps(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_snapshot(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_mem(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_report(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_diff(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_diagnose(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_top(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_record(struct ctl_env *env, int argc, char **argv);

#endif
