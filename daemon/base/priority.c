/* SPDX-License-Identifier: MIT */
/* priority.c - see priority.h.  Linux's nice is a thread's: PRIO_PROCESS
 * of a thread id sets that thread alone, and a new thread starts at its
 * creator's. */
#include <errno.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/priority.h"

/* whether the loop's was set: the lanes follow only then (written before
 * any lane starts) */
static bool raised;

int priority_raise_loop(void)
{
	int start;

	errno = 0;
	start = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (start == -1 && errno)
		return -errno;
	if (start > PRIORITY_BACKGROUND_NICE)
		return 1;
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), PRIORITY_LOOP_NICE) < 0)
		return -errno;
	raised = true;
	return 0;
}

void priority_lower_lane(void)
{
	/* best effort: raising one's nice value needs no privilege */
	if (raised)
		(void)setpriority(PRIO_PROCESS, (id_t)gettid(), PRIORITY_BACKGROUND_NICE);
}
