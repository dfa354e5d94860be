/* SPDX-License-Identifier: MIT */
/*
 * test-svg.c - the snapshot's SVG flame graph (daemon/encode/svg.c) of
 * models built by hand (fakemodel.h), read back as a client gets it: one
 * root per process, frames named as on the page and coloured by kind, a
 * legend of the kinds present, and a 100k-stack profile that stays a few
 * thousand frames with the rest counted.  The SVG writer's escaping is
 * tested in test-flame.c; the SVG is opened in Chromium by
 * tests/integration/test_flamegraph.py.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "encode/encode.h"
#include "encode/flame.h"
#include "fakemodel.h"
#include "flametest.h"

FAKE_SUITE(svg);

static char *encode_svg(const struct model *m)
{
	struct encode_opts eo = { .period_ns = 10000000, .time_unix_ns = 1700000000000000000ULL,
				  .duration_ns = 5000000000ULL };

	return fake_encode_text(svg_encode, m, &eo);
}

Test(svg, processes_frames_and_kinds)
{
	static const struct fake_frame frames[] = {
		{ KFRAME(0x10), 1, { KERNEL("do_syscall_64") } },
		{ FRAME(1, 0x1), 1, { NATIVE("main", NULL, 0, 1) } },
	};
	const uint64_t hot[] = { KFRAME(0x10), FRAME(1, 0x1) };
	struct model *m;
	char *svg, fill[32];

	SET_FAKE_FRAMES(frames);
	fake_process(0, 7, "one", NULL);
	fake_process(1, 8, "two", NULL);
	fake_add_kind(0, hot, 2, 1, 1, PROFILE_KIND_CPU, 300);
	fake_add_kind(1, hot + 1, 1, 0, 1, PROFILE_KIND_CPU, 100);
	m = fake_build();
	svg = encode_svg(m);
	cr_expect(strstr(svg, "<title>one (pid 7)\nprocess\ntotal: 300 samples (3.00 s), 75.00% of all\n"
			      "self:  0 samples (0 ns), 0.00% of all</title>") != NULL, "%s", svg);
	cr_expect(strstr(svg, "<title>two (pid 8)\n") != NULL);
	cr_expect(strstr(svg, "<title>do_syscall_64\nkernel  [kernel.kallsyms]\ntotal: 300 samples") != NULL,
		  "%s", svg);
	cr_expect(strstr(svg, "<title>main\nnative  /usr/bin/app\n") != NULL, "%s", svg);
	cr_expect(strstr(svg, "CPU: 400 samples (4.00 s) of one (pid 7), two (pid 8); from "
			      "2023-11-14T22:13:20Z for 5.00 s") != NULL, "%s", svg);
	/* the legend: a swatch per kind present, in the kind's colour */
	snprintf(fill, sizeof(fill), "fill=\"#%06x\"", flame_kind_colour("kernel"));
	cr_expect(strstr(svg, fill) != NULL, "no kernel swatch");
	cr_expect(strstr(svg, ">kernel</text>") && strstr(svg, ">native</text>") &&
		  strstr(svg, ">process</text>") && !strstr(svg, ">python</text>"));
	cr_expect_eq(count(svg, "<g>"), 1 + 2 + 3, "all, two processes, main twice and the kernel frame");
	free(svg);
	model_free(m);
}

/* 100k distinct stacks of one sample each, ten deep, four callees a
 * frame: the SVG keeps what is at least half a pixel wide (the callers)
 * and says how much it left out. */
Test(svg, a_100k_stack_profile_stays_small, .timeout = 60)
{
	enum { STACKS = 100000, DEPTH = 10 };
	struct model *m;
	char *svg;
	size_t size, groups;

	m = fake_fanout_model(STACKS, DEPTH);
	svg = encode_svg(m);
	size = strlen(svg);
	groups = count(svg, "<g>");
	/* 1/2400 of the total at least: under 2400 frames a level; here the
	 * levels of 1, 2, 7, 25, 98, 391 and 1562 frames (64 samples each, at
	 * least 42 to be kept: the 1563rd has 32) are kept, and the 6250 of
	 * 16 samples and the rest below are not; "all" and the process above */
	cr_expect_eq(groups, 1 + 1 + 1 + 2 + 7 + 25 + 98 + 391 + 1562, "%zu frames", groups);
	cr_expect(strstr(svg, " frames under 0.042% of the total each are left out") != NULL, "%.1200s", svg);
	cr_expect_lt(size, 2 << 20, "an SVG of %zu bytes", size);
	cr_expect(strstr(svg, "</svg>\n") != NULL);
	cr_log_info("100k stacks: an SVG of %zu bytes, %zu frames", size, groups);
	free(svg);
	model_free(m);
}
