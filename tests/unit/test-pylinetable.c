/* SPDX-License-Identifier: MIT */
/*
 * test-pylinetable.c - unit tests for daemon/pylinetable.c.
 *
 * The expected lines come from the interpreters, not from this file: every
 * installed CPython from 3.8 to 3.13 (pyenv's, and Debian's static
 * /usr/bin/python3.11) compiles a generated module whose functions stress
 * the formats (a 300-line loop body, a line of bytecode longer than 255
 * bytes and wider than 128 columns, a gap of 200 lines, a call spanning 200
 * lines that jumps back to its first, handlers, with, comprehensions,
 * closures, a generator, a coroutine) and prints, for every code object
 * reached through co_consts, its co_firstlineno, its line table, and the
 * line of every code unit twice: from dis.findlinestarts (3.8-3.9) or
 * co_lines() (3.10+), and from CPython's own PyCode_Addr2Line through
 * ctypes, which also gives the answer past the end of the bytecode.  Every
 * byte offset of every code object is then looked up here.  3.11+ runs a
 * second time with -X no_debug_ranges, whose tables use the no-column form.
 *
 * The same tables, cut at every length, and random bytes check that
 * malformed input gives -EINVAL or a line and never reads out of bounds
 * (each table is copied to a buffer of exactly its size, for ASan).  A
 * version that is not installed is skipped, with a message.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "interp/python/pylinetable.h"
#include "pychild.h"

extern char **environ;

#define PYENV_VERSIONS "/root/.pyenv/versions"
#define FAR_PAST_END 1000000 /* the script's second past-the-end offset */

/* Valid Python 3.8 to 3.13.  Prints "version MAJOR MINOR PATCH", then per
 * code object:
 *   code NAME FIRSTLINENO NBYTES HEX-TABLE ("-" when empty)
 *   oracle LINE... (one per code unit; -1 for none)
 *   addr2line LINE... (one per code unit) LINE-AT-NBYTES LINE-FAR-PAST
 * and "end". */
static const char script[] =
	"import ctypes, dis, sys\n"
	"V = sys.version_info\n"
	"S = []\n"
	"a = S.append\n"
	"a('import os')\n"
	"a('def simple(x):')\n"
	"a('    y = x + 1')\n"
	"a('    return y')\n"
	/* jumps over > 256 bytes, lines going back 300 */
	"a('def long_loop(n):')\n"
	"a('    total = 0')\n"
	"a('    for i in range(n):')\n"
	"for k in range(300):\n"
	"    a('        total += i * %d' % k)\n"
	"a('    while total > 0:')\n"
	"a('        total -= 1')\n"
	"a('    return total')\n"
	/* a line gap > 127, one line of > 255 bytes and > 128 columns */
	"a('def gap(a, b):')\n"
	"a('    x = a')\n"
	"for k in range(200):\n"
	"    a('    # filler %d' % k)\n"
	"a('    y = ' + ' + '.join(['a * b'] * 150))\n"
	"for k in range(150):\n"
	"    a('')\n"
	"a('    return x + y')\n"
	/* a multi-line expression whose call goes back 200 lines */
	"a('def multi(f, v):')\n"
	"a('    r = f(')\n"
	"for k in range(200):\n"
	"    a('        v + %d,' % k)\n"
	"a('    )')\n"
	"a('    return (r')\n"
	"a('            if v else')\n"
	"a('            None)')\n"
	/* exception handling: cleanup code without a line in 3.10+ */
	"a('def handlers(f):')\n"
	"a('    try:')\n"
	"a('        f()')\n"
	"a('    except (ValueError, KeyError) as e:')\n"
	"a('        f(e)')\n"
	"a('    except Exception:')\n"
	"a('        raise')\n"
	"a('    else:')\n"
	"a('        f(1)')\n"
	"a('    finally:')\n"
	"a('        f(2)')\n"
	"a('    with open(f) as g:')\n"
	"a('        for x in g:')\n"
	"a('            if x:')\n"
	"a('                break')\n"
	"a('            continue')\n"
	"a('    return f')\n"
	/* nested code objects */
	"a('def outer(xs):')\n"
	"a('    k = 3')\n"
	"a('    def inner(y):')\n"
	"a('        return [y * k for y in xs')\n"
	"a('                if y]')\n"
	"a('    g = (x + k for x in xs)')\n"
	"a('    h = lambda z: z + k')\n"
	"a('    return inner, g, h, {x: y for x, y in zip(xs, xs)}')\n"
	"a('class C:')\n"
	"a('    attr = 1')\n"
	"a('    @staticmethod')\n"
	"a('    def m(x):')\n"
	"a('        yield x')\n"
	"a('        yield from x')\n"
	"a('async def coro(x):')\n"
	"a('    async with x as y:')\n"
	"a('        await y')\n"
	"a('    async for z in x:')\n"
	"a('        pass')\n"
	"a('x = [i for i in range(3)]')\n"
	"src = '\\n'.join(S) + '\\n'\n"
	"top = compile(src, '<perfd-pylinetable>', 'exec')\n"
	"addr2line = ctypes.pythonapi.PyCode_Addr2Line\n"
	"addr2line.argtypes = (ctypes.py_object, ctypes.c_int)\n"
	"addr2line.restype = ctypes.c_int\n"
	"def lines_of(c, n):\n"
	"    out = [None] * (n // 2)\n"
	"    if V < (3, 10):\n"
	"        starts = sorted(dis.findlinestarts(c))\n"
	"        j = -1\n"
	"        for u in range(n // 2):\n"
	"            while j + 1 < len(starts) and starts[j + 1][0] <= 2 * u:\n"
	"                j += 1\n"
	"            out[u] = starts[j][1]\n"
	"    else:\n"
	"        for s, e, l in c.co_lines():\n"
	"            for o in range(s, e, 2):\n"
	"                out[o // 2] = -1 if l is None else l\n"
	"    assert None not in out, c\n"
	"    return out\n"
	"def walk(c):\n"
	"    n = len(c.co_code)\n"
	"    t = c.co_lnotab if V < (3, 10) else c.co_linetable\n"
	"    print('code', c.co_name, c.co_firstlineno, n, t.hex() or '-')\n"
	"    print('oracle', *lines_of(c, n))\n"
	"    print('addr2line', *[addr2line(c, o) for o in range(0, n, 2)],\n"
	"          addr2line(c, n), addr2line(c, n + 1000000))\n"
	"    for k in c.co_consts:\n"
	"        if isinstance(k, type(c)):\n"
	"            walk(k)\n"
	"print('version', V[0], V[1], V[2])\n"
	"walk(top)\n"
	"print('end')\n";

struct pycode {
	char *name;
	int firstlineno;
	size_t nbytes;
	uint8_t *table; /* exactly tsize bytes; NULL when empty */
	size_t tsize;
	int *oracle;    /* nbytes / 2 lines */
	int *addr2line; /* nbytes / 2 lines, then at nbytes, then far past */
};

struct run {
	unsigned minor;
	struct pycode *codes;
	size_t n;
};

static void run_free(struct run *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->codes[i].name);
		free(r->codes[i].table);
		free(r->codes[i].oracle);
		free(r->codes[i].addr2line);
	}
	free(r->codes);
	r->codes = NULL;
	r->n = 0;
}

/* Parses exactly n ints after the first word of line. */
static int *parse_ints(const char *line, const char *word, size_t n)
{
	const char *p = line + strlen(word);
	int *v = calloc(n ? n : 1, sizeof(*v));

	cr_assert_not_null(v);
	cr_assert_eq(strncmp(line, word, strlen(word)), 0, "expected %s: %.60s", word, line);
	for (size_t i = 0; i < n; i++) {
		char *end;
		long x;

		errno = 0;
		x = strtol(p, &end, 10);
		cr_assert(end != p && errno == 0 && x >= INT_MIN && x <= INT_MAX,
			  "%s: bad value %zu: %.20s", word, i, p);
		v[i] = (int)x;
		p = end;
	}
	cr_assert(*p == '\n' || *p == '\0', "%s: more than %zu values", word, n);
	return v;
}

static uint8_t *parse_hex(const char *hex, size_t *ret_size)
{
	size_t len = strlen(hex), size;
	uint8_t *t;

	if (strcmp(hex, "-") == 0) {
		*ret_size = 0;
		return NULL;
	}
	cr_assert_eq(len % 2, 0, "odd hex %s", hex);
	size = len / 2;
	t = malloc(size);
	cr_assert_not_null(t);
	for (size_t i = 0; i < size; i++)
		cr_assert_eq(sscanf(hex + 2 * i, "%2hhx", &t[i]), 1, "bad hex %s", hex);
	*ret_size = size;
	return t;
}

/* Runs exe -I [extra] -c script and parses its output into *r. */
static void run_oracle(const char *exe, const char *x_option, struct run *r)
{
	char *argv[7];
	int argc = 0;
	posix_spawn_file_actions_t fa;
	_cleanup_fclose_ FILE *f = NULL;
	_cleanup_free_ char *line = NULL;
	size_t cap = 0, alloc = 0;
	unsigned major, patch;
	bool ended = false;
	int pipefd[2], status, e;
	pid_t pid;

	argv[argc++] = (char *)exe;
	argv[argc++] = (char *)"-I";
	if (x_option) {
		argv[argc++] = (char *)"-X";
		argv[argc++] = (char *)x_option;
	}
	argv[argc++] = (char *)"-c";
	argv[argc++] = (char *)script;
	argv[argc] = NULL;

	cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
	cr_assert_eq(posix_spawn_file_actions_init(&fa), 0);
	cr_assert_eq(posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO), 0);
	e = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	(void)close(pipefd[1]);
	cr_assert_eq(e, 0, "spawn %s: %s", exe, strerror(e));
	f = fdopen(pipefd[0], "r");
	cr_assert_not_null(f);

	memset(r, 0, sizeof(*r));
	cr_assert_gt(getline(&line, &cap, f), 0, "%s printed nothing", exe);
	cr_assert_eq(sscanf(line, "version %u %u %u", &major, &r->minor, &patch), 3, "%s", line);
	cr_assert_eq(major, 3);
	while (getline(&line, &cap, f) > 0) {
		_cleanup_free_ char *name = NULL, *hex = NULL;
		struct pycode *c;
		size_t units;

		if (strcmp(line, "end\n") == 0) {
			ended = true;
			break;
		}
		if (r->n == alloc) {
			alloc = alloc ? 2 * alloc : 16;
			r->codes = realloc(r->codes, alloc * sizeof(*r->codes));
			cr_assert_not_null(r->codes);
		}
		c = &r->codes[r->n++];
		memset(c, 0, sizeof(*c));
		cr_assert_eq(sscanf(line, "code %ms %d %zu %ms", &name, &c->firstlineno,
				    &c->nbytes, &hex), 4, "%.80s", line);
		c->name = TAKE_PTR(name);
		c->table = parse_hex(hex, &c->tsize);
		cr_assert_eq(c->nbytes % 2, 0);
		units = c->nbytes / 2;
		cr_assert_gt(getline(&line, &cap, f), 0);
		c->oracle = parse_ints(line, "oracle", units);
		cr_assert_gt(getline(&line, &cap, f), 0);
		c->addr2line = parse_ints(line, "addr2line", units + 2);
	}
	cr_assert(ended, "%s: output cut short", exe);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s failed", exe);
}

/* Every byte offset, and two past the end, against the interpreter. */
static void check_lines(const struct run *r)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct pycode *c = &r->codes[i];
		size_t units = c->nbytes / 2;
		int past, far;

		for (size_t u = 0; u < units; u++) {
			cr_assert_eq(c->oracle[u], c->addr2line[u],
				     "3.%u %s +%zu: the interpreter disagrees with itself: %d, %d",
				     r->minor, c->name, 2 * u, c->oracle[u], c->addr2line[u]);
			for (size_t b = 2 * u; b < 2 * u + 2; b++) {
				int got = pylinetable_line(r->minor, c->table, c->tsize,
							   c->firstlineno, (int64_t)b);

				cr_assert_eq(got, c->oracle[u], "3.%u %s +%zu: %d, expected %d",
					     r->minor, c->name, b, got, c->oracle[u]);
			}
		}
		past = pylinetable_line(r->minor, c->table, c->tsize, c->firstlineno,
					(int64_t)c->nbytes);
		far = pylinetable_line(r->minor, c->table, c->tsize, c->firstlineno,
				       (int64_t)c->nbytes + FAR_PAST_END);
		cr_assert_eq(past, c->addr2line[units], "3.%u %s past the end: %d, expected %d",
			     r->minor, c->name, past, c->addr2line[units]);
		cr_assert_eq(far, c->addr2line[units + 1], "3.%u %s far past the end: %d, expected %d",
			     r->minor, c->name, far, c->addr2line[units + 1]);
		cr_assert(r->minor >= 10 ? past == -1 : past >= 0, "3.%u %s: %d past the end",
			  r->minor, c->name, past);
		cr_assert_eq(pylinetable_line(r->minor, c->table, c->tsize, c->firstlineno, -1),
			     -EINVAL);
	}
}

/* The generated module must exercise what it was written to: if a CPython
 * compiled it otherwise, the test would silently check less. */
static void check_coverage(const struct run *r)
{
	bool up = false, down = false, none = false;
	size_t longest = 0, biggest = 0;

	cr_assert_geq(r->n, 10, "only %zu code objects", r->n);
	for (size_t i = 0; i < r->n; i++) {
		const struct pycode *c = &r->codes[i];
		int prev = -1;
		size_t same = 0;

		biggest = MAX(biggest, c->nbytes);
		for (size_t u = 0; u < c->nbytes / 2; u++) {
			int l = c->oracle[u];

			if (l < 0) {
				none = true;
				continue;
			}
			if (prev >= 0) {
				up |= l - prev > 127;
				down |= l - prev < -128;
				same = l == prev ? same + 1 : 1;
				longest = MAX(longest, same);
			}
			prev = l;
		}
	}
	cr_assert(up, "3.%u: no line jumps forward by more than 127", r->minor);
	cr_assert(down, "3.%u: no line jumps back by more than 128", r->minor);
	cr_assert_gt(2 * longest, 255, "3.%u: no line of more than 255 bytes", r->minor);
	cr_assert_gt(biggest, 512, "3.%u: no code object of more than 512 bytes", r->minor);
	if (r->minor >= 10)
		cr_assert(none, "3.%u: no instruction without a line", r->minor);
}

/* Returns a copy of t[0, n) in a buffer of exactly n bytes (NULL for 0). */
static uint8_t *exact_copy(const uint8_t *t, size_t n)
{
	uint8_t *p;

	if (n == 0)
		return NULL;
	p = malloc(n);
	cr_assert_not_null(p);
	memcpy(p, t, n);
	return p;
}

/* Every prefix of every table, at a few offsets: -EINVAL or a line, and
 * for 3.10+ (whose walk stops at addr's entry) the full table's answer or
 * -1 when the cut removed addr's entry. */
static void check_truncated(const struct run *r)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct pycode *c = &r->codes[i];
		int64_t addrs[] = { 0, (int64_t)(c->nbytes / 4) * 2, (int64_t)c->nbytes - 2,
				    (int64_t)c->nbytes };

		for (size_t len = 0; len <= c->tsize; len++) {
			_cleanup_free_ uint8_t *t = exact_copy(c->table, len);

			for (size_t k = 0; k < ELEMENTSOF(addrs); k++) {
				int64_t addr = MAX(addrs[k], 0);
				int full = pylinetable_line(r->minor, c->table, c->tsize,
							    c->firstlineno, addr);
				int got = pylinetable_line(r->minor, t, len, c->firstlineno, addr);

				if (len == c->tsize)
					cr_assert_eq(got, full);
				cr_assert(got == -EINVAL || got >= -1, "3.%u %s cut at %zu: %d",
					  r->minor, c->name, len, got);
				if (r->minor >= 10)
					cr_assert(got == full || got == -1 || got == -EINVAL,
						  "3.%u %s cut at %zu, +%" PRId64 ": %d, full %d",
						  r->minor, c->name, len, addr, got, full);
			}
		}
	}
}

static void check_run(const char *exe, const char *x_option, unsigned minor)
{
	struct run r;

	require_installed(exe);
	run_oracle(exe, x_option, &r);
	cr_assert_eq(r.minor, minor, "%s is 3.%u", exe, r.minor);
	check_lines(&r);
	check_coverage(&r);
	check_truncated(&r);
	run_free(&r);
}

static void check_pyenv(const char *version, unsigned minor)
{
	char exe[PATH_MAX];

	cr_assert_lt((size_t)snprintf(exe, sizeof(exe), PYENV_VERSIONS "/%s/bin/python3", version),
		     sizeof(exe));
	check_run(exe, NULL, minor);
	/* No columns: every entry that moves the line is the no-column form. */
	if (minor >= 11)
		check_run(exe, "no_debug_ranges", minor);
}

Test(pylinetable, cpython_3_8, .timeout = 60) { check_pyenv("3.8.18", 8); }
Test(pylinetable, cpython_3_9, .timeout = 60) { check_pyenv("3.9.18", 9); }
Test(pylinetable, cpython_3_10, .timeout = 60) { check_pyenv("3.10.13", 10); }
Test(pylinetable, cpython_3_11, .timeout = 60) { check_pyenv("3.11.7", 11); }
Test(pylinetable, cpython_3_12, .timeout = 60) { check_pyenv("3.12.1", 12); }
Test(pylinetable, cpython_3_13, .timeout = 60) { check_pyenv("3.13.0", 13); }
Test(pylinetable, debian_3_11, .timeout = 60) { check_run("/usr/bin/python3.11", NULL, 11); }

/* ---- edge cases, on tables built by hand from the format descriptions ---- */

static int line_of(unsigned minor, const uint8_t *t, size_t n, int first, int64_t addr)
{
	_cleanup_free_ uint8_t *copy = exact_copy(t, n);

	return pylinetable_line(minor, copy, n, first, addr);
}

Test(pylinetable, unsupported_minor)
{
	static const uint8_t t[] = { 2, 1 };
	const unsigned minors[] = { 0, 6, 7, 15, 16, UINT_MAX };

	for (size_t i = 0; i < ELEMENTSOF(minors); i++) {
		cr_assert_eq(pylinetable_line(minors[i], t, sizeof(t), 1, 0), -EPROTONOSUPPORT);
		cr_assert_eq(pylinetable_line(minors[i], t, sizeof(t), 1, -1), -EPROTONOSUPPORT);
	}
}

Test(pylinetable, negative_addr_and_null_table)
{
	static const uint8_t t[] = { 0x80, 0x00 };

	for (unsigned minor = 8; minor <= 14; minor++) {
		cr_assert_eq(pylinetable_line(minor, t, sizeof(t), 1, -1), -EINVAL);
		cr_assert_eq(pylinetable_line(minor, t, sizeof(t), 1, INT64_MIN), -EINVAL);
		cr_assert_eq(pylinetable_line(minor, NULL, 2, 1, 0), -EINVAL);
		/* An empty table: the first line in 3.8-3.9, no line after. */
		cr_assert_eq(pylinetable_line(minor, NULL, 0, 7, 0), minor <= 9 ? 7 : -1);
		cr_assert_eq(pylinetable_line(minor, NULL, 0, 7, INT64_MAX), minor <= 9 ? 7 : -1);
	}
}

/* co_lnotab: the increment of a pair counts from the end of its byte
 * increment; 255-byte and +-127-line pieces add up. */
Test(pylinetable, lnotab)
{
	/* firstlineno 10: +0 bytes +1 line, +6 bytes -3 lines,
	 * +255 +0, +45 +127, +0 +73, +2 -128 */
	static const uint8_t t[] = { 0, 1, 6, 0xfd, 255, 0, 45, 127, 0, 73, 2, 0x80 };

	for (unsigned minor = 8; minor <= 9; minor++) {
		cr_assert_eq(line_of(minor, t, sizeof(t), 10, 0), 11);
		cr_assert_eq(line_of(minor, t, sizeof(t), 10, 5), 11);
		cr_assert_eq(line_of(minor, t, sizeof(t), 10, 6), 8);
		cr_assert_eq(line_of(minor, t, sizeof(t), 10, 305), 8);
		cr_assert_eq(line_of(minor, t, sizeof(t), 10, 306), 208);
		cr_assert_eq(line_of(minor, t, sizeof(t), 10, 308), 80);
		cr_assert_eq(line_of(minor, t, sizeof(t), 10, 1 << 30), 80);
		cr_assert_eq(line_of(minor, t, sizeof(t) - 1, 10, 0), -EINVAL);
		/* a line that goes below 0 */
		cr_assert_eq(line_of(minor, t, sizeof(t), 0, 6), -EINVAL);
	}
}

/* 3.10: -128 is "no line" for its range and leaves the running line. */
Test(pylinetable, linetable_3_10)
{
	/* firstlineno 10: [0,4) +1, [4,6) none, [6,8) +2, [8,8) +127,
	 * [8,10) +3 */
	static const uint8_t t[] = { 4, 1, 2, 0x80, 2, 2, 0, 127, 2, 3 };

	cr_assert_eq(line_of(10, t, sizeof(t), 10, 0), 11);
	cr_assert_eq(line_of(10, t, sizeof(t), 10, 3), 11);
	cr_assert_eq(line_of(10, t, sizeof(t), 10, 4), -1);
	cr_assert_eq(line_of(10, t, sizeof(t), 10, 5), -1);
	cr_assert_eq(line_of(10, t, sizeof(t), 10, 6), 13);
	cr_assert_eq(line_of(10, t, sizeof(t), 10, 8), 143);
	cr_assert_eq(line_of(10, t, sizeof(t), 10, 10), -1);
	cr_assert_eq(line_of(10, t, sizeof(t) - 1, 10, 0), -EINVAL);
}

/* Entry header: bit 7, code << 3, length - 1 in code units. */
#define ENTRY(code, units) (0x80 | (code) << 3 | ((units) - 1))

Test(pylinetable, locations)
{
	static const uint8_t t[] = {
		ENTRY(0, 1), 0x05,                  /* [0,2)   short: line 20 */
		ENTRY(11, 2), 4, 9,                 /* [2,6)   one line +1: 21 */
		ENTRY(15, 1),                       /* [6,8)   none, stays 21 */
		ENTRY(13, 8), 0x40 | 0x10, 0x06,    /* [8,24)  no columns: +200 = 221 */
		ENTRY(14, 1), 0x40 | 0x03, 0x02,    /* [24,26) long: -65 = 156, */
		0x01, 0x40 | 0x01, 0x03, 0x05,      /*   end +1, columns 192-4 */
		ENTRY(12, 1), 0, 1,                 /* [26,28) one line +2: 158 */
		ENTRY(9, 3), 0x7f,                  /* [28,34) short: 158 */
	};
	const struct {
		int64_t addr;
		int line;
	} want[] = {
		{ 0, 20 }, { 1, 20 }, { 2, 21 }, { 5, 21 }, { 6, -1 }, { 7, -1 }, { 8, 221 },
		{ 23, 221 }, { 24, 156 }, { 26, 158 }, { 28, 158 }, { 33, 158 }, { 34, -1 },
		{ INT64_MAX, -1 },
	};

	for (unsigned minor = 11; minor <= 14; minor++)
		for (size_t i = 0; i < ELEMENTSOF(want); i++)
			cr_assert_eq(line_of(minor, t, sizeof(t), 20, want[i].addr), want[i].line,
				     "3.%u +%" PRId64, minor, want[i].addr);
}

Test(pylinetable, locations_malformed)
{
	/* not an entry start */
	static const uint8_t no_start[] = { 0x05, ENTRY(0, 1), 0x05 };
	/* a varint whose "more" bit runs off the end, or into the next entry */
	static const uint8_t cut_varint[] = { ENTRY(0, 1), 0, ENTRY(13, 1), 0x40 | 0x02 };
	static const uint8_t varint_into_entry[] = { ENTRY(13, 1), 0x40 | 0x02, ENTRY(0, 1), 0 };
	/* seven chunks: more than the 32 bits CPython writes */
	static const uint8_t long_varint[] = { ENTRY(13, 1), 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x02 };
	/* six chunks, but past 32 bits */
	static const uint8_t wide_varint[] = { ENTRY(13, 1), 0x40, 0x40, 0x40, 0x40, 0x40, 0x3f };
	/* column bytes missing, or taken by the next entry */
	static const uint8_t cut_columns[] = { ENTRY(0, 1), 0, ENTRY(10, 1), 3 };
	static const uint8_t column_is_entry[] = { ENTRY(10, 1), 3, ENTRY(0, 1), 0 };
	/* long form cut after the line delta */
	static const uint8_t cut_long[] = { ENTRY(0, 1), 0, ENTRY(14, 1), 0x02, 0x00 };
	/* +INT_MAX twice (2^32 - 2, in six chunks) */
	static const uint8_t overflow[] = {
		ENTRY(13, 1), 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x03,
		ENTRY(13, 1), 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x03,
	};
	/* -3 from line 1 */
	static const uint8_t negative[] = { ENTRY(13, 1), 0x07 };

	for (unsigned minor = 11; minor <= 14; minor++) {
		cr_assert_eq(line_of(minor, no_start, sizeof(no_start), 1, 0), -EINVAL);
		/* the walk stops at addr's entry: what follows is not read */
		cr_assert_eq(line_of(minor, cut_varint, sizeof(cut_varint), 1, 0), 1);
		cr_assert_eq(line_of(minor, cut_varint, sizeof(cut_varint), 1, 2), -EINVAL);
		cr_assert_eq(line_of(minor, varint_into_entry, sizeof(varint_into_entry), 1, 0),
			     -EINVAL);
		cr_assert_eq(line_of(minor, long_varint, sizeof(long_varint), 1, 0), -EINVAL);
		cr_assert_eq(line_of(minor, wide_varint, sizeof(wide_varint), 1, 0), -EINVAL);
		cr_assert_eq(line_of(minor, cut_columns, sizeof(cut_columns), 1, 2), -EINVAL);
		cr_assert_eq(line_of(minor, column_is_entry, sizeof(column_is_entry), 1, 0),
			     -EINVAL);
		cr_assert_eq(line_of(minor, cut_long, sizeof(cut_long), 1, 2), -EINVAL);
		cr_assert_eq(line_of(minor, overflow, 7, -INT_MAX, 0), 0);
		cr_assert_eq(line_of(minor, overflow, sizeof(overflow), -INT_MAX, 2), INT_MAX);
		cr_assert_eq(line_of(minor, overflow, sizeof(overflow), 1, 0), -EINVAL);
		cr_assert_eq(line_of(minor, overflow, sizeof(overflow), 0, 2), -EINVAL);
		cr_assert_eq(line_of(minor, negative, sizeof(negative), 1, 0), -EINVAL);
		cr_assert_eq(line_of(minor, negative, sizeof(negative), 3, 0), 0);
	}
}

/* Random bytes: never a crash, an out-of-bounds read (ASan) or undefined
 * arithmetic (UBSan); only -EINVAL, -1 or a line.  Deterministic. */
Test(pylinetable, random_tables, .timeout = 60)
{
	uint64_t state = 0x9e3779b97f4a7c15ull;
	uint8_t buf[96];

	for (int iter = 0; iter < 20000; iter++) {
		size_t n;
		int first;
		_cleanup_free_ uint8_t *t = NULL;

		for (size_t i = 0; i < sizeof(buf); i++) {
			state ^= state << 13;
			state ^= state >> 7;
			state ^= state << 17;
			buf[i] = (uint8_t)state;
		}
		/* Half the time, entry-like bytes for the 3.11+ walk. */
		if (iter % 2)
			for (size_t i = 0; i < sizeof(buf); i++)
				buf[i] &= i % 3 == 0 ? 0xff : 0x7f;
		n = state % sizeof(buf);
		first = (int)(state >> 40) - (1 << 23);
		if (iter % 5 == 0)
			first = state & 1 ? INT_MAX : INT_MIN;
		t = exact_copy(buf, n);
		for (unsigned minor = 8; minor <= 13; minor++) {
			const int64_t addrs[] = { 0, 1, (int64_t)(state >> 50), 4 * (int64_t)n,
						  INT64_MAX };

			for (size_t k = 0; k < ELEMENTSOF(addrs); k++) {
				int got = pylinetable_line(minor, t, n, first, addrs[k]);

				cr_assert(got == -EINVAL || got >= -1, "3.%u: %d", minor, got);
				cr_assert(minor >= 10 || got != -1);
			}
		}
	}
}
