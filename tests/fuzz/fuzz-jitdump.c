/* SPDX-License-Identifier: MIT */
/*
 * fuzz-jitdump.c - the jitdump reader (symbols/jitdump.c): a binary file a
 * JIT (V8, the JVM's agents, CPython's perf trampoline) writes and perfd
 * reads as root, possibly while it is being written.  Then the lookups of
 * the map it made.
 */
#include "fuzz.h"
#include "symbols/jitdump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct perfmap *m = NULL;
	FILE *f;
	size_t skipped;

	(void)jitdump_is(data, size);
	f = fuzz_fopen(data, size);
	if (!f)
		return 0;
	if (jitdump_parse(f, &m, &skipped) >= 0) {
		uint64_t off, probe[] = { 0, 0x1000, 0x7f0000001000, UINT64_MAX };

		for (size_t i = 0; i < sizeof(probe) / sizeof(probe[0]); i++)
			(void)perfmap_lookup(m, probe[i], &off);
		perfmap_free(m);
	}
	fclose(f);
	return 0;
}
