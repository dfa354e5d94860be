/*
 * procs.c - many small processes that sleep and wake.
 *
 * Used by the benchmark to measure what the profiler holds per process.  The
 * parent forks N children; each wakes every PERIOD ms, burns a short, fixed
 * amount of CPU in child_burst() so that a sampling profiler catches it on a
 * CPU now and then, and sleeps again, until SECONDS have passed.  Wake-ups are
 * spread over the period by child index so the children do not all run at
 * once.  The defaults (500 children, ~50 us every 50 ms) add up to about half a
 * CPU, which a 2-CPU machine can give; at 999 Hz each child then collects
 * about one sample a second.
 *
 * usage: procs [-n CHILDREN] [-b BURST_ITERS] [-P PERIOD_MS] [-p PAUSE_MS] -s SECONDS
 * output: "N children done" once every child has exited.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../workloads/workload.h"

static volatile uint64_t sink;

__attribute__((noipa)) static void publish(uint64_t x)
{
	sink = x;
}

__attribute__((noipa)) static void child_burst(unsigned long iters)
{
	uint64_t x = sink | 1;

	for (unsigned long i = 0; i < iters; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	publish(x);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline_ns / 1000000000ULL),
		.tv_nsec = (long)(deadline_ns % 1000000000ULL),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Wakes at start + offset + k * period until end; never returns. */
static void child(uint64_t start, uint64_t offset, uint64_t period,
		  uint64_t end, unsigned long iters)
{
	for (uint64_t t = start + offset; t < end; t += period) {
		sleep_until(t);
		child_burst(iters);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	long n = 500, iters = 40000, period_ms = 50, pause_ms = 0, seconds = 0;
	uint64_t start, period, end;
	int c, r, failed = 0;
	long started = 0;

	while ((c = getopt(argc, argv, "n:b:P:p:s:")) != -1) {
		long *dst = c == 'n' ? &n : c == 'b' ? &iters : c == 'P' ? &period_ms :
			    c == 'p' ? &pause_ms : c == 's' ? &seconds : NULL;

		if (!dst || parse_long(optarg, 0, 1000000000L, dst) < 0)
			goto usage;
	}
	if (optind != argc || seconds <= 0 || n <= 0 || period_ms <= 0)
		goto usage;

	period = (uint64_t)period_ms * 1000000ULL;
	start = now_ns() + (uint64_t)pause_ms * 1000000ULL;
	end = start + (uint64_t)seconds * 1000000000ULL;
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			failed = 1;
			break;
		}
		if (pid == 0)
			child(start, period * (uint64_t)i / (uint64_t)n, period, end,
			      (unsigned long)iters);
		started++;
	}
	r = wait_children(started);
	if (r < 0)
		return 1;
	failed |= r;
	printf("%ld children done\n", started);
	if (fflush(stdout) != 0)
		return 1;
	return failed;
usage:
	fprintf(stderr, "usage: %s [-n CHILDREN] [-b BURST_ITERS] [-P PERIOD_MS] [-p PAUSE_MS] -s SECONDS\n",
		argv[0]);
	return 2;
}
