/* SPDX-License-Identifier: MIT */
/*
 * u64map.h - an open-addressing hash map from 64-bit keys to 64-bit values.
 *
 * Used wherever the daemon counts or indexes by an integer: a process's
 * counts per stack id, the index from tgid to process.  Linear probing with
 * backward-shift deletion (no tombstones), load factor <= 1/2, so a lookup
 * touches one or two cache lines.  The key UINT64_MAX is reserved.
 */
#ifndef PERFD_U64MAP_H
#define PERFD_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define U64MAP_EMPTY UINT64_MAX

struct u64map_slot {
	uint64_t key;
	uint64_t value;
};

struct u64map {
	struct u64map_slot *slots;
	size_t mask; /* capacity - 1; capacity is a power of two or 0 */
	size_t count;
};

void u64map_init(struct u64map *m);
void u64map_done(struct u64map *m);
/* Returns a pointer to the value of key, or NULL. Valid until the next insert/remove. */
uint64_t *u64map_get(const struct u64map *m, uint64_t key);
/* Returns a pointer to the value of key, inserting it with value 0 when
 * absent (*ret_added says which), or NULL when memory ran out. */
uint64_t *u64map_upsert(struct u64map *m, uint64_t key, bool *ret_added);
/* Removes key; returns true when it was there. */
bool u64map_remove(struct u64map *m, uint64_t key);
size_t u64map_memory(const struct u64map *m);

#define U64MAP_FOREACH(slot, m)                                                \
	for (struct u64map_slot *slot = (m)->slots;                            \
	     (m)->slots && slot <= (m)->slots + (m)->mask; slot++)             \
		if (slot->key != U64MAP_EMPTY)

static inline uint64_t hash_u64(uint64_t x)
{
	/* splitmix64 finalizer: full avalanche, cheap */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* FNV-1a of s[0..n): the hash that interns texts (model strings, folded
 * names, perfctl's profile readers). */
static inline uint64_t hash_text(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	return h;
}

#endif
