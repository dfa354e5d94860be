/* SPDX-License-Identifier: MIT */
/* kindtab.c - see kindtab.h: the table generated from perfd/kinds.h. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/kindtab.h"

#define KIND_INFO_ROW(id, value, name_, unit_, title_, kernel, period_, counts_, kskip, ptype, punit) \
	[value] = { .name = name_,                                                                       \
		    .unit = unit_,                                                                       \
		    .title = title_,                                                                     \
		    .kernel_frames = kernel,                                                             \
		    .period = PERFD_KIND_PERIOD_##period_,                                               \
		    .counts = PERFD_KIND_COUNTS_##counts_,                                               \
		    .kernel_skip = kskip,                                                                \
		    .pprof_type = ptype,                                                                 \
		    .pprof_unit = punit },
const struct kind_info kind_infos[PERFD_VALUE_KINDS] = { PERFD_KINDS(KIND_INFO_ROW) };

/* Row i has value i: as many values as rows, and each a different one of
 * 0..n-1 (a gap or a repeat would leave a row of this table empty). */
#define KIND_COUNT_ROW(...) +1
#define KIND_VALUE_BIT(id, value, ...) | (UINT64_C(1) << (value))
_Static_assert(PERFD_VALUE_KINDS == 0 PERFD_KINDS(KIND_COUNT_ROW),
	       "kinds.h: the values must be 0, 1, 2, ...");
_Static_assert((0 PERFD_KINDS(KIND_VALUE_BIT)) == (UINT64_C(1) << PERFD_VALUE_KINDS) - 1,
	       "kinds.h: the values must be 0, 1, 2, ..., each once");

int kind_find(const char *name, size_t len)
{
	for (size_t i = 0; i < PERFD_VALUE_KINDS; i++)
		if (strlen(kind_infos[i].name) == len && memcmp(name, kind_infos[i].name, len) == 0)
			return (int)i;
	return -EINVAL;
}

const struct kind_info *kind_by_name(const char *name)
{
	int k = kind_find(name, strlen(name));

	return k < 0 ? NULL : &kind_infos[k];
}

bool kind_name_kernel_frames(const char *name)
{
	const struct kind_info *k = kind_by_name(name);

	return !k || k->kernel_frames;
}

const char *kind_pprof_first_type(const struct kind_info *k)
{
	return k->period == PERFD_KIND_PERIOD_PERIODS ? KIND_PPROF_COUNT_TYPE : k->pprof_type;
}
