/* SPDX-License-Identifier: MIT */
/*
 * fuzz-unwind.c - the CFI -> unwind table builder (unwind/unwind_table.c),
 * as the builder's lanes call it on a file a process maps: the ELF read
 * from a file descriptor, .eh_frame and .debug_frame decoded through
 * libdw's CFI API, the rows merged; then the size estimate the builder
 * schedules by, and the searches the BPF side mirrors.  Within the
 * builder's byte cap and a budget of one CPU second: an input that makes libdw
 * slow ends the build (-ETIMEDOUT) as it ends the builder's.
 */
#include "base/clock.h"
#include "fuzz.h"
#include "unwind/builder.h"
#include "unwind/unwind_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct unwind_table_limits limits = {
		.max_cfi_bytes = BUILDER_MAX_CFI_BYTES,
		.cpu_ns = NSEC_PER_SEC,
	};
	struct unwind_table *t = NULL;
	int fd = fuzz_memfd(data, size);
	uint32_t first, end;

	(void)unwind_table_cfi_bytes(fd);
	if (unwind_table_build(fd, &limits, &t) < 0)
		return 0;
	for (uint64_t a = 0; a < 0x3000; a += 0x100)
		(void)unwind_table_find(t, t->base_vaddr + a);
	(void)unwind_table_find(t, UINT64_MAX);
	unwind_table_fp_range(t->rows, t->n_rows, &first, &end);
	unwind_table_free(t);
	return 0;
}
