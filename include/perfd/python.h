/* SPDX-License-Identifier: MIT */
/*
 * python.h - the ABI between the BPF Python frame walker
 * (bpf/python.bpf.h) and the daemon (daemon/python.c).
 *
 * For each CPython process the daemon has recognized, it writes one
 * struct perfd_python_process into the `python_processes` map: where the
 * interpreter keeps the thread-state key, how glibc stores thread-specific
 * data, and the struct offsets of that CPython version.  For a sample of
 * such a process the walker finds the sampled thread's PyThreadState
 * through its thread-specific data (pthread_getspecific(autoTSSkey), found
 * from the task's fs base, so it works whether or not the thread holds the
 * GIL), walks its interpreter frames, and appends one struct
 * perfd_python_frame per frame to the sample, leaf first, after the native
 * frames.
 *
 * Frames carry what the daemon needs to name them later: the code object's
 * address, the raw instruction position and a tag of the code object
 * (its co_firstlineno and the address of its co_filename), which guards
 * against a code object freed and another allocated at the same address:
 * every module's code starts at line 1, and modules imported at start-up
 * are freed before the main script is compiled.  Which native _PyEval_EvalFrameDefault
 * call executed which frames is kept too: the last (outermost) frame of
 * each such call has PERFD_PYFRAME_ENTRY set in `code`.  A call that
 * executed no visible frame is a frame with code == PERFD_PYFRAME_ENTRY.
 */
#ifndef PERFD_PYTHON_H
#define PERFD_PYTHON_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Frames per sample, at most. */
#define PERFD_MAX_PYTHON_DEPTH 128
/* ips[] words per struct perfd_python_frame. */
#define PERFD_PYFRAME_WORDS 2

/* How the version links its frames. */
enum perfd_python_walk {
	/* 3.8-3.10: PyFrameObject, tstate->frame, f_back; each frame is
	 * one _PyEval_EvalFrameDefault call; f_lasti is an int. */
	PERFD_PYWALK_FRAME_OBJECTS = 1,
	/* 3.11: _PyInterpreterFrame via tstate->cframe->current_frame;
	 * is_entry marks the outermost frame of a call; prev_instr. */
	PERFD_PYWALK_IS_ENTRY = 2,
	/* 3.12-3.14: a shim frame, owned by the C stack (3.12-3.13) or
	 * the interpreter (3.14), sits below the outermost frame of each
	 * call (and is not shown). */
	PERFD_PYWALK_SHIM_FRAMES = 3,
};

/* _PyInterpreterFrame.owner of a shim frame and up: 3.12-3.13's
 * FRAME_OWNED_BY_CSTACK, 3.14's FRAME_OWNED_BY_INTERPRETER (and its
 * FRAME_OWNED_BY_CSTACK, 4). */
#define PERFD_PY_OWNED_BY_SHIM 3

struct perfd_python_process {
	__u64 tss_addr;  /* &Py_tss_t of the autoTSSkey: {int initialized; pthread_key_t key} */
	/* glibc's struct pthread (at the fs base): specific[] and the
	 * key data records, as its libthread_db descriptors describe them */
	__u32 pthread_specific;      /* offset of specific[], pointers to 32-key blocks */
	__u32 key_data_size;         /* sizeof(struct pthread_key_data) */
	__u32 key_data_data;         /* offset of its `data` */
	__u32 walk;                  /* enum perfd_python_walk */
	/* offsets; -1 where the version has no such field */
	__s32 tstate_frame;          /* PyThreadState -> frame / cframe / current_frame */
	__s32 cframe_current_frame;  /* _PyCFrame -> current_frame (3.11-3.12), else -1 */
	__s32 frame_code;
	__s32 frame_previous;
	__s32 frame_position;        /* f_lasti (int), or prev_instr / instr_ptr */
	__s32 frame_owner;           /* -1 before 3.11 */
	__s32 frame_is_entry;        /* 3.11 only */
	/* What else a frame says of the function it runs: f_func /
	 * f_funcobj from 3.11, f_globals before.  With the code address it
	 * keys the walker's per-CPU cache of tags (bpf/python.bpf.h). */
	__s32 frame_ident;
	__u32 frame_read_size;       /* bytes of a frame to read at once (<= 128) */
	__s32 code_adaptive;         /* first code unit in the code object, 3.11+ */
	/* The code object's bytes read for its tag: code_tag_size bytes from
	 * code_tag_first, holding co_firstlineno at tag_firstlineno and
	 * co_filename at tag_filename (offsets in those bytes). */
	__s32 code_tag_first;
	__u32 code_tag_size;         /* < 128 */
	__s32 tag_firstlineno;
	__s32 tag_filename;
	/* The GIL (bpf/python.bpf.h, "The GIL").  A thread holds it while
	 * it is the current one: its state is the runtime's tstate_current
	 * at gil_current_addr (up to 3.11), or, from 3.12 (gil_current_addr
	 * 0), its state's tstate_active_mask bit at tstate_active is set
	 * (-1: neither is known).  A thread blocked in a futex in the
	 * gil_size bytes at gil_addr (the main interpreter's struct
	 * _gil_runtime_state: its mutexes and condition variables) waits
	 * for it; gil_addr 0: unknown. */
	__u64 gil_current_addr;
	__s32 tstate_active;
	__u32 tstate_active_mask;
	__u64 gil_addr;
	__u32 gil_size;
};

/* code: the code object's address | PERFD_PYFRAME_ENTRY.
 * position: for PERFD_PYWALK_FRAME_OBJECTS the raw f_lasti, otherwise the
 * byte offset of the instruction pointer from the first code unit.
 * tag: perfd_python_code_tag() of the code object as read at sample time,
 * or up to the walker's python_tag_ttl_ns before it on the same CPU
 * (bpf/python.bpf.h, "Tags"). */
struct perfd_python_frame {
	__u64 code;
	__s32 position;
	__u32 tag;
};

/* Mixes co_firstlineno and the address of co_filename into 32 bits. */
static inline __u32 perfd_python_code_tag(__s32 firstlineno, __u64 filename)
{
	return ((__u32)firstlineno * 0x9e3779b1u) ^ (__u32)(filename >> 4) ^
	       (__u32)(filename >> 36);
}

#define PERFD_PYFRAME_ENTRY 1ULL

#endif
