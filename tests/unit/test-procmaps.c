/* SPDX-License-Identifier: MIT */
/*
 * test-procmaps.c - unit tests for daemon/procmaps.c.
 *
 * Fixtures are maps text fed through fmemopen, written the way the kernel
 * prints them (padding, trailing blank after anonymous mappings), plus one
 * read of this test's own /proc/self/maps to check the parser against the
 * real thing.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "process/mapsread.h"
#include "process/procfs.h"
#include "process/procmaps.h"

static const char normal_maps[] =
	"55b81bac3000-55b81bac5000 r--p 00000000 fe:00 247134                     /usr/bin/cat\n"
	"55b81bac5000-55b81baca000 r-xp 00002000 fe:00 247134                     /usr/bin/cat\n"
	"55b81d96f000-55b81d990000 rw-p 00000000 00:00 0                          [heap]\n"
	"7fdc4a39d000-7fdc4a3bf000 rw-p 00000000 00:00 0 \n"
	"7fdc4a446000-7fdc4a59c000 r-xp 00026000 103:02 332835                    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7fdc4a605000-7fdc4a60c000 r--s 00000000 fe:00 332280                     /usr/lib/gconv-modules.cache\n"
	"7fdc4a700000-7fdc4a701000 r-xp 00001000 fe:00 99                         /opt/my app/lib with spaces.so\n"
	"7fdc4a701000-7fdc4a702000 r-xp 00000000 fe:00 100                        /tmp/jit.so (deleted)\n"
	"7fdc4a800000-7fdc4a801000 rw-p 00000000 00:00 0\n"
	"7ffd5a1f0000-7ffd5a1f2000 r-xp 00000000 00:00 0                          [vdso]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

/* Parses text through fmemopen; returns procmaps_parse's result. */
static int parse_text(const char *text, bool exec_only, struct procmaps **ret)
{
	_cleanup_fclose_ FILE *f = NULL;

	/* fmemopen refuses a zero size, so an empty file is /dev/null. */
	f = strlen(text) ? fmemopen((void *)text, strlen(text), "r") : fopen("/dev/null", "re");
	cr_assert_not_null(f);
	return procmaps_parse(f, exec_only, ret);
}

static struct procmaps *parse_ok(const char *text, bool exec_only)
{
	struct procmaps *m = NULL;
	int r = parse_text(text, exec_only, &m);

	cr_assert_eq(r, 0, "procmaps_parse: %s", strerror(-r));
	cr_assert_not_null(m);
	return m;
}

static const struct procmap *find_path(const struct procmaps *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->maps[i].path, path) == 0)
			return &m->maps[i];
	return NULL;
}

Test(procmaps, parses_all_fields)
{
	struct procmaps *m = parse_ok(normal_maps, false);
	const struct procmap *p;

	cr_assert_eq(m->n, 11);

	p = &m->maps[0];
	cr_expect_eq(p->start, 0x55b81bac3000ULL);
	cr_expect_eq(p->end, 0x55b81bac5000ULL);
	cr_expect_eq(p->pgoff, 0);
	cr_expect_eq(p->dev_major, 0xfe);
	cr_expect_eq(p->dev_minor, 0);
	cr_expect_eq(p->inode, 247134);
	cr_expect(p->readable && !p->writable && !p->executable && !p->shared);
	cr_expect_str_eq(p->path, "/usr/bin/cat");

	p = &m->maps[1];
	cr_expect_eq(p->pgoff, 0x2000);
	cr_expect(p->readable && !p->writable && p->executable && !p->shared);

	p = find_path(m, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	cr_assert_not_null(p);
	cr_expect_eq(p->dev_major, 0x103);
	cr_expect_eq(p->dev_minor, 0x02);
	cr_expect_eq(p->pgoff, 0x26000);

	p = find_path(m, "/usr/lib/gconv-modules.cache");
	cr_assert_not_null(p);
	cr_expect(p->shared && p->readable && !p->executable);

	p = find_path(m, "[vsyscall]");
	cr_assert_not_null(p);
	cr_expect_eq(p->end, 0xffffffffff601000ULL);
	cr_expect(!p->readable && p->executable);

	for (size_t i = 1; i < m->n; i++)
		cr_expect_lt(m->maps[i - 1].start, m->maps[i].start);
	procmaps_free(m);
}

Test(procmaps, special_paths)
{
	struct procmaps *m = parse_ok(normal_maps, false);
	const struct procmap *p;

	p = find_path(m, "/opt/my app/lib with spaces.so");
	cr_assert_not_null(p, "path with spaces must be kept whole");
	cr_expect_eq(p->inode, 99);
	cr_expect_eq(p->pgoff, 0x1000);

	p = find_path(m, "/tmp/jit.so (deleted)");
	cr_assert_not_null(p, "the (deleted) suffix is part of the path");

	p = find_path(m, "[vdso]");
	cr_assert_not_null(p);
	cr_expect(p->executable);
	cr_expect_eq(p->start, 0x7ffd5a1f0000ULL);

	p = find_path(m, "[heap]");
	cr_assert_not_null(p);

	/* Both anonymous forms: trailing blank and none at all. */
	p = procmaps_find(m, 0x7fdc4a39d000ULL);
	cr_assert_not_null(p);
	cr_expect_str_eq(p->path, "");
	p = procmaps_find(m, 0x7fdc4a800000ULL);
	cr_assert_not_null(p);
	cr_expect_str_eq(p->path, "");
	cr_expect(p->writable);
	procmaps_free(m);
}

Test(procmaps, trailing_spaces_in_path_are_kept)
{
	struct procmaps *m = parse_ok("1000-2000 r-xp 00000000 08:01 7    /x y  \n", false);

	cr_assert_eq(m->n, 1);
	cr_expect_str_eq(m->maps[0].path, "/x y  ");
	procmaps_free(m);
}

Test(procmaps, last_line_without_newline)
{
	struct procmaps *m = parse_ok("1000-2000 r-xp 00000000 08:01 7 /a\n"
				      "3000-4000 r-xp 00000000 08:01 8 /b",
				      false);

	cr_assert_eq(m->n, 2);
	cr_expect_str_eq(m->maps[1].path, "/b");
	procmaps_free(m);
}

Test(procmaps, empty_input)
{
	struct procmaps *m = parse_ok("", false);

	cr_expect_eq(m->n, 0);
	cr_expect_null(procmaps_find(m, 0x1000));
	procmaps_free(m);
}

Test(procmaps, exec_only_filters)
{
	struct procmaps *m = parse_ok(normal_maps, true);

	cr_assert_eq(m->n, 6);
	for (size_t i = 0; i < m->n; i++)
		cr_expect(m->maps[i].executable, "%s is not executable", m->maps[i].path);
	cr_expect_null(find_path(m, "[heap]"));
	cr_expect_null(procmaps_find(m, 0x55b81bac3000ULL), "r--p mapping must be dropped");
	cr_expect_not_null(find_path(m, "[vdso]"));
	cr_expect_not_null(find_path(m, "[vsyscall]"));
	procmaps_free(m);
}

Test(procmaps, find_hits_misses_and_boundaries)
{
	struct procmaps *m = parse_ok(normal_maps, false);
	const struct procmap *p;

	/* start is inclusive */
	p = procmaps_find(m, 0x55b81bac3000ULL);
	cr_assert_not_null(p);
	cr_expect_eq(p->start, 0x55b81bac3000ULL);

	/* last byte belongs to the mapping, end is the next one's start */
	p = procmaps_find(m, 0x55b81bac4fffULL);
	cr_assert_not_null(p);
	cr_expect_eq(p->start, 0x55b81bac3000ULL);
	p = procmaps_find(m, 0x55b81bac5000ULL);
	cr_assert_not_null(p);
	cr_expect_eq(p->start, 0x55b81bac5000ULL);

	/* end is exclusive where a gap follows */
	cr_expect_null(procmaps_find(m, 0x55b81baca000ULL));
	cr_expect_not_null(procmaps_find(m, 0x55b81bac9fffULL));

	/* before the first, in a gap, past the last */
	cr_expect_null(procmaps_find(m, 0));
	cr_expect_null(procmaps_find(m, 0x55b81bac2fffULL));
	cr_expect_null(procmaps_find(m, 0x600000000000ULL));
	cr_expect_null(procmaps_find(m, 0xffffffffff601000ULL));
	cr_expect_null(procmaps_find(m, UINT64_MAX));

	p = procmaps_find(m, 0xffffffffff600800ULL);
	cr_assert_not_null(p);
	cr_expect_str_eq(p->path, "[vsyscall]");

	/* every mapping is found at its start, middle and last byte */
	for (size_t i = 0; i < m->n; i++) {
		const struct procmap *e = &m->maps[i];

		cr_expect_eq(procmaps_find(m, e->start), e);
		cr_expect_eq(procmaps_find(m, e->start + (e->end - e->start) / 2), e);
		cr_expect_eq(procmaps_find(m, e->end - 1), e);
	}

	cr_expect_null(procmaps_find(NULL, 0x1000));
	procmaps_free(m);
}

Test(procmaps, unsorted_input_is_sorted)
{
	struct procmaps *m = parse_ok("5000-6000 r-xp 00000000 08:01 7 /c\n"
				      "1000-2000 r-xp 00000000 08:01 7 /a\n"
				      "3000-4000 r-xp 00000000 08:01 7 /b\n",
				      false);

	cr_assert_eq(m->n, 3);
	cr_expect_str_eq(m->maps[0].path, "/a");
	cr_expect_str_eq(m->maps[1].path, "/b");
	cr_expect_str_eq(m->maps[2].path, "/c");
	cr_expect_str_eq(procmaps_find(m, 0x5800)->path, "/c");
	procmaps_free(m);
}

Test(procmaps, malformed_lines)
{
	static const char *const bad[] = {
		"1000-2000 r-xp 00000000 08:01 7 /ok\n\n",       /* empty line */
		"garbage\n",
		"1000 r-xp 00000000 08:01 7 /x\n",               /* no end */
		"1000-2000\n",                                   /* truncated */
		"1000-2000 r-xp\n",
		"1000-2000 r-xp 00000000 08:01\n",               /* no inode */
		"1000-2000 rxp 00000000 08:01 7 /x\n",           /* short perms */
		"1000-2000 r-xq 00000000 08:01 7 /x\n",          /* bad share flag */
		"1000-2000 a-xp 00000000 08:01 7 /x\n",
		"1000-2000 r-xp 0000000g 08:01 7 /x\n",          /* bad offset */
		"1000-2000 r-xp 00000000 0801 7 /x\n",           /* no colon */
		"1000-2000 r-xp 00000000 08:01 7a /x\n",         /* inode not decimal */
		"1000-2000 r-xp 00000000 08:01 -7 /x\n",         /* sign */
		"-1000-2000 r-xp 00000000 08:01 7 /x\n",
		"0x1000-2000 r-xp 00000000 08:01 7 /x\n",        /* prefix */
		" 1000-2000 r-xp 00000000 08:01 7 /x\n",         /* leading blank */
		"1000-2000  r-xp 00000000 08:01 7 /x\n",         /* double blank */
		"2000-1000 r-xp 00000000 08:01 7 /x\n",          /* start > end */
		"2000-2000 r-xp 00000000 08:01 7 /x\n",          /* empty range */
		"1000-2000 r-xp 00000000 100000000:01 7 /x\n",   /* major too big */
		"1000-2000 r-xp 00000000 08:01 99999999999999999999 /x\n", /* overflow */
		"10000000000000000-10000000000000001 r-xp 00000000 08:01 7 /x\n",
		"1000-3000 r-xp 00000000 08:01 7 /a\n2000-4000 r-xp 00000000 08:01 7 /b\n", /* overlap */
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		struct procmaps *m = NULL;
		int r = parse_text(bad[i], false, &m);

		cr_expect_eq(r, -EINVAL, "fixture %zu (%s) gave %d", i, bad[i], r);
		cr_expect_null(m, "fixture %zu: output written on failure", i);
		procmaps_free(m);
	}
}

Test(procmaps, malformed_line_fails_even_when_filtered_out)
{
	struct procmaps *m = NULL;

	/* A non-executable line is still parsed before being dropped. */
	cr_expect_eq(parse_text("1000-2000 rw-p 00000000 08:01 x /x\n", true, &m), -EINVAL);
	cr_expect_null(m);
}

Test(procmaps, embedded_nul_is_malformed)
{
	static const char text[] = "1000-2000 r-xp 00000000 08:01 7 /a\0b\n";
	_cleanup_fclose_ FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");
	struct procmaps *m = NULL;

	cr_assert_not_null(f);
	cr_expect_eq(procmaps_parse(f, false, &m), -EINVAL);
	cr_expect_null(m);
}

Test(procmaps, over_long_line_is_malformed)
{
	const size_t pad = PROCMAPS_LINE_MAX;
	const char head[] = "1000-2000 r-xp 00000000 08:01 7 /";
	_cleanup_free_ char *text = malloc(sizeof(head) + pad + 64);
	struct procmaps *m = NULL;
	size_t n = sizeof(head) - 1;

	cr_assert_not_null(text);
	memcpy(text, head, n);
	memset(text + n, 'a', pad);
	n += pad;
	text[n++] = '\n';
	text[n] = '\0';
	cr_expect_eq(parse_text(text, false, &m), -EINVAL);
	cr_expect_null(m);
	/* the longest path the kernel writes still fits */
	n = sizeof(head) - 1 + 4095;
	text[n++] = '\n';
	text[n] = '\0';
	m = parse_ok(text, false);
	cr_expect_eq(m->n, 1);
	cr_expect_eq(strlen(m->maps[0].path), 4096);
	procmaps_free(m);
}

Test(procmaps, too_many_lines_are_refused)
{
	_cleanup_fclose_ FILE *f = tmpfile();
	struct procmaps *m = NULL;

	cr_assert_not_null(f);
	/* not executable, so nothing is kept while the lines are counted */
	for (uint64_t i = 0; i <= PROCMAPS_MAX_LINES; i++)
		fprintf(f, "%" PRIx64 "-%" PRIx64 " r--p 00000000 00:00 0\n", (i + 1) << 12,
			(i + 2) << 12);
	rewind(f);
	cr_expect_eq(procmaps_parse(f, true, &m), -EFBIG);
	cr_expect_null(m);
}

static __attribute__((noinline)) int a_function_in_this_test(int x)
{
	return x * 7 + 1;
}

Test(procmaps, read_own_pid_finds_own_code)
{
	uint64_t addr = (uint64_t)(uintptr_t)&a_function_in_this_test;
	struct procmaps *m = NULL;
	const struct procmap *p;
	char exe[PATH_MAX];
	ssize_t n;
	int r;

	cr_assert_eq(a_function_in_this_test(1), 8);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0);
	exe[n] = '\0';

	r = procmaps_read_pid(getpid(), false, &m);
	cr_assert_eq(r, 0, "procmaps_read_pid: %s", strerror(-r));
	cr_assert_gt(m->n, 3);
	p = procmaps_find(m, addr);
	cr_assert_not_null(p, "no mapping contains %#" PRIx64, addr);
	cr_expect(p->executable && p->readable && !p->writable);
	cr_expect_str_eq(p->path, exe);
	cr_expect_neq(p->inode, 0);
	procmaps_free(m);

	r = procmaps_read_pid(getpid(), true, &m);
	cr_assert_eq(r, 0);
	p = procmaps_find(m, addr);
	cr_assert_not_null(p);
	cr_expect_str_eq(p->path, exe);
	/* the stack is never executable */
	cr_expect_null(procmaps_find(m, (uint64_t)(uintptr_t)&r));
	cr_expect_null(find_path(m, "[stack]"));
	procmaps_free(m);
}

/* Maps read partly "on the loop" (a few bytes), the rest as a lane would,
 * are the maps read whole; ones that fit are parsed at once. */
Test(procmaps, mapsread_continues_where_the_loop_stopped)
{
	_cleanup_close_ int dirfd = -1;
	struct procmaps *whole = NULL, *m = NULL;
	struct mapsread *j = NULL;

	cr_assert_eq(procfs_open_pid(getpid(), PROCFS_START_ANY, &dirfd), 0);
	cr_assert_eq(procmaps_read_dirfd(dirfd, true, &whole), 0);
	cr_assert_eq(mapsread_start(dirfd, true, 100, &m, &j), 0);
	cr_assert_null(m);
	cr_assert_not_null(j);
	mapsread_run(j);
	cr_assert_eq(j->error, 0);
	cr_expect_not(j->truncated);
	cr_assert_eq(j->maps->n, whole->n);
	for (size_t i = 0; i < whole->n; i++) {
		cr_expect_eq(j->maps->maps[i].start, whole->maps[i].start);
		cr_expect_str_eq(j->maps->maps[i].path, whole->maps[i].path);
	}
	j = mapsread_free(j);

	cr_assert_eq(mapsread_start(dirfd, true, MAPSREAD_LOOP_BYTES, &m, &j), 0);
	cr_assert_null(j);
	cr_assert_not_null(m);
	cr_expect_eq(m->n, whole->n);
	procmaps_free(m);
	procmaps_free(whole);
}

Test(procmaps, read_gone_process)
{
	struct procmaps *m = NULL;
	pid_t pid;
	int status;

	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);

	cr_expect_eq(procmaps_read_pid(pid, false, &m), -ESRCH);
	cr_expect_null(m);
	cr_expect_eq(procmaps_read_pid(0, false, &m), -EINVAL);
	cr_expect_eq(procmaps_read_pid(-1, false, &m), -EINVAL);
}

Test(procmaps, free_accepts_null)
{
	cr_expect_null(procmaps_free(NULL));
}
