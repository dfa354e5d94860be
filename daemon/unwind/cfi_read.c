/* SPDX-License-Identifier: MIT */
/*
 * cfi_read.c - what unwind_table.c reads of a CFI section itself, before
 * and besides libdw: DW_EH_PE pointers, the FDEs enumerated with their
 * exact ranges, .eh_frame found from PT_GNU_EH_FRAME when there are no
 * section headers, and every CIE's and FDE's program checked for the
 * register numbers x86_64 has, so that libdw never runs one that names
 * more (see "register numbers" below).  The bytes are the file's, and
 * untrusted: every read is bounded by the section's end.
 */
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "perfd/macro.h"
#include "unwind/unwind_table_internal.h"

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

size_t cfi_ranges_normalize(struct code_range *r, size_t n)
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

int64_t cfi_read_fde_ranges(struct builder *b, const struct cfi_section *s,
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

int cfi_eh_frame_from_phdr(Elf *elf, struct cfi_section *ret)
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

int cfi_check_registers(struct builder *b, const struct cfi_section *s)
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
