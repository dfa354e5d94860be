/* SPDX-License-Identifier: MIT */
/*
 * test-builder.c - the unwind-table builder thread (daemon/unwind/builder.c)
 * on real binaries: a build comes back with its table and segments and its
 * descriptor closed; a small binary's table is not held up behind a huge
 * one's (the two lanes), nor is a big file's with little call-frame
 * information; submitting reads nothing of the file on the caller's
 * thread (a file system need not answer the loop); an unreadable file
 * comes back with its error; and a builder freed with jobs queued and in
 * progress stops and frees them all.
 *
 * The huge binary is libLLVM (a dependency of the clang that builds the BPF
 * programs, so it is on every machine that builds perfd): its 4.8 MiB of
 * .eh_frame take hundreds of times longer than this test program's, which
 * is what makes the order deterministic.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "noread.h"
#include "perfd/macro.h"
#include "unwind/builder.h"

/* Waits for the builder's next finished jobs (a minute at most). */
static struct build_job *wait_done(struct builder *b)
{
	for (;;) {
		struct pollfd pfd = { .fd = builder_fd(b), .events = POLLIN };
		struct build_job *j;

		cr_assert_eq(poll(&pfd, 1, 60000), 1, "no build finished in a minute");
		j = builder_take_done(b);
		if (j)
			return j;
	}
}

static int open_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "open %s", path);
	return fd;
}

static char *huge_library(void)
{
	glob_t g;
	char *path;

	cr_assert_eq(glob("/usr/lib/x86_64-linux-gnu/libLLVM-*.so.1", 0, NULL, &g), 0,
		     "no libLLVM: clang's library is needed for this test");
	path = strdup(g.gl_pathv[0]);
	globfree(&g);
	return path;
}

Test(builder, a_build_comes_back_with_its_table_and_segments)
{
	struct builder *b = NULL;
	struct build_job *j;

	cr_assert_eq(builder_new(-1, 0, &b), 0);
	cr_assert_eq(builder_submit(b, 7, open_file("/proc/self/exe")), 0);
	j = wait_done(b);
	cr_assert_eq(j->key, 7);
	cr_assert_eq(j->stage, BUILD_STAGE_BUILD);
	cr_assert_eq(j->r, 0);
	cr_assert_not_null(j->table);
	cr_assert_gt(j->table->n_rows, 0);
	cr_assert_gt(j->n_segs, 0);
	cr_assert_eq(j->fd, -1, "the job's descriptor was not closed");
	cr_assert_null(j->next);
	build_job_free(j);
	builder_free(b);
}

struct submit {
	struct builder *b;
	int fd, r;
};

static void submit(void *arg)
{
	struct submit *s = arg;

	s->r = builder_submit(s->b, 7, s->fd);
}

/* Submitting a build reads nothing of its file on the caller's thread,
 * not even to weigh it: the loop that submits must not wait for a file
 * system that does not answer.  The lane weighs it, and builds it. */
Test(builder, a_build_is_weighed_and_read_on_a_lane_only)
{
	struct submit s = { .fd = open_file("/proc/self/exe"), .r = 1 };
	struct build_job *j;
	int call;

	cr_assert_eq(builder_new(-1, 0, &s.b), 0);
	call = call_reading_no_file(submit, &s);
	cr_assert_eq(call, 0, "builder_submit made system call %d on the caller's thread", call);
	cr_assert_eq(s.r, 0);
	j = wait_done(s.b);
	cr_assert_eq(j->r, 0, "r = %d", j->r);
	cr_assert_gt(j->table->n_rows, 0);
	build_job_free(j);
	builder_free(s.b);
}

/* A build past the builder's CPU time is abandoned: libLLVM's table takes
 * ~1.5 s of CPU, past 100 ms (the daemon's --unwind-build-cpu-ms). */
Test(builder, a_build_past_its_cpu_time_is_abandoned)
{
	_cleanup_free_ char *huge = huge_library();
	struct builder *b = NULL;
	struct build_job *j;

	cr_assert_eq(builder_new(-1, 100 * 1000000ULL, &b), 0);
	cr_assert_eq(builder_submit(b, 1, open_file(huge)), 0);
	j = wait_done(b);
	cr_assert_eq(j->r, -ETIMEDOUT, "r = %d", j->r);
	cr_assert_null(j->table);
	build_job_free(j);
	builder_free(b);
}

Test(builder, a_file_that_is_no_elf_comes_back_with_its_error)
{
	struct builder *b = NULL;
	struct build_job *j;
	char path[] = "/tmp/perfd-builder.XXXXXX";
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "not an ELF file\n", 16), 16);
	unlink(path);
	cr_assert_eq(builder_new(-1, 0, &b), 0);
	cr_assert_eq(builder_submit(b, 1, fd), 0);
	j = wait_done(b);
	cr_assert_eq(j->r, -ENOEXEC, "r = %d", j->r);
	cr_assert_null(j->table);
	cr_assert_null(j->segs);
	build_job_free(j);
	builder_free(b);
}

/* libLLVM twice (as many huge jobs as there are threads), then the small
 * binary open on small_fd: the small one is built while the huge ones
 * still are, because one lane never takes a huge job. */
static void assert_not_behind_huge_ones(int small_fd)
{
	struct builder *b = NULL;
	struct build_job *first, *rest;
	char *huge = huge_library();
	int huge_done = 0;

	cr_assert_eq(builder_new(-1, 0, &b), 0);
	cr_assert_eq(builder_submit(b, 1, open_file(huge)), 0);
	cr_assert_eq(builder_submit(b, 1, open_file(huge)), 0);
	usleep(50 * 1000); /* let the lanes take what they take: the worst order */
	cr_assert_eq(builder_submit(b, 2, small_fd), 0);
	first = wait_done(b);
	cr_assert_eq(first->key, 2, "the small binary came back after a huge one");
	cr_assert_null(first->next, "it came back with a huge one: it waited");
	cr_assert_eq(first->r, 0);
	while (huge_done < 2) {
		rest = wait_done(b);
		for (struct build_job *j = rest, *next; j; j = next) {
			next = j->next;
			cr_assert_eq(j->key, 1);
			cr_assert_eq(j->r, 0);
			/* huge against small: libLLVM is ~1.5M rows, this program (every
			 * daemon and perfctl object) tens of thousands */
			cr_assert_gt(j->table->n_rows, 10 * first->table->n_rows);
			build_job_free(j);
			huge_done++;
		}
	}
	build_job_free(first);
	builder_free(b);
	free(huge);
}

Test(builder, a_small_binary_does_not_wait_behind_huge_ones)
{
	assert_not_behind_huge_ones(open_file("/proc/self/exe"));
}

/* A binary is as heavy as its call-frame information, not its file: this
 * program followed by 32 MiB (as debug information would be; libpython
 * 3.13 with its own is 30 MiB around 351 KiB of .eh_frame) is still
 * small.  Weighed by its size, it waited for libLLVM. */
Test(builder, a_big_file_with_little_cfi_does_not_wait_behind_huge_ones)
{
	char path[] = "/tmp/perfd-builder.XXXXXX";
	int in = open_file("/proc/self/exe"), out = mkostemp(path, O_CLOEXEC);
	char buf[65536];
	ssize_t n;

	cr_assert_geq(out, 0);
	unlink(path);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		cr_assert_eq(write(out, buf, (size_t)n), n);
	cr_assert_eq(n, 0);
	close(in);
	cr_assert_eq(ftruncate(out, lseek(out, 0, SEEK_END) + (32 << 20)), 0);
	assert_not_behind_huge_ones(out);
}

/* Freed while a lane builds libLLVM and more wait: it stops after that
 * build, and everything goes (the sanitized build checks the leaks). */
Test(builder, freed_with_jobs_queued_and_in_progress)
{
	struct builder *b = NULL;
	char *huge = huge_library();

	cr_assert_eq(builder_new(-1, 0, &b), 0);
	cr_assert_eq(builder_submit(b, 1, open_file(huge)), 0);
	cr_assert_eq(builder_submit(b, 2, open_file(huge)), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(builder_submit(b, 10 + i, open_file("/proc/self/exe")), 0);
	usleep(20 * 1000);
	builder_free(b);
	free(huge);
}
