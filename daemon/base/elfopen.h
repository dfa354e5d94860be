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

#include <endian.h>
#include <gelf.h>
#include <stdbool.h>
#include <libelf.h>

#include "perfd/macro.h"

/* The EI_DATA of this machine's own byte order. */
#if __BYTE_ORDER == __LITTLE_ENDIAN
#define HOST_ELFDATA ELFDATA2LSB
#else
#define HOST_ELFDATA ELFDATA2MSB
#endif

DEFINE_TRIVIAL_CLEANUP_FUNC(Elf, elf_end);

/* Initializes libelf once (thread-safe).  Returns 0, or -ENOTSUP when this
 * libelf cannot serve our ELF version. */
int elf_library_init(void);

/* The most sections a file opened here may have.  libelf allocates a
 * descriptor for each when it opens a file (~100 bytes); the header's
 * 16-bit count stops below 65,280, and past it the first section header
 * holds the count (extended numbering), up to 2^64: a sparse file of a
 * few KiB on disk could make libelf allocate gigabytes.  What is linked
 * to be mapped has tens of sections. */
#define ELF_MAX_SECTIONS 65536
/* The same for program headers, read whole at the first gelf_getphdr():
 * past 65,534 the count is section 0's sh_info (PN_XNUM), up to 2^32.
 * What a linker writes has about ten. */
#define ELF_MAX_SEGMENTS 4096

/* Opens an Elf on fd (ELF_C_READ: only pread through it, never mapped; the
 * caller keeps fd open while it reads sections), after checking the magic
 * ourselves: libelf does not tell "not ELF" from a read error.  Returns 0
 * and the Elf in *ret (the caller ends it), -ENOEXEC for anything that is
 * not an ELF file with a header, -EFBIG for one of more than
 * ELF_MAX_SECTIONS sections or ELF_MAX_SEGMENTS program headers, or
 * another -errno. */
int elf_open_fd(int fd, Elf **ret);

/* The section called name, with its header in *ret_sh, or NULL (also for
 * one without contents in the file: SHT_NOBITS). */
Elf_Scn *elf_find_section(Elf *elf, const char *name, GElf_Shdr *ret_sh);

/* The bytes a section's contents take once read: a compressed one's
 * decompressed size (from its compression header alone), else sh_size.  For caps
 * checked before a section is read. */
uint64_t elf_section_bytes(Elf *elf, const GElf_Shdr *sh);

/* The most of one section read on the event loop: Python detection's
 * symbol tables, their strings and .rodata, libc's thread descriptors.  An
 * interpreter's are a few MiB (python3.11: .rodata 2 MiB, .dynsym 51 KiB);
 * a file's owner can make them gigabytes (sparse, read in seconds as the
 * loop answers nothing), so past this such a file is refused: -EFBIG. */
#define ELF_LOOP_SECTION_MAX (16u << 20)

/* Whether the symbol table scn (header sh) and its string table both take
 * at most max bytes once read. */
bool elf_symtab_fits(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, uint64_t max);

#endif
