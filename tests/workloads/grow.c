/*
 * grow.c - faults in a known amount of anonymous memory from two functions:
 * BIG_MIB MiB from grow_big(), SMALL_MIB MiB from grow_small() (the tests'
 * 256 and 16: 94% and 6% of 272 MiB).
 *
 * Proves: the profiler attributes memory growth, in bytes, to the stack that
 * faulted the pages in.  Each function maps its own anonymous memory (mmap)
 * and writes one nonzero byte in every 4 KiB page of it, so every page is a
 * private page of its own (never the shared zero page) and is faulted in from
 * that function's frame; nothing else in the process grows by more than a few
 * pages.  The two take turns in rounds: grow_big() faults in its share of
 * BIG_MIB, then grow_small() one chunk of 1 MiB (16 MiB of big, then 1 MiB
 * of small, 16 times over, for 256 and 16), so neither is all before the
 * other: a profiler that only catches the start or the end of the growth
 * gets the proportion wrong.
 *
 * Page size is chosen, not left to the kernel: without --thp every mapping is
 * madvise(MADV_NOHUGEPAGE), so the growth is 4 KiB pages even where
 * transparent huge pages are "always"; with --thp every mapping is 2 MiB
 * aligned and madvise(MADV_HUGEPAGE), and chunks are whole huge pages
 * (2 MiB of small after 32 MiB of big), so one write faults 2 MiB in at once
 * and the growth arrives in 2 MiB steps.  Whether the kernel really gave huge
 * pages is printed, from /proc/self/smaps_rollup, since it may fall back to
 * 4 KiB pages when it finds no free 2 MiB block.  THP is available when the
 * PMD size's setting (hugepages-2048kB/enabled, "inherit" meaning the
 * top-level transparent_hugepage/enabled) is "always" or "madvise".
 *
 * usage: grow BIG_MIB SMALL_MIB [--thp] [--hold SECONDS] [--pause SECONDS]
 *   (with --thp both sizes must be even: whole 2 MiB pages)
 * output, one line each, flushed at once, so a test can follow along:
 *   "ready"   - at start; then it sleeps --pause seconds (default 1) before
 *               growing, so a test can start watching first
 *   "touched BYTES big BYTES small BYTES anon_huge BYTES"
 *             - all of it is resident; it sleeps --hold seconds (default 0)
 *               holding it.  anon_huge is the process's AnonHugePages.
 *   "done"    - about to exit (status 0)
 * exit status: 0, 1 on a failure (said on stderr), 2 on a usage error,
 *   3 when --thp is asked for and the kernel does not offer THP.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "workload.h"

#define MIB (1024UL * 1024)
#define THP_SYSFS "/sys/kernel/mm/transparent_hugepage"

/* Huge pages asked for (--thp), and their size: hpage_pmd_size, 2 MiB on
 * x86-64. */
static int use_thp;
static size_t huge_size = 2 * MIB;
static size_t page_size;

/* The word in [brackets] of a sysfs choice file ("always [madvise] never"),
 * into buf; -1 when the file cannot be read or has none. */
static int read_choice(const char *path, char *buf, size_t size)
{
	char line[256], *open_, *close_;
	FILE *f = fopen(path, "re");
	int r = -1;

	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f) && (open_ = strchr(line, '[')) &&
	    (close_ = strchr(open_, ']')) && (size_t)(close_ - open_) <= size) {
		memcpy(buf, open_ + 1, close_ - open_ - 1);
		buf[close_ - open_ - 1] = '\0';
		r = 0;
	}
	fclose(f);
	return r;
}

/* Sets huge_size from hpage_pmd_size, where the kernel has it. */
static void read_huge_size(void)
{
	unsigned long long pmd;
	FILE *f = fopen(THP_SYSFS "/hpage_pmd_size", "re");

	if (!f)
		return;
	if (fscanf(f, "%llu", &pmd) == 1 && pmd > 0)
		huge_size = pmd;
	fclose(f);
}

/* Whether madvise(MADV_HUGEPAGE) gets huge_size pages: the per-size setting
 * of kernels with multi-size THP (6.8+), where "inherit" defers to the
 * top-level one, else the top-level one alone.  Writes the effective
 * setting to ret_mode ("never" when THP is missing altogether). */
static int thp_available(char *ret_mode, size_t size)
{
	char path[128], mode[32];

	snprintf(path, sizeof(path), THP_SYSFS "/hugepages-%zukB/enabled", huge_size / 1024);
	if (read_choice(path, mode, sizeof(mode)) < 0 || strcmp(mode, "inherit") == 0)
		if (read_choice(THP_SYSFS "/enabled", mode, sizeof(mode)) < 0)
			strcpy(mode, "never");
	snprintf(ret_mode, size, "%s", mode);
	return strcmp(mode, "always") == 0 || strcmp(mode, "madvise") == 0;
}

/* Maps bytes of anonymous memory, without faulting any of it in, aligned to
 * huge_size and madvised MADV_HUGEPAGE under --thp, MADV_NOHUGEPAGE
 * otherwise.  Returns the mapping, which stays until the process exits, or
 * NULL after saying why on stderr.  mmap() only reserves address space: the growth
 * happens where the pages are first written. */
static char *map_chunk(size_t bytes)
{
	size_t align = use_thp ? huge_size : page_size;
	size_t slack = align - page_size;
	char *raw, *p;

	raw = mmap(NULL, bytes + slack, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED) {
		perror("mmap");
		return NULL;
	}
	/* Trim the slack so the chunk starts on a huge-page boundary: a huge
	 * page can only back a 2 MiB-aligned 2 MiB range of one mapping. */
	p = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
	if (p > raw)
		(void)munmap(raw, p - raw);
	if (p + bytes < raw + bytes + slack)
		(void)munmap(p + bytes, raw + bytes + slack - (p + bytes));
	if (madvise(p, bytes, use_thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) < 0) {
		perror("madvise");
		(void)munmap(p, bytes);
		return NULL;
	}
	return p;
}

/* Writes one nonzero byte in every page of [p, p + bytes): each write to a
 * page not yet present faults it in (4 KiB, or 2 MiB under --thp), from the
 * frame of the function that expands this.  Nonzero, so a THP shrinker that
 * splits huge pages which are mostly zeros (6.12+) leaves them alone. */
#define TOUCH_PAGES(p, bytes)                                                  \
	do {                                                                   \
		volatile char *p_ = (p);                                       \
		for (size_t o_ = 0; o_ < (bytes); o_ += page_size)             \
			p_[o_] = (char)(o_ / page_size) | 1;                   \
	} while (0)

/* noipa: each function is a frame of its own, never inlined, cloned or
 * merged with its twin; both call mmap() and madvise(), so neither is a leaf
 * whose frame pointer GCC could drop. */
__attribute__((noipa)) static char *grow_big(size_t bytes)
{
	char *p = map_chunk(bytes);

	if (p)
		TOUCH_PAGES(p, bytes);
	return p;
}

__attribute__((noipa)) static char *grow_small(size_t bytes)
{
	char *p = map_chunk(bytes);

	if (p)
		TOUCH_PAGES(p, bytes);
	return p;
}

/* The process's AnonHugePages from /proc/self/smaps_rollup, in bytes, into
 * ret; -1 when it cannot be read (said on stderr). */
static int anon_huge_bytes(unsigned long long *ret)
{
	char line[256];
	unsigned long long kib;
	FILE *f = fopen("/proc/self/smaps_rollup", "re");
	int r = -1;

	if (!f) {
		perror("/proc/self/smaps_rollup");
		return -1;
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %llu kB", &kib) == 1) {
			*ret = kib * 1024;
			r = 0;
			break;
		}
	fclose(f);
	if (r < 0)
		fprintf(stderr, "no AnonHugePages in /proc/self/smaps_rollup\n");
	return r;
}

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s BIG_MIB SMALL_MIB [--thp] [--hold SECONDS] [--pause SECONDS]\n",
		argv0);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "thp", no_argument, NULL, 't' },
		{ "hold", required_argument, NULL, 'h' },
		{ "pause", required_argument, NULL, 'p' },
		{}
	};
	double hold = 0, pause = 1;
	long big_mib, small_mib;
	size_t unit, big_units, small_units, rounds, big_done = 0;
	unsigned long long huge = 0;
	char mode[32];
	int c;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 't':
			use_thp = 1;
			break;
		case 'h':
			if (parse_seconds(optarg, &hold) < 0)
				return usage(argv[0]);
			break;
		case 'p':
			if (parse_seconds(optarg, &pause) < 0)
				return usage(argv[0]);
			break;
		default:
			return usage(argv[0]);
		}
	}
	if (argc - optind != 2 || parse_long(argv[optind], 0, 1L << 20, &big_mib) < 0 ||
	    parse_long(argv[optind + 1], 0, 1L << 20, &small_mib) < 0)
		return usage(argv[0]);
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	read_huge_size();
	if (use_thp && ((big_mib * MIB) % huge_size || (small_mib * MIB) % huge_size)) {
		fprintf(stderr, "%s: with --thp, BIG_MIB and SMALL_MIB must be whole "
			"huge pages (%zu MiB)\n", argv[0], huge_size / MIB);
		return 2;
	}
	if (use_thp && !thp_available(mode, sizeof(mode))) {
		fprintf(stderr, "%s: transparent huge pages are not available "
			"(enabled: %s)\n", argv[0], mode);
		return 3;
	}

	/* Chunks of one MiB, or of one huge page; a round is one chunk of small
	 * after its share of big. */
	unit = use_thp && huge_size > MIB ? huge_size : MIB;
	big_units = big_mib * MIB / unit;
	small_units = small_mib * MIB / unit;
	rounds = small_units > 0 ? small_units : 1;

	printf("ready\n");
	fflush(stdout);
	if (pause_seconds(pause) < 0)
		return 1;

	for (size_t r = 0; r < rounds; r++) {
		/* Big's units spread evenly: round r ends at big_units*(r+1)/rounds. */
		size_t big_to = big_units * (r + 1) / rounds;

		if (big_to > big_done) {
			if (!grow_big((big_to - big_done) * unit))
				return 1;
			big_done = big_to;
		}
		if (r < small_units && !grow_small(unit))
			return 1;
	}

	if (anon_huge_bytes(&huge) < 0)
		return 1;
	printf("touched %zu big %zu small %zu anon_huge %llu\n",
	       (big_units + small_units) * unit, big_units * unit, small_units * unit, huge);
	fflush(stdout);
	if (pause_seconds(hold) < 0)
		return 1;

	printf("done\n");
	return fflush(stdout) == 0 ? 0 : 1;
}
