/* SPDX-License-Identifier: MIT */
/*
 * gunzip.h - a gzip stream inflated whole, for the suites that read back
 * what an encoder gzipped (pprof).  Header-only, as every suite is one
 * program; a stream that is not gzip, or has bytes after its end, fails
 * the test.
 */
#ifndef PERFD_TEST_GUNZIP_H
#define PERFD_TEST_GUNZIP_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

#include "perfd/macro.h"

/* Gunzips n bytes at src; returns the bytes (malloc'ed), *ret_len. */
_unused_ static uint8_t *gunzip(const uint8_t *src, size_t n, size_t *ret_len)
{
	z_stream z = { 0 };
	size_t cap = 4096, len = 0;
	uint8_t *out = malloc(cap);
	int r;

	cr_assert_not_null(out);
	cr_assert_eq(inflateInit2(&z, 15 + 16), Z_OK, "not gzip framing");
	z.next_in = (Bytef *)src;
	z.avail_in = (uInt)n;
	do {
		if (len == cap) {
			cap *= 2;
			out = realloc(out, cap);
			cr_assert_not_null(out);
		}
		z.next_out = out + len;
		z.avail_out = (uInt)(cap - len);
		r = inflate(&z, Z_NO_FLUSH);
		cr_assert(r == Z_OK || r == Z_STREAM_END, "inflate: %d", r);
		len = cap - z.avail_out;
	} while (r != Z_STREAM_END);
	cr_assert_eq(z.avail_in, 0, "bytes after the gzip stream");
	inflateEnd(&z);
	*ret_len = len;
	return out;
}

#endif
