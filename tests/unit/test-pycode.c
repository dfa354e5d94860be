/* SPDX-License-Identifier: MIT */
/*
 * test-pycode.c - unit tests for daemon/pycode.c.
 *
 * pycode_utf8 is checked on hand-made characters of each kind: non-ASCII
 * Latin-1, the BMP, astral planes, lone surrogates, and cuts that must
 * fall on a character boundary without writing past the buffer.
 *
 * pycode_read is checked on real interpreters: every installed CPython
 * from 3.8 to 3.13 (pyenv's, and Debian's static /usr/bin/python3.11) runs
 * a script, written to a file whose name is not ASCII, whose call chain
 * is known by construction:
 *     <module> -> xxx...x (300 characters) -> CJK+astral name -> CJK name
 *              -> Outer.inner -> time.sleep
 * While the main thread sleeps, its frames are walked through
 * /proc/PID/mem with the offsets table (as test-pyruntime.c does) and each
 * frame's code object is read with pycode_read: names (ASCII, kind 2,
 * kind 4, cut at PYCODE_NAME_MAX), the file name (kind 1, not ASCII), the
 * first line, and the line table, which must map the frame's current
 * instruction to the line the script calls from.  Objects that are not
 * code, unmapped memory and a process that has exited give the errors
 * pycode.h promises.  A version that is not installed is skipped, with a
 * message.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "perfd/macro.h"
#include "process/procmaps.h"
#include "pychild.h"
#include "interp/python/pycode.h"
#include "interp/python/pylinetable.h"
#include "interp/python/pyruntime.h"

/* --- pycode_utf8 ---------------------------------------------------------- */

/* Converts into a buffer of size bytes inside a larger one filled with a
 * marker, and checks that nothing past size was written. */
static size_t convert(const void *chars, size_t length, unsigned kind, char *out, size_t size)
{
	char big[64];
	size_t n;

	cr_assert_leq(size, sizeof(big));
	memset(big, 0x5a, sizeof(big));
	n = pycode_utf8(chars, length, kind, big, size);
	for (size_t i = size; i < sizeof(big); i++)
		cr_assert_eq(big[i], 0x5a, "byte %zu written past size %zu", i, size);
	if (size > 0) {
		cr_assert_lt(n, size);
		cr_assert_eq(big[n], '\0', "not terminated");
		cr_assert_eq(strlen(big), n);
	} else {
		cr_assert_eq(n, 0);
	}
	memcpy(out, big, size);
	return n;
}

Test(pycode_utf8, kind1_latin1)
{
	static const uint8_t chars[] = { 'c', 'a', 'f', 0xe9, '!', 0xff };
	char out[16];

	cr_assert_eq(convert(chars, sizeof(chars), 1, out, sizeof(out)), 8);
	cr_assert_str_eq(out, "caf\xc3\xa9!\xc3\xbf");
	/* "é" needs 2 bytes: with 1 left it is cut before it, not after */
	cr_assert_eq(convert(chars, sizeof(chars), 1, out, 5), 3);
	cr_assert_str_eq(out, "caf");
	cr_assert_eq(convert(chars, sizeof(chars), 1, out, 6), 5);
	cr_assert_str_eq(out, "caf\xc3\xa9");
}

Test(pycode_utf8, kind2_bmp_and_surrogates)
{
	static const uint16_t chars[] = { 'a', 0x4e2d, 0x00e9, 0xd800, 0xdfff, 0x07ff, 0xffff };
	char out[32];

	cr_assert_eq(convert(chars, ELEMENTSOF(chars), 2, out, sizeof(out)), 17);
	cr_assert_str_eq(out, "a\xe4\xb8\xad\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xdf\xbf\xef\xbf\xbf");
	/* cut inside the 3-byte character: only "a" */
	for (size_t size = 2; size <= 4; size++) {
		cr_assert_eq(convert(chars, ELEMENTSOF(chars), 2, out, size), 1, "size %zu", size);
		cr_assert_str_eq(out, "a");
	}
	cr_assert_eq(convert(chars, ELEMENTSOF(chars), 2, out, 5), 4);
	cr_assert_str_eq(out, "a\xe4\xb8\xad");
}

Test(pycode_utf8, kind4_astral_and_invalid)
{
	static const uint32_t chars[] = { 0x1f600, 'z', 0x20000, 0x10ffff, 0x110000, 0xdc80 };
	char out[32];

	cr_assert_eq(convert(chars, ELEMENTSOF(chars), 4, out, sizeof(out)), 19);
	cr_assert_str_eq(out, "\xf0\x9f\x98\x80z\xf0\xa0\x80\x80\xf4\x8f\xbf\xbf"
			      "\xef\xbf\xbd\xef\xbf\xbd");
	cr_assert_eq(convert(chars, ELEMENTSOF(chars), 4, out, 4), 0);
	cr_assert_str_eq(out, "");
	cr_assert_eq(convert(chars, ELEMENTSOF(chars), 4, out, 5), 4);
	cr_assert_eq(convert(chars, ELEMENTSOF(chars), 4, out, 6), 5);
	cr_assert_str_eq(out, "\xf0\x9f\x98\x80z");
	cr_assert_eq(convert(chars, ELEMENTSOF(chars), 4, out, 9), 5);
}

/* A cut is a prefix: a short character after one that did not fit is not
 * slipped in. */
Test(pycode_utf8, cut_is_a_prefix)
{
	static const uint16_t chars[] = { 0x4e2d, 'a', 'b' };
	char out[8];

	cr_assert_eq(convert(chars, ELEMENTSOF(chars), 2, out, 3), 0);
	cr_assert_str_eq(out, "");
}

Test(pycode_utf8, empty_and_tiny)
{
	static const uint8_t chars[] = { 'a', 'b' };
	char out[4];

	cr_assert_eq(convert(chars, 0, 1, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "");
	cr_assert_eq(convert(chars, 2, 1, out, 1), 0);
	cr_assert_eq(convert(chars, 2, 1, out, 0), 0);
	cr_assert_eq(convert(chars, 2, 1, out, 2), 1);
	cr_assert_str_eq(out, "a");
}

/* --- real interpreters ---------------------------------------------------- */

#define U_ZHONGWEN "\xe4\xb8\xad\xe6\x96\x87" /* U+4E2D U+6587: a kind 2 str */
#define U_ASTRAL "\xf0\xa0\x80\x80"           /* U+20000: makes it kind 4 */
#define LONG_NAME_LEN 300
#define FRAMES 5 /* inner, zhongwen, zhongwen_astral, long name, <module> */

static void suite_fini(void)
{
	pychild_stop_current();
	fixture_teardown();
}

TestSuite(pycode, .init = fixture_setup, .fini = suite_fini, .timeout = 15);

/* What the script is, known by construction. */
struct script {
	char path[PATH_MAX];
	char long_name[LONG_NAME_LEN + 1];
	int def_line[FRAMES];  /* co_firstlineno of each frame, leaf first */
	int call_line[FRAMES]; /* the line each frame is executing */
};

/* Writes the script into the work directory under a non-ASCII name. */
static void write_script(struct script *s)
{
	char text[4096];
	int n;

	memset(s->long_name, 'x', LONG_NAME_LEN);
	s->long_name[LONG_NAME_LEN] = '\0';
	n = snprintf(text, sizeof(text),
		     "import sys, time\n"                                               /* 1 */
		     "class Outer:\n"                                                   /* 2 */
		     "    def inner(self):\n"                                           /* 3 */
		     "        sys.stdout.write('%%d %%d %%d\\n' %% tuple(sys.version_info[:3]))\n"
		     "        sys.stdout.flush()\n"                                     /* 5 */
		     "        time.sleep(30)\n"                                         /* 6 */
		     "\n"                                                               /* 7 */
		     "def " U_ZHONGWEN "():\n"                                          /* 8 */
		     "    Outer().inner()\n"                                            /* 9 */
		     "def " U_ZHONGWEN "_" U_ASTRAL "():\n"                             /* 10 */
		     "    x = 1\n"                                                      /* 11 */
		     "    " U_ZHONGWEN "()\n"                                           /* 12 */
		     "def %s():\n"                                                      /* 13 */
		     "    " U_ZHONGWEN "_" U_ASTRAL "()\n"                              /* 14 */
		     "%s()\n",                                                          /* 15 */
		     s->long_name, s->long_name);
	cr_assert(n > 0 && (size_t)n < sizeof(text));
	write_file("pycode_\xc3\xa9.py", text, (size_t)n);
	path_in_workdir(s->path, sizeof(s->path), "pycode_\xc3\xa9.py");
	memcpy(s->def_line, (int[FRAMES]){ 3, 8, 10, 13, 1 }, sizeof(s->def_line));
	memcpy(s->call_line, (int[FRAMES]){ 6, 9, 12, 14, 15 }, sizeof(s->call_line));
}

/* Starts exe on the script and waits until it sleeps in Outer.inner. */
static void start_python(const char *exe, const char *script, struct pychild *c)
{
	char *argv[] = { (char *)exe, (char *)script, NULL };

	/* the file name is UTF-8 whatever the locale */
	cr_assert_eq(setenv("PYTHONUTF8", "1", 1), 0);
	pychild_start(argv, PYCHILD_VERSION, c);
}

struct pyframe {
	uint64_t frame, code;
	int64_t offset; /* of the current instruction in the bytecode, bytes */
};

/* Walks the main thread's frames, leaf first, as the BPF walker does;
 * returns how many (at most max). */
static size_t walk(pid_t pid, const struct pyruntime *rt, struct pyframe *ret, size_t max)
{
	const struct pyoffsets *o = rt->offsets;
	uint64_t interp, tstate, frame;
	size_t n = 0;

	interp = follow(pid, NULL, rt->runtime_addr, o->runtime_interpreters_head,
			"interpreters.head");
	tstate = follow(pid, NULL, interp, o->interp_tstate_head, "threads.head");
	if (o->tstate_frame >= 0)
		frame = follow(pid, NULL, tstate, o->tstate_frame, "tstate->frame");
	else if (o->tstate_cframe >= 0)
		frame = follow(pid, NULL, follow(pid, NULL, tstate, o->tstate_cframe, "cframe"),
			       o->cframe_current_frame, "current_frame");
	else
		frame = follow(pid, NULL, tstate, o->tstate_current_frame, "current_frame");

	for (; frame && n < max; frame = read_u64(pid, frame + (uint64_t)o->frame_previous)) {
		struct pyframe *f = &ret[n];

		if (o->frame_owner >= 0) {
			uint8_t owner;

			read_mem(pid, frame + (uint64_t)o->frame_owner, &owner, 1);
			if (owner == 3) /* FRAME_OWNED_BY_CSTACK: a shim */
				continue;
		}
		f->frame = frame;
		f->code = follow(pid, NULL, frame, o->frame_code, "frame code");
		if (o->frame_lasti >= 0) {
			int32_t lasti;

			read_mem(pid, frame + (uint64_t)o->frame_lasti, &lasti, sizeof(lasti));
			f->offset = rt->minor >= 10 ? 2 * (int64_t)lasti : lasti;
		} else {
			f->offset = (int64_t)(read_u64(pid, frame + (uint64_t)o->frame_instr) -
					      (f->code + (uint64_t)o->code_code_adaptive));
		}
		n++;
	}
	return n;
}

static void detect(pid_t pid, struct pyruntime *rt)
{
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	int r;

	cr_assert_eq(procmaps_read_pid(pid, false, &maps), 0);
	r = pyruntime_detect(pid, maps, rt);
	cr_assert_eq(r, 0, "pyruntime_detect: %s", strerror(-r));
	cr_assert_not_null(rt->offsets);
}

static void check_interpreter(const char *exe)
{
	struct pychild *c = &current;
	struct script s;
	struct pyruntime rt;
	struct pyframe frames[FRAMES + 1];
	char expect[PYCODE_NAME_MAX];
	const char *names[FRAMES];
	uint64_t code_addr;
	size_t n;
	int r;

	require_installed(exe);
	write_script(&s);
	start_python(exe, s.path, c);
	detect(c->pid, &rt);
	cr_assert_eq(rt.minor, c->minor);
	cr_assert_neq(rt.code_type_addr, 0, "PyCode_Type not found in %s", rt.path);

	n = walk(c->pid, &rt, frames, ELEMENTSOF(frames));
	cr_assert_eq(n, FRAMES, "%zu frames", n);

	snprintf(expect, sizeof(expect), "%.*s", PYCODE_NAME_MAX - 1, s.long_name);
	names[0] = c->minor >= 11 ? "Outer.inner" : "inner";
	names[1] = U_ZHONGWEN;
	names[2] = U_ZHONGWEN "_" U_ASTRAL;
	names[3] = expect;
	names[4] = "<module>";
	for (size_t i = 0; i < n; i++) {
		struct pycode code = { 0 };
		int line;

		r = pycode_read(c->pid, &rt, frames[i].code, &code);
		cr_assert_eq(r, 0, "frame %zu: %s", i, strerror(-r));
		cr_assert_str_eq(code.name, names[i], "frame %zu", i);
		cr_assert_str_eq(code.filename, s.path, "frame %zu", i);
		cr_assert_eq(code.firstlineno, s.def_line[i], "frame %zu (%s)", i, code.name);
		cr_assert_not_null(code.linetable, "frame %zu: no line table", i);
		cr_assert_gt(code.linetable_size, 0);
		line = pylinetable_line(rt.minor, code.linetable, code.linetable_size,
					code.firstlineno, 0);
		/* 3.11+ opens a module with a RESUME on line 0 */
		if (i == FRAMES - 1 && rt.minor >= 11)
			cr_assert_eq(line, 0, "<module>: line %d at 0", line);
		else
			cr_assert_geq(line, code.firstlineno, "frame %zu: line %d at 0", i, line);
		line = pylinetable_line(rt.minor, code.linetable, code.linetable_size,
					code.firstlineno, frames[i].offset);
		cr_assert_eq(line, s.call_line[i], "frame %zu (%s): line %d at offset %" PRId64, i,
			     code.name, line, frames[i].offset);
		free(code.linetable);
	}

	/* The same read without knowing PyCode_Type. */
	{
		struct pyruntime blind = rt;
		struct pycode code = { 0 };

		blind.code_type_addr = 0;
		cr_assert_eq(pycode_read(c->pid, &blind, frames[0].code, &code), 0);
		cr_assert_str_eq(code.name, names[0]);
		free(code.linetable);
	}

	/* Objects that are not code objects: the frame, a str, the runtime. */
	{
		struct pycode code = { .firstlineno = -7 };
		uint64_t str = read_u64(c->pid,
					frames[0].code + (uint64_t)rt.offsets->code_filename);

		cr_assert_eq(pycode_read(c->pid, &rt, frames[0].frame, &code), -EBADMSG);
		cr_assert_eq(pycode_read(c->pid, &rt, str, &code), -EBADMSG);
		cr_assert_eq(pycode_read(c->pid, &rt, rt.runtime_addr, &code), -EBADMSG);
		cr_assert_eq(code.firstlineno, -7, "written on error");
		cr_assert_null(code.linetable);
	}

	/* Unmapped memory: the first page is never mapped. */
	{
		struct pycode code = { 0 };

		cr_assert_eq(pycode_read(c->pid, &rt, 0x1000, &code), -EFAULT);
		cr_assert_eq(pycode_read(c->pid, &rt, 0, &code), -EFAULT);
	}

	/* A process that has exited. */
	code_addr = frames[0].code;
	{
		struct pycode code = { 0 };
		pid_t pid = c->pid;

		pychild_stop(c);
		cr_assert_eq(pycode_read(pid, &rt, code_addr, &code), -ESRCH);
	}
}

PYCHILD_SUPPORTED_TESTS(pycode, check_interpreter)

/* A runtime without offsets (an unsupported version) is refused, not
 * dereferenced. */
Test(pycode_mem, unsupported_runtime)
{
	struct pyruntime rt = { .major = 3, .minor = 7, .patch = 16 };
	struct pycode code = { 0 };

	cr_assert_eq(pycode_read(getpid(), &rt, 0x1000, &code), -EPROTONOSUPPORT);
}

/* pymem_read on ourselves: whole reads only. */
Test(pycode_mem, pymem_read_self)
{
	static const char data[] = "0123456789abcdef";
	char buf[sizeof(data)];

	cr_assert_eq(pymem_read(getpid(), (uintptr_t)data, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, data);
	cr_assert_eq(pymem_read(getpid(), 0, buf, 1), -EFAULT);
	cr_assert_eq(pymem_read(getpid(), 0x1000, buf, 1), -EFAULT);
}
