/* SPDX-License-Identifier: MIT */
/*
 * pylinetable.c - see pylinetable.h.  Three formats, each walked forward
 * from the start the way CPython's PyCode_Addr2Line walks it, keeping a
 * running ("computed") line and the end of the current address range, and
 * stopping at the first range that ends after addr:
 *
 *   3.8-3.9  co_lnotab: pairs (unsigned byte increment, signed line
 *            increment).  A pair's line increment applies to the addresses
 *            from the end of its byte increment on (lnotab_notes.txt).
 *   3.10     co_linetable: pairs (unsigned range length in bytes, signed
 *            line delta); a delta of -128 means the range has no line and
 *            leaves the running line alone.
 *   3.11+    the PEP 657 location table (Objects/locations.md): entries of
 *            1 to 8 code units whose first byte has bit 7 set; only the line
 *            delta is decoded, the columns are skipped.
 *
 * CPython trusts its tables; this code reads bytes copied out of another
 * process, so every read is bounds-checked and a table that ends inside an
 * entry, a varint too long for the unsigned int CPython writes, or a running
 * line that overflows CPython's int is -EINVAL, never an out-of-bounds read
 * or undefined arithmetic.  No state is kept between calls: a lookup costs
 * one walk of the table up to addr, a few hundred bytes for most functions.
 */
#include "interp/python/pylinetable.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>

/* The bytes of a two-byte-pair table are unsigned; the second of each pair
 * is a two's-complement int8. */
static int signed_byte(uint8_t b)
{
	return b < 128 ? b : (int)b - 256;
}

/* CPython keeps the running line in an int. */
static bool line_in_range(int64_t line)
{
	return line >= INT_MIN && line <= INT_MAX;
}

/* A found line, or -EINVAL when the table made it negative: it would read
 * as "no line" or as an error. */
static int found(int64_t line)
{
	return line >= 0 ? (int)line : -EINVAL;
}

/* 3.8, 3.9: PyCode_Addr2Line adds the line increment of every pair whose
 * cumulated byte increment is <= addr.  Past the end: the last line. */
static int lnotab_line(const uint8_t *t, size_t size, int firstlineno, uint64_t addr)
{
	int64_t line = firstlineno;
	uint64_t end = 0;

	if (size % 2)
		return -EINVAL;
	for (size_t i = 0; i < size; i += 2) {
		end += t[i];
		if (end > addr)
			break;
		line += signed_byte(t[i + 1]);
		if (!line_in_range(line))
			return -EINVAL;
	}
	return found(line);
}

/* 3.10: each pair is the range [end, end + length); zero-length ranges
 * only move the running line (deltas beyond +-127 are split that way).
 * Past the end: -1. */
static int linetable310_line(const uint8_t *t, size_t size, int firstlineno, uint64_t addr)
{
	int64_t line = firstlineno;
	uint64_t end = 0;

	if (size % 2)
		return -EINVAL;
	for (size_t i = 0; i < size; i += 2) {
		int delta = signed_byte(t[i + 1]);

		end += t[i];
		if (delta != -128) {
			line += delta;
			if (!line_in_range(line))
				return -EINVAL;
		}
		if (addr < end)
			return delta == -128 ? -1 : found(line);
	}
	return -1;
}

/* 3.11+ entry codes, (first byte >> 3) & 15. */
enum {
	LOC_SHORT_LAST = 9,  /* 0-9: same line, one byte of columns */
	LOC_ONE_LINE0 = 10,  /* 10-12: line delta 0-2, column, end column */
	LOC_ONE_LINE2 = 12,
	LOC_NO_COLUMNS = 13, /* signed varint line delta */
	LOC_LONG = 14,       /* signed varint line delta, then 3 varints */
	LOC_NONE = 15,       /* no location */
};

/* Every byte of an entry but its first has bit 7 clear; CPython finds the
 * next entry by that alone.  A byte with it set where the entry still
 * needs one means the entry was cut short. */
static bool is_entry_start(uint8_t b)
{
	return b & 0x80;
}

/* Skips n bytes of column data at *pos. */
static int skip_bytes(const uint8_t *t, size_t size, size_t *pos, size_t n)
{
	if (size - *pos < n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (is_entry_start(t[*pos + i]))
			return -EINVAL;
	*pos += n;
	return 0;
}

/* A varint at *pos: 6-bit chunks, least significant first, bit 6 set on
 * every chunk but the last.  CPython writes unsigned ints, so at most six
 * chunks and 32 bits. */
static int read_varint(const uint8_t *t, size_t size, size_t *pos, uint32_t *ret)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*pos >= size || shift > 30)
			return -EINVAL;
		b = t[*pos];
		if (is_entry_start(b))
			return -EINVAL;
		v |= (uint64_t)(b & 63) << shift;
		shift += 6;
		(*pos)++;
	} while (b & 64);
	if (v > UINT32_MAX)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}

/* Signed varints keep the sign in bit 0 and the magnitude above it. */
static int read_signed_varint(const uint8_t *t, size_t size, size_t *pos, int64_t *ret)
{
	uint32_t v;
	int r = read_varint(t, size, pos, &v);

	if (r < 0)
		return r;
	*ret = v & 1 ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
	return 0;
}

/* Decodes the entry at *pos and moves *pos past it: its line delta, whether
 * it has no line, and its length in bytes of bytecode. */
static int location_entry(const uint8_t *t, size_t size, size_t *pos, int64_t *ret_delta,
			  bool *ret_none, unsigned *ret_bytes)
{
	uint8_t first = t[*pos];
	unsigned code = (first >> 3) & 15;
	int64_t delta = 0;
	uint32_t ignored;
	int r = 0;

	if (!is_entry_start(first))
		return -EINVAL;
	(*pos)++;
	if (code <= LOC_SHORT_LAST) {
		r = skip_bytes(t, size, pos, 1);
	} else if (code <= LOC_ONE_LINE2) {
		delta = code - LOC_ONE_LINE0;
		r = skip_bytes(t, size, pos, 2);
	} else if (code == LOC_NO_COLUMNS) {
		r = read_signed_varint(t, size, pos, &delta);
	} else if (code == LOC_LONG) {
		r = read_signed_varint(t, size, pos, &delta);
		/* end line delta, column + 1, end column + 1 */
		for (int i = 0; i < 3 && r == 0; i++)
			r = read_varint(t, size, pos, &ignored);
	}
	if (r < 0)
		return r;
	*ret_delta = delta;
	*ret_none = code == LOC_NONE;
	*ret_bytes = ((first & 7) + 1) * 2; /* code units are 2 bytes */
	return 0;
}

/* 3.11-3.14: the line delta applies before the entry's own line is taken;
 * a no-location entry has delta 0.  Past the end: -1. */
static int locations_line(const uint8_t *t, size_t size, int firstlineno, uint64_t addr)
{
	int64_t line = firstlineno;
	uint64_t end = 0;
	size_t pos = 0;

	while (pos < size) {
		int64_t delta;
		unsigned bytes;
		bool none;
		int r = location_entry(t, size, &pos, &delta, &none, &bytes);

		if (r < 0)
			return r;
		line += delta;
		if (!line_in_range(line))
			return -EINVAL;
		end += bytes;
		if (addr < end)
			return none ? -1 : found(line);
	}
	return -1;
}

int pylinetable_line(unsigned minor, const uint8_t *table, size_t size, int firstlineno,
		     int64_t addr)
{
	if (minor < 8 || minor > 14)
		return -EPROTONOSUPPORT;
	if (addr < 0 || (!table && size > 0))
		return -EINVAL;
	if (minor <= 9)
		return lnotab_line(table, size, firstlineno, (uint64_t)addr);
	if (minor == 10)
		return linetable310_line(table, size, firstlineno, (uint64_t)addr);
	return locations_line(table, size, firstlineno, (uint64_t)addr);
}
