/* SPDX-License-Identifier: MIT */
/*
 * lineread.c - see lineread.h.  One getc_unlocked() per byte under one lock
 * per line: a few ns per byte, about what getline() costs, with no
 * allocation at all.
 */
#include "base/lineread.h"

#include <errno.h>
#include <stdbool.h>

#include "perfd/macro.h"

ssize_t line_read(FILE *f, char *buf, size_t size, uint64_t *bytes)
{
	uint64_t consumed = 0;
	size_t n = 0;
	bool too_long = false;
	int c = EOF;

	if (size < 2)
		return -EINVAL;
	flockfile(f);
	while ((c = getc_unlocked(f)) != EOF) {
		consumed++;
		if (n < size - 1)
			buf[n++] = (char)c;
		else
			too_long = true;
		if (c == '\n')
			break;
	}
	funlockfile(f);
	buf[n] = '\0';
	if (bytes)
		*bytes += consumed;
	if (c == EOF && ferror(f))
		return negative_errno(); /* the read's own: ESRCH for a process gone */
	return too_long ? -E2BIG : (ssize_t)n;
}
