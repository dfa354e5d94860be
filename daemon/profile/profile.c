/* SPDX-License-Identifier: MIT */
/* profile.c - see profile.h for the design. */
#include <errno.h>
#include <string.h>

#include "base/kindtab.h"
#include "perfd/macro.h"
#include "profile/profile.h"
#include "profile/stacktab.h"

void profile_init(struct profile_values *p)
{
	u64map_init(&p->values);
	memset(p->totals, 0, sizeof(p->totals));
}

void profile_release(struct profile_values *p, struct stacktab *stacks)
{
	U64MAP_FOREACH(slot, &p->values)
		stacktab_unref(stacks, profile_key_stack(slot->key));
	u64map_done(&p->values);
	memset(p->totals, 0, sizeof(p->totals));
}

int profile_add(struct profile_values *p, struct stacktab *stacks, uint64_t key, uint64_t value)
{
	bool added;
	uint64_t *v = u64map_upsert(&p->values, key, &added);

	if (!v)
		return -ENOMEM;
	if (added)
		stacktab_ref(stacks, profile_key_stack(key));
	*v += value;
	p->totals[profile_key_kind(key)] += value;
	return 0;
}

int profile_merge(struct profile_values *dst, struct stacktab *stacks,
		  const struct profile_values *src)
{
	U64MAP_FOREACH(slot, &src->values)
		if (profile_add(dst, stacks, slot->key, slot->value) < 0)
			return -ENOMEM;
	return 0;
}

size_t profile_memory(const struct profile_values *p)
{
	return u64map_memory(&p->values);
}

uint64_t profile_scale_value(uint64_t v, uint64_t num, uint64_t den, uint64_t *rng)
{
	unsigned __int128 x = (unsigned __int128)v * num;
	uint64_t q = (uint64_t)(x / den), rem = (uint64_t)(x % den), z;

	if (!rem)
		return q;
	z = (*rng += 0x9e3779b97f4a7c15ULL); /* splitmix64 */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return q + ((unsigned __int128)z * den >> 64 < rem);
}

void profile_scale_periods(struct profile_values *p, struct stacktab *stacks, uint64_t num,
			   uint64_t den, uint64_t *rng)
{
	struct u64map *m = &p->values;

	for (int k = 0; k < PROFILE_KINDS; k++)
		if (kind_in_periods(k))
			p->totals[k] = 0;
	U64MAP_FOREACH(slot, m)
		if (kind_in_periods(profile_key_kind(slot->key)))
			p->totals[profile_key_kind(slot->key)] += slot->value =
				profile_scale_value(slot->value, num, den, rng);
	/* Then the zeros, apart: a removal shifts later entries of its probe
	 * run back, into this slot or after it, never before (where they
	 * would be missed), so each slot is looked at again until it holds a
	 * value or nothing. */
	for (size_t i = 0; m->slots && i <= m->mask; i++)
		while (m->slots[i].key != U64MAP_EMPTY && m->slots[i].value == 0 &&
		       kind_in_periods(profile_key_kind(m->slots[i].key))) {
			stacktab_unref(stacks, profile_key_stack(m->slots[i].key));
			u64map_remove(m, m->slots[i].key);
		}
}
