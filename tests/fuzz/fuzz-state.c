/* SPDX-License-Identifier: MIT */
/*
 * fuzz-state.c - reading a state directory's segment back into the store
 * (state/persist.c through state/statefile.c), as perfd does at start.
 *
 * The first byte picks how the rest is read:
 *   even: as a whole file, framing and all (the header, lengths, CRCs);
 *   odd:  as records, [u8 type][u16 length][payload]..., framed here with a
 *         header of this boot and right CRCs, so the fuzzer reaches what the
 *         records say (strings, frames, stacks, processes, windows) rather
 *         than spending itself on checksums.
 * Each input gets a store and a state of its own, freed after it.
 *
 * The state is opened read_only, with no writer thread: under ASan a
 * thread's creation and exit cost more than the whole read (half of each
 * run's CPU time, mostly in the kernel).
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "profile/aggregate.h"
#include "state/persist.h"
#include "state/statefile.h"
#include "symbols/symbolize.h"

static char dir[] = "/tmp/perfd-fuzz-state-XXXXXX";
static struct symbolizer *sym;

static uint8_t this_boot[16];

static void setup(void)
{
	if (sym)
		return;
	if (!mkdtemp(dir))
		abort();
	if (symbolizer_new(&(struct symbolizer_opts){ 0 }, &sym, NULL) < 0)
		abort();
	if (statefile_boot_id(this_boot) < 0)
		abort();
}

/* The records of data (after the mode byte) framed as a segment. */
static void frame(const uint8_t *data, size_t size, struct sbuf *b)
{
	statefile_put_header(b, this_boot);
	while (size >= 3) {
		size_t len = (size_t)data[1] | (size_t)data[2] << 8, at;

		len = len < size - 3 ? len : size - 3;
		at = statefile_begin_record(b, data[0]);
		sbuf_put_bytes(b, data + 3, len);
		statefile_end_record(b, at);
		data += 3 + len;
		size -= 3 + len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aggregator_limits limits = { .max_processes = 64, .max_stacks = 4096,
					    .max_frames = 65536, .max_memory_bytes = 8u << 20,
					    .retention_s = 3600 };
	struct persist *ps = NULL;
	struct module_registry modules;
	struct aggregator *a;
	struct sbuf b = { 0 };
	size_t good;

	setup();
	if (size < 1)
		return 0;
	if (persist_open(&(struct persist_opts){ .dir = dir, .retention_s = 3600, .read_only = true },
			 &ps) < 0)
		abort();
	modules = symbolizer_modules(sym);
	if (aggregator_new(&limits, &modules, &a) < 0)
		abort();
	if (data[0] & 1) {
		frame(data + 1, size - 1, &b);
		if (!b.failed)
			(void)persist_read_segment(ps, a, 1, b.data, b.len, 10101010, 4000ULL * 1000000000,
						   &good);
	} else {
		(void)persist_read_segment(ps, a, 1, data + 1, size - 1, 10101010, 4000ULL * 1000000000,
					   &good);
	}
	/* what was read is answered: every window of every process */
	aggregator_maintain(a, 4001ULL * 1000000000);
	sbuf_done(&b);
	aggregator_free(a);
	persist_free(ps);
	return 0;
}
