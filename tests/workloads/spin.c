/*
 * spin.c - sleeps, burns a known amount of CPU in spin_burn(), then prints
 * the CPU time it used in total.
 *
 * Proves: the profiler samples at the frequency it claims: a snapshot taken
 * over the whole life of this process should hold about
 * frequency x printed-CPU-seconds samples.  The initial sleep (default 1 s)
 * leaves time to start the snapshot before any CPU is spent.  The printed
 * figure is getrusage(RUSAGE_SELF) user + system, so it counts everything
 * the process ran, startup included, and nothing it did not.
 *
 * usage: spin CPU_SECONDS [SLEEP_SECONDS]
 * output: one line, the CPU seconds used, with 3 decimals
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "workload.h"

__attribute__((noipa)) static void spin_burn(double seconds)
{
	burn_until(cpu_seconds() + seconds);
}

int main(int argc, char **argv)
{
	double burn, pause = 1.0;
	struct timespec ts;
	struct rusage ru;

	if (argc < 2 || argc > 3 || parse_seconds(argv[1], &burn) < 0 ||
	    (argc == 3 && parse_seconds(argv[2], &pause) < 0)) {
		fprintf(stderr, "usage: %s CPU_SECONDS [SLEEP_SECONDS]\n", argv[0]);
		return 2;
	}
	ts.tv_sec = (time_t)pause;
	ts.tv_nsec = (long)((pause - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0) {
		if (errno != EINTR) {
			perror("nanosleep");
			return 1;
		}
	}
	spin_burn(burn);

	if (getrusage(RUSAGE_SELF, &ru) < 0) {
		perror("getrusage");
		return 1;
	}
	printf("%.3f\n", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
				 ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
	return fflush(stdout) == 0 ? 0 : 1;
}
