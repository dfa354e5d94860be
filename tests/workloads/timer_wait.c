/*
 * timer_wait.c - computes for 100 ms, then sleeps 300 ms on a timer, round
 * after round: compute() burns 100 ms of CPU time, wait_for_timer() sleeps
 * in nanosleep() for 300 ms (relative, so a late wake-up lengthens the
 * round, never shortens the sleep).
 *
 * Proves: off-CPU time is charged to the stack a thread blocked at, with
 * why it blocked: of this process's time, ~25 % is on the CPU in
 * compute() and ~75 % off it in wait_for_timer(), class sleep (a little
 * more while the machine is busy: waiting for a CPU after each wake-up).
 *
 * usage: timer_wait SECONDS   (of wall time, whole rounds)
 * output: "ready" at start, then at the end the CPU seconds used.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "workload.h"

/* noipa: frames of their own, named by every sample in them. */
__attribute__((noipa)) static void compute(void)
{
	burn_until(cpu_seconds() + 0.1);
}

__attribute__((noipa)) static void wait_for_timer(void)
{
	struct timespec t = { 0, 300000000L };

	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	double seconds;
	long rounds;

	if (argc != 2 || parse_seconds(argv[1], &seconds) < 0) {
		fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	rounds = (long)(seconds / 0.4 + 0.5);
	for (long i = 0; i < rounds; i++) {
		compute();
		wait_for_timer();
	}
	return print_cpu_used() < 0;
}
