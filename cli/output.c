/* SPDX-License-Identifier: MIT */
/*
 * output.c - perfctl's printing conventions in one place.
 *
 * Design: in --json mode stdout carries exactly one JSON object per run,
 * success or failure, so a script can always parse it and look at "ok";
 * in human mode data goes to stdout and every complaint goes to stderr as
 * "perfctl: ...".  Accessors forgive missing fields (printing "-") so that a
 * daemon that is older or newer than perfctl still gives a readable table.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "format.h"
#include "output.h"

void ctl_message(const char *prefix, const char *text, size_t len)
{
	_cleanup_free_ char *esc = ctl_escape(text, len);

	if (prefix)
		fprintf(stderr, "perfctl: %s: %s\n", prefix, esc ? esc : "(out of memory)");
	else
		fprintf(stderr, "perfctl: %s\n", esc ? esc : "(out of memory)");
}

void ctl_error(const struct ctl_env *env, const char *code, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		msg = NULL;
		fprintf(stderr, "perfctl: out of memory while reporting an error\n");
		return;
	}

	if (env && env->json) {
		struct json_object *o = json_object_new_object(), *e = json_object_new_object();

		if (o && e && json_object_object_add(o, "ok", json_object_new_boolean(0)) == 0 &&
		    json_object_object_add(e, "code", json_object_new_string(code)) == 0 &&
		    json_object_object_add(e, "message", json_object_new_string(msg)) == 0 &&
		    json_object_object_add(o, "error", e) == 0) {
			e = NULL; /* owned by o now */
			if (ctl_print_json(stdout, o) == 0) {
				json_object_put(o);
				return;
			}
		}
		json_object_put(e);
		json_object_put(o);
		/* Could not build JSON: the human form is better than nothing. */
	}
	ctl_message(NULL, msg, (size_t)n);
}

int ctl_common_option(struct ctl_env *env, const char *command, int c, char **argv)
{
	const char *word = optind > 0 ? argv[optind - 1] : "?";

	switch (c) {
	case 'j':
		env->json = true;
		return 0;
	case 'S':
		env->socket_path = optarg;
		return 0;
	}

	if (c == ':')
		ctl_error(env, CTL_ERR_USAGE, "%s: option '%s' needs a value", command, word);
	else if (optopt && optopt != '?')
		ctl_error(env, CTL_ERR_USAGE, "%s: unknown option '-%c'", command, optopt);
	else
		ctl_error(env, CTL_ERR_USAGE, "%s: unknown option '%s'", command, word);
	return -EINVAL;
}

int ctl_print_json(FILE *f, struct json_object *obj)
{
	const char *s;
	size_t len;

	s = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN |
							   JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	if (!s)
		return -ENOMEM;
	if (fwrite(s, 1, len, f) != len || fputc('\n', f) == EOF)
		return negative_errno();
	return 0;
}

enum perfctl_exit ctl_print_answer(const struct ctl_env *env, struct json_object *answer)
{
	int k = ctl_print_json(stdout, answer);

	if (k == -ENOMEM) {
		ctl_error(env, CTL_ERR_IO, "out of memory formatting perfd's answer");
		return PERFCTL_EXIT_FAILURE;
	}
	return k < 0 ? PERFCTL_EXIT_FAILURE : PERFCTL_EXIT_OK;
}

struct json_object *ctl_json_path(struct json_object *root, const char *path)
{
	struct json_object *cur = root;
	const char *p = path;

	while (cur) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		char key[64];

		if (n >= sizeof(key) || !json_object_is_type(cur, json_type_object))
			return NULL;
		memcpy(key, p, n);
		key[n] = '\0';
		if (!json_object_object_get_ex(cur, key, &cur))
			return NULL;
		if (!dot)
			return cur;
		p = dot + 1;
	}
	return NULL;
}

bool ctl_json_put(struct json_object *o, const char *key, struct json_object *value)
{
	if (value && json_object_object_add(o, key, value) == 0)
		return true;
	json_object_put(value);
	return false;
}

bool ctl_json_int(struct json_object *root, const char *path, int64_t *ret)
{
	struct json_object *v = ctl_json_path(root, path);

	if (json_object_is_type(v, json_type_int)) {
		*ret = json_object_get_int64(v);
		return true;
	}
	if (json_object_is_type(v, json_type_double)) {
		double d = json_object_get_double(v);

		if (!(d >= (double)INT64_MIN && d < (double)INT64_MAX))
			return false;
		*ret = (int64_t)d;
		return true;
	}
	return false;
}

bool ctl_json_double(struct json_object *root, const char *path, double *ret)
{
	struct json_object *v = ctl_json_path(root, path);

	if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
		return false;
	*ret = json_object_get_double(v);
	return true;
}

char *ctl_json_string_escaped(struct json_object *root, const char *path)
{
	struct json_object *v = ctl_json_path(root, path);

	if (!json_object_is_type(v, json_type_string))
		return strdup("-");
	return ctl_escape(json_object_get_string(v), (size_t)json_object_get_string_len(v));
}

char *ctl_json_count(struct json_object *root, const char *path, char buf[static CTL_COUNT_MAX])
{
	int64_t v;

	if (ctl_json_int(root, path, &v))
		(void)snprintf(buf, CTL_COUNT_MAX, "%" PRId64, v);
	else
		(void)snprintf(buf, CTL_COUNT_MAX, "-");
	return buf;
}

char *ctl_json_size(struct json_object *root, const char *path, char buf[static CTL_SIZE_MAX])
{
	int64_t v;

	if (ctl_json_int(root, path, &v) && v >= 0)
		return ctl_format_size((uint64_t)v, buf);
	(void)snprintf(buf, CTL_SIZE_MAX, "-");
	return buf;
}

char *ctl_json_clock(struct json_object *root, const char *path, char buf[static CTL_CLOCK_MAX])
{
	double t;

	return ctl_format_clock(ctl_json_double(root, path, &t) ? t : 0, buf);
}
