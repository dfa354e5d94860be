/*
 * server.c - a request/response service on loopback TCP, for the benchmark:
 * CLIENTS client threads each keep one connection and send 64-byte
 * requests one at a time; a server thread per connection reads each,
 * computes for about WORK_US microseconds and answers.  Every request is
 * two blocking reads and two wake-ups, as in a service whose handlers
 * wait for their clients: the context-switch rate of a busy server, not
 * of a ping-pong.
 *
 * usage: server SECONDS [CLIENTS [WORK_US]]   (defaults 8 and 200)
 * output: "requests N" when SECONDS have passed: requests answered.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../workloads/workload.h"

#define REQUEST 64

static double deadline;
static long work_us = 200;
static atomic_ulong answered;
static struct sockaddr_in addr;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int read_all(int fd, char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* noipa: a frame of its own for the handler's work */
__attribute__((noipa)) static void handle(char *buf)
{
	double until = now() + work_us / 1e6;
	uint64_t x = (uint64_t)buf[0];

	while (now() < until)
		for (int i = 0; i < 200; i++)
			x = x * 6364136223846793005ULL + 1;
	buf[1] = (char)x;
}

static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[REQUEST];

	while (read_all(fd, buf, sizeof(buf)) == 0) {
		handle(buf);
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			break;
		atomic_fetch_add(&answered, 1);
	}
	close(fd);
	return NULL;
}

static void *client(void *arg)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	char buf[REQUEST] = { 0 };

	(void)arg;
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (now() < deadline) {
		if (write(fd, buf, sizeof(buf)) != sizeof(buf) || read_all(fd, buf, sizeof(buf)) < 0)
			break;
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	long clients = 8;
	double seconds;
	socklen_t len = sizeof(addr);
	pthread_t *threads;
	int lfd;

	if (argc < 2 || parse_seconds(argv[1], &seconds) < 0 ||
	    (argc > 2 && parse_long(argv[2], 1, 1024, &clients) < 0) ||
	    (argc > 3 && parse_long(argv[3], 0, 1000000, &work_us) < 0)) {
		fprintf(stderr, "usage: %s SECONDS [CLIENTS [WORK_US]]\n", argv[0]);
		return 2;
	}
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(lfd, 1024) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&addr, &len) < 0) {
		perror("listen");
		return 1;
	}
	deadline = now() + seconds;
	threads = calloc((size_t)clients * 2, sizeof(*threads));
	for (long i = 0; i < clients; i++)
		pthread_create(&threads[i], NULL, client, NULL);
	for (long i = 0; i < clients; i++) {
		int fd = accept(lfd, NULL, NULL), one = 1;

		if (fd < 0) {
			perror("accept");
			return 1;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_create(&threads[clients + i], NULL, serve, (void *)(intptr_t)fd);
	}
	for (long i = 0; i < 2 * clients; i++)
		pthread_join(threads[i], NULL);
	printf("requests %lu\n", (unsigned long)atomic_load(&answered));
	return 0;
}
