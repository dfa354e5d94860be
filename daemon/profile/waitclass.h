/* SPDX-License-Identifier: MIT */
/*
 * waitclass.h - why a task waited: the class of an off-CPU block, from how
 * it left the CPU (still runnable, or its sleep state) and the kernel
 * functions on the stack it left at.
 *
 * A block is classed once, when its stack and its end are joined
 * (offcpu.c); the class is its stack's leaf, a frame of its own
 * ("[wait: network]"), so that every format, every query and a diff show
 * it without knowing about classes.
 */
#ifndef PERFD_WAITCLASS_H
#define PERFD_WAITCLASS_H

#include <stddef.h>
#include <stdint.h>

/* Appended only: a class's number is in stored stacks (FRAME_SPECIAL_WAIT). */
enum wait_class {
	WAIT_OTHER = 0,  /* none of the below */
	WAIT_CPU,        /* runnable, waiting for a CPU (preempted, or yielded) */
	WAIT_DISK,       /* block or file-system I/O */
	WAIT_NETWORK,    /* a socket: receive, send, accept, connect */
	WAIT_LOCK,       /* a futex (a user lock), or a kernel mutex or rwsem */
	WAIT_SLEEP,      /* nanosleep, clock_nanosleep, pause */
	WAIT_POLL,       /* poll, select, epoll: waiting for any of many events */
	WAIT_PIPE,       /* a pipe, a Unix socket, System V IPC */
	WAIT_PAGE_FAULT, /* a page fault waiting for its page (swap, a file) */
	WAIT_CHILD,      /* wait(), waitpid(): a child process */
	WAIT_GIL,        /* a Python thread blocked on its interpreter's GIL
			  * (PERFD_SAMPLE_F_GIL_WAIT) */
	WAIT_CLASSES,
};

/* "other", "cpu", "disk", "network", "lock", "sleep", "poll", "pipe",
 * "page fault", "child", "GIL"; "?" past the table. */
const char *wait_class_name(unsigned c);

/* The leaf frame's name of a block of class c: "[wait: network]". */
const char *wait_frame_name(unsigned c);

/* The class of a kernel function on a blocked stack, or -1 when it says
 * nothing (schedule, a generic wait). */
int wait_class_of_function(const char *name);

/* Resolves a kernel frame to its function's name (NULL: unknown). */
typedef const char *(*wait_namer_t)(void *ctx, uint64_t frame, char *buf, size_t size);

/* The class of a block: WAIT_CPU when it left runnable
 * (PERFD_OFFCPU_RUNNABLE in state); else a page fault when the stack is
 * in one; else the first kernel frame from the leaf whose function says
 * (kernel[0..n), leaf first). */
enum wait_class wait_classify(uint32_t state, const uint64_t *kernel, size_t n,
			      wait_namer_t name, void *ctx);

#endif
