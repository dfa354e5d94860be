/* SPDX-License-Identifier: MIT */
/*
 * elfsym.h - function symbols of one ELF file, for address -> name lookup.
 */
#ifndef PERFD_ELFSYM_H
#define PERFD_ELFSYM_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct elf_symtab;

/* A symbol table or its string table bigger than this is refused unread
 * (-EFBIG): the file is its owner's, and what is read is parsed and sorted
 * on the daemon's loop (~1 s per 10M symbols).  Chromium's .symtab is
 * ~50 MiB, its .strtab ~200 MiB. */
#define ELFSYM_MAX_TABLE_BYTES ((uint64_t)256 << 20)

/* Loads the function symbols (STT_FUNC and STT_GNU_IFUNC with a section) of
 * .symtab and .dynsym, merged and sorted by address, and the PT_LOAD program
 * headers and the GNU build-id.  The fd is only read (pread), not kept or
 * closed.  Returns 0 or -errno (-ENOEXEC for a file that is not ELF,
 * -EFBIG for a table past ELFSYM_MAX_TABLE_BYTES). */
int elf_symtab_load_fd(int fd, struct elf_symtab **ret);
int elf_symtab_load(const char *path, struct elf_symtab **ret);

/* Turns an offset in the file (as /proc/PID/maps gives: addr - start + pgoff)
 * into the ELF virtual address that symbols use, through the PT_LOAD segment
 * that contains it.  Returns 0 or -ENOENT. */
int elf_symtab_offset_to_vaddr(const struct elf_symtab *t, uint64_t file_offset,
			       uint64_t *ret_vaddr);

/* The symbol containing vaddr: the one with the greatest address <= vaddr
 * whose size covers vaddr (or whose size is 0 and is the last before the
 * next symbol).  Returns its name (owned by t) and the offset into it, or
 * NULL when no symbol covers vaddr. */
const char *elf_symtab_lookup(const struct elf_symtab *t, uint64_t vaddr,
			      uint64_t *ret_offset);

/* True when t holds the symbols of a .symtab: the file had one (it was not
 * stripped), or one was merged in by elf_symtab_add_*().  A table without
 * one knows only the exported functions (.dynsym); the symbolizer then
 * looks for debug information (debuginfo.h). */
bool elf_symtab_has_symtab(const struct elf_symtab *t);

/* Merges into t the function symbols (.symtab, and .dynsym when not emptied)
 * of the separate debug file read from fd (only pread; not kept or closed),
 * or of an in-memory ELF image such as decompressed MiniDebugInfo (only
 * read; the caller keeps it and may free it on return).  Such files share
 * t's addresses; t's own PT_LOAD segments stay the reference for
 * elf_symtab_offset_to_vaddr().  The merged table is what loading the
 * unstripped file would have given: aliases ranked as at load time.
 * Costs O((n + m) log(n + m)) for n symbols in t and m new ones; reads only
 * the symbol and string tables, not the DWARF.  Lookups stay one binary
 * search.  Returns the number of symbols new to t (>= 0), -ENOEXEC when the
 * source is not ELF, -ESTALE when both have a build-id and they differ
 * (the debug file of another build), -EINVAL for a malformed table or a NULL
 * t, -EFBIG for a table past ELFSYM_MAX_TABLE_BYTES or a merged table
 * past t's memory limit, -ENOMEM; on failure t is unchanged. */
int elf_symtab_add_from_fd(struct elf_symtab *t, int fd);
int elf_symtab_add_from_memory(struct elf_symtab *t, const void *image, size_t size);

size_t elf_symtab_count(const struct elf_symtab *t);
/* Build-id as lowercase hex ("" when the file has none); owned by t. */
const char *elf_symtab_build_id(const struct elf_symtab *t);
/* Approximate bytes held, for the daemon's memory accounting. */
size_t elf_symtab_memory(const struct elf_symtab *t);
/* A merge (elf_symtab_add_*) that would leave t holding more than bytes
 * (as elf_symtab_memory counts) is refused; 0, the default: no limit. */
void elf_symtab_set_memory_limit(struct elf_symtab *t, size_t bytes);

struct elf_symtab *elf_symtab_free(struct elf_symtab *t);

#endif
