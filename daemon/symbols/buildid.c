/* SPDX-License-Identifier: MIT */
/*
 * buildid.c - the one reader of GNU build-id notes (see buildid.h).
 *
 * An ELF file's notes are taken as raw bytes (elf_rawdata() for a section,
 * elf_getdata_rawchunk() for a segment), not translated by libelf, so that
 * the same walk serves the kernel's notes, which are no ELF file; the cost
 * is turning three header words to host order here when the file's order
 * is not ours.
 */
#include "symbols/buildid.h"
#include "base/elfopen.h"
#include "perfd/macro.h"

#include <byteswap.h>
#include <elf.h>
#include <endian.h>
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <string.h>

static uint32_t note_word(const unsigned char *p, bool swap)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return swap ? bswap_32(v) : v;
}

static uint64_t note_align(uint64_t x, size_t align)
{
	return (x + align - 1) & ~(uint64_t)(align - 1);
}

/* build_id_parse(), the header words in host order unless swap.  Offsets
 * are 64-bit sums of 32-bit sizes: none overflows. */
static int parse_notes(const unsigned char *p, size_t n, size_t align, bool swap, size_t max,
		       const uint8_t **ret_id, size_t *ret_len)
{
	size_t off = 0;

	if (align != 8)
		align = 4;
	while (n - off >= 3 * sizeof(uint32_t)) {
		uint32_t namesz = note_word(p + off, swap), descsz = note_word(p + off + 4, swap),
			 type = note_word(p + off + 8, swap);
		uint64_t name = off + 3 * sizeof(uint32_t);
		uint64_t desc = note_align(name + namesz, align);
		uint64_t end = desc + note_align(descsz, align);

		if (end > n)
			break;
		if (type == NT_GNU_BUILD_ID && namesz == sizeof(ELF_NOTE_GNU) &&
		    memcmp(p + name, ELF_NOTE_GNU, sizeof(ELF_NOTE_GNU)) == 0 && descsz > 0 &&
		    descsz <= max) {
			*ret_id = p + desc;
			*ret_len = descsz;
			return 0;
		}
		off = (size_t)end;
	}
	return -ENOENT;
}

int build_id_parse(const void *notes, size_t n, size_t align, size_t max, const uint8_t **ret_id,
		   size_t *ret_len)
{
	return parse_notes(notes, n, align, false, max, ret_id, ret_len);
}

static int parse_data(const Elf_Data *d, size_t align, bool swap, size_t max,
		      const uint8_t **ret_id, size_t *ret_len)
{
	if (!d || !d->d_buf)
		return -ENOENT;
	return parse_notes(d->d_buf, d->d_size, align, swap, max, ret_id, ret_len);
}

int build_id_from_elf(Elf *elf, enum build_id_source from, size_t max, const uint8_t **ret_id,
		      size_t *ret_len)
{
	const char *ident = elf_getident(elf, NULL);
	bool swap, have_sections = false;
	size_t n, left = BUILD_ID_NOTES_MAX, chunk;

	if (!ident)
		return -ENOENT;
	swap = ident[EI_DATA] != HOST_ELFDATA;

	if (from == BUILD_ID_FROM_FILE) {
		for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
			GElf_Shdr sh;

			have_sections = true;
			if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
				continue;
			if (left == 0)
				return -ENOENT;
			chunk = MIN(sh.sh_size, left);
			left -= chunk;
			/* libelf's rule for a note section's layout */
			if (parse_data(elf_getdata_rawchunk(elf, (int64_t)sh.sh_offset, chunk,
							    ELF_T_BYTE),
				       sh.sh_addralign, swap, max, ret_id, ret_len) == 0)
				return 0;
		}
		if (have_sections)
			return -ENOENT;
	}

	if (elf_getphdrnum(elf, &n) < 0)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		if (left == 0)
			return -ENOENT;
		chunk = MIN(ph.p_filesz, left);
		left -= chunk;
		/* notes aligned to 8 (.note.gnu.property) have their own layout */
		if (parse_data(elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, chunk, ELF_T_BYTE),
			       ph.p_align, swap, max, ret_id, ret_len) == 0)
			return 0;
	}
	return -ENOENT;
}

int build_id_hex(const uint8_t *id, size_t len, char *ret, size_t size)
{
	static const char hex[] = "0123456789abcdef";

	if (size == 0 || len > (size - 1) / 2)
		return -ENOBUFS;
	for (size_t i = 0; i < len; i++) {
		ret[2 * i] = hex[id[i] >> 4];
		ret[2 * i + 1] = hex[id[i] & 0xf];
	}
	ret[2 * len] = '\0';
	return 0;
}
