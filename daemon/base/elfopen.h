/* SPDX-License-Identifier: MIT */
/*
 * elfopen.h - opening ELF files with libelf, one way for every module that
 * reads them (symbols, unwind tables, debug files, source lines).
 *
 * Files are read, never mapped: every file perfd reads ELF from is a
 * process's, and its owner may truncate it at any time; a read of mapped
 * pages past the new end would be SIGBUS, which would end the daemon.
 * Through pread, the same truncation is a short read: libelf returns an
 * error and the caller goes on without that file.  The cost is a copy of
 * what is read (sections are read on demand, not the whole file).
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

/* Opens an Elf on fd (ELF_C_READ: only pread through it, never mapped; the
 * caller keeps fd open while it reads sections), after checking the magic ourselves: libelf does not tell
 * "not ELF" from a read error.  Returns 0 and the Elf in *ret (the caller
 * ends it), -ENOEXEC for anything that is not an ELF file with a header, or
 * another -errno. */
int elf_open_fd(int fd, Elf **ret);

/* The section called name, with its header in *ret_sh, or NULL (also for
 * one without contents in the file: SHT_NOBITS). */
Elf_Scn *elf_find_section(Elf *elf, const char *name, GElf_Shdr *ret_sh);

/* The bytes a section's contents take once read: a compressed one's
 * decompressed size (from its header, not read), else sh_size.  For caps
 * checked before a section is read. */
uint64_t elf_section_bytes(Elf_Scn *scn, const GElf_Shdr *sh);

#endif
