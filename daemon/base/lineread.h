/* SPDX-License-Identifier: MIT */
/*
 * lineread.h - reading a text file a line at a time into a buffer of fixed
 * size, for the parsers of files another process controls (its maps, its JIT
 * map).  Unlike getline(), a line without an end cannot make us allocate
 * without bound: a line longer than the buffer is reported and skipped.
 */
#ifndef PERFD_LINEREAD_H
#define PERFD_LINEREAD_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Reads the next line of f into buf (size > 1 bytes): its bytes and its
 * '\n' when it has one (the last line of a file may not), NUL-terminated,
 * and adds the bytes it consumed to *bytes (may be NULL).  Returns the
 * number of bytes stored (which may include NULs from the file: compare
 * with strlen to notice them), 0 at end of file, -E2BIG when the line did
 * not fit in size - 1 bytes (it was read up to and including its '\n', so
 * the next call starts on the next line; buf then holds its first bytes),
 * or the -errno of a read that failed. */
ssize_t line_read(FILE *f, char *buf, size_t size, uint64_t *bytes);

#endif
