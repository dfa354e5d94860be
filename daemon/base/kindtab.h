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
