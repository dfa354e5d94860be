/* SPDX-License-Identifier: MIT */
/*
 * pyruntime.h - finding the CPython runtime in a process, and the struct
 * offsets a frame walker needs for each supported CPython (3.8 to 3.14,
 * x86_64).
 */
#ifndef PERFD_PYRUNTIME_H
#define PERFD_PYRUNTIME_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "process/procmaps.h"

#define PYRUNTIME_MIN_MINOR 8  /* 3.8 */
#define PYRUNTIME_MAX_MINOR 14 /* 3.14 */
#define PYRUNTIME_EVAL_RANGES 2  /* _PyEval_EvalFrameDefault, its part out of line */
#define PYRUNTIME_TRAMPOLINE_MAX 64

/* Offsets in bytes within CPython's structures; -1 where the field does not
 * exist in that version.  Every value was printed with offsetof() from the
 * version's own headers (see tests/unit/test-pyruntime.c, which checks the
 * table against them for every installed version). */
struct pyoffsets {
	unsigned major, minor;

	/* _PyRuntimeState */
	int32_t runtime_interpreters_head;
	int32_t runtime_tstate_current; /* gilstate.tstate_current; -1 from 3.12 (TLS) */
	int32_t runtime_autotsskey;     /* gilstate.autoTSSkey, autoTSSkey from 3.12 */
	/* the main interpreter's GIL, struct _gil_runtime_state: ceval.gil,
	 * _main_interpreter._gil from 3.12 (where interp->ceval.gil points) */
	int32_t runtime_gil;
	/* struct _gil_runtime_state */
	int32_t gil_last_holder; /* the PyThreadState* that took it last */
	int32_t gil_locked;      /* int: 1 while held */
	int32_t gil_size;        /* sizeof: its mutexes and condition variables are in it */
	/* Py_tss_t */
	int32_t tss_initialized;
	int32_t tss_key; /* the pthread_key_t */

	/* PyInterpreterState */
	int32_t interp_next;
	int32_t interp_tstate_head; /* tstate_head, threads.head from 3.11 */

	/* PyThreadState */
	int32_t tstate_next;
	int32_t tstate_interp;
	int32_t tstate_thread_id;        /* pthread_t (pthread_self()) */
	int32_t tstate_native_thread_id; /* the kernel tid; 3.11+ */
	int32_t tstate_frame;            /* PyFrameObject *frame; 3.8-3.10 */
	int32_t tstate_cframe;           /* _PyCFrame *cframe; 3.11-3.12 */
	int32_t cframe_current_frame;    /* _PyCFrame.current_frame; 3.11-3.12 */
	int32_t tstate_current_frame;    /* _PyInterpreterFrame *current_frame; 3.13+ */
	/* the 32-bit word of the _status bit-field (3.12+, -1 before) and the
	 * bit of `active` in it: set while the thread is attached, that is
	 * holds the GIL (cleared before it drops it, set after it took it) */
	int32_t tstate_status;
	int32_t tstate_active_bit;

	/* PyFrameObject (3.8-3.10) or _PyInterpreterFrame (3.11+) */
	int32_t frame_code;     /* f_code; f_executable from 3.13 (a _PyStackRef in 3.14) */
	int32_t frame_previous; /* f_back (3.8-3.10), previous */
	int32_t frame_lasti;    /* int f_lasti; 3.8-3.10 only */
	int32_t frame_instr;    /* prev_instr (3.11-3.12), instr_ptr (3.13+) */
	int32_t frame_owner;    /* char owner; 3.11+ */
	int32_t frame_is_entry; /* bool is_entry; 3.11 only */
	int32_t frame_ident;    /* f_globals (3.8-3.10), f_func (3.11), f_funcobj (3.12+) */

	/* PyCodeObject */
	int32_t code_name;
	int32_t code_qualname; /* 3.11+ */
	int32_t code_filename;
	int32_t code_firstlineno;
	int32_t code_lnotab;        /* 3.8-3.9 */
	int32_t code_linetable;     /* 3.10+ */
	int32_t code_code_adaptive; /* first code unit, inline; 3.11+ */

	/* Objects */
	int32_t unicode_ascii_data; /* sizeof(PyASCIIObject): a compact ASCII string's bytes */
	int32_t bytes_sval;         /* PyBytesObject.ob_sval */
	int32_t var_size;           /* PyVarObject.ob_size */
};

/* The CPython runtime of one process.  Addresses are in that process. */
struct pyruntime {
	unsigned major, minor;
	int patch; /* -1 when it could not be read */
	char path[PATH_MAX]; /* the ELF holding the runtime, as maps names it */
	uint64_t bias;       /* load bias of that ELF: process address - ELF vaddr */
	uint64_t runtime_addr; /* &_PyRuntime; 0 when the file has none (before 3.7) */

	/* &_PyRuntime.(gilstate.)autoTSSkey: the pthread key under which every
	 * thread keeps its PyThreadState; 0 when unknown. */
	uint64_t autotsskey_addr;

	/* &PyCode_Type, to tell code objects from other objects; 0 unknown */
	uint64_t code_type_addr;
	/* Where _PyEval_EvalFrameDefault lies, as offsets in path's file,
	 * [start, end): the function, and its part out of line (.cold in
	 * .symtab, or found by pyeval.c); an empty range when neither
	 * symbols nor pyeval.c tell (a stripped binary's .cold part that
	 * only one jump reaches). */
	struct { uint64_t start, end; } eval[PYRUNTIME_EVAL_RANGES];

	/* The perf trampoline template (3.12+: what `-X perf` and `-X
	 * perf_jit` copy into arenas), the bytes from _Py_trampoline_func_start
	 * to _Py_trampoline_func_end as path's file holds them; size 0 when
	 * the file has none, or a longer one. */
	uint8_t trampoline[PYRUNTIME_TRAMPOLINE_MAX];
	uint32_t trampoline_size;

	/* A free-threaded or debug build (ABI flag 't' or 'd' in its name):
	 * unsupported, its structures differ. */
	bool other_abi;

	const struct pyoffsets *offsets; /* NULL when unsupported */
};

/* Decides whether the process pid, whose mappings are maps (as read by
 * procmaps_read_pid(), all or only the executable ones), runs CPython, and where.  Files are
 * opened through their mappings (/proc/PID/map_files), so processes in
 * other mount namespaces or chroots are seen as they see themselves (pid
 * <= 0 opens the paths as they are).
 *
 * Returns 0 and fills *ret for CPython 3.8 to 3.14; -EPROTONOSUPPORT for
 * another CPython, with ret's version, path and bias filled (and
 * runtime_addr when the file has one) so that the caller can report it;
 * -ENOENT when the process is not CPython; another -errno when a file
 * could not be read.  *ret is not written on -ENOENT or other errors. */
int pyruntime_detect(pid_t pid, const struct procmaps *maps, struct pyruntime *ret);

/* The offsets for CPython major.minor on x86_64, or NULL when not supported.
 * The table is static: the pointer stays valid. */
const struct pyoffsets *pyoffsets_for(unsigned major, unsigned minor);

#endif
