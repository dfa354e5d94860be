/* SPDX-License-Identifier: MIT */
/*
 * duration.h - "30s", "10m", "1h30m", "2d" or plain seconds ("90", "1.5"),
 * as perfd's --retention and every duration perfctl takes (--duration,
 * --since, --interval, -d) read them.  Shared by the daemon and perfctl so
 * both read a duration the same way.
 */
#ifndef PERFD_DURATION_H
#define PERFD_DURATION_H

/* Parses text into seconds (> 0, finite): plain seconds, or terms with
 * the units d, h, m, s from the largest down, each at most once ("1h30m").
 * Returns 0, or -EINVAL for anything else ("", "10x", "-5s", "1h30",
 * "30m1h" ...). */
int parse_duration_seconds(const char *text, double *ret);

#endif
