/* SPDX-License-Identifier: MIT */
/* rangealloc.c - see rangealloc.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/rangealloc.h"

int rangealloc_init(struct rangealloc *a, uint32_t capacity)
{
	*a = (struct rangealloc){ .capacity = capacity };
	if (capacity == 0)
		return 0;
	a->free = malloc(16 * sizeof(*a->free));
	if (!a->free)
		return -ENOMEM;
	a->cap_free = 16;
	a->free[0] = (struct range){ 0, capacity };
	a->n_free = 1;
	return 0;
}

void rangealloc_done(struct rangealloc *a)
{
	free(a->free);
	*a = (struct rangealloc){ 0 };
}

int rangealloc_get(struct rangealloc *a, uint32_t count, uint32_t *ret_first)
{
	if (count == 0) {
		*ret_first = 0;
		return 0;
	}
	for (size_t i = 0; i < a->n_free; i++) {
		struct range *r = &a->free[i];

		if (r->count < count)
			continue;
		*ret_first = r->first;
		r->first += count;
		r->count -= count;
		if (r->count == 0) {
			memmove(r, r + 1, (a->n_free - i - 1) * sizeof(*r));
			a->n_free--;
		}
		a->used += count;
		return 0;
	}
	return -ENOSPC;
}

int rangealloc_put(struct rangealloc *a, uint32_t first, uint32_t count)
{
	size_t i;

	if (count == 0)
		return 0;
	if ((uint64_t)first + count > a->capacity)
		return -EINVAL;
	/* i = the first free range after the one given back */
	for (i = 0; i < a->n_free && a->free[i].first < first; i++)
		;
	if ((i > 0 && a->free[i - 1].first + a->free[i - 1].count > first) ||
	    (i < a->n_free && first + count > a->free[i].first))
		return -EINVAL; /* overlaps free space: not ours to give back */
	a->used -= count;
	if (i > 0 && a->free[i - 1].first + a->free[i - 1].count == first) {
		a->free[i - 1].count += count;
		if (i < a->n_free && first + count == a->free[i].first) {
			a->free[i - 1].count += a->free[i].count;
			memmove(&a->free[i], &a->free[i + 1], (a->n_free - i - 1) * sizeof(*a->free));
			a->n_free--;
		}
		return 0;
	}
	if (i < a->n_free && first + count == a->free[i].first) {
		a->free[i].first = first;
		a->free[i].count += count;
		return 0;
	}
	if (a->n_free == a->cap_free) {
		size_t cap = a->cap_free ? a->cap_free * 2 : 16;
		struct range *f = realloc(a->free, cap * sizeof(*f));

		if (!f) {
			a->used += count;
			return -ENOMEM;
		}
		a->free = f;
		a->cap_free = cap;
	}
	memmove(&a->free[i + 1], &a->free[i], (a->n_free - i) * sizeof(*a->free));
	a->free[i] = (struct range){ first, count };
	a->n_free++;
	return 0;
}
