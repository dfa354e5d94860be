/* SPDX-License-Identifier: MIT */
/* u64map.c - see u64map.h. */
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"

void u64map_init(struct u64map *m)
{
	m->slots = NULL;
	m->mask = 0;
	m->count = 0;
}

void u64map_done(struct u64map *m)
{
	free(m->slots);
	u64map_init(m);
}

static struct u64map_slot *find(const struct u64map *m, uint64_t key)
{
	size_t i;

	if (!m->slots)
		return NULL;
	for (i = hash_u64(key) & m->mask;; i = (i + 1) & m->mask) {
		struct u64map_slot *s = &m->slots[i];

		if (s->key == key)
			return s;
		if (s->key == U64MAP_EMPTY)
			return NULL;
	}
}

uint64_t *u64map_get(const struct u64map *m, uint64_t key)
{
	struct u64map_slot *s = find(m, key);

	return s ? &s->value : NULL;
}

static int grow(struct u64map *m)
{
	/* Small first: most maps are a store window's, a few entries each. */
	size_t cap = m->slots ? (m->mask + 1) * 2 : 4;
	struct u64map_slot *slots = malloc(cap * sizeof(*slots));

	if (!slots)
		return -1;
	for (size_t i = 0; i < cap; i++)
		slots[i].key = U64MAP_EMPTY;
	if (m->slots) {
		for (size_t i = 0; i <= m->mask; i++) {
			struct u64map_slot *old = &m->slots[i];
			size_t j;

			if (old->key == U64MAP_EMPTY)
				continue;
			for (j = hash_u64(old->key) & (cap - 1);
			     slots[j].key != U64MAP_EMPTY; j = (j + 1) & (cap - 1))
				;
			slots[j] = *old;
		}
	}
	free(m->slots);
	m->slots = slots;
	m->mask = cap - 1;
	return 0;
}

uint64_t *u64map_upsert(struct u64map *m, uint64_t key, bool *ret_added)
{
	struct u64map_slot *s = find(m, key);
	size_t i;

	if (s) {
		if (ret_added)
			*ret_added = false;
		return &s->value;
	}
	if (!m->slots || (m->count + 1) * 2 > m->mask + 1)
		if (grow(m) < 0)
			return NULL;
	for (i = hash_u64(key) & m->mask; m->slots[i].key != U64MAP_EMPTY;
	     i = (i + 1) & m->mask)
		;
	m->slots[i].key = key;
	m->slots[i].value = 0;
	m->count++;
	if (ret_added)
		*ret_added = true;
	return &m->slots[i].value;
}

bool u64map_remove(struct u64map *m, uint64_t key)
{
	struct u64map_slot *s = find(m, key);
	size_t hole, i;

	if (!s)
		return false;
	hole = s - m->slots;
	/* Backward-shift: move later entries of the probe run into the hole
	 * unless they already sit between their home slot and the hole. */
	for (i = (hole + 1) & m->mask; m->slots[i].key != U64MAP_EMPTY;
	     i = (i + 1) & m->mask) {
		size_t home = hash_u64(m->slots[i].key) & m->mask;

		if (((i - home) & m->mask) >= ((i - hole) & m->mask)) {
			m->slots[hole] = m->slots[i];
			hole = i;
		}
	}
	m->slots[hole].key = U64MAP_EMPTY;
	m->count--;
	return true;
}

size_t u64map_memory(const struct u64map *m)
{
	return m->slots ? (m->mask + 1) * sizeof(struct u64map_slot) : 0;
}
