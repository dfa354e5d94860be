/* SPDX-License-Identifier: MIT */
/*
 * profile.h - one profile: values by (stack, thread, kind).
 *
 * Every holder of profile data (a process's time windows in the store, a
 * snapshot collecting from now on, the merged answer to a query) is a
 * struct profile_values: one hash map from an entry key to a value (named
 * apart from analysis/profile.h's struct profile, the list of named stacks
 * that report, diff, diagnose and top compute on).  The key packs the
 * interned stack id (stacktab.h), the thread id and the value kind:
 *
 *   bits 63..57  kind  (enum profile_kind: cpu samples, memory bytes,
 *                       off-CPU nanoseconds)
 *   bits 53..32  tid   (Linux caps pids at 2^22)
 *   bits 31..0   stack id
 *
 * so a new kind of value, or threads kept apart, costs no new structure:
 * the same stacks, the same merge, the same eviction.  Each distinct key
 * holds one reference on its stack, dropped when the profile is released.
 * Cost: 16 bytes per entry at load factor <= 1/2.
 */
#ifndef PERFD_PROFILE_H
#define PERFD_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "perfd/kinds.h"

struct stacktab;

/* The kinds of perfd/kinds.h, numbered as its rows (and as BPF's
 * enum perfd_value_kind); their names and units are in base/kindtab.h. */
#define PROFILE_KIND_ROW(id, value, ...) PROFILE_KIND_##id = value,
enum profile_kind {
	PERFD_KINDS(PROFILE_KIND_ROW)
	PROFILE_KINDS,
};

#define PROFILE_TID_BITS 22
#define PROFILE_TID_MAX ((1u << PROFILE_TID_BITS) - 1)

static inline uint64_t profile_key(uint32_t stack, uint32_t tid, enum profile_kind kind)
{
	return (uint64_t)kind << 57 | (uint64_t)(tid & PROFILE_TID_MAX) << 32 | stack;
}

static inline uint32_t profile_key_stack(uint64_t key)
{
	return (uint32_t)key;
}

static inline uint32_t profile_key_tid(uint64_t key)
{
	return (uint32_t)(key >> 32) & PROFILE_TID_MAX;
}

static inline enum profile_kind profile_key_kind(uint64_t key)
{
	return (enum profile_kind)(key >> 57);
}

struct profile_values {
	struct u64map values; /* profile_key() -> value */
	uint64_t totals[PROFILE_KINDS];
};

void profile_init(struct profile_values *p);
/* Drops every entry's stack reference and frees the map. */
void profile_release(struct profile_values *p, struct stacktab *stacks);

/* Adds value to key, taking a reference on the key's stack for a new key.
 * Returns 0, or -ENOMEM (nothing changed). */
int profile_add(struct profile_values *p, struct stacktab *stacks, uint64_t key, uint64_t value);
/* Adds every entry of src into dst.  -ENOMEM leaves dst with part of src
 * (every entry it holds is referenced and counted in its totals). */
int profile_merge(struct profile_values *dst, struct stacktab *stacks,
		  const struct profile_values *src);

size_t profile_memory(const struct profile_values *p);

/* v x num / den rounded up with the probability of its fraction, down
 * otherwise (*rng: a splitmix64 state): an unbiased estimate, so values
 * too small to stay whole still add up right.  Used when CPU samples
 * change period (a reload with a new frequency). */
uint64_t profile_scale_value(uint64_t v, uint64_t num, uint64_t den, uint64_t *rng);
/* Every value in p of a kind counted in sampling periods (kindtab.h's
 * kind_in_periods) x num / den (profile_scale_value); entries that come
 * to 0 go, with their stack reference. */
void profile_scale_periods(struct profile_values *p, struct stacktab *stacks, uint64_t num,
			   uint64_t den, uint64_t *rng);

#endif
