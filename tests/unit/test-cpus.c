/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/cpus.c: the kernel's cpu-list format. */
#include <criterion/criterion.h>
#include <errno.h>
#include <unistd.h>

#include "collect/cpus.h"

Test(cpus, ranges_and_singles)
{
	bool on[16];

	cr_assert_eq(cpus_parse_list("0-3,5,7-8\n", on, 16), 7);
	cr_assert(on[0] && on[3] && on[5] && on[7] && on[8]);
	cr_assert(!on[4] && !on[6] && !on[9]);
	cr_assert_eq(cpus_parse_list("0", on, 16), 1);
	cr_assert_eq(cpus_parse_list("", on, 16), 0);
}

Test(cpus, malformed_lists_are_rejected)
{
	bool on[8];
	const char *bad[] = { "a", "1-", "3-1", "1,,2", "1 2", "-1", "0-8", "1x" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(cpus_parse_list(bad[i], on, 8), -EINVAL, "'%s' accepted", bad[i]);
}

Test(cpus, online_matches_sysconf)
{
	bool on[4096];

	cr_assert_eq(cpus_read_online(on, 4096), sysconf(_SC_NPROCESSORS_ONLN));
}
