/* SPDX-License-Identifier: MIT */
/*
 * test-sampler.c - unit tests for daemon/collect/sampler.c: the BPF object
 * is loaded and attached for real (root, as for the daemon), and the
 * descriptors it opens are accounted for.
 *
 * Each online CPU gets one perf event, owned from attachment on by its BPF
 * link (libbpf closes the event when the link is destroyed).  To catch a
 * descriptor closed twice, which would close whatever the number had been
 * given to meanwhile, this program interposes close(): the definition
 * below is the one libbpf and the daemon's modules call, and it counts the
 * calls made on a descriptor that was not open.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "collect/sampler.h"

static int closes_of_closed;

int close(int fd)
{
	long r = syscall(SYS_close, fd);

	if (r < 0 && errno == EBADF)
		closes_of_closed++;
	return (int)r;
}

static int on_record(void *ctx, void *data, size_t size)
{
	return 0;
}

/* How many descriptors of this process are perf events. */
static unsigned perf_event_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	unsigned n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d))) {
		char path[PATH_MAX], target[256];
		ssize_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = '\0';
		n += strcmp(target, "anon_inode:[perf_event]") == 0;
	}
	(void)closedir(d);
	return n;
}

static void check_descriptors(uint32_t unwind_rows)
{
	struct sampler_opts o = {
		.frequency_hz = 49,
		.ringbuf_bytes = 256 * 1024,
		.unwind_rows = unwind_rows,
		.unwind_mappings = unwind_rows ? 64 : 0,
		.unwind_processes = unwind_rows ? 64 : 0,
		.python_processes = unwind_rows ? 64 : 0,
		.on_record = on_record,
	};
	unsigned before = perf_event_fds();
	struct sampler *s = NULL;
	const char *what = NULL;
	int r;

	r = sampler_new(&o, &s, &what);
	cr_assert_eq(r, 0, "sampler_new: %s: %s (this suite needs root and BPF)", what,
		     strerror(-r));
	cr_assert_gt(sampler_cpus(s), 0);
	cr_assert_eq(perf_event_fds(), before + sampler_cpus(s));

	closes_of_closed = 0;
	sampler_free(s);
	cr_assert_eq(closes_of_closed, 0, "%d descriptors closed twice", closes_of_closed);
	cr_assert_eq(perf_event_fds(), before);
}

Test(sampler, frame_pointer_program_closes_each_descriptor_once, .timeout = 60)
{
	check_descriptors(0);
}

Test(sampler, table_program_closes_each_descriptor_once, .timeout = 60)
{
	check_descriptors(1024);
}
