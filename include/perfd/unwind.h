/* SPDX-License-Identifier: MIT */
/*
 * unwind.h - the unwind tables shared by the daemon (which builds them from
 * .eh_frame/.debug_frame) and bpf/perfd.bpf.c (which walks user stacks with
 * them, without copying the stack).
 *
 * A table is a sorted array of rows for one binary.  A row holds from its pc
 * up to the next row's pc, and says how to find the caller's frame:
 *   CFA  = (rsp or rbp) + cfa_offset          (PERFD_CFA_RSP / _RBP)
 *   return address = *(CFA - 8)               (always so on x86_64)
 *   rbp  = *(CFA + 8 * rbp_offset8)  when rbp_offset8 != 0 and != PERFD_RBP_LOST,
 *          unchanged when 0, unknown when PERFD_RBP_LOST.
 * pc is relative to the table's base address (the binary's lowest
 * executable vaddr), so that 32 bits suffice for any binary below 4 GiB.
 * Rows are 8 bytes so a large library (libpython: ~100k rows) costs < 1 MiB.
 *
 * Programs attached to other architectures do not use these tables yet.
 */
#ifndef PERFD_UNWIND_H
#define PERFD_UNWIND_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum perfd_cfa_type {
	PERFD_CFA_END = 0,      /* no caller: the outermost frame (RA undefined) */
	PERFD_CFA_RSP = 1,      /* CFA = rsp + cfa_offset */
	PERFD_CFA_RBP = 2,      /* CFA = rbp + cfa_offset */
	PERFD_CFA_PLT = 3,      /* PLT stub: CFA = rsp + 8 + (((rip & 15) >= cfa_offset) ? 8 : 0) */
	PERFD_CFA_SIGNAL = 4,   /* signal trampoline: registers saved in the ucontext at rsp */
	PERFD_CFA_UNSUPPORTED = 5, /* a rule BPF cannot evaluate: the stack ends here, truncated */
	PERFD_CFA_NO_CFI = 6,   /* no FDE covers this code (hand-written, generated):
				 * walk this frame with its frame pointer */
};

#define PERFD_RBP_LOST (-128)

struct perfd_unwind_row {
	__u32 pc;
	__s16 cfa_offset;
	__u8 cfa_type;   /* enum perfd_cfa_type */
	__s8 rbp_offset8;
};

/*
 * Where a process's executable mappings are: a contiguous range of the
 * `unwind_mappings` array, sorted by start, found through `unwind_processes`
 * (tgid -> struct perfd_unwind_process).  A process without an entry is
 * unwound with frame pointers only.
 */
struct perfd_unwind_mapping {
	__u64 start, end;  /* [start, end) in the process */
	__u64 pc_adjust;   /* row pc = address - pc_adjust (load bias + table base) */
	__u32 rows_first;  /* index into `unwind_rows` */
	__u32 rows_count;  /* 0: no table, walk frame pointers here (JIT, no CFI) */
	/* [fp_first, fp_end), in row pcs: code whose table says that every
	 * return address in it is in a standard frame (CFA = rbp + 16, the
	 * caller's rbp at CFA - 16), so its callers are walked by frame
	 * pointer without a row search (unwind_table_fp_range()); empty:
	 * none. */
	__u32 fp_first, fp_end;
};

/* rows_first of a mapping without rows whose table is being built: walked
 * with frame pointers meanwhile, and a stack that did not complete through
 * it is flagged PERFD_SAMPLE_F_UNWIND_PENDING rather than passed off as
 * whole. */
#define PERFD_UNWIND_ROWS_PENDING 0xffffffffu

struct perfd_unwind_process {
	__u32 mappings_first;
	__u32 mappings_count;
};

/* Binary searches run at most this many steps: 2^23 rows, 2^16 mappings. */
#define PERFD_UNWIND_ROW_SEARCH_STEPS 23
#define PERFD_UNWIND_MAPPING_SEARCH_STEPS 16

#endif
