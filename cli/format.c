/* SPDX-License-Identifier: MIT */
/*
 * format.c - perfctl's pure text helpers: strict number parsing for the
 * command line and human formatting of what perfd reports.
 *
 * Design: everything here is a function of its arguments, so the unit suite
 * covers it without a daemon.  Escaping is done at print time, not when the
 * JSON is parsed, so --json output passes the daemon's strings through
 * untouched (JSON has its own escaping) while human output can never carry
 * a raw control byte to the terminal.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/duration.h"

#include "format.h"
#include "perfd/formats.h"

int ctl_parse_int64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
	char *end;
	long long v;

	/* strtoll would skip leading blanks and take a '+'; a command line
	 * number has neither. */
	if (!s || !(*s == '-' || (*s >= '0' && *s <= '9')))
		return -EINVAL;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || *end != '\0')
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*ret = (int64_t)v;
	return 0;
}

int ctl_parse_seconds(const char *s, double min_exclusive, double max, double *ret)
{
	char *end;
	double v;

	/* Plain decimal only: strtod would also take "inf", "nan", hex
	 * floats and leading blanks. */
	if (!s || *s == '\0' || s[strspn(s, "0123456789.eE+-")] != '\0')
		return -EINVAL;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0')
		return -EINVAL;
	if (errno == ERANGE || !isfinite(v) || !(v > min_exclusive) || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

int ctl_parse_duration(const char *s, double min_exclusive, double max, double *ret)
{
	double v;

	if (parse_duration_seconds(s, &v) < 0)
		return -EINVAL;
	if (!(v > min_exclusive) || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

const char *ctl_format_by_extension(const char *path)
{
	size_t n = strlen(path), best = 0;
	const char *format = NULL;

#define BY_EXTENSION(name, ext, form)                                                \
	if (n > strlen(ext) && strlen(ext) > best &&                               \
	    strcmp(path + n - strlen(ext), ext) == 0) {                            \
		format = #name;                                                    \
		best = strlen(ext);                                                \
	}
	PERFD_FORMATS(BY_EXTENSION)
#undef BY_EXTENSION
	return format;
}

bool ctl_format_is_binary(const char *name)
{
#define IS_BINARY(fname, ext, form)                                                \
	if (strcmp(name, #fname) == 0)                                             \
		return form == PERFD_FORM_BINARY;
	PERFD_FORMATS(IS_BINARY)
#undef IS_BINARY
	return false;
}

char *ctl_format_size(uint64_t bytes, char buf[static CTL_SIZE_MAX])
{
	static const char units[] = "BKMGTPE";
	double v = (double)bytes;
	size_t u = 0;

	/* Move up a unit before "%.1f" would round to 1024.0. */
	while (u + 2 < sizeof(units) && v >= 1023.95) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		(void)snprintf(buf, CTL_SIZE_MAX, "%" PRIu64 "B", bytes);
	else
		(void)snprintf(buf, CTL_SIZE_MAX, "%.1f%c", v, units[u]);
	return buf;
}

char *ctl_format_duration(double seconds, char buf[static CTL_DURATION_MAX])
{
	uint64_t s;

	if (!isfinite(seconds) || seconds < 0 || seconds >= 1e15) {
		(void)snprintf(buf, CTL_DURATION_MAX, "-");
		return buf;
	}
	s = (uint64_t)seconds;
	if (s < 60)
		(void)snprintf(buf, CTL_DURATION_MAX, "%" PRIu64 "s", s);
	else if (s < 3600)
		(void)snprintf(buf, CTL_DURATION_MAX, "%" PRIu64 "m %02" PRIu64 "s",
			       s / 60, s % 60);
	else if (s < 86400)
		(void)snprintf(buf, CTL_DURATION_MAX, "%" PRIu64 "h %02" PRIu64 "m",
			       s / 3600, s / 60 % 60);
	else
		(void)snprintf(buf, CTL_DURATION_MAX, "%" PRIu64 "d %02" PRIu64 "h",
			       s / 86400, s / 3600 % 24);
	return buf;
}

char *ctl_format_clock(double unix_seconds, char buf[static CTL_CLOCK_MAX])
{
	time_t s = (time_t)unix_seconds;
	struct tm tm;

	if (!(unix_seconds > 0) || !localtime_r(&s, &tm) || strftime(buf, CTL_CLOCK_MAX, "%H:%M:%S", &tm) == 0)
		(void)snprintf(buf, CTL_CLOCK_MAX, "-");
	return buf;
}

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0 when
 * s[0] does not start one.  Follows RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		if (s[0] == 0xe0)
			lo = 0xa0;
		else if (s[0] == 0xed)
			hi = 0x9f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		if (s[0] == 0xf0)
			lo = 0x90;
		else if (s[0] == 0xf4)
			hi = 0x8f;
	} else
		return 0;

	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

char *ctl_escape(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	char *out, *o;
	size_t i = 0;

	if (len > (SIZE_MAX - 1) / 4)
		return NULL;
	out = malloc(len * 4 + 1);
	if (!out)
		return NULL;

	o = out;
	while (i < len) {
		size_t n;

		if (p[i] == '\\') {
			*o++ = '\\';
			*o++ = '\\';
			i++;
		} else if (p[i] >= 0x20 && p[i] < 0x7f) {
			*o++ = (char)p[i++];
		} else if (p[i] >= 0x80 && (n = utf8_sequence(p + i, len - i)) > 0 &&
			   !(n == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0)) {
			memcpy(o, p + i, n);
			o += n;
			i += n;
		} else {
			/* Control byte, stray byte, or the lead byte of a C1
			 * control (its continuation byte follows alone). */
			o += sprintf(o, "\\x%02x", p[i++]);
		}
	}
	*o = '\0';
	return out;
}
