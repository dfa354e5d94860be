/* SPDX-License-Identifier: MIT */
/*
 * pthread_tsd.c - see pthread_tsd.h.
 *
 * glibc describes its private structures for libthread_db in read-only
 * arrays of three 32-bit words, {size in bits, element count, offset}
 * (nptl_db/db_info.c), and a few sizes as plain 32-bit words.  Those are
 * dynamic symbols of libc.so.6 since 2.34 (libpthread before), so reading
 * them is a symbol lookup and a pread, and the layout they give holds for
 * that very libc build.
 */
#include "interp/python/pthread_tsd.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/elfopen.h"
#include "perfd/macro.h"

enum {
	SYM_SPECIFIC,      /* struct pthread, specific[] */
	SYM_KEY_DATA_DATA, /* struct pthread_key_data, data */
	SYM_KEY_DATA_SIZE, /* sizeof(struct pthread_key_data) */
	SYM_COUNT,
};

static const char *const symbol_names[SYM_COUNT] = {
	[SYM_SPECIFIC] = "_thread_db_pthread_specific",
	[SYM_KEY_DATA_DATA] = "_thread_db_pthread_key_data_data",
	[SYM_KEY_DATA_SIZE] = "_thread_db_sizeof_pthread_key_data",
};

/* Reads size bytes at vaddr from the file, through the PT_LOAD holding them. */
static int read_vaddr(Elf *elf, int fd, uint64_t vaddr, void *buf, size_t size)
{
	size_t nph;

	if (elf_getphdrnum(elf, &nph) < 0)
		return -EINVAL;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		ssize_t n;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr < ph.p_vaddr || ph.p_filesz < size || vaddr - ph.p_vaddr > ph.p_filesz - size)
			continue;
		n = pread(fd, buf, size, (off_t)(ph.p_offset + (vaddr - ph.p_vaddr)));
		if (n < 0)
			return negative_errno();
		return (size_t)n == size ? 0 : -EINVAL;
	}
	return -ENOENT;
}

int pthread_tsd_read(int fd, struct pthread_tsd *ret)
{
	_cleanup_(elf_endp) Elf *elf = NULL;
	uint64_t where[SYM_COUNT] = { 0 };
	uint32_t specific[3], data[3], key_size;
	Elf_Scn *scn = NULL;
	int r;

	r = elf_open_fd(fd, &elf);
	if (r < 0)
		return r;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0)
			continue;
		if (!elf_symtab_fits(elf, scn, &sh, ELF_LOOP_SECTION_MAX))
			return -EFBIG;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		for (size_t i = 1; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
			    GELF_ST_TYPE(sym.st_info) != STT_OBJECT)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || strncmp(name, "_thread_db_", 11) != 0)
				continue;
			for (int k = 0; k < SYM_COUNT; k++)
				if (strcmp(name, symbol_names[k]) == 0)
					where[k] = sym.st_value;
		}
	}
	for (int k = 0; k < SYM_COUNT; k++)
		if (!where[k])
			return -ENOENT;
	if ((r = read_vaddr(elf, fd, where[SYM_SPECIFIC], specific, sizeof(specific))) < 0 ||
	    (r = read_vaddr(elf, fd, where[SYM_KEY_DATA_DATA], data, sizeof(data))) < 0 ||
	    (r = read_vaddr(elf, fd, where[SYM_KEY_DATA_SIZE], &key_size, sizeof(key_size))) < 0)
		return r;
	/* A pointer-sized data field inside a record of sane size, in a
	 * struct pthread of a few KiB. */
	if (data[0] != 64 || key_size < 16 || key_size > 64 || data[2] + 8 > key_size ||
	    specific[2] == 0 || specific[2] > 65536)
		return -EINVAL;
	*ret = (struct pthread_tsd){
		.specific = specific[2],
		.key_data_size = key_size,
		.key_data_data = data[2],
	};
	return 0;
}
