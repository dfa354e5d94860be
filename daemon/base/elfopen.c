/* SPDX-License-Identifier: MIT */
/* elfopen.c - see elfopen.h. */
#include <byteswap.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "base/elfopen.h"

union elf_header {
	unsigned char ident[EI_NIDENT];
	Elf32_Ehdr e32;
	Elf64_Ehdr e64;
};

static pthread_once_t libelf_once = PTHREAD_ONCE_INIT;
static bool libelf_ready;

static void libelf_init(void)
{
	libelf_ready = elf_version(EV_CURRENT) != EV_NONE;
}

int elf_library_init(void)
{
	(void)pthread_once(&libelf_once, libelf_init);
	return libelf_ready ? 0 : -ENOTSUP;
}

/* The section and program header counts of the ELF file on fd whose
 * header is h, as libelf will take them: past what the header's 16 bits
 * hold, it says 0 sections or PN_XNUM program headers, and section 0's
 * sh_size and sh_info hold the counts (extended numbering).  Returns 0 or
 * -errno (-ENOEXEC for a header libelf would not take either). */
static int header_counts(int fd, const union elf_header *h, uint64_t *ret_sections,
			 uint64_t *ret_segments)
{
	bool is64 = h->ident[EI_CLASS] == ELFCLASS64, swap = h->ident[EI_DATA] != HOST_ELFDATA;
	uint64_t shoff = is64 ? h->e64.e_shoff : h->e32.e_shoff, size, info;
	uint16_t shnum = is64 ? h->e64.e_shnum : h->e32.e_shnum;
	uint16_t phnum = is64 ? h->e64.e_phnum : h->e32.e_phnum;
	ssize_t n, want;

	if (swap) {
		shoff = is64 ? bswap_64(shoff) : bswap_32((uint32_t)shoff);
		shnum = bswap_16(shnum);
		phnum = bswap_16(phnum);
	}
	*ret_sections = shnum;
	*ret_segments = phnum;
	if ((shnum != 0 && phnum != PN_XNUM) || shoff == 0)
		return 0;
	if (shoff > INT64_MAX)
		return -ENOEXEC;
	if (is64) {
		Elf64_Shdr sh;

		want = sizeof(sh);
		n = pread(fd, &sh, sizeof(sh), (off_t)shoff);
		size = swap ? bswap_64(sh.sh_size) : sh.sh_size;
		info = swap ? bswap_32(sh.sh_info) : sh.sh_info;
	} else {
		Elf32_Shdr sh;

		want = sizeof(sh);
		n = pread(fd, &sh, sizeof(sh), (off_t)shoff);
		size = swap ? bswap_32(sh.sh_size) : sh.sh_size;
		info = swap ? bswap_32(sh.sh_info) : sh.sh_info;
	}
	if (n < 0)
		return negative_errno();
	if (n != want)
		return -ENOEXEC;
	if (shnum == 0)
		*ret_sections = size;
	if (phnum == PN_XNUM)
		*ret_segments = info;
	return 0;
}

int elf_open_fd(int fd, Elf **ret)
{
	union elf_header h;
	uint64_t sections, segments;
	GElf_Ehdr ehdr;
	ssize_t n;
	Elf *elf;
	int r;

	r = elf_library_init();
	if (r < 0)
		return r;
	n = pread(fd, &h, sizeof(h), 0);
	if (n < 0)
		return negative_errno();
	if ((size_t)n < sizeof(h.ident) || memcmp(h.ident, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;
	if ((size_t)n < (h.ident[EI_CLASS] == ELFCLASS64 ? sizeof(h.e64) : sizeof(h.e32)))
		return -ENOEXEC;
	r = header_counts(fd, &h, &sections, &segments);
	if (r < 0)
		return r;
	if (sections > ELF_MAX_SECTIONS || segments > ELF_MAX_SEGMENTS)
		return -EFBIG;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr)) {
		(void)elf_end(elf);
		return -ENOEXEC;
	}
	*ret = elf;
	return 0;
}

Elf_Scn *elf_find_section(Elf *elf, const char *name, GElf_Shdr *ret_sh)
{
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return NULL;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		const char *n;

		if (!gelf_getshdr(scn, ret_sh))
			continue;
		n = elf_strptr(elf, shstrndx, ret_sh->sh_name);
		if (n && strcmp(n, name) == 0)
			return ret_sh->sh_type == SHT_NOBITS ? NULL : scn;
	}
	return NULL;
}

uint64_t elf_section_bytes(Elf *elf, const GElf_Shdr *sh)
{
	bool is64 = gelf_getclass(elf) == ELFCLASS64;
	size_t n = is64 ? sizeof(Elf64_Chdr) : sizeof(Elf32_Chdr);
	Elf_Data *d;

	if (!(sh->sh_flags & SHF_COMPRESSED) || sh->sh_size < n)
		return sh->sh_size;
	/* the header alone: libelf's gelf_getchdr() reads the whole section
	 * first when it is not SHF_ALLOC */
	d = elf_getdata_rawchunk(elf, (int64_t)sh->sh_offset, n, ELF_T_CHDR);
	if (!d || !d->d_buf || d->d_size < n)
		return sh->sh_size;
	return is64 ? ((const Elf64_Chdr *)d->d_buf)->ch_size : ((const Elf32_Chdr *)d->d_buf)->ch_size;
}

bool elf_symtab_fits(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, uint64_t max)
{
	Elf_Scn *strings = elf_getscn(elf, sh->sh_link);
	GElf_Shdr ssh;

	return elf_section_bytes(elf, sh) <= max && strings && gelf_getshdr(strings, &ssh) &&
	       elf_section_bytes(elf, &ssh) <= max;
}
