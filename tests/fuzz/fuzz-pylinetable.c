/* SPDX-License-Identifier: MIT */
/*
 * fuzz-pylinetable.c - CPython line tables (interp/python/pylinetable.c),
 * which perfd reads out of a Python process's memory.  The input is
 * the 9-byte header of the seeds' format (tests/fuzz/gen-pylinetable.py):
 * the minor version (3.8 + byte % 7), co_firstlineno and a bytecode
 * offset (both int32, little-endian), then the table's bytes.  The table
 * is asked about that offset and about one past its end.
 */
#include <string.h>

#include "fuzz.h"
#include "interp/python/pylinetable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int32_t firstlineno, addr;
	unsigned minor;
	uint8_t *table;
	size_t n;

	if (size < 9)
		return 0;
	minor = 8 + data[0] % 7;
	memcpy(&firstlineno, data + 1, 4);
	memcpy(&addr, data + 5, 4);
	n = size - 9;
	/* a copy of exactly n bytes, so ASan sees a read past the table */
	table = malloc(n ? n : 1);
	if (!table)
		return 0;
	memcpy(table, data + 9, n);
	(void)pylinetable_line(minor, table, n, firstlineno, addr);
	(void)pylinetable_line(minor, table, n, firstlineno, (int64_t)n * 2 + 2);
	free(table);
	return 0;
}
