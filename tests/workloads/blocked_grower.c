/*
 * blocked_grower.c - a process that is blocked nearly all the time while
 * its resident memory grows in bursts: BURSTS times, it waits in read() on
 * a timerfd for INTERVAL seconds (1 by default), then grow_burst() maps
 * BURST_MIB MiB of anonymous memory and writes every page of it, which
 * takes a few milliseconds.
 *
 * Proves: the profiler follows the RSS of a process that is not on a CPU,
 * from the kernel's memory events, not from CPU samples: this one is in
 * state S (read() on the timerfd) more than 99% of the time and takes
 * nearly no CPU samples, yet its RSS changes every INTERVAL seconds.  The
 * pages are 4 KiB (MADV_NOHUGEPAGE), written with nonzero bytes so each is
 * a private page; after burst n the process holds n x BURST_MIB MiB more
 * than at "ready".
 *
 * usage: blocked_grower BURST_MIB BURSTS [--interval SECONDS] [--hold SECONDS]
 * output, one line each, flushed at once:
 *   "ready"          - at start, before the first wait
 *   "grown BYTES"    - after each burst: all the bursts so far hold BYTES
 *   "done"           - after --hold more seconds (default 0), blocked in
 *                      read() on the timerfd again; about to exit (status 0)
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "workload.h"

#define MIB (1024UL * 1024)

/* Maps bytes and writes one nonzero byte per page.  noipa: a frame of its
 * own; it calls mmap() and madvise(), so it is no leaf.  Returns 0, or -1
 * after saying why on stderr. */
__attribute__((noipa)) static int grow_burst(size_t bytes, size_t page_size)
{
	volatile char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		return -1;
	}
	if (madvise((void *)p, bytes, MADV_NOHUGEPAGE) < 0) {
		perror("madvise");
		return -1;
	}
	for (size_t o = 0; o < bytes; o += page_size)
		p[o] = (char)(o / page_size) | 1;
	return 0;
}

/* Blocks in read() on the timerfd fd until the timer has expired at least
 * once since the last read.  Returns 0, or -1 after saying why on stderr. */
static int wait_expiry(int fd)
{
	uint64_t expirations;
	ssize_t n;

	while ((n = read(fd, &expirations, sizeof(expirations))) < 0 && errno == EINTR)
		;
	if (n != sizeof(expirations)) {
		perror("read timerfd");
		return -1;
	}
	return 0;
}

/* Arms fd to expire after `seconds`, then every `seconds` (once when
 * interval is 0).  Returns 0, or -1 after saying why on stderr. */
static int arm(int fd, double seconds, double interval)
{
	struct itimerspec its = {
		.it_value = { (time_t)seconds,
			      (long)((seconds - (double)(time_t)seconds) * 1e9) },
		.it_interval = { (time_t)interval,
				 (long)((interval - (double)(time_t)interval) * 1e9) },
	};

	/* A zero it_value disarms the timer: 1 ns expires at once instead. */
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	if (timerfd_settime(fd, 0, &its, NULL) < 0) {
		perror("timerfd_settime");
		return -1;
	}
	return 0;
}

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s BURST_MIB BURSTS [--interval SECONDS] [--hold SECONDS]\n",
		argv0);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "hold", required_argument, NULL, 'h' },
		{}
	};
	double interval = 1, hold = 0;
	long burst_mib, bursts;
	size_t page_size = (size_t)sysconf(_SC_PAGESIZE);
	int c, fd;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (parse_seconds(optarg, &interval) < 0 || interval <= 0)
				return usage(argv[0]);
			break;
		case 'h':
			if (parse_seconds(optarg, &hold) < 0)
				return usage(argv[0]);
			break;
		default:
			return usage(argv[0]);
		}
	}
	if (argc - optind != 2 || parse_long(argv[optind], 1, 1L << 16, &burst_mib) < 0 ||
	    parse_long(argv[optind + 1], 0, 1L << 20, &bursts) < 0)
		return usage(argv[0]);

	fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (fd < 0) {
		perror("timerfd_create");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);

	/* A periodic timer: bursts stay INTERVAL apart however long each takes. */
	if (bursts > 0 && arm(fd, interval, interval) < 0)
		return 1;
	for (long b = 1; b <= bursts; b++) {
		if (wait_expiry(fd) < 0 || grow_burst((size_t)burst_mib * MIB, page_size) < 0)
			return 1;
		printf("grown %zu\n", (size_t)b * burst_mib * MIB);
		fflush(stdout);
	}

	if (arm(fd, hold, 0) < 0 || wait_expiry(fd) < 0)
		return 1;
	close(fd);
	printf("done\n");
	return fflush(stdout) == 0 ? 0 : 1;
}
