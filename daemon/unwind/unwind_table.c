/* SPDX-License-Identifier: MIT */
/*
 * unwind_table.c - the x86_64 unwind rows (include/perfd/unwind.h) of one
 * ELF file, from its DWARF call-frame information.
 *
 * libdw interprets the CFI; this file enumerates the FDEs and reduces each
 * row of their tables to the few rules the BPF walker can evaluate.  What
 * is read of the section's bytes without libdw (pointers, the FDEs'
 * ranges, .eh_frame by program header, the register numbers every program
 * names, checked before libdw runs one) is cfi_read.c's.
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
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/elfopen.h"
#include "base/search.h"
#include "perfd/macro.h"
#include "unwind/unwind_table_internal.h"

/* DWARF register numbers of the x86_64 psABI. */
#define DWARF_REG_RBP 6
#define DWARF_REG_RSP 7
#define DWARF_REG_RA 16

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
		r = cfi_eh_frame_from_phdr(b->elf, &s);
		if (r == -ENODATA)
			return 0;
		if (r < 0)
			return r;
	} else {
		return 0;
	}

	walked = cfi_read_fde_ranges(b, &s, eh, n_eh, &cap);
	if (walked < 0)
		return (int)walked;
	b->cfi_bytes += scn ? s.data->d_size : (size_t)walked;
	*n_eh = cfi_ranges_normalize(*eh, *n_eh);
	if (*n_eh == 0)
		return 0;

	r = cfi_check_registers(b, &s);
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

	walked = cfi_read_fde_ranges(b, &s, &fdes, &n_fdes, &cap);
	if (walked < 0)
		return (int)walked;
	n_fdes = cfi_ranges_normalize(fdes, n_fdes);

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

	r = cfi_check_registers(b, &s);
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
		bytes += elf_section_bytes(elf, &sh);
	scn = elf_find_section(elf, ".debug_frame", &sh);
	if (scn)
		bytes += elf_section_bytes(elf, &sh);
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
