/* SPDX-License-Identifier: MIT */
/*
 * model.h - the resolved profile: what every encoder reads.
 *
 * A query's answer (profile parts of one or more processes, profile.h) is
 * resolved once into tables, as pprof's profile.proto lays them out:
 *
 *   strings    every name, file and path, interned (id 0 is "")
 *   functions  (kind, name, file, start line), interned: the start line
 *              is the function's own (pprof's Function.start_line), part
 *              of what it is, as two Python functions of one name in one
 *              file are two
 *   locations  one resolved frame: its lines, outermost first (a native
 *              frame with inlined calls has several; the last is the code
 *              at the address), the module and offset it came from
 *   mappings   the modules locations refer to: path, build-id (the
 *              kernel is one, as the describer names it)
 *   samples    (process, thread, locations root first) -> value, merged
 *   processes  pid, comm, cgroup, unit of each part
 *
 * Kernel addresses (KASLR) are decided here, once for every format: a
 * model built without model_opts.kernel_addresses (the default: a zeroed
 * opts hides them) keeps no kernel address anywhere; a kernel location's
 * offset is 0 and only its symbol_offset (from the start of the function
 * that names it) is left, so no encoder can print what the client may not
 * see.  Who may is the caller's question (api/auth.h).
 *
 * Frames are resolved through a caller's resolver (the manager routes
 * Python frames to interp/python and the rest to the symbolizer), once per
 * distinct frame word.  Locations are interned by what they resolve to, so
 * two addresses that read alike (one function, no line numbers asked for)
 * are one location and their samples merge, as per-function self and
 * total time need.  Memory: a few words per location and per sample frame,
 * plus the strings.
 */
#ifndef PERFD_MODEL_H
#define PERFD_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perfd/macro.h"
#include "profile/aggregate.h"
#include "profile/frame.h"
#include "profile/profile.h"

/* The name of a function whose resolver named it "" (or nothing). */
#define MODEL_UNNAMED "[unnamed]"

/* Resolves frame into at most cap records, outermost first (functions
 * inlined at the address follow the one the symbol table names).  scratch
 * (size bytes) is the resolver's for names it has to format.  Returns the
 * count, >= 1. */
typedef size_t (*frame_resolver_t)(void *ctx, uint64_t frame, bool lines,
				   struct frame_record *out, size_t cap, char *scratch,
				   size_t size);

/* Whether frame's names (with lines: its source lines too) wait for a
 * table being built off the loop (symbolize.h's symbolizer_frame_pending),
 * starting it if it is not; resolved now, the frame would read
 * module+offset. */
typedef bool (*frame_pending_t)(void *ctx, uint64_t frame, bool lines);

/* Path and build-id (hex, "" when none) of a module; false when unknown. */
typedef bool (*module_describer_t)(void *ctx, uint16_t module, const char **ret_path,
				   const char **ret_build_id);

struct model_opts {
	enum profile_kind kind;
	uint64_t period_ns; /* a CPU value's time, for a TIME kind (wall) */
	bool lines;        /* native frames with files, lines and inlined calls */
	bool python_lines; /* Python frames with their line */
	bool threads;      /* samples kept apart by thread */
	bool leaf_only;    /* each stack cut to its leaf frame: per-function
			    * self values for the price of one frame each */
	bool kernel_addresses; /* kernel locations keep their addresses */
	frame_resolver_t resolve;
	module_describer_t describe;
	frame_pending_t pending; /* NULL: nothing is ever pending */
	void *ctx;
};

struct model_function {
	uint32_t name, file; /* string ids */
	enum frame_kind kind;
	uint32_t start_line; /* 0: unknown */
};

struct model_line {
	uint32_t function;
	uint32_t line; /* 0: unknown or not asked for */
};

struct model_location {
	uint32_t first_line, n_lines; /* in lines[], outermost first */
	uint32_t mapping;             /* index + 1 in mappings, 0 for none */
	uint64_t offset;              /* in the module's file, the kernel's
				       * address, or 0 (model.kernel_addresses) */
	uint64_t symbol_offset;       /* kernel: from its function's start,
				       * 0 for a frame no symbol names */
	enum frame_kind kind;
	uint64_t hash;
};

struct model_mapping {
	uint16_t module;
	uint32_t path, build_id; /* string ids */
};

struct model_sample {
	uint32_t first, depth; /* location ids in stack_pool[], root first */
	uint32_t process;      /* index in processes[] */
	uint32_t tid;          /* 0 unless threads */
	uint32_t thread_comm;  /* string id */
	uint64_t value;
	uint64_t hash;
};

struct model_process {
	uint32_t pid, ns_pid;
	uint64_t start_time_ns;
	uint32_t comm, cgroup, unit; /* string ids */
	bool exited;
	uint64_t total;
};

struct model {
	enum profile_kind kind;
	bool threads;
	bool kernel_addresses; /* model_opts': false means no kernel location
				* has an offset */
	char *strings; /* NUL-terminated texts, by offset = string id */
	size_t strings_len, strings_cap;
	struct model_function *functions;
	size_t n_functions, cap_functions;
	struct model_line *lines;
	size_t n_lines, cap_lines;
	struct model_location *locations;
	size_t n_locations, cap_locations;
	struct model_mapping *mappings;
	size_t n_mappings, cap_mappings;
	uint32_t *stack_pool;
	size_t n_pool, cap_pool;
	struct model_sample *samples;
	size_t n_samples, cap_samples;
	struct model_process *processes;
	size_t n_processes;
	/* distinct frames whose names waited for a table being built
	 * (model_opts.pending): the caller may build again once it is */
	size_t pending_frames;
	uint64_t total;
};

/* Resolves parts into a new model, in one go.  Returns 0, or -ENOMEM.
 * The same as a builder stepped without a budget (below). */
int model_build(const struct model_opts *opts, const struct profile_parts *parts,
		const struct stacktab *stacks, struct model **ret);
struct model *model_free(struct model *m);

/*
 * A build in slices.  A model of ~60k unique stacks takes 0.3-0.6 s to
 * build under load, which held the event loop that long; a builder adds
 * the parts' stacks a budget at a time (MODEL_SLICE_NS on the loop:
 * api/model_slices.h), the caller serving others between steps.  Each
 * step takes up where the last one stopped: at a part and a slot of its
 * profile's values.
 *
 * What may change between two steps, and why the model does not:
 *  - The parts themselves do not: they are the caller's (a query's copy,
 *    or a collector's removed from the store), held unchanged until the
 *    builder is freed; parts->n and each profile's slots stay as they
 *    were at model_builder_new.
 *  - Stack ids: a part holds a reference on every stack it names
 *    (profile_add), so none of them is freed, nor its id reused, before
 *    the parts are released (stacktab.h).
 *  - Processes: each part pins its process (aggregate.h: never evicted
 *    nor freed while pinned); its comm, cgroup, maps and thread names may
 *    change, and a step reads them as they are then, copying what it
 *    keeps into the model's strings at once.
 *  - Modules: a module id is given back only when no stack names a frame
 *    in it (manager.c's collect_modules counts the frames of every stack
 *    in the table), and the parts' stacks stay in the table, so the id of
 *    every frame still to be resolved names the same file until the end;
 *    frames are resolved through the resolver at each call, never through
 *    a pointer kept from an earlier step, and what they resolve to is
 *    copied.  A table unloaded from the symbol cache between steps is
 *    parsed again; one still being built makes the frame count in
 *    pending_frames, as in one go.  Python functions are never freed
 *    (interp/python); restored frames (state/persist.h) are kept while a
 *    stack names them.
 * So a model built in slices is the one built in one go from the same
 * parts (tests/unit/test-model.c checks it), but for names that became
 * known between steps.
 */
#define MODEL_SLICE_NS (5 * 1000 * 1000ULL)

struct model_builder;

/* How much one step may do: it stops, after at least one stack, once
 * the clock (CLOCK_MONOTONIC) reaches deadline_ns or max_stacks stacks are
 * added; 0 is no limit. */
struct model_budget {
	uint64_t deadline_ns;
	size_t max_stacks;
};

/* Starts a build of parts; parts and stacks must stay as they are (above)
 * until the builder is freed.  Returns 0 or -ENOMEM. */
int model_builder_new(const struct model_opts *opts, const struct profile_parts *parts,
		      const struct stacktab *stacks, struct model_builder **ret);
/* Adds stacks within budget (NULL: all that are left).  Returns 1 when
 * every part is in, 0 when there is more to do, -ENOMEM (and again at
 * every later call). */
int model_builder_step(struct model_builder *mb, const struct model_budget *budget);
/* Adds what is left and gives the model to the caller (*ret; the builder
 * is to be freed still).  Returns 0 or -ENOMEM. */
int model_builder_finish(struct model_builder *mb, struct model **ret);
/* Frees the builder and the model it holds, if any.  Accepts NULL. */
struct model_builder *model_builder_free(struct model_builder *mb);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct model_builder, model_builder_free);

static inline const char *model_string(const struct model *m, uint32_t id)
{
	return m->strings + id;
}

#endif
