/* SPDX-License-Identifier: MIT */
/*
 * pyeval.c - see pyeval.h.  python_merge() puts each Python call's frames
 * where the native stack runs the interpreter loop, which it knows by
 * address: _PyEval_EvalFrameDefault, and its ".cold" part when .symtab
 * names that.  A stripped build whose profile-guided optimization moved
 * most of the loop out of line names neither part (sid's 3.14.10: a
 * 1,184-byte _PyEval_EvalFrameDefault in .dynsym, an 84 KB body beside it
 * with no symbol, where the samples fall; 3.15.2 alike).
 *
 * The part is found as GCC lays it out: code with a frame description
 * entry (FDE) of its own, reached from the function by direct jumps (what
 * a call reaches is another function).  Each jmp rel32 and jcc rel32
 * among the function's bytes, read at every byte offset (a false one
 * lands anywhere), votes for the FDE its target falls in, found in
 * .eh_frame_hdr's table, sorted by address, in its usual encoding (4-byte
 * values, the table's relative to the header; another encoding finds
 * nothing); the last FDE, and gaps between FDEs, take no vote.  What tells
 * a part from a function tail-called is its FDE: a function's
 * instructions begin at the CIE's frame (the return address just pushed)
 * and change it only after an advance, a part's define the frame it runs
 * in (its function's) before any advance.  The part is the candidate with
 * the most votes, two at least, whose FDE says so and covers every jump
 * that voted for it; the FDE gives its end.  (The PLT's one FDE also
 * begins in a frame made elsewhere: the caller refuses a part there.)  The
 * bytes are a file's, untrusted: every read is bounded by what the caller
 * passed.
 */
#include "interp/python/pyeval.h"

#include <errno.h>
#include <stdbool.h>

#include "perfd/macro.h"

#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_datarel 0x30
#define HDR_FIXED 12 /* version, 3 encodings, eh_frame_ptr, fde_count */

#define CANDIDATES 16
#define FDE_READ 64       /* an FDE's bytes read: its header and first instructions */
#define FDE_READ_LEAST 24 /* when FDE_READ cannot be */

#define DW_CFA_def_cfa 0x0c
#define DW_CFA_def_cfa_register 0x0d
#define DW_CFA_def_cfa_offset 0x0e
#define DW_CFA_def_cfa_expression 0x0f
#define DW_CFA_def_cfa_sf 0x12
#define DW_CFA_def_cfa_offset_sf 0x13

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rel32(uint64_t base, const uint8_t *p)
{
	return base + (uint64_t)(int64_t)(int32_t)le32(p);
}

struct fde_table {
	const uint8_t *entries; /* n pairs of int32: initial location, FDE */
	size_t n;
	uint64_t base; /* what the values are relative to */
};

static uint64_t fde_start(const struct fde_table *t, size_t i)
{
	return rel32(t->base, t->entries + 8 * i);
}

/* The index of the last FDE that starts at or before addr, or n. */
static size_t fde_find(const struct fde_table *t, uint64_t addr)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (fde_start(t, mid) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == 0 ? t->n : lo - 1;
}

static int read_table(const uint8_t *hdr, size_t size, uint64_t hdr_vaddr, struct fde_table *ret)
{
	uint32_t n;

	if (size < HDR_FIXED)
		return -EINVAL;
	if (hdr[0] != 1)
		return -ENOTSUP;
	/* eh_frame_ptr: any 4-byte form (its value is not needed) */
	if ((hdr[1] & 0x0f) != DW_EH_PE_udata4 && (hdr[1] & 0x0f) != DW_EH_PE_sdata4)
		return -ENOTSUP;
	if (hdr[2] != DW_EH_PE_udata4 || hdr[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return -ENOTSUP;
	n = le32(hdr + 8);
	if (n > (size - HDR_FIXED) / 8)
		return -EINVAL;
	*ret = (struct fde_table){ .entries = hdr + HDR_FIXED, .n = n, .base = hdr_vaddr };
	return 0;
}

/* The target of a jmp rel32 or jcc rel32 at func[i], if one is there. */
static bool jump_at(const uint8_t *func, size_t size, size_t i, uint64_t vaddr, uint64_t *ret)
{
	size_t len;

	if (func[i] == 0xe9)
		len = 5;
	else if (func[i] == 0x0f && i + 1 < size && (func[i + 1] & 0xf0) == 0x80)
		len = 6;
	else
		return false;
	if (size - i < len)
		return false;
	*ret = rel32(vaddr + i + len, func + i + len - 4);
	return true;
}

/* Code the function jumps into: the FDE that covers it (at fde_vaddr,
 * starting at start), how many jumps land there, and the furthest. */
struct candidate {
	uint64_t fde_vaddr, start, last;
	unsigned votes;
};

/* The FDEs of t (but the function's own) that the direct jumps among the
 * function's bytes land in, up to n into out, most jumps first. */
static size_t candidates(const uint8_t *func, size_t size, uint64_t vaddr,
			 const struct fde_table *tp, struct candidate *out, size_t n)
{
	const struct fde_table t = *tp;
	size_t own = fde_find(&t, vaddr), used = 0;

	for (size_t i = 0; i < size; i++) {
		uint64_t target;
		size_t fde, c;

		if (!jump_at(func, size, i, vaddr, &target) || target - vaddr < size)
			continue;
		fde = fde_find(&t, target);
		/* none; the function's own; past the next FDE's start (a gap,
		 * or past the last FDE: a false jump lands there most) */
		if (fde == t.n || fde == own || fde + 1 == t.n || target >= fde_start(&t, fde + 1))
			continue;
		for (c = 0; c < used && out[c].start != fde_start(&t, fde); c++)
			;
		if (c == used) {
			if (used == n)
				continue;
			out[used++] = (struct candidate){
				.fde_vaddr = rel32(t.base, t.entries + 8 * fde + 4),
				.start = fde_start(&t, fde),
			};
		}
		out[c].votes++;
		if (target > out[c].last)
			out[c].last = target;
	}
	/* most votes first (few candidates: an insertion sort) */
	for (size_t i = 1; i < used; i++)
		for (size_t j = i; j > 0 && out[j].votes > out[j - 1].votes; j--) {
			struct candidate tmp = out[j];

			out[j] = out[j - 1];
			out[j - 1] = tmp;
		}
	return used;
}

/* Whether the FDE whose first size bytes are fde, at fde_vaddr, covers
 * code from start that begins inside another function's frame: 0 and the
 * code's end in *ret_end; -ENOENT when it begins a frame of its own;
 * -EINVAL when the bytes are no such FDE. */
static int fde_part(const uint8_t *fde, size_t size, uint64_t fde_vaddr, uint64_t start,
		    uint64_t *ret_end)
{
	uint32_t length, range;
	uint64_t aug = 0;
	size_t p = 16;
	uint8_t op;

	if (size < 17)
		return -EINVAL;
	length = le32(fde);
	/* a 32-bit FDE (not a CIE: its pointer is not 0) whose pc_begin,
	 * read as the usual pc-relative sdata4, is where the table says */
	if (length < 13 || length == 0xffffffff || le32(fde + 4) == 0 ||
	    rel32(fde_vaddr + 8, fde + 8) != start)
		return -EINVAL;
	range = le32(fde + 12);
	if (range == 0)
		return -EINVAL;
	if (size > (size_t)length + 4)
		size = (size_t)length + 4;
	/* the augmentation data's length, a ULEB128, then that data */
	for (unsigned shift = 0;; shift += 7) {
		if (p >= size || shift > 28)
			return -EINVAL;
		aug |= (uint64_t)(fde[p] & 0x7f) << shift;
		if (!(fde[p++] & 0x80))
			break;
	}
	if (aug >= size - p)
		return -ENOENT; /* no instruction: the CIE's frame throughout */
	op = fde[p + aug];
	if (op != DW_CFA_def_cfa && op != DW_CFA_def_cfa_register && op != DW_CFA_def_cfa_offset &&
	    op != DW_CFA_def_cfa_expression && op != DW_CFA_def_cfa_sf &&
	    op != DW_CFA_def_cfa_offset_sf)
		return -ENOENT;
	*ret_end = start + range;
	return 0;
}

int pyeval_split_part(const uint8_t *func, size_t size, uint64_t vaddr, const uint8_t *hdr,
		      size_t hdr_size, uint64_t hdr_vaddr, pyeval_read_fn read, void *ctx,
		      uint64_t *ret_start, uint64_t *ret_end)
{
	struct candidate c[CANDIDATES];
	struct fde_table t;
	size_t n;
	int r;

	if (!func || !hdr || !read || !ret_start || !ret_end)
		return -EINVAL;
	r = read_table(hdr, hdr_size, hdr_vaddr, &t);
	if (r < 0)
		return r;
	n = candidates(func, size, vaddr, &t, c, ELEMENTSOF(c));
	for (size_t i = 0; i < n && c[i].votes >= 2; i++) {
		uint8_t fde[FDE_READ];
		size_t got = sizeof(fde);

		/* an FDE at the end of its segment is shorter than FDE_READ */
		if (read(ctx, c[i].fde_vaddr, fde, got) < 0 &&
		    read(ctx, c[i].fde_vaddr, fde, got = FDE_READ_LEAST) < 0)
			continue;
		/* every jump that voted lands in the code the FDE covers */
		if (fde_part(fde, got, c[i].fde_vaddr, c[i].start, ret_end) == 0 &&
		    c[i].last < *ret_end) {
			*ret_start = c[i].start;
			return 0;
		}
	}
	return -ENOENT;
}
