/* SPDX-License-Identifier: MIT */
/*
 * config.h - perfd's settings: one table of options drives the command
 * line, the configuration file, --help, the effective configuration that
 * `status` shows, and what a SIGHUP may change.
 *
 * Every option is a row (name, value type, range, where it lands in
 * struct config, whether SIGHUP may change it, its help).  The same row's
 * parser reads "--name VALUE" and "name = VALUE" in the file, so both
 * take the same values and say the same things about bad ones.
 *
 * The file (default PERFD_DEFAULT_CONFIG, --config PATH) is INI-style:
 *
 *   # comment                     ; comment too
 *   [perfd]                       the one section; optional
 *   frequency = 99                an option, named as its flag
 *   label = env=prod              a list: one line per element
 *   no-python = yes               a flag: yes/no, true/false, on/off, 1/0
 *
 * A load starts from the defaults, applies the file, then the flags:
 * flags win, a list given by flags replaces the file's.  Bad input is an
 * error naming FILE:LINE (or the flag) and what was expected; a missing
 * default file is no error, a missing --config file is.
 *
 * SIGHUP loads again (the same flags, the file as it is now).  Options
 * marked reloadable (the exporters', labels, --verbose, the frequency:
 * manager.c's set_frequency) take effect at once; the others need what
 * they configure rebuilt (the store's limits, the BPF maps' sizes, the
 * ring buffer, the socket, --fixed-period), so a changed one is logged and
 * keeps its running value (config_keep_restart_only).
 */
#ifndef PERFD_CONFIG_H
#define PERFD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "export/export_opts.h"

#define PERFD_DEFAULT_CONFIG "/etc/perfd/perfd.conf"
#define CONFIG_MAX_FILE_BYTES (1u << 20)
#define CONFIG_ERROR_MAX 512

struct config {
	char *socket_path;
	uint64_t frequency_hz;
	uint64_t max_processes, max_stacks, max_frames;
	uint64_t retention_s;
	uint64_t max_memory_mib;
	uint64_t memory_sample_bytes;
	bool no_memory;
	uint64_t offcpu_rate; /* off-CPU stacks taken per CPU per second, at most about */
	bool no_offcpu;
	bool fixed_period; /* every tick of a 1/frequency timer samples */
	uint64_t ringbuf_mib; /* 0: sized from the frequency and CPUs */
	uint64_t unwind_mib;
	uint64_t unwind_build_cpu_ms;
	bool no_demangle;
	bool no_python;
	char *debug_dir;
	uint64_t symbol_cache_mib; /* 0: the symbolizer's default */
	uint64_t max_modules, max_module_fds;
	uint64_t client_idle_timeout_s;
	char *metrics_address; /* NULL: no /metrics */
	char *state_dir;          /* NULL: PERSIST_DEFAULT_DIR */
	uint64_t state_max_bytes;
	bool no_state;
	bool verbose;
	bool check;           /* perfd --check: load, describe, unload, exit */
	uint32_t test_refuse; /* test-only: PERFD_REFUSE_* bits (perfd/tiers.h) */
	struct export_opts export;
	char *config_path; /* the file read; NULL: none */
};

/* The command line, parsed once at start and applied at every load. */
struct config_args;

enum config_args_result {
	CONFIG_ARGS_RUN,
	CONFIG_ARGS_HELP,
	CONFIG_ARGS_VERSION,
};

/* Parses argv (flags only, no values checked yet: config_load does).
 * Returns a config_args_result, or -EINVAL with the reason in err. */
int config_args_parse(int argc, char **argv, struct config_args **ret, char *err, size_t errlen);
struct config_args *config_args_free(struct config_args *a);

/* The defaults, then the file, then the flags, then the checks across
 * options.  Returns 0, or -errno with the reason in err ("FILE:LINE:
 * ..." or "--flag ..."). */
int config_load(const struct config_args *args, struct config **ret, char *err, size_t errlen);
struct config *config_free(struct config *c);

/* --help's option list, from the table. */
void config_help(FILE *f);

/* For each option SIGHUP may not change whose value differs between
 * running and next: puts running's value back into next and appends its
 * name to changed (comma-separated, truncated to len).  Returns how many. */
size_t config_keep_restart_only(const struct config *running, struct config *next, char *changed,
				size_t len);
/* The names of the options whose values differ, as above, without changing
 * anything.  Returns how many. */
size_t config_diff(const struct config *a, const struct config *b, char *changed, size_t len);

/* The effective configuration: every option by name (secrets as "(set)"
 * or null, URLs without the user:password@ they may embed), and
 * "config_file".  Not for root (root false): no secrets, tenants or output
 * directory at all, and URLs as scheme://host:port, since a path or a
 * query may hold a token.  As JSON text (malloc'd, the caller's); NULL
 * when out of memory. */
char *config_to_json(const struct config *c, bool root);

#endif
