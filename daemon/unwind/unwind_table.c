/* SPDX-License-Identifier: MIT */
/*
 * unwind_table.c - the x86_64 unwind rows (include/perfd/unwind.h) of one
 * ELF file, from its DWARF call-frame information.
 *
 * libdw interprets the CFI; this file enumerates the FDEs and reduces each
 * row of their tables to the few rules the BPF walker can evaluate.
 *
 * FDEs are enumerated with dwarf_next_cfi over the raw section rather than
 * through the .eh_frame_hdr index: that gives each FDE's exact [start, end),
 * so a NO_CFI row goes exactly where a function's CFI stops; it is the same
 * code for .debug_frame, which has no index; and it does not depend on the
 * index being present.  The price is decoding each FDE's initial location
 * ourselves, with the pointer encoding from its CIE's 'R' augmentation.
 * .eh_frame is found by its section header, or, in an image without section
 * headers (the vDSO sized by its program headers, an sstrip'ed file),
 * through PT_GNU_EH_FRAME; the walk then stops after the index's FDE count,
 * since the section's size is not known there.
 *
 * Each FDE is walked row by row: dwarf_cfi_addrframe() at the row's first
 * address, dwarf_frame_info() for the [start, end) the row holds for, then
 * on from end.  libdw replays the FDE's program from its start for every
 * row, so an FDE of n rows costs O(n^2) CFA instructions; n is small for
 * compiled code (libpython3.11: 12 rows per FDE on average, and the whole
 * table, 74k rows, builds in ~25 ms).
 *
 * .debug_frame only fills the code no .eh_frame FDE covers, and libdw's
 * Dwarf handle (which reads every debug section) is only opened when there
 * is such code.  Rows are collected with their full address, sorted, and
 * consecutive equal rules merged.  base_vaddr is the lowest p_vaddr of an
 * executable PT_LOAD (as unwind.h says); FDEs that do not start inside an
 * executable PT_LOAD (leftovers of discarded sections, at address 0) are
 * ignored.  Memory while building: 16 bytes per row plus libdw's caches;
 * the result is 8 bytes per row.
 */
#include "unwind/unwind_table.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/elfopen.h"
#include "base/search.h"
#include "perfd/macro.h"

/* DWARF register numbers of the x86_64 psABI. */
#define DWARF_REG_RBP 6
#define DWARF_REG_RSP 7
#define DWARF_REG_RA 16

/* [start, end) of code described by one FDE (or the part of it we walk). */
struct code_range {
	uint64_t start, end;
};

/* A row before sorting, at its full address.  gap_end marks the NO_CFI row
 * put where a walked range stops; a real row at the same address wins over it. */
struct pending_row {
	uint64_t vaddr;
	bool gap_end;
	uint8_t type;
	int16_t cfa_offset;
	int8_t rbp_offset8;
};

/* Raw bytes of one CFI section as loaded: vaddr is the address of the first
 * byte (for pcrel pointers; 0 for .debug_frame, which has none), and the
 * walk stops after max_fdes FDEs when the section's end is not known. */
struct cfi_section {
	Elf_Data *data;
	uint64_t vaddr;
	bool eh_frame;
	size_t max_fdes;
};

struct builder {
	Elf *elf;
	const unsigned char *ident;
	struct code_range *exec; /* executable PT_LOADs, as [vaddr, vaddr + memsz) */
	size_t n_exec;
	uint64_t base;
	struct pending_row *rows;
	size_t n_rows, cap_rows;
	size_t fdes;
	size_t cfi_bytes;
	uint64_t cpu_limit_ns; /* thread_cpu_ns() past which it stops; 0: none */
	const atomic_bool *cancel;
	unsigned tick;         /* steps since the clock was last read */
};

/* The clock (and the cancel flag) is read every CLOCK_EVERY steps (a row,
 * an FDE): a step of crafted CFI replays at most the FDE's program,
 * bounded by the byte cap. */
#define CLOCK_EVERY 64

static void builder_done(struct builder *b)
{
	free(b->exec);
	free(b->rows);
}

struct unwind_table *unwind_table_free(struct unwind_table *t)
{
	if (!t)
		return NULL;
	free(t->rows);
	free(t);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct unwind_table, unwind_table_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(Dwarf, dwarf_end);

static void dwarf_cfi_endp(Dwarf_CFI **p)
{
	if (*p)
		(void)dwarf_cfi_end(*p);
}

/* --- limits ------------------------------------------------------------- */

/* -ETIMEDOUT once the build has used its CPU time, -ECANCELED once it was
 * cancelled, checked every CLOCK_EVERY calls. */
static int over_time(struct builder *b)
{
	if (++b->tick < CLOCK_EVERY)
		return 0;
	b->tick = 0;
	if (b->cancel && atomic_load_explicit(b->cancel, memory_order_relaxed))
		return -ECANCELED;
	return b->cpu_limit_ns && thread_cpu_ns() > b->cpu_limit_ns ? -ETIMEDOUT : 0;
}

/* --- DW_EH_PE pointers ------------------------------------------------ */

static uint64_t read_le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = n; i > 0; i--)
		v = v << 8 | p[i - 1];
	return v;
}

/* Reads one value of the format in the low nibble of enc at *p, before
 * end, sign-extended for the signed formats, and advances *p.  Returns 0,
 * -EINVAL when it runs past end, -ENOTSUP for a format we do not know. */
static int read_value(const uint8_t **p, const uint8_t *end, uint8_t enc, uint64_t *ret)
{
	static const uint8_t sizes[16] = {
		[DW_EH_PE_absptr] = 8,  [DW_EH_PE_udata2] = 2, [DW_EH_PE_udata4] = 4,
		[DW_EH_PE_udata8] = 8,  [DW_EH_PE_sdata2] = 2, [DW_EH_PE_sdata4] = 4,
		[DW_EH_PE_sdata8] = 8,
	};
	uint8_t format = enc & 0x0f;
	const uint8_t *q = *p;
	uint64_t v = 0;

	if (format == DW_EH_PE_uleb128 || format == DW_EH_PE_sleb128) {
		unsigned shift = 0;
		uint8_t byte;

		do {
			if (q >= end || shift >= 64)
				return -EINVAL;
			byte = *q++;
			v |= (uint64_t)(byte & 0x7f) << shift;
			shift += 7;
		} while (byte & 0x80);
		if (format == DW_EH_PE_sleb128 && shift < 64 && (byte & 0x40))
			v |= ~(uint64_t)0 << shift;
	} else {
		size_t n = sizes[format];

		if (n == 0)
			return -ENOTSUP;
		if ((size_t)(end - q) < n)
			return -EINVAL;
		v = read_le(q, n);
		q += n;
		if (n < 8 && (format & DW_EH_PE_signed) && (v >> (8 * n - 1)))
			v |= ~(uint64_t)0 << (8 * n);
	}
	*p = q;
	*ret = v;
	return 0;
}

/* Reads an encoded pointer at *p, whose own address is at_vaddr; datarel
 * pointers are relative to data_base.  Indirect, text- and function-relative
 * and aligned pointers are not used for code addresses on x86_64 Linux and
 * give -ENOTSUP. */
static int read_pointer(const uint8_t **p, const uint8_t *end, uint8_t enc, uint64_t at_vaddr,
			uint64_t data_base, uint64_t *ret)
{
	uint64_t v;
	int r;

	if (enc == DW_EH_PE_omit || (enc & DW_EH_PE_indirect))
		return -ENOTSUP;
	r = read_value(p, end, enc, &v);
	if (r < 0)
		return r;
	switch (enc & 0x70) {
	case DW_EH_PE_absptr:
		break;
	case DW_EH_PE_pcrel:
		v += at_vaddr;
		break;
	case DW_EH_PE_datarel:
		v += data_base;
		break;
	default:
		return -ENOTSUP;
	}
	*ret = v;
	return 0;
}

/* The encoding of the addresses in the FDEs of cie: its 'R' augmentation,
 * absolute without one.  -ENOTSUP for an augmentation whose data we cannot
 * lay out (an unknown letter before 'R', GCC 2's "eh"). */
static int cie_fde_encoding(const Dwarf_CIE *cie, uint8_t *ret)
{
	const char *a = cie->augmentation;
	const uint8_t *p = cie->augmentation_data;
	const uint8_t *end = p + cie->augmentation_data_size;
	uint64_t ignored;
	uint8_t enc;

	*ret = DW_EH_PE_absptr;
	if (a[0] != 'z')
		return a[0] == '\0' ? 0 : -ENOTSUP;
	for (a++; *a; a++) {
		switch (*a) {
		case 'R':
			if (p >= end)
				return -EINVAL;
			*ret = *p;
			return 0;
		case 'L':
			p++;
			break;
		case 'P':
			if (p >= end)
				return -EINVAL;
			enc = *p++;
			if ((enc & 0x70) == DW_EH_PE_aligned ||
			    read_value(&p, end, enc, &ignored) < 0)
				return -ENOTSUP;
			break;
		case 'S': /* signal frame */
		case 'B': /* AArch64 B-key; no data */
		case 'G': /* MTE-tagged frame; no data */
			break;
		default:
			return -ENOTSUP;
		}
	}
	return 0;
}

/* --- enumerating FDEs ------------------------------------------------- */

static const struct code_range *exec_segment(const struct builder *b, uint64_t vaddr)
{
	for (size_t i = 0; i < b->n_exec; i++)
		if (vaddr >= b->exec[i].start && vaddr < b->exec[i].end)
			return &b->exec[i];
	return NULL;
}

static int range_cmp(const void *x, const void *y)
{
	const struct code_range *a = x, *b = y;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->end < b->end ? -1 : a->end > b->end;
}

/* Sorts ranges and makes them disjoint: where two overlap, the later start
 * wins (as in libdw's lookup by the last initial location not above the
 * address), and of two at one address the longer one is kept.  Returns the
 * new count. */
static size_t ranges_normalize(struct code_range *r, size_t n)
{
	size_t out = 0;

	qsort_safe(r, n, sizeof(*r), range_cmp);
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && r[i + 1].start == r[i].start)
			continue;
		r[out] = r[i];
		if (i + 1 < n && r[out].end > r[i + 1].start)
			r[out].end = r[i + 1].start;
		out++;
	}
	return out;
}

/* The next FDE of s from *off: returns 1 and fills *e, *off moved past it;
 * 0 at the end of the chain, *off left where it ended; -ETIMEDOUT or
 * -ECANCELED.  CIEs are passed over, and so are entries libdw cannot
 * parse but could at least size. */
static int next_fde(struct builder *b, const struct cfi_section *s, Dwarf_Off *off,
		    Dwarf_CFI_Entry *e)
{
	while (*off != (Dwarf_Off)-1) {
		Dwarf_Off next = (Dwarf_Off)-1;
		int r = over_time(b);

		if (r < 0)
			return r;
		r = dwarf_next_cfi(b->ident, s->data, s->eh_frame, *off, &next, e);
		if (r > 0 || (r < 0 && (next == (Dwarf_Off)-1 || next <= *off)))
			return 0;
		*off = next;
		if (r == 0 && !dwarf_cfi_cie_p(e))
			return 1;
	}
	return 0;
}

/* Appends to *ranges (of *n, room for *cap) the code ranges of the FDEs of
 * section s that start in an executable segment, clipped to it.  Entries
 * libdw cannot parse, and FDEs whose CIE we cannot lay out, are skipped.
 * Returns the number of bytes walked, -ENOMEM or -ETIMEDOUT. */
static int64_t read_fde_ranges(struct builder *b, const struct cfi_section *s,
			       struct code_range **ranges, size_t *n, size_t *cap)
{
	const uint8_t *buf = s->data->d_buf;
	Dwarf_Off off = 0, cie_off = (Dwarf_Off)-1;
	uint8_t enc = DW_EH_PE_absptr;
	int cie_r = -EINVAL;
	size_t seen = 0;

	while (seen < s->max_fdes) {
		Dwarf_CFI_Entry e;
		const struct code_range *seg;
		const uint8_t *p;
		uint64_t start, len, end;
		int r;

		r = next_fde(b, s, &off, &e);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		seen++;

		if (e.fde.CIE_pointer != cie_off) {
			Dwarf_CFI_Entry c;
			Dwarf_Off ignored;

			cie_off = e.fde.CIE_pointer;
			cie_r = dwarf_next_cfi(b->ident, s->data, s->eh_frame, cie_off, &ignored, &c);
			if (cie_r == 0 && !dwarf_cfi_cie_p(&c))
				cie_r = -EINVAL;
			if (cie_r == 0)
				cie_r = cie_fde_encoding(&c.cie, &enc);
		}
		if (cie_r != 0)
			continue;

		p = e.fde.start;
		if (read_pointer(&p, e.fde.end, enc, s->vaddr + (uint64_t)(p - buf), 0, &start) < 0 ||
		    read_value(&p, e.fde.end, enc, &len) < 0 || len == 0)
			continue;
		seg = exec_segment(b, start);
		if (!seg)
			continue;
		end = len > seg->end - start ? seg->end : start + len;

		if (*n == *cap) {
			size_t c = *cap ? 2 * *cap : 256;
			struct code_range *bigger = reallocarray(*ranges, c, sizeof(**ranges));

			if (!bigger)
				return -ENOMEM;
			*ranges = bigger;
			*cap = c;
		}
		(*ranges)[(*n)++] = (struct code_range){ start, end };
	}
	return off == (Dwarf_Off)-1 ? (int64_t)s->data->d_size : (int64_t)off;
}

/* --- rows --------------------------------------------------------------- */

static int push_row(struct builder *b, const struct pending_row *row)
{
	if (b->n_rows == b->cap_rows) {
		size_t c = b->cap_rows ? 2 * b->cap_rows : 1024;
		struct pending_row *bigger = reallocarray(b->rows, c, sizeof(*b->rows));

		if (!bigger)
			return -ENOMEM;
		b->rows = bigger;
		b->cap_rows = c;
	}
	b->rows[b->n_rows++] = *row;
	return 0;
}

/* Whether a register rule (from dwarf_frame_register) is "saved at
 * CFA + offset". */
static bool rule_is_cfa_offset(const Dwarf_Op *ops, size_t nops, int64_t *ret)
{
	if (nops == 1 && ops[0].atom == DW_OP_call_frame_cfa) {
		*ret = 0;
		return true;
	}
	if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa &&
	    ops[1].atom == DW_OP_plus_uconst) {
		*ret = (int64_t)ops[1].number;
		return true;
	}
	return false;
}

/* Recognizes the CFA expression binutils emits for the entries of .plt:
 *   DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and;
 *   DW_OP_litN; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
 * i.e. rsp + 8 + ((rip & 15) >= N ? 8 : 0); stores N. */
static bool is_plt_expression(const Dwarf_Op *ops, size_t nops, int16_t *ret)
{
	static const uint8_t shape[] = {
		DW_OP_breg7, DW_OP_breg16, DW_OP_lit15, DW_OP_and, DW_OP_lit0,
		DW_OP_ge,    DW_OP_lit3,   DW_OP_shl,   DW_OP_plus,
	};

	if (nops != ELEMENTSOF(shape))
		return false;
	for (size_t i = 0; i < nops; i++) {
		if (i == 4) {
			if (ops[i].atom < DW_OP_lit0 || ops[i].atom > DW_OP_lit31)
				return false;
		} else if (ops[i].atom != shape[i]) {
			return false;
		}
	}
	if ((int64_t)ops[0].number != 8 || ops[1].number != 0)
		return false;
	*ret = (int16_t)(ops[4].atom - DW_OP_lit0);
	return true;
}

/* Where the caller's rbp is: 0 when this frame leaves it alone, the slot
 * CFA + 8 * n as n, PERFD_RBP_LOST for anything else. */
static int8_t rbp_rule(Dwarf_Frame *frame)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t nops = 0;
	int64_t off;

	if (dwarf_frame_register(frame, DWARF_REG_RBP, mem, &ops, &nops) != 0)
		return PERFD_RBP_LOST;
	if (nops == 0)
		return ops == NULL ? 0 : PERFD_RBP_LOST; /* same value : undefined */
	if (!rule_is_cfa_offset(ops, nops, &off) || off == 0 || off % 8 != 0 ||
	    off / 8 < -127 || off / 8 > 127)
		return PERFD_RBP_LOST;
	return (int8_t)(off / 8);
}

/* Reduces the frame libdw computed for an address to a row (type, offsets;
 * row->vaddr is left alone).  Every rule the BPF walker cannot evaluate
 * becomes PERFD_CFA_UNSUPPORTED with zero offsets, so such rows merge. */
static void classify(Dwarf_Frame *frame, int ra_reg, bool signal, struct pending_row *row)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t nops = 0;
	int64_t off;
	int16_t plt;

	row->type = PERFD_CFA_UNSUPPORTED;
	row->cfa_offset = 0;
	row->rbp_offset8 = 0;

	/* The whole ucontext is at rsp: the other rules do not matter. */
	if (signal) {
		row->type = PERFD_CFA_SIGNAL;
		return;
	}
	if (ra_reg != DWARF_REG_RA ||
	    dwarf_frame_register(frame, DWARF_REG_RA, mem, &ops, &nops) != 0)
		return;
	if (nops == 0 && ops != NULL) {
		/* Return address undefined: the outermost frame. */
		row->type = PERFD_CFA_END;
		return;
	}
	if (!rule_is_cfa_offset(ops, nops, &off) || off != -8)
		return;

	if (dwarf_frame_cfa(frame, &ops, &nops) != 0)
		return;
	if (nops == 1 && ops[0].atom == DW_OP_bregx &&
	    (ops[0].number == DWARF_REG_RSP || ops[0].number == DWARF_REG_RBP)) {
		off = (int64_t)ops[0].number2;
		if (off < INT16_MIN || off > INT16_MAX)
			return;
		row->type = ops[0].number == DWARF_REG_RSP ? PERFD_CFA_RSP : PERFD_CFA_RBP;
		row->cfa_offset = (int16_t)off;
	} else if (is_plt_expression(ops, nops, &plt)) {
		row->type = PERFD_CFA_PLT;
		row->cfa_offset = plt;
	} else {
		return;
	}
	row->rbp_offset8 = rbp_rule(frame);
}

/* Emits the rows of [lo, hi) from cfi, then a NO_CFI row at hi that yields
 * to a row of the code that follows.  An address libdw finds no rule for
 * (malformed CFI) gets an UNSUPPORTED row that holds up to hi. */
static int walk_range(struct builder *b, Dwarf_CFI *cfi, uint64_t lo, uint64_t hi)
{
	struct pending_row row = {};
	int r;

	for (uint64_t addr = lo; addr < hi;) {
		Dwarf_Frame *frame = NULL;
		Dwarf_Addr start, end;
		bool signal = false;
		int ra_reg;

		r = over_time(b);
		if (r < 0)
			return r;
		row.vaddr = addr;
		if (dwarf_cfi_addrframe(cfi, addr, &frame) != 0 || !frame ||
		    (ra_reg = dwarf_frame_info(frame, &start, &end, &signal)) < 0 || end <= addr) {
			free(frame);
			row = (struct pending_row){ .vaddr = addr, .type = PERFD_CFA_UNSUPPORTED };
			r = push_row(b, &row);
			if (r < 0)
				return r;
			break;
		}
		classify(frame, ra_reg, signal, &row);
		free(frame);
		r = push_row(b, &row);
		if (r < 0)
			return r;
		addr = end;
	}
	row = (struct pending_row){ .vaddr = hi, .gap_end = true, .type = PERFD_CFA_NO_CFI };
	return push_row(b, &row);
}

/* --- sections ----------------------------------------------------------- */

static bool find_phdr(Elf *elf, uint32_t type, uint64_t vaddr, GElf_Phdr *ret)
{
	size_t n;

	if (elf_getphdrnum(elf, &n) < 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, (int)i, ret) || ret->p_type != type)
			continue;
		if (type != PT_LOAD ||
		    (vaddr >= ret->p_vaddr && vaddr - ret->p_vaddr < ret->p_filesz))
			return true;
	}
	return false;
}

/* Locates .eh_frame through PT_GNU_EH_FRAME, for files without section
 * headers: the index gives its address and its FDE count, which bounds the
 * walk; its data runs at most to the end of the segment holding it. */
static int eh_frame_from_phdr(Elf *elf, struct cfi_section *ret)
{
	GElf_Phdr hdr_ph, load;
	Elf_Data *hdr;
	const uint8_t *start, *p, *end;
	uint64_t eh_vaddr, count;
	int r;

	/* strip --remove-section=.eh_frame_hdr leaves the header, empty. */
	if (!find_phdr(elf, PT_GNU_EH_FRAME, 0, &hdr_ph) || hdr_ph.p_filesz == 0)
		return -ENODATA;
	hdr = elf_getdata_rawchunk(elf, (int64_t)hdr_ph.p_offset, hdr_ph.p_filesz, ELF_T_BYTE);
	if (!hdr || !hdr->d_buf || hdr->d_size < 4)
		return -EINVAL;
	/* version 1, eh_frame_ptr_enc, fde_count_enc, table_enc */
	start = hdr->d_buf;
	end = start + hdr->d_size;
	if (start[0] != 1)
		return -ENOTSUP;
	p = start + 4;
	r = read_pointer(&p, end, start[1], hdr_ph.p_vaddr + (uint64_t)(p - start), hdr_ph.p_vaddr,
			 &eh_vaddr);
	if (r < 0)
		return r;
	r = read_pointer(&p, end, start[2], hdr_ph.p_vaddr + (uint64_t)(p - start), hdr_ph.p_vaddr,
			 &count);
	if (r < 0)
		return r;
	if (!find_phdr(elf, PT_LOAD, eh_vaddr, &load))
		return -EINVAL;

	ret->data = elf_getdata_rawchunk(elf, (int64_t)(load.p_offset + (eh_vaddr - load.p_vaddr)),
					 load.p_filesz - (eh_vaddr - load.p_vaddr), ELF_T_BYTE);
	if (!ret->data)
		return -EINVAL;
	ret->vaddr = eh_vaddr;
	ret->eh_frame = true;
	ret->max_fdes = count;
	return 0;
}

/* --- register numbers ------------------------------------------------- */

/* libdw keeps one rule per DWARF register, up to the highest register
 * number the CIE's and the FDE's programs name: for a number n it
 * reallocates and zeroes 16 * n bytes (up to 2 GiB, its own cap), and it
 * does so again each time it replays the program, i.e. for every row.  One
 * crafted FDE thus takes 2 GiB and a second of memset per row; fuzz-unwind
 * found it (an out-of-memory).  x86_64's DWARF registers stop at 145 (APX's
 * r31), so a file whose CFI names a higher register gets no table
 * (-EBADMSG), checked before libdw runs any program of the section: libdw
 * finds FDEs by its own lookup (the .eh_frame_hdr table, or a walk of the
 * section), so skipping the FDEs we walk would not be enough.  Left open:
 * without section headers, libdw's .eh_frame runs to the end of the file,
 * ours to the end of its segment; an FDE past that is not checked. */
#define MAX_CFI_REGNO 255

/* Whether the CFA program [p, end) names no register above MAX_CFI_REGNO;
 * false too when it cannot be decoded.  fde_enc: the DW_CFA_set_loc
 * operand's encoding. */
static bool cfa_program_ok(const uint8_t *p, const uint8_t *end, uint8_t fde_enc)
{
	while (p < end) {
		uint8_t op = *p++;
		unsigned regs = 0, values = 0, fixed = 0;
		bool block = false;
		uint64_t v;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
		case DW_CFA_restore: /* register in the low 6 bits */
			continue;
		case DW_CFA_offset:
			values = 1;
			break;
		default:
			switch (op) {
			case DW_CFA_nop:
			case DW_CFA_remember_state:
			case DW_CFA_restore_state:
			case DW_CFA_GNU_window_save:
				break;
			case DW_CFA_set_loc:
				if (read_value(&p, end, fde_enc, &v) < 0)
					return false;
				break;
			case DW_CFA_advance_loc1:
				fixed = 1;
				break;
			case DW_CFA_advance_loc2:
				fixed = 2;
				break;
			case DW_CFA_advance_loc4:
				fixed = 4;
				break;
			case DW_CFA_MIPS_advance_loc8:
				fixed = 8;
				break;
			case DW_CFA_restore_extended:
			case DW_CFA_undefined:
			case DW_CFA_same_value:
			case DW_CFA_def_cfa_register:
				regs = 1;
				break;
			case DW_CFA_register:
				regs = 2;
				break;
			case DW_CFA_offset_extended:
			case DW_CFA_offset_extended_sf:
			case DW_CFA_val_offset:
			case DW_CFA_val_offset_sf:
			case DW_CFA_def_cfa:
			case DW_CFA_def_cfa_sf:
			case DW_CFA_GNU_negative_offset_extended:
				regs = 1;
				values = 1;
				break;
			case DW_CFA_def_cfa_offset:
			case DW_CFA_def_cfa_offset_sf:
			case DW_CFA_GNU_args_size:
				values = 1;
				break;
			case DW_CFA_def_cfa_expression:
				block = true;
				break;
			case DW_CFA_expression:
			case DW_CFA_val_expression:
				regs = 1;
				block = true;
				break;
			default:
				return false;
			}
		}
		if ((size_t)(end - p) < fixed)
			return false;
		p += fixed;
		for (unsigned i = 0; i < regs; i++)
			if (read_value(&p, end, DW_EH_PE_uleb128, &v) < 0 || v > MAX_CFI_REGNO)
				return false;
		/* sleb128 operands have the same length as uleb128 ones */
		for (unsigned i = 0; i < values; i++)
			if (read_value(&p, end, DW_EH_PE_uleb128, &v) < 0)
				return false;
		if (block && (read_value(&p, end, DW_EH_PE_uleb128, &v) < 0 ||
			      v > (uint64_t)(end - p)))
			return false;
		if (block)
			p += v;
	}
	return true;
}

/* The last CIE checked: FDEs share few CIEs, in runs. */
struct cie_check {
	Dwarf_Off off;
	bool ok, sized; /* sized: 'z' augmentation, FDEs carry a length */
	uint8_t enc;
};

/* Whether the programs libdw runs for FDE e, its CIE's initial
 * instructions then its own, are cfa_program_ok().  An FDE libdw cannot
 * intern (its CIE unreadable) is harmless; one whose layout we cannot
 * follow is not ok. */
static bool fde_program_ok(struct builder *b, const struct cfi_section *s,
			   const Dwarf_CFI_Entry *e, struct cie_check *cc)
{
	const uint8_t *p = e->fde.start;
	uint64_t v;

	if (e->fde.CIE_pointer != cc->off) {
		Dwarf_CFI_Entry c;
		Dwarf_Off ignored;

		cc->off = e->fde.CIE_pointer;
		if (dwarf_next_cfi(b->ident, s->data, s->eh_frame, cc->off, &ignored, &c) != 0 ||
		    !dwarf_cfi_cie_p(&c)) {
			cc->ok = true; /* libdw cannot use its FDEs */
			cc->sized = false;
			cc->enc = DW_EH_PE_omit;
			return true;
		}
		cc->sized = c.cie.augmentation[0] == 'z';
		cc->ok = cie_fde_encoding(&c.cie, &cc->enc) == 0 &&
			 cfa_program_ok(c.cie.initial_instructions,
					c.cie.initial_instructions_end, cc->enc);
	}
	if (!cc->ok || cc->enc == DW_EH_PE_omit)
		return cc->ok;
	if (read_value(&p, e->fde.end, cc->enc, &v) < 0 ||
	    read_value(&p, e->fde.end, cc->enc, &v) < 0)
		return false;
	if (cc->sized) {
		if (read_value(&p, e->fde.end, DW_EH_PE_uleb128, &v) < 0 ||
		    v > (uint64_t)(e->fde.end - p))
			return false;
		p += v;
	}
	return cfa_program_ok(p, e->fde.end, cc->enc);
}

/* Checks the FDEs of an .eh_frame_hdr (its bytes hdr..hdr_end, at
 * hdr_vaddr) whose table libdw may search for s: each entry's FDE, parsed
 * where the entry says, as libdw parses it.  A linker's table points at
 * FDEs of s only: an entry that does not, or that we cannot read, refuses
 * s too.  Returns 0, -EBADMSG, -ETIMEDOUT or -ECANCELED. */
static int check_hdr_fdes(struct builder *b, const struct cfi_section *s, const uint8_t *hdr,
			  const uint8_t *hdr_end, uint64_t hdr_vaddr)
{
	struct cie_check cc = { .off = (Dwarf_Off)-1 };
	const uint8_t *p = hdr + 4;
	uint64_t ignored, count;

	if (hdr_end - hdr < 4 || hdr[0] != 1)
		return 0; /* libdw does not use it */
	if (read_pointer(&p, hdr_end, hdr[1], hdr_vaddr + (uint64_t)(p - hdr), hdr_vaddr,
			 &ignored) < 0)
		return 0;
	if (hdr[2] == DW_EH_PE_omit || hdr[3] == DW_EH_PE_omit)
		return 0; /* no table */
	if (read_pointer(&p, hdr_end, hdr[2], hdr_vaddr + (uint64_t)(p - hdr), hdr_vaddr,
			 &count) < 0)
		return -EBADMSG;
	for (uint64_t i = 0; i < count && p < hdr_end; i++) {
		Dwarf_CFI_Entry e;
		Dwarf_Off next;
		uint64_t fde;
		int r = over_time(b);

		if (r < 0)
			return r;
		if (read_pointer(&p, hdr_end, hdr[3], hdr_vaddr + (uint64_t)(p - hdr), hdr_vaddr,
				 &ignored) < 0 ||
		    read_pointer(&p, hdr_end, hdr[3], hdr_vaddr + (uint64_t)(p - hdr), hdr_vaddr,
				 &fde) < 0 ||
		    fde < s->vaddr || fde - s->vaddr >= s->data->d_size ||
		    dwarf_next_cfi(b->ident, s->data, s->eh_frame, fde - s->vaddr, &next, &e) != 0 ||
		    dwarf_cfi_cie_p(&e) || !fde_program_ok(b, s, &e, &cc))
			return -EBADMSG;
	}
	return 0;
}

/* Checks the FDEs of the .eh_frame_hdr tables libdw may search for s: the
 * sections of that name when the file has section headers, else
 * PT_GNU_EH_FRAME's. */
static int check_hdr_tables(struct builder *b, const struct cfi_section *s)
{
	size_t n_sections, shstrndx;
	GElf_Phdr ph;
	Elf_Data *d;
	int r;

	if (elf_getshdrnum(b->elf, &n_sections) < 0)
		return 0;
	if (n_sections == 0) {
		if (!find_phdr(b->elf, PT_GNU_EH_FRAME, 0, &ph) || ph.p_filesz == 0)
			return 0;
		d = elf_getdata_rawchunk(b->elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_BYTE);
		if (!d || !d->d_buf)
			return 0;
		return check_hdr_fdes(b, s, d->d_buf, (const uint8_t *)d->d_buf + d->d_size,
				      ph.p_vaddr);
	}
	if (elf_getshdrstrndx(b->elf, &shstrndx) < 0)
		return 0;
	for (Elf_Scn *scn = elf_nextscn(b->elf, NULL); scn; scn = elf_nextscn(b->elf, scn)) {
		const char *name;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(b->elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".eh_frame_hdr") != 0)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		r = check_hdr_fdes(b, s, d->d_buf, (const uint8_t *)d->d_buf + d->d_size,
				   sh.sh_addr);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Checks every FDE of s that libdw may run, as the comment above says: all
 * those of the section's chain of entries (past s->max_fdes: libdw's walk
 * does not stop there), and those of the .eh_frame_hdr tables it may
 * search.  Returns 0, -EBADMSG, -ETIMEDOUT or -ECANCELED. */
static int check_cfi_registers(struct builder *b, const struct cfi_section *s)
{
	struct cie_check cc = { .off = (Dwarf_Off)-1 };
	Dwarf_Off off = 0;
	Dwarf_CFI_Entry e;
	int r;

	while ((r = next_fde(b, s, &off, &e)) > 0)
		if (!fde_program_ok(b, s, &e, &cc))
			return -EBADMSG;
	if (r < 0)
		return r;
	return s->eh_frame ? check_hdr_tables(b, s) : 0;
}

static int read_exec_segments(struct builder *b)
{
	size_t n;

	if (elf_getphdrnum(b->elf, &n) < 0)
		return -ENOEXEC;
	b->exec = calloc(n ? n : 1, sizeof(*b->exec));
	if (!b->exec)
		return -ENOMEM;
	b->base = UINT64_MAX;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(b->elf, (int)i, &ph))
			return -EINVAL;
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0 ||
		    ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
			continue;
		b->exec[b->n_exec++] = (struct code_range){ ph.p_vaddr, ph.p_vaddr + ph.p_memsz };
		b->base = MIN(b->base, ph.p_vaddr);
	}
	return 0;
}

/* Rows from .eh_frame.  Fills eh (sorted, disjoint) with the code it covers. */
static int add_eh_frame(struct builder *b, struct code_range **eh, size_t *n_eh)
{
	_cleanup_(dwarf_cfi_endp) Dwarf_CFI *cfi = NULL;
	struct cfi_section s = { .eh_frame = true, .max_fdes = SIZE_MAX };
	GElf_Shdr sh;
	Elf_Scn *scn;
	size_t cap = 0, n_sections;
	int64_t walked;
	int r;

	scn = elf_find_section(b->elf, ".eh_frame", &sh);
	if (scn) {
		s.data = elf_getdata(scn, NULL);
		s.vaddr = sh.sh_addr;
		if (!s.data || !s.data->d_buf)
			return 0;
	} else if (elf_getshdrnum(b->elf, &n_sections) == 0 && n_sections == 0) {
		/* Only without section headers: in a debug-info file, the
		 * program headers point at contents that are not there. */
		r = eh_frame_from_phdr(b->elf, &s);
		if (r == -ENODATA)
			return 0;
		if (r < 0)
			return r;
	} else {
		return 0;
	}

	walked = read_fde_ranges(b, &s, eh, n_eh, &cap);
	if (walked < 0)
		return (int)walked;
	b->cfi_bytes += scn ? s.data->d_size : (size_t)walked;
	*n_eh = ranges_normalize(*eh, *n_eh);
	if (*n_eh == 0)
		return 0;

	r = check_cfi_registers(b, &s);
	if (r < 0)
		return r;
	cfi = dwarf_getcfi_elf(b->elf);
	if (!cfi) {
		*n_eh = 0;
		return 0;
	}
	for (size_t i = 0; i < *n_eh; i++) {
		r = walk_range(b, cfi, (*eh)[i].start, (*eh)[i].end);
		if (r < 0)
			return r;
	}
	b->fdes += *n_eh;
	return 0;
}

/* Rows from .debug_frame for the code outside eh (sorted, disjoint). */
static int add_debug_frame(struct builder *b, const struct code_range *eh, size_t n_eh)
{
	_cleanup_free_ struct code_range *fdes = NULL, *pieces = NULL;
	_cleanup_(dwarf_endp) Dwarf *dw = NULL;
	struct cfi_section s = { .eh_frame = false, .max_fdes = SIZE_MAX };
	size_t n_fdes = 0, cap = 0, n_pieces = 0, used = 0, j = 0;
	Dwarf_CFI *cfi;
	GElf_Shdr sh;
	Elf_Scn *scn;
	int64_t walked;
	int r;

	scn = elf_find_section(b->elf, ".debug_frame", &sh);
	if (!scn)
		return 0;
	/* Decompress in place; libdw does the same and then finds it done. */
	if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
		return 0;
	s.data = elf_getdata(scn, NULL);
	if (!s.data || !s.data->d_buf)
		return 0;

	walked = read_fde_ranges(b, &s, &fdes, &n_fdes, &cap);
	if (walked < 0)
		return (int)walked;
	n_fdes = ranges_normalize(fdes, n_fdes);

	/* An FDE is cut into one piece, plus one per eh range starting inside
	 * it; the FDEs are disjoint, so each eh range cuts at most one. */
	pieces = calloc(n_fdes + n_eh + 1, sizeof(*pieces));
	if (!pieces)
		return -ENOMEM;
	for (size_t i = 0; i < n_fdes; i++) {
		uint64_t pos = fdes[i].start;
		bool any = false;

		while (j < n_eh && eh[j].end <= pos)
			j++;
		while (pos < fdes[i].end) {
			uint64_t stop;

			if (j < n_eh && eh[j].start <= pos) {
				pos = eh[j].end;
				j++;
				continue;
			}
			stop = j < n_eh ? MIN(fdes[i].end, eh[j].start) : fdes[i].end;
			pieces[n_pieces++] = (struct code_range){ pos, stop };
			any = true;
			pos = stop;
		}
		/* The next FDE may start inside the eh range this one ended in. */
		if (j > 0)
			j--;
		used += any;
	}
	if (n_pieces == 0)
		return 0;

	r = check_cfi_registers(b, &s);
	if (r < 0)
		return r;
	dw = dwarf_begin_elf(b->elf, DWARF_C_READ, NULL);
	cfi = dw ? dwarf_getcfi(dw) : NULL;
	if (!cfi)
		return 0;
	for (size_t i = 0; i < n_pieces; i++) {
		r = walk_range(b, cfi, pieces[i].start, pieces[i].end);
		if (r < 0)
			return r;
	}
	b->fdes += used;
	b->cfi_bytes += (size_t)walked;
	return 0;
}

/* --- the table ---------------------------------------------------------- */

static int pending_cmp(const void *x, const void *y)
{
	const struct pending_row *a = x, *b = y;

	if (a->vaddr != b->vaddr)
		return a->vaddr < b->vaddr ? -1 : 1;
	return (int)a->gap_end - (int)b->gap_end;
}

/* Sorts the pending rows into t: at one address the first real row wins,
 * and a row equal in rule to the one before it is dropped. */
static int finish_rows(struct builder *b, struct unwind_table *t)
{
	uint64_t last_vaddr = 0;

	qsort_safe(b->rows, b->n_rows, sizeof(*b->rows), pending_cmp);
	t->rows = calloc(b->n_rows, sizeof(*t->rows));
	if (!t->rows)
		return -ENOMEM;

	for (size_t i = 0; i < b->n_rows; i++) {
		const struct pending_row *p = &b->rows[i];
		struct perfd_unwind_row *prev = t->n_rows ? &t->rows[t->n_rows - 1] : NULL;

		if (i > 0 && p->vaddr == last_vaddr)
			continue;
		last_vaddr = p->vaddr;
		if (p->vaddr - b->base > UINT32_MAX)
			return -EFBIG;
		if (prev && prev->cfa_type == p->type && prev->cfa_offset == p->cfa_offset &&
		    prev->rbp_offset8 == p->rbp_offset8)
			continue;
		t->rows[t->n_rows++] = (struct perfd_unwind_row){
			.pc = (uint32_t)(p->vaddr - b->base),
			.cfa_offset = p->cfa_offset,
			.cfa_type = p->type,
			.rbp_offset8 = p->rbp_offset8,
		};
		t->rows_unsupported += p->type == PERFD_CFA_UNSUPPORTED;
	}
	return 0;
}

/* Whether frame pointers name the caller of any return address in the
 * `len` bytes row r holds for, next being the row after it
 * (unwind_table_fp_range()). */
static bool fp_safe(const struct perfd_unwind_row *r, const struct perfd_unwind_row *next,
		    uint64_t len)
{
	switch (r->cfa_type) {
	case PERFD_CFA_RBP:
		return r->cfa_offset == 16 && r->rbp_offset8 == -2;
	case PERFD_CFA_RSP:
		if (r->cfa_offset == 8)
			return len <= 5;
		return r->cfa_offset == 16 && r->rbp_offset8 == -2 && len <= 4 &&
		       next->cfa_type == PERFD_CFA_RBP && next->cfa_offset == 16 &&
		       next->rbp_offset8 == -2;
	case PERFD_CFA_NO_CFI:
		return len < 16;
	default:
		return false;
	}
}

/* The last row holds for every address past it: it ends any run. */
void unwind_table_fp_range(const struct perfd_unwind_row *rows, size_t n, uint32_t *first,
			   uint32_t *end)
{
	uint32_t best_first = 0, best_end = 0, run_first = 0;
	bool in_run = false;

	for (size_t i = 0; i + 1 < n; i++) {
		bool safe = fp_safe(&rows[i], &rows[i + 1], (uint64_t)rows[i + 1].pc - rows[i].pc);

		if (safe && !in_run) {
			run_first = rows[i].pc;
			in_run = true;
		}
		if (in_run && (!safe || i + 2 == n)) {
			uint32_t run_end = safe ? rows[i + 1].pc : rows[i].pc;

			if (run_end - run_first > best_end - best_first) {
				best_first = run_first;
				best_end = run_end;
			}
			in_run = false;
		}
	}
	*first = best_first;
	*end = best_end;
}

static uint64_t cfi_bytes_of(Elf *elf, int fd);

/* Builds the table of an open ELF handle; see unwind_table_build(). */
static int build_from_elf(Elf *elf, int fd, const struct unwind_table_limits *limits,
			  struct unwind_table **ret)
{
	_cleanup_(builder_done) struct builder b = {
		.elf = elf,
		.cpu_limit_ns = limits && limits->cpu_ns ? thread_cpu_ns() + limits->cpu_ns : 0,
		.cancel = limits ? limits->cancel : NULL,
	};
	_cleanup_(unwind_table_freep) struct unwind_table *t = NULL;
	_cleanup_free_ struct code_range *eh = NULL;
	size_t n_eh = 0;
	GElf_Ehdr ehdr;
	int r;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr))
		return -ENOEXEC;
	b.ident = (const unsigned char *)elf_getident(elf, NULL);
	/* The rows name x86_64 registers; nothing else can use them. */
	if (!b.ident || b.ident[EI_CLASS] != ELFCLASS64 || b.ident[EI_DATA] != ELFDATA2LSB ||
	    ehdr.e_machine != EM_X86_64)
		return -ENOEXEC;

	if (limits && limits->max_cfi_bytes && cfi_bytes_of(elf, fd) > limits->max_cfi_bytes)
		return -E2BIG;
	r = read_exec_segments(&b);
	if (r < 0)
		return r;
	if (b.n_exec == 0)
		return -ENODATA;

	r = add_eh_frame(&b, &eh, &n_eh);
	if (r < 0)
		return r;
	r = add_debug_frame(&b, eh, n_eh);
	if (r < 0)
		return r;
	if (b.n_rows == 0)
		return -ENODATA;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->base_vaddr = b.base;
	r = finish_rows(&b, t);
	if (r < 0)
		return r;
	unwind_table_fp_range(t->rows, t->n_rows, &t->fp_first, &t->fp_end);
	t->fdes = b.fdes;
	t->cfi_bytes = b.cfi_bytes;
	*ret = TAKE_PTR(t);
	return 0;
}

/* Beyond the header's contract: -ENOEXEC also covers an ELF file for
 * another architecture or one libelf cannot read, and -ENODATA a file
 * without an executable PT_LOAD (an object file, a debug-info file whose
 * .eh_frame is NOBITS).  FDEs libdw cannot parse are skipped, and a code
 * range whose rule libdw cannot compute gets an UNSUPPORTED row; when
 * libdw cannot open the .debug_frame, the code only it covers has no rows. */
int unwind_table_build(int fd, const struct unwind_table_limits *limits,
		       struct unwind_table **ret)
{
	_cleanup_(elf_endp) Elf *elf = NULL;
	int r = elf_open_fd(fd, &elf);

	if (r < 0)
		return r;
	return build_from_elf(elf, fd, limits, ret);
}

/* unwind_table_cfi_bytes() of an open ELF handle on fd. */
static uint64_t cfi_bytes_of(Elf *elf, int fd)
{
	uint64_t bytes = 0;
	size_t n_sections;
	struct stat st;
	GElf_Shdr sh;
	Elf_Scn *scn;

	if (elf_getshdrnum(elf, &n_sections) < 0)
		return 0;
	if (n_sections == 0) /* .eh_frame through PT_GNU_EH_FRAME, sized as it is walked */
		return fstat(fd, &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0;
	scn = elf_find_section(elf, ".eh_frame", &sh);
	if (scn)
		bytes += elf_section_bytes(scn, &sh);
	scn = elf_find_section(elf, ".debug_frame", &sh);
	if (scn)
		bytes += elf_section_bytes(scn, &sh);
	return bytes;
}

uint64_t unwind_table_cfi_bytes(int fd)
{
	_cleanup_(elf_endp) Elf *elf = NULL;

	if (elf_open_fd(fd, &elf) < 0)
		return 0;
	return cfi_bytes_of(elf, fd);
}

static uint64_t row_pc(const void *row)
{
	return ((const struct perfd_unwind_row *)row)->pc;
}

/* Rows hold from their pc up to the next row's; the last row is always the
 * NO_CFI row closing the last FDE, so any address past it gets that.  NULL
 * below the first row, and for an address more than 4 GiB above the base,
 * which no row can describe. */
const struct perfd_unwind_row *unwind_table_find(const struct unwind_table *t, uint64_t vaddr)
{
	size_t lo;

	if (!t || t->n_rows == 0 || vaddr < t->base_vaddr || vaddr - t->base_vaddr > UINT32_MAX)
		return NULL;
	lo = search_upper_bound(t->rows, t->n_rows, sizeof(*t->rows), vaddr - t->base_vaddr, row_pc);
	return lo == 0 ? NULL : &t->rows[lo - 1];
}
