/* SPDX-License-Identifier: MIT */
/*
 * duration.c - see duration.h.
 *
 * A duration is plain seconds ("90", "1.5") or one or more NUMBER UNIT
 * terms with units from the largest down, each at most once ("1h30m",
 * "2d12h", "1m30.5s"), as journalctl and Go read them.  Numbers are plain
 * decimals: no sign, exponent, "inf" or blanks, so nothing strtod() would
 * also take slips through.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/duration.h"

int parse_duration_seconds(const char *text, double *ret)
{
	static const struct {
		char suffix;
		double seconds;
	} units[] = { { 'd', 86400 }, { 'h', 3600 }, { 'm', 60 }, { 's', 1 } };
	const size_t n_units = sizeof(units) / sizeof(units[0]);
	size_t next_unit = 0; /* the units before it were used or skipped */
	const char *p = text;
	double total = 0;

	if (!text || !*text)
		return -EINVAL;
	while (*p) {
		size_t digits = strspn(p, "0123456789.");
		char *end;
		double v;
		size_t u;

		if (digits == 0 || (p[0] == '.' && digits == 1))
			return -EINVAL;
		errno = 0;
		v = strtod(p, &end);
		if (errno || end != p + digits)
			return -EINVAL;
		p = end;
		if (!*p) {
			/* a bare number is seconds, but only alone: "1h30" is refused */
			if (p - digits != text)
				return -EINVAL;
			total = v;
			break;
		}
		for (u = next_unit; u < n_units && units[u].suffix != *p; u++)
			;
		if (u == n_units)
			return -EINVAL;
		total += v * units[u].seconds;
		next_unit = u + 1;
		p++;
	}
	if (!isfinite(total) || !(total > 0))
		return -EINVAL;
	*ret = total;
	return 0;
}
