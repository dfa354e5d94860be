/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/perfmap.c (JIT maps) and daemon/demangle.c. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfd/macro.h"
#include "symbols/demangle.h"
#include "symbols/perfmap.h"

static struct perfmap *parse(const char *text, size_t *skipped)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct perfmap *m = NULL;

	cr_assert_not_null(f);
	cr_assert_eq(perfmap_parse(f, &m, skipped), 0);
	fclose(f);
	return m;
}

Test(perfmap, lookup_by_range)
{
	struct perfmap *m = parse("7f0000001000 40 LazyCompile:*hot /app/x.js:3:10\n"
				  "7f0000002000 10 Builtin:ArgumentsAdaptorTrampoline\n",
				  NULL);
	uint64_t off;

	cr_assert_eq(perfmap_count(m), 2);
	cr_assert_str_eq(perfmap_lookup(m, 0x7f0000001000, &off), "LazyCompile:*hot /app/x.js:3:10");
	cr_assert_eq(off, 0);
	cr_assert_str_eq(perfmap_lookup(m, 0x7f000000103f, &off), "LazyCompile:*hot /app/x.js:3:10");
	cr_assert_eq(off, 0x3f);
	cr_assert_null(perfmap_lookup(m, 0x7f0000001040, NULL));
	cr_assert_null(perfmap_lookup(m, 0x7f0000000fff, NULL));
	cr_assert_str_eq(perfmap_lookup(m, 0x7f000000200f, NULL), "Builtin:ArgumentsAdaptorTrampoline");
	perfmap_free(m);
}

Test(perfmap, later_lines_win_where_code_was_recompiled)
{
	struct perfmap *m = parse("1000 100 old\n"
				  "1040 20 new\n"
				  "2000 10 a\n"
				  "2000 10 b\n",
				  NULL);

	cr_assert_str_eq(perfmap_lookup(m, 0x1000, NULL), "old");
	cr_assert_str_eq(perfmap_lookup(m, 0x1045, NULL), "new");
	/* the old function's part after the new one is dropped: unknown
	 * there rather than a name that may be stale */
	cr_assert_null(perfmap_lookup(m, 0x1070, NULL));
	cr_assert_str_eq(perfmap_lookup(m, 0x2005, NULL), "b");
	perfmap_free(m);
}

Test(perfmap, malformed_and_unfinished_lines_are_skipped)
{
	size_t skipped = 0;
	struct perfmap *m = parse("zz 10 bad\n"
				  "1000 0 empty\n"
				  "1000 10\n"
				  "3000 10 good\n"
				  "4000 10 being-writ",
				  &skipped);

	cr_assert_eq(perfmap_count(m), 1);
	cr_assert_eq(skipped, 4);
	cr_assert_str_eq(perfmap_lookup(m, 0x3001, NULL), "good");
	cr_assert_null(perfmap_lookup(m, 0x4001, NULL));
	perfmap_free(m);
}

Test(perfmap, over_long_lines_are_skipped)
{
	const char head[] = "7f0000003000 10 ";
	size_t n = sizeof(head) - 1, skipped = 0;
	_cleanup_free_ char *text = malloc(PERFMAP_LINE_MAX + 256);
	struct perfmap *m;

	cr_assert_not_null(text);
	memcpy(text, head, n);
	memset(text + n, 'x', PERFMAP_LINE_MAX);
	n += PERFMAP_LINE_MAX;
	n += (size_t)sprintf(text + n, "\n7f0000001000 10 JS:*after\n");
	m = parse(text, &skipped);
	cr_expect_eq(skipped, 1);
	cr_expect_eq(perfmap_count(m), 1);
	cr_expect_str_eq(perfmap_lookup(m, 0x7f0000001000, NULL), "JS:*after");
	cr_expect_null(perfmap_lookup(m, 0x7f0000003000, NULL));
	perfmap_free(m);
}

Test(perfmap, a_map_past_the_byte_cap_is_refused)
{
	_cleanup_fclose_ FILE *f = tmpfile();
	struct perfmap *m = NULL;
	char line[64];
	uint64_t written = 0;

	cr_assert_not_null(f);
	for (uint64_t i = 0; written <= PERFMAP_MAX_BYTES; i++) {
		int n = snprintf(line, sizeof(line), "%" PRIx64 " 10 f%" PRIu64 "\n",
				 0x7f0000000000 + 16 * i, i);

		cr_assert_eq(fwrite(line, 1, (size_t)n, f), (size_t)n);
		written += (uint64_t)n;
	}
	rewind(f);
	cr_expect_eq(perfmap_parse(f, &m, NULL), -EFBIG);
	cr_expect_null(m);
}

Test(perfmap, skipped_long_lines_count_whole_against_the_cap)
{
	_cleanup_fclose_ FILE *f = tmpfile();
	_cleanup_free_ char *line = malloc(4 * PERFMAP_LINE_MAX);
	struct perfmap *m = NULL;
	size_t len = 4 * PERFMAP_LINE_MAX - 1;

	cr_assert_not_null(f);
	cr_assert_not_null(line);
	memset(line, 'x', len);
	line[len - 1] = '\n';
	for (uint64_t written = 0; written <= PERFMAP_MAX_BYTES; written += len)
		cr_assert_eq(fwrite(line, 1, len, f), len);
	rewind(f);
	cr_expect_eq(perfmap_parse(f, &m, NULL), -EFBIG);
	cr_expect_null(m);
}

Test(demangle, cpp_rust_legacy_and_v0)
{
	struct {
		const char *in, *out;
	} cases[] = {
		{ "_ZN3app6detail4workIiEEvT_", "void app::detail::work<int>(int)" },
		{ "_ZN4core3ptr13drop_in_place17h1234567890abcdefE", "core::ptr::drop_in_place" },
		{ "_RNvCs1234_7mycrate4main", "mycrate::main" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *d = demangle(cases[i].in);

		cr_assert_not_null(d, "%s not demangled", cases[i].in);
		cr_assert_str_eq(d, cases[i].out);
		free(d);
	}
	cr_assert_null(demangle("main"));
	cr_assert_null(demangle("_start"));
	cr_assert_null(demangle("_Zgarbage"));
}
