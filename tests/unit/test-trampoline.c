/* SPDX-License-Identifier: MIT */
/*
 * test-trampoline.c - unit tests for daemon/unwind/trampoline.c.
 *
 * The decoder is given the templates CPython assembles (Python/
 * asm_trampoline.S: 3.12 and 3.13 as built here, and with -fcf-protection's
 * endbr64), frame-pointer shapes a template may take, and code it must
 * refuse: a branch, a second call, a stack that does not balance, the
 * caller's rbp overwritten, instructions cut short, and random bytes (which
 * must never crash it, and whatever it accepts must be well formed).  The
 * rows expected are worked out from the instructions by hand, in the
 * comments.  The real templates, read from the installed libpython
 * 3.12/3.13, are decoded by test-pyruntime.c.
 *
 * Tables: an arena of 3.12's (11-byte stride, 5957 copies) and of 3.13's
 * -X perf_jit (272) are searched the way BPF searches them
 * (unwind_table_find) at every instruction of every copy.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perfd/macro.h"
#include "perfd/unwind.h"
#include "unwind/trampoline.h"
#include "unwind/unwind_table.h"

/* sub $8,%rsp; call *%rcx; add $8,%rsp; ret */
static const uint8_t cpython_312[] = { 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1,
				       0x48, 0x83, 0xc4, 0x08, 0xc3 };
/* endbr64; then the same */
static const uint8_t cpython_cet[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x08,
				       0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3 };

struct want {
	uint32_t pc;
	int16_t cfa_offset; /* CFA = rsp + this */
	int8_t rbp_offset8;
};

static void check_rows(const struct trampoline_shape *s, const struct want *w, size_t n)
{
	cr_assert_eq(s->n_rows, n, "%u rows, expected %zu", s->n_rows, n);
	for (size_t i = 0; i < n; i++) {
		cr_expect_eq(s->rows[i].pc, w[i].pc, "row %zu: pc %u, expected %u", i,
			     s->rows[i].pc, w[i].pc);
		cr_expect_eq(s->rows[i].cfa_type, PERFD_CFA_RSP, "row %zu", i);
		cr_expect_eq(s->rows[i].cfa_offset, w[i].cfa_offset, "row %zu: rsp+%d, expected +%d",
			     i, s->rows[i].cfa_offset, w[i].cfa_offset);
		cr_expect_eq(s->rows[i].rbp_offset8, w[i].rbp_offset8, "row %zu: rbp %d, expected %d",
			     i, s->rows[i].rbp_offset8, w[i].rbp_offset8);
	}
}

static void decode_ok(const uint8_t *code, size_t size, struct trampoline_shape *s)
{
	int r = trampoline_decode(code, size, s);

	cr_assert_eq(r, 0, "refused: %s", strerror(-r));
	cr_assert_eq(s->size, size);
}

Test(trampoline, cpython_template)
{
	struct trampoline_shape s;
	/* at 0 the return address is at rsp; after the sub (the call and the
	 * add) 8 bytes lower; at ret at rsp again.  rbp is never touched. */
	const struct want w[] = { { 0, 8, 0 }, { 4, 16, 0 }, { 10, 8, 0 } };

	decode_ok(cpython_312, sizeof(cpython_312), &s);
	check_rows(&s, w, ELEMENTSOF(w));
}

Test(trampoline, cpython_template_with_endbr64)
{
	struct trampoline_shape s;
	const struct want w[] = { { 0, 8, 0 }, { 8, 16, 0 }, { 14, 8, 0 } };

	decode_ok(cpython_cet, sizeof(cpython_cet), &s);
	check_rows(&s, w, ELEMENTSOF(w));
}

Test(trampoline, frame_pointer_template)
{
	/* push %rbp; mov %rsp,%rbp; call *%rcx; pop %rbp; ret */
	static const uint8_t code[] = { 0x55, 0x48, 0x89, 0xe5, 0xff, 0xd1, 0x5d, 0xc3 };
	/* after the push the caller's rbp is at CFA-16 until the pop */
	const struct want w[] = { { 0, 8, 0 }, { 1, 16, -2 }, { 7, 8, 0 } };
	struct trampoline_shape s;

	decode_ok(code, sizeof(code), &s);
	check_rows(&s, w, ELEMENTSOF(w));
}

Test(trampoline, leave_and_imm32_and_r8_to_r15)
{
	/* push %rbp; mov %rsp,%rbp; sub $0x100,%rsp (imm32); call *%r11;
	 * leave; ret */
	static const uint8_t code[] = { 0x55, 0x48, 0x89, 0xe5, 0x48, 0x81, 0xec, 0x00, 0x01,
					0x00, 0x00, 0x41, 0xff, 0xd3, 0xc9, 0xc3 };
	const struct want w[] = { { 0, 8, 0 }, { 1, 16, -2 }, { 11, 16 + 256, -2 }, { 15, 8, 0 } };
	struct trampoline_shape s;

	decode_ok(code, sizeof(code), &s);
	check_rows(&s, w, ELEMENTSOF(w));
}

Test(trampoline, mov_rbp_rsp_restores_the_frame)
{
	/* push %rbp; mov %rsp,%rbp; sub $24,%rsp; call *%rax;
	 * mov %rbp,%rsp; pop %rbp; ret */
	static const uint8_t code[] = { 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x18, 0xff,
					0xd0, 0x48, 0x89, 0xec, 0x5d, 0xc3 };
	const struct want w[] = { { 0, 8, 0 }, { 1, 16, -2 }, { 8, 40, -2 }, { 13, 16, -2 },
				  { 14, 8, 0 } };
	struct trampoline_shape s;

	decode_ok(code, sizeof(code), &s);
	check_rows(&s, w, ELEMENTSOF(w));
}

static void refused(const uint8_t *code, size_t size, int want, const char *what)
{
	struct trampoline_shape s;
	int r = trampoline_decode(code, size, &s);

	cr_expect_eq(r, want, "%s: %d (%s), expected %d", what, r, strerror(-r), want);
}

#define REFUSED(what, ...)                                                      \
	do {                                                                   \
		static const uint8_t c_[] = { __VA_ARGS__ };                   \
		refused(c_, sizeof(c_), -EBADMSG, what);                       \
	} while (0)

Test(trampoline, refuses_other_code)
{
	REFUSED("jmp *%rcx", 0x48, 0x83, 0xec, 0x08, 0xff, 0xe1, 0x48, 0x83, 0xc4, 0x08, 0xc3);
	REFUSED("no call", 0x48, 0x83, 0xec, 0x08, 0x48, 0x83, 0xc4, 0x08, 0xc3);
	REFUSED("two calls", 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0xff, 0xd1, 0x48, 0x83, 0xc4,
		0x08, 0xc3);
	REFUSED("no ret", 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08);
	REFUSED("bytes after ret", 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08,
		0xc3, 0x90);
	REFUSED("stack not balanced at ret", 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0xc3);
	REFUSED("add past the entry's stack", 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3);
	REFUSED("sub of 7", 0x48, 0x83, 0xec, 0x07, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x07, 0xc3);
	REFUSED("negative sub", 0x48, 0x83, 0xec, 0xf8, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0xf8, 0xc3);
	REFUSED("huge imm32", 0x48, 0x81, 0xec, 0x00, 0x00, 0x01, 0x00, 0xff, 0xd1, 0x48, 0x81,
		0xc4, 0x00, 0x00, 0x01, 0x00, 0xc3);
	REFUSED("mov %rsp,%rbp loses the caller's rbp", 0x48, 0x89, 0xe5, 0xff, 0xd1, 0xc3);
	REFUSED("pop %rbp without a push", 0xff, 0xd1, 0x5d, 0xc3);
	REFUSED("rbp not restored at ret", 0x55, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3);
	REFUSED("leave without a frame", 0x55, 0xff, 0xd1, 0xc9, 0xc3);
	REFUSED("the saved rbp freed", 0x55, 0x48, 0x83, 0xc4, 0x08, 0xff, 0xd1, 0x48, 0x83,
		0xec, 0x08, 0x5d, 0xc3);
	REFUSED("call *%rsp", 0x48, 0x83, 0xec, 0x08, 0xff, 0xd4, 0x48, 0x83, 0xc4, 0x08, 0xc3);
	REFUSED("call rel32", 0x48, 0x83, 0xec, 0x08, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x48, 0x83,
		0xc4, 0x08, 0xc3);
	/* offsets a row cannot hold: a CFA past INT16_MAX (eight pages below
	 * a frame, let go by leave) and a saved rbp 1 KiB below the CFA
	 * (rbp_offset8 -128 would read as PERFD_RBP_LOST) */
	REFUSED("CFA past INT16_MAX", 0x55, 0x48, 0x89, 0xe5,
		0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00, 0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00,
		0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00, 0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00,
		0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00, 0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00,
		0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00, 0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00,
		0xff, 0xd1, 0xc9, 0xc3);
	REFUSED("saved rbp 1 KiB below the CFA", 0x48, 0x81, 0xec, 0xf0, 0x03, 0x00, 0x00, 0x55,
		0xff, 0xd1, 0x5d, 0x48, 0x81, 0xc4, 0xf0, 0x03, 0x00, 0x00, 0xc3);
	REFUSED("instruction cut by the end", 0x48, 0x83, 0xec);
	REFUSED("endbr64 cut by the end", 0xf3, 0x0f, 0x1e);
	REFUSED("nothing but ret", 0xc3);
}

/* The deepest saved rbp a row can name: rbp_offset8 -127. */
Test(trampoline, saved_rbp_at_the_deepest_slot)
{
	static const uint8_t code[] = { 0x48, 0x81, 0xec, 0xe8, 0x03, 0x00, 0x00, 0x55, 0xff, 0xd1,
					0x5d, 0x48, 0x81, 0xc4, 0xe8, 0x03, 0x00, 0x00, 0xc3 };
	struct trampoline_shape s;

	decode_ok(code, sizeof(code), &s);
	cr_assert_eq(s.rows[2].rbp_offset8, -127);
	cr_assert_eq(s.rows[2].cfa_offset, 1016);
}

Test(trampoline, refuses_bad_sizes)
{
	static uint8_t big[TRAMPOLINE_CODE_MAX + 1];

	refused(cpython_312, 0, -EINVAL, "empty");
	refused(NULL, 11, -EINVAL, "NULL");
	memset(big, 0x90, sizeof(big));
	refused(big, sizeof(big), -E2BIG, "over TRAMPOLINE_CODE_MAX");
}

/* Random code, strung from instructions the decoder knows and some it does
 * not, sometimes cut short: the decoder returns, and what it accepts is
 * well formed. */
Test(trampoline, random_code)
{
	static const struct {
		uint8_t n, b[7];
	} pieces[] = {
		{ 4, { 0x48, 0x83, 0xec, 0x08 } }, { 4, { 0x48, 0x83, 0xc4, 0x08 } },
		{ 4, { 0x48, 0x83, 0xec, 0x10 } }, { 4, { 0x48, 0x83, 0xc4, 0x10 } },
		{ 7, { 0x48, 0x81, 0xec, 0x20, 0, 0, 0 } }, { 7, { 0x48, 0x81, 0xc4, 0x20, 0, 0, 0 } },
		{ 2, { 0xff, 0xd1 } }, { 3, { 0x41, 0xff, 0xd2 } }, { 1, { 0x55 } }, { 1, { 0x5d } },
		{ 3, { 0x48, 0x89, 0xe5 } }, { 3, { 0x48, 0x89, 0xec } }, { 1, { 0xc9 } },
		{ 4, { 0xf3, 0x0f, 0x1e, 0xfa } }, { 1, { 0xc3 } }, { 1, { 0x90 } },
		{ 2, { 0xff, 0xe1 } }, { 2, { 0x48, 0x83 } }, { 1, { 0xcc } },
	};
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	size_t accepted = 0;

	for (int round = 0; round < 200000; round++) {
		uint8_t code[TRAMPOLINE_CODE_MAX + 8];
		size_t size = 0;
		struct trampoline_shape s;
		unsigned k;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		k = 1 + (unsigned)(x >> 60) % 8;
		for (unsigned i = 0; i < k; i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			unsigned p = (unsigned)(x >> 33) % ELEMENTSOF(pieces);

			if (size + pieces[p].n > TRAMPOLINE_CODE_MAX)
				break;
			memcpy(code + size, pieces[p].b, pieces[p].n);
			size += pieces[p].n;
		}
		if ((x >> 20) % 8 == 0 && size > 1)
			size--; /* cut the last instruction */
		if (size == 0 || trampoline_decode(code, size, &s) != 0)
			continue;
		accepted++;
		cr_assert_eq(code[size - 1], 0xc3);
		cr_assert_gt(s.n_rows, 0);
		cr_assert_eq(s.rows[0].pc, 0);
		cr_assert_eq(s.rows[0].cfa_offset, 8);
		for (uint32_t i = 0; i < s.n_rows; i++) {
			cr_assert_lt(s.rows[i].pc, size);
			cr_assert(i == 0 || s.rows[i].pc > s.rows[i - 1].pc);
			cr_assert_eq(s.rows[i].cfa_type, PERFD_CFA_RSP);
			cr_assert_geq(s.rows[i].cfa_offset, 8);
			cr_assert_eq(s.rows[i].cfa_offset % 8, 0);
			/* a saved rbp lies in the frame: below the CFA, above rsp */
			cr_assert(s.rows[i].rbp_offset8 == 0 ||
				  (s.rows[i].rbp_offset8 < 0 &&
				   -8 * s.rows[i].rbp_offset8 <= s.rows[i].cfa_offset));
		}
		cr_assert_eq(s.rows[s.n_rows - 1].cfa_offset, 8, "ret's row");
		cr_assert_eq(s.rows[s.n_rows - 1].rbp_offset8, 0, "ret's row");
	}
	cr_log_info("%zu random templates accepted", accepted);
	cr_assert_gt(accepted, 100, "only %zu random templates accepted: the test tests little",
		     accepted);
}

/* --- tables ---------------------------------------------------------------- */

static const struct perfd_unwind_row *find(struct perfd_unwind_row *rows, size_t n, uint32_t pc)
{
	struct unwind_table t = { .base_vaddr = 0, .rows = rows, .n_rows = n };

	return unwind_table_find(&t, pc);
}

static void check_arena(uint32_t stride, uint32_t want_rows)
{
	struct trampoline_shape s;
	struct perfd_unwind_row *rows = NULL;
	size_t n = 0, copies = 65536 / stride;

	decode_ok(cpython_312, sizeof(cpython_312), &s);
	cr_assert_eq(trampoline_table(&s, stride, 65536, &rows, &n), 0);
	/* row 0, then per copy the call's rule and ret's (which the next
	 * copy's first instruction shares) */
	cr_assert_eq(n, want_rows, "%zu rows", n);
	cr_assert_eq(n, 1 + 2 * copies);
	for (size_t c = 0; c < copies; c++) {
		for (uint32_t off = 0; off < stride; off++) {
			const struct perfd_unwind_row *r = find(rows, n, (uint32_t)(c * stride + off));
			int want = off >= 4 && off < 10 ? 16 : 8;

			cr_assert_not_null(r);
			cr_assert_eq(r->cfa_type, PERFD_CFA_RSP);
			cr_assert_eq(r->cfa_offset, want, "copy %zu +%u: rsp+%d, expected rsp+%d", c,
				     off, r->cfa_offset, want);
			cr_assert_eq(r->rbp_offset8, 0);
		}
	}
	free(rows);
}

Test(trampoline, arena_of_3_12) { check_arena(11, 11915); }
Test(trampoline, arena_of_3_13_perf_jit) { check_arena(272, 481); }

Test(trampoline, table_refuses_bad_layouts)
{
	struct trampoline_shape s;
	struct perfd_unwind_row *rows = NULL;
	size_t n;

	decode_ok(cpython_312, sizeof(cpython_312), &s);
	cr_expect_eq(trampoline_table(&s, 10, 65536, &rows, &n), -EINVAL, "stride < size");
	cr_expect_eq(trampoline_table(&s, 11, 0, &rows, &n), -EINVAL, "empty region");
	cr_expect_eq(trampoline_table(&s, 11, 10, &rows, &n), -EINVAL, "no whole copy");
	cr_expect_eq(trampoline_table(&s, 11, TRAMPOLINE_REGION_MAX + 1, &rows, &n), -EINVAL,
		     "region too big");
	cr_expect_null(rows);
}
