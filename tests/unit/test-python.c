/* SPDX-License-Identifier: MIT */
/*
 * test-python.c - unit tests for daemon/python.c, end to end on real
 * interpreters.
 *
 * Every installed CPython from 3.8 to 3.13 (pyenv's, and Debian's static
 * /usr/bin/python3.11) runs a script whose call chain is known by
 * construction, <module> -> main -> outer -> inner -> time.sleep, and
 * prints its version and its thread's pthread_self().  The test builds
 * the struct process the aggregator would (executable maps, modules from a
 * real symbolizer), a real BPF hash map for the descriptions, and calls
 * python_maps_changed (and takes in what its lane found, as perfd's
 * manager does): the runtime name and the BPF entry are checked, and
 * the entry is then *used* the way the BPF walker uses it (thread-specific
 * data from the thread pointer, then the frames through the offsets it
 * gives, read from /proc/PID/mem), which yields the Python frames of the
 * sample.  Those frames are merged into a synthetic native stack (a libc
 * leaf, two _PyEval_EvalFrameDefault frames with interpreter call
 * machinery between them, interpreter and libc frames at the root) and
 * the merged stack and the frame names, with and without lines, are
 * checked; so are a wrong co_firstlineno, Python frames left over (taken
 * by the rootmost loop frame, or put at the root end when the stack shows
 * none), loop calls that ran no frame, the output cap, and forgetting the
 * process.
 *
 * Non-Python processes and an unsupported CPython (3.7) are recognized as
 * such, a supported one without a BPF map is reported without frames, and
 * the memory of executables found not to be Python neither hides an
 * application that loads libpython later nor remembers an executable that
 * could not be looked at.  Detection reads no file on the caller's
 * thread, and reads libc from its mapping, whether or not it has a module
 * yet.  A version that is not installed is skipped,
 * with a message.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "profile/aggregate.h"
#include "fixture.h"
#include "profile/frame.h"
#include "perfd/macro.h"
#include "perfd/python.h"
#include "process/procmaps.h"
#include "interp/python/pthread_tsd.h"
#include "pychild.h"
#include "interp/python/pyruntime.h"
#include "interp/python/pydetect.h"
#include "interp/python/python.h"
#include "noread.h"
#include "symbols/symbolize.h"

#define PY_FRAMES 4 /* inner, outer, main, <module> */
#define START_TIME 4242 /* the process's identity with its pid */

/* --- the interpreter ------------------------------------------------------ */

static void suite_fini(void)
{
	pychild_stop_current();
	fixture_teardown();
}

TestSuite(python, .init = fixture_setup, .fini = suite_fini, .timeout = 15);

/* Valid Python 3.7 to 3.13.  Lines, leaf first, are in the tables below. */
static const char script_text[] =
	"import _thread, sys, time\n"                                  /* 1 */
	"def inner():\n"                                               /* 2 */
	"    v = sys.version_info\n"                                   /* 3 */
	"    sys.stdout.write('%d %d %d %d\\n' % (v[0], v[1], v[2], _thread.get_ident()))\n"
	"    sys.stdout.flush()\n"                                     /* 5 */
	"    time.sleep(30)\n"                                         /* 6 */
	"def outer():\n"                                               /* 7 */
	"    inner()\n"                                                /* 8 */
	"def main():\n"                                                /* 9 */
	"    x = 0\n"                                                  /* 10 */
	"    outer()\n"                                                /* 11 */
	"main()\n";                                                    /* 12 */
static const char *const frame_names[PY_FRAMES] = { "inner", "outer", "main", "<module>" };
static const int def_lines[PY_FRAMES] = { 2, 7, 9, 1 };
static const int call_lines[PY_FRAMES] = { 6, 8, 11, 12 };

/* Writes the script into the work directory, its path into script, and
 * starts exe on it; returns once it sleeps in inner. */
static void start_python(const char *exe, char *script, size_t size, struct pychild *c)
{
	char *argv[] = { (char *)exe, script, NULL };

	write_file("pymerge.py", script_text, sizeof(script_text) - 1);
	path_in_workdir(script, size, "pymerge.py");
	pychild_start(argv, PYCHILD_VERSION_THREAD, c);
}

/* --- the process as the aggregator holds it ------------------------------- */

struct fixture {
	struct symbolizer *sym;
	struct python *py;
	int map_fd;
	struct process p;
	struct process *others[2]; /* more processes the lanes' results are for */
	uint16_t libc_module;
	uint64_t libc_text; /* a file offset inside libc's executable mapping */
};

/* Reads pid's executable maps into p and resolves their modules as the
 * store's refresh_maps does (procread.c), in place of any process made
 * before. */
static void fill_process(struct fixture *fx, pid_t pid, struct process *p)
{
	procmaps_free(p->maps);
	free(p->map_modules);
	*p = (struct process){ .pid = (uint32_t)pid, .start_time_ns = START_TIME };
	snprintf(p->comm, sizeof(p->comm), "test-%d", (int)pid);
	cr_assert_eq(procmaps_read_pid(pid, true, &p->maps), 0);
	p->map_modules = calloc(p->maps->n ? p->maps->n : 1, sizeof(uint16_t));
	cr_assert_not_null(p->map_modules);
	for (size_t i = 0; i < p->maps->n; i++) {
		const struct procmap *m = &p->maps->maps[i];
		const char *base = strrchr(m->path, '/');
		int id = symbolizer_module_for_mapping(fx->sym, pid, geteuid(), m);

		p->map_modules[i] = id > 0 ? (uint16_t)id : FRAME_MODULE_NONE;
		if (id > 0 && base && strncmp(base + 1, "libc.so", 7) == 0) {
			fx->libc_module = (uint16_t)id;
			fx->libc_text = m->pgoff + 0x100;
		}
	}
}

/* The module of p's mapping of path (the last), 0 when none. */
static uint16_t module_of_path(const struct process *p, const char *path)
{
	uint16_t module = 0;

	for (size_t i = 0; i < p->maps->n; i++)
		if (strcmp(p->maps->maps[i].path, path) == 0)
			module = p->map_modules[i];
	return module;
}

static void make_process(struct fixture *fx, pid_t pid)
{
	fill_process(fx, pid, &fx->p);
}

/* fx's process (pid, start_time_ns), or one of its others; NULL if none. */
static struct process *process_of(struct fixture *fx, uint32_t pid, uint64_t start_time_ns)
{
	if (fx->p.pid == pid && fx->p.start_time_ns == start_time_ns)
		return &fx->p;
	for (size_t i = 0; i < ELEMENTSOF(fx->others); i++)
		if (fx->others[i] && fx->others[i]->pid == pid &&
		    fx->others[i]->start_time_ns == start_time_ns)
			return fx->others[i];
	return NULL;
}

/* Creates the BPF map, or passes no_map (-ENOTSUP, -ECANCELED) instead
 * when it is not 0. */
static void fixture_new_limits(struct fixture *fx, int no_map, const struct python_limits *limits)
{
	*fx = (struct fixture){ .map_fd = no_map };
	cr_assert_eq(symbolizer_new(&(struct symbolizer_opts){ 0 }, &fx->sym, NULL), 0);
	if (no_map == 0) {
		fx->map_fd = bpf_map_create(BPF_MAP_TYPE_HASH, NULL, sizeof(uint32_t),
					    sizeof(struct perfd_python_process), 64, NULL);
		cr_assert_geq(fx->map_fd, 0, "bpf_map_create: %s (the tests run as root)",
			      strerror(-fx->map_fd));
	}
	cr_assert_eq(python_new(fx->map_fd, limits, &fx->py), 0);
}

static void fixture_new(struct fixture *fx, int no_map)
{
	const struct python_limits limits = { .max_functions = 1000, .max_code_per_process = 100 };

	fixture_new_limits(fx, no_map, &limits);
}

static void fixture_free(struct fixture *fx)
{
	python_free(fx->py);
	symbolizer_free(fx->sym);
	procmaps_free(fx->p.maps);
	free(fx->p.map_modules);
	if (fx->map_fd >= 0)
		(void)close(fx->map_fd);
}

/* The lane has looked at (pid, start_time_ns): the process is seen again,
 * as perfd's manager does. */
static void on_detected(void *userdata, uint32_t pid, uint64_t start_time_ns)
{
	struct fixture *fx = userdata;
	struct process *p = process_of(fx, pid, start_time_ns);

	if (p)
		python_maps_changed(fx->py, p);
}

/* The reader has read (pid, start_time_ns)'s memory: what it found is
 * taken in, as perfd's manager does. */
static void on_read(void *userdata, uint32_t pid, uint64_t start_time_ns)
{
	struct fixture *fx = userdata;
	struct process *p = process_of(fx, pid, start_time_ns);

	if (p)
		python_read_back(fx->py, p);
}

/* Waits (30 s at most) until the lanes have looked at every process they
 * were given and read what they were asked to, and takes it in. */
static void settle(struct fixture *fx)
{
	static const struct python_callbacks cb = { .detected = on_detected, .read = on_read };
	struct python_stats st;

	for (python_get_stats(fx->py, &st); st.detections_pending || st.reads_pending;
	     python_get_stats(fx->py, &st)) {
		struct pollfd pfd[] = {
			{ .fd = python_fd(fx->py), .events = POLLIN },
			{ .fd = python_reader_fd(fx->py), .events = POLLIN },
		};

		cr_assert_gt(poll(pfd, 2, 30000), 0, "the Python lanes did not answer in 30 s");
		python_complete(fx->py, &cb, fx);
	}
}

/* python_maps_changed, and what the lane finds taken in. */
static void maps_changed(struct fixture *fx)
{
	python_maps_changed(fx->py, &fx->p);
	settle(fx);
}

static int lookup_description(const struct fixture *fx, struct perfd_python_process *ret)
{
	uint32_t key = fx->p.pid;

	return bpf_map_lookup_elem(fx->map_fd, &key, ret) < 0 ? -errno : 0;
}

/* python.c must have named fx's process after the version c reported,
 * followed by suffix. */
static void expect_runtime(const struct fixture *fx, const struct pychild *c, const char *suffix)
{
	char want[64];

	snprintf(want, sizeof(want), "CPython %u.%u.%u%s", c->major, c->minor, c->patch, suffix);
	cr_assert_str_eq(fx->p.runtime, want);
}

/* --- the description, checked and then used like the BPF walker ----------- */

static void check_description(const struct fixture *fx, const struct pyruntime *rt,
			      const struct perfd_python_process *d)
{
	const struct pyoffsets *o = rt->offsets;
	char path[PATH_MAX + 32];
	struct pthread_tsd tsd;
	unsigned walk = rt->minor <= 10 ? PERFD_PYWALK_FRAME_OBJECTS :
			rt->minor == 11 ? PERFD_PYWALK_IS_ENTRY : PERFD_PYWALK_SHIM_FRAMES;
	int32_t frame = o->tstate_frame >= 0 ? o->tstate_frame :
			o->tstate_cframe >= 0 ? o->tstate_cframe : o->tstate_current_frame;
	int32_t position = rt->minor <= 10 ? o->frame_lasti : o->frame_instr;
	int32_t position_end = position + (rt->minor <= 10 ? 4 : 8);

	cr_assert_eq(d->walk, walk, "3.%u: walk %u", rt->minor, d->walk);
	cr_assert_eq(d->tss_addr, rt->autotsskey_addr);
	cr_assert_eq(d->tstate_frame, frame);
	cr_assert_eq(d->cframe_current_frame, o->tstate_cframe >= 0 ? o->cframe_current_frame : -1);
	cr_assert_eq(d->frame_code, o->frame_code);
	cr_assert_eq(d->frame_previous, o->frame_previous);
	cr_assert_eq(d->frame_position, position);
	cr_assert_eq(d->frame_owner, o->frame_owner);
	cr_assert_eq(d->frame_is_entry, o->frame_is_entry);
	cr_assert_eq(d->frame_ident, o->frame_ident);
	cr_assert_eq(d->code_tag_first + d->tag_firstlineno, o->code_firstlineno);
	cr_assert_eq(d->code_tag_first + d->tag_filename, o->code_filename);
	cr_assert_geq(d->code_tag_size, (uint32_t)MAX(d->tag_firstlineno + 4, d->tag_filename + 8));
	cr_assert_lt(d->code_tag_size, 128);
	cr_assert_eq(d->code_adaptive, o->code_code_adaptive);

	/* One read of frame_read_size bytes covers every field of a frame. */
	cr_assert_eq(d->frame_read_size % 8, 0);
	cr_assert_leq(d->frame_read_size, 128);
	cr_assert_geq(d->frame_read_size, (uint32_t)(o->frame_code + 8));
	cr_assert_geq(d->frame_read_size, (uint32_t)(o->frame_previous + 8));
	cr_assert_geq(d->frame_read_size, (uint32_t)position_end);
	cr_assert_geq((int32_t)d->frame_read_size, o->frame_owner + 1);
	cr_assert_geq((int32_t)d->frame_read_size, o->frame_is_entry + 1);
	cr_assert_geq((int32_t)d->frame_read_size, o->frame_ident + 8);

	/* glibc's layout, as read from the libc the process maps. */
	for (size_t i = 0; i < fx->p.maps->n; i++) {
		const char *m = fx->p.maps->maps[i].path;
		const char *base = strrchr(m, '/');
		_cleanup_close_ int fd = -1;

		if (!base || strncmp(base + 1, "libc.so", 7) != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/root%s", (int)fx->p.pid, m);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
		cr_assert_eq(pthread_tsd_read(fd, &tsd), 0);
		cr_assert_eq(d->pthread_specific, tsd.specific);
		cr_assert_eq(d->key_data_size, tsd.key_data_size);
		cr_assert_eq(d->key_data_data, tsd.key_data_data);
		return;
	}
	cr_assert_fail("no libc in the maps");
}

/* The main thread's PyThreadState through its thread-specific data, as
 * the walker finds it, checked against the runtime's thread list. */
static uint64_t thread_state(pid_t pid, const struct pyruntime *rt, uint64_t tp,
			     const struct perfd_python_process *d)
{
	const struct pyoffsets *o = rt->offsets;
	uint32_t tss[2];
	uint64_t block, tstate, head;

	read_mem(pid, d->tss_addr, tss, sizeof(tss));
	cr_assert_eq(tss[0], 1, "autoTSSkey is not initialized");
	block = read_u64(pid, tp + d->pthread_specific + (uint64_t)(tss[1] / 32) * 8);
	cr_assert_neq(block, 0, "no block for key %u", tss[1]);
	tstate = read_u64(pid, block + (uint64_t)(tss[1] % 32) * d->key_data_size +
				       d->key_data_data);
	head = read_u64(pid, rt->runtime_addr + (uint64_t)o->runtime_interpreters_head);
	head = read_u64(pid, head + (uint64_t)o->interp_tstate_head);
	cr_assert_eq(tstate, head, "key %u: 0x%" PRIx64 " is not the thread state 0x%" PRIx64,
		     tss[1], tstate, head);
	return tstate;
}

/* PyFunctionObject.func_code, 3.10 and later (after globals, builtins,
 * name and qualname). */
#define FUNC_CODE_OFFSET 48

/* Walks the frames with the description only; returns them leaf first
 * (no entry marks) and how many.  Checks that each frame's word at
 * frame_ident is what the walker's tag cache takes it for: the function
 * running the frame's code (3.11+), or the globals, which every frame of
 * the one-module script shares (3.8-3.10). */
static size_t walk_frames(pid_t pid, uint64_t tstate, const struct perfd_python_process *d,
			  struct perfd_python_frame *ret, int32_t *firstlines, size_t max)
{
	uint64_t frame = read_u64(pid, tstate + (uint64_t)d->tstate_frame);
	uint64_t globals = 0;
	size_t n = 0;

	if (d->cframe_current_frame >= 0)
		frame = read_u64(pid, frame + (uint64_t)d->cframe_current_frame);
	for (; frame && n < max; frame = read_u64(pid, frame + (uint64_t)d->frame_previous)) {
		uint64_t code, ident;

		if (d->walk == PERFD_PYWALK_SHIM_FRAMES) {
			uint8_t owner;

			read_mem(pid, frame + (uint64_t)d->frame_owner, &owner, 1);
			if (owner >= PERFD_PY_OWNED_BY_SHIM)
				continue;
		}
		code = read_u64(pid, frame + (uint64_t)d->frame_code) & ~(uint64_t)7; /* 3.14: a _PyStackRef */
		cr_assert_neq(code, 0);
		ident = read_u64(pid, frame + (uint64_t)d->frame_ident);
		cr_assert_neq(ident, 0, "frame %zu: no function or globals", n);
		if (d->walk == PERFD_PYWALK_FRAME_OBJECTS) {
			cr_assert(globals == 0 || ident == globals,
				  "frame %zu: globals 0x%" PRIx64 ", not 0x%" PRIx64, n, ident, globals);
			globals = ident;
		} else {
			cr_assert_eq(read_u64(pid, ident + FUNC_CODE_OFFSET), code,
				     "frame %zu: 0x%" PRIx64 " is not the function of code 0x%" PRIx64,
				     n, ident, code);
		}
		ret[n].code = code;
		if (d->walk == PERFD_PYWALK_FRAME_OBJECTS)
			ret[n].position = read_i32(pid, frame + (uint64_t)d->frame_position);
		else
			ret[n].position =
				(int32_t)(read_u64(pid, frame + (uint64_t)d->frame_position) -
					  (code + (uint64_t)d->code_adaptive));
		firstlines[n] = read_i32(pid, code + (uint64_t)(d->code_tag_first + d->tag_firstlineno));
		ret[n].tag = perfd_python_code_tag(firstlines[n],
						   read_u64(pid, code + (uint64_t)(d->code_tag_first + d->tag_filename)));
		n++;
	}
	return n;
}

/* --- samples --------------------------------------------------------------- */

/* A sample with one kernel frame (or a kernel stack error), n_user user
 * frames (their raw values do not matter to the merge) and the Python
 * frames. */
static struct perfd_sample *make_sample(int kernel_depth, size_t n_user,
					const struct perfd_python_frame *pf, size_t n_py)
{
	size_t kd = kernel_depth > 0 ? (size_t)kernel_depth : 0;
	size_t words = kd + n_user + n_py * (sizeof(*pf) / sizeof(uint64_t));
	struct perfd_sample *s = calloc(1, sizeof(*s) + words * sizeof(uint64_t));

	cr_assert_not_null(s);
	s->hdr.kind = PERFD_EVENT_SAMPLE;
	s->kernel_depth = kernel_depth;
	s->user_depth = (int32_t)n_user;
	s->python_depth = (uint32_t)n_py;
	s->flags = PERFD_SAMPLE_F_PYTHON;
	for (size_t i = 0; i < kd; i++)
		s->ips[i] = 0xffffffff81000000ULL + i;
	for (size_t i = 0; i < n_user; i++)
		s->ips[kd + i] = 0x7f0000001000ULL + i;
	memcpy(&s->ips[kd + n_user], pf, n_py * sizeof(*pf));
	return s;
}

/* Merges, the sample's flags PERFD_SAMPLE_F_PYTHON and more_flags. */
static size_t merge_flagged(struct fixture *fx, uint32_t more_flags, int kernel_depth,
			    const uint64_t *native, size_t n, const struct perfd_python_frame *pf,
			    size_t n_py, uint64_t *out, size_t cap)
{
	_cleanup_free_ struct perfd_sample *s = make_sample(kernel_depth, n, pf, n_py);

	s->flags |= more_flags;
	memcpy(out, native, n * sizeof(*native));
	/* as the aggregator does: the sample waits for its code objects */
	if (python_wait(fx->py, &fx->p, s))
		settle(fx);
	return python_merge(fx->py, &fx->p, s, out, n, cap);
}

static size_t merge(struct fixture *fx, int kernel_depth, const uint64_t *native, size_t n,
		    const struct perfd_python_frame *pf, size_t n_py, uint64_t *out, size_t cap)
{
	return merge_flagged(fx, 0, kernel_depth, native, n, pf, n_py, out, cap);
}

static const char *name_of(const struct fixture *fx, uint64_t frame, bool lines, char *buf,
			   size_t size)
{
	cr_assert_eq(frame_module(frame), FRAME_MODULE_PYTHON, "frame 0x%" PRIx64 " is native",
		     frame);
	return python_frame_name(fx->py, frame, lines, buf, size);
}

/* Python frame i of the script must be out[at], with its line. */
static void expect_py(const struct fixture *fx, const uint64_t *out, size_t at, size_t i,
		      const char *script)
{
	char buf[PATH_MAX + 128], want[PATH_MAX + 128];

	snprintf(want, sizeof(want), "%s (%s:%d)", frame_names[i], script, call_lines[i]);
	cr_assert_str_eq(name_of(fx, out[at], true, buf, sizeof(buf)), want, "out[%zu]", at);
	snprintf(want, sizeof(want), "%s (%s)", frame_names[i], script);
	cr_assert_str_eq(name_of(fx, out[at], false, buf, sizeof(buf)), want, "out[%zu]", at);
	/* the function starts at its def: co_firstlineno */
	{
		struct frame_record rec;

		python_frame_resolve(fx->py, out[at], &rec);
		cr_assert_eq(rec.start_line, (uint32_t)def_lines[i], "out[%zu] starts at %u", at,
			     rec.start_line);
	}
}

static void expect_native(const uint64_t *out, size_t at, uint64_t frame)
{
	cr_assert_eq(out[at], frame, "out[%zu] is 0x%" PRIx64 ", not native 0x%" PRIx64, at,
		     out[at], frame);
}

/* An offset in the interpreter's file outside the evaluation loop. */
static uint64_t outside_eval(const struct pyruntime *rt, uint64_t from)
{
	for (uint64_t off = from;; off += 0x10) {
		bool in = false;

		for (size_t e = 0; e < PYRUNTIME_EVAL_RANGES; e++)
			in = in || (off >= rt->eval[e].start && off < rt->eval[e].end);
		if (!in)
			return off;
	}
}

static void check_interpreter(const char *exe)
{
	struct pychild *c = &current;
	struct fixture fx;
	struct pyruntime rt;
	struct perfd_python_process desc;
	struct perfd_python_frame pf[PY_FRAMES + 2], walked[PY_FRAMES + 2];
	int32_t walked_firstlines[PY_FRAMES + 2];
	struct python_stats st;
	uint64_t native[8], out[32], again[32], tstate;
	uint64_t f_libc, f_eval_leaf, f_eval_root, f_machinery, f_interp_root, f_root;
	uint16_t interp_module;
	char script[PATH_MAX], buf[PATH_MAX + 128];
	size_t n, nw;
	int r;

	require_installed(exe);
	start_python(exe, script, sizeof(script), c);
	fixture_new(&fx, 0);
	make_process(&fx, c->pid);

	/* What python.c will have found, for the expectations. */
	r = pyruntime_detect(c->pid, fx.p.maps, &rt);
	cr_assert_eq(r, 0, "pyruntime_detect: %s", strerror(-r));
	cr_assert_not_null(rt.offsets);
	cr_assert_lt(rt.eval[0].start, rt.eval[0].end, "no _PyEval_EvalFrameDefault in %s",
		     rt.path);
	cr_assert_gt(rt.eval[0].end - rt.eval[0].start, 0x40);
	interp_module = module_of_path(&fx.p, rt.path);
	cr_assert_neq(interp_module, 0);
	cr_assert_neq(fx.libc_module, 0);

	/* Recognition: the runtime's name and the BPF description. */
	maps_changed(&fx);
	expect_runtime(&fx, c, "");
	cr_assert_eq(lookup_description(&fx, &desc), 0, "no BPF entry for pid %u", fx.p.pid);
	check_description(&fx, &rt, &desc);
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(st.unsupported, 0);
	/* The same maps again: nothing to redo. */
	maps_changed(&fx);
	expect_runtime(&fx, c, "");

	/* The frames, found with the description only. */
	tstate = thread_state(c->pid, &rt, c->thread_pointer, &desc);
	nw = walk_frames(c->pid, tstate, &desc, walked, walked_firstlines, ELEMENTSOF(walked));
	cr_assert_eq(nw, PY_FRAMES, "%zu frames", nw);
	for (size_t i = 0; i < PY_FRAMES; i++)
		cr_assert_eq(walked_firstlines[i], def_lines[i], "frame %zu", i);

	/* Two loop calls: inner and outer in the leaf one, main and <module>
	 * in the root one. */
	memcpy(pf, walked, sizeof(walked));
	pf[1].code |= PERFD_PYFRAME_ENTRY;
	pf[3].code |= PERFD_PYFRAME_ENTRY;
	f_libc = frame_make(fx.libc_module, fx.libc_text);
	f_eval_leaf = frame_make(interp_module, rt.eval[0].start + 0x10);
	f_machinery = frame_make(interp_module, outside_eval(&rt, rt.eval[0].end));
	f_eval_root = frame_make(interp_module, rt.eval[0].start + 0x40);
	f_interp_root = frame_make(interp_module, outside_eval(&rt, rt.eval[0].end + 0x100));
	f_root = frame_make(fx.libc_module, fx.libc_text + 0x200);
	memcpy(native, (uint64_t[]){ f_libc, f_eval_leaf, f_machinery, f_eval_root, f_interp_root,
				     f_root },
	       6 * sizeof(uint64_t));

	n = merge(&fx, 1, native, 6, pf, PY_FRAMES, out, ELEMENTSOF(out));
	cr_assert_eq(n, 7, "%zu frames", n);
	expect_native(out, 0, f_libc);
	for (size_t i = 0; i < PY_FRAMES; i++)
		expect_py(&fx, out, 1 + i, i, script);
	expect_native(out, 5, f_interp_root); /* outside the loop calls: kept */
	expect_native(out, 6, f_root);
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.code_reads, PY_FRAMES);
	cr_assert_eq(st.code_read_errors, 0);
	cr_assert_eq(st.functions, PY_FRAMES);
	cr_assert_eq(st.frames, PY_FRAMES);
	cr_assert_eq(st.unmatched, 0);

	/* Again, without a kernel stack: the same frames, from the cache. */
	n = merge(&fx, -EFAULT, native, 6, pf, PY_FRAMES, again, ELEMENTSOF(again));
	cr_assert_eq(n, 7);
	cr_assert_arr_eq(again, out, 7 * sizeof(uint64_t));
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.code_reads, PY_FRAMES, "the cache was not used");

	/* A C extension (here libc) between the loop calls stays. */
	native[2] = f_libc;
	n = merge(&fx, 1, native, 6, pf, PY_FRAMES, out, ELEMENTSOF(out));
	cr_assert_eq(n, 8);
	expect_py(&fx, out, 2, 1, script);
	expect_native(out, 3, f_libc);
	expect_py(&fx, out, 4, 2, script);
	native[2] = f_machinery;

	/* The cap. */
	n = merge(&fx, 1, native, 6, pf, PY_FRAMES, out, 3);
	cr_assert_eq(n, 3);
	expect_native(out, 0, f_libc);
	expect_py(&fx, out, 1, 0, script);
	expect_py(&fx, out, 2, 1, script);

	/* Lines come from the position: the first instruction of inner is
	 * on a line after its def, not the sleep's. */
	{
		struct perfd_python_frame moved[PY_FRAMES];
		char line_buf[PATH_MAX + 128];
		unsigned line;

		memcpy(moved, pf, sizeof(moved));
		moved[0].position = 0;
		n = merge(&fx, 1, native, 6, moved, PY_FRAMES, out, ELEMENTSOF(out));
		cr_assert_eq(n, 7);
		name_of(&fx, out[1], true, line_buf, sizeof(line_buf));
		cr_assert_not_null(strrchr(line_buf, ':'), "no line: %s", line_buf);
		cr_assert_eq(sscanf(strrchr(line_buf, ':'), ":%u)", &line), 1, "%s", line_buf);
		cr_assert(line >= (unsigned)def_lines[0] && line < (unsigned)call_lines[0], "%s",
			  line_buf);

		/* not started yet (f_lasti -1, or the instruction before the
		 * first): the def line */
		moved[0].position = rt.minor <= 10 ? -1 : -2;
		n = merge(&fx, 1, native, 6, moved, PY_FRAMES, out, ELEMENTSOF(out));
		cr_assert_eq(n, 7);
		name_of(&fx, out[1], true, line_buf, sizeof(line_buf));
		cr_assert_not_null(strrchr(line_buf, ':'), "no line: %s", line_buf);
		cr_assert_eq(sscanf(strrchr(line_buf, ':'), ":%u)", &line), 1, "%s", line_buf);
		cr_assert_eq(line, (unsigned)def_lines[0], "%s", line_buf);
	}

	/* A tag that differs from the object's: not that code object any
	 * more. */
	{
		struct perfd_python_frame stale[PY_FRAMES];

		memcpy(stale, pf, sizeof(stale));
		stale[0].tag += 1;
		n = merge(&fx, 1, native, 6, stale, PY_FRAMES, out, ELEMENTSOF(out));
		cr_assert_eq(n, 7);
		cr_assert_str_eq(name_of(&fx, out[1], true, buf, sizeof(buf)),
				 "[python: unreadable code object]");
		cr_assert_str_eq(name_of(&fx, out[1], false, buf, sizeof(buf)),
				 "[python: unreadable code object]");
		expect_py(&fx, out, 2, 1, script);
		python_get_stats(fx.py, &st);
		cr_assert_eq(st.code_read_errors, 1);
		/* and the right one reads again */
		n = merge(&fx, 1, native, 6, pf, PY_FRAMES, out, ELEMENTSOF(out));
		expect_py(&fx, out, 1, 0, script);
	}

	/* One loop call in the native stack for two (the stack was cut short,
	 * or a loop frame went unrecognized): the rootmost loop frame takes
	 * the Python frames left over. */
	{
		uint64_t short_native[] = { f_libc, f_eval_leaf, f_root };
		uint64_t before = 0;

		python_get_stats(fx.py, &st);
		before = st.unmatched;
		n = merge(&fx, 1, short_native, 3, pf, PY_FRAMES, out, ELEMENTSOF(out));
		cr_assert_eq(n, 6);
		expect_native(out, 0, f_libc);
		for (size_t i = 0; i < PY_FRAMES; i++)
			expect_py(&fx, out, 1 + i, i, script);
		expect_native(out, 5, f_root);
		python_get_stats(fx.py, &st);
		cr_assert_eq(st.unmatched, before);

		/* no loop frame at all: every Python frame at the root end */
		short_native[1] = f_machinery;
		n = merge(&fx, 1, short_native, 3, pf, PY_FRAMES, out, ELEMENTSOF(out));
		cr_assert_eq(n, 7);
		expect_native(out, 0, f_libc);
		expect_native(out, 1, f_machinery);
		expect_native(out, 2, f_root);
		for (size_t i = 0; i < PY_FRAMES; i++)
			expect_py(&fx, out, 3 + i, i, script);
		python_get_stats(fx.py, &st);
		cr_assert_eq(st.unmatched - before, PY_FRAMES);
	}

	/* The same short stack from a table walk that did not reach the root
	 * (no way on past code without CFI, or a table pending): the rootmost
	 * loop frame is not the root one, so it keeps its own Python frames,
	 * the native frame past it follows, and the rest go at the root end. */
	{
		uint64_t short_native[] = { f_libc, f_eval_leaf, f_root };
		const uint32_t unrooted[] = {
			PERFD_SAMPLE_F_DWARF | PERFD_SAMPLE_F_TRUNCATED,
			PERFD_SAMPLE_F_DWARF | PERFD_SAMPLE_F_TRUNCATED | PERFD_SAMPLE_F_UNWIND_PENDING,
		};

		for (size_t k = 0; k < ELEMENTSOF(unrooted); k++) {
			n = merge_flagged(&fx, unrooted[k], 1, short_native, 3, pf, PY_FRAMES, out,
					  ELEMENTSOF(out));
			cr_assert_eq(n, 6, "flags %#x: %zu frames", unrooted[k], n);
			expect_native(out, 0, f_libc);
			expect_py(&fx, out, 1, 0, script);
			expect_py(&fx, out, 2, 1, script);
			expect_native(out, 3, f_root);
			expect_py(&fx, out, 4, 2, script);
			expect_py(&fx, out, 5, 3, script);
		}
		/* walked by tables to the root: as before, the loop frame takes all */
		n = merge_flagged(&fx, PERFD_SAMPLE_F_DWARF, 1, short_native, 3, pf, PY_FRAMES, out,
				  ELEMENTSOF(out));
		cr_assert_eq(n, 6);
		expect_py(&fx, out, 4, 3, script);
		expect_native(out, 5, f_root);
	}

	/* A loop call that ran no visible frame takes its native frame and
	 * shows nothing. */
	{
		struct perfd_python_frame with_empty[PY_FRAMES + 1];

		with_empty[0] = (struct perfd_python_frame){ .code = PERFD_PYFRAME_ENTRY };
		memcpy(&with_empty[1], walked, PY_FRAMES * sizeof(*walked));
		with_empty[PY_FRAMES].code |= PERFD_PYFRAME_ENTRY;
		n = merge(&fx, 1, native, 6, with_empty, PY_FRAMES + 1, out, ELEMENTSOF(out));
		cr_assert_eq(n, 7);
		expect_native(out, 0, f_libc);
		/* the leaf loop call was empty, the root one ran all four */
		for (size_t i = 0; i < PY_FRAMES; i++)
			expect_py(&fx, out, 1 + i, i, script);
		expect_native(out, 5, f_interp_root);
		expect_native(out, 6, f_root);
	}

	/* Another incarnation of the pid is not this process. */
	{
		struct process other = fx.p;

		other.start_time_ns = START_TIME + 1;
		python_process_gone(fx.py, &other);
		cr_assert_eq(lookup_description(&fx, &desc), 0);
	}

	/* Gone: the BPF entry goes, and samples are left as they are. */
	python_process_gone(fx.py, &fx.p);
	cr_assert_eq(lookup_description(&fx, &desc), -ENOENT);
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.processes, 0);
	cr_assert_eq(st.code_objects, 0);
	n = merge(&fx, 1, native, 6, pf, PY_FRAMES, out, ELEMENTSOF(out));
	cr_assert_eq(n, 6);
	cr_assert_arr_eq(out, native, 6 * sizeof(uint64_t));

	fixture_free(&fx);
	pychild_stop(c);
}

PYCHILD_SUPPORTED_TESTS(python, check_interpreter)

/* A second child, for the tests that need two. */
static struct pychild second;

static void stop_second(void)
{
	pychild_stop(&second);
}

Test(python, not_python, .fini = stop_second)
{
	char *argv[] = { (char *)"/bin/sleep", (char *)"30", NULL };
	struct fixture fx;
	struct perfd_python_process desc;
	struct python_stats st;
	uint64_t native[2], out[4];
	struct perfd_python_frame pf = { .code = 0x1000 | PERFD_PYFRAME_ENTRY, .tag = 1 };

	pychild_start(argv, PYCHILD_SILENT, &current);
	fixture_new(&fx, 0);
	make_process(&fx, current.pid);
	strcpy(fx.p.runtime, "stale");
	maps_changed(&fx);
	cr_assert_str_empty(fx.p.runtime);
	cr_assert_eq(lookup_description(&fx, &desc), -ENOENT);
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.processes, 0);
	cr_assert_eq(st.unsupported, 0);

	/* Python frames in a sample of it are ignored. */
	native[0] = frame_make(fx.libc_module, fx.libc_text);
	native[1] = frame_make(fx.libc_module, fx.libc_text + 8);
	cr_assert_eq(merge(&fx, 0, native, 2, &pf, 1, out, ELEMENTSOF(out)), 2);
	cr_assert_arr_eq(out, native, sizeof(native));

	/* Another process of the same executable: not Python either. */
	pychild_start(argv, PYCHILD_SILENT, &second);
	make_process(&fx, second.pid);
	strcpy(fx.p.runtime, "stale");
	maps_changed(&fx);
	cr_assert_str_empty(fx.p.runtime);
	cr_assert_eq(lookup_description(&fx, &desc), -ENOENT);
	cr_assert_eq(merge(&fx, 0, native, 2, &pf, 1, out, ELEMENTSOF(out)), 2);
	fixture_free(&fx);
}

/* An executable first seen without CPython that loads libpython later
 * (an application embedding Python) is looked at again. */
static const char embed_source[] =
	"#include <dlfcn.h>\n"
	"#include <stdio.h>\n"
	"#include <unistd.h>\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	void *h;\n"
	"	void (*init)(void);\n"
	"	int (*run)(const char *);\n"
	"	if (argc < 3) {\n"
	"		sleep(30);\n"
	"		return 0;\n"
	"	}\n"
	"	h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);\n"
	"	if (!h) {\n"
	"		fprintf(stderr, \"%s\\n\", dlerror());\n"
	"		return 1;\n"
	"	}\n"
	"	init = (void (*)(void))dlsym(h, \"Py_Initialize\");\n"
	"	run = (int (*)(const char *))dlsym(h, \"PyRun_SimpleString\");\n"
	"	if (!init || !run)\n"
	"		return 1;\n"
	"	init();\n"
	"	return run(argv[2]);\n"
	"}\n";

Test(python, embedded_after_not_python, .fini = stop_second)
{
	const char *home = PYENV_VERSIONS "/3.12.1";
	const char *lib = PYENV_VERSIONS "/3.12.1/lib/libpython3.12.so.1.0";
	char exe[PATH_MAX], src[PATH_MAX];
	char *cc[] = { (char *)"cc", (char *)"-o", exe, src, (char *)"-ldl", NULL };
	char *plain[] = { exe, NULL };
	char *embedding[] = { exe, (char *)lib, (char *)script_text, NULL };
	struct perfd_python_process desc;
	struct fixture fx;

	require_installed(lib);
	write_file("embed.c", embed_source, sizeof(embed_source) - 1);
	path_in_workdir(src, sizeof(src), "embed.c");
	path_in_workdir(exe, sizeof(exe), "embed");
	run(cc);

	fixture_new(&fx, 0);
	pychild_start(plain, PYCHILD_SILENT, &second);
	make_process(&fx, second.pid);
	maps_changed(&fx);
	cr_assert_str_empty(fx.p.runtime);

	cr_assert_eq(setenv("PYTHONHOME", home, 1), 0);
	pychild_start(embedding, PYCHILD_VERSION_THREAD, &current);
	make_process(&fx, current.pid);
	maps_changed(&fx);
	expect_runtime(&fx, &current, "");
	cr_assert_eq(lookup_description(&fx, &desc), 0);
	fixture_free(&fx);
}

/* A process that exits before its executable could be looked at says
 * nothing about that executable: a renamed static CPython (Debian's
 * python3.11 under another name) started again is recognized. */
Test(python, exited_process_does_not_hide_executable, .fini = stop_second)
{
	const char *python = "/usr/bin/python3.11";
	char exe[PATH_MAX], script[PATH_MAX];
	char *cp[] = { (char *)"cp", (char *)python, exe, NULL };
	char *argv[] = { exe, script, NULL };
	struct fixture fx;

	require_installed(python);
	path_in_workdir(exe, sizeof(exe), "myapp");
	run(cp);
	write_file("pymerge.py", script_text, sizeof(script_text) - 1);
	path_in_workdir(script, sizeof(script), "pymerge.py");

	fixture_new(&fx, 0);
	pychild_start(argv, PYCHILD_VERSION_THREAD, &second);
	make_process(&fx, second.pid);
	pychild_stop(&second);
	maps_changed(&fx);
	cr_assert_str_empty(fx.p.runtime);

	pychild_start(argv, PYCHILD_VERSION_THREAD, &current);
	make_process(&fx, current.pid);
	maps_changed(&fx);
	expect_runtime(&fx, &current, "");
	fixture_free(&fx);
}

Test(python, cpython_3_7_unsupported)
{
	char exe[] = PYENV_VERSIONS "/3.7.16/bin/python";
	char script[PATH_MAX];
	struct fixture fx;
	struct perfd_python_process desc;
	struct python_stats st;

	require_installed(exe);
	start_python(exe, script, sizeof(script), &current);
	fixture_new(&fx, 0);
	make_process(&fx, current.pid);
	maps_changed(&fx);
	expect_runtime(&fx, &current, " (unsupported)");
	cr_assert_eq(lookup_description(&fx, &desc), -ENOENT);
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.processes, 0);
	cr_assert_eq(st.unsupported, 1);
	python_process_gone(fx.py, &fx.p);
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.unsupported, 0);
	fixture_free(&fx);
}

/* Over the byte budget for line tables, a process's cache starts over
 * before it takes a read in: memory stays bounded (one read's code
 * objects: one here, each sample showing one frame), the resets are
 * counted, and every frame is still named and lined as with a cache. */
Test(python, line_table_budget)
{
	char exe[] = PYENV_VERSIONS "/3.12.1/bin/python3";
	const struct python_limits limits = {
		.max_functions = 1000, .max_code_per_process = 100, .max_code_bytes = 1,
	};
	struct fixture fx, roomy;
	struct pyruntime rt;
	struct perfd_python_process desc;
	struct perfd_python_frame pf[PY_FRAMES + 2];
	int32_t firstlines[PY_FRAMES + 2];
	struct python_stats st;
	uint64_t native[2], out[16], want[16];
	char script[PATH_MAX], a[PATH_MAX + 128], b[PATH_MAX + 128];
	uint16_t interp_module;
	size_t n, n_want;

	require_installed(exe);
	start_python(exe, script, sizeof(script), &current);
	fixture_new_limits(&fx, 0, &limits);
	fixture_new(&roomy, 0);
	make_process(&fx, current.pid);
	make_process(&roomy, current.pid);
	cr_assert_eq(pyruntime_detect(current.pid, fx.p.maps, &rt), 0);
	interp_module = module_of_path(&fx.p, rt.path);
	maps_changed(&fx);
	maps_changed(&roomy);
	cr_assert_eq(lookup_description(&fx, &desc), 0);
	cr_assert_eq(walk_frames(current.pid, thread_state(current.pid, &rt, current.thread_pointer, &desc),
				 &desc, pf, firstlines, ELEMENTSOF(pf)),
		     PY_FRAMES);
	pf[PY_FRAMES - 1].code |= PERFD_PYFRAME_ENTRY; /* one loop call runs them all */
	native[0] = frame_make(fx.libc_module, fx.libc_text);
	native[1] = frame_make(interp_module, rt.eval[0].start + 0x10);

	for (size_t f = 0; f < PY_FRAMES; f++)
		pf[f].code |= PERFD_PYFRAME_ENTRY; /* a loop call each */
	for (int round = 0; round < 2; round++) {
		for (size_t f = 0; f < PY_FRAMES; f++) {
			n_want = merge(&roomy, 1, native, 2, &pf[f], 1, want, ELEMENTSOF(want));
			n = merge(&fx, 1, native, 2, &pf[f], 1, out, ELEMENTSOF(out));
			cr_assert_eq(n, n_want);
			for (size_t i = 1; i < n; i++)
				cr_assert_str_eq(name_of(&fx, out[i], true, a, sizeof(a)),
						 name_of(&roomy, want[i], true, b, sizeof(b)));
		}
	}
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.code_objects, 1, "%zu code objects held", st.code_objects);
	cr_assert_geq(st.cache_resets, 2 * PY_FRAMES - 1);
	cr_assert_gt(st.code_reads, PY_FRAMES, "a cache this small cannot keep them all");
	cr_assert_eq(st.code_read_errors, 0);
	fixture_free(&roomy);
	fixture_free(&fx);
}

/* Starts pyenv's CPython 3.12.1 (Debian's 3.11 without it) on the
 * script, as current. */
static void start_a_supported_python(void)
{
	const char *exe = PYENV_VERSIONS "/3.12.1/bin/python";
	char script[PATH_MAX];

	if (access(exe, X_OK) != 0)
		exe = "/usr/bin/python3.11";
	require_installed(exe);
	start_python(exe, script, sizeof(script), &current);
}

/* Without a BPF map (a kernel that cannot walk Python, or Python frames
 * turned off) a supported runtime is still recognized, and said to show
 * no Python frames. */
static void check_no_map(int reason)
{
	struct fixture fx;
	struct python_stats st;

	start_a_supported_python();
	fixture_new(&fx, reason);
	make_process(&fx, current.pid);
	maps_changed(&fx);
	expect_runtime(&fx, &current, " (no Python frames)");
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.processes, 0);
	cr_assert_eq(st.unsupported, 1);
	fixture_free(&fx);
}

/* Looking for CPython reads the process's files (its interpreter, its
 * libc): python_maps_changed leaves that to the lane and opens, reads and
 * stats nothing on the caller's thread (perfd's loop: a file system need
 * not answer).  What the lane finds is the runtime, named. */
static void look(void *arg)
{
	struct fixture *fx = arg;

	python_maps_changed(fx->py, &fx->p);
}

static void ignore_detected(void *userdata, uint32_t pid, uint64_t start_time_ns)
{
}

/* Waits (30 s at most) until the detection lane is back, and leaves what
 * it found for the next python_maps_changed. */
static void settle_detection(struct fixture *fx)
{
	static const struct python_callbacks cb = { .detected = ignore_detected, .read = on_read };
	struct python_stats st;

	for (python_get_stats(fx->py, &st); st.detections_pending; python_get_stats(fx->py, &st)) {
		struct pollfd pfd = { .fd = python_fd(fx->py), .events = POLLIN };

		cr_assert_eq(poll(&pfd, 1, 30000), 1, "the Python lane did not answer in 30 s");
		python_complete(fx->py, &cb, fx);
	}
}

/* ... and once it is back, taking in what it found does not read the
 * process's memory either (whether an interpreter runs in it yet: the
 * reader looks). */
Test(python, detection_reads_no_file_on_the_callers_thread)
{
	struct perfd_python_process desc;
	struct fixture fx;
	int call;

	start_a_supported_python();
	fixture_new(&fx, 0);
	make_process(&fx, current.pid);
	call = call_reading_no_file(look, &fx);
	cr_assert_eq(call, 0, "python_maps_changed made system call %d on the caller's thread", call);
	cr_assert_str_empty(fx.p.runtime);
	settle_detection(&fx);
	call = call_reading_no_file(look, &fx);
	cr_assert_eq(call, 0, "taking the runtime in made system call %d on the caller's thread",
		     call);
	cr_assert_str_empty(fx.p.runtime, "described before the reader looked for an interpreter");
	settle(&fx);
	expect_runtime(&fx, &current, "");
	cr_assert_eq(lookup_description(&fx, &desc), 0);
	fixture_free(&fx);
}

/* A libc still without a module while the process's files are being
 * identified (a probe out, or given up on after a second) is read all
 * the same, from the mapping: the runtime is described at once, not
 * left for a revisit or said to have no Python frames. */
Test(python, libc_not_yet_identified_is_read_from_its_mapping)
{
	struct perfd_python_process desc;
	struct fixture fx;

	start_a_supported_python();
	fixture_new(&fx, 0);
	make_process(&fx, current.pid);
	cr_assert_neq(fx.libc_module, 0, "no libc in the interpreter's maps");
	for (size_t i = 0; i < fx.p.maps->n; i++)
		if (fx.p.map_modules[i] == fx.libc_module)
			fx.p.map_modules[i] = FRAME_MODULE_NONE;
	fx.p.maps_partial = true;
	maps_changed(&fx);
	expect_runtime(&fx, &current, "");
	cr_assert_eq(lookup_description(&fx, &desc), 0);
	fixture_free(&fx);
}

/* The job copies what pyruntime_detect looks at: its first file (the
 * first mapped path that is not deleted: an executable upgraded under a
 * running process is skipped, as it skips every deleted file), the files
 * named like Python, libc; not the other libraries. */
Test(python, detection_copies_what_pyruntime_detect_looks_at)
{
	char *paths[] = { (char *)"[vdso]", (char *)"/usr/bin/app (deleted)",
			  (char *)"/usr/lib/libfirst.so", (char *)"/usr/lib/libother.so",
			  (char *)"/usr/lib/libpython3.12.so.1.0", (char *)"/lib/libc.so.6" };
	struct procmap m[ELEMENTSOF(paths)];
	struct procmaps maps = { .maps = m, .n = ELEMENTSOF(m) };
	const char *want[] = { "/usr/lib/libfirst.so", "/usr/lib/libpython3.12.so.1.0",
			       "/lib/libc.so.6" };
	struct pydetect *d = NULL;

	for (size_t i = 0; i < ELEMENTSOF(m); i++)
		m[i] = (struct procmap){ .start = 0x1000 * (i + 1), .end = 0x1000 * (i + 2),
					 .path = paths[i] };
	cr_assert_eq(pydetect_new(1, START_TIME, &maps, &d), 0);
	cr_assert_eq(d->maps.n, ELEMENTSOF(want), "%zu mappings copied", d->maps.n);
	for (size_t i = 0; i < ELEMENTSOF(want); i++)
		cr_assert_str_eq(d->maps.maps[i].path, want[i]);
	pydetect_free(d);
}

Test(python, no_bpf_map_kernel) { check_no_map(-ENOTSUP); }
Test(python, no_bpf_map_turned_off) { check_no_map(-ECANCELED); }

/* A sample's code objects are read out of the process's memory, which the
 * process chooses (a code object's name may point into a page of a file
 * on a server that does not answer): the caller's thread (perfd's loop)
 * only asks the reader, and frames merged before it is back are named
 * "[python: code object not read yet]".  Once it is back, the same
 * sample is merged, named and lined, without a read either. */
struct code_read_call {
	struct fixture *fx;
	const struct perfd_python_frame *pf;
	const uint64_t *native;
	uint64_t out[16];
	size_t n;
	bool waits;
};

static void merge_on_the_loop(void *arg)
{
	struct code_read_call *c = arg;
	_cleanup_free_ struct perfd_sample *s = make_sample(1, 2, c->pf, PY_FRAMES);

	c->waits = python_wait(c->fx->py, &c->fx->p, s);
	memcpy(c->out, c->native, 2 * sizeof(*c->native));
	c->n = python_merge(c->fx->py, &c->fx->p, s, c->out, 2, ELEMENTSOF(c->out));
}

Test(python, code_objects_are_read_on_the_lane_only)
{
	struct perfd_python_process desc;
	struct perfd_python_frame pf[PY_FRAMES + 2];
	int32_t firstlines[PY_FRAMES + 2];
	struct code_read_call c = { 0 };
	struct python_stats st;
	struct pyruntime rt;
	struct fixture fx;
	uint64_t native[2];
	uint16_t interp_module;
	char script[PATH_MAX], buf[PATH_MAX + 128];
	const char *exe = PYENV_VERSIONS "/3.12.1/bin/python";
	int call;

	if (access(exe, X_OK) != 0)
		exe = "/usr/bin/python3.11";
	require_installed(exe);
	start_python(exe, script, sizeof(script), &current);
	fixture_new(&fx, 0);
	make_process(&fx, current.pid);
	cr_assert_eq(pyruntime_detect(current.pid, fx.p.maps, &rt), 0);
	interp_module = module_of_path(&fx.p, rt.path);
	maps_changed(&fx);
	cr_assert_eq(lookup_description(&fx, &desc), 0);
	cr_assert_eq(walk_frames(current.pid,
				 thread_state(current.pid, &rt, current.thread_pointer, &desc), &desc,
				 pf, firstlines, ELEMENTSOF(pf)),
		     PY_FRAMES);
	pf[PY_FRAMES - 1].code |= PERFD_PYFRAME_ENTRY; /* one loop call runs them all */
	native[0] = frame_make(fx.libc_module, fx.libc_text);
	native[1] = frame_make(interp_module, rt.eval[0].start + 0x10);
	c = (struct code_read_call){ .fx = &fx, .pf = pf, .native = native };

	call = call_reading_no_file(merge_on_the_loop, &c);
	cr_assert_eq(call, 0, "the sample's code objects were read on the caller's thread "
			      "(system call %d)", call);
	cr_assert(c.waits, "a sample whose code objects are not read yet did not wait");
	cr_assert_eq(c.n, 1 + PY_FRAMES);
	for (size_t i = 1; i < c.n; i++)
		cr_assert_str_eq(name_of(&fx, c.out[i], true, buf, sizeof(buf)),
				 "[python: code object not read yet]");
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.reads_pending, 1);
	cr_assert_eq(st.frames_not_read, PY_FRAMES);

	settle(&fx);
	call = call_reading_no_file(merge_on_the_loop, &c);
	cr_assert_eq(call, 0, "system call %d on the caller's thread once the read was back", call);
	cr_assert_not(c.waits, "the sample waited again for code objects read already");
	cr_assert_eq(c.n, 1 + PY_FRAMES);
	for (size_t i = 0; i < PY_FRAMES; i++)
		expect_py(&fx, c.out, 1 + i, i, script);
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.code_reads, PY_FRAMES);
	cr_assert_eq(st.code_read_errors, 0);
	cr_assert_eq(st.reads_pending, 0);
	fixture_free(&fx);
}

/* Under -X perf, the trampoline arenas are found in the process's memory
 * (anonymous code as its maps said, which may be a file's by the time it
 * is read): taking the runtime in and looking at new maps only ask the
 * reader, and the arenas it finds are there once it is back. */
Test(python, trampolines_are_looked_for_on_the_lane_only)
{
	const char *exe = PYENV_VERSIONS "/3.12.1/bin/python";
	char *argv[] = { (char *)exe, (char *)"-X", (char *)"perf", NULL, NULL };
	struct python_trampolines t;
	char script[PATH_MAX];
	struct fixture fx;
	int call;

	require_installed(exe);
	write_file("pymerge.py", script_text, sizeof(script_text) - 1);
	path_in_workdir(script, sizeof(script), "pymerge.py");
	argv[3] = script;
	pychild_start(argv, PYCHILD_VERSION_THREAD, &current);
	fixture_new(&fx, 0);
	make_process(&fx, current.pid);
	call = call_reading_no_file(look, &fx);
	cr_assert_eq(call, 0, "python_maps_changed made system call %d on the caller's thread", call);
	settle_detection(&fx);
	call = call_reading_no_file(look, &fx);
	cr_assert_eq(call, 0, "taking the runtime in made system call %d on the caller's thread",
		     call);
	cr_assert_not(python_trampolines(fx.py, &fx.p, &t), "arenas found before the reader looked");
	settle(&fx);
	cr_assert(python_trampolines(fx.py, &fx.p, &t), "no trampoline arena found under -X perf");
	cr_assert_geq(t.n, 1);
	expect_runtime(&fx, &current, "");
	fixture_free(&fx);
}

/* A third child, for the test that needs three. */
static struct pychild third;

static void stop_second_and_third(void)
{
	pychild_stop(&second);
	pychild_stop(&third);
}

/* One user's reads hold one of the reader's two lanes at most, so that
 * reads that wait for a server that stops answering cannot hold both: a
 * second process of the same user waits for the first's read to be back
 * (deferred), another user's is read at once, and the deferred read is
 * sent when the first is back.  (A read is out until the loop takes it
 * back: what the lane did meanwhile does not matter.) */
Test(python, one_users_reads_hold_one_lane_at_most, .fini = stop_second_and_third)
{
	/* a code object the reads will not find: only their count matters */
	const struct perfd_python_frame pf = { .code = 0x1000, .tag = 7 };
	_cleanup_free_ struct perfd_sample *s = make_sample(1, 2, &pf, 1);
	const char *exe = "/usr/bin/python3.11";
	struct process same = { 0 }, other = { 0 };
	char script[PATH_MAX];
	struct python_stats st;
	struct fixture fx;

	require_installed(exe);
	start_python(exe, script, sizeof(script), &current);
	start_python(exe, script, sizeof(script), &second);
	start_python(exe, script, sizeof(script), &third);
	fixture_new(&fx, 0);
	make_process(&fx, current.pid);
	fill_process(&fx, second.pid, &same);
	fill_process(&fx, third.pid, &other);
	fx.p.owner_uid = same.owner_uid = 1000;
	other.owner_uid = 2000;
	fx.others[0] = &same;
	fx.others[1] = &other;
	python_maps_changed(fx.py, &fx.p);
	python_maps_changed(fx.py, &same);
	python_maps_changed(fx.py, &other);
	settle(&fx);
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.processes, 3, "%zu of the 3 interpreters walked", st.processes);

	cr_assert(python_wait(fx.py, &fx.p, s));
	cr_assert(python_wait(fx.py, &same, s), "a deferred read's sample did not wait");
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.reads_pending, 1, "one user's two reads went out at once");
	cr_assert_eq(st.reads_deferred, 1);
	cr_assert(python_wait(fx.py, &other, s));
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.reads_pending, 2, "another user's read waited for the first user's");
	cr_assert_eq(st.reads_deferred, 1);

	settle(&fx);
	python_get_stats(fx.py, &st);
	cr_assert_eq(st.reads_deferred, 0);
	cr_assert_eq(st.code_reads, 3, "the deferred read was not sent once the first was back");
	fixture_free(&fx);
	procmaps_free(same.maps);
	free(same.map_modules);
	procmaps_free(other.maps);
	free(other.map_modules);
}
