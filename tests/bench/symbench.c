/* SPDX-License-Identifier: MIT */
/*
 * symbench.c - the cost of naming frames: perfd's symbolizer against
 * elfutils' eu-addr2line and binutils' addr2line on the same addresses.
 *
 * Picks N addresses spread evenly over a library's executable segment,
 * names them with perfd's symbolizer cold (the first pass parses the
 * symbol table) and warm (repeated passes, lookups per second), then times
 * `eu-addr2line -f` and `addr2line -f` over the same addresses (each tool
 * parses the file once per run, so its time is a cold time).  Also builds
 * the library's unwind table (.eh_frame -> rows) and reports its time and
 * size per MiB of CFI.  Prints one JSON object: min/median/max of runs.
 *
 * usage: symbench LIBRARY N RUNS
 */
#include <errno.h>
#include <gelf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "profile/frame.h"
#include "symbols/symbolize.h"
#include "unwind/unwind_table.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The executable PT_LOAD of path: file offset, vaddr, size. */
static int exec_segment(const char *path, uint64_t *off, uint64_t *vaddr, uint64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e;
	size_t n;
	int r = -ENOENT;

	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && elf_getphdrnum(e, &n) == 0)
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(e, i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
				*off = ph.p_offset;
				*vaddr = ph.p_vaddr;
				*size = ph.p_filesz;
				r = 0;
				break;
			}
		}
	if (e)
		elf_end(e);
	close(fd);
	return r;
}

static double run_tool(const char *tool, const char *lib, const char *addr_file)
{
	char cmd[4096];
	double t0 = now();

	snprintf(cmd, sizeof(cmd), "%s -f -e %s < %s > /dev/null 2>&1", tool, lib, addr_file);
	if (system(cmd) != 0)
		return -1;
	return now() - t0;
}

int main(int argc, char **argv)
{
	uint64_t off = 0, vaddr = 0, size = 0;
	int n, runs;
	struct stat st;
	char addr_file[] = "/tmp/symbench-XXXXXX";
	double *cold, *warm, *eu, *bu;
	FILE *f;

	if (argc != 4 || (n = atoi(argv[2])) <= 0 || (runs = atoi(argv[3])) <= 0) {
		fprintf(stderr, "usage: %s LIBRARY N RUNS\n", argv[0]);
		return 2;
	}
	if (exec_segment(argv[1], &off, &vaddr, &size) < 0 || stat(argv[1], &st) < 0) {
		fprintf(stderr, "symbench: cannot read %s\n", argv[1]);
		return 1;
	}
	f = fdopen(mkstemp(addr_file), "w");
	for (int i = 0; i < n; i++)
		fprintf(f, "0x%" PRIx64 "\n", vaddr + (size / n) * i + 1);
	fclose(f);

	double *unwind_ms = calloc(runs, sizeof(double));
	size_t cfi_bytes = 0, rows = 0;

	for (int r = 0; r < runs; r++) {
		int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
		struct unwind_table *t = NULL;
		double t0 = now();

		if (fd < 0 || unwind_table_build(fd, NULL, &t) < 0) {
			fprintf(stderr, "symbench: no unwind table for %s\n", argv[1]);
			return 1;
		}
		unwind_ms[r] = (now() - t0) * 1e3;
		cfi_bytes = t->cfi_bytes;
		rows = t->n_rows;
		unwind_table_free(t);
		close(fd);
	}
	qsort(unwind_ms, runs, sizeof(double), cmp_double);

	cold = calloc(runs, sizeof(double));
	warm = calloc(runs, sizeof(double));
	eu = calloc(runs, sizeof(double));
	bu = calloc(runs, sizeof(double));
	for (int r = 0; r < runs; r++) {
		struct symbolizer_opts o = { .demangle = true };
		struct symbolizer *s = NULL;
		struct procmap map = { .start = 0x100000000000ULL, .end = 0x100000000000ULL + size,
				       .pgoff = off, .dev_major = major(st.st_dev),
				       .dev_minor = minor(st.st_dev), .inode = st.st_ino,
				       .executable = true, .path = argv[1] };
		int id = symbolizer_new(&o, &s, NULL);
		char buf[1024];
		double t0;
		int passes = 0;

		if (id < 0) {
			fprintf(stderr, "symbench: no symbolizer: %s\n", strerror(-id));
			return 1;
		}
		id = symbolizer_module_for_mapping(s, getpid(), 0, &map);
		if (id <= 0) {
			fprintf(stderr, "symbench: cannot open %s: %s\n", argv[1], strerror(-id));
			return 1;
		}
		t0 = now();
		for (int i = 0; i < n; i++)
			symbolizer_frame_name(s, frame_make(id, off + (size / n) * i + 1), buf, sizeof(buf));
		cold[r] = now() - t0;
		t0 = now();
		do {
			for (int i = 0; i < n; i++)
				symbolizer_frame_name(s, frame_make(id, off + (size / n) * i + 1), buf,
						      sizeof(buf));
			passes++;
		} while (now() - t0 < 0.5);
		warm[r] = passes * (double)n / (now() - t0);
		symbolizer_free(s);
		eu[r] = run_tool("eu-addr2line", argv[1], addr_file);
		bu[r] = run_tool("addr2line", argv[1], addr_file);
	}
	unlink(addr_file);
	qsort(cold, runs, sizeof(double), cmp_double);
	qsort(warm, runs, sizeof(double), cmp_double);
	qsort(eu, runs, sizeof(double), cmp_double);
	qsort(bu, runs, sizeof(double), cmp_double);
#define TRIPLE(a, scale) (a)[0] * (scale), (a)[runs / 2] * (scale), (a)[runs - 1] * (scale)
	printf("{\"library\": \"%s\", \"addresses\": %d, \"runs\": %d,\n", argv[1], n, runs);
	printf(" \"perfd_cold_ms\": [%.1f, %.1f, %.1f],\n", TRIPLE(cold, 1e3));
	printf(" \"perfd_warm_lookups_per_s\": [%.0f, %.0f, %.0f],\n", TRIPLE(warm, 1));
	printf(" \"eu_addr2line_ms\": [%.1f, %.1f, %.1f],\n", TRIPLE(eu, 1e3));
	printf(" \"addr2line_ms\": [%.1f, %.1f, %.1f],\n", TRIPLE(bu, 1e3));
	printf(" \"perfd_cold_over_eu_addr2line\": %.3f,\n", cold[runs / 2] / eu[runs / 2]);
	printf(" \"perfd_cold_over_addr2line\": %.3f,\n", cold[runs / 2] / bu[runs / 2]);
	printf(" \"cfi_mib\": %.2f, \"unwind_rows\": %zu, \"unwind_table_mib\": %.2f,\n",
	       cfi_bytes / 1048576.0, rows, rows * sizeof(struct perfd_unwind_row) / 1048576.0);
	printf(" \"unwind_build_ms\": [%.1f, %.1f, %.1f],\n", TRIPLE(unwind_ms, 1));
	printf(" \"unwind_build_ms_per_cfi_mib\": %.1f,\n",
	       unwind_ms[runs / 2] / (cfi_bytes / 1048576.0));
	printf(" \"unwind_table_bytes_per_cfi_byte\": %.2f}\n",
	       (double)rows * sizeof(struct perfd_unwind_row) / (double)cfi_bytes);
	return 0;
}
