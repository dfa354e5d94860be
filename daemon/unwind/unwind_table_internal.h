/* SPDX-License-Identifier: MIT */
/*
 * unwind_table_internal.h - what unwind_table.c (the rows, by libdw) and
 * cfi_read.c (the CFI's raw bytes, read and checked before libdw runs a
 * program of them) share: the builder and the sections it reads.
 * Nothing outside unwind/ includes this.
 */
#ifndef PERFD_UNWIND_TABLE_INTERNAL_H
#define PERFD_UNWIND_TABLE_INTERNAL_H

#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/clock.h"
#include "unwind/unwind_table.h"

/* [start, end) of code described by one FDE (or the part of it we walk). */
struct code_range {
	uint64_t start, end;
};

/* A row before sorting, at its full address.  gap_end marks the NO_CFI row
 * put where a walked range stops; a real row at the same address wins over it. */
struct pending_row {
	uint64_t vaddr;
	bool gap_end;
	uint8_t type;
	int16_t cfa_offset;
	int8_t rbp_offset8;
};

/* Raw bytes of one CFI section as loaded: vaddr is the address of the first
 * byte (for pcrel pointers; 0 for .debug_frame, which has none), and the
 * walk stops after max_fdes FDEs when the section's end is not known. */
struct cfi_section {
	Elf_Data *data;
	uint64_t vaddr;
	bool eh_frame;
	size_t max_fdes;
};

struct builder {
	Elf *elf;
	const unsigned char *ident;
	struct code_range *exec; /* executable PT_LOADs, as [vaddr, vaddr + memsz) */
	size_t n_exec;
	uint64_t base;
	struct pending_row *rows;
	size_t n_rows, cap_rows;
	size_t fdes;
	size_t cfi_bytes;
	uint64_t cpu_limit_ns; /* thread_cpu_ns() past which it stops; 0: none */
	const atomic_bool *cancel;
	unsigned tick;         /* steps since the clock was last read */
};

/* The clock (and the cancel flag) is read every CLOCK_EVERY steps (a row,
 * an FDE): a step of crafted CFI replays at most the FDE's program,
 * bounded by the byte cap. */
#define CLOCK_EVERY 64

/* --- limits ------------------------------------------------------------- */

/* -ETIMEDOUT once the build has used its CPU time, -ECANCELED once it was
 * cancelled, checked every CLOCK_EVERY calls. */
static inline int over_time(struct builder *b)
{
	if (++b->tick < CLOCK_EVERY)
		return 0;
	b->tick = 0;
	if (b->cancel && atomic_load_explicit(b->cancel, memory_order_relaxed))
		return -ECANCELED;
	return b->cpu_limit_ns && thread_cpu_ns() > b->cpu_limit_ns ? -ETIMEDOUT : 0;
}


/* --- cfi_read.c ---------------------------------------------------------- */

/* Sorts ranges and makes them disjoint: where two overlap, the later start
 * wins (as in libdw's lookup by the last initial location not above the
 * address), and of two at one address the longer one is kept.  Returns the
 * new count. */
size_t cfi_ranges_normalize(struct code_range *r, size_t n);

/* Appends to *ranges (of *n, room for *cap) the code ranges of the FDEs of
 * section s that start in an executable segment, clipped to it.  Entries
 * libdw cannot parse, and FDEs whose CIE we cannot lay out, are skipped.
 * Returns the number of bytes walked, -ENOMEM or -ETIMEDOUT. */
int64_t cfi_read_fde_ranges(struct builder *b, const struct cfi_section *s,
			    struct code_range **ranges, size_t *n, size_t *cap);

/* Locates .eh_frame through PT_GNU_EH_FRAME, for files without section
 * headers: the index gives its address and its FDE count, which bounds the
 * walk; its data runs at most to the end of the segment holding it. */
int cfi_eh_frame_from_phdr(Elf *elf, struct cfi_section *ret);

/* Checks every FDE of s that libdw may run, as cfi_read.c's "register
 * numbers" says: all
 * those of the section's chain of entries (past s->max_fdes: libdw's walk
 * does not stop there), and those of the .eh_frame_hdr tables it may
 * search.  Returns 0, -EBADMSG, -ETIMEDOUT or -ECANCELED. */
int cfi_check_registers(struct builder *b, const struct cfi_section *s);

#endif
