/* SPDX-License-Identifier: MIT */
/*
 * test-folded.c - the folded-stack encoder (daemon/encode/folded.c): a
 * model built from hand-made parts with a fake resolver (fakemodel.h),
 * encoded into the JSON writer as the daemon does, and the JSON string read
 * back with json-c's strict tokener, so each test compares the text a
 * client gets.  Order (most samples first, ties fixed by text, whatever the order
 * the stacks came in), sanitized names, kernel suffix, inlined frames,
 * Python frames, thread roots, merging of stacks that read alike, and one
 * root per process; and how an encoding is stopped when perfd stops.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "encode/encode.h"
#include "fakemodel.h"

FAKE_SUITE(folded);

/* The folded text of m, as a client reads it from the answer. */
static char *encode(const struct model *m)
{
	struct encode_opts eo = { .period_ns = 10000000 };

	return fake_encode_text(folded_encode, m, &eo);
}

static char *encode_opts(struct model_opts o)
{
	struct model *m = fake_build_opts(o);
	char *text = encode(m);

	model_free(m);
	return text;
}

static char *encode_default(void)
{
	return encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true });
}

static char *encode_lines(void)
{
	return encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .lines = true,
						.python_lines = true });
}

#define expect_folded(text, expected)                                          \
	do {                                                                   \
		char *t_ = (text);                                             \
		cr_assert_str_eq(t_, expected);                                \
		free(t_);                                                      \
	} while (0)

Test(folded, root_first_with_kernel_suffix_most_samples_first)
{
	/* leaf first: kernel 11 <- 10, then user 3 <- 2 <- 1 (the root) */
	const uint64_t a[] = { KFRAME(0x11), KFRAME(0x10), FRAME(1, 0x3), FRAME(1, 0x2),
			       FRAME(1, 0x1) };

	fake_process(0, 10, "app", NULL);
	fake_add_kind(0, a, 5, 2, 1, PROFILE_KIND_CPU, 3);
	FAKE_ADD(0, 7, FRAME(1, 0x4), FRAME(1, 0x1));
	expect_folded(encode_default(), "app;f1;f4 7\n"
					"app;f1;f2;f3;f10_[k];f11_[k] 3\n");
}

Test(folded, empty_profile_is_an_empty_string)
{
	expect_folded(encode_default(), "");
	fake_process(0, 10, "app", NULL);
	expect_folded(encode_default(), "");
}

Test(folded, only_the_kind_of_the_model)
{
	const uint64_t a[] = { FRAME(1, 0x2), FRAME(1, 0x1) };

	fake_process(0, 10, "app", NULL);
	fake_add_kind(0, a, 2, 0, 1, PROFILE_KIND_MEMORY, 4096);
	FAKE_ADD(0, 5, FRAME(1, 0x3), FRAME(1, 0x1));
	expect_folded(encode_opts((struct model_opts){ .kind = PROFILE_KIND_MEMORY }),
		      "app;f1;f2 4096\n");
	expect_folded(encode_default(), "app;f1;f3 5\n");
}

static const struct fake_frame alike_frames[] = {
	{ FRAME(1, 0x1), 1, { NATIVE("main", NULL, 0, 1) } },
	{ FRAME(1, 0x2), 1, { NATIVE("hot", NULL, 0, 1) } },
	{ FRAME(2, 0x7), 1, { NATIVE("hot", NULL, 0, 2) } }, /* same name, other binary */
};

Test(folded, stacks_that_read_alike_merge)
{
	SET_FAKE_FRAMES(alike_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 2, FRAME(1, 0x2), FRAME(1, 0x1));
	FAKE_ADD(0, 5, FRAME(2, 0x7), FRAME(1, 0x1));
	expect_folded(encode_default(), "app;main;hot 7\n");
}

/* An inlined call is a frame of its own: the stack of a function inlined
 * into its caller reads like the one where it was called, and they make
 * one line. */
static const struct fake_frame inline_frames[] = {
	{ FRAME(1, 0x1), 1, { NATIVE("main", "/src/app/main.c", 5, 1) } },
	{ FRAME(1, 0x2), 2, { NATIVE("outer", "/src/app/a.c", 10, 1),
			      NATIVE("inner", "/src/app/b.h", 20, 1) } },
	/* outer calling inner out of line, at the same lines */
	{ FRAME(1, 0x3), 1, { NATIVE("outer", "/src/app/a.c", 10, 1) } },
	{ FRAME(1, 0x4), 1, { NATIVE("inner", "/src/app/b.h", 20, 1) } },
	{ FRAME(1, 0x5), 1, { NATIVE("nodebug", NULL, 0, 1) } },
};

Test(folded, inlined_calls_are_frames_of_their_own_with_lines)
{
	SET_FAKE_FRAMES(inline_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 3, FRAME(1, 0x2), FRAME(1, 0x1));
	FAKE_ADD(0, 1, FRAME(1, 0x5), FRAME(1, 0x1));
	expect_folded(encode_lines(), "app;main (main.c:5);outer (a.c:10);inner (b.h:20) 3\n"
				      "app;main (main.c:5);nodebug 1\n");
	/* without lines, the function the symbol table names */
	expect_folded(encode_default(), "app;main;outer 3\n"
					"app;main;nodebug 1\n");
}

Test(folded, inlined_and_called_stacks_that_read_alike_merge)
{
	SET_FAKE_FRAMES(inline_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 3, FRAME(1, 0x2), FRAME(1, 0x1));
	FAKE_ADD(0, 4, FRAME(1, 0x4), FRAME(1, 0x3), FRAME(1, 0x1));
	expect_folded(encode_lines(), "app;main (main.c:5);outer (a.c:10);inner (b.h:20) 7\n");
}

static const struct fake_frame python_frames[] = {
	{ PYFRAME(0x1), 1, { PYTHON("<module>", "/srv/app.py", 1) } },
	{ PYFRAME(0x2), 1, { PYTHON("Worker.run", "/srv/app.py", 12) } },
	{ PYFRAME(0x3), 1, { PYTHON("Worker.run", "/srv/app.py", 14) } },
	{ PYFRAME(0x4), 1, { PYTHON("[python: unreadable code object]", NULL, 0) } },
	{ FRAME(1, 0x9), 1, { NATIVE("_PyEval_EvalFrameDefault", "ceval.c", 900, 1) } },
};

Test(folded, python_frames_with_and_without_lines)
{
	SET_FAKE_FRAMES(python_frames);
	fake_process(0, 10, "python3", NULL);
	FAKE_ADD(0, 2, PYFRAME(0x2), PYFRAME(0x1));
	FAKE_ADD(0, 1, PYFRAME(0x3), PYFRAME(0x1));
	FAKE_ADD(0, 1, PYFRAME(0x4), PYFRAME(0x1));
	/* the two of count 1 in the order their text fixes (a hash of it) */
	expect_folded(encode_default(),
		      "python3;<module> (/srv/app.py:1);Worker.run (/srv/app.py:12) 2\n"
		      "python3;<module> (/srv/app.py:1);[python: unreadable code object] 1\n"
		      "python3;<module> (/srv/app.py:1);Worker.run (/srv/app.py:14) 1\n");
	/* without python_lines: the file alone, and the two lines merge */
	expect_folded(encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU }),
		      "python3;<module> (/srv/app.py);Worker.run (/srv/app.py) 3\n"
		      "python3;<module> (/srv/app.py);[python: unreadable code object] 1\n");
}

/* Native lines and Python lines are asked for apart. */
Test(folded, native_lines_do_not_change_python_frames)
{
	SET_FAKE_FRAMES(python_frames);
	fake_process(0, 10, "python3", NULL);
	FAKE_ADD(0, 1, FRAME(1, 0x9), PYFRAME(0x2));
	expect_folded(encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .lines = true }),
		      "python3;Worker.run (/srv/app.py);_PyEval_EvalFrameDefault (ceval.c:900) 1\n");
}

static const struct fake_frame weird_frames[] = {
	{ FRAME(1, 0x1), 1, { NATIVE("a;b", NULL, 0, 1) } },
	{ FRAME(1, 0x2), 1, { NATIVE("new\nline\ttab\x01\x7f", NULL, 0, 1) } },
	{ FRAME(1, 0x3), 1, { NATIVE("quote\"back\\slash", "/d;ir/fi;le.c", 3, 1) } },
	{ FRAME(1, 0x4), 1, { NATIVE("caf\xc3\xa9", NULL, 0, 1) } },
	{ FRAME(1, 0x5), 1, { NATIVE("bad\xff", NULL, 0, 1) } },
};

Test(folded, separators_and_control_bytes_are_replaced)
{
	SET_FAKE_FRAMES(weird_frames);
	fake_process(0, 10, "we;ird\t", NULL);
	FAKE_ADD(0, 1, FRAME(1, 0x2), FRAME(1, 0x1));
	expect_folded(encode_default(), "we_ird_;a_b;new_line_tab__ 1\n");
}

/* The text is JSON-escaped on the wire and reads back unchanged; what is
 * not UTF-8 reads as U+FFFD. */
Test(folded, quotes_backslashes_and_bytes_survive_the_json_string)
{
	SET_FAKE_FRAMES(weird_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 2, FRAME(1, 0x3), FRAME(1, 0x4));
	FAKE_ADD(0, 1, FRAME(1, 0x5), FRAME(1, 0x4));
	expect_folded(encode_lines(), "app;caf\xc3\xa9;quote\"back\\slash (fi_le.c:3) 2\n"
				      "app;caf\xc3\xa9;bad\xef\xbf\xbd 1\n");
}

Test(folded, threads_root_each_stack_at_its_thread)
{
	SET_FAKE_FRAMES(alike_frames);
	fake_process(0, 10, "app", NULL);
	fake_thread(0, 10, "app");
	fake_thread(0, 11, "work;er\n");
	fake_add_kind(0, (const uint64_t[]){ FRAME(1, 0x2), FRAME(1, 0x1) }, 2, 0, 10,
		      PROFILE_KIND_CPU, 2);
	fake_add_kind(0, (const uint64_t[]){ FRAME(1, 0x2), FRAME(1, 0x1) }, 2, 0, 11,
		      PROFILE_KIND_CPU, 5);
	fake_add_kind(0, (const uint64_t[]){ FRAME(1, 0x2), FRAME(1, 0x1) }, 2, 0, 12,
		      PROFILE_KIND_CPU, 1);
	expect_folded(encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .threads = true }),
		      "app;[thread 11 work_er_];main;hot 5\n"
		      "app;[thread 10 app];main;hot 2\n"
		      "app;[thread 12];main;hot 1\n");
	/* without threads they are one stack */
	expect_folded(encode_default(), "app;main;hot 8\n");
}

Test(folded, each_process_is_rooted_at_its_comm)
{
	SET_FAKE_FRAMES(alike_frames);
	fake_process(0, 10, "app", NULL);
	fake_process(1, 20, "db", NULL);
	fake_process(2, 30, "app", NULL); /* another app: reads alike */
	FAKE_ADD(0, 2, FRAME(1, 0x2), FRAME(1, 0x1));
	FAKE_ADD(1, 3, FRAME(1, 0x2), FRAME(1, 0x1));
	FAKE_ADD(2, 4, FRAME(1, 0x2), FRAME(1, 0x1));
	FAKE_ADD(1, 1, FRAME(1, 0x1));
	expect_folded(encode_default(), "app;main;hot 6\n"
					"db;main;hot 3\n"
					"db;main 1\n");
}

/* The stack part of a folded line (up to the space before its count). */
static size_t stack_len(const char *line, const char *nl)
{
	const char *sp = nl;

	while (sp > line && sp[-1] != ' ')
		sp--;
	cr_assert_gt(sp, line, "no count in %.*s", (int)(nl - line), line);
	return (size_t)(sp - 1 - line);
}

/* Most samples first; among equal counts, in an order fixed by the stacks'
 * text (a hash of it), whatever order they came in and whatever ids their
 * names got.  Names are picked so that some begin others ("run", "run (x)",
 * "run2"): lines that read alike but for them must still come apart. */
Test(folded, order_is_count_then_fixed_by_text)
{
	static const struct fake_frame frames[] = {
		{ FRAME(1, 0x1), 1, { NATIVE("main", NULL, 0, 1) } },
		{ FRAME(1, 0x2), 1, { NATIVE("run", NULL, 0, 1) } },
		{ FRAME(1, 0x3), 1, { NATIVE("run (x)", NULL, 0, 1) } },
		{ FRAME(1, 0x4), 1, { NATIVE("run2", NULL, 0, 1) } },
		{ FRAME(1, 0x5), 1, { NATIVE("run-", NULL, 0, 1) } },
		{ FRAME(1, 0x6), 1, { NATIVE("a", NULL, 0, 1) } },
		{ FRAME(1, 0x7), 1, { NATIVE("B", NULL, 0, 1) } },
	};
	char *out[2];

	SET_FAKE_FRAMES(frames);
	for (int order = 0; order < 2; order++) {
		uint64_t stacks[12][3];
		int n = 0;

		for (uint64_t x = 2; x <= 7; x++) {
			stacks[n][0] = FRAME(1, x);
			stacks[n][1] = FRAME(1, 0x1);
			n++;
			stacks[n][0] = FRAME(1, 0x6);
			stacks[n][1] = FRAME(1, x);
			stacks[n][2] = FRAME(1, 0x1);
			n++;
		}
		if (order) { /* start over, from the suite's fixture */
			fake_teardown();
			fake_setup();
			SET_FAKE_FRAMES(frames);
		}
		fake_process(0, 10, "app", NULL);
		for (int k = 0; k < n; k++) {
			int i = order ? n - 1 - k : k;

			fake_add_kind(0, stacks[i], i % 2 ? 3 : 2, 0, 1, PROFILE_KIND_CPU,
				      i == 4 ? 9 : 4);
		}
		out[order] = encode_default();
	}
	cr_assert_str_eq(out[0], out[1], "the order depends on the order of arrival");
	cr_assert_eq(strncmp(out[0], "app;main;run2 9\n", 16), 0, "%s", out[0]);
	{
		const char *line = out[0] + 16, *nl, *prev = NULL;
		size_t prev_len = 0;
		int lines = 1;

		for (; (nl = strchr(line, '\n')); line = nl + 1, lines++) {
			size_t len = stack_len(line, nl);

			if (prev) {
				unsigned long a = strtoul(prev + prev_len + 1, NULL, 10),
					      b = strtoul(line + len + 1, NULL, 10);

				cr_assert_geq(a, b, "not most samples first:\n%.*s\n%.*s\nin:\n%s",
					      (int)prev_len, prev, (int)len, line, out[0]);
				cr_assert(prev_len != len || memcmp(prev, line, len) != 0,
					  "two lines read alike:\n%s", out[0]);
			}
			prev = line;
			prev_len = len;
		}
		cr_assert_eq(lines, 12);
	}
	free(out[0]);
	free(out[1]);
}

/* What stops an answer being encoded when perfd stops (encode_lane.c): the
 * sink passes writes on until the flag is set, then refuses them, and the
 * encoder gives up with its error.  Without it the lane finished a JSON
 * tree of minutes before perfd could exit. */
Test(folded, a_cancelled_sink_stops_the_encoder_at_its_next_write)
{
	struct encode_opts eo = { .period_ns = 10000000 };
	struct encode_cancel_sink c;
	struct encode_buffer b;
	atomic_bool cancel = false;
	struct model *m;

	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 7, FRAME(1, 0x4), FRAME(1, 0x1));
	FAKE_ADD(0, 3, FRAME(1, 0x2), FRAME(1, 0x1));
	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU });

	encode_buffer_init(&b);
	encode_cancel_sink_init(&c, &b.sink, &cancel);
	cr_assert_eq(folded_encode(m, &eo, &c.sink), 0);
	cr_assert_gt(b.len, 0);
	encode_buffer_done(&b);

	encode_buffer_init(&b);
	encode_cancel_sink_init(&c, &b.sink, &cancel);
	cr_assert_eq(encode_sink_write(&c.sink, "x", 1), 0);
	cancel = true;
	cr_assert_eq(folded_encode(m, &eo, &c.sink), -ECANCELED);
	cr_assert_eq(b.len, 1, "%zu bytes written past the cancel", b.len - 1);
	cr_assert_eq(encode_sink_write(&c.sink, "y", 1), -ECANCELED, "not sticky");
	encode_buffer_done(&b);
	model_free(m);
}

/* JSON builds its whole call tree before its first write, most of its
 * time: it looks at the flag while it builds (calltree.h) and gives up
 * before writing anything. */
Test(folded, a_cancelled_json_encoding_gives_up_while_building_its_tree)
{
	atomic_bool cancel = true;
	struct encode_opts eo = { .period_ns = 10000000, .cancel = &cancel };
	struct encode_buffer b;
	struct model *m;

	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 7, FRAME(1, 0x4), FRAME(1, 0x1));
	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU });
	encode_buffer_init(&b);
	cr_assert_eq(json_encode(m, &eo, &b.sink), -ECANCELED);
	cr_assert_eq(b.len, 0);
	cancel = false;
	cr_assert_eq(json_encode(m, &eo, &b.sink), 0);
	cr_assert_gt(b.len, 0);
	encode_buffer_done(&b);
	model_free(m);
}
