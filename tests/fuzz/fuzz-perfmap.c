/* SPDX-License-Identifier: MIT */
/*
 * fuzz-perfmap.c - the /tmp/perf-PID.map parser (symbols/perfmap.c): a file
 * any process writes for its JIT code, read by perfd as root.  Then the
 * sealed map's lookups.
 */
#include "fuzz.h"
#include "symbols/perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct perfmap *m = NULL;
	FILE *f = fuzz_fopen(data, size);
	size_t skipped;

	if (!f)
		return 0;
	if (perfmap_parse(f, &m, &skipped) >= 0) {
		uint64_t off, probe[] = { 0, 0x1000, 0x7f0000001000, UINT64_MAX };

		for (size_t i = 0; i < sizeof(probe) / sizeof(probe[0]); i++)
			(void)perfmap_lookup(m, probe[i], &off);
		(void)perfmap_memory(m);
		perfmap_free(m);
	}
	fclose(f);
	return 0;
}
