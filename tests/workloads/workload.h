/*
 * workload.h - helpers shared by the workloads: CPU time, a CPU burner that
 * stops after a given amount of CPU time (so sample counts do not depend on
 * how loaded the machine is), argument parsing, and the report of the CPU
 * time used.  Header-only: each workload is one self-contained program.  The
 * benchmark's workloads (tests/bench/workloads/) include it too.
 */
#ifndef PERFD_WORKLOAD_H
#define PERFD_WORKLOAD_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

/* Written by the burn loops so the compiler cannot drop them. */
static volatile uint64_t workload_sink;

static inline double cpu_seconds(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) < 0) {
		perror("clock_gettime");
		exit(1);
	}
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Burns CPU until the process has used `until` CPU seconds in total.
 * always_inline: the samples belong to the named function that calls it. */
static inline __attribute__((always_inline)) void burn_until(double until)
{
	while (cpu_seconds() < until) {
		uint64_t x = workload_sink | 1;

		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		workload_sink = x;
	}
}

/* One unit of work with a stack frame of its own (so the CFA moves), the
 * same instructions wherever it is expanded: functions doing n units cost
 * n times as much, which is what makes a split known by construction. */
#define WORK_UNITS(seed, units)                                                \
	({                                                                     \
		volatile uint64_t scratch_[8];                                 \
		uint64_t x_ = (seed) | 1;                                      \
		for (unsigned u_ = 0; u_ < (units); u_++)                      \
			for (int i_ = 0; i_ < 200000; i_++) {                  \
				x_ = x_ * 6364136223846793005ULL +             \
				     1442695040888963407ULL;                   \
				scratch_[i_ & 7] = x_;                         \
			}                                                      \
		x_ ^ scratch_[3];                                              \
	})

/* A non-negative number of seconds; -1 for anything else. */
static inline int parse_seconds(const char *s, double *ret)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end != '\0' || !(v >= 0))
		return -1;
	*ret = v;
	return 0;
}

/* A whole decimal number in [min, max]; -1 for anything else. */
static inline int parse_long(const char *s, long min, long max, long *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < min || v > max)
		return -1;
	*ret = v;
	return 0;
}

/* Sleeps for `seconds` of wall time, resuming after signals.  Returns 0, or
 * -1 after saying why on stderr. */
static inline int pause_seconds(double seconds)
{
	struct timespec ts = {
		.tv_sec = (time_t)seconds,
		.tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9),
	};

	while (nanosleep(&ts, &ts) < 0)
		if (errno != EINTR) {
			perror("nanosleep");
			return -1;
		}
	return 0;
}

/* Waits for n children.  Returns 0 when all exited with status 0, 1 when
 * one did not, -1 after saying why on stderr when wait() failed. */
static inline int wait_children(long n)
{
	int failed = 0;

	for (long i = 0; i < n; i++) {
		int status;

		if (wait(&status) < 0) {
			perror("wait");
			return -1;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
	}
	return failed;
}

/* Prints the CPU seconds the process has used, user + system
 * (getrusage(RUSAGE_SELF)), with 3 decimals, and flushes stdout.  Returns 0,
 * or -1 when either failed (a getrusage failure is reported on stderr). */
static inline int print_cpu_used(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0) {
		perror("getrusage");
		return -1;
	}
	printf("%.3f\n", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
				 ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
	return fflush(stdout) == 0 ? 0 : -1;
}

#endif
