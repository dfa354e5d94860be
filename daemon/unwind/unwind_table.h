/* SPDX-License-Identifier: MIT */
/*
 * unwind_table.h - builds the unwind table (include/perfd/unwind.h) of one
 * ELF file from its DWARF call-frame information.
 */
#ifndef PERFD_UNWIND_TABLE_H
#define PERFD_UNWIND_TABLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "perfd/unwind.h"

struct unwind_table {
	uint64_t base_vaddr; /* row pc = vaddr - base_vaddr */
	struct perfd_unwind_row *rows; /* sorted by pc, no two consecutive rows alike */
	size_t n_rows;
	uint32_t fp_first, fp_end; /* unwind_table_fp_range() of the rows */
	/* figures, for status and benchmarks */
	size_t fdes;             /* FDEs read */
	size_t rows_unsupported; /* rows of type PERFD_CFA_UNSUPPORTED */
	size_t cfi_bytes;        /* size of .eh_frame (+ .debug_frame when used) */
};

/* What a build may cost: a file's owner can craft its CFI (0: no limit). */
struct unwind_table_limits {
	uint64_t max_cfi_bytes; /* .eh_frame + .debug_frame, decompressed */
	uint64_t cpu_ns;        /* CPU time of the building thread (thread_cpu_ns),
				 * checked every few rows */
	const atomic_bool *cancel; /* NULL, or set when the build must stop */
};

/* Reads .eh_frame (through libdw's CFI API), and .debug_frame for the code
 * .eh_frame does not cover, of the ELF file open on fd (only read with
 * pread; not kept), within limits (NULL: none).  Returns 0 and a new
 * table, -ENODATA when the file has no call-frame information at all,
 * -ENOEXEC when it is not ELF, -EFBIG when it spans more than 4 GiB of
 * addresses, -E2BIG when its CFI is past max_cfi_bytes (refused unread),
 * -EBADMSG when its CFI names a register number x86_64 does not have
 * (libdw would allocate for every number up to it),
 * -ETIMEDOUT when it used cpu_ns first (what was built is dropped),
 * -ECANCELED when *cancel was set, or another -errno. */
int unwind_table_build(int fd, const struct unwind_table_limits *limits,
		       struct unwind_table **ret);

/* What unwind_table_build(fd) has to read, which its time goes with: the
 * bytes of .eh_frame and .debug_frame (decompressed), all of the file
 * without section headers (its .eh_frame is then found and sized by
 * walking it), 0 when it is no ELF file or has neither section.  Reads
 * the section headers with pread. */
uint64_t unwind_table_cfi_bytes(int fd);

/* The row that applies at vaddr: the last one whose pc is <= vaddr (past
 * the last FDE that is the closing PERFD_CFA_NO_CFI row), or NULL before
 * the first row or more than 4 GiB above the base.  The same binary search
 * the BPF program does. */
const struct perfd_unwind_row *unwind_table_find(const struct unwind_table *t,
						 uint64_t vaddr);

/* The longest run of rows (sorted, as in a table) in which frame pointers
 * name every caller, as [*first, *end) in row pcs (both 0 when there is
 * none): rows of a standard frame (CFA = rbp + 16, rbp saved at CFA - 16)
 * and the few bytes around them where no call can be: CFA = rsp + 8 for
 * at most 5 bytes (a function's `endbr64; push %rbp`, its `ret`), CFA =
 * rsp + 16 with rbp saved at CFA - 16 for at most 4 bytes before a
 * standard frame (`mov %rsp,%rbp`), and code without CFI for less than 16
 * bytes (the padding between functions).  Any other rule may be a call
 * site whose frame keeps no frame pointer: a function that saves other
 * registers or moves rsp, one that uses rbp as a general register, or one
 * that calls with the stack misaligned, which GCC does at -O2 when it
 * knows the callee does not care (the whole body then CFA = rsp + 8). */
void unwind_table_fp_range(const struct perfd_unwind_row *rows, size_t n, uint32_t *first,
			   uint32_t *end);

struct unwind_table *unwind_table_free(struct unwind_table *t);

#endif
