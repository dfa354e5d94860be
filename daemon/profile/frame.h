/* SPDX-License-Identifier: MIT */
/*
 * frame.h - how one stack frame is stored: a 64-bit word that says where the
 * code lives independently of any process.
 *
 *   bits 63..48  module id   (FRAME_MODULE_*, or a binary in symbolize.c)
 *   bits 47..0   address     (for a binary: the offset in its file)
 *
 * User addresses are normalized at ingest, while the process still lives,
 * to (binary, file offset): the profile of a process that has exited, or of
 * a binary mapped at different addresses in many processes, is symbolized
 * the same way later, and identical code in forked workers interns to one
 * stack.  Kernel addresses keep their low 48 bits; their upper bits are all
 * ones on x86_64 and arm64, restored by frame_kernel_address().
 */
#ifndef PERFD_FRAME_H
#define PERFD_FRAME_H

#include <stdint.h>

#define FRAME_ADDRESS_BITS 48
#define FRAME_ADDRESS_MASK ((1ULL << FRAME_ADDRESS_BITS) - 1)

#define FRAME_MODULE_NONE 0         /* user address in no known mapping */
#define FRAME_MODULE_FIRST 1        /* first id of a binary */
#define FRAME_MODULE_LAST 0xefff    /* last id of a binary */
/* Modules of frames read back from the state directory (state/persist.h):
 * a restored frame's resolved records name one of these, and the frame
 * word itself is FRAME_MODULE_STORED's, its address the restored frame. */
#define FRAME_MODULE_RESTORED_FIRST 0xf000
#define FRAME_MODULE_RESTORED_LAST 0xfffb
#define FRAME_MODULE_STORED 0xfffc  /* a frame resolved before a restart */
#define FRAME_MODULE_PYTHON 0xfffd  /* a Python function, see python.h */
#define FRAME_MODULE_SPECIAL 0xfffe /* a placeholder, address = enum frame_special */
#define FRAME_MODULE_KERNEL 0xffff

enum frame_special {
	FRAME_SPECIAL_STACK_LIMIT = 1, /* sample kept, stack dropped: stack table full */
	FRAME_SPECIAL_KSTACK_ERROR,    /* kernel stack could not be read */
	FRAME_SPECIAL_USTACK_ERROR,    /* user stack could not be read */
	FRAME_SPECIAL_UNWIND_PENDING,  /* the root of a stack cut short in code
					* whose unwind table was being built */
	FRAME_SPECIAL_TRUNCATED,       /* the root of a stack that did not reach
					* its root (sample_user_unrooted) */
	FRAME_SPECIAL_CONTEXT_SWITCH,  /* the whole stack of a tick that fell due
					* while its task was being switched out
					* (PERFD_SAMPLE_F_SWITCHED) */
	/* the root of a Python thread's CPU or off-CPU stack: whether it
	 * held its interpreter's GIL (PERFD_SAMPLE_F_GIL_*) */
	FRAME_SPECIAL_GIL_HELD,
	FRAME_SPECIAL_GIL_WAITING,
	FRAME_SPECIAL_GIL_RELEASED,
	/* the leaf of an off-CPU stack: why it waited, the wait class
	 * (profile/waitclass.h) added to this */
	FRAME_SPECIAL_WAIT = 64,
};

/* A special frame with this bit names a thread: the low 32 bits are its tid
 * (the root of a snapshot's stacks when it separates threads). */
#define FRAME_SPECIAL_THREAD (1ULL << 40)

static inline uint64_t frame_make(uint16_t module, uint64_t address)
{
	return ((uint64_t)module << FRAME_ADDRESS_BITS) | (address & FRAME_ADDRESS_MASK);
}

static inline uint16_t frame_module(uint64_t frame)
{
	return frame >> FRAME_ADDRESS_BITS;
}

static inline uint64_t frame_address(uint64_t frame)
{
	return frame & FRAME_ADDRESS_MASK;
}

static inline uint64_t frame_kernel_address(uint64_t frame)
{
	return frame | ~FRAME_ADDRESS_MASK;
}

/* What kind of code a resolved frame is. */
enum frame_kind {
	FRAME_KIND_KERNEL,
	FRAME_KIND_NATIVE,
	FRAME_KIND_PYTHON,
	FRAME_KIND_JIT,
	FRAME_KIND_SPECIAL,
	FRAME_KINDS,
};

extern const char *const frame_kind_names[FRAME_KINDS];

/* One frame resolved: what the symbolizers give and the model keeps.
 * Strings are the resolver's, valid until its next call (the model copies
 * them at once). */
struct frame_record {
	enum frame_kind kind;
	const char *function; /* never NULL */
	const char *file;     /* NULL when unknown */
	uint32_t line;        /* 0 when unknown */
	uint32_t start_line;  /* the function's first line: DWARF's decl line
			       * (native, with lines), co_firstlineno (Python);
			       * 0 when unknown (kernel, JIT) */
	uint16_t module;      /* frame.h module id of a file or JIT,
			       * FRAME_MODULE_KERNEL for the kernel, 0 for none */
	uint64_t offset;      /* in the module's file, or the address */
	uint64_t symbol_offset; /* kernel frames: from the start of the
				 * symbol that names function (0 for none),
				 * what is shown to who may not see the
				 * address (model_opts.kernel_addresses) */
};

/* At most this many records for one frame (inlined calls). */
#define FRAME_MAX_INLINE 16

#endif
