/* SPDX-License-Identifier: MIT */
/* limits.c - see limits.h. */
#include <errno.h>

#include "api/limits.h"

int limits_admit(uint32_t uid, size_t held_by_uid, size_t held, size_t total, size_t per_uid,
		 size_t root_reserve)
{
	if (uid == 0)
		return held < total ? 0 : -EBUSY;
	if (held_by_uid >= per_uid)
		return -EUSERS;
	return held + root_reserve < total ? 0 : -EBUSY;
}
