/*
 * churn.c - many short-lived processes: N children, PARALLEL at a time,
 * each a fresh exec of this program that burns BURN_MS of CPU in
 * churn_burn and exits.
 *
 * Proves: a host whose processes come and go (a build, a CI runner, a
 * shell loop) leaves perfd with no state of them once they are gone and
 * past the retention, and its memory bounded while they come.  Each child
 * execs, so perfd sees each as a new image: maps read, unwinder told,
 * exit event, all of it per pid.  The burn is long enough that a daemon at
 * 999 Hz samples most children a few times.
 *
 * usage: churn N PARALLEL BURN_MS
 * prints "started PID" at once, then "done N FAILED" when every child has
 * exited (FAILED: children that did not exit 0, or could not be started).
 * Each child is named churn-child (its comm), the parent churn.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "workload.h"

static __attribute__((noinline)) void churn_burn(double seconds)
{
	burn_until(cpu_seconds() + seconds);
}

static int child(const char *burn_ms)
{
	long ms;

	if (parse_long(burn_ms, 0, 60000, &ms) < 0)
		return 2;
	churn_burn(ms / 1000.0);
	return 0;
}

/* Reaps one child; counts it failed unless it exited 0.  Returns 0 or -1. */
static int reap(long *failed)
{
	int status;

	while (wait(&status) < 0)
		if (errno != EINTR) {
			perror("wait");
			return -1;
		}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		(*failed)++;
	return 0;
}

int main(int argc, char **argv)
{
	long n, parallel, ms, running = 0, failed = 0;

	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		(void)prctl(PR_SET_NAME, "churn-child");
		return child(argv[2]);
	}
	if (argc != 4 || parse_long(argv[1], 1, 10000000, &n) < 0 ||
	    parse_long(argv[2], 1, 4096, &parallel) < 0 || parse_long(argv[3], 0, 60000, &ms) < 0) {
		fprintf(stderr, "usage: %s N PARALLEL BURN_MS\n", argv[0]);
		return 2;
	}
	printf("started %d\n", (int)getpid());
	fflush(stdout);
	for (long i = 0; i < n; i++) {
		pid_t pid;

		if (running >= parallel) {
			if (reap(&failed) < 0)
				return 1;
			running--;
		}
		pid = fork();
		if (pid < 0) {
			perror("fork");
			failed++;
			continue;
		}
		if (pid == 0) {
			execl("/proc/self/exe", "churn-child", "--child", argv[3], (char *)NULL);
			_exit(127);
		}
		running++;
	}
	while (running-- > 0)
		if (reap(&failed) < 0)
			return 1;
	printf("done %ld %ld\n", n, failed);
	return 0;
}
