/* SPDX-License-Identifier: MIT */
/*
 * fuzz-srcline.c - the DWARF line and inline reader (symbols/srcline.c) on
 * a file a process maps, or its debug file: the ELF read from a file
 * descriptor, its units indexed by address (.debug_aranges or the units'
 * own ranges), then each unit's line program decoded by libdw behind
 * srcline's length check, and its DIEs walked.  Both of perfd's ways:
 * a lane indexing every unit at once (symload.c's SYMLOAD_LINES), and the
 * loop marking the units it is asked about as wanted and a lane indexing
 * just those (SYMLOAD_UNITS), there with a line program cap small enough
 * that small inputs reach the refusal too, and with a memory limit that
 * refuses some of them for the rows they could decode.  Lookups probe
 * around the ELF header's entry point, which in a real binary is inside
 * .text and which the fuzzer can move, and at a few fixed addresses.  Within a budget of
 * one CPU second per unit, as the unwind harness has for its builds.
 */
#include <string.h>

#include "base/clock.h"
#include "fuzz.h"
#include "symbols/srcline.h"

/* e_entry of an ELF64 header */
#define ENTRY_OFFSET 24

static uint64_t entry_point(const uint8_t *data, size_t size)
{
	uint64_t entry = 0;

	if (size >= ENTRY_OFFSET + sizeof(entry))
		memcpy(&entry, data + ENTRY_OFFSET, sizeof(entry));
	return entry;
}

/* Looks up addresses around entry and a few fixed ones, with the indexed
 * (the loop's) lookup or the one that indexes on demand. */
static void probe(struct srcline *s, uint64_t entry, bool indexed)
{
	static const uint64_t fixed[] = { 0, 1, 0x1000, 0x1139, 0x401000, 0x401126,
					  UINT64_MAX - 1, UINT64_MAX };
	struct srcline_frame chain[8];

	for (int k = -16; k < 128; k++) {
		uint64_t a = entry + (uint64_t)(int64_t)k * 8;

		if (indexed)
			(void)srcline_lookup_indexed(s, a, chain, sizeof(chain) / sizeof(chain[0]));
		else
			(void)srcline_lookup(s, a, chain, 1 + (size_t)(k & 7));
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		(void)srcline_want(s, fixed[i]);
		(void)srcline_lookup_indexed(s, fixed[i], chain, sizeof(chain) / sizeof(chain[0]));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = fuzz_memfd(data, size);
	uint64_t entry = entry_point(data, size);
	struct srcline_stats st;
	struct srcline *s = NULL;

	/* a lane's load of a whole file: every unit, then the loop's lookups */
	if (srcline_open(fd, &s) < 0)
		return 0;
	srcline_set_unit_limits(s, NSEC_PER_SEC, SRCLINE_UNIT_MAX_LINE_BYTES);
	(void)srcline_index_all(s);
	probe(s, entry, true);
	srcline_get_stats(s, &st);
	s = srcline_free(s);

	/* the loop asks, a lane indexes what it asked for, the loop answers;
	 * line programs past 64 bytes are refused, and so are those whose
	 * rows could take the file past room for 32 more */
	if (srcline_open(fd, &s) < 0)
		return 0;
	srcline_set_unit_limits(s, NSEC_PER_SEC, 64);
	srcline_get_stats(s, &st);
	srcline_set_memory_limit(s, st.memory_bytes + 32 * SRCLINE_ROW_BYTES);
	probe(s, entry, true);
	if (srcline_wants(s))
		(void)srcline_index_wanted(s, NULL);
	probe(s, entry, true);
	s = srcline_free(s);

	/* tools' and tests' lookups, which index on demand */
	if (srcline_open(fd, &s) < 0)
		return 0;
	srcline_set_unit_limits(s, NSEC_PER_SEC, SRCLINE_UNIT_MAX_LINE_BYTES);
	probe(s, entry, false);
	srcline_get_stats(s, &st);
	srcline_free(s);
	return 0;
}
