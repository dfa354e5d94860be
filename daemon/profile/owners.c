/* SPDX-License-Identifier: MIT */
/* owners.c - see owners.h for the policy. */
#include <errno.h>
#include <stdlib.h>

#include "base/array.h"
#include "profile/owners.h"

void owner_tally_init(struct owner_tally *t)
{
	*t = (struct owner_tally){ 0 };
	u64map_init(&t->index);
}

void owner_tally_done(struct owner_tally *t)
{
	free(t->use);
	u64map_done(&t->index);
	owner_tally_init(t);
}

void owner_tally_reset(struct owner_tally *t)
{
	t->n = 0;
	u64map_done(&t->index);
	u64map_init(&t->index);
}

struct owner_use *owner_tally_get(struct owner_tally *t, uint32_t owner)
{
	uint64_t *slot = u64map_get(&t->index, owner);

	return slot ? &t->use[*slot] : NULL;
}

int owner_tally_add(struct owner_tally *t, uint32_t owner, size_t bytes)
{
	bool added;
	uint64_t *slot = u64map_upsert(&t->index, owner, &added);
	struct owner_use *u;

	if (!slot)
		return -ENOMEM;
	if (added) {
		if (array_grow((void **)&t->use, &t->cap, t->n + 1, sizeof(*t->use), 16) < 0) {
			u64map_remove(&t->index, owner);
			return -ENOMEM;
		}
		t->use[t->n] = (struct owner_use){ .owner = owner };
		*slot = t->n++;
	}
	u = &t->use[*slot];
	u->held[OWNER_BYTES] += bytes;
	u->held[OWNER_PROCESSES]++;
	return 0;
}

struct owner_use *owner_tally_victim(struct owner_tally *t, enum owner_measure m,
				     const uint32_t *admitter, bool *ret_own)
{
	struct owner_use *heaviest = NULL, *own = admitter ? owner_tally_get(t, *admitter) : NULL;
	size_t total = 0, n = 0;

	for (size_t i = 0; i < t->n; i++) {
		struct owner_use *u = &t->use[i];

		if (u->exhausted)
			continue;
		total += u->held[m];
		n++;
		if (!heaviest || u->held[m] > heaviest->held[m] ||
		    (u->held[m] == heaviest->held[m] && u->owner < heaviest->owner))
			heaviest = u;
	}
	/* more than the mean: held x n > total, without a division's rounding */
	if (own && !own->exhausted && own->held[m] * n > total) {
		*ret_own = true;
		return own;
	}
	*ret_own = false;
	return heaviest;
}
