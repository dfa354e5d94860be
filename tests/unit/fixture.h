/* SPDX-License-Identifier: MIT */
/*
 * fixture.h - a scratch directory for unit suites that build their fixtures
 * (binaries, debug files) at run time: created per suite, removed after,
 * with helpers to write a file there and run a tool in it.  Header-only:
 * each suite is one program.
 *
 * A suite declares FIXTURE_SUITE(name, timeout) and then uses workdir,
 * path_in_workdir(), write_file() and run().
 */
#ifndef PERFD_TEST_FIXTURE_H
#define PERFD_TEST_FIXTURE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perfd/macro.h"

#define FIXTURE_WORKDIR_TEMPLATE "/tmp/perfd-unit.XXXXXX"
static char workdir[sizeof(FIXTURE_WORKDIR_TEMPLATE)];

static int fixture_remove_entry(const char *path, const struct stat *st, int flag,
				struct FTW *ftw)
{
	return remove(path);
}

static void fixture_setup(void)
{
	/* Each test gets its own directory, also when run without fork. */
	memcpy(workdir, FIXTURE_WORKDIR_TEMPLATE, sizeof(FIXTURE_WORKDIR_TEMPLATE));
	cr_assert_not_null(mkdtemp(workdir), "mkdtemp: %s", strerror(errno));
}

static void fixture_teardown(void)
{
	(void)nftw(workdir, fixture_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#define FIXTURE_SUITE(name, seconds)                                           \
	TestSuite(name, .init = fixture_setup, .fini = fixture_teardown,       \
		  .timeout = (seconds))

_unused_ static void path_in_workdir(char *buf, size_t size, const char *name)
{
	int n = snprintf(buf, size, "%s/%s", workdir, name);

	cr_assert(n > 0 && (size_t)n < size);
}

_unused_ static void write_file(const char *name, const void *data, size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	path_in_workdir(path, sizeof(path), name);
	f = fopen(path, "we");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

/* Runs argv (searched in PATH) in the work directory; asserts it exits 0. */
_unused_ static void run(char *const argv[])
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status, r;

	cr_assert_eq(posix_spawn_file_actions_init(&fa), 0);
	cr_assert_eq(posix_spawn_file_actions_addchdir_np(&fa, workdir), 0);
	r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	(void)posix_spawn_file_actions_destroy(&fa);
	cr_assert_eq(r, 0, "spawn %s: %s", argv[0], strerror(r));
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s %s failed (status %#x)",
		  argv[0], argv[1], status);
}

#endif
