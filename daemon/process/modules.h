/* SPDX-License-Identifier: MIT */
/*
 * modules.h - the registry of modules: what gives a process's mappings
 * their module ids, the 16 bits of a frame (profile/frame.h) that say
 * which binary, vDSO or JIT map an address is in.
 *
 * The profile store (profile/) names the user frames of every sample by
 * (module, offset), but what a module is (a file kept open, its symbol
 * tables, a JIT map read on a lane) is the symbolizer's (symbols/), a
 * layer the store must not reach into.  So the store asks these
 * operations, and symbols/symbolize.h's symbolizer_modules() fills them
 * (tests may fill them with their own).  Each is one of symbolize.h's
 * functions: for_mapping symbolizer_module_for_mapping, vdso
 * symbolizer_vdso_module, jit symbolizer_jit_module, note_jit_frame
 * symbolizer_note_jit_frame, with their contracts.  All four are
 * required: the store calls them without looking.
 */
#ifndef PERFD_MODULES_H
#define PERFD_MODULES_H

#include <stdint.h>
#include <sys/types.h>

struct procmap;

struct module_registry {
	/* The module of a file mapping of pid, charged to owner_uid: an id,
	 * or -ENOSPC (the table is full, or owner_uid holds its share),
	 * -EINVAL (not backed by a file). */
	int (*for_mapping)(void *ctx, pid_t pid, uint32_t owner_uid, const struct procmap *map);
	/* The vDSO's module, or -ENOENT. */
	int (*vdso)(void *ctx);
	/* The JIT module of (pid, start_time_ns) named from map_path, owned
	 * by owner_uid or root: an id, or -errno when refused or missing. */
	int (*jit)(void *ctx, pid_t pid, uint64_t start_time_ns, const char *map_path,
		   uint32_t owner_uid);
	/* A sample's frame in a JIT module: its map may need reading again. */
	void (*note_jit_frame)(void *ctx, uint64_t frame);
	void *ctx;
};

#endif
