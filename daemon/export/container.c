/* SPDX-License-Identifier: MIT */
/* container.c - see container.h: the container id in a cgroup path. */
#include <ctype.h>
#include <string.h>

#include "export/container.h"

/* The first run of exactly CONTAINER_ID_LEN hex digits in s[0..n), or NULL. */
static const char *hex_run(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t j = i;

		while (j < n && isxdigit((unsigned char)s[j]))
			j++;
		if (j - i == CONTAINER_ID_LEN)
			return s + i;
		i = j + 1;
	}
	return NULL;
}

bool container_id_from_cgroup(const char *cgroup, char *buf, size_t len)
{
	const char *end;

	if (!cgroup || len < CONTAINER_ID_LEN + 1)
		return false;
	end = cgroup + strlen(cgroup);
	/* innermost component first */
	while (end > cgroup) {
		const char *start = end, *id;

		while (start > cgroup && start[-1] != '/')
			start--;
		id = hex_run(start, (size_t)(end - start));
		if (id) {
			memcpy(buf, id, CONTAINER_ID_LEN);
			buf[CONTAINER_ID_LEN] = '\0';
			return true;
		}
		end = start > cgroup ? start - 1 : cgroup;
	}
	return false;
}
