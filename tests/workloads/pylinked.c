/*
 * pylinked.c - a program that links libpython but never starts an
 * interpreter, as `perf` does: it asks libpython for its version (so the
 * library stays a dependency and is mapped), never calls Py_Initialize,
 * and burns CPU_SECONDS of CPU in C.  No Python runs in it: perfd must not
 * report a runtime.
 *
 * usage: pylinked CPU_SECONDS
 *     prints "ready VERSION" (libpython's Py_GetVersion()), then burns
 */
#include "workload.h"

const char *Py_GetVersion(void);

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1;

	printf("ready %.*s\n", 6, Py_GetVersion());
	fflush(stdout);
	burn_until(seconds);
	return 0;
}
