/*
 * pingpong.c - two processes bounce a byte over two pipes as fast as they
 * can: every round trip is two wake-ups and two context switches.
 *
 * Proves: a profiler charges the ticks that fall due around a context
 * switch to the task that was running when they fell due.  A per-CPU
 * timer tick that falls due while interrupts are off across a switch is
 * delivered just after it, in the incoming task, at finish_task_switch;
 * here that happens thousands of times a second, to both processes and to
 * whatever CPU-bound process shares their CPUs (tests/integration/
 * test_switch.py).  The two are separate processes (fork, no shared mm),
 * so each switch between them also switches the address space, as between
 * a client and a server.  Their comms are "ping" and "pong".
 *
 * usage: pingpong SECONDS
 * output: "ready PING_PID PONG_PID" once both run, then, when both have
 *         stopped after SECONDS of wall time, "rounds N" (round trips
 *         ping made: a throughput, for the benchmark) and one line per
 *         process:
 *         "cpu PID SECONDS" (CPU seconds, user + system, from wait4()'s
 *         rusage).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One byte each way per round; 0 once the peer has gone (EOF), -1 on an
 * error, said on stderr. */
static int bounce(int out, int in, int first)
{
	char c = 'x';
	ssize_t n;

	if (first && write(out, &c, 1) != 1)
		return -1;
	n = read(in, &c, 1);
	if (n <= 0)
		return n == 0 ? 0 : -1;
	if (!first && write(out, &c, 1) != 1)
		return errno == EPIPE ? 0 : -1;
	return 1;
}

/* The ping side starts every round and stops at the deadline; the pong
 * side answers until ping closes its end. */
static void run(const char *name, int out, int in, int first, double deadline)
{
	uint64_t rounds = 0;
	int r;

	(void)prctl(PR_SET_NAME, name);
	for (;;) {
		if (first && (rounds & 63) == 0 && now_seconds() >= deadline)
			break;
		r = bounce(out, in, first);
		if (r < 0) {
			fprintf(stderr, "%s: %s\n", name, strerror(errno));
			_exit(1);
		}
		if (r == 0)
			break;
		rounds++;
	}
	if (first) {
		printf("rounds %llu\n", (unsigned long long)rounds);
		fflush(stdout);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	int a[2], b[2];
	double seconds, deadline;
	pid_t pids[2];
	int failed = 0;

	if (argc != 2 || parse_seconds(argv[1], &seconds) < 0) {
		fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
		return 2;
	}
	/* A peer that has gone must end the other with EOF or EPIPE, not a
	 * signal. */
	signal(SIGPIPE, SIG_IGN);
	if (pipe(a) < 0 || pipe(b) < 0) {
		perror("pipe");
		return 1;
	}
	deadline = now_seconds() + seconds;
	for (int i = 0; i < 2; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			return 1;
		}
		if (pids[i] == 0) {
			if (i == 0) {
				close(a[0]);
				close(b[1]);
				run("ping", a[1], b[0], 1, deadline);
			}
			close(a[1]);
			close(b[0]);
			run("pong", b[1], a[0], 0, deadline);
		}
	}
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
	printf("ready %d %d\n", (int)pids[0], (int)pids[1]);
	fflush(stdout);

	for (int i = 0; i < 2; i++) {
		struct rusage ru;
		int status;
		pid_t pid = wait4(-1, &status, 0, &ru);

		if (pid < 0) {
			perror("wait4");
			return 1;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
		printf("cpu %d %.3f\n", (int)pid,
		       ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
			       ru.ru_stime.tv_usec / 1e6);
	}
	return failed || fflush(stdout) != 0;
}
