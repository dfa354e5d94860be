/* SPDX-License-Identifier: MIT */
/*
 * test-jitdump.c - unit tests for daemon/symbols/jitdump.c.
 *
 * Dumps are built here record by record, as perf's specification lays them
 * out, and read back through fmemopen(): loads name their code, a move
 * names the moved code, debug and unwind records are skipped, and hostile
 * files - cut at every byte, record sizes too small or huge, names
 * without their NUL or too long, empty or wrapping code ranges, moves of
 * code never loaded, other magics, byte orders and versions, too many
 * functions - give a clear error or what was whole before the damage,
 * never a crash or a read past a record.  And the dump CPython 3.13 writes
 * under -X perf_jit names every trampoline it made.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "symbols/jitdump.h"
#include "symbols/perfmap.h"

/* A dump being written, in memory. */
struct dump {
	uint8_t *b;
	size_t n, cap;
};

static void put(struct dump *d, const void *p, size_t n)
{
	if (d->n + n > d->cap) {
		d->cap = MAX(d->cap * 2, d->n + n + 4096);
		d->b = realloc(d->b, d->cap);
		cr_assert_not_null(d->b);
	}
	memcpy(d->b + d->n, p, n);
	d->n += n;
}

static void put32(struct dump *d, uint32_t v) { put(d, &v, 4); }
static void put64(struct dump *d, uint64_t v) { put(d, &v, 8); }

/* The 40 bytes of a header whose size field says size. */
static void header(struct dump *d, uint32_t magic, uint32_t version, uint32_t size)
{
	put32(d, magic);
	put32(d, version);
	put32(d, size);
	put32(d, 62); /* EM_X86_64 */
	put32(d, 0);
	put32(d, 4242);
	put64(d, 1);
	put64(d, 0);
}

static void good_header(struct dump *d)
{
	header(d, JITDUMP_MAGIC, 1, 40);
}

/* A code load of code_size bytes of code (all written) named name. */
static void load(struct dump *d, uint64_t addr, uint64_t code_size, uint64_t index,
		 const char *name)
{
	size_t len = strlen(name) + 1;

	put32(d, 0);
	put32(d, (uint32_t)(16 + 40 + len + code_size));
	put64(d, 7);
	put32(d, 4242);
	put32(d, 4243);
	put64(d, addr);
	put64(d, addr);
	put64(d, code_size);
	put64(d, index);
	put(d, name, len);
	for (uint64_t i = 0; i < code_size; i++)
		put(d, "\xc3", 1);
}

static void move(struct dump *d, uint64_t from, uint64_t to, uint64_t code_size,
		 uint64_t index)
{
	put32(d, 1);
	put32(d, 16 + 48);
	put64(d, 8);
	put32(d, 4242);
	put32(d, 4243);
	put64(d, to);
	put64(d, from);
	put64(d, to);
	put64(d, code_size);
	put64(d, index);
}

/* A record perfd skips (debug info, unwind info, close). */
static void other(struct dump *d, uint32_t id, uint32_t payload)
{
	put32(d, id);
	put32(d, 16 + payload);
	put64(d, 9);
	for (uint32_t i = 0; i < payload; i++)
		put(d, "\x55", 1);
}

static int parse(const struct dump *d, size_t n, struct perfmap **m, size_t *skipped)
{
	FILE *f = fmemopen(d->b, n, "r");
	int r;

	cr_assert_not_null(f);
	r = jitdump_parse(f, m, skipped);
	fclose(f);
	return r;
}

static void expect_name(const struct perfmap *m, uint64_t addr, const char *want)
{
	const char *name = perfmap_lookup(m, addr, NULL);

	if (!want) {
		cr_expect_null(name, "%#lx is named %s", (unsigned long)addr, name);
		return;
	}
	cr_expect_not_null(name, "%#lx has no name (expected %s)", (unsigned long)addr, want);
	if (name)
		cr_expect_str_eq(name, want);
}

Test(jitdump, loads_moves_and_skipped_records)
{
	struct dump d = { 0 };
	struct perfmap *m = NULL;
	size_t skipped = 99;

	good_header(&d);
	load(&d, 0x1000, 16, 1, "py::f:/a.py");
	other(&d, 2, 40); /* debug info */
	load(&d, 0x2000, 32, 2, "py::g:/a.py");
	other(&d, 4, 100); /* unwinding info */
	move(&d, 0x2000, 0x3000, 32, 2);
	load(&d, 0x1008, 4, 3, "later"); /* in f: the later wins, f's tail goes (perfmap.h) */
	other(&d, 3, 0); /* close */
	cr_assert(jitdump_is(d.b, d.n));
	cr_assert_eq(parse(&d, d.n, &m, &skipped), 0);
	cr_expect_eq(skipped, 0);
	expect_name(m, 0x1000, "py::f:/a.py");
	expect_name(m, 0x1009, "later");
	expect_name(m, 0x100c, NULL);
	expect_name(m, 0x2010, "py::g:/a.py");
	expect_name(m, 0x3010, "py::g:/a.py");
	expect_name(m, 0x3020, NULL);
	expect_name(m, 0xfff, NULL);
	perfmap_free(m);
	free(d.b);
}

/* Code moved many times under a long name (a JVM's or V8's code moves as
 * its collector compacts): each move names its code as its load did, while
 * the names grow past their first allocation (ASan reads no freed name). */
Test(jitdump, many_moves_under_a_long_name)
{
	struct dump d = { 0 };
	struct perfmap *m = NULL;
	char name[3000], other_name[3000];
	size_t skipped = 99;

	memset(name, 'f', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	memset(other_name, 'g', sizeof(other_name) - 1);
	other_name[sizeof(other_name) - 1] = '\0';
	good_header(&d);
	load(&d, 0x1000, 16, 1, name);
	for (uint64_t i = 0; i < 64; i++) {
		move(&d, 0x1000 + 0x100 * i, 0x1000 + 0x100 * (i + 1), 16, 1);
		load(&d, 0x100000 + 0x100 * i, 16, 100 + i, other_name);
	}
	cr_assert_eq(parse(&d, d.n, &m, &skipped), 0);
	cr_expect_eq(skipped, 0);
	for (uint64_t i = 0; i <= 64; i++) {
		expect_name(m, 0x1000 + 0x100 * i + 8, name);
		expect_name(m, 0x100000 + 0x100 * i + 8, i < 64 ? other_name : NULL);
	}
	perfmap_free(m);
	free(d.b);
}

/* Cut at every length: the functions whole before the cut, in order, and
 * nothing else; never an error past the header. */
Test(jitdump, cut_at_every_byte)
{
	struct dump d = { 0 };
	size_t ends[4], n_loads = 0;

	good_header(&d);
	for (int i = 0; i < 4; i++) {
		char name[16];

		snprintf(name, sizeof(name), "fn%d", i);
		load(&d, 0x1000 * (uint64_t)(i + 1), 64, (uint64_t)i, name);
		ends[i] = d.n;
		other(&d, 4, 24);
	}
	for (size_t n = 0; n <= d.n; n++) {
		struct perfmap *m = NULL;
		size_t whole = 0;
		int r = parse(&d, n, &m, NULL);

		if (n < 40) {
			cr_assert_eq(r, -ENOEXEC, "cut at %zu: %d", n, r);
			continue;
		}
		cr_assert_eq(r, 0, "cut at %zu: %s", n, strerror(-r));
		/* a load is taken once its name is in (its code need not be) */
		for (size_t i = 0; i < 4; i++)
			whole += n >= ends[i] - 64;
		cr_assert_eq(perfmap_count(m), whole, "cut at %zu: %zu functions, expected %zu", n,
			     perfmap_count(m), whole);
		n_loads = whole;
		perfmap_free(m);
	}
	cr_assert_eq(n_loads, 4);
	free(d.b);
}

Test(jitdump, hostile_records)
{
	struct dump d = { 0 };
	struct perfmap *m = NULL;
	size_t skipped = 0;
	char longname[JITDUMP_NAME_MAX + 100];

	good_header(&d);
	load(&d, 0x1000, 8, 1, "first");
	/* a load too small for its fields */
	put32(&d, 0);
	put32(&d, 16 + 20);
	put64(&d, 0);
	for (int i = 0; i < 20; i++)
		put(&d, "\x01", 1);
	/* a load whose name has no NUL within its record */
	put32(&d, 0);
	put32(&d, 16 + 40 + 5);
	put64(&d, 0);
	put32(&d, 1);
	put32(&d, 1);
	put64(&d, 0x5000);
	put64(&d, 0x5000);
	put64(&d, 8);
	put64(&d, 9);
	put(&d, "abcde", 5);
	/* no code, and code that wraps around */
	load(&d, 0x6000, 0, 10, "empty");
	/* (the size field says 8 bytes of code, but 0 are written) */
	put32(&d, 0);
	put32(&d, 16 + 40 + 5);
	put64(&d, 0);
	put32(&d, 1);
	put32(&d, 1);
	put64(&d, UINT64_MAX - 4);
	put64(&d, UINT64_MAX - 4);
	put64(&d, 8);
	put64(&d, 11);
	put(&d, "wrap", 5);
	/* a move of code never loaded */
	move(&d, 0x9000, 0xa000, 8, 12345);
	/* a name too long: cut */
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	load(&d, 0x7000, 8, 13, longname);
	load(&d, 0x8000, 8, 14, "last");
	cr_assert_eq(parse(&d, d.n, &m, &skipped), 0);
	cr_expect_eq(skipped, 5, "%zu records skipped", skipped);
	expect_name(m, 0x1000, "first");
	expect_name(m, 0x5000, NULL);
	expect_name(m, 0xa000, NULL);
	expect_name(m, 0x8000, "last");
	{
		const char *name = perfmap_lookup(m, 0x7000, NULL);

		cr_assert_not_null(name);
		cr_expect_eq(strlen(name), JITDUMP_NAME_MAX);
	}
	perfmap_free(m);
	free(d.b);
}

/* A record size below its prefix ends the read (there is no next record
 * to find); one that would run past PERFMAP_MAX_BYTES refuses the file;
 * one that only runs past the end of this file (being written) ends it. */
Test(jitdump, record_sizes)
{
	struct perfmap *m = NULL;
	size_t skipped = 0;
	struct dump d = { 0 };
	size_t keep;

	good_header(&d);
	load(&d, 0x1000, 8, 1, "a");
	keep = d.n;
	put32(&d, 0);
	put32(&d, 8); /* smaller than its own prefix */
	put64(&d, 0);
	load(&d, 0x2000, 8, 2, "b");
	cr_assert_eq(parse(&d, d.n, &m, &skipped), 0);
	cr_expect_eq(perfmap_count(m), 1);
	cr_expect_eq(skipped, 1);
	perfmap_free(m);

	d.n = keep;
	put32(&d, 2);
	put32(&d, UINT32_MAX); /* 4 GiB of debug info */
	put64(&d, 0);
	cr_expect_eq(parse(&d, d.n, &m, NULL), -EFBIG);

	d.n = keep;
	put32(&d, 2);
	put32(&d, 4096); /* in the cap, past the end of the file */
	put64(&d, 0);
	cr_assert_eq(parse(&d, d.n, &m, NULL), 0);
	cr_expect_eq(perfmap_count(m), 1);
	perfmap_free(m);
	free(d.b);
}

Test(jitdump, headers)
{
	struct perfmap *m = NULL;
	struct {
		uint32_t magic, version, size;
		int want;
	} cases[] = {
		{ JITDUMP_MAGIC, 1, 40, 0 },
		{ JITDUMP_MAGIC, 1, 64, 0 }, /* a longer header: skipped */
		{ 0x4A695443, 1, 40, -ENOEXEC },
		{ __builtin_bswap32(JITDUMP_MAGIC), 1, 40, -EPROTONOSUPPORT },
		{ JITDUMP_MAGIC, 2, 40, -EPROTONOSUPPORT },
		{ JITDUMP_MAGIC, 1, 39, -ENOEXEC },
		{ JITDUMP_MAGIC, 1, 4097, -ENOEXEC },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct dump d = { 0 };
		int r;

		header(&d, cases[i].magic, cases[i].version, 40);
		if (cases[i].size == 64)
			for (int k = 40; k < 64; k++)
				put(&d, "", 1); /* the rest of a longer header */
		memcpy(d.b + 8, &cases[i].size, 4);
		load(&d, 0x1000, 8, 1, "f");
		r = parse(&d, d.n, &m, NULL);
		cr_expect_eq(r, cases[i].want, "case %zu: %d, expected %d", i, r, cases[i].want);
		if (r == 0) {
			expect_name(m, 0x1000, "f");
			perfmap_free(m);
		}
		free(d.b);
	}
	cr_assert_not(jitdump_is("JiT", 3));
}

Test(jitdump, too_many_functions, .timeout = 60)
{
	struct dump d = { 0 };
	struct perfmap *m = NULL;

	good_header(&d);
	for (uint32_t i = 0; i <= JITDUMP_MAX_FUNCTIONS; i++)
		load(&d, 0x10000 + 16ull * i, 1, i, "f");
	cr_assert_leq(d.n, PERFMAP_MAX_BYTES, "the test's dump is over the byte cap");
	cr_assert_eq(parse(&d, d.n, &m, NULL), -EFBIG);
	free(d.b);
}

/* The dump CPython 3.13 writes under -X perf_jit: one load per trampoline,
 * named "py::QUALNAME:FILE", the code where the arenas are. */
Test(jitdump, cpython_3_13_perf_jit, .timeout = 30)
{
	const char *exe = "/root/.pyenv/versions/3.13.0/bin/python";
	char path[64], *names[] = { "py::alpha:<string>", "py::beta:<string>" };
	pid_t pid;
	int status;
	FILE *f;
	struct perfmap *m = NULL;
	size_t skipped = 0;

	if (access(exe, X_OK) != 0) {
		if (getenv("PERFD_ALLOW_MISSING_PYTHON"))
			cr_skip_test("%s is not installed", exe);
		cr_assert_fail("%s is not installed (set PERFD_ALLOW_MISSING_PYTHON=1 to skip)", exe);
	}
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execl(exe, exe, "-X", "perf_jit", "-c",
		      "def alpha(): return 1\ndef beta(): return alpha()\nbeta()\n", (char *)NULL);
		_exit(127);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(path, sizeof(path), "/tmp/jit-%d.dump", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	(void)unlink(path);
	cr_assert_eq(jitdump_parse(f, &m, &skipped), 0);
	fclose(f);
	cr_expect_eq(skipped, 0);
	cr_expect_gt(perfmap_count(m), 10, "%zu functions", perfmap_count(m));
	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		bool found = false;

		/* a perfmap is looked up by address: go through every name */
		for (size_t k = 0; k < perfmap_count(m) && !found; k++)
			found = strcmp(perfmap_name_at(m, k), names[i]) == 0;
		cr_expect(found, "no function named %s", names[i]);
	}
	perfmap_free(m);
}
