/* SPDX-License-Identifier: MIT */
/*
 * varint.h - unsigned LEB128: seven bits a byte, low bits first, the high
 * bit set on every byte but the last (as protobuf and DWARF write them).
 *
 * For the daemon's own packed data (the sealed history log): what it
 * reads it wrote itself, so the reader trusts its input and checks nothing.
 * Never use it on bytes a process or a client supplied.
 */
#ifndef PERFD_VARINT_H
#define PERFD_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define VARINT_MAX_BYTES 10 /* of a uint64_t */

/* Writes v at p; returns the byte after it. */
static inline uint8_t *varint_put(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Reads a value at p into *v; returns the byte after it. */
static inline const uint8_t *varint_get(const uint8_t *p, uint64_t *v)
{
	uint64_t x = 0;
	unsigned shift = 0;

	while (*p & 0x80) {
		x |= (uint64_t)(*p++ & 0x7f) << shift;
		shift += 7;
	}
	*v = x | (uint64_t)*p++ << shift;
	return p;
}

static inline size_t varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

#endif
