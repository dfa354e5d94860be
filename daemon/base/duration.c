/* SPDX-License-Identifier: MIT */
/* duration.c - see duration.h. */
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
	} units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 } };
	double unit = 1, v;
	char *end;

	if (!text || !*text || strchr(" \t+-", text[0]))
		return -EINVAL;
	errno = 0;
	v = strtod(text, &end);
	if (errno || end == text)
		return -EINVAL;
	if (*end) {
		size_t i;

		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (end[0] == units[i].suffix && end[1] == '\0')
				break;
		if (i == sizeof(units) / sizeof(units[0]))
			return -EINVAL;
		unit = units[i].seconds;
	}
	v *= unit;
	if (!isfinite(v) || !(v > 0))
		return -EINVAL;
	*ret = v;
	return 0;
}
