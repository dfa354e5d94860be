/*
 * waits.c - a thread that waits, in one known way at a time, for SECONDS:
 *
 *   pipe    read_pipe() reads a pipe another process fills with a byte
 *           every 50 ms: it waits on the pipe ~all its time;
 *   tcp     recv_reply() waits for the answer of a loopback TCP server
 *           (another process) that answers each byte after 50 ms: it
 *           waits on the network ~all its time;
 *   pinned  two processes spin in spin_pinned() on CPU 0 alone: each is
 *           runnable all the time and runs about half of it, waiting
 *           for the CPU the other half;
 *   disk    read_disk() reads 4 KiB at random places of a 16 MiB file in
 *           DIR opened O_DIRECT (no page cache: every read goes to the
 *           device), one after the other: it waits for the disk most
 *           of its time.
 *
 * Proves: off-CPU time says why a thread waited ([wait: pipe],
 * [wait: network], [wait: cpu], [wait: disk]) under the function that
 * waited.
 *
 * usage: waits pipe|tcp|pinned SECONDS
 *        waits disk SECONDS DIR   (DIR on a block device: not tmpfs)
 * output: "ready PID..." (the processes that wait: the reader, the client,
 *         the two spinners), then "done" at the end.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void nap_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

/* noipa: frames of their own, named by every block in them. */
__attribute__((noipa)) static int read_pipe(int fd, char *c)
{
	return (int)read(fd, c, 1);
}

__attribute__((noipa)) static int recv_reply(int fd, char *c)
{
	return (int)recv(fd, c, 1, 0);
}

__attribute__((noipa)) static ssize_t read_disk(int fd, void *buf, off_t at)
{
	return pread(fd, buf, 4096, at);
}

__attribute__((noipa)) static void spin_pinned(double until)
{
	while (now() < until)
		for (int i = 0; i < 100000; i++)
			workload_sink += (uint64_t)i;
}

static int do_pipe(double seconds)
{
	int p[2];
	char c;
	pid_t writer;

	if (pipe(p) < 0)
		return 1;
	writer = fork();
	if (writer == 0) {
		double end = now() + seconds;

		close(p[0]);
		while (now() < end && write(p[1], "x", 1) == 1)
			nap_ms(50);
		_exit(0);
	}
	close(p[1]);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (read_pipe(p[0], &c) == 1)
		;
	waitpid(writer, NULL, 0);
	return 0;
}

static int do_tcp(double seconds)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
	double end = now() + seconds;
	pid_t server;
	char c = 'x';

	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&addr, &len) < 0)
		return 1;
	server = fork();
	if (server == 0) {
		int cfd = accept(lfd, NULL, NULL);

		while (cfd >= 0 && recv(cfd, &c, 1, 0) == 1) {
			nap_ms(50);
			if (send(cfd, &c, 1, 0) != 1)
				break;
		}
		_exit(0);
	}
	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		return 1;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (now() < end && send(fd, &c, 1, 0) == 1 && recv_reply(fd, &c) == 1)
		;
	close(fd);
	waitpid(server, NULL, 0);
	return 0;
}

static int do_pinned(double seconds)
{
	double end = now() + seconds;
	pid_t kids[2];
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			if (sched_setaffinity(0, sizeof(one), &one) < 0)
				_exit(1);
			spin_pinned(end);
			_exit(0);
		}
	}
	printf("ready %d %d\n", (int)kids[0], (int)kids[1]);
	fflush(stdout);
	for (int i = 0; i < 2; i++)
		waitpid(kids[i], NULL, 0);
	return 0;
}

#define DISK_FILE_BYTES (16L << 20)

static int do_disk(double seconds, const char *dir)
{
	static char chunk[1 << 20];
	char path[4096];
	double end = now() + seconds;
	unsigned seed = 1;
	void *buf;
	int fd;

	snprintf(path, sizeof(path), "%s/waits-disk-%d", dir, (int)getpid());
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return 1;
	memset(chunk, 'x', sizeof(chunk));
	for (long done = 0; done < DISK_FILE_BYTES; done += (long)sizeof(chunk))
		if (write(fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
			return 1;
	if (fsync(fd) < 0 || close(fd) < 0)
		return 1;
	fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	unlink(path); /* nothing left behind, whatever happens */
	if (fd < 0) {
		fprintf(stderr, "waits: O_DIRECT in %s: %s (tmpfs has none)\n", dir, strerror(errno));
		return 1;
	}
	if (posix_memalign(&buf, 4096, 4096))
		return 1;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (now() < end)
		if (read_disk(fd, buf, (off_t)(rand_r(&seed) % (DISK_FILE_BYTES / 4096)) * 4096) != 4096)
			return 1;
	free(buf);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	double seconds;
	int r;

	if (argc < 3 || argc != 3 + !strcmp(argv[1], "disk") || parse_seconds(argv[2], &seconds) < 0) {
		fprintf(stderr, "usage: %s pipe|tcp|pinned SECONDS, or %s disk SECONDS DIR\n", argv[0],
			argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(argv[1], "pipe"))
		r = do_pipe(seconds);
	else if (!strcmp(argv[1], "tcp"))
		r = do_tcp(seconds);
	else if (!strcmp(argv[1], "pinned"))
		r = do_pinned(seconds);
	else if (!strcmp(argv[1], "disk"))
		r = do_disk(seconds, argv[3]);
	else
		r = 2;
	if (r)
		perror(argv[1]);
	else
		printf("done\n");
	return r;
}
