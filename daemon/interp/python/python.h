/* SPDX-License-Identifier: MIT */
/*
 * python.h - Python frames: which processes run CPython, what the BPF
 * walker needs to know about each, and turning the frames it records into
 * named frames merged with the native ones.
 *
 * A Python frame is stored like any frame (frame.h), with module
 * FRAME_MODULE_PYTHON and as address a function id (an interned
 * (qualname, file, first line)) and the line:
 *
 *   bits 47..20  function id     bits 19..0  line (0: unknown)
 *
 * so Python frames intern, merge and survive the process like native ones.
 */
#ifndef PERFD_DAEMON_PYTHON_H
#define PERFD_DAEMON_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfd/sample.h"
#include "profile/frame.h"

struct process;

#define PYTHON_LINE_BITS 20

/* 0 means the largest the encoding allows (functions, names), or no limit. */
struct python_limits {
	size_t max_functions;       /* interned (qualname, file, line) */
	size_t max_code_per_process; /* code objects cached per process */
	size_t max_code_bytes;      /* line tables cached, all processes */
	size_t max_name_bytes;      /* names and file names of the functions */
};

struct python_stats {
	size_t processes;        /* processes running a supported CPython */
	size_t unsupported;      /* ... an unsupported or unusable one */
	size_t detections_pending; /* processes being looked at on the lane */
	size_t reads_pending;    /* processes whose memory is read on the reader's lane */
	size_t reads_deferred;   /* ... waiting for their user's reads (one lane a user) */
	uint64_t frames_not_read; /* frames named "[python: code object not read yet]" */
	size_t functions;
	size_t code_objects;     /* cached, all processes */
	uint64_t code_reads;     /* code objects read from processes */
	uint64_t code_read_errors; /* ... that could not be read or were not code */
	uint64_t code_reused;    /* cached entries replaced: the address held another object */
	uint64_t cache_resets;   /* per-process caches emptied at their limit */
	uint64_t function_table_full; /* frames named "[python: function table full]" */
	uint64_t frames;         /* Python frames merged */
	uint64_t unmatched;      /* ... with no native interpreter frame to replace */
	size_t trampoline_arenas; /* -X perf trampoline arenas found, all processes */
	size_t memory_bytes;
};

struct python;

/* map_fd: the BPF python_processes map, or -ENOTSUP when this kernel
 * cannot walk Python frames, -ECANCELED when they are turned off (processes
 * are still recognized and reported).  Returns 0 or -errno (-ENOMEM, the
 * lane's thread). */
int python_new(int map_fd, const struct python_limits *limits, struct python **ret);
struct python *python_free(struct python *py);

/* Called after p's mappings were (re)read: when they changed in a way that
 * matters, has the lane look for CPython in them (pydetect.h: it reads
 * files, which the loop must not); called again once the lane is back
 * (python_complete), takes in what it found and, once an interpreter runs
 * in it (else it asks for a revisit), writes the BPF description and
 * fills p->runtime; and has the reader look for the perf trampolines in
 * new anonymous code (python_read_back says when they are back).  Logs an
 * unsupported runtime once per process. */
void python_maps_changed(struct python *py, struct process *p);
/* python_fd is readable when the detection lane has looked at processes,
 * python_reader_fd when the reader has read their memory (pyread.h);
 * python_complete takes the results of both: it calls detected for each
 * process still waiting for its look, which should call
 * python_maps_changed with it, and read for each whose read is back, which
 * should call python_read_back with it and let its waiting samples in
 * (aggregator_frames_read). */
struct python_callbacks {
	void (*detected)(void *userdata, uint32_t pid, uint64_t start_time_ns);
	void (*read)(void *userdata, uint32_t pid, uint64_t start_time_ns);
};
int python_fd(const struct python *py);
int python_reader_fd(const struct python *py);
void python_complete(struct python *py, const struct python_callbacks *cb, void *userdata);
/* Takes in what the reader found of p beyond its code objects: whether
 * an interpreter runs (then describes and reports it, else asks for a
 * revisit); and hands the reader what p's samples asked for meanwhile.
 * Returns whether p's perf trampolines changed (python_trampolines): it
 * should be described to the unwinder again. */
bool python_read_back(struct python *py, struct process *p);
/* Whether the sample s of p shows code objects not read yet: they are
 * asked for from the reader (one read per process out at a time), and s
 * should wait for them (the aggregator's frames_wait).  Frames merged
 * before their code object is read are named "[python: code object not
 * read yet]". */
bool python_wait(struct python *py, const struct process *p, const struct perfd_sample *s);

/* CPython's perf trampolines in p (pytrampoline.h): the template and the
 * arenas of copies of it that p's last maps read found.  Valid until p's
 * maps change again or it is forgotten. */
struct python_trampolines {
	const uint8_t *code; /* the template */
	size_t code_size;
	uint32_t arena_size;
	const uint64_t *starts; /* sorted */
	const uint32_t *strides;
	size_t n;
};

/* Fills *ret and returns true when p has trampoline arenas. */
bool python_trampolines(const struct python *py, const struct process *p,
			struct python_trampolines *ret);

/* The aggregator's revisit of p (p->revisit_ns, which python_maps_changed
 * sets): for a runtime found before an interpreter ran in it, has the
 * reader look again (python_read_back describes and reports it once one
 * does). */
void python_revisit(struct python *py, struct process *p);
/* Forgets p (exited, replaced or evicted) and removes its BPF entry. */
void python_process_gone(struct python *py, const struct process *p);

/* Replaces, in the user frames of p (frames[0..n), leaf first, normalized
 * to (module, offset)), each native _PyEval_EvalFrameDefault frame by the
 * Python frames of the sample s that it was executing, and hides the
 * interpreter's own frames between two Python frames and its perf
 * trampolines (python_trampolines), which only stand for the Python frames
 * shown instead.  Writes at most cap frames; returns the new count. */
size_t python_merge(struct python *py, const struct process *p,
		    const struct perfd_sample *s, uint64_t *frames, size_t n, size_t cap);

/* Resolves a FRAME_MODULE_PYTHON frame: qualname, file (co_filename),
 * line and start line (co_firstlineno); strings owned by py. */
void python_frame_resolve(const struct python *py, uint64_t frame, struct frame_record *out);
/* The same as text: "qualname (file:line)", or "qualname (file)" without
 * lines (the tests' view of it). */
const char *python_frame_name(const struct python *py, uint64_t frame, bool lines,
			      char *buf, size_t size);

void python_get_stats(const struct python *py, struct python_stats *ret);

#endif
