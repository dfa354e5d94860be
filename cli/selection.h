/* SPDX-License-Identifier: MIT */
/*
 * selection.h - which processes and when, as `snapshot` and the commands
 * built on a snapshot (`report`) take them: --pid/--comm/--cgroup/--unit/
 * --all and --duration/--since/--from/--to, parsed once and added to a
 * snapshot request the same way for every such command.
 */
#ifndef PERFCTL_SELECTION_H
#define PERFCTL_SELECTION_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfctl.h"
#include "perfd/protocol.h"

struct json_object;

struct ctl_selection {
	int64_t pids[PERFD_SNAPSHOT_MAX_PIDS];
	size_t n_pids;
	const char *comm, *cgroup, *unit;
	bool all;
	int64_t tree; /* a pid and its descendants (record's; no option) */
	double duration, since, from, to; /* 0: not given */
	unsigned whens;                    /* how many of duration, since, from */
};

/* getopt_long() codes of the selection's options: 'p' and 'd' have short
 * forms (-p, -d), the others are above any character. */
enum {
	CTL_SEL_PID = 'p',
	CTL_SEL_DURATION = 'd',
	CTL_SEL_COMM = 0x1000,
	CTL_SEL_CGROUP,
	CTL_SEL_UNIT,
	CTL_SEL_ALL,
	CTL_SEL_SINCE,
	CTL_SEL_FROM,
	CTL_SEL_TO,
};

/* The long options, to put in a command's struct option table; "p:d:"
 * goes in its optstring. */
#define CTL_SELECTION_OPTIONS                                                  \
	{ "pid", required_argument, NULL, CTL_SEL_PID },                       \
	{ "comm", required_argument, NULL, CTL_SEL_COMM },                     \
	{ "cgroup", required_argument, NULL, CTL_SEL_CGROUP },                 \
	{ "unit", required_argument, NULL, CTL_SEL_UNIT },                     \
	{ "all", no_argument, NULL, CTL_SEL_ALL },                             \
	{ "duration", required_argument, NULL, CTL_SEL_DURATION },             \
	{ "since", required_argument, NULL, CTL_SEL_SINCE },                   \
	{ "from", required_argument, NULL, CTL_SEL_FROM },                     \
	{ "to", required_argument, NULL, CTL_SEL_TO }

/* Takes what getopt_long() returned (c, with optarg) when it is one of the
 * selection's options.  Returns 1 when it was and is stored in s, 0 when c
 * is not a selection option, -EINVAL after reporting a usage error worded
 * for command ("snapshot: --pid must be ..."). */
int ctl_selection_option(struct ctl_env *env, const char *command, int c,
			 struct ctl_selection *s);

/* True when any selection or time option was given. */
bool ctl_selection_given(const struct ctl_selection *s);

/* Checks that s says which processes and, once, when.  Returns 0, or
 * -EINVAL after reporting a usage error. */
int ctl_selection_check(struct ctl_env *env, const char *command, const struct ctl_selection *s);

/* Adds s's fields to a snapshot request.  Returns 0 or -ENOMEM. */
int ctl_selection_add(const struct ctl_selection *s, struct json_object *req);

/* How long to wait for the snapshot's answer: the duration of a live one
 * plus a grace for the daemon to encode it. */
int ctl_selection_timeout_ms(const struct ctl_selection *s);

/* Parses a time, as Unix seconds into *ret: RFC 3339
 * ("2026-12-01T08:00:00Z", "...T09:00:00.5+01:00"), seconds since the
 * epoch, local time ("2026-12-01 08:00[:SS]", or "08:00[:SS]": today's, or
 * yesterday's when today's is later than now) or a duration ago ("-15m",
 * "-1h30m").  now is the current Unix time.  Returns 0, or -EINVAL. */
int ctl_parse_time(const char *text, double *ret, double now);

#endif
