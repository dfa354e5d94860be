/* SPDX-License-Identifier: MIT */
/*
 * fuzz-elf.c - perfd's readers of a binary a process maps (any user's file,
 * read as root): the symbol table loader with its PT_LOAD segments and
 * build-id note (symbols/elfsym.c), the merge of a debug image from memory
 * as MiniDebugInfo is merged, the debug file search by build-id (on the
 * loop, symbols/debuginfo.c) and the lane's half, .gnu_debuglink then the
 * MiniDebugInfo decompressor (symbols/debugsearch.c), looking only under a
 * directory that does not exist, and the kernel notes'
 * build-id parser (symbols/ksyms.c) over the same bytes.
 */
#include "fuzz.h"
#include "symbols/debuginfo.h"
#include "symbols/debugsearch.h"
#include "symbols/elfsym.h"
#include "symbols/ksyms.h"

#define NOWHERE "/nonexistent-perfd-fuzz"

static void symbols(int fd, const uint8_t *data, size_t size)
{
	struct elf_symtab *t = NULL;
	uint64_t vaddr, off, probe[] = { 0, 0x1000, 0x401000, UINT64_MAX };

	if (elf_symtab_load_fd(fd, &t) < 0)
		return;
	(void)elf_symtab_build_id(t);
	for (size_t i = 0; i < sizeof(probe) / sizeof(probe[0]); i++) {
		if (elf_symtab_offset_to_vaddr(t, probe[i], &vaddr) == 0)
			(void)elf_symtab_lookup(t, vaddr, &off);
		(void)elf_symtab_lookup(t, probe[i], &off);
	}
	(void)elf_symtab_add_from_memory(t, data, size);
	(void)elf_symtab_lookup(t, 0x1000, &off);
	elf_symtab_free(t);
}

static void debuginfo(int fd)
{
	void *image = NULL;
	size_t image_size;
	struct debugsearch *q;
	char *path = NULL;
	int r;

	if (debuginfo_minidebuginfo(fd, &image, &image_size) == 0)
		free(image);
	r = debuginfo_find(fd, NOWHERE "/bin/prog", NULL, NOWHERE, DEBUGINFO_BY_BUILD_ID, &path,
			   NULL);
	if (r >= 0) {
		close(r);
		free(path);
	}
	/* the lane's half, run here */
	if (debugsearch_new(0, fd, NOWHERE "/bin/prog", NOWHERE "/root", NOWHERE, &q) == 0) {
		debugsearch_run(q);
		debugsearch_free(q);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char hex[128];
	int fd = fuzz_memfd(data, size);

	symbols(fd, data, size);
	debuginfo(fd);
	(void)ksyms_parse_build_id(data, size, hex, sizeof(hex));
	return 0;
}
