/* SPDX-License-Identifier: MIT */
/*
 * unwind_table.h - builds the unwind table (include/perfd/unwind.h) of one
 * ELF file from its DWARF call-frame information.
 */
#ifndef PERFD_UNWIND_TABLE_H
#define PERFD_UNWIND_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "perfd/unwind.h"

struct unwind_table {
	uint64_t base_vaddr; /* row pc = vaddr - base_vaddr */
	struct perfd_unwind_row *rows; /* sorted by pc, no two consecutive rows alike */
	size_t n_rows;
	/* figures, for status and benchmarks */
	size_t fdes;             /* FDEs read */
	size_t rows_unsupported; /* rows of type PERFD_CFA_UNSUPPORTED */
	size_t cfi_bytes;        /* size of .eh_frame (+ .debug_frame when used) */
};

/* Reads .eh_frame (through libdw's CFI API), and .debug_frame for the code
 * .eh_frame does not cover, of the ELF file open on fd (only read with
 * pread; not kept).  Returns 0 and a new table, -ENODATA when the file has
 * no call-frame information at all, -ENOEXEC when it is not ELF, -EFBIG
 * when it spans more than 4 GiB of addresses, or another -errno. */
int unwind_table_build(int fd, struct unwind_table **ret);

/* The row that applies at vaddr: the last one whose pc is <= vaddr (past
 * the last FDE that is the closing PERFD_CFA_NO_CFI row), or NULL before
 * the first row or more than 4 GiB above the base.  The same binary search
 * the BPF program does. */
const struct perfd_unwind_row *unwind_table_find(const struct unwind_table *t,
						 uint64_t vaddr);

struct unwind_table *unwind_table_free(struct unwind_table *t);

#endif
