/*
 * churn.c - new short-lived processes at a steady rate, for the benchmark's
 * daemon-CPU phase: every new process costs perfd work (its exec and exit
 * events, a look at its maps when it is sampled), so the daemon's CPU is
 * measured at known rates of them rather than at whatever the machine's
 * background happens to start.
 *
 * Every 1/RATE s, on absolute CLOCK_MONOTONIC deadlines (so the rate does
 * not drift with how long a spawn takes), one posix_spawn() of PROGRAM
 * (default /bin/true); exited children are reaped between deadlines.  On a
 * loaded machine a wake-up can come late: the deadlines missed are caught
 * up with at once, so the count over any window of a few seconds holds,
 * and those served more than a period late are counted.
 *
 * usage: churn -r RATE [-p PROGRAM]
 * Runs until SIGTERM or SIGINT, then prints
 *     "started N processes in S s (R/s), L deadlines late"
 * and exits 0 once every child is reaped.
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../workloads/workload.h"

extern char **environ;

static volatile sig_atomic_t stopping;

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void reap(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(int argc, char **argv)
{
	const char *program = "/bin/true";
	long rate = 0, started = 0, late = 0;
	struct sigaction sa = { .sa_handler = on_stop };
	uint64_t period, t0, next;
	int c;

	while ((c = getopt(argc, argv, "r:p:")) != -1) {
		switch (c) {
		case 'r':
			if (parse_long(optarg, 1, 10000, &rate) < 0)
				goto usage;
			break;
		case 'p':
			program = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc || rate == 0)
		goto usage;
	/* No SA_RESTART: the signal ends clock_nanosleep() at once. */
	if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0) {
		perror("sigaction");
		return 1;
	}

	period = 1000000000ULL / (uint64_t)rate;
	t0 = next = now_ns();
	while (!stopping) {
		char *child_argv[] = { (char *)program, NULL };
		struct timespec ts = { .tv_sec = next / 1000000000ULL, .tv_nsec = next % 1000000000ULL };
		pid_t pid;
		int r;

		r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		if (r == EINTR)
			continue;
		if (r) {
			fprintf(stderr, "clock_nanosleep: %s\n", strerror(r));
			return 1;
		}
		r = posix_spawn(&pid, program, NULL, NULL, child_argv, environ);
		if (r) {
			fprintf(stderr, "posix_spawn %s: %s\n", program, strerror(r));
			return 1;
		}
		started++;
		reap();
		if (now_ns() > next + period)
			late++;
		next += period;
	}
	while (wait(NULL) > 0)
		;
	printf("started %ld processes in %.3f s (%.2f/s), %ld deadlines late\n", started,
	       (now_ns() - t0) / 1e9, started / ((now_ns() - t0) / 1e9), late);
	return fflush(stdout) == 0 ? 0 : 1;
usage:
	fprintf(stderr, "usage: %s -r RATE [-p PROGRAM]\n", argv[0]);
	return 2;
}
