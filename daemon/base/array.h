/* SPDX-License-Identifier: MIT */
/*
 * array.h - growing a malloc'd array, the one way the daemon's and
 * perfctl's builders (model, folded encoder, profile readers) do it:
 * doubling, so appending n elements costs O(n) copies in all.
 */
#ifndef PERFD_ARRAY_H
#define PERFD_ARRAY_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "perfd/macro.h"

/* Makes *p (of *cap elements of size bytes) hold at least need elements,
 * with room for slack more when it has to move.  Returns 0, or -ENOMEM
 * with *p and *cap untouched. */
static inline int array_grow(void **p, size_t *cap, size_t need, size_t size, size_t slack)
{
	size_t c;
	void *q;

	if (need <= *cap)
		return 0;
	c = MAX(*cap * 2, need + slack);
	if (c > SIZE_MAX / size)
		return -ENOMEM;
	q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

#endif
