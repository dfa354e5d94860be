/* SPDX-License-Identifier: MIT */
/*
 * elfopen.h - opening ELF files with libelf, one way for every module that
 * reads them (symbols, unwind tables, debug files, source lines).
 */
#ifndef PERFD_ELFOPEN_H
#define PERFD_ELFOPEN_H

#include <gelf.h>
#include <libelf.h>

#include "perfd/macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(Elf, elf_end);

/* Initializes libelf once (thread-safe).  Returns 0, or -ENOTSUP when this
 * libelf cannot serve our ELF version. */
int elf_library_init(void);

/* Opens an Elf on fd (only read through it) with cmd (ELF_C_READ or
 * ELF_C_READ_MMAP), after checking the magic ourselves: libelf does not tell
 * "not ELF" from a read error.  Returns 0 and the Elf in *ret (the caller
 * ends it), -ENOEXEC for anything that is not an ELF file with a header, or
 * another -errno. */
int elf_open_fd(int fd, Elf_Cmd cmd, Elf **ret);

/* The section called name, with its header in *ret_sh, or NULL (also for
 * one without contents in the file: SHT_NOBITS). */
Elf_Scn *elf_find_section(Elf *elf, const char *name, GElf_Shdr *ret_sh);

#endif
