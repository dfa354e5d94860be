/* SPDX-License-Identifier: MIT */
/* elfopen.c - see elfopen.h. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "base/elfopen.h"

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

int elf_open_fd(int fd, Elf **ret)
{
	unsigned char ident[SELFMAG];
	GElf_Ehdr ehdr;
	ssize_t n;
	Elf *elf;
	int r;

	r = elf_library_init();
	if (r < 0)
		return r;
	n = pread(fd, ident, sizeof(ident), 0);
	if (n < 0)
		return negative_errno();
	if ((size_t)n < sizeof(ident) || memcmp(ident, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;
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

uint64_t elf_section_bytes(Elf_Scn *scn, const GElf_Shdr *sh)
{
	GElf_Chdr ch;

	if (!(sh->sh_flags & SHF_COMPRESSED))
		return sh->sh_size;
	return gelf_getchdr(scn, &ch) ? ch.ch_size : sh->sh_size;
}
