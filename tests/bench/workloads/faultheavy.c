/*
 * faultheavy.c - page faults as fast as one CPU can take them: each round
 * writes one byte in every 4 KiB page of a MIB MiB anonymous mapping (2 GiB
 * by default), which faults every page in, then gives all of them back with
 * madvise(MADV_DONTNEED), so the next round faults them in again.
 *
 * The benchmark's worst case for memory profiling: nearly all of this
 * process's time is the kernel allocating, zeroing and mapping pages, and
 * every one of them is a growth of its RSS (an rss_stat event), so the
 * slowdown of a fixed number of rounds with memory profiling on, against
 * off, bounds what profiling costs any workload.  One mapping is reused
 * round after round, so memory stays bounded: at most MIB MiB per worker,
 * whatever the number of rounds.  The mapping is MADV_NOHUGEPAGE: pages are
 * 4 KiB whatever the THP setting, so a round is MIB x 256 faults.
 *
 * Two ways to stop, as in deep.c:
 *   -n ROUNDS   each worker does exactly ROUNDS rounds (slowdown: fixed work,
 *               whose wall time grows with any cost a profiler adds);
 *   -t SECONDS  each worker stops after the first round that takes it past
 *               that much CPU time (cost per event: a known busy time; the
 *               kernel's work on our faults is charged to our system time).
 * -w WORKERS runs that many workers, one process each (the first is this
 * process, the others its children), each with its own mapping.
 * -p SECONDS sleeps first, before mapping anything, so a profiler can start
 * watching.
 *
 * usage: faultheavy [-m MIB] [-w WORKERS] [-p PAUSE_SECONDS] (-n ROUNDS | -t CPU_SECONDS)
 * output: one line per worker, when it is done, fields in pairs:
 *   "worker N rounds R mib M wall_per_round S median_per_round S
 *    min_per_round S cpu_per_round S faults_per_round F"
 *   with seconds per round (wall: mean, median and fastest; CPU, user +
 *   system: mean) and the minor faults per round (getrusage), which should
 *   be M x 256 (the pages of the mapping).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../../workloads/workload.h"

#define MIB (1024UL * 1024)
#define PAGE 4096UL

static double wall_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long minor_faults(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : 0;
}

/* One round: faults every page of [p, p + bytes) in, then drops them all.
 * noipa: a frame of its own (it calls madvise, so it is no leaf).  Returns
 * 0, or -1 after saying why on stderr. */
__attribute__((noipa)) static int fault_round(char *p, size_t bytes, unsigned round)
{
	volatile char *v = p;

	for (size_t o = 0; o < bytes; o += PAGE)
		v[o] = (char)(round + o / PAGE) | 1;
	if (madvise(p, bytes, MADV_DONTNEED) < 0) {
		perror("madvise(MADV_DONTNEED)");
		return -1;
	}
	return 0;
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n), n > 0; sorts v. */
static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), compare_doubles);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Runs one worker to the end and prints its line.  Returns 0, or -1 after
 * saying why on stderr. */
static int worker(int id, size_t bytes, unsigned long rounds, double cpu_budget)
{
	size_t cap = rounds > 0 ? rounds : 64, done = 0;
	double *times = malloc(cap * sizeof(*times)), wall_sum = 0, cpu0, cpu, med;
	long faults0, faults;
	char *p;

	if (!times) {
		perror("malloc");
		return -1;
	}
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return -1;
	}
	if (madvise(p, bytes, MADV_NOHUGEPAGE) < 0) {
		perror("madvise(MADV_NOHUGEPAGE)");
		return -1;
	}

	cpu0 = cpu_seconds();
	faults0 = minor_faults();
	/* do-while: at least one round, so every figure below is defined. */
	do {
		double t0 = wall_seconds();

		if (fault_round(p, bytes, (unsigned)done) < 0)
			return -1;
		if (done == cap) {
			double *more = realloc(times, 2 * cap * sizeof(*times));

			if (!more) {
				perror("realloc");
				return -1;
			}
			times = more;
			cap *= 2;
		}
		times[done] = wall_seconds() - t0;
		wall_sum += times[done++];
	} while (rounds > 0 ? done < rounds : cpu_seconds() < cpu_budget);

	cpu = cpu_seconds() - cpu0;
	faults = minor_faults() - faults0;
	med = median(times, done); /* sorts: times[0] is the fastest after it */
	printf("worker %d rounds %zu mib %zu wall_per_round %.6f median_per_round %.6f "
	       "min_per_round %.6f cpu_per_round %.6f faults_per_round %ld\n",
	       id, done, bytes / MIB, wall_sum / done, med, times[0],
	       cpu / done, faults / (long)done);
	free(times);
	(void)munmap(p, bytes);
	return fflush(stdout) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	long mib = 2048, workers = 1, rounds = 0;
	double budget = 0, pause = 0;
	int c, failed, r;

	while ((c = getopt(argc, argv, "m:w:p:n:t:")) != -1) {
		switch (c) {
		case 'm':
			if (parse_long(optarg, 1, 1L << 20, &mib) < 0)
				goto usage;
			break;
		case 'w':
			if (parse_long(optarg, 1, 256, &workers) < 0)
				goto usage;
			break;
		case 'p':
			if (parse_seconds(optarg, &pause) < 0)
				goto usage;
			break;
		case 'n':
			if (parse_long(optarg, 1, 1000000000L, &rounds) < 0)
				goto usage;
			break;
		case 't':
			if (parse_seconds(optarg, &budget) < 0 || !(budget > 0))
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc || (rounds > 0) == (budget > 0))
		goto usage;
	if (pause_seconds(pause) < 0)
		return 1;

	fflush(stdout);
	for (long i = 1; i < workers; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			_exit(worker((int)i, (size_t)mib * MIB, (unsigned long)rounds, budget) < 0);
	}
	r = worker(0, (size_t)mib * MIB, (unsigned long)rounds, budget);
	failed = wait_children(workers - 1);
	return r < 0 || failed ? 1 : 0;
usage:
	fprintf(stderr, "usage: %s [-m MIB] [-w WORKERS] [-p PAUSE_SECONDS] "
		"(-n ROUNDS | -t CPU_SECONDS)\n", argv[0]);
	return 2;
}
