/* SPDX-License-Identifier: MIT */
/*
 * test-pthread-tsd.c - unit tests for daemon/pthread_tsd.c.
 *
 * The real check runs against the libc this very test runs on: its layout
 * is read with pthread_tsd_read(), then pthread keys are created (enough
 * that some fall in the second-level blocks, key >= 32) and set to
 * distinct values in the main thread and in a new thread, and the formula
 * of pthread_tsd.h, applied to each thread's fs base, must find exactly
 * what pthread_getspecific() returns.  Memory is read with
 * process_vm_readv() on ourselves, so a wrong layout fails an assertion
 * instead of crashing the test.
 *
 * Small libraries built at run time carry hand-written descriptors, to
 * check which word of each is used and that nonsense is refused.
 */
#include <criterion/criterion.h>
#include <asm/prctl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fixture.h"
#include "perfd/macro.h"
#include "interp/python/pthread_tsd.h"

extern char **environ;

#define N_KEYS 40

FIXTURE_SUITE(pthread_tsd, 20);

/* --- the test's own libc -------------------------------------------------- */

static int find_libc_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *base = strrchr(info->dlpi_name, '/');

	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libc.so", 7) != 0)
		return 0;
	snprintf(data, PATH_MAX, "%s", info->dlpi_name);
	return 1;
}

static int open_own_libc(void)
{
	char path[PATH_MAX] = "";
	int fd;

	cr_assert_eq(dl_iterate_phdr(find_libc_cb, path), 1, "libc is not loaded?");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	return fd;
}

static uint64_t read_self(uint64_t addr, const char *what)
{
	uint64_t v = 0;
	struct iovec local = { .iov_base = &v, .iov_len = sizeof(v) };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof(v) };

	cr_assert_eq(process_vm_readv(getpid(), &local, 1, &remote, 1, 0), (ssize_t)sizeof(v),
		     "%s at 0x%" PRIx64 " unreadable: %s", what, addr, strerror(errno));
	return v;
}

static uint64_t thread_pointer(void)
{
	unsigned long fs = 0;

	cr_assert_eq(syscall(SYS_arch_prctl, ARCH_GET_FS, &fs), 0, "arch_prctl: %s",
		     strerror(errno));
	return fs;
}

/* What pthread_getspecific(key) returns in the thread whose struct
 * pthread is at tp, by the formula in pthread_tsd.h. */
static uint64_t tsd_value(const struct pthread_tsd *t, uint64_t tp, pthread_key_t key)
{
	uint64_t block = read_self(tp + t->specific + (uint64_t)(key / 32) * 8, "specific[]");

	cr_assert_neq(block, 0, "key %u: no block", key);
	return read_self(block + (uint64_t)(key % 32) * t->key_data_size + t->key_data_data,
			 "key data");
}

static struct pthread_tsd layout;
static pthread_key_t keys[N_KEYS];

/* Sets every key to a value unique to (thread, key), then checks the
 * formula against pthread_getspecific for every key. */
static void set_and_check(unsigned thread)
{
	static char values[2][N_KEYS];
	uint64_t tp = thread_pointer();

	cr_assert_eq(tp, (uint64_t)pthread_self(), "the fs base is not struct pthread");
	for (size_t i = 0; i < N_KEYS; i++)
		cr_assert_eq(pthread_setspecific(keys[i], &values[thread][i]), 0);
	for (size_t i = 0; i < N_KEYS; i++) {
		uint64_t want = (uintptr_t)pthread_getspecific(keys[i]);
		uint64_t got = tsd_value(&layout, tp, keys[i]);

		cr_assert_eq(want, (uintptr_t)&values[thread][i]);
		cr_assert_eq(got, want, "thread %u key %u: formula 0x%" PRIx64 ", expected 0x%" PRIx64,
			     thread, keys[i], got, want);
	}
}

static void *thread_main(void *arg)
{
	set_and_check(1);
	return NULL;
}

Test(pthread_tsd, own_libc_formula_matches_getspecific)
{
	_cleanup_close_ int fd = open_own_libc();
	pthread_key_t max_key = 0;
	pthread_t th;

	cr_assert_eq(pthread_tsd_read(fd, &layout), 0);
	for (size_t i = 0; i < N_KEYS; i++) {
		cr_assert_eq(pthread_key_create(&keys[i], NULL), 0);
		max_key = MAX(max_key, keys[i]);
	}
	cr_assert_geq(max_key, 32, "no key in a second-level block");

	/* The main thread, then a new one whose blocks start empty. */
	set_and_check(0);
	cr_assert_eq(pthread_create(&th, NULL, thread_main, NULL), 0);
	cr_assert_eq(pthread_join(th, NULL), 0);
	/* The new thread did not disturb the main thread's values. */
	set_and_check(0);
	for (size_t i = 0; i < N_KEYS; i++)
		(void)pthread_key_delete(keys[i]);
}

/* --- files that are not glibc --------------------------------------------- */

Test(pthread_tsd, not_elf)
{
	static const char text[] = "#!/bin/sh\necho this is not ELF\n";
	_cleanup_close_ int fd = memfd_create("not-elf", MFD_CLOEXEC);
	struct pthread_tsd t = { .specific = 12345 };

	cr_assert_geq(fd, 0);
	cr_assert_eq(pthread_tsd_read(fd, &t), -ENOEXEC, "empty file");
	cr_assert_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	cr_assert_eq(pthread_tsd_read(fd, &t), -ENOEXEC);
	cr_assert_eq(t.specific, 12345, "written on error");
}

/* The test binary is ELF but exports no _thread_db_* descriptors. */
Test(pthread_tsd, elf_without_descriptors)
{
	_cleanup_close_ int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	struct pthread_tsd t = { .specific = 12345 };

	cr_assert_geq(fd, 0);
	cr_assert_eq(pthread_tsd_read(fd, &t), -ENOENT);
	cr_assert_eq(t.specific, 12345, "written on error");
}

/* --- hand-written descriptors --------------------------------------------- */

/* Builds a shared library exporting the descriptors given as C
 * definitions and opens it. */
static int build_descriptors(const char *definitions)
{
	char src[PATH_MAX], lib[PATH_MAX];
	char *argv[] = { (char *)"cc", (char *)"-shared", (char *)"-fPIC", (char *)"-nostdlib",
			 (char *)"-o", lib, src, NULL };
	char text[2048];
	int n, fd;

	n = snprintf(text, sizeof(text), "typedef unsigned int u32;\n%s", definitions);
	cr_assert(n > 0 && (size_t)n < sizeof(text));
	write_file("desc.c", text, (size_t)n);
	path_in_workdir(src, sizeof(src), "desc.c");
	path_in_workdir(lib, sizeof(lib), "libdesc.so");
	run(argv);
	fd = open(lib, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", lib, strerror(errno));
	return fd;
}

/* {size in bits, count, offset}: only the offset (and the data field's
 * size) matter; the other words differ so that using them shows. */
#define DESC(specific_off, data_bits, data_off, key_size)                              \
	"const u32 _thread_db_pthread_specific[3] = { 64, 32, " #specific_off " };\n"  \
	"const u32 _thread_db_pthread_key_data_data[3] = { " #data_bits ", 1, " #data_off " };\n" \
	"const u32 _thread_db_sizeof_pthread_key_data = " #key_size ";\n"

Test(pthread_tsd, handwritten_descriptors)
{
	_cleanup_close_ int fd = build_descriptors(DESC(1296, 64, 8, 16) "const u32 pad = 7;\n");
	struct pthread_tsd t;

	cr_assert_eq(pthread_tsd_read(fd, &t), 0);
	cr_assert_eq(t.specific, 1296);
	cr_assert_eq(t.key_data_size, 16);
	cr_assert_eq(t.key_data_data, 8);
}

Test(pthread_tsd, handwritten_descriptor_missing)
{
	_cleanup_close_ int fd = build_descriptors(
		"const u32 _thread_db_pthread_specific[3] = { 64, 32, 1296 };\n"
		"const u32 _thread_db_sizeof_pthread_key_data = 16;\n");
	struct pthread_tsd t = { .specific = 12345 };

	cr_assert_eq(pthread_tsd_read(fd, &t), -ENOENT);
	cr_assert_eq(t.specific, 12345);
}

static void check_invalid(const char *definitions)
{
	_cleanup_close_ int fd = build_descriptors(definitions);
	struct pthread_tsd t = { .specific = 12345 };

	cr_assert_eq(pthread_tsd_read(fd, &t), -EINVAL, "%s", definitions);
	cr_assert_eq(t.specific, 12345);
}

Test(pthread_tsd, nonsense_data_not_a_pointer) { check_invalid(DESC(1296, 32, 8, 16)); }
Test(pthread_tsd, nonsense_data_outside_record) { check_invalid(DESC(1296, 64, 12, 16)); }
Test(pthread_tsd, nonsense_record_too_big) { check_invalid(DESC(1296, 64, 8, 4096)); }
Test(pthread_tsd, nonsense_specific_zero) { check_invalid(DESC(0, 64, 8, 16)); }
Test(pthread_tsd, nonsense_specific_huge) { check_invalid(DESC(1000000, 64, 8, 16)); }
