/* SPDX-License-Identifier: MIT */
/*
 * pychild.h - a real CPython interpreter as a child of a unit suite, and
 * its memory read through /proc/PID/mem the way the BPF walker reads it.
 * Shared by the suites that check the Python support on installed
 * interpreters (test-pyruntime.c, test-pycode.c, test-python.c).
 *
 * Header-only, like fixture.h: the Makefile builds each suite from its one
 * .c file, so the helpers are static and marked unused where a suite may
 * not need them.  They assert rather than return errors: a failure ends the
 * test, and the suite's fini stops the child (pychild_stop_current()),
 * also when the test ended early.  The price is that none of them suits code
 * that must survive a failed read; the daemon's own readers do that.
 *
 * A child's stdout is a pipe.  Its script reports on the first line
 * "MAJOR MINOR PATCH" (and, for test-python.c, its thread pointer), which
 * is also how the suite knows the interpreter has started.
 */
#ifndef PERFD_TEST_PYCHILD_H
#define PERFD_TEST_PYCHILD_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "process/procmaps.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct procmaps, procmaps_free);

#define PYENV_VERSIONS "/root/.pyenv/versions"

struct pychild {
	pid_t pid; /* 0 when not running */
	unsigned major, minor, patch; /* as the interpreter says */
	uint64_t thread_pointer; /* pthread_self() of the main thread, if reported */
};

/* The interpreter of the running test.  A suite's fini calls
 * pychild_stop_current(), so that it is stopped also when an assertion
 * ended the test before the test could stop it. */
_unused_ static struct pychild current;

/* What the child prints on its first line. */
enum pychild_report {
	PYCHILD_SILENT,         /* nothing is read (not a Python script) */
	PYCHILD_VERSION,        /* "MAJOR MINOR PATCH" */
	PYCHILD_VERSION_THREAD, /* "MAJOR MINOR PATCH THREAD_POINTER" */
};

/*
 * One Test in suite per supported CPython (pyenv's 3.8 to 3.13, and
 * Debian's static 3.11), named cpython_3_8 ... debian_static_3_11, each
 * calling check(exe) with the interpreter's path; check skips the test
 * when exe is not installed.  For the suites that run one whole check per
 * interpreter; those whose check needs more than the path (test-pyruntime.c,
 * test-pylinetable.c) list the versions themselves.
 */
#define PYCHILD_SUPPORTED_TESTS(suite, check)                                          \
	Test(suite, cpython_3_8) { check(PYENV_VERSIONS "/3.8.18/bin/python"); }         \
	Test(suite, cpython_3_9) { check(PYENV_VERSIONS "/3.9.18/bin/python"); }         \
	Test(suite, cpython_3_10) { check(PYENV_VERSIONS "/3.10.13/bin/python"); }       \
	Test(suite, cpython_3_11) { check(PYENV_VERSIONS "/3.11.7/bin/python"); }        \
	Test(suite, cpython_3_12) { check(PYENV_VERSIONS "/3.12.1/bin/python"); }        \
	Test(suite, cpython_3_13) { check(PYENV_VERSIONS "/3.13.0/bin/python"); }        \
	Test(suite, debian_static_3_11) { check("/usr/bin/python3.11"); }

/* PYENV_VERSIONS/version followed by rest, e.g. "/bin/python". */
_unused_ static void pyenv_path(char *buf, size_t size, const char *version, const char *rest)
{
	cr_assert_lt((size_t)snprintf(buf, size, PYENV_VERSIONS "/%s%s", version, rest), size);
}

/* The interpreters these suites name are part of the test machine
 * (README, "Tests"): one missing fails the test, loudly, rather than
 * skipping it (Criterion prints nothing for a skip).  PERFD_ALLOW_MISSING_PYTHON=1
 * turns that into a skip, for machines known to lack some. */
_unused_ static void require_installed(const char *path)
{
	if (access(path, X_OK) == 0)
		return;
	if (getenv("PERFD_ALLOW_MISSING_PYTHON"))
		cr_skip_test("%s is not installed", path);
	cr_assert_fail("%s is not installed (set PERFD_ALLOW_MISSING_PYTHON=1 to skip)", path);
}

/* Starts argv[0] (a path, not searched in PATH) with its stdout on a pipe
 * and reads what report says it prints into c.  Returns once it has
 * printed that: it may not be sleeping yet. */
_unused_ static void pychild_spawn(char *const argv[], enum pychild_report report,
				   struct pychild *c)
{
	posix_spawn_file_actions_t fa;
	int pipefd[2];
	char line[128];
	_cleanup_fclose_ FILE *f = NULL;
	int r;

	cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
	cr_assert_eq(posix_spawn_file_actions_init(&fa), 0);
	cr_assert_eq(posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO), 0);
	r = posix_spawn(&c->pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	(void)close(pipefd[1]);
	cr_assert_eq(r, 0, "spawn %s: %s", argv[0], strerror(r));
	f = fdopen(pipefd[0], "r");
	cr_assert_not_null(f);
	if (report == PYCHILD_SILENT)
		return;
	cr_assert_not_null(fgets(line, sizeof(line), f), "%s printed nothing", argv[0]);
	if (report == PYCHILD_VERSION)
		cr_assert_eq(sscanf(line, "%u %u %u", &c->major, &c->minor, &c->patch), 3, "%s",
			     line);
	else
		cr_assert_eq(sscanf(line, "%u %u %u %" SCNu64, &c->major, &c->minor, &c->patch,
				    &c->thread_pointer),
			     4, "%s", line);
}

/* Waits until the process sleeps in time.sleep() (select() or pselect6()
 * before 3.11, clock_nanosleep() after; nanosleep() for /bin/sleep): only
 * then do its frames hold still. */
_unused_ static void pychild_wait_sleeping(pid_t pid)
{
	char path[64], buf[256] = "";

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	for (int tries = 0; tries < 2000; tries++) {
		_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n;
		long nr;

		cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
		n = read(fd, buf, sizeof(buf) - 1);
		cr_assert_gt(n, 0, "%s: %s", path, strerror(errno));
		buf[n] = '\0';
		if (sscanf(buf, "%ld", &nr) == 1 &&
		    (nr == SYS_select || nr == SYS_pselect6 || nr == SYS_nanosleep ||
		     nr == SYS_clock_nanosleep))
			return;
		(void)usleep(1000);
	}
	cr_assert_fail("pid %d never slept (%s)", (int)pid, buf);
}

/* pychild_spawn(), then waits until the child sleeps. */
_unused_ static void pychild_start(char *const argv[], enum pychild_report report,
				   struct pychild *c)
{
	pychild_spawn(argv, report, c);
	pychild_wait_sleeping(c->pid);
}

/* Kills and reaps c if it runs, and removes the perf map or jitdump an
 * interpreter run with -X perf or -X perf_jit leaves in /tmp: a later
 * process given the same pid would otherwise inherit it (the integration
 * tests put a map of their own at that path).  Safe to call again. */
_unused_ static void pychild_stop(struct pychild *c)
{
	char path[64];

	if (c->pid > 0) {
		(void)kill(c->pid, SIGKILL);
		(void)waitpid(c->pid, NULL, 0);
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)c->pid);
		(void)unlink(path);
		snprintf(path, sizeof(path), "/tmp/jit-%d.dump", (int)c->pid);
		(void)unlink(path);
		c->pid = 0;
	}
}

_unused_ static void pychild_stop_current(void)
{
	pychild_stop(&current);
}

/* --- its memory, through /proc/PID/mem: all n bytes or the test fails ---- */

_unused_ static void read_mem(pid_t pid, uint64_t addr, void *buf, size_t n)
{
	char path[64];
	_cleanup_close_ int fd = -1;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(pread(fd, buf, n, (off_t)addr), (ssize_t)n, "read 0x%" PRIx64 ": %s", addr,
		     strerror(errno));
}

_unused_ static uint64_t read_u64(pid_t pid, uint64_t addr)
{
	uint64_t v;

	read_mem(pid, addr, &v, sizeof(v));
	return v;
}

_unused_ static int32_t read_i32(pid_t pid, uint64_t addr)
{
	int32_t v;

	read_mem(pid, addr, &v, sizeof(v));
	return v;
}

/* The pointer at base + off, which must not be NULL and, when maps is not
 * NULL, must point into one of its mappings; what names it in messages. */
_unused_ static uint64_t follow(pid_t pid, const struct procmaps *maps, uint64_t base,
				int32_t off, const char *what)
{
	uint64_t v;

	cr_assert_geq(off, 0, "no offset for %s", what);
	v = read_u64(pid, base + (uint64_t)off);
	cr_assert_neq(v, 0, "%s is NULL", what);
	if (maps)
		cr_assert_not_null(procmaps_find(maps, v), "%s 0x%" PRIx64 " is not mapped", what,
				   v);
	return v;
}

#endif
