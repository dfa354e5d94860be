/* SPDX-License-Identifier: MIT */
/*
 * main.c - perfd's command line: reads the options (config.c: flags and
 * the configuration file, one table), and runs the manager.  The only
 * place that turns an error into an exit status: 2 for bad options or a
 * bad configuration file, 1 when perfd cannot start.  --check (check.h)
 * loads and unloads the BPF programs instead, and exits 1 when a feature
 * is unavailable.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <bpf/libbpf.h>

#include "base/heap.h"
#include "base/log.h"
#include "base/priority.h"
#include "check.h"
#include "config.h"
#include "manager.h"
#include "perfd/protocol.h"
#include "perfd/version.h"

#define EXIT_USAGE 2

/* libbpf's messages, the verifier's log among them, one log line each. */
static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	_cleanup_free_ char *text = NULL;
	char *line, *save = NULL;

	if (level == LIBBPF_DEBUG && log_get_max_level() < LOG_DEBUG)
		return 0;
	if (vasprintf(&text, fmt, ap) < 0)
		return 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		log_full_errno(level == LIBBPF_WARN ? LOG_WARNING : LOG_DEBUG, 0, "libbpf: %s", line);
	return 0;
}

static void raise_nofile_limit(void)
{
	struct rlimit rl;

	/* One descriptor per binary profiled, held until its symbols are read. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int make_socket_dir(const char *path)
{
	char *copy = strdup(path), *dir;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	dir = dirname(copy);
	/* Reachable by every user (the socket is 0666, see api/auth.h): a
	 * directory we create is 0755 whatever the umask; one that exists is
	 * the administrator's to set. */
	if (mkdir(dir, 0755) < 0) {
		if (errno != EEXIST)
			r = -errno;
	} else if (chmod(dir, 0755) < 0)
		r = -errno;
	free(copy);
	return r;
}

int main(int argc, char **argv)
{
	struct config_args *args = NULL;
	struct config *cfg = NULL;
	struct manager *m = NULL;
	char err[CONFIG_ERROR_MAX];
	int r;

	log_open();
	r = config_args_parse(argc, argv, &args, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "perfd: %s; try 'perfd --help'.\n", err);
		return EXIT_USAGE;
	}
	if (r == CONFIG_ARGS_HELP) {
		printf("Usage: perfd [OPTIONS]\n"
		       "System-wide sampling profiler daemon.  Every option can also be set in the\n"
		       "configuration file, as NAME = VALUE (flags win); SIGHUP reloads it.\n\n");
		config_help(stdout);
		return 0;
	}
	if (r == CONFIG_ARGS_VERSION) {
		printf("perfd %s\n", perfd_version);
		return 0;
	}
	r = config_load(args, &cfg, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "perfd: %s\n", err);
		config_args_free(args);
		return EXIT_USAGE;
	}
	if (cfg->verbose)
		log_set_max_level(LOG_DEBUG);

	libbpf_set_print(libbpf_log);
	if (cfg->check) {
		r = check_run(cfg, stdout);
		config_free(cfg);
		config_args_free(args);
		if (fflush(stdout) != 0 || ferror(stdout))
			return EXIT_FAILURE;
		return r;
	}
	raise_nofile_limit();
	/* before any thread: those it waits for inherit it */
	r = priority_raise_loop();
	if (r < 0)
		log_full_errno(LOG_NOTICE, r, "Failed to raise the loop's priority, ignoring: it answers later under load: %m");
	if (heap_configure() < 0)
		log_warning("Failed to limit malloc's arenas, ignoring: the heap may take more memory");
	r = make_socket_dir(cfg->socket_path);
	if (r < 0) {
		log_error_errno(r, "Failed to create the directory of %s: %m", cfg->socket_path);
		config_free(cfg);
		config_args_free(args);
		return EXIT_FAILURE;
	}
	/* the manager takes cfg, and reads args again at every SIGHUP */
	r = manager_new(cfg, args, &m);
	if (r >= 0)
		r = manager_run(m);
	manager_free(m);
	config_args_free(args);
	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
