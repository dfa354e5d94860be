/* SPDX-License-Identifier: MIT */
/* priority.c - see priority.h.  Linux's nice is a thread's: PRIO_PROCESS
 * of a thread id sets that thread alone, and a new thread starts at its
 * creator's. */
#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/priority.h"

int priority_raise_loop(void)
{
	return setpriority(PRIO_PROCESS, (id_t)gettid(), PRIORITY_LOOP_NICE) < 0 ? -errno : 0;
}

void priority_lower_lane(void)
{
	/* best effort: raising one's nice value needs no privilege */
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), PRIORITY_BACKGROUND_NICE);
}
