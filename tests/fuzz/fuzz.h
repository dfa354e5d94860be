/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - what the libFuzzer harnesses (tests/fuzz/fuzz-*.c) share: the
 * fuzzer's bytes handed to a parser the way perfd hands it real input, as
 * a FILE * (fmemopen) or as a file descriptor (a memfd, reused by every
 * run of a process: no file is written anywhere).  Each harness frees
 * all it made, so LeakSanitizer's report at exit is a finding.
 */
#ifndef PERFD_FUZZ_H
#define PERFD_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bytes as a stream opened for reading (fclose() it), or NULL when
 * out of memory.  Empty input reads as /dev/null: fmemopen refuses size 0. */
static inline FILE *fuzz_fopen(const uint8_t *data, size_t size)
{
	if (size == 0)
		return fopen("/dev/null", "re");
	/* "r": the buffer is only read, whatever fmemopen's prototype says */
	return fmemopen((void *)(uintptr_t)data, size, "r");
}

/* The bytes as the whole contents of a regular file open for reading and
 * writing, at offset 0; the fd belongs to this helper (do not close it).
 * Aborts when the memfd cannot be made or written: that is the harness's
 * environment failing, not the parser. */
static inline int fuzz_memfd(const uint8_t *data, size_t size)
{
	static int fd = -1;
	size_t done = 0;

	if (fd < 0)
		fd = memfd_create("perfd-fuzz", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 0) < 0)
		abort();
	while (done < size) {
		ssize_t k = pwrite(fd, data + done, size - done, (off_t)done);

		if (k <= 0)
			abort();
		done += (size_t)k;
	}
	if (lseek(fd, 0, SEEK_SET) < 0)
		abort();
	return fd;
}

/* The path under which open() finds fd (the memfd above). */
static inline void fuzz_fd_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

#endif
