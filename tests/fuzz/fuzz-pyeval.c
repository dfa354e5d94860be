/* SPDX-License-Identifier: MIT */
/*
 * fuzz-pyeval.c - the finder of the interpreter loop's part out of line
 * (interp/python/pyeval.c), which reads a function's bytes, .eh_frame_hdr
 * and FDEs out of any file a Python process maps.  The input is a 2-byte
 * little-endian length and that many bytes of the function (at 0x3000),
 * then another length and the header's bytes (at 0x100000), then the
 * bytes from 0x100200 on, where the FDEs are read; each is a buffer of
 * exactly its size (for ASan).  The seeds are tests/fuzz/gen-pyeval.py's.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "interp/python/pyeval.h"

struct image {
	const uint8_t *bytes;
	size_t size;
};

static int read_image(void *ctx, uint64_t vaddr, void *buf, size_t size)
{
	const struct image *im = ctx;

	if (vaddr < 0x100200 || vaddr - 0x100200 > im->size || size > im->size - (vaddr - 0x100200))
		return -EFAULT;
	memcpy(buf, im->bytes + (vaddr - 0x100200), size);
	return 0;
}

/* The next length-prefixed part of data as a buffer of its own. */
static uint8_t *take(const uint8_t **data, size_t *size, size_t *ret_n)
{
	size_t n;
	uint8_t *copy;

	if (*size < 2)
		return NULL;
	n = (size_t)((*data)[0] | (*data)[1] << 8);
	*data += 2;
	*size -= 2;
	if (n > *size)
		n = *size;
	copy = malloc(n ? n : 1);
	if (copy)
		memcpy(copy, *data, n);
	*data += n;
	*size -= n;
	*ret_n = n;
	return copy;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *func, *hdr = NULL, *rest = NULL;
	size_t func_n = 0, hdr_n = 0;
	uint64_t start, end;

	func = take(&data, &size, &func_n);
	if (func)
		hdr = take(&data, &size, &hdr_n);
	if (hdr)
		rest = malloc(size ? size : 1);
	if (rest) {
		struct image im = { .bytes = rest, .size = size };

		memcpy(rest, data, size);
		(void)pyeval_split_part(func, func_n, 0x3000, hdr, hdr_n, 0x100000, read_image, &im,
					&start, &end);
	}
	free(func);
	free(hdr);
	free(rest);
	return 0;
}
