/* SPDX-License-Identifier: MIT */
/*
 * format.h - pure helpers of perfctl: parsing numbers from the command line,
 * formatting sizes and durations for people, escaping text that came from
 * the daemon (process names can hold any byte).  No I/O.
 */
#ifndef PERFCTL_FORMAT_H
#define PERFCTL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses all of s as a decimal integer in [min, max].  No leading spaces,
 * no trailing bytes ("12abc" fails).  Returns 0 and *ret, -EINVAL when s is
 * not a number, -ERANGE when it is outside [min, max]. */
int ctl_parse_int64(const char *s, int64_t min, int64_t max, int64_t *ret);

/* Parses all of s as a finite decimal number with min < value <= max.
 * Returns 0 and *ret, -EINVAL or -ERANGE as above. */
int ctl_parse_seconds(const char *s, double min_exclusive, double max, double *ret);

/* Parses all of s as a duration (base/duration.h: "90", "90s", "1h30m")
 * with min < seconds <= max.  Returns 0 and *ret, -EINVAL or -ERANGE. */
int ctl_parse_duration(const char *s, double min_exclusive, double max, double *ret);

/* The snapshot format (a name of include/perfd/formats.h) that a file at
 * path is written in by its extension, the longest that matches, so
 * "x.speedscope.json" is speedscope and "x.json" json; an extension alone
 * (".json") names no format.  NULL when none matches. */
const char *ctl_format_by_extension(const char *path);

/* Whether the format named name is binary (include/perfd/formats.h): not
 * for a terminal.  False for a name perfctl does not know. */
bool ctl_format_is_binary(const char *name);

/* Writes bytes as a short human size: "512B", "1.5K", "12.3M", "2.0G"
 * (powers of 1024, one decimal).  Returns buf. */
#define CTL_SIZE_MAX 16
char *ctl_format_size(uint64_t bytes, char buf[static CTL_SIZE_MAX]);

/* Writes seconds as "45s", "3m 07s", "2h 05m", "3d 04h".  Negative or
 * non-finite values give "-".  Returns buf. */
#define CTL_DURATION_MAX 32
char *ctl_format_duration(double seconds, char buf[static CTL_DURATION_MAX]);

/* Writes a Unix time (seconds) as the local wall clock, "14:03:07"; "-"
 * when it is not positive or has no local time.  Returns buf. */
#define CTL_CLOCK_MAX 16
char *ctl_format_clock(double unix_seconds, char buf[static CTL_CLOCK_MAX]);

/* Returns a NUL-terminated copy of s[0..len) that is safe to print to a
 * terminal: bytes below 0x20, 0x7f, C1 controls (UTF-8 U+0080..U+009F),
 * bytes that are not part of valid UTF-8 and the backslash itself become
 * "\xNN" ("\\" for a backslash), so the text cannot move the cursor or
 * change colours and stays unambiguous.  NULL on ENOMEM; free() it. */
char *ctl_escape(const char *s, size_t len);

#endif
