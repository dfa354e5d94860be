/*
 * manymaps.c - maps COUNT distinct small executable files and runs code in
 * each, as a user who wants to exhaust a profiler's table of binaries and
 * its descriptors (issue 27).
 *
 * Each file is a copy of TEMPLATE (a tiny shared object, lib/tiny.c) with
 * its own build-id and trailer, so every copy is another binary.  Each is mapped whole, PROT_READ|PROT_EXEC,
 * and stays mapped; after every BATCH copies the workload runs tiny_burn
 * in the newest copy for BURN_MS, where the profiler's samples find an
 * address its view of the process does not cover, so it reads the maps
 * again.
 *
 * usage: manymaps TEMPLATE DIR COUNT BATCH BURN_MS
 * output: "mapped N" once all are mapped; then it sleeps until killed.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

/* The file offset of the dynamic symbol name in the ELF image, or 0. */
static size_t symbol_offset(const unsigned char *image, size_t size, const char *name)
{
	const Elf64_Ehdr *eh = (const void *)image;
	const Elf64_Shdr *sh = (const void *)(image + eh->e_shoff);
	const Elf64_Phdr *ph = (const void *)(image + eh->e_phoff);

	if (size < sizeof(*eh) || eh->e_shoff + (size_t)eh->e_shnum * sizeof(*sh) > size)
		return 0;
	for (int i = 0; i < eh->e_shnum; i++) {
		const Elf64_Sym *syms = (const void *)(image + sh[i].sh_offset);
		const char *names;

		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		names = (const char *)image + sh[sh[i].sh_link].sh_offset;
		for (size_t k = 0; k < sh[i].sh_size / sizeof(*syms); k++) {
			if (strcmp(names + syms[k].st_name, name) != 0)
				continue;
			for (int j = 0; j < eh->e_phnum; j++)
				if (ph[j].p_type == PT_LOAD && syms[k].st_value >= ph[j].p_vaddr &&
				    syms[k].st_value < ph[j].p_vaddr + ph[j].p_filesz)
					return syms[k].st_value - ph[j].p_vaddr + ph[j].p_offset;
		}
	}
	return 0;
}

/* The file offset of the GNU build-id's bytes in the ELF image, or 0. */
static size_t build_id_offset(const unsigned char *image, size_t size)
{
	const Elf64_Ehdr *eh = (const void *)image;
	const Elf64_Shdr *sh = (const void *)(image + eh->e_shoff);
	const char *names;

	if (size < sizeof(*eh) || eh->e_shoff + (size_t)eh->e_shnum * sizeof(*sh) > size)
		return 0;
	names = (const char *)image + sh[eh->e_shstrndx].sh_offset;
	for (int i = 0; i < eh->e_shnum; i++)
		if (strcmp(names + sh[i].sh_name, ".note.gnu.build-id") == 0)
			return sh[i].sh_offset + sizeof(Elf64_Nhdr) + 4; /* after "GNU\0" */
	return 0;
}

static int read_file(const char *path, unsigned char **ret, size_t *ret_size)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char *buf;

	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	buf = malloc((size_t)st.st_size);
	if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
		return -1;
	close(fd);
	*ret = buf;
	*ret_size = (size_t)st.st_size;
	return 0;
}

int main(int argc, char **argv)
{
	long count, batch, burn_ms;
	unsigned char *image;
	size_t size, entry, build_id;
	char path[4096];

	if (argc != 6 || parse_long(argv[3], 1, 1000000, &count) < 0 ||
	    parse_long(argv[4], 1, 1000000, &batch) < 0 ||
	    parse_long(argv[5], 0, 100000, &burn_ms) < 0) {
		fprintf(stderr, "usage: %s TEMPLATE DIR COUNT BATCH BURN_MS\n", argv[0]);
		return 2;
	}
	if (read_file(argv[1], &image, &size) < 0) {
		perror(argv[1]);
		return 1;
	}
	entry = symbol_offset(image, size, "tiny_burn");
	build_id = build_id_offset(image, size);
	if (!entry || !build_id) {
		fprintf(stderr, "no tiny_burn or no build-id in %s\n", argv[1]);
		return 1;
	}
	for (long i = 0; i < count; i++) {
		void (*burn)(unsigned long);
		unsigned char *base;
		int fd;

		snprintf(path, sizeof(path), "%s/tiny-%ld.so", argv[2], i);
		memcpy(image + build_id, &i, sizeof(i)); /* a build-id of its own */
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
		if (fd < 0 || write(fd, image, size) != (ssize_t)size ||
		    write(fd, &i, sizeof(i)) != (ssize_t)sizeof(i)) {
			perror(path);
			return 1;
		}
		base = mmap(NULL, size + sizeof(i), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		close(fd);
		if (base == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		if ((i + 1) % batch == 0 || i + 1 == count) {
			double until = cpu_seconds() + burn_ms / 1000.0;

			burn = (void (*)(unsigned long))(base + entry);
			while (cpu_seconds() < until)
				burn(100000);
		}
	}
	printf("mapped %ld\n", count);
	fflush(stdout);
	for (;;)
		pause();
}
