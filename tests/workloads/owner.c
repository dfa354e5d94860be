/*
 * owner.c - burns CPU under one owner, then changes who owns it and burns
 * CPU under the new one, each phase in a function of its own.
 *
 * Proves: perfd files samples under the owner the process had when they
 * were taken (ptrace's rule), so a user sees only the phases it could
 * have traced: owner_root() run as root and owner_user() run after a drop
 * to uid 65534, by setresuid() (drop) or by exec (exec: run as root, the
 * command given then runs as the new user, e.g. `setpriv ... -- owner
 * user 2`); owner_undumpable() after prctl(PR_SET_DUMPABLE, 0), which
 * ptrace refuses to a tracer of the same uid.
 *
 * usage: owner drop ROOT_SECONDS USER_SECONDS
 *        owner exec ROOT_SECONDS COMMAND...
 *        owner user SECONDS
 *        owner undumpable SECONDS
 * (CPU seconds; the process must start as root for drop and exec)
 */
#define _GNU_SOURCE /* setresuid(), setresgid() */
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "workload.h"

#define NOBODY 65534

__attribute__((noipa)) static void owner_root(double seconds)
{
	burn_until(cpu_seconds() + seconds);
}

__attribute__((noipa)) static void owner_user(double seconds)
{
	burn_until(cpu_seconds() + seconds);
}

__attribute__((noipa)) static void owner_undumpable(double seconds)
{
	burn_until(cpu_seconds() + seconds);
}

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s drop ROOT_SECONDS USER_SECONDS | exec ROOT_SECONDS COMMAND... | "
			"user SECONDS | undumpable SECONDS\n", argv0);
	return 2;
}

int main(int argc, char **argv)
{
	double a, b;

	if (argc < 3 || parse_seconds(argv[2], &a) < 0)
		return usage(argv[0]);
	if (strcmp(argv[1], "drop") == 0 && argc == 4 && parse_seconds(argv[3], &b) == 0) {
		owner_root(a);
		/* the kernel makes a process whose uids change non-dumpable
		 * (suid_dumpable); a daemon that drops privileges for good
		 * makes itself dumpable again */
		if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) < 0 || prctl(PR_SET_DUMPABLE, 1) < 0) {
			perror("dropping to uid 65534");
			return 1;
		}
		owner_user(b);
	} else if (strcmp(argv[1], "exec") == 0 && argc >= 4) {
		owner_root(a);
		execvp(argv[3], argv + 3);
		perror(argv[3]);
		return 1;
	} else if (strcmp(argv[1], "user") == 0 && argc == 3) {
		owner_user(a);
	} else if (strcmp(argv[1], "undumpable") == 0 && argc == 3) {
		if (prctl(PR_SET_DUMPABLE, 0) < 0) {
			perror("prctl");
			return 1;
		}
		owner_undumpable(a);
	} else {
		return usage(argv[0]);
	}
	return 0;
}
