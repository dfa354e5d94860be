/* SPDX-License-Identifier: MIT */
/*
 * test-pyruntime.c - unit tests for daemon/pyruntime.c.
 *
 * Real interpreters, not fixtures: every pyenv version installed under
 * PYENV_ROOT and Debian's /usr/bin/python3.11 is started, waits in
 * time.sleep(), and is inspected through /proc/PID/mem the way the BPF
 * walker will: _PyRuntime -> interpreters.head -> thread list -> the
 * current frame -> its code object's name, which must read "<module>".
 * That checks the detection and, at run time, the offsets the walk uses.
 *
 * The offsets table itself is checked against the headers: a small program
 * printing offsetof() of every field is compiled against each version's
 * headers (internal ones included, with Py_BUILD_CORE) and its output
 * compared with pyoffsets_for().  A version that is not installed is
 * skipped, with a message.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "process/procmaps.h"
#include "pychild.h"
#include "interp/python/pyruntime.h"
#include "unwind/trampoline.h"

/* Prints the version, then sleeps; valid Python 2 and 3. */
static const char script[] =
	"import sys, time\n"
	"v = sys.version_info\n"
	"sys.stdout.write('%d %d %d\\n' % (v[0], v[1], v[2]))\n"
	"sys.stdout.flush()\n"
	"time.sleep(30)\n";

/* Starts exe on the script and waits until it has printed its version. */
static void start_python(const char *exe, struct pychild *c)
{
	char *argv[] = { (char *)exe, (char *)"-c", (char *)script, NULL };

	pychild_spawn(argv, PYCHILD_VERSION, c);
}

TestSuite(pyruntime, .fini = pychild_stop_current);

/* Reads the compact ASCII string object at obj. */
static void read_ascii(pid_t pid, const struct pyoffsets *o, uint64_t obj, char *buf, size_t n)
{
	memset(buf, 0, n);
	read_mem(pid, obj + (uint64_t)o->unicode_ascii_data, buf, n - 1);
}

/* Walks the running interpreter as the BPF walker will. */
static void check_walk(pid_t pid, const struct pyruntime *rt)
{
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	const struct pyoffsets *o = rt->offsets;
	const struct procmap *m;
	uint64_t interp, tstate, frame, code, obj;
	char s[16];

	cr_assert_eq(procmaps_read_pid(pid, false, &maps), 0);

	/* _PyRuntime is in the file's writable data, or in its .bss just
	 * after it (anonymous, adjacent). */
	m = procmaps_find(maps, rt->runtime_addr);
	cr_assert_not_null(m, "_PyRuntime 0x%" PRIx64 " is not mapped", rt->runtime_addr);
	cr_assert(m->writable);
	if (strcmp(m->path, rt->path) != 0) {
		cr_assert_str_empty(m->path, "_PyRuntime is in %s", m->path);
		cr_assert_gt(m, maps->maps);
		cr_assert_str_eq(m[-1].path, rt->path);
		cr_assert_eq(m[-1].end, m->start);
	}

	if (rt->minor >= 13) {
		char cookie[8];

		read_mem(pid, rt->runtime_addr, cookie, sizeof(cookie));
		cr_assert_eq(memcmp(cookie, "xdebugpy", 8), 0, "no _Py_DebugOffsets cookie");
	}

	interp = follow(pid, maps, rt->runtime_addr, o->runtime_interpreters_head,
			"interpreters.head");
	tstate = follow(pid, maps, interp, o->interp_tstate_head, "tstate_head");
	cr_assert_eq(read_u64(pid, tstate + (uint64_t)o->tstate_interp), interp,
		     "tstate->interp is not the interpreter");
	if (o->tstate_native_thread_id >= 0)
		cr_assert_eq(read_u64(pid, tstate + (uint64_t)o->tstate_native_thread_id),
			     (uint64_t)pid, "native_thread_id is not the main thread's");
	cr_assert_neq(read_u64(pid, tstate + (uint64_t)o->tstate_thread_id), 0);
	/* the GIL the walker reads: the only thread took it last, and
	 * released it to sleep (3.12+: where interp->ceval.gil points) */
	cr_assert_eq(read_u64(pid, rt->runtime_addr + (uint64_t)o->runtime_gil +
					   (uint64_t)o->gil_last_holder),
		     tstate, "the GIL's last holder is not the main thread");
	cr_assert_eq((int32_t)read_u64(pid, rt->runtime_addr + (uint64_t)o->runtime_gil +
						    (uint64_t)o->gil_locked),
		     0, "the GIL is held by a sleeping thread");
	/* and the thread says so itself, as the walker reads it */
	if (o->runtime_tstate_current >= 0)
		cr_assert_eq(read_u64(pid, rt->runtime_addr + (uint64_t)o->runtime_tstate_current), 0,
			     "a sleeping thread is the current one");
	else
		cr_assert_eq(read_u64(pid, tstate + (uint64_t)o->tstate_status) &
				     (1ull << o->tstate_active_bit),
			     0, "a sleeping thread is active");

	if (o->tstate_frame >= 0) {
		frame = follow(pid, maps, tstate, o->tstate_frame, "tstate->frame");
	} else if (o->tstate_cframe >= 0) {
		uint64_t cframe = follow(pid, maps, tstate, o->tstate_cframe, "tstate->cframe");

		frame = follow(pid, maps, cframe, o->cframe_current_frame, "current_frame");
	} else {
		frame = follow(pid, maps, tstate, o->tstate_current_frame, "current_frame");
	}
	code = follow(pid, maps, frame, o->frame_code, "frame code");
	obj = follow(pid, maps, code, o->code_name, "co_name");
	read_ascii(pid, o, obj, s, sizeof(s));
	cr_assert_str_eq(s, "<module>");
	obj = follow(pid, maps, code, o->code_filename, "co_filename");
	read_ascii(pid, o, obj, s, sizeof(s));
	cr_assert_str_eq(s, "<string>");
	if (o->code_qualname >= 0) {
		obj = follow(pid, maps, code, o->code_qualname, "co_qualname");
		read_ascii(pid, o, obj, s, sizeof(s));
		cr_assert_str_eq(s, "<module>");
	}
	cr_assert_eq((int32_t)read_u64(pid, code + (uint64_t)o->code_firstlineno), 1);
	if (o->frame_instr >= 0) {
		uint64_t instr = read_u64(pid, frame + (uint64_t)o->frame_instr);

		cr_assert_gt(instr, code + (uint64_t)o->code_code_adaptive,
			     "the instruction pointer is not inside the code object");
	}
	if (o->frame_owner >= 0) /* FRAME_OWNED_BY_THREAD */
		cr_assert_eq(read_u64(pid, frame + (uint64_t)o->frame_owner) & 0xff, 0);
}

/* 3.12+ has the perf trampoline template (-X perf), and it decodes to the
 * rules of `sub $8,%rsp; call *%rcx; add $8,%rsp; ret` (with an endbr64
 * first in a CET build); before 3.12 there is none. */
static void check_trampoline(const struct pyruntime *rt)
{
	struct trampoline_shape s;
	uint32_t skip;
	int r;

	if (rt->minor < 12) {
		cr_assert_eq(rt->trampoline_size, 0, "a trampoline template in %s", rt->path);
		return;
	}
	cr_assert_gt(rt->trampoline_size, 0, "no trampoline template read from %s", rt->path);
	r = trampoline_decode(rt->trampoline, rt->trampoline_size, &s);
	cr_assert_eq(r, 0, "%s's template does not decode: %s", rt->path, strerror(-r));
	skip = rt->trampoline[0] == 0xf3 ? 4 : 0;
	cr_assert_eq(s.n_rows, 3);
	cr_assert(s.rows[1].pc == skip + 4 && s.rows[1].cfa_offset == 16 &&
		  s.rows[2].pc == skip + 10 && s.rows[2].cfa_offset == 8,
		  "%s's template: rows at %u (rsp+%d), %u (rsp+%d)", rt->path, s.rows[1].pc,
		  s.rows[1].cfa_offset, s.rows[2].pc, s.rows[2].cfa_offset);
}

/* Starts exe, detects it, checks what was found, stops it. */
static void check_supported(const char *exe, const char *lib_prefix)
{
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	struct pychild *c = &current;
	struct pyruntime rt;
	const char *base;
	int r;

	require_installed(exe);
	start_python(exe, c);
	cr_assert_eq(procmaps_read_pid(c->pid, false, &maps), 0);
	r = pyruntime_detect(c->pid, maps, &rt);
	cr_assert_eq(r, 0, "%s: %s", exe, strerror(-r));
	cr_assert_eq(rt.major, c->major);
	cr_assert_eq(rt.minor, c->minor);
	cr_assert_eq(rt.patch, (int)c->patch);
	base = strrchr(rt.path, '/');
	cr_assert_not_null(base);
	cr_assert_eq(strncmp(base + 1, lib_prefix, strlen(lib_prefix)), 0, "runtime in %s",
		     rt.path);
	cr_assert_eq(rt.offsets, pyoffsets_for(c->major, c->minor));
	cr_assert_not_null(rt.offsets);
	cr_assert_eq(rt.autotsskey_addr,
		     rt.runtime_addr + (uint64_t)rt.offsets->runtime_autotsskey);
	check_trampoline(&rt);
	check_walk(c->pid, &rt);
	pychild_stop(c);
}

static void check_pyenv(const char *version, const char *lib)
{
	char exe[PATH_MAX];

	pyenv_path(exe, sizeof(exe), version, "/bin/python");
	check_supported(exe, lib);
}

Test(pyruntime, cpython_3_8, .timeout = 10) { check_pyenv("3.8.18", "libpython3.8.so"); }
Test(pyruntime, cpython_3_9, .timeout = 10) { check_pyenv("3.9.18", "libpython3.9.so"); }
Test(pyruntime, cpython_3_10, .timeout = 10) { check_pyenv("3.10.13", "libpython3.10.so"); }
Test(pyruntime, cpython_3_11, .timeout = 10) { check_pyenv("3.11.7", "libpython3.11.so"); }
Test(pyruntime, cpython_3_12, .timeout = 10) { check_pyenv("3.12.1", "libpython3.12.so"); }
Test(pyruntime, cpython_3_13, .timeout = 10) { check_pyenv("3.13.0", "libpython3.13.so"); }

/* The static build: the runtime is in the executable, not PIE. */
Test(pyruntime, debian_static_3_11, .timeout = 10)
{
	check_supported("/usr/bin/python3.11", "python3.11");
}

/* A process chrooted without a mount namespace of its own: its maps name
 * its files as we see them (DIR/usr/bin/python3.11), which is no path from
 * its root, so detection opens them through their mappings.  The root
 * holds Debian's static 3.11, the libraries it links and its encodings
 * package, all Python needs to start with -S. */
Test(pyruntime, debian_static_3_11_in_a_chroot, .timeout = 20)
{
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	char dir[] = "/tmp/perfd-chroot.XXXXXX", cmd[512];
	struct pychild *c = &current;
	struct pyruntime rt;
	int r;

	require_installed("/usr/bin/python3.11");
	require_installed("/usr/sbin/chroot");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "set -e; for f in /usr/bin/python3.11 $(ldd /usr/bin/python3.11 | grep -o '/[^ ]*'); "
		 "do cp --parents -L \"$f\" %s; done; cp -r --parents /usr/lib/python3.11/encodings %s",
		 dir, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "exec /usr/sbin/chroot %s /usr/bin/python3.11 -S -c \"$0\" 2>/dev/null",
		 dir);
	pychild_spawn((char *[]){ (char *)"/bin/sh", (char *)"-c", cmd, (char *)script, NULL },
		      PYCHILD_VERSION, c);
	cr_assert_eq(procmaps_read_pid(c->pid, false, &maps), 0);
	r = pyruntime_detect(c->pid, maps, &rt);
	cr_assert_eq(r, 0, "in a chroot: %s", strerror(-r));
	cr_assert_eq(rt.minor, 11);
	cr_assert_eq(rt.patch, (int)c->patch);
	cr_assert_eq(strncmp(rt.path, dir, strlen(dir)), 0, "runtime in %s", rt.path);
	cr_assert_eq(rt.offsets, pyoffsets_for(3, 11));
	check_walk(c->pid, &rt);
	pychild_stop(c);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static void check_unsupported(const char *version, bool has_runtime)
{
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	struct pychild *c = &current;
	struct pyruntime rt;
	char exe[PATH_MAX];
	int r;

	pyenv_path(exe, sizeof(exe), version, "/bin/python");
	require_installed(exe);
	start_python(exe, c);
	cr_assert_eq(procmaps_read_pid(c->pid, false, &maps), 0);
	r = pyruntime_detect(c->pid, maps, &rt);
	cr_assert_eq(r, -EPROTONOSUPPORT, "%s: %d", exe, r);
	cr_assert_eq(rt.major, c->major);
	cr_assert_eq(rt.minor, c->minor);
	cr_assert_eq(rt.patch, (int)c->patch);
	cr_assert_null(rt.offsets);
	cr_assert_eq(rt.runtime_addr != 0, has_runtime);
	cr_assert_not_null(strstr(rt.path, "libpython"), "%s", rt.path);
	pychild_stop(c);
}

Test(pyruntime, python_2_7_unsupported, .timeout = 10) { check_unsupported("2.7.18", false); }
Test(pyruntime, cpython_3_6_unsupported, .timeout = 10) { check_unsupported("3.6.15", false); }
Test(pyruntime, cpython_3_7_unsupported, .timeout = 10) { check_unsupported("3.7.16", true); }

/* A free-threaded ("t") or debug ("d") build has other structure layouts:
 * recognized, but unsupported.  Debian's static python3.11 copied under
 * such a name stands in for one (none is installed here). */
static void check_other_abi(const char *name)
{
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	char dir[] = "/tmp/perfd-pyabi.XXXXXX", exe[64];
	struct pychild *c = &current;
	struct pyruntime rt;
	int in, out, r;
	struct stat st;

	require_installed("/usr/bin/python3.11");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_lt((size_t)snprintf(exe, sizeof(exe), "%s/%s", dir, name), sizeof(exe));
	in = open("/usr/bin/python3.11", O_RDONLY | O_CLOEXEC);
	out = open(exe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	cr_assert(in >= 0 && out >= 0 && fstat(in, &st) == 0);
	for (off_t done = 0; done < st.st_size;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)(st.st_size - done), 0);

		cr_assert_gt(n, 0, "copy_file_range: %s", strerror(errno));
		done += n;
	}
	close(in);
	close(out);
	setenv("PYTHONHOME", "/usr", 1); /* its stdlib, from anywhere */
	start_python(exe, c);
	unsetenv("PYTHONHOME");

	cr_assert_eq(procmaps_read_pid(c->pid, false, &maps), 0);
	r = pyruntime_detect(c->pid, maps, &rt);
	cr_assert_eq(r, -EPROTONOSUPPORT, "%s: %d", exe, r);
	cr_assert(rt.other_abi);
	cr_assert_null(rt.offsets);
	cr_assert_eq(rt.autotsskey_addr, 0);
	cr_assert_eq(rt.major, 3);
	cr_assert_eq(rt.minor, 11);
	pychild_stop(c);
	unlink(exe);
	rmdir(dir);
}

Test(pyruntime, free_threaded_build_unsupported, .timeout = 10) { check_other_abi("python3.11t"); }
Test(pyruntime, debug_build_unsupported, .timeout = 10) { check_other_abi("python3.11d"); }

/* The load bias of a library whose segments share file pages (lld's
 * default): a mapping's range then covers parts of two segments, and only
 * its page offset and permissions say which segment it maps.  A tiny
 * libpython3.11.so built with lld is loaded into this test; detection must
 * find its _PyRuntime where the dynamic linker put it, from all mappings
 * and from the executable ones only (what the daemon reads). */
static void check_lld_bias(const char *ld)
{
	static const char source[] =
		"char _PyRuntime[4096] = { 1 };\n"
		"const unsigned Py_Version = 0x030b07f0;\n"
		"int _PyEval_EvalFrameDefault(int x) { return x + _PyRuntime[x & 7]; }\n";
	char dir[] = "/tmp/perfd-lld.XXXXXX", src[64], lib[64], cmd[256];
	void *handle, *runtime;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/fake.c", dir);
	snprintf(lib, sizeof(lib), "%s/libpython3.11.so", dir);
	f = fopen(src, "we");
	cr_assert_not_null(f);
	fputs(source, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -shared -fPIC -fuse-ld=%s -o %s %s", ld, lib, src);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(handle, "%s", dlerror());
	runtime = dlsym(handle, "_PyRuntime");
	cr_assert_not_null(runtime);

	for (int exec_only = 0; exec_only < 2; exec_only++) {
		_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
		struct pyruntime rt;
		int r;

		cr_assert_eq(procmaps_read_pid(getpid(), exec_only, &maps), 0);
		r = pyruntime_detect(getpid(), maps, &rt);
		cr_assert_eq(r, 0, "%s: %s", lib, strerror(-r));
		cr_assert_eq(rt.minor, 11);
		cr_assert_eq(rt.runtime_addr, (uint64_t)(uintptr_t)runtime,
			     "ld %s, %s maps: _PyRuntime at 0x%" PRIx64 ", not 0x%" PRIxPTR, ld,
			     exec_only ? "executable" : "all", rt.runtime_addr, (uintptr_t)runtime);
	}
	dlclose(handle);
	unlink(lib);
	unlink(src);
	rmdir(dir);
}

Test(pyruntime, load_bias_lld) { check_lld_bias("lld"); } /* lld: packaging/install-deps.sh test */
Test(pyruntime, load_bias_bfd) { check_lld_bias("bfd"); }

Test(pyruntime, not_python)
{
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	struct pyruntime rt;

	cr_assert_eq(procmaps_read_pid(getpid(), false, &maps), 0);
	cr_assert_eq(pyruntime_detect(getpid(), maps, &rt), -ENOENT);
	cr_assert_eq(pyruntime_detect(0, maps, &rt), -ENOENT);
}

/* A name that looks like Python on a file that does not exist is an
 * error to report, not a silent "not Python". */
Test(pyruntime, missing_file)
{
	static const char text[] =
		"7f0000000000-7f0000001000 r-xp 00000000 fe:00 1 /nonexistent/libpython3.11.so.1.0\n";
	_cleanup_(procmaps_freep) struct procmaps *maps = NULL;
	_cleanup_fclose_ FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");
	struct pyruntime rt;

	cr_assert_not_null(f);
	cr_assert_eq(procmaps_parse(f, false, &maps), 0);
	cr_assert_eq(pyruntime_detect(0, maps, &rt), -ENOENT);
	cr_assert_eq(pyruntime_detect(0, NULL, &rt), -EINVAL);
}

Test(pyruntime, offsets_lookup)
{
	for (unsigned minor = 0; minor < 20; minor++) {
		const struct pyoffsets *o = pyoffsets_for(3, minor);

		if (minor < PYRUNTIME_MIN_MINOR || minor > PYRUNTIME_MAX_MINOR) {
			cr_assert_null(o, "3.%u", minor);
			continue;
		}
		cr_assert_not_null(o, "3.%u", minor);
		cr_assert_eq(o->major, 3);
		cr_assert_eq(o->minor, minor);
	}
	cr_assert_null(pyoffsets_for(2, 7));
	cr_assert_null(pyoffsets_for(4, 0));
}

/* ---- the offsets table against the headers ---- */

static const char gen_source[] =
	"#define Py_BUILD_CORE 1\n"
	"#include <Python.h>\n"
	"#include <stddef.h>\n"
	"#include <stdio.h>\n"
	"#include <string.h>\n"
	"#if PY_VERSION_HEX < 0x03090000\n"
	"#include <frameobject.h>\n"
	"#include <internal/pycore_pystate.h>\n"
	"#elif PY_VERSION_HEX < 0x030B0000\n"
	"#include <frameobject.h>\n"
	"#include <internal/pycore_runtime.h>\n"
	"#include <internal/pycore_interp.h>\n"
	"#else\n"
	"#include <internal/pycore_runtime.h>\n"
	"#include <internal/pycore_interp.h>\n"
	"#include <internal/pycore_frame.h>\n"
	"#endif\n"
	"#define P(name, expr) printf(\"%s %ld\\n\", name, (long)(expr))\n"
	"int main(void)\n"
	"{\n"
	"	P(\"major\", PY_MAJOR_VERSION);\n"
	"	P(\"minor\", PY_MINOR_VERSION);\n"
	"	P(\"runtime_interpreters_head\", offsetof(_PyRuntimeState, interpreters.head));\n"
	"#if PY_VERSION_HEX < 0x030C0000\n"
	"	P(\"runtime_tstate_current\", offsetof(_PyRuntimeState, gilstate.tstate_current));\n"
	"	P(\"runtime_autotsskey\", offsetof(_PyRuntimeState, gilstate.autoTSSkey));\n"
	"#else\n"
	"	P(\"runtime_tstate_current\", -1);\n"
	"	P(\"runtime_autotsskey\", offsetof(_PyRuntimeState, autoTSSkey));\n"
	"#endif\n"
	"#if PY_VERSION_HEX < 0x030C0000\n"
	"	P(\"runtime_gil\", offsetof(_PyRuntimeState, ceval.gil));\n"
	"#else\n"
	"	P(\"runtime_gil\", offsetof(_PyRuntimeState, _main_interpreter) +\n"
	"			   offsetof(PyInterpreterState, _gil));\n"
	"#endif\n"
	"	P(\"gil_last_holder\", offsetof(struct _gil_runtime_state, last_holder));\n"
	"	P(\"gil_locked\", offsetof(struct _gil_runtime_state, locked));\n"
	"	P(\"gil_size\", sizeof(struct _gil_runtime_state));\n"
	"#if PY_VERSION_HEX < 0x030C0000\n"
	"	P(\"tstate_status\", -1);\n"
	"	P(\"tstate_active_bit\", -1);\n"
	"#else\n"
	"	{\n"
	"		PyThreadState t;\n"
	"		unsigned w;\n"
	"		memset(&t, 0, sizeof(t));\n"
	"		t._status.active = 1;\n"
	"		memcpy(&w, (char *)&t + offsetof(PyThreadState, _status), sizeof(w));\n"
	"		P(\"tstate_status\", offsetof(PyThreadState, _status));\n"
	"		P(\"tstate_active_bit\", __builtin_ctz(w));\n"
	"	}\n"
	"#endif\n"
	"	P(\"tss_initialized\", offsetof(Py_tss_t, _is_initialized));\n"
	"	P(\"tss_key\", offsetof(Py_tss_t, _key));\n"
	"	P(\"interp_next\", offsetof(PyInterpreterState, next));\n"
	"#if PY_VERSION_HEX < 0x030B0000\n"
	"	P(\"interp_tstate_head\", offsetof(PyInterpreterState, tstate_head));\n"
	"#else\n"
	"	P(\"interp_tstate_head\", offsetof(PyInterpreterState, threads.head));\n"
	"#endif\n"
	"	P(\"tstate_next\", offsetof(PyThreadState, next));\n"
	"	P(\"tstate_interp\", offsetof(PyThreadState, interp));\n"
	"	P(\"tstate_thread_id\", offsetof(PyThreadState, thread_id));\n"
	"#if PY_VERSION_HEX < 0x030B0000\n"
	"	P(\"tstate_native_thread_id\", -1);\n"
	"	P(\"tstate_frame\", offsetof(PyThreadState, frame));\n"
	"	P(\"tstate_cframe\", -1);\n"
	"	P(\"cframe_current_frame\", -1);\n"
	"	P(\"tstate_current_frame\", -1);\n"
	"	P(\"frame_code\", offsetof(PyFrameObject, f_code));\n"
	"	P(\"frame_previous\", offsetof(PyFrameObject, f_back));\n"
	"	P(\"frame_lasti\", offsetof(PyFrameObject, f_lasti));\n"
	"	P(\"frame_instr\", -1);\n"
	"	P(\"frame_owner\", -1);\n"
	"	P(\"frame_is_entry\", -1);\n"
	"	P(\"frame_ident\", offsetof(PyFrameObject, f_globals));\n"
	"#else\n"
	"	P(\"tstate_native_thread_id\", offsetof(PyThreadState, native_thread_id));\n"
	"	P(\"tstate_frame\", -1);\n"
	"#if PY_VERSION_HEX < 0x030D0000\n"
	"	P(\"tstate_cframe\", offsetof(PyThreadState, cframe));\n"
	"	P(\"cframe_current_frame\", offsetof(_PyCFrame, current_frame));\n"
	"	P(\"tstate_current_frame\", -1);\n"
	"	P(\"frame_code\", offsetof(_PyInterpreterFrame, f_code));\n"
	"	P(\"frame_instr\", offsetof(_PyInterpreterFrame, prev_instr));\n"
	"#else\n"
	"	P(\"tstate_cframe\", -1);\n"
	"	P(\"cframe_current_frame\", -1);\n"
	"	P(\"tstate_current_frame\", offsetof(PyThreadState, current_frame));\n"
	"	P(\"frame_code\", offsetof(_PyInterpreterFrame, f_executable));\n"
	"	P(\"frame_instr\", offsetof(_PyInterpreterFrame, instr_ptr));\n"
	"#endif\n"
	"	P(\"frame_previous\", offsetof(_PyInterpreterFrame, previous));\n"
	"	P(\"frame_lasti\", -1);\n"
	"	P(\"frame_owner\", offsetof(_PyInterpreterFrame, owner));\n"
	"#if PY_VERSION_HEX < 0x030C0000\n"
	"	P(\"frame_is_entry\", offsetof(_PyInterpreterFrame, is_entry));\n"
	"	P(\"frame_ident\", offsetof(_PyInterpreterFrame, f_func));\n"
	"#else\n"
	"	P(\"frame_is_entry\", -1);\n"
	"	P(\"frame_ident\", offsetof(_PyInterpreterFrame, f_funcobj));\n"
	"#endif\n"
	"#endif\n"
	"	P(\"code_name\", offsetof(PyCodeObject, co_name));\n"
	"	P(\"code_filename\", offsetof(PyCodeObject, co_filename));\n"
	"	P(\"code_firstlineno\", offsetof(PyCodeObject, co_firstlineno));\n"
	"#if PY_VERSION_HEX < 0x030A0000\n"
	"	P(\"code_lnotab\", offsetof(PyCodeObject, co_lnotab));\n"
	"	P(\"code_linetable\", -1);\n"
	"#else\n"
	"	P(\"code_lnotab\", -1);\n"
	"	P(\"code_linetable\", offsetof(PyCodeObject, co_linetable));\n"
	"#endif\n"
	"#if PY_VERSION_HEX < 0x030B0000\n"
	"	P(\"code_qualname\", -1);\n"
	"	P(\"code_code_adaptive\", -1);\n"
	"#else\n"
	"	P(\"code_qualname\", offsetof(PyCodeObject, co_qualname));\n"
	"	P(\"code_code_adaptive\", offsetof(PyCodeObject, co_code_adaptive));\n"
	"#endif\n"
	"	P(\"unicode_ascii_data\", sizeof(PyASCIIObject));\n"
	"	P(\"bytes_sval\", offsetof(PyBytesObject, ob_sval));\n"
	"	P(\"var_size\", offsetof(PyVarObject, ob_size));\n"
	"	return 0;\n"
	"}\n";

#define FIELD(f) { #f, offsetof(struct pyoffsets, f) }
static const struct {
	const char *name;
	size_t off;
} fields[] = {
	FIELD(runtime_interpreters_head), FIELD(runtime_tstate_current),
	FIELD(runtime_autotsskey), FIELD(runtime_gil), FIELD(gil_last_holder),
	FIELD(gil_locked), FIELD(gil_size), FIELD(tss_initialized), FIELD(tss_key),
	FIELD(interp_next), FIELD(interp_tstate_head), FIELD(tstate_next),
	FIELD(tstate_interp), FIELD(tstate_thread_id), FIELD(tstate_native_thread_id),
	FIELD(tstate_frame), FIELD(tstate_cframe), FIELD(cframe_current_frame),
	FIELD(tstate_current_frame), FIELD(tstate_status), FIELD(tstate_active_bit),
	FIELD(frame_code), FIELD(frame_previous),
	FIELD(frame_lasti), FIELD(frame_instr), FIELD(frame_owner), FIELD(frame_is_entry),
	FIELD(frame_ident),
	FIELD(code_name), FIELD(code_qualname), FIELD(code_filename), FIELD(code_firstlineno),
	FIELD(code_lnotab), FIELD(code_linetable), FIELD(code_code_adaptive),
	FIELD(unicode_ascii_data), FIELD(bytes_sval), FIELD(var_size),
};

/* Every int32_t of struct pyoffsets after major/minor is in fields[]. */
_Static_assert(sizeof(struct pyoffsets) ==
		       2 * sizeof(unsigned) + ELEMENTSOF(fields) * sizeof(int32_t),
	       "a field of struct pyoffsets is not checked");

/* Compiles gen_source against the headers in include_dir, runs it and
 * compares each printed offset with the table. */
static void check_headers(const char *include_dir, const char *sysroot, unsigned minor)
{
	char dir[] = "/tmp/perfd-pyoffsets.XXXXXX";
	char src[PATH_MAX], bin[PATH_MAX], cmd[4 * PATH_MAX], line[128];
	const struct pyoffsets *o = pyoffsets_for(3, minor);
	bool seen[ELEMENTSOF(fields)] = { false };
	FILE *f;
	int status;

	require_installed(include_dir);
	cr_assert_not_null(o);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/gen.c", dir);
	snprintf(bin, sizeof(bin), "%s/gen", dir);
	f = fopen(src, "we");
	cr_assert_not_null(f);
	cr_assert_geq(fputs(gen_source, f), 0);
	cr_assert_eq(fclose(f), 0);

	/* a root's own /usr/include after ours: its pyconfig.h includes
	 * <x86_64-linux-gnu/python3.X/pyconfig.h> */
	snprintf(cmd, sizeof(cmd), "cc -w -I%s -I%s/internal%s%s%s -o %s %s 2>&1", include_dir,
		 include_dir, sysroot ? " -idirafter " : "", sysroot ? sysroot : "",
		 sysroot ? "/usr/include" : "", bin, src);
	status = system(cmd);
	cr_assert_eq(status, 0, "%s failed", cmd);

	f = popen(bin, "re");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		char name[64];
		long value;
		bool known = false;

		cr_assert_eq(sscanf(line, "%63s %ld", name, &value), 2, "%s", line);
		if (strcmp(name, "major") == 0 || strcmp(name, "minor") == 0) {
			cr_assert_eq(value, strcmp(name, "major") == 0 ? 3 : (long)minor,
				     "%s: %s is %ld", include_dir, name, value);
			continue;
		}
		for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
			int32_t mine;

			if (strcmp(fields[i].name, name) != 0)
				continue;
			memcpy(&mine, (const char *)o + fields[i].off, sizeof(mine));
			cr_expect_eq(mine, value, "3.%u %s: table %d, headers %ld", minor, name,
				     mine, value);
			seen[i] = known = true;
		}
		cr_assert(known, "unknown field %s", name);
	}
	cr_assert_eq(pclose(f), 0);
	for (size_t i = 0; i < ELEMENTSOF(fields); i++)
		cr_assert(seen[i], "3.%u: %s not printed", minor, fields[i].name);

	(void)unlink(bin);
	(void)unlink(src);
	(void)rmdir(dir);
}

static void check_pyenv_headers(const char *version, unsigned minor)
{
	char dir[PATH_MAX], rest[64];

	snprintf(rest, sizeof(rest), "/include/python3.%u", minor);
	pyenv_path(dir, sizeof(dir), version, rest);
	check_headers(dir, NULL, minor);
}

/* sid's pythonX.Y-dev, in the root tests/pythons/sid.py makes (make test
 * and make unit make it first). */
#define SID_ROOT "build/sid/root"

static void check_sid_headers(unsigned minor)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), SID_ROOT "/usr/include/python3.%u", minor);
	check_headers(dir, SID_ROOT, minor);
}

Test(pyoffsets, headers_3_8, .timeout = 20) { check_pyenv_headers("3.8.18", 8); }
Test(pyoffsets, headers_3_9, .timeout = 20) { check_pyenv_headers("3.9.18", 9); }
Test(pyoffsets, headers_3_10, .timeout = 20) { check_pyenv_headers("3.10.13", 10); }
Test(pyoffsets, headers_3_11, .timeout = 20) { check_pyenv_headers("3.11.7", 11); }
Test(pyoffsets, headers_3_12, .timeout = 20) { check_pyenv_headers("3.12.1", 12); }
Test(pyoffsets, headers_3_13, .timeout = 20) { check_pyenv_headers("3.13.0", 13); }
Test(pyoffsets, headers_debian_3_11, .timeout = 20) { check_headers("/usr/include/python3.11", NULL, 11); }
Test(pyoffsets, headers_sid_3_14, .timeout = 20) { check_sid_headers(14); }
