/* SPDX-License-Identifier: MIT */
/*
 * fuzz-procmaps.c - the /proc/PID/maps parser (process/procmaps.c), as
 * perfd reads a process's maps: a stream, every mapping and executable
 * ones only; then lookups at the edges of what was parsed.
 */
#include "fuzz.h"
#include "process/procmaps.h"

static void parse(const uint8_t *data, size_t size, bool exec_only)
{
	struct procmaps *m = NULL;
	FILE *f = fuzz_fopen(data, size);

	if (!f)
		return;
	if (procmaps_parse(f, exec_only, &m) >= 0) {
		uint64_t probe[] = { 0, 1, 0x400000, 0x7fffffffffff, UINT64_MAX };

		for (size_t i = 0; i < sizeof(probe) / sizeof(probe[0]); i++)
			(void)procmaps_find(m, probe[i]);
		procmaps_free(m);
	}
	fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	parse(data, size, false);
	parse(data, size, true);
	return 0;
}
