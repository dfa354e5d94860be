/* SPDX-License-Identifier: MIT */
/*
 * test-config.c - daemon/config.c: the option table read from flags and
 * from the configuration file.  Flags win over the file, a list given by
 * flags replaces the file's, bad input names FILE:LINE or the flag, a
 * missing default file is no error, and a reload keeps the options that
 * take a restart while taking the reloadable ones.
 */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "perfd/macro.h"

static char conf_path[64];

static void write_conf(const char *text)
{
	FILE *f;

	snprintf(conf_path, sizeof(conf_path), "/tmp/perfd-test-config-%d.conf", (int)getpid());
	f = fopen(conf_path, "w");
	cr_assert(f);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

static void remove_conf(void)
{
	if (conf_path[0])
		unlink(conf_path);
}

/* Loads with argv (NULL-terminated, argv[0] added) and --config
 * conf_path when with_file.  Returns config_load's result. */
static int load(bool with_file, const char *const *flags, struct config **ret, char *err)
{
	char *argv[32] = { (char *)"perfd" };
	struct config_args *args = NULL;
	int argc = 1, r;

	if (with_file) {
		argv[argc++] = (char *)"--config";
		argv[argc++] = conf_path;
	}
	for (size_t i = 0; flags && flags[i]; i++)
		argv[argc++] = (char *)flags[i];
	r = config_args_parse(argc, argv, &args, err, CONFIG_ERROR_MAX);
	if (r < 0)
		return r;
	cr_assert_eq(r, CONFIG_ARGS_RUN);
	r = config_load(args, ret, err, CONFIG_ERROR_MAX);
	config_args_free(args);
	return r;
}

TestSuite(config, .fini = remove_conf);

Test(config, defaults_without_a_file)
{
	struct config *c = NULL;
	char err[CONFIG_ERROR_MAX];

	cr_assert_eq(load(false, NULL, &c, err), 0, "%s", err);
	cr_assert_eq(c->frequency_hz, 99);
	cr_assert_eq(c->retention_s, 3600);
	cr_assert_eq(c->export.interval_s, 60);
	cr_assert_eq(c->export.output_max_bytes, 1ULL << 30);
	cr_assert_null(c->export.output_dir);
	cr_assert_eq(c->memory_sample_bytes, 4u << 20);
	config_free(c);
}

Test(config, file_then_flags_win)
{
	static const char *const flags[] = { "--frequency", "199", "--label", "env=flag", NULL };
	struct config *c = NULL;
	char err[CONFIG_ERROR_MAX];

	write_conf("# comment\n; also a comment\n[perfd]\n  frequency = 49  \ninterval = 5s\n"
		   "output-dir = \"/var/lib/perfd\"\nlabel = env=file\nlabel = team=perf\n"
		   "no-python = yes\nmemory-sample-bytes = 512K\n");
	cr_assert_eq(load(true, flags, &c, err), 0, "%s", err);
	cr_assert_eq(c->frequency_hz, 199, "the flag wins");
	cr_assert_eq(c->export.interval_s, 5);
	cr_assert_str_eq(c->export.output_dir, "/var/lib/perfd");
	cr_assert(c->no_python);
	cr_assert_eq(c->memory_sample_bytes, 512u << 10);
	cr_assert_eq(c->export.n_labels, 1, "flags' labels replace the file's");
	cr_assert_str_eq(c->export.labels[0].key, "env");
	cr_assert_str_eq(c->export.labels[0].value, "flag");
	cr_assert_str_eq(c->config_path, conf_path);
	config_free(c);
}

struct bad_case {
	char text[96];
	char message[96];
};

Test(config, bad_files_name_their_line)
{
	static const struct bad_case cases[] = {
		{ "frequency = 99\nfrequency = fast\n", ":2: frequency takes a whole number" },
		{ "[daemon]\n", ":1: unknown section [daemon]" },
		{ "\n\nsampling = 3\n", ":3: unknown option 'sampling'" },
		{ "interval\n", ":1: expected NAME = VALUE" },
		{ "config = /etc/x\n", ":1: 'config' can only be given on the command line" },
		{ "label = a b=c\n", ":1: label takes KEY=VALUE" },
		{ "label = k=a,b\n", ":1: label takes a VALUE" },
		{ "label = pid=1\n", ":1: label takes a KEY other than hostname, pid, tid, comm, unit or cgroup" },
		{ "no-python = maybe\n", ":1: no-python takes yes or no" },
		{ "ringbuf-mib = 3\n", ":1: ringbuf-mib takes a power-of-two number" },
		{ "interval = 0.5s\n", ":1: interval takes whole seconds" },
		{ "push-url = ftp://x\n", "push-url takes an http:// or https:// URL" },
		{ "output-dir = relative\n", "output-dir takes an absolute path" },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct config *c = NULL;
		char err[CONFIG_ERROR_MAX];

		write_conf(cases[i].text);
		cr_assert_lt(load(true, NULL, &c, err), 0, "accepted: %s", cases[i].text);
		cr_assert_null(c);
		cr_assert(strstr(err, cases[i].message), "'%s' gives '%s', expected '%s'", cases[i].text,
			  err, cases[i].message);
	}
}

Test(config, bad_flags_name_the_flag)
{
	static const char *const bad_value[] = { "--max-memory", "2", NULL };
	static const char *const unknown[] = { "--sampling", NULL };
	struct config *c = NULL;
	char err[CONFIG_ERROR_MAX];

	cr_assert_lt(load(false, bad_value, &c, err), 0);
	cr_assert(strstr(err, "--max-memory takes a whole number from 4 to 65536, not '2'"), "%s", err);
	cr_assert_lt(load(false, unknown, &c, err), 0);
	cr_assert(strstr(err, "--sampling"), "%s", err);
	snprintf(conf_path, sizeof(conf_path), "/nonexistent/perfd.conf");
	cr_assert_lt(load(true, NULL, &c, err), 0, "a missing --config file is an error");
	cr_assert(strstr(err, "/nonexistent/perfd.conf"), "%s", err);
	conf_path[0] = '\0';
}

/* perfd sets hostname, pid, tid, comm, unit and cgroup on every profile:
 * a label may not give them a second value; service_name names the
 * service and may be set. */
Test(config, built_in_label_keys_are_refused)
{
	static const char *const builtin[] = { "--label", "env=prod", "--label", "comm=x", NULL };
	static const char *const service[] = { "--label", "service_name=web", NULL };
	struct config *c = NULL;
	char err[CONFIG_ERROR_MAX];

	cr_assert_lt(load(false, builtin, &c, err), 0, "accepted --label comm=x");
	cr_assert(strstr(err, "--label takes a KEY other than hostname, pid, tid, comm, unit or cgroup, "
			      "which perfd sets itself, not 'comm'"),
		  "%s", err);
	cr_assert_eq(load(false, service, &c, err), 0, "%s", err);
	cr_assert_eq(c->export.n_labels, 1);
	cr_assert_str_eq(c->export.labels[0].key, "service_name");
	cr_assert_str_eq(c->export.labels[0].value, "web");
	config_free(c);
}

Test(config, reload_keeps_what_takes_a_restart)
{
	struct config *running = NULL, *next = NULL;
	char err[CONFIG_ERROR_MAX], kept[256], changed[256];

	write_conf("frequency = 99\nlabel = team=a\nsocket = /run/a.sock\nmax-stacks = 10\n");
	cr_assert_eq(load(true, NULL, &running, err), 0, "%s", err);
	write_conf("frequency = 199\nlabel = team=b\nsocket = /run/b.sock\npush-url = http://x:4040\n"
		   "max-stacks = 20\n");
	cr_assert_eq(load(true, NULL, &next, err), 0, "%s", err);
	cr_assert_eq(config_keep_restart_only(running, next, kept, sizeof(kept)), 2);
	cr_assert_str_eq(kept, "socket, max-stacks");
	cr_assert_eq(next->max_stacks, 10);
	cr_assert_str_eq(next->socket_path, "/run/a.sock");
	/* the frequency is applied (manager.c's set_frequency) */
	cr_assert_eq(next->frequency_hz, 199);
	cr_assert_eq(config_diff(running, next, changed, sizeof(changed)), 3);
	cr_assert_str_eq(changed, "frequency, push-url, label");
	cr_assert_str_eq(next->export.labels[0].value, "b");
	config_free(running);
	config_free(next);
}

Test(config, status_hides_secrets)
{
	static const char *const flags[] = { "--push-bearer-token", "s3cret", "--push-url",
					     "https://alice:pw-in-url@pyro.example:4040/base",
					     "--otlp-url", "http://bob@otel.example:4318", NULL };
	struct config *c = NULL;
	char err[CONFIG_ERROR_MAX];
	json_object *o;
	char *text;

	cr_assert_eq(load(false, flags, &c, err), 0, "%s", err);
	text = config_to_json(c, true);
	cr_assert(text);
	o = json_tokener_parse(text);
	cr_assert(o, "not JSON: %s", text);
	cr_assert_null(strstr(text, "s3cret"), "%s", text);
	cr_assert(strstr(text, "\"push-bearer-token\":\"(set)\""), "%s", text);
	cr_assert_null(strstr(text, "pw-in-url"), "%s", text);
	cr_assert_null(strstr(text, "alice"), "%s", text);
	cr_assert_null(strstr(text, "bob"), "%s", text);
	cr_assert_str_eq(json_object_get_string(json_object_object_get(o, "push-url")),
			 "https://pyro.example:4040/base");
	cr_assert_str_eq(json_object_get_string(json_object_object_get(o, "otlp-url")),
			 "http://otel.example:4318");
	json_object_put(o);
	free(text);
	config_free(c);
}

Test(config, status_shows_users_endpoints_only)
{
	static const char *const flags[] = { "--push-url", "https://alice:pw@pyro.example:4040/base?token=t0k",
					     "--push-tenant", "acme", "--push-basic-auth", "u:p",
					     "--output-dir", "/srv/profiles", "--otlp-url",
					     "http://[::1]:4318", NULL };
	struct config *c = NULL;
	char err[CONFIG_ERROR_MAX];
	json_object *o;
	char *text;

	cr_assert_eq(load(false, flags, &c, err), 0, "%s", err);
	text = config_to_json(c, false);
	cr_assert(text);
	o = json_tokener_parse(text);
	cr_assert(o, "not JSON: %s", text);
	cr_assert_null(strstr(text, "t0k"), "%s", text);
	cr_assert_null(strstr(text, "base"), "%s", text);
	cr_assert_null(strstr(text, "acme"), "%s", text);
	cr_assert_null(strstr(text, "profiles"), "%s", text);
	cr_assert_null(strstr(text, "basic-auth"), "%s", text);
	cr_assert_null(strstr(text, "alice"), "%s", text);
	cr_assert_str_eq(json_object_get_string(json_object_object_get(o, "push-url")),
			 "https://pyro.example:4040");
	cr_assert_str_eq(json_object_get_string(json_object_object_get(o, "otlp-url")),
			 "http://[::1]:4318");
	cr_assert(json_object_object_get_ex(o, "frequency", NULL));
	json_object_put(o);
	free(text);
	config_free(c);
}
