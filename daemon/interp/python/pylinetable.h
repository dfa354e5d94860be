/* SPDX-License-Identifier: MIT */
/*
 * pylinetable.h - the source line of a CPython bytecode offset, from the raw
 * bytes of its code object's line table, for CPython 3.8 to 3.14.  Pure: no
 * I/O, no allocation; the caller reads the table out of the process.
 */
#ifndef PERFD_PYLINETABLE_H
#define PERFD_PYLINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* Returns the line of the instruction at byte offset addr (in co_code / the
 * bytecode, in bytes, as CPython's PyCode_Addr2Line takes it) for CPython
 * 3.minor, from the code object's line table (co_lnotab for 3.8-3.9,
 * co_linetable from 3.10) of size bytes and its co_firstlineno.
 * Returns the line (>= 0), -1 when the instruction has no line (3.10+ can
 * say so), -EINVAL for a negative addr or a table that is malformed
 * (truncated varint, ...), -EPROTONOSUPPORT for another minor.
 *
 * As CPython: past the end of the table, 3.8-3.9 give the last line and
 * 3.10+ give -1.  Only the entries up to addr's are read, so a table cut
 * short after them still answers.  A table of odd size in the two-byte
 * formats (3.8-3.10), a line leaving the range of an int, and a resulting
 * line below 0 are malformed.  O(entries before addr). */
int pylinetable_line(unsigned minor, const uint8_t *table, size_t size,
		     int firstlineno, int64_t addr);

#endif
