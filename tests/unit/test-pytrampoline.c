/* SPDX-License-Identifier: MIT */
/*
 * test-pytrampoline.c - unit tests for daemon/interp/python/pytrampoline.c
 * on real interpreters.
 *
 * CPython 3.12 and 3.13 run with -X perf (3.13 also with -X perf_jit), call
 * enough functions to fill several arenas, and sleep; the arenas found
 * must be exactly the 64 KiB chunks of anonymous executable memory that
 * this test, reading the child's whole memory through /proc/PID/mem,
 * finds filled with the template at one stride, and the strides those
 * CPythons use (11, 16 and 272 bytes).  An interpreter without -X perf has
 * none; memory that starts like an arena but is not one (a wrong last
 * copy, garbage, a writable mapping) is not taken for one; a process gone
 * is -ESRCH.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interp/python/pyruntime.h"
#include "interp/python/pytrampoline.h"
#include "perfd/macro.h"
#include "process/procmaps.h"
#include "pychild.h"


/* Calls N new functions (each compiled by exec: two code objects, two
 * trampolines), then reports its version and sleeps. */
static const char script[] =
	"import sys, time\n"
	"for i in range(int(sys.argv[1])):\n"
	"    ns = {}\n"
	"    exec('def f(): return %d' % i, ns)\n"
	"    ns['f']()\n"
	"v = sys.version_info\n"
	"print(v[0], v[1], v[2], flush=True)\n"
	"time.sleep(30)\n";

/* The suite's fini stops the child, and its perf map or jitdump goes with
 * it (pychild_stop()), also when a test failed. */
TestSuite(pytrampoline, .fini = pychild_stop_current);

/* Whether the chunk at addr holds copies of code at stride from its start
 * to as many as fit, read here whole. */
static bool full_arena(pid_t pid, uint64_t addr, const uint8_t *code, size_t size,
		       uint32_t stride)
{
	_cleanup_free_ uint8_t *buf = malloc(PYTRAMPOLINE_ARENA_SIZE);

	cr_assert_not_null(buf);
	read_mem(pid, addr, buf, PYTRAMPOLINE_ARENA_SIZE);
	for (size_t k = 0; k < PYTRAMPOLINE_ARENA_SIZE / stride; k++)
		if (memcmp(buf + k * stride, code, size) != 0)
			return false;
	return true;
}

/* Runs exe with option on N functions; checks the arenas found. */
static void check_interpreter(const char *exe, const char *option, uint32_t want_stride,
			      size_t want_min_arenas)
{
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	struct pytrampoline_arenas arenas = { 0 };
	struct pychild *c = &current;
	char *argv[] = { (char *)exe, (char *)option, (char *)"-c", (char *)script,
			 (char *)"12000", NULL };
	struct pyruntime rt;
	size_t brute = 0, plain = 0;
	int r;

	require_installed(exe);
	pychild_start(argv, PYCHILD_VERSION, c);
	cr_assert_eq(procmaps_read_pid(c->pid, true, &maps), 0);
	cr_assert_eq(pyruntime_detect(c->pid, maps, &rt), 0);
	cr_assert_gt(rt.trampoline_size, 0);
	r = pytrampoline_find(c->pid, maps, rt.trampoline, rt.trampoline_size, &arenas);
	cr_assert_geq(r, 0, "%s", strerror(-r));
	cr_assert_eq((size_t)r, arenas.n);
	cr_assert_geq(arenas.n, want_min_arenas, "%s %s: %zu arenas", exe, option, arenas.n);

	/* every arena found is one, at the stride this CPython uses (a 3.13
	 * -X perf_jit process also has the arena of the plain -X perf layout
	 * it made before it switched to jitdump's), ... */
	for (size_t i = 0; i < arenas.n; i++) {
		cr_assert(i == 0 || arenas.starts[i] > arenas.starts[i - 1]);
		if (arenas.strides[i] != want_stride && want_stride == 272 &&
		    arenas.strides[i] == 16)
			cr_assert_eq(plain++, 0, "more than one arena of stride 16");
		else
			cr_assert_eq(arenas.strides[i], want_stride, "arena %zu: stride %u", i,
				     arenas.strides[i]);
		cr_assert(full_arena(c->pid, arenas.starts[i], rt.trampoline, rt.trampoline_size,
				     arenas.strides[i]),
			  "arena %zu at %#lx is not full of copies", i,
			  (unsigned long)arenas.starts[i]);
		cr_assert(pytrampoline_contains(&arenas, arenas.starts[i] + 5));
		cr_assert(pytrampoline_contains(&arenas, arenas.starts[i] + 65535));
	}
	/* ... and every arena there is was found */
	for (size_t i = 0; i < maps->n; i++) {
		const struct procmap *m = &maps->maps[i];

		if (m->path[0] || !m->executable)
			continue;
		for (uint64_t a = m->start; a + PYTRAMPOLINE_ARENA_SIZE <= m->end;
		     a += PYTRAMPOLINE_ARENA_SIZE) {
			bool is = full_arena(c->pid, a, rt.trampoline, rt.trampoline_size, want_stride);

			if (!is && strcmp(option, "-Xperf_jit") == 0)
				is = full_arena(c->pid, a, rt.trampoline, rt.trampoline_size, 16);
			if (!is)
				continue;
			brute++;
			cr_assert(pytrampoline_contains(&arenas, a), "arena at %#lx not found",
				  (unsigned long)a);
		}
	}
	cr_assert_geq(arenas.n, brute);
	cr_assert_not(pytrampoline_contains(&arenas, 0));

	pychild_stop_current();
	pytrampoline_arenas_done(&arenas);
}

/* 3.12: copies packed at the template's 11 bytes, 5957 an arena; 12000
 * functions are 24000 code objects: 5 arenas. */
Test(pytrampoline, cpython_3_12_perf, .timeout = 30)
{
	check_interpreter(PYENV_VERSIONS "/3.12.1/bin/python", "-Xperf", 11, 4);
}

/* 3.13 aligns copies to 16 bytes (4096 an arena: 6 or more) ... */
Test(pytrampoline, cpython_3_13_perf, .timeout = 30)
{
	check_interpreter(PYENV_VERSIONS "/3.13.0/bin/python", "-Xperf", 16, 5);
}

/* ... and pads them by 256 more under -X perf_jit (240 an arena). */
Test(pytrampoline, cpython_3_13_perf_jit, .timeout = 30)
{
	check_interpreter(PYENV_VERSIONS "/3.13.0/bin/python", "-Xperf_jit", 272, 90);
}

/* Memory that only starts like an arena is not one.  Without -X perf, the
 * child maps four anonymous private mappings of an arena's size: copies at
 * 11 bytes but a wrong last one, read-execute; garbage, read-execute;
 * right copies left writable (CPython leaves r-x); and right copies,
 * read-execute, made as CPython makes them: only that one is an arena. */
Test(pytrampoline, decoys_are_not_arenas, .timeout = 30)
{
	static const char decoys[] =
		"import ctypes, mmap, sys, time\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]\n"
		"t = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi,"
		" '_Py_trampoline_func_start')), 11)\n"
		"keep = []\n"
		"def arena(data, prot):\n"
		"    m = mmap.mmap(-1, 65536, flags=mmap.MAP_PRIVATE)\n"
		"    m.write(data[:65536])\n"
		"    a = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
		"    assert libc.mprotect(a, 65536, prot) == 0\n"
		"    keep.append(m)\n"
		"full = t * (65536 // 11)\n"
		"arena(full[:-11] + b'\\x90' * 11, 5)\n"
		"arena(bytes(range(256)) * 256, 5)\n"
		"arena(full, 7)\n"
		"arena(full, 5)\n"
		"real = ctypes.addressof(ctypes.c_char.from_buffer(keep[-1]))\n"
		"v = sys.version_info\n"
		"print(v[0], v[1], v[2], real, flush=True)\n"
		"time.sleep(30)\n";
	const char *exe = PYENV_VERSIONS "/3.12.1/bin/python";
	char *argv[] = { (char *)exe, (char *)"-c", (char *)decoys, NULL };
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	struct pytrampoline_arenas arenas = { 0 };
	struct pychild *c = &current;
	struct pyruntime rt;
	uint64_t anon_x = 0;

	require_installed(exe);
	pychild_start(argv, PYCHILD_VERSION_THREAD, c); /* its "thread pointer": the real one */
	cr_assert_eq(procmaps_read_pid(c->pid, false, &maps), 0);
	cr_assert_eq(pyruntime_detect(c->pid, maps, &rt), 0);
	for (size_t i = 0; i < maps->n; i++)
		if (maps->maps[i].path[0] == '\0' && maps->maps[i].executable)
			anon_x += maps->maps[i].end - maps->maps[i].start;
	/* (two adjacent ones may be one mapping, as arenas may) */
	cr_assert_geq(anon_x, 4 * PYTRAMPOLINE_ARENA_SIZE,
		      "the decoys are not there: %lu bytes of anonymous executable memory",
		      (unsigned long)anon_x);
	cr_assert_eq(pytrampoline_find(c->pid, maps, rt.trampoline, rt.trampoline_size, &arenas),
		     1);
	cr_assert_eq(arenas.starts[0], c->thread_pointer, "found %#lx, the arena is at %#lx",
		     (unsigned long)arenas.starts[0], (unsigned long)c->thread_pointer);
	cr_assert_eq(arenas.strides[0], 11);
	pychild_stop(c);
	pytrampoline_arenas_done(&arenas);
}

Test(pytrampoline, gone_process_is_esrch, .timeout = 30)
{
	const char *exe = PYENV_VERSIONS "/3.12.1/bin/python";
	char *argv[] = { (char *)exe, (char *)"-Xperf", (char *)"-c", (char *)script,
			 (char *)"10", NULL };
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	struct pytrampoline_arenas arenas = { 0 };
	struct pychild *c = &current;
	struct pyruntime rt;
	pid_t pid;

	require_installed(exe);
	pychild_start(argv, PYCHILD_VERSION, c);
	cr_assert_eq(procmaps_read_pid(c->pid, true, &maps), 0);
	cr_assert_eq(pyruntime_detect(c->pid, maps, &rt), 0);
	cr_assert_eq(pytrampoline_find(c->pid, maps, rt.trampoline, rt.trampoline_size, &arenas),
		     1);
	pid = c->pid;
	pychild_stop_current();
	/* what was found stands without a read (known_arenas_are_not_read_again) */
	cr_assert_eq(pytrampoline_find(pid, maps, rt.trampoline, rt.trampoline_size, &arenas),
		     1);
	pytrampoline_arenas_done(&arenas);
	cr_assert_eq(pytrampoline_find(pid, maps, rt.trampoline, rt.trampoline_size, &arenas),
		     -ESRCH);
	cr_assert_eq(arenas.n, 0);
}

/* Arenas found before are kept without a read while they are mapped (the
 * process here is gone: any read would fail), dropped when they are not;
 * the same candidate mappings as at the last search read nothing; only
 * new anonymous code is read. */
Test(pytrampoline, known_arenas_are_not_read_again)
{
	static const uint8_t code[] = { 0x55, 0x48, 0x89, 0xe5 };
	uint64_t starts[] = { 0x7f0000000000, 0x7f0000100000 };
	uint32_t strides[] = { 11, 16 };
	struct procmap m[3];
	struct procmaps maps = { m, 2 };
	struct pytrampoline_arenas arenas = { 0 };
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	for (size_t i = 0; i < ELEMENTSOF(m); i++)
		m[i] = (struct procmap){ .start = 0x7f0000000000 + 0x100000 * i,
					 .end = 0x7f0000000000 + 0x100000 * i +
						PYTRAMPOLINE_ARENA_SIZE,
					 .readable = true, .executable = true, .path = (char *)"" };
	arenas.starts = malloc(sizeof(starts));
	arenas.strides = malloc(sizeof(strides));
	cr_assert(arenas.starts && arenas.strides);
	memcpy(arenas.starts, starts, sizeof(starts));
	memcpy(arenas.strides, strides, sizeof(strides));
	arenas.n = 2;

	cr_assert_eq(pytrampoline_find(pid, &maps, code, sizeof(code), &arenas), 2);
	cr_assert_eq(arenas.starts[1], starts[1]);
	cr_assert_eq(arenas.strides[1], 16);
	/* the same mappings again: nothing to do */
	cr_assert_eq(pytrampoline_find(pid, &maps, code, sizeof(code), &arenas), 2);
	/* one unmapped: it goes */
	m[0] = m[1];
	maps.n = 1;
	cr_assert_eq(pytrampoline_find(pid, &maps, code, sizeof(code), &arenas), 1);
	cr_assert_eq(arenas.starts[0], starts[1]);
	/* new anonymous code must be read: the process is gone */
	m[1] = m[2];
	maps.n = 2;
	cr_assert_eq(pytrampoline_find(pid, &maps, code, sizeof(code), &arenas), -ESRCH);
	cr_assert_eq(arenas.n, 1, "a failed search keeps what was found");
	pytrampoline_arenas_done(&arenas);
}

Test(pytrampoline, contains)
{
	uint64_t starts[] = { 0x10000, 0x30000, 0x40000 };
	uint32_t strides[] = { 11, 11, 11 };
	struct pytrampoline_arenas a = { .starts = starts, .strides = strides, .n = 3 };

	cr_assert_not(pytrampoline_contains(&a, 0xffff));
	cr_assert(pytrampoline_contains(&a, 0x10000));
	cr_assert(pytrampoline_contains(&a, 0x1ffff));
	cr_assert_not(pytrampoline_contains(&a, 0x20000));
	cr_assert(pytrampoline_contains(&a, 0x3ffff));
	cr_assert(pytrampoline_contains(&a, 0x40000));
	cr_assert_not(pytrampoline_contains(&a, 0x50000));
	a.n = 0;
	cr_assert_not(pytrampoline_contains(&a, 0x10000));
}
