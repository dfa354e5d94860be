/* SPDX-License-Identifier: MIT */
/*
 * selection.c - the processes and the time range of a snapshot, as every
 * command that asks perfd for one takes them on its command line.
 *
 * Design: one parser for the options that `snapshot` and `report` share,
 * called from inside each command's own getopt loop (a command's table
 * splices in CTL_SELECTION_OPTIONS), so the two cannot drift apart in
 * what they accept, how they word a complaint or what they send.  The
 * values are checked here as far as perfctl can (numbers, times, name
 * lengths); what only perfd knows (a unit's name) is left to perfd.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "base/duration.h"
#include "format.h"
#include "output.h"
#include "selection.h"

/* Now, in Unix seconds. */
static double now_unix(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The daemon may take a little longer than the duration to encode. */
#define SNAPSHOT_GRACE_MS (30 * 1000)

/* The zone at p: "Z" or "+HH:MM" / "-HH:MM" (east of UTC positive) into
 * *ret_offset, or nothing (*ret_local).  Returns the end, or NULL. */
static const char *parse_zone(const char *p, bool *ret_local, long *ret_offset)
{
	int hh, mm;

	*ret_local = false;
	*ret_offset = 0;
	if (*p == 'Z' || *p == 'z')
		return p + 1;
	if (*p != '+' && *p != '-') {
		*ret_local = true;
		return p;
	}
	if (strlen(p) != 6 || sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
		return NULL;
	*ret_offset = (hh * 3600L + mm * 60L) * (*p == '+' ? 1 : -1);
	return p + 6;
}

int ctl_parse_time(const char *text, double *ret, double now)
{
	/* the longest first: "%H:%M" would stop inside "14:03:20" */
	static const struct {
		const char *format;
		bool date, seconds;
	} forms[] = {
		{ "%Y-%m-%dT%H:%M:%S", true, true }, { "%Y-%m-%d %H:%M:%S", true, true },
		{ "%Y-%m-%dT%H:%M", true, false },   { "%Y-%m-%d %H:%M", true, false },
		{ "%H:%M:%S", false, true },         { "%H:%M", false, false },
	};
	double v;

	if (ctl_parse_seconds(text, 0, 1e11, ret) == 0)
		return 0;
	if (text[0] == '-' && parse_duration_seconds(text + 1, &v) == 0) {
		if (v >= now)
			return -EINVAL;
		*ret = now - v;
		return 0;
	}
	for (size_t i = 0; i < ELEMENTSOF(forms); i++) {
		struct tm tm = { 0 };
		double frac = 0;
		bool local;
		long offset;
		const char *p = strptime(text, forms[i].format, &tm);
		char *end;
		time_t t;

		if (!p)
			continue;
		if (forms[i].seconds && *p == '.' && isdigit((unsigned char)p[1])) {
			frac = strtod(p, &end);
			p = end;
		}
		p = parse_zone(p, &local, &offset);
		if (!p || *p || (!forms[i].date && !local))
			continue;
		if (!local) {
			t = timegm(&tm);
		} else {
			time_t today = (time_t)now;
			struct tm day;

			if (!forms[i].date) {
				/* a time of day: today's, or yesterday's when today's is
				 * still to come */
				if (!localtime_r(&today, &day))
					return -EINVAL;
				tm.tm_year = day.tm_year;
				tm.tm_mon = day.tm_mon;
				tm.tm_mday = day.tm_mday;
			}
			tm.tm_isdst = -1;
			t = mktime(&tm);
			if (t != (time_t)-1 && !forms[i].date && (double)t > now) {
				tm.tm_mday--;
				tm.tm_isdst = -1;
				t = mktime(&tm);
			}
		}
		if (t == (time_t)-1)
			return -EINVAL;
		*ret = (double)t - (double)offset + frac;
		return 0;
	}
	return -EINVAL;
}

/* A selector's value: non-empty, shorter than max bytes. */
static int take_name(struct ctl_env *env, const char *command, const char *what, size_t max,
		     const char **dst)
{
	if (!*optarg || strlen(optarg) >= max) {
		ctl_error(env, CTL_ERR_USAGE, "%s: %s takes a name of 1 to %zu bytes", command,
			  what, max - 1);
		return -EINVAL;
	}
	*dst = optarg;
	return 1;
}

int ctl_selection_option(struct ctl_env *env, const char *command, int c,
			 struct ctl_selection *s)
{
	switch (c) {
	case CTL_SEL_PID:
		if (s->n_pids == PERFD_SNAPSHOT_MAX_PIDS) {
			ctl_error(env, CTL_ERR_USAGE, "%s: at most %d --pid", command,
				  PERFD_SNAPSHOT_MAX_PIDS);
			return -EINVAL;
		}
		if (ctl_parse_int64(optarg, 1, INT32_MAX, &s->pids[s->n_pids]) < 0) {
			ctl_error(env, CTL_ERR_USAGE,
				  "%s: --pid must be a process id, 1..%d, not '%s'", command,
				  INT32_MAX, optarg);
			return -EINVAL;
		}
		s->n_pids++;
		return 1;
	case CTL_SEL_COMM:
		return take_name(env, command, "--comm", 16, &s->comm);
	case CTL_SEL_CGROUP:
		return take_name(env, command, "--cgroup", 256, &s->cgroup);
	case CTL_SEL_UNIT:
		return take_name(env, command, "--unit", 256, &s->unit);
	case CTL_SEL_ALL:
		s->all = true;
		return 1;
	case CTL_SEL_DURATION:
		if (ctl_parse_duration(optarg, 0, PERFD_SNAPSHOT_MAX_SECONDS, &s->duration) < 0) {
			ctl_error(env, CTL_ERR_USAGE,
				  "%s: --duration: expected a duration (90, 90s, 10m, 1h30m) of at most %d s, not '%s'",
				  command, PERFD_SNAPSHOT_MAX_SECONDS, optarg);
			return -EINVAL;
		}
		s->whens++;
		return 1;
	case CTL_SEL_SINCE:
		if (ctl_parse_duration(optarg, 0, PERFD_MAX_RETENTION_SECONDS, &s->since) < 0) {
			ctl_error(env, CTL_ERR_USAGE,
				  "%s: --since: expected a duration (30s, 10m, 1h30m) of at most 7d, not '%s'",
				  command, optarg);
			return -EINVAL;
		}
		s->whens++;
		return 1;
	case CTL_SEL_FROM:
	case CTL_SEL_TO:
		if (ctl_parse_time(optarg, c == CTL_SEL_FROM ? &s->from : &s->to, now_unix()) < 0) {
			ctl_error(env, CTL_ERR_USAGE,
				  "%s: %s: expected a time: 2026-12-01T08:00:00Z, 2026-12-01 08:00 or 08:00 (local), -15m (ago) or Unix seconds, not '%s'",
				  command, c == CTL_SEL_FROM ? "--from" : "--to", optarg);
			return -EINVAL;
		}
		if (c == CTL_SEL_FROM)
			s->whens++;
		return 1;
	}
	return 0;
}

bool ctl_selection_given(const struct ctl_selection *s)
{
	return s->n_pids || s->comm || s->cgroup || s->unit || s->all || s->whens || s->to;
}

int ctl_selection_check(struct ctl_env *env, const char *command, const struct ctl_selection *s)
{
	if (!s->n_pids && !s->comm && !s->cgroup && !s->unit && !s->all) {
		ctl_error(env, CTL_ERR_USAGE,
			  "%s: say which processes: --pid PID, --comm NAME, --cgroup PATH, --unit NAME or --all",
			  command);
		return -EINVAL;
	}
	if (s->whens != 1 || (s->to && !s->from)) {
		ctl_error(env, CTL_ERR_USAGE,
			  "%s: say when, once: --duration SECONDS (from now on), --since DURATION or --from TIME [--to TIME]",
			  command);
		return -EINVAL;
	}
	if (s->to && s->to <= s->from) {
		ctl_error(env, CTL_ERR_USAGE, "%s: --from must be before --to", command);
		return -EINVAL;
	}
	return 0;
}

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

/* Adds key: value to obj; false when out of memory. */
static bool add(struct json_object *obj, const char *key, struct json_object *value)
{
	if (value && json_object_object_add(obj, key, value) == 0)
		return true;
	json_object_put(value);
	return false;
}

int ctl_selection_add(const struct ctl_selection *s, struct json_object *req)
{
	struct json_object *pids;
	bool ok = true;

	if (s->n_pids == 1) {
		ok = add(req, "pid", json_object_new_int64(s->pids[0]));
	} else if (s->n_pids > 1) {
		ok = (pids = json_object_new_array()) && add(req, "pid", pids);
		for (size_t i = 0; ok && i < s->n_pids; i++)
			ok = json_object_array_add(pids, json_object_new_int64(s->pids[i])) == 0;
	}
	ok = ok && (!s->comm || add(req, "comm", json_object_new_string(s->comm))) &&
	     (!s->cgroup || add(req, "cgroup", json_object_new_string(s->cgroup))) &&
	     (!s->unit || add(req, "unit", json_object_new_string(s->unit))) &&
	     (!s->all || add(req, "all", json_object_new_boolean(1))) &&
	     (!s->tree || add(req, "tree", json_object_new_int64(s->tree))) &&
	     (!s->duration || add(req, "duration", new_seconds(s->duration))) &&
	     (!s->since || add(req, "since", new_seconds(s->since))) &&
	     (!s->from || add(req, "from", json_object_new_double(s->from))) &&
	     (!s->to || add(req, "to", json_object_new_double(s->to)));
	return ok ? 0 : -ENOMEM;
}

int ctl_selection_timeout_ms(const struct ctl_selection *s)
{
	/* A snapshot of the past answers at once: only the grace applies. */
	return (int)ceil(s->duration * 1000) + SNAPSHOT_GRACE_MS;
}
