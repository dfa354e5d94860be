/*
 * workload.h - helpers shared by the workloads: CPU time, a CPU burner that
 * stops after a given amount of CPU time (so sample counts do not depend on
 * how loaded the machine is), and argument parsing.  Header-only: each
 * workload is one self-contained program.
 */
#ifndef PERFD_WORKLOAD_H
#define PERFD_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

#endif
