/*
 * duty.c - uses a given share of one CPU: every period of 100 ms,
 * duty_burn() burns PERCENT % of the period in CPU time, then the process
 * sleeps to the period's end.  Periods are timed against the clock from
 * the start (absolute deadlines), so the share holds however late a
 * wake-up comes, and a period the machine was too busy to finish in time
 * is caught up by sleeping less, never by burning more.
 *
 * Proves: a live CPU % follows what a process really used: `perfctl top`
 * of `duty 50 S` shows about 50 % of a CPU (less when the machine cannot
 * give that much; a test takes the truth from /proc/PID/stat), with
 * duty_burn() its top function, below a spinner at 100 %.
 *
 * usage: duty PERCENT SECONDS   (PERCENT 1..100; SECONDS of wall time)
 * output: "ready" at start, then at the end the CPU seconds used.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "workload.h"

#define PERIOD_NS 100000000L

/* noipa: a frame of its own, named by every sample of the burn. */
__attribute__((noipa)) static void duty_burn(double seconds)
{
	burn_until(cpu_seconds() + seconds);
}

static void add_ns(struct timespec *t, long ns)
{
	t->tv_nsec += ns;
	while (t->tv_nsec >= 1000000000L) {
		t->tv_nsec -= 1000000000L;
		t->tv_sec++;
	}
}

int main(int argc, char **argv)
{
	struct timespec deadline, end;
	double seconds;
	long percent;

	if (argc != 3 || parse_long(argv[1], 1, 100, &percent) < 0 ||
	    parse_seconds(argv[2], &seconds) < 0) {
		fprintf(stderr, "usage: %s PERCENT SECONDS\n", argv[0]);
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	end = deadline;
	add_ns(&end, (long)(seconds * 1e9 - (double)(long)seconds * 1e9));
	end.tv_sec += (time_t)seconds;
	while (deadline.tv_sec < end.tv_sec ||
	       (deadline.tv_sec == end.tv_sec && deadline.tv_nsec < end.tv_nsec)) {
		duty_burn(PERIOD_NS / 1e9 * (double)percent / 100);
		add_ns(&deadline, PERIOD_NS);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR)
			;
	}
	return print_cpu_used() < 0;
}
