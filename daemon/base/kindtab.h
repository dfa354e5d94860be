/* SPDX-License-Identifier: MIT */
/*
 * kindtab.h - the value kinds of perfd/kinds.h as one table for user
 * space, indexed by enum perfd_value_kind (= enum profile_kind), and its
 * lookups by name.  Shared by the daemon and perfctl (like duration.h), so
 * the two name, title and read a kind alike; every field is a row's
 * column, and the strings are literals that live for the program.
 */
#ifndef PERFD_KINDTAB_H
#define PERFD_KINDTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfd/kinds.h"

struct kind_info {
	const char *name, *unit, *title;
	bool kernel_frames;
	enum perfd_kind_period period;
	enum perfd_kind_counts counts;
	unsigned kernel_skip;
	const char *pprof_type, *pprof_unit;
};

/* pprof's count of samples, the first value type of a PERIODS kind */
#define KIND_PPROF_COUNT_TYPE "samples"
#define KIND_PPROF_COUNT_UNIT "count"

extern const struct kind_info kind_infos[PERFD_VALUE_KINDS];

/* Whether `top`'s function view offers kind k: one something produces
 * (wall clock is made of two, per thread: report's). */
static inline bool kind_in_top(int k)
{
	return k >= 0 && k < PERFD_VALUE_KINDS &&
	       (kind_infos[k].counts == PERFD_KIND_COUNTS_CPU ||
		kind_infos[k].counts == PERFD_KIND_COUNTS_MEMORY ||
		kind_infos[k].counts == PERFD_KIND_COUNTS_WAIT);
}

/* Whether kind k's values are counts of sampling periods (PERIODS): what
 * a new period rescales, and what a state file of another period is
 * scaled by. */
static inline bool kind_in_periods(int k)
{
	return k >= 0 && k < PERFD_VALUE_KINDS && kind_infos[k].period == PERFD_KIND_PERIOD_PERIODS;
}

/* Whether kind k's samples count among the samples perfd took (COUNTS_CPU):
 * what status counts as samples received, expired or evicted. */
static inline bool kind_counts_samples(int k)
{
	return k >= 0 && k < PERFD_VALUE_KINDS && kind_infos[k].counts == PERFD_KIND_COUNTS_CPU;
}

/* The sum of values[k] over the kinds whose samples count (a value per
 * kind, as the store's drop counts are). */
static inline uint64_t kind_samples_of(const uint64_t *values)
{
	uint64_t n = 0;

	for (int k = 0; k < PERFD_VALUE_KINDS; k++)
		if (kind_counts_samples(k))
			n += values[k];
	return n;
}

/* What a value of kind stored adds to a profile of kind k, in k's unit:
 * the value itself when they are the same kind; for a TIME kind (wall),
 * a CPU value times the sampling period and an off-CPU value as it is;
 * else 0 (not of the profile). */
static inline uint64_t kind_value_in(int k, int stored, uint64_t value, uint64_t period_ns)
{
	if (stored == k)
		return value;
	if (k < 0 || k >= PERFD_VALUE_KINDS || kind_infos[k].counts != PERFD_KIND_COUNTS_TIME ||
	    stored < 0 || stored >= PERFD_VALUE_KINDS)
		return 0;
	switch (kind_infos[stored].counts) {
	case PERFD_KIND_COUNTS_CPU:
		return value * period_ns;
	case PERFD_KIND_COUNTS_WAIT:
		return value;
	default:
		return 0;
	}
}

/* The kind named name (len bytes): its index in kind_infos, or -EINVAL. */
int kind_find(const char *name, size_t len);

/* The row of the kind named by the NUL-terminated name, or NULL. */
const struct kind_info *kind_by_name(const char *name);

/* Whether a profile of the kind named name shows kernel frames: a kind
 * perfd does not know (another tool's pprof sample type) keeps them. */
bool kind_name_kernel_frames(const char *name);

/* The first value type a pprof profile of kind k lists, the one a reader
 * finds the kind by: KIND_PPROF_COUNT_TYPE for a PERIODS kind, else its own type. */
const char *kind_pprof_first_type(const struct kind_info *k);

#endif
