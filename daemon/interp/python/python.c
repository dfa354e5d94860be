/* SPDX-License-Identifier: MIT */
/*
 * python.c - see python.h.
 *
 * Per process: pyruntime_detect() finds the interpreter, its version and
 * _PyRuntime; pthread_tsd_read() reads from the process's libc where
 * pthread_getspecific() data lives; together with the version's offsets
 * that is the struct perfd_python_process the BPF walker reads.  Detection
 * runs when the maps of a process change in a way that matters (its first
 * file, or the set of Python-named files), not on every re-read, and what
 * reads files runs on a lane of its own (pydetect.h), whose results are
 * taken in when the process is seen again (python_complete).
 *
 * A runtime is reported (ps, the log, the BPF description) only once an
 * interpreter runs in it: _PyRuntime's list of interpreters is not empty.
 * CPython creates the main interpreter before it runs any Python code and
 * deletes it at finalization, so this tells a Python process from one that
 * merely links libpython (`perf`, an application that embeds Python but
 * has not started it) and from one caught at exec, before its main().
 * Until then the process is looked at again at its samples (the
 * aggregator's revisit), 4 ms after the first look and twice as long each
 * time up to a second: an interpreter starting is seen within twice the
 * time it took, and a process that never starts one costs one 8-byte read
 * a second while it runs.
 *
 * Frames: the walker records (code object address, instruction position,
 * tag: co_firstlineno and the address of co_filename, mixed).  The first time a process shows a code address, the
 * code object is read out of its memory (name, file, line table) on a
 * lane (pyread.h: the process chooses where its objects point, and a page
 * of a file on a server that stops answering makes the read wait as long)
 * while the sample waits (python_wait, the aggregator's frames_wait), and
 * its function interned; the entry is kept per process, keyed by address, and
 * replaced when a sample shows another tag at that address (the object
 * was freed and the memory reused).  One read per process is out at a
 * time, the code objects asked for meanwhile queue for the next (up to
 * one job's worth); a read that is not back in time lets the samples in
 * with "[python: code object not read yet]".  So does the 8-byte look
 * at _PyRuntime's interpreters (a page of the executable's file).  One
 * user's processes hold one of the reader's two lanes at most
 * (READS_PER_UID), the others waiting their turn, so that reads that wait
 * for a server that stops answering cannot hold every lane.  A cache at
 * its limit is emptied and refilled: bounded memory, counted.  Lines are decoded from
 * the cached table at each sample (a few dozen bytes per frame).
 *
 * Merge: the native unwinder sees one _PyEval_EvalFrameDefault frame per
 * C-level call of the interpreter loop, and the walker marks the outermost
 * Python frame each such call executed; the two lists are zipped, leaf to
 * root.  Frames of the interpreter's own binary between the leafmost and
 * rootmost loop frame (call machinery such as _PyFunction_Vectorcall) are
 * hidden, so callers and callees read as Python calls Python; C extension
 * frames stay.  So are, anywhere in the stack, the perf trampolines of
 * `-X perf` / `-X perf_jit` (pytrampoline.h): each is a copy of one
 * template that only stands for the Python function it calls, named
 * "py::FUNC:FILE" by its JIT map, and the Python frame says it better.  The
 * arenas are looked for at each maps read of a process whose libpython
 * has the template (3.12+), detection or not: only new anonymous code is
 * read (pytrampoline_find), by the reader (what the maps said is anonymous
 * may be a file's by the time it is read).  Python frames left over when
 * the native stack ran out go
 * with the rootmost loop frame (a loop frame was not recognized: a .cold
 * part without symbols), or at the root end when there is none: nothing is
 * dropped.  A native stack that did not reach its root is different
 * (sample_user_unrooted: cut at the depth limit, at code whose table is
 * pending, where the table walk found no way on, or walked by frame
 * pointers before the process had tables, not to an entry): its rootmost frames
 * are not the root, only where the walk stopped, so the
 * rootmost loop frame keeps only its own Python frames, the native frames
 * past it follow (the interpreter's hidden when Python frames are left:
 * they lie between two), and the leftover Python frames come last, at the
 * root end, under the cut's marker (profile/ingest.c).  Never above them.
 */
#include "interp/python/python.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "profile/aggregate.h"
#include "profile/frame.h"
#include "base/array.h"
#include "base/clock.h"
#include "base/log.h"
#include "perfd/macro.h"
#include "perfd/python.h"
#include "base/offload.h"
#include "interp/python/pthread_tsd.h"
#include "interp/python/pycode.h"
#include "interp/python/pydetect.h"
#include "interp/python/pyread.h"
#include "interp/python/pylinetable.h"
#include "interp/python/pyruntime.h"
#include "interp/python/pytrampoline.h"
#include "base/u64map.h"

#define PYTHON_FUNC_BITS (FRAME_ADDRESS_BITS - PYTHON_LINE_BITS)
#define PYTHON_LINE_MAX ((1u << PYTHON_LINE_BITS) - 1)
#define PYTHON_FUNC_MAX ((1ULL << PYTHON_FUNC_BITS) - 1)

/* Reserved function ids. */
enum {
	FUNC_UNREADABLE = 0, /* the code object could not be read */
	FUNC_TABLE_FULL = 1,
	FUNC_NOT_READ = 2, /* ... not read yet: its read was not back in time */
	FUNC_FIRST = 3,
};

struct function {
	uint32_t name, file; /* offsets in the string arena */
	int32_t firstlineno;
};

struct code_entry {
	uint32_t func;
	uint32_t tag;
	int32_t firstlineno;
	uint8_t *linetable;
	uint32_t linetable_size;
};

#define RECHECK_FIRST_NS (4 * 1000 * 1000ULL)
#define RECHECK_MAX_NS (1000 * 1000 * 1000ULL)

/* The reader's lanes, and how many of them one user's reads may hold: a
 * user whose processes' reads wait for a server that stops answering
 * cannot hold them all and leave everyone else's Python frames unread.
 * Its other processes wait their turn (deferred), in order. */
#define READER_LANES 2
#define READS_PER_UID (READER_LANES - 1)

struct pyprocess {
	uint32_t pid;
	uint64_t start_time_ns;
	uint64_t signature; /* of the maps detection looked at */
	int status;         /* 0: described in the BPF map; <0: why not (-ENOENT: not Python,
			     * -EINPROGRESS: being looked for on the lane,
			     * -EAGAIN: no interpreter runs yet) */
	struct pydetect *detecting; /* the lane's job looking, until it is back */
	struct pydetect *detected;  /* ... back, until p is seen again (apply) */
	uint64_t recheck_wait_ns; /* before looking again for an interpreter */
	struct pyruntime *rt;   /* a CPython was found (supported or not); NULL otherwise */
	int tsd_r;              /* for a supported one: libc's thread data read (0), or -errno */
	struct pthread_tsd tsd;
	uint16_t interp_module; /* module of rt.path, 0 when not mapped */
	struct u64map code;     /* code address -> index + 1 in entries */
	struct u64map failed;   /* code address -> a tag whose read failed where one was read */
	struct code_entry *entries;
	size_t n_entries, cap_entries;
	size_t code_bytes; /* line tables held */
	struct pytrampoline_arenas arenas; /* -X perf's trampolines, as of the last search */
	bool arenas_changed;    /* by a search back from the reader, not told yet */
	struct procmaps candidates; /* where to search next, when reading is back; maps NULL: nowhere */
	uint64_t trampolines_signature; /* of the last candidates asked for, 0: none */
	struct pyread *reading; /* the reader's job on its memory, until it is back */
	bool deferred;          /* what it wants read waits for its user's reads */
	uint32_t uid;           /* ... that user */
	bool interpreter_wanted; /* status -EAGAIN: look again whether an interpreter runs */
	int interpreter_back;    /* what the last look found (1: one runs, 0: none), -1: none back */
	size_t n_wanted;         /* code objects asked for while reading was out */
	struct {
		uint64_t addr;
		uint32_t tag;
	} wanted[PYREAD_MAX_CODES];
};

struct python {
	int map_fd;
	struct offload *lane; /* detection (pydetect.h) */
	struct offload *reader; /* memory reads (pyread.h) */
	struct python_limits limits;
	struct u64map procs; /* pid -> struct pyprocess * */
	struct u64map not_python; /* module ids of executables without CPython */
	struct function *funcs;
	size_t n_funcs, cap_funcs;
	struct u64map func_by_hash; /* hash (probed on collision) -> id */
	char *arena;
	size_t arena_len, arena_cap;
	size_t code_bytes; /* line tables held, all processes */
	struct u64map reads_by_uid; /* uid -> its reads out (READS_PER_UID at most) */
	struct deferred_read {
		uint32_t pid;
		uint64_t start_time_ns;
	} *deferred; /* processes waiting for their user's reads, oldest first;
		      * those forgotten since are dropped as they are met */
	size_t n_deferred, cap_deferred;
	struct python_stats stats;
};

int python_new(int map_fd, const struct python_limits *limits, struct python **ret)
{
	struct python *py = calloc(1, sizeof(*py));
	int r;

	if (!py)
		return -ENOMEM;
	/* its run() touches only its job: a lane stuck in a file system
	 * that does not answer may be left behind at shutdown */
	r = offload_new(&(struct offload_opts){ .lanes = 1, .background = true, .take_back = true,
						.may_abandon = true, .name = "perfd-py" },
			&py->lane);
	if (r < 0) {
		free(py);
		return r;
	}
	/* two: one user whose reads wait for a server that stops does not
	 * hold every other's (READS_PER_UID); each process has one read out
	 * at most.  Not in the background: samples wait for these reads,
	 * which the loop used to make, and a nice lane starves on a busy
	 * host. */
	r = offload_new(&(struct offload_opts){ .lanes = READER_LANES, .take_back = true,
						.may_abandon = true, .name = "perfd-pymem" },
			&py->reader);
	if (r < 0) {
		offload_free(py->lane);
		free(py);
		return r;
	}
	py->map_fd = map_fd;
	py->limits = *limits;
	if (py->limits.max_functions == 0 || py->limits.max_functions > PYTHON_FUNC_MAX)
		py->limits.max_functions = PYTHON_FUNC_MAX;
	if (py->limits.max_code_per_process == 0)
		py->limits.max_code_per_process = 1;
	if (py->limits.max_code_bytes == 0)
		py->limits.max_code_bytes = SIZE_MAX;
	if (py->limits.max_name_bytes == 0 || py->limits.max_name_bytes > UINT32_MAX)
		py->limits.max_name_bytes = UINT32_MAX;
	u64map_init(&py->procs);
	u64map_init(&py->not_python);
	u64map_init(&py->func_by_hash);
	u64map_init(&py->reads_by_uid);
	/* ids 0 and 1 are reserved: keep the table's indexes equal to ids */
	py->funcs = calloc(FUNC_FIRST, sizeof(*py->funcs));
	if (!py->funcs) {
		offload_free(py->reader);
		offload_free(py->lane);
		free(py);
		return -ENOMEM;
	}
	py->n_funcs = py->cap_funcs = FUNC_FIRST;
	*ret = py;
	return 0;
}

static void code_cache_clear(struct python *py, struct pyprocess *pp)
{
	for (size_t i = 0; i < pp->n_entries; i++)
		free(pp->entries[i].linetable);
	py->stats.code_objects -= pp->n_entries;
	py->code_bytes -= pp->code_bytes;
	pp->code_bytes = 0;
	pp->n_entries = 0;
	u64map_done(&pp->code);
	u64map_init(&pp->code);
	u64map_done(&pp->failed);
	u64map_init(&pp->failed);
}

static void pyprocess_free(struct python *py, struct pyprocess *pp)
{
	if (!pp)
		return;
	if (pp->deferred)
		py->stats.reads_deferred--; /* its entry is dropped when met */
	code_cache_clear(py, pp);
	py->stats.trampoline_arenas -= pp->arenas.n;
	pytrampoline_arenas_done(&pp->arenas);
	free(pp->entries);
	free(pp->rt);
	/* one on the lane is the lane's: python_complete frees it when
	 * it is back and finds no one waiting for it */
	pydetect_free(pp->detected);
	/* likewise one reading: python_complete frees it */
	free(pp->candidates.maps);
	free(pp);
}

struct python *python_free(struct python *py)
{
	if (!py)
		return NULL;
	offload_free(py->lane); /* first: the jobs on them are freed with them */
	offload_free(py->reader);
	U64MAP_FOREACH(slot, &py->procs)
		pyprocess_free(py, (struct pyprocess *)(uintptr_t)slot->value);
	u64map_done(&py->procs);
	u64map_done(&py->not_python);
	u64map_done(&py->func_by_hash);
	u64map_done(&py->reads_by_uid);
	free(py->deferred);
	free(py->funcs);
	free(py->arena);
	free(py);
	return NULL;
}

static struct pyprocess *find(const struct python *py, uint32_t pid, uint64_t start_time_ns)
{
	uint64_t *slot = u64map_get(&py->procs, pid);
	struct pyprocess *pp = slot ? (struct pyprocess *)(uintptr_t)*slot : NULL;

	return pp && pp->start_time_ns == start_time_ns ? pp : NULL;
}

static void forget(struct python *py, uint32_t pid)
{
	uint64_t *slot = u64map_get(&py->procs, pid);
	struct pyprocess *pp;

	if (!slot)
		return;
	pp = (struct pyprocess *)(uintptr_t)*slot;
	if (pp->status == 0) {
		(void)bpf_map_delete_elem(py->map_fd, &pid);
		py->stats.processes--;
	} else if (pp->rt && pp->status != -EAGAIN) {
		py->stats.unsupported--; /* a runtime waiting for its interpreter was not counted */
	}
	u64map_remove(&py->procs, pid);
	pyprocess_free(py, pp);
}

void python_process_gone(struct python *py, const struct process *p)
{
	if (find(py, p->pid, p->start_time_ns))
		forget(py, p->pid);
}

/* What detection depends on: the first file, the Python-named files and
 * libc (mapped after the first maps read of a process caught at exec),
 * and their modules (a file whose probe was given up on gets one later:
 * the interpreter's frames are told by it). */
static uint64_t maps_signature(const struct process *p)
{
	const struct procmaps *maps = p->maps;
	uint64_t h = 0x9e3779b97f4a7c15ULL;
	bool first = true;

	for (size_t i = 0; i < maps->n; i++) {
		const char *path = maps->maps[i].path;

		if (path[0] != '/' || !(first || pydetect_python_named(path) || pydetect_libc_named(path)))
			continue;
		first = false;
		for (const char *c = path; *c; c++)
			h = hash_u64(h ^ (uint8_t)*c);
		h = hash_u64(h ^ maps->maps[i].inode);
		h = hash_u64(h ^ p->map_modules[i]);
	}
	return h;
}

static int32_t max_i32(int32_t a, int32_t b)
{
	return a > b ? a : b;
}

/* Fills the BPF description of a supported runtime. */
static int describe(const struct pyruntime *rt, const struct pthread_tsd *tsd,
		    struct perfd_python_process *ret)
{
	const struct pyoffsets *o = rt->offsets;
	int32_t end;

	*ret = (struct perfd_python_process){
		.tss_addr = rt->autotsskey_addr,
		.pthread_specific = tsd->specific,
		.key_data_size = tsd->key_data_size,
		.key_data_data = tsd->key_data_data,
		.frame_code = o->frame_code,
		.frame_previous = o->frame_previous,
		.frame_owner = o->frame_owner,
		.frame_is_entry = o->frame_is_entry,
		.frame_ident = o->frame_ident,
		.code_tag_first = MIN(o->code_firstlineno, o->code_filename),
		.tag_firstlineno = o->code_firstlineno - MIN(o->code_firstlineno, o->code_filename),
		.tag_filename = o->code_filename - MIN(o->code_firstlineno, o->code_filename),
		.code_tag_size = (uint32_t)(MAX(o->code_firstlineno + 4, o->code_filename + 8) -
					    MIN(o->code_firstlineno, o->code_filename)),
		.code_adaptive = o->code_code_adaptive,
		.cframe_current_frame = -1,
		.gil_addr = rt->runtime_addr ? rt->runtime_addr + (uint64_t)o->runtime_gil : 0,
		.gil_size = (uint32_t)o->gil_size,
		.gil_current_addr = rt->runtime_addr && o->runtime_tstate_current >= 0 ?
					    rt->runtime_addr + (uint64_t)o->runtime_tstate_current : 0,
		.tstate_active = o->tstate_status,
		.tstate_active_mask = o->tstate_active_bit >= 0 ? 1u << o->tstate_active_bit : 0,
	};
	if (rt->minor <= 10) {
		ret->walk = PERFD_PYWALK_FRAME_OBJECTS;
		ret->tstate_frame = o->tstate_frame;
		ret->frame_position = o->frame_lasti;
		end = o->frame_lasti + 4;
	} else {
		ret->walk = rt->minor == 11 ? PERFD_PYWALK_IS_ENTRY : PERFD_PYWALK_SHIM_FRAMES;
		if (o->tstate_cframe >= 0) {
			ret->tstate_frame = o->tstate_cframe;
			ret->cframe_current_frame = o->cframe_current_frame;
		} else {
			ret->tstate_frame = o->tstate_current_frame;
		}
		ret->frame_position = o->frame_instr;
		end = max_i32(o->frame_instr + 8, o->frame_owner + 1);
		end = max_i32(end, o->frame_is_entry + 1);
	}
	end = max_i32(end, max_i32(o->frame_code, o->frame_previous) + 8);
	end = max_i32(end, o->frame_ident + 8);
	ret->frame_read_size = (uint32_t)(end + 7) & ~7u;
	/* the walker reads Py_tss_t as {int initialized; unsigned key} */
	if (o->tss_initialized != 0 || o->tss_key != 4 || rt->autotsskey_addr == 0 || ret->tstate_frame < 0 || ret->frame_read_size > 128 ||
	    ret->code_tag_size >= 128)
		return -EPROTONOSUPPORT;
	return 0;
}

static bool has_python_named(const struct procmaps *maps)
{
	for (size_t i = 0; i < maps->n; i++)
		if (pydetect_python_named(maps->maps[i].path))
			return true;
	return false;
}

/* The module of the first mapped file (the executable), 0 when none. */
static uint16_t first_file_module(const struct process *p)
{
	for (size_t i = 0; i < p->maps->n; i++)
		if (p->maps->maps[i].path[0] == '/')
			return p->map_modules[i];
	return 0;
}

static uint16_t module_of_path(const struct process *p, const char *path)
{
	for (size_t i = 0; i < p->maps->n; i++)
		if (strcmp(p->maps->maps[i].path, path) == 0 && p->map_modules[i])
			return p->map_modules[i];
	return 0;
}

static void runtime_name(const struct pyruntime *rt, int status, char *buf, size_t size)
{
	const char *note = status == 0 ? "" :
			   status != -EPROTONOSUPPORT ? " (no Python frames)" :
			   rt->other_abi ? " (free-threaded or debug build, unsupported)" : " (unsupported)";
	int r;

	if (rt->patch >= 0)
		r = snprintf(buf, size, "CPython %u.%u.%d%s", rt->major % 100, rt->minor % 1000,
			     rt->patch % 1000, note);
	else
		r = snprintf(buf, size, "CPython %u.%u%s", rt->major % 100, rt->minor % 1000, note);
	(void)r; /* the versions are small: it fits */
}

/* Has p revisited for an interpreter, each time after twice the wait. */
static void wait_for_interpreter(struct pyprocess *pp, struct process *p)
{
	pp->recheck_wait_ns = MIN(MAX(2 * pp->recheck_wait_ns, RECHECK_FIRST_NS), RECHECK_MAX_NS);
	p->revisit_ns = now_monotonic_ns() + pp->recheck_wait_ns;
}

static void start_walking(struct python *py, struct pyprocess *pp, struct process *p, int r);

/* Queues pp behind its user's reads (uid's): sent when one is back
 * (submit_deferred).  Returns false without memory. */
static bool defer(struct python *py, struct pyprocess *pp, uint32_t uid)
{
	if (py->n_deferred == py->cap_deferred) {
		/* first drop those forgotten since (bounded by the live ones) */
		size_t kept = 0;

		for (size_t i = 0; i < py->n_deferred; i++) {
			const struct pyprocess *q =
				find(py, py->deferred[i].pid, py->deferred[i].start_time_ns);

			if (q && q->deferred)
				py->deferred[kept++] = py->deferred[i];
		}
		py->n_deferred = kept;
	}
	if (array_grow((void **)&py->deferred, &py->cap_deferred, py->n_deferred + 1,
		       sizeof(*py->deferred), 16) < 0)
		return false;
	py->deferred[py->n_deferred++] = (struct deferred_read){ pp->pid, pp->start_time_ns };
	pp->deferred = true;
	pp->uid = uid;
	py->stats.reads_deferred++;
	return true;
}

/* Hands what pp wants read of its process's memory to the reader: the
 * code objects queued, and the look for an interpreter.  One job per
 * process at a time, READS_PER_UID per user (uid: the process's owner):
 * past that it is deferred.  Returns whether one is out or deferred. */
static bool submit_read(struct python *py, struct pyprocess *pp, uint32_t uid)
{
	bool trampolines = pp->candidates.maps != NULL;
	struct pyread *r;
	uint64_t *out;

	if (pp->reading || pp->deferred)
		return true;
	if (!pp->rt || (pp->n_wanted == 0 && !pp->interpreter_wanted && !trampolines))
		return false;
	out = u64map_get(&py->reads_by_uid, uid);
	if (out && *out >= READS_PER_UID)
		return defer(py, pp, uid);
	/* still wanted when it fails: the next sample, revisit or read asks
	 * again */
	if (pyread_new(pp->pid, pp->start_time_ns, pp->rt, pp->interpreter_wanted, pp->n_wanted,
		       &r) < 0)
		return false;
	for (size_t i = 0; i < pp->n_wanted; i++) {
		r->codes[i].addr = pp->wanted[i].addr;
		r->codes[i].tag = pp->wanted[i].tag;
	}
	if (trampolines && pytrampoline_arenas_copy(&pp->arenas, &r->arenas) < 0) {
		pyread_free(r);
		return false;
	}
	r->trampolines = trampolines;
	r->candidates = pp->candidates;
	r->uid = uid;
	out = u64map_upsert(&py->reads_by_uid, uid, NULL);
	if (!out || offload_submit(py->reader, &r->job) < 0) {
		if (out && *out == 0)
			u64map_remove(&py->reads_by_uid, uid);
		r->candidates = (struct procmaps){ 0 }; /* still pp's */
		pyread_free(r);
		return false;
	}
	(*out)++;
	pp->candidates = (struct procmaps){ 0 };
	pp->n_wanted = 0;
	pp->interpreter_wanted = false;
	pp->reading = r;
	py->stats.reads_pending++;
	return true;
}

/* Has the reader look whether an interpreter runs in p yet. */
static void look_for_interpreter(struct python *py, struct pyprocess *pp, struct process *p)
{
	pp->status = -EAGAIN;
	pp->interpreter_wanted = true;
	if (!submit_read(py, pp, p->owner_uid))
		wait_for_interpreter(pp, p); /* out of memory: later */
}

/* Looks for CPython in p, whose maps are new or changed in a way that
 * matters (signature): the process's new entry, or NULL without memory.
 * What reads files goes to the lane (pydetect.h); apply takes it in. */
static struct pyprocess *detect(struct python *py, struct process *p, uint64_t signature)
{
	struct pyprocess *pp;
	uint64_t *slot;
	uint16_t first;
	int r;

	/* New, or the image changed (exec): start over. */
	forget(py, p->pid);
	p->runtime[0] = '\0';
	p->revisit_ns = 0;

	pp = calloc(1, sizeof(*pp));
	if (!pp)
		return NULL;
	slot = u64map_upsert(&py->procs, p->pid, NULL);
	if (!slot) {
		free(pp);
		return NULL;
	}
	*slot = (uintptr_t)pp;
	pp->pid = p->pid;
	pp->start_time_ns = p->start_time_ns;
	pp->signature = signature;
	pp->interpreter_back = -1;
	u64map_init(&pp->code);
	u64map_init(&pp->failed);

	/* Most processes are not Python: remember which executables are
	 * not, so a new process of one costs no ELF scan. */
	first = first_file_module(p);
	if (!has_python_named(p->maps) && first && u64map_get(&py->not_python, first)) {
		pp->status = -ENOENT;
		return pp;
	}
	r = pydetect_new(p->pid, p->start_time_ns, p->maps, &pp->detecting);
	if (r == 0)
		r = offload_submit(py->lane, &pp->detecting->job);
	if (r < 0) {
		/* out of memory (the lane refuses only once it is stopped) */
		pp->detecting = pydetect_free(pp->detecting);
		pp->status = r;
		return pp;
	}
	py->stats.detections_pending++;
	pp->status = -EINPROGRESS;
	return pp;
}

/* Takes in what the lane found in p (pp->detected). */
static void apply(struct python *py, struct pyprocess *pp, struct process *p)
{
	_cleanup_(pydetect_freep) struct pydetect *d = TAKE_PTR(pp->detected);
	uint16_t first = first_file_module(p);
	int r = d->r;

	if (r == -ENOENT || r == -ENOMEM) {
		pp->status = r; /* not Python (or not known): nothing to report */
		/* Only if the process lived through the look: a file it had
		 * that could not be opened says nothing about the file. */
		if (r == -ENOENT && !has_python_named(p->maps) && first && d->alive)
			(void)u64map_upsert(&py->not_python, first, NULL);
		return;
	}
	pp->rt = malloc(sizeof(*pp->rt));
	if (!pp->rt) {
		pp->status = -ENOMEM;
		return;
	}
	*pp->rt = d->rt;
	pp->tsd_r = d->tsd_r;
	pp->tsd = d->tsd;
	if (r == 0) {
		pp->interp_module = module_of_path(p, pp->rt->path);
		/* without _PyRuntime (or its layout) there is nothing to look at */
		if (pp->rt->runtime_addr && pp->rt->offsets) {
			look_for_interpreter(py, pp, p);
			return;
		}
	}
	start_walking(py, pp, p, r);
}

/* Has the reader look for the perf trampoline arenas of pp's process
 * again: its maps were read, perhaps with a new arena (the search reads
 * its memory).  A process gone keeps what it had. */
static void find_trampolines(struct python *py, struct pyprocess *pp, const struct process *p)
{
	uint64_t signature;

	if (!pp->rt || pp->rt->trampoline_size == 0) {
		py->stats.trampoline_arenas -= pp->arenas.n;
		pytrampoline_arenas_done(&pp->arenas);
		return;
	}
	signature = pytrampoline_signature(p->maps);
	/* the same candidates: the same arenas, known or being looked for */
	if ((pp->arenas.searched && pp->arenas.signature == signature) ||
	    pp->trampolines_signature == signature)
		return;
	free(pp->candidates.maps);
	if (pytrampoline_candidates(p->maps, &pp->candidates) < 0) {
		pp->candidates = (struct procmaps){ 0 };
		pp->trampolines_signature = 0; /* out of memory: at the next maps read */
		return;
	}
	pp->trampolines_signature = signature;
	(void)submit_read(py, pp, p->owner_uid);
}

/* Takes in the reader's search for trampolines in pp's process. */
static void take_trampolines(struct python *py, struct pyprocess *pp, struct pyread *r)
{
	if (r->trampolines_r < 0) {
		if (r->trampolines_r != -ESRCH)
			log_debug("pid %u: perf trampolines not looked for: %s", pp->pid,
				  strerror(-r->trampolines_r));
		if (!pp->candidates.maps)
			pp->trampolines_signature = 0; /* looked for at the next maps read */
		return;
	}
	py->stats.trampoline_arenas -= pp->arenas.n;
	pytrampoline_arenas_done(&pp->arenas);
	pp->arenas = r->arenas;
	r->arenas = (struct pytrampoline_arenas){ 0 };
	py->stats.trampoline_arenas += pp->arenas.n;
	pp->arenas_changed = true;
}

void python_maps_changed(struct python *py, struct process *p)
{
	struct pyprocess *pp;
	uint64_t signature;

	if (!p->maps)
		return;
	signature = maps_signature(p);
	pp = find(py, p->pid, p->start_time_ns);
	if (!pp || pp->signature != signature)
		pp = detect(py, p, signature);
	else if (pp->detected)
		apply(py, pp, p);
	if (pp)
		find_trampolines(py, pp, p);
}

static void cache_code(struct python *py, struct pyprocess *pp, struct pyread_code *c);

/* Past its limits, pp's cache starts over before it takes the read r in,
 * whole: the samples that waited for r find all of it (a cache smaller
 * than one read overshoots by that read).  Line tables are the bulk:
 * their budget is of all processes. */
static void make_room(struct python *py, struct pyprocess *pp, const struct pyread *r)
{
	size_t bytes = 0;

	for (size_t i = 0; i < r->n; i++)
		if (r->codes[i].r == 0)
			bytes += r->codes[i].code.linetable_size;
	if (pp->n_entries &&
	    (pp->n_entries + r->n > py->limits.max_code_per_process ||
	     py->code_bytes + bytes > py->limits.max_code_bytes)) {
		py->stats.cache_resets++;
		code_cache_clear(py, pp);
	}
}

/* Takes in what the reader read of a process's memory: the code objects
 * go into its cache now, the interpreter's look waits for the process
 * (python_read_back).  Returns whether the process is still waiting. */
static bool take_read(struct python *py, struct pyread *r)
{
	struct pyprocess *pp = find(py, r->pid, r->start_time_ns);
	uint64_t *out = u64map_get(&py->reads_by_uid, r->uid);

	py->stats.reads_pending--;
	if (out && --*out == 0)
		u64map_remove(&py->reads_by_uid, r->uid);
	/* forgotten meanwhile (exited, exec'd) */
	if (!pp || pp->reading != r)
		return false;
	pp->reading = NULL;
	make_room(py, pp, r);
	for (size_t i = 0; i < r->n; i++)
		cache_code(py, pp, &r->codes[i]);
	if (r->interpreter)
		pp->interpreter_back = r->interpreter_runs;
	if (r->trampolines)
		take_trampolines(py, pp, r);
	return true;
}

/* Sends the deferred processes' reads whose users have a read back,
 * oldest first. */
static void submit_deferred(struct python *py)
{
	size_t n = py->n_deferred, kept = 0;

	for (size_t i = 0; i < n; i++) {
		struct deferred_read d = py->deferred[i];
		struct pyprocess *pp = find(py, d.pid, d.start_time_ns);
		const uint64_t *out;

		if (!pp || !pp->deferred)
			continue; /* forgotten since */
		out = u64map_get(&py->reads_by_uid, pp->uid);
		if (out && *out >= READS_PER_UID) {
			py->deferred[kept++] = d;
			continue;
		}
		pp->deferred = false;
		py->stats.reads_deferred--;
		/* under its user's share now: not deferred again, so nothing
		 * is appended while this runs (without memory, the samples
		 * waiting go in unread, and the next asks again) */
		(void)submit_read(py, pp, pp->uid);
	}
	py->n_deferred = kept;
}

void python_complete(struct python *py, const struct python_callbacks *cb, void *userdata)
{
	struct offload_job *back = offload_take_done(py->reader), *j, *next;

	for (j = back; j; j = j->next)
		pyread_of(j)->taken = take_read(py, pyread_of(j));
	/* the deferred first: a process read back asks again for what it
	 * wanted meanwhile (cb->read), behind those of its user waiting */
	if (back && py->n_deferred)
		submit_deferred(py);
	for (j = back; j; j = next) {
		struct pyread *r = pyread_of(j);

		next = j->next;
		if (r->taken)
			cb->read(userdata, r->pid, r->start_time_ns);
		pyread_free(r);
	}
	j = offload_take_done(py->lane);

	for (; j; j = next) {
		struct pydetect *d = pydetect_of(j);
		struct pyprocess *pp = find(py, d->pid, d->start_time_ns);

		next = j->next;
		py->stats.detections_pending--;
		/* forgotten meanwhile, or looked at again since */
		if (!pp || pp->detecting != d) {
			pydetect_free(d);
			continue;
		}
		pp->detecting = NULL;
		pp->detected = d;
		cb->detected(userdata, d->pid, d->start_time_ns);
	}
}

bool python_read_back(struct python *py, struct process *p)
{
	struct pyprocess *pp = find(py, p->pid, p->start_time_ns);
	bool arenas_changed;
	int runs;

	if (!pp)
		return false;
	arenas_changed = pp->arenas_changed;
	pp->arenas_changed = false;
	runs = pp->interpreter_back;
	pp->interpreter_back = -1;
	if (runs >= 0 && pp->status == -EAGAIN) {
		if (runs)
			start_walking(py, pp, p, 0);
		else
			wait_for_interpreter(pp, p);
	}
	(void)submit_read(py, pp, p->owner_uid); /* what was asked for meanwhile */
	return arenas_changed;
}

int python_fd(const struct python *py)
{
	return offload_fd(py->lane);
}

int python_reader_fd(const struct python *py)
{
	return offload_fd(py->reader);
}

bool python_trampolines(const struct python *py, const struct process *p,
			struct python_trampolines *ret)
{
	const struct pyprocess *pp = find(py, p->pid, p->start_time_ns);

	if (!pp || !pp->rt || pp->arenas.n == 0)
		return false;
	*ret = (struct python_trampolines){
		.code = pp->rt->trampoline,
		.code_size = pp->rt->trampoline_size,
		.arena_size = PYTRAMPOLINE_ARENA_SIZE,
		.starts = pp->arenas.starts,
		.strides = pp->arenas.strides,
		.n = pp->arenas.n,
	};
	return true;
}

void python_revisit(struct python *py, struct process *p)
{
	struct pyprocess *pp = find(py, p->pid, p->start_time_ns);

	if (!pp || pp->status != -EAGAIN || pp->reading)
		return; /* one out: python_read_back takes it in */
	look_for_interpreter(py, pp, p);
}

/* Describes a runtime detection found (r: pyruntime_detect's result, 0 or
 * -EPROTONOSUPPORT) to BPF, and reports it in p->runtime, the stats and the
 * log. */
static void start_walking(struct python *py, struct pyprocess *pp, struct process *p, int r)
{
	struct perfd_python_process desc;

	if (r == 0) {
		r = pp->tsd_r;
		if (r == 0)
			r = describe(pp->rt, &pp->tsd, &desc);
		if (r == 0 && py->map_fd < 0)
			r = py->map_fd; /* -ENOTSUP: this kernel; -ECANCELED: turned off */
		if (r == 0 && bpf_map_update_elem(py->map_fd, &p->pid, &desc, BPF_ANY) < 0)
			r = negative_errno();
	}
	pp->status = r;
	if (r == 0) {
		py->stats.processes++;
		runtime_name(pp->rt, 0, p->runtime, sizeof(p->runtime));
		log_debug("pid %u (%s): CPython %u.%u in %s, Python frames on.", p->pid, p->comm,
			  pp->rt->major, pp->rt->minor, pp->rt->path);
		return;
	}
	py->stats.unsupported++;
	if (pp->rt->major) {
		runtime_name(pp->rt, r, p->runtime, sizeof(p->runtime));
		if (r == -ECANCELED)
			log_debug("pid %u (%s): %s; Python frames are turned off.", p->pid, p->comm,
				  p->runtime);
		else if (r == -EPROTONOSUPPORT)
			log_info("pid %u (%s): CPython %u.%u is not supported (3.%d to 3.%d are): native frames only.",
				 p->pid, p->comm, pp->rt->major, pp->rt->minor, PYRUNTIME_MIN_MINOR,
				 PYRUNTIME_MAX_MINOR);
		else if (r == -ENOTSUP)
			log_debug("pid %u (%s): %s; this kernel cannot walk Python frames.", p->pid,
				  p->comm, p->runtime);
		else
			log_full_errno(LOG_INFO, r, "pid %u (%s): %s: cannot walk its Python frames (%s): native frames only: %m",
				       p->pid, p->comm, p->runtime,
				       r == -ENOENT ? "no glibc thread data in its libc" :
						      "its description could not be written");
	} else {
		snprintf(p->runtime, sizeof(p->runtime), "CPython (unreadable)");
		log_full_errno(LOG_INFO, r, "pid %u (%s): looks like CPython but could not be read: %m",
			       p->pid, p->comm);
	}
}

/* --- functions ---------------------------------------------------------- */

static uint64_t hash_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = hash_u64(h ^ (uint8_t)*s);
	return hash_u64(h ^ 0xff);
}

static int64_t arena_add(struct python *py, const char *s)
{
	size_t len = strlen(s) + 1;
	uint32_t off;

	if (py->arena_len + len > py->limits.max_name_bytes)
		return -ENOSPC;
	if (py->arena_len + len > py->arena_cap) {
		size_t cap = MAX(py->arena_cap * 2, py->arena_len + len + 4096);
		char *a = realloc(py->arena, cap);

		if (!a)
			return -ENOMEM;
		py->arena = a;
		py->arena_cap = cap;
	}
	off = (uint32_t)py->arena_len;
	memcpy(py->arena + off, s, len);
	py->arena_len += len;
	return off;
}

/* The id of (name, file, firstlineno), interned on first sight. */
static uint32_t intern_function(struct python *py, const char *name, const char *file,
				int32_t firstlineno)
{
	uint64_t h = hash_str(hash_str((uint64_t)(uint32_t)firstlineno, name), file);

	for (uint64_t key = h & ~(1ULL << 63);; key = (key + 1) & ~(1ULL << 63)) {
		bool added;
		uint64_t *v = u64map_upsert(&py->func_by_hash, key, &added);
		struct function *f;
		int64_t n, fl;

		if (!v)
			return FUNC_TABLE_FULL;
		if (!added) {
			f = &py->funcs[*v];
			if (f->firstlineno == firstlineno && strcmp(py->arena + f->name, name) == 0 &&
			    strcmp(py->arena + f->file, file) == 0)
				return (uint32_t)*v;
			continue;
		}
		if (py->n_funcs >= py->limits.max_functions + FUNC_FIRST) {
			u64map_remove(&py->func_by_hash, key);
			return FUNC_TABLE_FULL;
		}
		if (py->n_funcs == py->cap_funcs) {
			size_t cap = py->cap_funcs * 2;
			struct function *fs = realloc(py->funcs, cap * sizeof(*fs));

			if (!fs) {
				u64map_remove(&py->func_by_hash, key);
				return FUNC_TABLE_FULL;
			}
			py->funcs = fs;
			py->cap_funcs = cap;
		}
		n = arena_add(py, name);
		fl = n >= 0 ? arena_add(py, file) : n;
		if (fl < 0) {
			if (n >= 0)
				py->arena_len = (size_t)n; /* give the name's bytes back */
			u64map_remove(&py->func_by_hash, key);
			return FUNC_TABLE_FULL;
		}
		py->funcs[py->n_funcs] = (struct function){
			.name = (uint32_t)n, .file = (uint32_t)fl, .firstlineno = firstlineno,
		};
		*v = py->n_funcs;
		py->stats.functions++;
		return (uint32_t)py->n_funcs++;
	}
}

/* --- code objects ------------------------------------------------------- */

/* The cache entry of the code object at addr, if one was read with the
 * tag the sample saw; NULL when it was not (python_wait had it read). */
static const struct code_entry *code_entry(const struct pyprocess *pp, uint64_t addr,
					   uint32_t tag)
{
	static const struct code_entry unreadable = { .func = FUNC_UNREADABLE };
	uint64_t *slot = u64map_get(&pp->code, addr);
	const struct code_entry *e = slot ? &pp->entries[*slot - 1] : NULL;

	if (e && e->tag == tag)
		return e;
	slot = u64map_get(&pp->failed, addr);
	return slot && *slot == tag ? &unreadable : NULL;
}

/* Remembers that the read of c failed where another tag's code object
 * was read: its samples are named unreadable, not read again each. */
static void note_failed(struct python *py, struct pyprocess *pp, const struct pyread_code *c)
{
	uint64_t *slot;

	if (pp->failed.count >= py->limits.max_code_per_process) {
		u64map_done(&pp->failed);
		u64map_init(&pp->failed);
	}
	slot = u64map_upsert(&pp->failed, c->addr, NULL);
	if (slot)
		*slot = c->tag;
}

/* Puts what the reader found at c->addr into pp's cache, taking its line
 * table: a code object that could not be read, or that is not what the
 * sample saw any more, is kept as unreadable where nothing was read (it
 * is not read again at every sample; another tag at the address is).
 * Room was made for it (make_room). */
static void cache_code(struct python *py, struct pyprocess *pp, struct pyread_code *c)
{
	uint8_t *linetable = c->r == 0 ? TAKE_PTR(c->code.linetable) : NULL;
	size_t linetable_size = linetable ? c->code.linetable_size : 0;
	struct code_entry *e;
	uint64_t *slot;

	py->stats.code_reads++;
	if (c->r < 0)
		py->stats.code_read_errors++;
	slot = u64map_get(&pp->code, c->addr);
	/* read twice (asked for again while out), or a failure where a code
	 * object was read: the walker's tags are cached per CPU for a while,
	 * so a sample may still show one the object there had before, and
	 * such a sample must not undo what the others name */
	if (slot && (pp->entries[*slot - 1].tag == c->tag || c->r < 0)) {
		free(linetable);
		if (pp->entries[*slot - 1].tag != c->tag)
			note_failed(py, pp, c);
		return;
	}
	if (slot) {
		py->stats.code_reused++;
		e = &pp->entries[*slot - 1];
		free(e->linetable);
		pp->code_bytes -= e->linetable_size;
		py->code_bytes -= e->linetable_size;
	} else {
		bool added;

		if (pp->n_entries == pp->cap_entries) {
			size_t cap = pp->cap_entries ? pp->cap_entries * 2 : 64;
			struct code_entry *es = realloc(pp->entries, cap * sizeof(*es));

			if (!es) {
				free(linetable);
				return;
			}
			pp->entries = es;
			pp->cap_entries = cap;
		}
		slot = u64map_upsert(&pp->code, c->addr, &added);
		if (!slot) {
			free(linetable);
			return;
		}
		e = &pp->entries[pp->n_entries++];
		*slot = pp->n_entries;
		py->stats.code_objects++;
	}
	*e = (struct code_entry){
		.func = c->r < 0 ? FUNC_UNREADABLE :
				   intern_function(py, c->code.name, c->code.filename,
						   c->code.firstlineno),
		.tag = c->tag,
		.firstlineno = c->r < 0 ? 0 : c->code.firstlineno,
		.linetable = linetable,
		.linetable_size = (uint32_t)linetable_size,
	};
	pp->code_bytes += e->linetable_size;
	py->code_bytes += e->linetable_size;
	if (e->func == FUNC_TABLE_FULL)
		py->stats.function_table_full++;
}

/* Asks for the code object at addr with tag to be read, unless it is
 * being read; returns whether it will be (false: the queue is full, and a
 * later sample asks again). */
static bool want_code(struct pyprocess *pp, uint64_t addr, uint32_t tag)
{
	if (pp->reading)
		for (size_t i = 0; i < pp->reading->n; i++)
			if (pp->reading->codes[i].addr == addr && pp->reading->codes[i].tag == tag)
				return true;
	for (size_t i = 0; i < pp->n_wanted; i++)
		if (pp->wanted[i].addr == addr) {
			pp->wanted[i].tag = tag; /* the newest sample's */
			return true;
		}
	if (pp->n_wanted == ELEMENTSOF(pp->wanted))
		return false;
	pp->wanted[pp->n_wanted].addr = addr;
	pp->wanted[pp->n_wanted++].tag = tag;
	return true;
}

static const struct perfd_python_frame *python_frames_of(const struct perfd_sample *s)
{
	uint32_t kd = s->kernel_depth > 0 ? (uint32_t)s->kernel_depth : 0;
	uint32_t ud = s->user_depth > 0 ? (uint32_t)s->user_depth : 0;

	return (const struct perfd_python_frame *)&s->ips[kd + ud];
}

bool python_wait(struct python *py, const struct process *p, const struct perfd_sample *s)
{
	struct pyprocess *pp = find(py, p->pid, p->start_time_ns);
	const struct perfd_python_frame *pf = python_frames_of(s);
	bool wait = false;

	if (!pp || pp->status != 0)
		return false;
	for (uint32_t i = 0; i < s->python_depth; i++) {
		uint64_t addr = pf[i].code & ~PERFD_PYFRAME_ENTRY;

		if (pf[i].code == PERFD_PYFRAME_ENTRY || code_entry(pp, addr, pf[i].tag))
			continue;
		wait |= want_code(pp, addr, pf[i].tag);
	}
	return wait && submit_read(py, pp, p->owner_uid);
}

/* The byte offset in the bytecode that the walker's position stands for. */
static int64_t bytecode_offset(unsigned minor, int32_t position)
{
	if (minor <= 9)
		return position;         /* f_lasti in bytes */
	if (minor == 10)
		return (int64_t)position * 2; /* f_lasti in code units */
	return position;                 /* instruction pointer - first code unit */
}

static uint64_t python_frame(struct python *py, struct pyprocess *pp,
			     const struct perfd_python_frame *f)
{
	uint64_t addr = f->code & ~PERFD_PYFRAME_ENTRY;
	const struct code_entry *e = code_entry(pp, addr, f->tag);
	int64_t offset = bytecode_offset(pp->rt->minor, f->position);
	int line = 0;

	if (!e) {
		py->stats.frames_not_read++;
		return frame_make(FRAME_MODULE_PYTHON, (uint64_t)FUNC_NOT_READ << PYTHON_LINE_BITS);
	}
	if (e->func == FUNC_UNREADABLE)
		return frame_make(FRAME_MODULE_PYTHON, (uint64_t)FUNC_UNREADABLE << PYTHON_LINE_BITS);
	if (offset < 0)
		line = e->firstlineno; /* not started yet: its def line */
	else if (e->linetable)
		line = pylinetable_line(pp->rt->minor, e->linetable, e->linetable_size,
					e->firstlineno, offset);
	if (line < 0 || (unsigned)line > PYTHON_LINE_MAX)
		line = 0;
	return frame_make(FRAME_MODULE_PYTHON,
			  (uint64_t)e->func << PYTHON_LINE_BITS | (unsigned)line);
}

static bool is_eval_frame(const struct pyprocess *pp, uint64_t frame)
{
	uint64_t off = frame_address(frame);

	if (!pp->interp_module || frame_module(frame) != pp->interp_module)
		return false;
	for (size_t i = 0; i < PYRUNTIME_EVAL_RANGES; i++)
		if (off >= pp->rt->eval[i].start && off < pp->rt->eval[i].end)
			return true;
	return false;
}

/* Appends record f of the sample (unless it marks an empty loop call). */
static void emit_python(struct python *py, struct pyprocess *pp, const struct perfd_python_frame *f,
			uint64_t *frames, size_t *out)
{
	if (f->code == PERFD_PYFRAME_ENTRY)
		return;
	frames[(*out)++] = python_frame(py, pp, f);
	py->stats.frames++;
}

/* Whether frame is in one of p's perf trampolines: anonymous code (named by
 * its JIT map or not at all) in an arena. */
static bool is_trampoline_frame(const struct pyprocess *pp, const struct process *p,
				uint64_t frame)
{
	uint16_t module = frame_module(frame);

	return pp->arenas.n > 0 && (module == FRAME_MODULE_NONE || module == p->jit_module) &&
	       pytrampoline_contains(&pp->arenas, frame_address(frame));
}

size_t python_merge(struct python *py, const struct process *p,
		    const struct perfd_sample *s, uint64_t *frames, size_t n, size_t cap)
{
	const struct perfd_python_frame *pf = python_frames_of(s);
	uint64_t native[2 * PERFD_MAX_STACK_DEPTH + 2];
	bool eval[ELEMENTSOF(native)];
	struct pyprocess *pp;
	size_t first_eval = SIZE_MAX, last_eval = 0, next = 0, out = 0;
	uint32_t pd = s->python_depth;
	bool cut = sample_user_unrooted(s);

	pp = find(py, p->pid, p->start_time_ns);
	if (!pp || pp->status != 0 || pd == 0 || n > ELEMENTSOF(native))
		return n;

	/* frames is rewritten in place and may grow: read from a copy */
	memcpy(native, frames, n * sizeof(*frames));
	for (size_t i = 0; i < n; i++) {
		eval[i] = is_eval_frame(pp, native[i]);
		if (eval[i]) {
			first_eval = MIN(first_eval, i);
			last_eval = i;
		}
	}
	for (size_t i = 0; i < n && out < cap; i++) {
		if (eval[i] && next < pd) {
			/* this loop call's frames: up to its outermost one; the
			 * rootmost loop frame takes all that are left (the
			 * native stack was cut short, or a loop frame was not
			 * recognized: a .cold part without symbols) */
			for (; next < pd && out < cap; next++) {
				emit_python(py, pp, &pf[next], frames, &out);
				if ((pf[next].code & PERFD_PYFRAME_ENTRY) && (i != last_eval || cut)) {
					next++;
					break;
				}
			}
			continue;
		}
		if (first_eval != SIZE_MAX && i > first_eval && (i < last_eval || (cut && next < pd)) &&
		    frame_module(native[i]) == pp->interp_module)
			continue; /* the interpreter's call machinery */
		if (is_trampoline_frame(pp, p, native[i]))
			continue; /* stands for the Python frame shown instead */
		frames[out++] = native[i];
	}
	/* The native stack never showed the loop (or ran out of room): keep
	 * the Python frames, at the root end. */
	for (; next < pd && out < cap; next++) {
		size_t before = out;

		emit_python(py, pp, &pf[next], frames, &out);
		py->stats.unmatched += out - before;
	}
	return out;
}

void python_frame_resolve(const struct python *py, uint64_t frame, struct frame_record *out)
{
	uint64_t id = frame_address(frame) >> PYTHON_LINE_BITS;
	const struct function *f;

	*out = (struct frame_record){ .kind = FRAME_KIND_PYTHON, .offset = frame_address(frame) };
	if (id == FUNC_UNREADABLE || id >= py->n_funcs) {
		out->function = "[python: unreadable code object]";
		return;
	}
	if (id == FUNC_TABLE_FULL) {
		out->function = "[python: function table full]";
		return;
	}
	if (id == FUNC_NOT_READ) {
		out->function = "[python: code object not read yet]";
		return;
	}
	f = &py->funcs[id];
	out->function = py->arena + f->name;
	out->file = py->arena + f->file;
	out->line = frame_address(frame) & PYTHON_LINE_MAX;
	out->start_line = f->firstlineno > 0 ? (uint32_t)f->firstlineno : 0;
}

const char *python_frame_name(const struct python *py, uint64_t frame, bool lines,
			      char *buf, size_t size)
{
	struct frame_record r;

	python_frame_resolve(py, frame, &r);
	if (!r.file)
		snprintf(buf, size, "%s", r.function);
	else if (lines && r.line)
		snprintf(buf, size, "%s (%s:%u)", r.function, r.file, r.line);
	else
		snprintf(buf, size, "%s (%s)", r.function, r.file);
	return buf;
}

void python_get_stats(const struct python *py, struct python_stats *ret)
{
	size_t bytes = sizeof(*py) + u64map_memory(&py->procs) + u64map_memory(&py->not_python) +
		       u64map_memory(&py->func_by_hash) + py->cap_funcs * sizeof(*py->funcs) +
		       py->arena_cap;

	U64MAP_FOREACH(slot, &py->procs) {
		const struct pyprocess *pp = (const struct pyprocess *)(uintptr_t)slot->value;

		bytes += sizeof(*pp) + (pp->rt ? sizeof(*pp->rt) : 0) + u64map_memory(&pp->code) +
			 u64map_memory(&pp->failed) +
			 pp->cap_entries * sizeof(*pp->entries);
		for (size_t i = 0; i < pp->n_entries; i++)
			bytes += pp->entries[i].linetable_size;
	}
	*ret = py->stats;
	ret->memory_bytes = bytes;
}
