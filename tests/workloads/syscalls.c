/*
 * syscalls.c - reads /dev/zero in 1 MiB blocks, so nearly all of its CPU is
 * spent in the kernel (read_zero() clearing the user buffer).
 *
 * Proves: kernel frames are captured together with the user stack that
 * entered the kernel, and are placed leafward of it: main ->
 * read_zero_blocks -> libc read -> entry_SYSCALL_64 ... ksys_read ->
 * vfs_read -> read_zero.  (libc's read() sets up no frame, so a frame-pointer
 * walk from it may skip read_zero_blocks; main stays.)
 *
 * usage: syscalls CPU_SECONDS
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

#define BLOCK (1024 * 1024)
#define READS_PER_CALL 16

/* Reads READS_PER_CALL blocks of /dev/zero into buf; returns bytes read or
 * -1 on a read error (reported). */
__attribute__((noipa)) static long read_zero_blocks(int fd, char *buf)
{
	long total = 0;

	for (int i = 0; i < READS_PER_CALL; i++) {
		ssize_t n = read(fd, buf, BLOCK);

		if (n < 0) {
			perror("read /dev/zero");
			return -1;
		}
		total += n;
	}
	return total;
}

int main(int argc, char **argv)
{
	char *end, *buf;
	double target;
	long long total = 0;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CPU_SECONDS\n", argv[0]);
		return 2;
	}
	target = strtod(argv[1], &end);
	if (end == argv[1] || *end != '\0' || !(target > 0)) {
		fprintf(stderr, "%s: bad CPU_SECONDS '%s'\n", argv[0], argv[1]);
		return 2;
	}
	fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror("open /dev/zero");
		return 1;
	}
	buf = malloc(BLOCK);
	if (!buf) {
		perror("malloc");
		return 1;
	}
	/* Fault the buffer in now, so the loop measures reads, not page faults. */
	memset(buf, 1, BLOCK);

	while (cpu_seconds() < target) {
		long n = read_zero_blocks(fd, buf);

		if (n < 0)
			return 1;
		total += n;
	}
	printf("%lld bytes\n", total);
	free(buf);
	close(fd);
	return 0;
}
