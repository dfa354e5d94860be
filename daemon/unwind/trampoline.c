/* SPDX-License-Identifier: MIT */
/*
 * trampoline.c - see trampoline.h.
 *
 * The decoder follows the stack as the template's instructions move it:
 * every accepted instruction has a static effect, so the CFA is always
 * rsp + a known offset and a row never needs rbp as its base, even after
 * `mov %rsp,%rbp`.  Where the caller's rbp is depends only on whether the
 * template pushed it: unchanged until `push %rbp`, at its slot until
 * `pop %rbp`.  Every shape that could leave a rule unknown (the caller's
 * rbp overwritten before it was saved, a stack that does not balance at
 * ret, a second call, a branch) is refused, so a row is never a guess.
 */
#include "unwind/trampoline.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Immediates above this are not stack adjustments a trampoline makes. */
#define MAX_STACK_ADJUST 4096

struct decoder {
	uint32_t depth;   /* bytes pushed since entry: CFA = rsp + depth + 8 */
	int32_t rbp_slot; /* the caller's rbp at CFA + rbp_slot; 0: still in rbp */
	bool rbp_frame;   /* rbp holds rsp as it was at depth fp_depth */
	uint32_t fp_depth;
	unsigned calls;
};

/* The row for pc with the stack as d has it.  Returns 0, or -EBADMSG when
 * the offsets do not fit a row's fields: a CFA past INT16_MAX, or a saved
 * rbp 1 KiB or more below it (rbp_offset8 -128 is PERFD_RBP_LOST). */
static int rule_of(const struct decoder *d, uint32_t pc, struct perfd_unwind_row *ret)
{
	if (d->depth + 8 > INT16_MAX || d->rbp_slot / 8 <= PERFD_RBP_LOST)
		return -EBADMSG;
	*ret = (struct perfd_unwind_row){
		.pc = pc,
		.cfa_type = PERFD_CFA_RSP,
		.cfa_offset = (int16_t)(d->depth + 8),
		.rbp_offset8 = (int8_t)(d->rbp_slot / 8),
	};
	return 0;
}

static bool same_rule(const struct perfd_unwind_row *a, const struct perfd_unwind_row *b)
{
	return a->cfa_type == b->cfa_type && a->cfa_offset == b->cfa_offset &&
	       a->rbp_offset8 == b->rbp_offset8;
}

static int push_rbp(struct decoder *d)
{
	if (d->rbp_slot != 0 || d->rbp_frame)
		return -EBADMSG; /* only the caller's rbp is tracked */
	d->depth += 8;
	d->rbp_slot = -(int32_t)(d->depth + 8);
	return 0;
}

static int pop_rbp(struct decoder *d)
{
	/* the slot must be the top of the stack */
	if (d->rbp_slot == 0 || d->rbp_slot != -(int32_t)(d->depth + 8))
		return -EBADMSG;
	d->depth -= 8;
	d->rbp_slot = 0;
	d->rbp_frame = false;
	return 0;
}

static int adjust_rsp(struct decoder *d, int64_t grow)
{
	if (grow == 0 || grow % 8 != 0 || grow > MAX_STACK_ADJUST || grow < -MAX_STACK_ADJUST ||
	    (grow < 0 && (uint64_t)-grow > d->depth))
		return -EBADMSG;
	d->depth = (uint32_t)((int64_t)d->depth + grow);
	/* freeing the stack that holds the saved rbp loses it */
	if (d->rbp_slot != 0 && d->rbp_slot < -(int32_t)(d->depth + 8))
		return -EBADMSG;
	return 0;
}

static int32_t imm32(const uint8_t *p)
{
	uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;

	return (int32_t)v;
}

/* An instruction of length len whose effect r was (0 or -errno). */
static int done(int r, int len)
{
	return r < 0 ? r : len;
}

/* Applies the instruction at c (n >= 1 bytes left) to d.  Returns its
 * length, 0 for ret, or -EBADMSG. */
static int step(struct decoder *d, const uint8_t *c, size_t n)
{
	if (n >= 4 && c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		return 4; /* endbr64 */
	if (c[0] == 0x55)
		return done(push_rbp(d), 1);
	if (c[0] == 0x5d)
		return done(pop_rbp(d), 1);
	if (c[0] == 0xc9) { /* leave: mov %rbp,%rsp; pop %rbp */
		if (!d->rbp_frame)
			return -EBADMSG;
		d->depth = d->fp_depth;
		return done(pop_rbp(d), 1);
	}
	if (c[0] == 0xc3)
		return 0;
	/* call *%reg: ff /2 with a register operand; 41 for r8-r15 */
	if (n >= 2 && c[0] == 0xff && c[1] >= 0xd0 && c[1] <= 0xd7 && c[1] != 0xd4) {
		d->calls++;
		return 2;
	}
	if (n >= 3 && c[0] == 0x41 && c[1] == 0xff && c[2] >= 0xd0 && c[2] <= 0xd7) {
		d->calls++;
		return 3;
	}
	if (n >= 3 && c[0] == 0x48 && c[1] == 0x89 && c[2] == 0xe5) { /* mov %rsp,%rbp */
		if (d->rbp_slot == 0 || d->rbp_frame)
			return -EBADMSG; /* the caller's rbp would be lost */
		d->rbp_frame = true;
		d->fp_depth = d->depth;
		return 3;
	}
	if (n >= 3 && c[0] == 0x48 && c[1] == 0x89 && c[2] == 0xec) { /* mov %rbp,%rsp */
		if (!d->rbp_frame)
			return -EBADMSG;
		d->depth = d->fp_depth;
		return 3;
	}
	/* sub/add $imm8,%rsp (48 83 ec/c4 ib), $imm32 (48 81 ec/c4 id) */
	if (n >= 4 && c[0] == 0x48 && c[1] == 0x83 && (c[2] == 0xec || c[2] == 0xc4))
		return done(adjust_rsp(d, c[2] == 0xec ? (int8_t)c[3] : -(int64_t)(int8_t)c[3]), 4);
	if (n >= 7 && c[0] == 0x48 && c[1] == 0x81 && (c[2] == 0xec || c[2] == 0xc4))
		return done(adjust_rsp(d, c[2] == 0xec ? imm32(c + 3) : -(int64_t)imm32(c + 3)), 7);
	return -EBADMSG;
}

int trampoline_decode(const uint8_t *code, size_t size, struct trampoline_shape *ret)
{
	struct trampoline_shape s = { .size = (uint32_t)size };
	struct decoder d = { 0 };

	if (size == 0 || !code)
		return -EINVAL;
	if (size > TRAMPOLINE_CODE_MAX)
		return -E2BIG;
	for (size_t off = 0; off < size;) {
		struct perfd_unwind_row row;
		int len = rule_of(&d, (uint32_t)off, &row);

		if (len < 0)
			return len;
		if (s.n_rows == 0 || !same_rule(&s.rows[s.n_rows - 1], &row)) {
			if (s.n_rows == TRAMPOLINE_ROWS_MAX)
				return -EBADMSG;
			s.rows[s.n_rows++] = row;
		}
		len = step(&d, code + off, size - off);
		if (len < 0)
			return len;
		if (len == 0) {
			/* ret: the last byte, the stack as at entry, rbp restored */
			if (off + 1 != size || d.depth != 0 || d.rbp_slot != 0 || d.calls != 1)
				return -EBADMSG;
			*ret = s;
			return 0;
		}
		off += (size_t)len;
	}
	return -EBADMSG; /* no ret, or an instruction cut by the end */
}

int trampoline_table(const struct trampoline_shape *shape, uint32_t stride, uint32_t region_size,
		     struct perfd_unwind_row **ret_rows, size_t *ret_n)
{
	struct perfd_unwind_row *rows;
	size_t copies, n = 0;

	if (!shape || shape->n_rows == 0 || shape->size == 0 || stride < shape->size ||
	    region_size == 0 || region_size > TRAMPOLINE_REGION_MAX)
		return -EINVAL;
	copies = region_size / stride;
	if (copies == 0)
		return -EINVAL;
	rows = malloc(copies * shape->n_rows * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	for (size_t c = 0; c < copies; c++) {
		for (uint32_t i = 0; i < shape->n_rows; i++) {
			struct perfd_unwind_row r = shape->rows[i];

			r.pc += (uint32_t)(c * stride);
			if (n > 0 && same_rule(&rows[n - 1], &r))
				continue;
			rows[n++] = r;
		}
	}
	*ret_rows = rows;
	*ret_n = n;
	return 0;
}
