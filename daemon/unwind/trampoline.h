/* SPDX-License-Identifier: MIT */
/*
 * trampoline.h - unwind rows for code that a program generates by copying
 * one small template many times at a fixed stride: CPython 3.12+'s perf
 * trampolines (`-X perf`, `-X perf_jit`), whose template lies between
 * libpython's symbols _Py_trampoline_func_start and _end and whose copies
 * fill 64 KiB anonymous arenas.  No .eh_frame describes the copies, and the
 * template keeps no frame pointer (3.12 and 3.13: `sub $8,%rsp; call *%rcx;
 * add $8,%rsp; ret`), so neither of the unwinder's other two ways walks
 * through them.
 *
 * The template's own instructions say how to unwind it: it is decoded here
 * (x86_64 only, a handful of instruction shapes, anything else refused) into
 * the rows of one copy, and those rows are repeated for every copy of a
 * region.  A region's table depends only on (rows, template size, stride,
 * region size), so every arena of every process of that libpython shares
 * one table.
 */
#ifndef PERFD_TRAMPOLINE_H
#define PERFD_TRAMPOLINE_H

#include <stddef.h>
#include <stdint.h>

#include "perfd/unwind.h"

/* Longest template decoded, and most rows it can give (one per
 * instruction that moves the stack or rbp). */
#define TRAMPOLINE_CODE_MAX 64
#define TRAMPOLINE_ROWS_MAX 16
/* Largest region described by one table: 2^20 bytes keep the row count
 * below 2^20 for any stride >= 2 (rows are 8 bytes: at most a few MiB). */
#define TRAMPOLINE_REGION_MAX (1u << 20)

struct trampoline_shape {
	uint32_t size;   /* bytes of the template */
	uint32_t n_rows;
	/* rows[0].pc == 0; pcs relative to the copy's first byte; no two
	 * consecutive rows alike */
	struct perfd_unwind_row rows[TRAMPOLINE_ROWS_MAX];
};

/* Decodes the x86_64 template code[0..size) into the unwind rows of one
 * copy.  Accepted: straight-line code of endbr64, push %rbp, mov %rsp,%rbp,
 * mov %rbp,%rsp, pop %rbp, leave, sub/add $imm,%rsp (multiples of 8), and
 * exactly one indirect call through a register (*%rax ... *%r15), ending
 * with its only ret, where the stack is as at entry and rbp restored.
 * Returns 0 and fills *ret; -EBADMSG for any other code (an unknown
 * instruction, a jump, a stack that does not balance), -E2BIG when size is
 * above TRAMPOLINE_CODE_MAX, -EINVAL for an empty template. */
int trampoline_decode(const uint8_t *code, size_t size, struct trampoline_shape *ret);

/* The table of a region of region_size bytes whose copies of the template
 * start at 0, stride, 2 * stride, ... for as many as fit whole: rows sorted
 * by pc (relative to the region's start), consecutive equal rules merged.
 * As many copies as CPython makes: region_size / stride.  The bytes after
 * each copy (stride > size, and the region's tail) are never executed and
 * share the rule of the copy's last instruction.  Returns 0 and a malloc'd
 * array,
 * -EINVAL when stride < shape->size or region_size is 0 or above
 * TRAMPOLINE_REGION_MAX, -ENOMEM. */
int trampoline_table(const struct trampoline_shape *shape, uint32_t stride, uint32_t region_size,
		     struct perfd_unwind_row **ret_rows, size_t *ret_n);

#endif
