/* SPDX-License-Identifier: MIT */
/* cpus.c - see cpus.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/cpus.h"
#include "perfd/macro.h"

static int parse_cpu(const char **p, unsigned long *ret)
{
	char *end;

	if (**p < '0' || **p > '9')
		return -EINVAL;
	errno = 0;
	*ret = strtoul(*p, &end, 10);
	if (errno)
		return -EINVAL;
	*p = end;
	return 0;
}

int cpus_parse_list(const char *list, bool *ret_online, size_t n)
{
	const char *p = list;
	int count = 0;

	memset(ret_online, 0, n * sizeof(*ret_online));
	while (*p && *p != '\n') {
		unsigned long lo, hi;

		if (parse_cpu(&p, &lo) < 0)
			return -EINVAL;
		hi = lo;
		if (*p == '-') {
			p++;
			if (parse_cpu(&p, &hi) < 0 || hi < lo)
				return -EINVAL;
		}
		if (hi >= n)
			return -EINVAL;
		for (unsigned long c = lo; c <= hi; c++) {
			count += !ret_online[c];
			ret_online[c] = true;
		}
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -EINVAL;
	}
	if (*p == '\n' && p[1])
		return -EINVAL;
	return count;
}

int cpus_read_online(bool *ret_online, size_t n)
{
	_cleanup_fclose_ FILE *f = fopen("/sys/devices/system/cpu/online", "re");
	char buf[4096];

	if (!f)
		return negative_errno();
	if (!fgets(buf, sizeof(buf), f))
		return -EIO;
	return cpus_parse_list(buf, ret_online, n);
}
