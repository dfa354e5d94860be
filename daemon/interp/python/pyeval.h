/* SPDX-License-Identifier: MIT */
/*
 * pyeval.h - the part of CPython's interpreter loop that a compiler moved
 * out of _PyEval_EvalFrameDefault into code with no symbol of its own
 * (pyeval.c says how it is found).  No allocation and no I/O of its own:
 * the caller passes the function's bytes and .eh_frame_hdr's, and a reader
 * of the file for the few FDEs looked at.
 */
#ifndef PERFD_PYEVAL_H
#define PERFD_PYEVAL_H

#include <stddef.h>
#include <stdint.h>

/* Bounds on what the caller reads. */
#define PYEVAL_FUNC_MAX (1u << 20) /* the function's bytes */
#define PYEVAL_HDR_MAX (16u << 20) /* .eh_frame_hdr's: 2M FDEs */

/* Reads size bytes at vaddr of the file into buf: 0 or -errno. */
typedef int (*pyeval_read_fn)(void *ctx, uint64_t vaddr, void *buf, size_t size);

/* The function's size bytes func, at vaddr, and the hdr_size bytes hdr of
 * .eh_frame_hdr, at hdr_vaddr, in the same file (whose FDEs read() reads):
 * the range [*ret_start, *ret_end) (vaddrs) of the part of the function
 * out of line.  Returns 0; -ENOENT when there is none; -EINVAL for a
 * header too short for what it says; -ENOTSUP for a header in an encoding
 * other than the usual. */
int pyeval_split_part(const uint8_t *func, size_t size, uint64_t vaddr, const uint8_t *hdr,
		      size_t hdr_size, uint64_t hdr_vaddr, pyeval_read_fn read, void *ctx,
		      uint64_t *ret_start, uint64_t *ret_end);

#endif
