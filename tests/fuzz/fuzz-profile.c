/* SPDX-License-Identifier: MIT */
/*
 * fuzz-profile.c - perfctl's profile reader (cli/profile_read.c), which
 * `report`, `diff` and `diagnose` run on files of any origin: folded
 * stacks, perfd's JSON call tree and gzipped pprof.  The first byte picks
 * the kind asked for (none, cpu, memory, offcpu: bits 0-1) and whether the
 * rest is gzipped here first (bit 2), so that the fuzzer mutates a pprof's
 * protobuf itself rather than its compressed form; the rest is the file.
 */
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "profile_read.h"

/* data as a gzip member, stored (level 0: the reader's parser is what is
 * fuzzed, not zlib); NULL when out of memory. */
static uint8_t *gzip(const uint8_t *data, size_t size, size_t *ret_size)
{
	z_stream z = { 0 };
	uLong cap;
	uint8_t *out;

	if (deflateInit2(&z, 0, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	cap = deflateBound(&z, (uLong)size);
	out = malloc(cap);
	if (!out) {
		(void)deflateEnd(&z);
		return NULL;
	}
	z.next_in = (Bytef *)(uintptr_t)data;
	z.avail_in = (uInt)size;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		(void)deflateEnd(&z);
		free(out);
		return NULL;
	}
	*ret_size = z.total_out;
	(void)deflateEnd(&z);
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const kinds[] = { NULL, "cpu", "memory", "offcpu" };
	const char *kind;
	struct profile *p = NULL;
	char err[PROFILE_ERROR_MAX];
	uint8_t *file;
	size_t n;

	if (size < 1 || size > (1u << 20))
		return 0;
	kind = kinds[data[0] & 3];
	if (data[0] & 4) {
		file = gzip(data + 1, size - 1, &n);
	} else {
		/* a copy of exactly the file's bytes, so ASan sees a read past them */
		n = size - 1;
		file = malloc(n ? n : 1);
		if (file)
			memcpy(file, data + 1, n);
	}
	if (!file)
		return 0;
	if (profile_read((const char *)file, n, kind, &p, err) == 0)
		profile_free(p);
	free(file);
	return 0;
}
