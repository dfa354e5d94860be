/* SPDX-License-Identifier: MIT */
/*
 * perfctl.h - what perfctl's main() shares with its subcommands: the exit
 * codes (a stable interface for scripts, listed in the usage text too), the
 * global settings, and one do_<name>() per subcommand family.
 *
 * Subcommands return an enum perfctl_exit rather than -errno: they are the
 * layer that decides what an error means to the user, and main() passes the
 * value on unchanged.  Nothing below main() calls exit().
 */
#ifndef PERFCTL_H
#define PERFCTL_H

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
};

/* Each takes the words from the subcommand's name on (argv[0] is the name)
 * and may set env->json or env->socket_path from options given after it.
 * On PERFCTL_EXIT_USAGE the specific complaint has been printed and main()
 * adds the usage text. */
typedef enum perfctl_exit (*ctl_command_fn)(struct ctl_env *env, int argc, char **argv);

enum perfctl_exit do_status(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_ps(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_snapshot(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_mem(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_report(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_diff(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_diagnose(struct ctl_env *env, int argc, char **argv);
enum perfctl_exit do_top(struct ctl_env *env, int argc, char **argv);

#endif
