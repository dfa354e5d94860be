/* SPDX-License-Identifier: MIT */
/*
 * test-tiers.c - the pure half of the BPF loader (daemon/collect/tiers.c):
 * which tier comes after a refusal (the ladder, feature by feature), the
 * verifier's reason read from its log, the tiers' names, the programs a
 * tier loads, and --test-refuse's list.  The loading itself is tested for
 * real by tests/integration/test_tiers.py.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "collect/tiers.h"
#include "perfd/tiers.h"

#define FULL (TIER_TABLES | TIER_PYTHON | TIER_MEMORY | TIER_SWITCHES)

static unsigned next_of(unsigned tier, unsigned allowed, const char *failed)
{
	unsigned next = 0xdead;

	cr_assert_eq(tier_next(tier, allowed, failed, &next), 0, "no tier after %#x, %s refused", tier, failed);
	return next;
}

Test(tiers, tick_program_refused_goes_down_the_unwinding_ladder_keeping_memory)
{
	unsigned t = FULL;

	t = next_of(t, FULL, "on_cpu_clock");
	cr_assert_eq(t, TIER_TABLES | TIER_MEMORY | TIER_SWITCHES);
	t = next_of(t, FULL, "on_cpu_clock");
	cr_assert_eq(t, TIER_PYTHON | TIER_MEMORY | TIER_SWITCHES);
	t = next_of(t, FULL, "on_cpu_clock");
	cr_assert_eq(t, TIER_MEMORY | TIER_SWITCHES);
	cr_assert_eq(tier_next(t, FULL, "on_cpu_clock_fp", &t), -ENOENT);
}

Test(tiers, memory_refused_drops_memory_only)
{
	cr_assert_eq(next_of(FULL, FULL, "on_rss_stat"), TIER_TABLES | TIER_PYTHON | TIER_SWITCHES);
	cr_assert_eq(next_of(TIER_PYTHON | TIER_MEMORY, FULL, "on_rss_stat"), TIER_PYTHON);
	cr_assert_eq(next_of(FULL, FULL, "on_sched_switch"), TIER_TABLES | TIER_PYTHON | TIER_MEMORY);
	cr_assert_eq(next_of(FULL, FULL, "on_hrtimer_expire"), TIER_TABLES | TIER_PYTHON | TIER_MEMORY);
}

Test(tiers, the_ladder_skips_what_is_not_allowed)
{
	/* --no-python: tables, then frame pointers */
	cr_assert_eq(next_of(TIER_TABLES, TIER_TABLES | TIER_MEMORY, "on_cpu_clock"), 0);
	/* --unwind-mib 0: frame pointers + Python, then frame pointers */
	cr_assert_eq(next_of(TIER_PYTHON, TIER_PYTHON, "on_cpu_clock"), 0);
}

Test(tiers, a_program_every_tier_needs_ends_the_ladder)
{
	unsigned t;

	cr_assert_eq(tier_next(FULL, FULL, "on_process_exit", &t), -ENOENT);
	cr_assert_eq(tier_next(FULL & ~TIER_MEMORY, FULL, "on_rss_stat", &t), -ENOENT);
}

Test(tiers, names)
{
	char b[TIER_NAME_MAX];

	cr_assert_str_eq(tier_name(FULL, b, sizeof(b)), "tables+python+memory");
	cr_assert_str_eq(tier_name(TIER_TABLES | TIER_PYTHON, b, sizeof(b)), "tables+python");
	cr_assert_str_eq(tier_name(TIER_PYTHON, b, sizeof(b)), "frame-pointers+python");
	cr_assert_str_eq(tier_name(0, b, sizeof(b)), "frame-pointers");
	cr_assert_str_eq(tier_feature_name(TIER_SWITCHES), "context-switches");
}

Test(tiers, programs_of_a_tier)
{
	cr_assert(tier_uses_program(TIER_PYTHON, "on_cpu_clock"));
	cr_assert_not(tier_uses_program(TIER_PYTHON, "on_cpu_clock_fp"));
	cr_assert(tier_uses_program(TIER_MEMORY, "on_cpu_clock_fp"));
	cr_assert_not(tier_uses_program(TIER_MEMORY, "on_cpu_clock"));
	cr_assert(tier_uses_program(TIER_MEMORY, "on_rss_stat"));
	cr_assert_not(tier_uses_program(TIER_TABLES, "on_rss_stat"));
	cr_assert_not(tier_uses_program(0, "on_sched_switch"));
	cr_assert(tier_uses_program(0, "on_process_exec"));
}

Test(tiers, reason_is_the_verifiers_last_line_before_its_statistics)
{
	char b[128];
	const char *too_large = "Func#2 ('perfd_fp_run') is global and assumed valid.\n"
				"BPF program is too large. Processed 1000001 insn\n"
				"verification time 6176534 usec\n"
				"stack depth 248+80+0+0\n"
				"processed 1000001 insns (limit 1000000) max_states_per_insn 29 total_states 30328\n";
	const char *refused = "invalid read from stack R10 off=8 size=8\nverification time 538 usec\n"
			      "stack depth 0+0+0+0\n";
	const char *path = "21: (15) if r1 == 0x0 goto pc+1       ; R1=2\n"
			   "22: (79) r0 = *(u64 *)(r10 +8)\ninvalid read from stack R10 off=8 size=8\n\n";

	cr_assert_gt(verifier_reason(too_large, b, sizeof(b)), 0);
	cr_assert_str_eq(b, "BPF program is too large. Processed 1000001 insn");
	verifier_reason(refused, b, sizeof(b));
	cr_assert_str_eq(b, "invalid read from stack R10 off=8 size=8");
	verifier_reason(path, b, sizeof(b)); /* a level-1 log */
	cr_assert_str_eq(b, "invalid read from stack R10 off=8 size=8");
}

Test(tiers, a_log_of_statistics_only_has_no_reason)
{
	char b[64] = "x";

	cr_assert_eq(verifier_reason("verification time 1 usec\nstack depth 8\n"
				     "processed 14 insns (limit 1000000) max_states_per_insn 0\n",
				     b, sizeof(b)), 0);
	cr_assert_str_eq(b, "");
	cr_assert_eq(verifier_reason("", b, sizeof(b)), 0);
	cr_assert_eq(verifier_reason("Func#1 ('f') is global and assumed valid.\n", b, sizeof(b)), 0);
}

Test(tiers, a_long_reason_is_truncated)
{
	char b[8];

	cr_assert_eq(verifier_reason("abcdefghijkl\n", b, sizeof(b)), 7);
	cr_assert_str_eq(b, "abcdefg");
}

Test(tiers, refuse_list)
{
	uint32_t bits = 0;

	cr_assert_eq(tier_parse_refuse("tables,python,memory,frame-pointers", &bits), 0);
	cr_assert_eq(bits, PERFD_REFUSE_TABLES | PERFD_REFUSE_PYTHON | PERFD_REFUSE_MEMORY |
				   PERFD_REFUSE_FRAME_POINTERS);
	cr_assert_eq(tier_parse_refuse("memory", &bits), 0);
	cr_assert_eq(bits, PERFD_REFUSE_MEMORY);
	cr_assert_eq(tier_parse_refuse("", &bits), -EINVAL);
	cr_assert_eq(tier_parse_refuse("tables,", &bits), -EINVAL);
	cr_assert_eq(tier_parse_refuse("fp", &bits), -EINVAL);
	cr_assert_eq(bits, PERFD_REFUSE_MEMORY, "a refused list leaves the output alone");
}

Test(tiers, report_says_what_was_lost)
{
	struct sampler_load_report r = { .asked = FULL, .supported = FULL, .loaded = true,
					 .tier = TIER_TABLES | TIER_MEMORY | TIER_SWITCHES };
	char b[512];

	strcpy(r.why[1], "on_cpu_clock with tables+python was refused by this kernel's verifier: \"x\"");
	cr_assert_eq(load_report_lost(&r), TIER_PYTHON);
	cr_assert_str_eq(load_report_why(&r, TIER_TABLES), "");
	load_report_describe_loss(&r, TIER_PYTHON, b, sizeof(b));
	cr_assert_str_eq(b, "on_cpu_clock with tables+python was refused by this kernel's verifier: \"x\"; "
			    "running with tables+memory: Python processes show their native frames only");
}
