/*
 * rss.c - holds 200 MiB of touched anonymous memory for a while, gives it
 * back with munmap(), then keeps running with a small resident set.
 *
 * Proves: the profiler reports resident memory per process: the peak
 * (>= 200 MiB) survives the free, while the current RSS drops.  munmap() is
 * used rather than free() so the pages really leave the process.  Every page
 * is written (not just read), so each is a private page, not the shared zero
 * page.  Phases are printed on stdout, one line each, flushed at once, so a
 * test can follow along:
 *   "allocated BYTES"  - the memory is resident; spinning in spin_holding()
 *   "freed"            - munmap() returned; spinning in spin_freed()
 *   "done"             - about to exit
 *
 * usage: rss HOLD_CPU_SECONDS AFTER_CPU_SECONDS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "workload.h"

#define SIZE (200UL * 1024 * 1024)

__attribute__((noipa)) static void spin_holding(double seconds)
{
	burn_until(cpu_seconds() + seconds);
}

__attribute__((noipa)) static void spin_freed(double seconds)
{
	burn_until(cpu_seconds() + seconds);
}

int main(int argc, char **argv)
{
	double hold, after;
	char *mem;

	if (argc != 3 || parse_seconds(argv[1], &hold) < 0 ||
	    parse_seconds(argv[2], &after) < 0) {
		fprintf(stderr, "usage: %s HOLD_CPU_SECONDS AFTER_CPU_SECONDS\n",
			argv[0]);
		return 2;
	}

	mem = mmap(NULL, SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(mem, 0xa5, SIZE);
	printf("allocated %lu\n", SIZE);
	fflush(stdout);
	spin_holding(hold);

	if (munmap(mem, SIZE) < 0) {
		perror("munmap");
		return 1;
	}
	printf("freed\n");
	fflush(stdout);
	spin_freed(after);

	printf("done\n");
	fflush(stdout);
	return 0;
}
