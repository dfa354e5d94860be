/* SPDX-License-Identifier: MIT */
/*
 * pybench.c - what naming Python frames costs perfd in user space, with the
 * daemon's own code (linked from its objects, like symbench).
 *
 * Each run starts a fresh CPython that compiles N distinct functions (six
 * lines each, so every line table has several entries), prints the
 * address of each code object (id() is the address in CPython), its
 * bytecode size and first line, and waits for its stdin to close.  Then:
 *
 *   detect     procmaps_read_pid() + pyruntime_detect(): what a new Python
 *              process costs before any of its frames is named;
 *   new code   pycode_read() of every code object, each for the first
 *              time: the process_vm_readv() calls that fetch its name,
 *              file, first line and line table.  This is the daemon's cost
 *              the first time a sample shows a code object (python.c adds
 *              interning the name, a hash and a copy, which is not timed);
 *   one read   one 8-byte pymem_read() (a process_vm_readv() call), the
 *              unit pycode_read() pays four times per code object (the code
 *              object, its two strings and its line table);
 *   cached     for a code object already read, the daemon's per-frame work
 *              at every sample: the per-process u64map lookup by address
 *              and pylinetable_line() at an instruction offset, offsets
 *              spread over each function's bytecode.
 *
 * A fresh process per run keeps the first reads first.  Every name and
 * first line read is checked against what the script printed.  Prints one
 * JSON object with the value of each run, in run order.
 *
 * usage: pybench PYTHON N RUNS   (as root, or allowed to ptrace PYTHON)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "process/procmaps.h"
#include "interp/python/pycode.h"
#include "interp/python/pylinetable.h"
#include "interp/python/pyruntime.h"
#include "base/u64map.h"

/* The functions' file name, as co_filename will say. */
#define GEN_FILE "/pybench/generated.py"
/* Lines per generated function (its def included). */
#define GEN_LINES 6

static const char script[] =
	"import sys\n"
	"n = int(sys.argv[1])\n"
	"src = ''.join('def f%05d(a):\\n    b = a + %d\\n    c = b * 2\\n'\n"
	"              '    if c > 10:\\n        c -= 1\\n    return c\\n' % (i, i)\n"
	"              for i in range(n))\n"
	"ns = {}\n"
	"exec(compile(src, '" GEN_FILE "', 'exec'), ns)\n"
	"out = sys.stdout\n"
	"for i in range(n):\n"
	"    co = ns['f%05d' % i].__code__\n"
	"    out.write('%d %d %d\\n' % (id(co), len(co.co_code), co.co_firstlineno))\n"
	"out.write('end\\n')\n"
	"out.flush()\n"
	"sys.stdin.read()\n";

struct child {
	pid_t pid;
	int to_child;  /* its stdin: closing it ends the child */
	FILE *from_child;
};

struct code_info {
	uint64_t addr;
	uint32_t code_bytes;
	int32_t firstlineno;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Ends the child: closing its stdin ends the script, SIGTERM covers one
 * that has not got there yet. */
static void child_stop(struct child *c)
{
	int status;

	if (c->to_child >= 0)
		close(c->to_child);
	if (c->from_child)
		fclose(c->from_child);
	if (c->pid > 0) {
		(void)kill(c->pid, SIGTERM);
		(void)waitpid(c->pid, &status, 0);
	}
	*c = (struct child){ .pid = -1, .to_child = -1 };
}

/* Starts `python -c script n` with pipes on its stdin and stdout. */
static int child_start(const char *python, int n, struct child *ret)
{
	int in[2], out[2];
	char arg[32];
	pid_t pid;

	snprintf(arg, sizeof(arg), "%d", n);
	if (pipe2(in, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(out, O_CLOEXEC) < 0) {
		int r = -errno;

		close(in[0]);
		close(in[1]);
		return r;
	}
	pid = fork();
	if (pid < 0) {
		int r = -errno;

		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		return r;
	}
	if (pid == 0) {
		/* dup2() clears close-on-exec on the copies */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
			_exit(127);
		execl(python, python, "-c", script, arg, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*ret = (struct child){ .pid = pid, .to_child = in[1], .from_child = fdopen(out[0], "r") };
	if (!ret->from_child) {
		close(out[0]);
		child_stop(ret);
		return -ENOMEM;
	}
	return 0;
}

/* Reads the script's n lines "ADDR CODE_BYTES FIRSTLINENO" and its "end". */
static int child_read_codes(struct child *c, int n, struct code_info *ret)
{
	char line[128];

	for (int i = 0; i < n; i++) {
		uint64_t addr;
		unsigned bytes;
		int first;

		if (!fgets(line, sizeof(line), c->from_child))
			return -EPIPE;
		if (sscanf(line, "%" SCNu64 " %u %d", &addr, &bytes, &first) != 3 || bytes < 2)
			return -EBADMSG;
		ret[i] = (struct code_info){ .addr = addr, .code_bytes = bytes, .firstlineno = first };
	}
	if (!fgets(line, sizeof(line), c->from_child) || strcmp(line, "end\n") != 0)
		return -EBADMSG;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void print_runs(const char *key, const double *v, int runs, const char *end)
{
	printf(" \"%s\": [", key);
	for (int r = 0; r < runs; r++)
		printf("%s%.4g", r ? ", " : "", v[r]);
	printf("]%s\n", end);
}

int main(int argc, char **argv)
{
	int n, runs;
	double *detect_ms, *new_us, *read_us, *cached_ns, linetable_bytes = 0, without_line = 0;
	struct code_info *info;
	struct pycode *codes;
	unsigned major = 0, minor = 0;
	int patch = -1;

	if (argc != 4 || (n = atoi(argv[2])) <= 0 || n > 99999 || (runs = atoi(argv[3])) <= 0) {
		fprintf(stderr, "usage: %s PYTHON N RUNS   (N up to 99999)\n", argv[0]);
		return 2;
	}
	detect_ms = calloc(runs, sizeof(double));
	new_us = calloc(runs, sizeof(double));
	read_us = calloc(runs, sizeof(double));
	cached_ns = calloc(runs, sizeof(double));
	info = calloc(n, sizeof(*info));
	codes = calloc(n, sizeof(*codes));
	if (!detect_ms || !new_us || !read_us || !cached_ns || !info || !codes) {
		fprintf(stderr, "pybench: out of memory\n");
		return 1;
	}

	for (int run = 0; run < runs; run++) {
		struct child c = { .pid = -1, .to_child = -1 };
		struct procmaps *maps = NULL;
		struct pyruntime rt;
		struct u64map index;
		double t0, elapsed;
		uint64_t lookups = 0, lines_unknown = 0;
		int64_t sink = 0;
		int r;

		r = child_start(argv[1], n, &c);
		if (r < 0) {
			fprintf(stderr, "pybench: cannot start %s: %s\n", argv[1], strerror(-r));
			return 1;
		}
		r = child_read_codes(&c, n, info);
		if (r < 0) {
			fprintf(stderr, "pybench: %s did not list its %d code objects: %s\n", argv[1], n,
				strerror(-r));
			child_stop(&c);
			return 1;
		}

		t0 = now();
		r = procmaps_read_pid(c.pid, false, &maps);
		if (r >= 0)
			r = pyruntime_detect(c.pid, maps, &rt);
		detect_ms[run] = (now() - t0) * 1e3;
		procmaps_free(maps);
		if (r < 0) {
			fprintf(stderr, "pybench: no supported CPython in %s (pid %d): %s\n", argv[1], c.pid,
				strerror(-r));
			child_stop(&c);
			return 1;
		}
		major = rt.major;
		minor = rt.minor;
		patch = rt.patch;

		/* The first read of every code object. */
		t0 = now();
		for (int i = 0; i < n; i++) {
			r = pycode_read(c.pid, &rt, info[i].addr, &codes[i]);
			if (r < 0) {
				fprintf(stderr, "pybench: code object %d at 0x%" PRIx64 ": %s\n", i,
					info[i].addr, strerror(-r));
				child_stop(&c);
				return 1;
			}
		}
		new_us[run] = (now() - t0) * 1e6 / n;

		/* One read, the unit of the above: each code object's ob_type. */
		t0 = now();
		for (int i = 0; i < n; i++) {
			uint64_t type;

			r = pymem_read(c.pid, info[i].addr + 8, &type, sizeof(type));
			if (r < 0 || (rt.code_type_addr && type != rt.code_type_addr)) {
				fprintf(stderr, "pybench: cannot read the type of code object %d\n", i);
				child_stop(&c);
				return 1;
			}
		}
		read_us[run] = (now() - t0) * 1e6 / n;
		child_stop(&c); /* what follows reads only the daemon's copies */

		linetable_bytes = 0;
		for (int i = 0; i < n; i++) {
			char want[16];

			snprintf(want, sizeof(want), "f%05d", i);
			if (strcmp(codes[i].name, want) != 0 || strcmp(codes[i].filename, GEN_FILE) != 0 ||
			    codes[i].firstlineno != info[i].firstlineno ||
			    codes[i].firstlineno != 1 + GEN_LINES * i) {
				fprintf(stderr, "pybench: code object %d read as %s (%s:%d), expected %s (%s:%d)\n",
					i, codes[i].name, codes[i].filename, codes[i].firstlineno, want,
					GEN_FILE, info[i].firstlineno);
				return 1;
			}
			linetable_bytes += codes[i].linetable_size;
		}
		linetable_bytes /= n;

		/* Cached: the daemon's per-process index by address, then the
		 * line at an instruction offset spread over each bytecode. */
		u64map_init(&index);
		for (int i = 0; i < n; i++) {
			uint64_t *slot = u64map_upsert(&index, info[i].addr, NULL);

			if (!slot) {
				fprintf(stderr, "pybench: out of memory\n");
				return 1;
			}
			*slot = (uint64_t)i + 1;
		}
		t0 = now();
		do {
			for (int i = 0; i < n; i++) {
				const uint64_t *slot = u64map_get(&index, info[i].addr);
				const struct pycode *e = &codes[*slot - 1];
				uint32_t units = info[i].code_bytes / 2;
				int64_t offset = (int64_t)(((uint32_t)i * 2654435761u + (uint32_t)lookups) % units) * 2;
				int line = pylinetable_line(minor, e->linetable, e->linetable_size,
							    e->firstlineno, offset);

				if (line < e->firstlineno || line >= e->firstlineno + GEN_LINES) {
					if (line < -1) {
						fprintf(stderr, "pybench: line table of %s: %s\n", e->name,
							strerror(-line));
						return 1;
					}
					lines_unknown++;
				}
				sink += line;
			}
			lookups += n;
			elapsed = now() - t0;
		} while (elapsed < 0.3);
		cached_ns[run] = elapsed * 1e9 / lookups;
		without_line = (double)lines_unknown / lookups;
		u64map_done(&index);
		for (int i = 0; i < n; i++) {
			free(codes[i].linetable);
			codes[i] = (struct pycode){ 0 };
		}
		if (sink == 42) /* keeps the lookups from being optimized away */
			fputc(' ', stderr);
	}

	printf("{\"python\": \"%s\", \"version\": \"%u.%u.%d\", \"code_objects\": %d, \"runs\": %d,\n",
	       argv[1], major, minor, patch, n, runs);
	print_runs("detect_ms", detect_ms, runs, ",");
	print_runs("new_code_us", new_us, runs, ",");
	print_runs("read_us", read_us, runs, ",");
	print_runs("cached_line_ns", cached_ns, runs, ",");
	printf(" \"linetable_bytes_mean\": %.1f, \"cached_lookups_without_line\": %.4f,\n",
	       linetable_bytes, without_line);
	qsort(new_us, runs, sizeof(double), cmp_double);
	qsort(cached_ns, runs, sizeof(double), cmp_double);
	printf(" \"new_code_us_median\": %.4g, \"cached_line_ns_median\": %.4g}\n", new_us[runs / 2],
	       cached_ns[runs / 2]);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "pybench: cannot write the results: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
