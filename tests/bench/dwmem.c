/* SPDX-License-Identifier: MIT */
/*
 * dwmem.c - what libdw really holds for a debug file, next to what
 * srcline counts (srcline_stats.memory_bytes, which the symbol cache
 * charges), for symbols/srcline.h's estimate of libdw's own caches.
 *
 * For each file: the heap's growth (mallinfo2: in use plus mmapped) over
 * srcline_open, then over indexing every unit (line tables and the DIE
 * walk), against memory_bytes after each; and the file's sizes the
 * estimate may use (.debug_info, .debug_abbrev, decompressed, and the
 * number of units).  Then the same file through libdw alone, to tell its
 * caches apart: the growth over walking every unit's DIEs (the unit list
 * and abbreviation tables libdw builds; walk_growth) and over decoding
 * every line table after (line_growth, for line_rows rows).  One JSON
 * object a line.
 *
 * usage: dwmem FILE...
 */
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/elfopen.h"
#include "symbols/srcline.h"

static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* The decompressed size of the section called name, 0 if none. */
static uint64_t section_bytes(const char *path, const char *name)
{
	uint64_t bytes = 0;
	size_t shstrndx;
	Elf *elf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0)
		for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
			GElf_Shdr sh;
			const char *n;

			if (!gelf_getshdr(scn, &sh))
				continue;
			n = elf_strptr(elf, shstrndx, sh.sh_name);
			if (n && strcmp(n, name) == 0)
				bytes = elf_section_bytes(scn, &sh);
		}
	elf_end(elf);
	close(fd);
	return bytes;
}

/* Reads every DIE under die (its tag and attributes' abbreviation). */
static void walk(Dwarf_Die *die)
{
	Dwarf_Die child;

	(void)dwarf_tag(die);
	if (dwarf_child(die, &child) != 0)
		return;
	do
		walk(&child);
	while (dwarf_siblingof(&child, &child) == 0);
}

/* libdw alone on path: heap growth over the DIE walk and the line tables. */
static void libdw_alone(const char *path, size_t *ret_walk, size_t *ret_lines, size_t *ret_rows)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Dwarf *dw = fd < 0 ? NULL : dwarf_begin(fd, DWARF_C_READ);
	Dwarf_Off off = 0, next;
	size_t header, at, rows = 0;

	*ret_walk = *ret_lines = *ret_rows = 0;
	if (!dw) {
		if (fd >= 0)
			close(fd);
		return;
	}
	at = heap_in_use();
	for (; dwarf_nextcu(dw, off, &next, &header, NULL, NULL, NULL) == 0; off = next) {
		Dwarf_Die cu;

		if (dwarf_offdie(dw, off + header, &cu))
			walk(&cu);
	}
	*ret_walk = heap_in_use() - at;
	at = heap_in_use();
	for (off = 0; dwarf_nextcu(dw, off, &next, &header, NULL, NULL, NULL) == 0; off = next) {
		Dwarf_Die cu;
		Dwarf_Lines *lines;
		size_t n;

		if (dwarf_offdie(dw, off + header, &cu) && dwarf_getsrclines(&cu, &lines, &n) == 0)
			rows += n;
	}
	*ret_lines = heap_in_use() - at;
	*ret_rows = rows;
	dwarf_end(dw);
	close(fd);
}

int main(int argc, char **argv)
{
	elf_version(EV_CURRENT);
	for (int i = 1; i < argc; i++) {
		struct srcline_stats opened, indexed;
		size_t before, after_open, after_index, walk_growth, line_growth, rows;
		struct srcline *s = NULL;
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC), r;

		if (fd < 0) {
			perror(argv[i]);
			continue;
		}
		malloc_trim(0);
		before = heap_in_use();
		r = srcline_open(fd, &s);
		close(fd);
		if (r < 0) {
			fprintf(stderr, "%s: srcline_open: %s\n", argv[i], strerror(-r));
			continue;
		}
		after_open = heap_in_use();
		srcline_get_stats(s, &opened);
		srcline_set_unit_limits(s, 3600ULL * 1000000000ULL, (uint64_t)1 << 30);
		r = srcline_index_all(s);
		after_index = heap_in_use();
		srcline_get_stats(s, &indexed);
		printf("{\"file\": \"%s\", \"units\": %zu, \"indexed\": %zu, \"refused\": %d, "
		       "\"info\": %lu, \"abbrev\": %lu, "
		       "\"open_growth\": %zu, \"open_counted\": %zu, "
		       "\"index_growth\": %zu, \"index_counted\": %zu}\n",
		       argv[i], indexed.units, indexed.units_loaded, r,
		       (unsigned long)section_bytes(argv[i], ".debug_info"),
		       (unsigned long)section_bytes(argv[i], ".debug_abbrev"),
		       after_open - before, opened.memory_bytes, after_index - after_open,
		       indexed.memory_bytes - opened.memory_bytes);
		srcline_free(s);
		libdw_alone(argv[i], &walk_growth, &line_growth, &rows);
		printf("{\"file\": \"%s\", \"walk_growth\": %zu, \"line_growth\": %zu, "
		       "\"line_rows\": %zu}\n", argv[i], walk_growth, line_growth, rows);
	}
	return 0;
}
