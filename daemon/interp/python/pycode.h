/* SPDX-License-Identifier: MIT */
/*
 * pycode.h - reading a CPython code object out of a live process: its
 * name, file, first line and line table.
 */
#ifndef PERFD_PYCODE_H
#define PERFD_PYCODE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "interp/python/pyruntime.h"

#define PYCODE_NAME_MAX 256
#define PYCODE_FILE_MAX 1024
#define PYCODE_LINETABLE_MAX (256 * 1024)

struct pycode {
	char name[PYCODE_NAME_MAX];     /* co_qualname from 3.11, co_name before; UTF-8 */
	char filename[PYCODE_FILE_MAX]; /* co_filename, UTF-8 */
	int32_t firstlineno;
	uint64_t filename_addr; /* where the co_filename object is */
	uint8_t *linetable; /* co_lnotab / co_linetable bytes, malloc'd; NULL when empty */
	size_t linetable_size;
};

/* Reads the code object at addr of process pid, whose runtime is rt.  When
 * rt->code_type_addr is known, the object's type must be PyCode_Type.
 * Returns 0 (the caller frees ret->linetable), -ESRCH when the process is
 * gone, -EFAULT when memory could not be read, -EBADMSG when the object is
 * not a code object or its strings are not what they should be.  On
 * failure ret's contents are undefined (and ret->linetable not allocated). */
int pycode_read(pid_t pid, const struct pyruntime *rt, uint64_t addr, struct pycode *ret);

/* Reads size bytes at addr of process pid.  Returns 0, -ESRCH or -EFAULT. */
int pymem_read(pid_t pid, uint64_t addr, void *buf, size_t size);

/* Converts the characters of a compact str object of the given kind (1, 2
 * or 4 bytes per character) to UTF-8 in out (NUL-terminated, cut at a
 * character boundary when too long).  Returns the bytes written. */
size_t pycode_utf8(const void *chars, size_t length, unsigned kind, char *out, size_t size);

#endif
