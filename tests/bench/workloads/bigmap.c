/*
 * bigmap.c - a process that maps a large library and burns CPU, so that a
 * profiler meets the library's binary for the first time.
 *
 * Loads LIBRARY with dlopen() (its code is mapped executable, which is what
 * makes the daemon open it and build its unwind table; nothing in it is
 * called), prints "ready" on stdout, then burns CPU_SECONDS of CPU in its
 * own code.
 *
 * usage: bigmap LIBRARY CPU_SECONDS
 */
#include <dlfcn.h>
#include <stdio.h>

#include "../../workloads/workload.h"

int main(int argc, char **argv)
{
	double seconds;
	void *lib;

	if (argc != 3 || parse_seconds(argv[2], &seconds) < 0) {
		fprintf(stderr, "usage: %s LIBRARY CPU_SECONDS\n", argv[0]);
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "bigmap: %s\n", dlerror());
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	burn_until(seconds);
	dlclose(lib);
	return 0;
}
