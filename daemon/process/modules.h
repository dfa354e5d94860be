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

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "process/procmaps.h"

/* One file mapping identified in three steps, so that what touches the
 * process's files (stat, open, build-id: unbounded on a FUSE or NFS file
 * whose server does not answer, or on a map_files look-up waiting for the
 * target's mmap lock) can run off the loop (profile/procread.c):
 * - plan, on the loop: copies the mapping, says whether the file must be
 *   opened (no verified module has its (dev, inode)) and reserves the
 *   descriptor slot under the symbolizer's max_fds;
 * - probe, anywhere (a lane): the system calls, and nothing else; touches
 *   only the probe;
 * - apply, on the loop: the module table, as for_mapping, which is the
 *   three in a row.  done releases what apply did not take.
 * The descriptor a probe opened is the probe's until apply takes it or
 * done closes it. */
#define MODULE_PROBE_BUILD_ID_LEN 129 /* symbols/buildid.h's BUILD_ID_MAX * 2 + 1 */
struct module_probe {
	/* in: plan's */
	struct procmap map; /* a copy; path owned */
	pid_t pid;
	bool want_open; /* open the file, read its build-id */
	bool reserved;  /* holds a descriptor slot */
	/* out: probe's */
	bool probed;
	int error; /* 0, or -errno: the file could neither be stat'ed nor opened */
	dev_t dev; /* the file's identity, as fstat says */
	uint64_t inode, size;
	int64_t mtime_ns, ctime_ns;
	bool opened; /* an open was tried */
	int fd; /* -1, or the file opened */
	int open_error; /* -errno of the open that failed, else 0 */
	char build_id[MODULE_PROBE_BUILD_ID_LEN]; /* hex, "" when none or not read */
};

struct module_registry {
	/* The module of a file mapping of pid, charged to owner_uid: an id,
	 * or -ENOSPC (the table is full, or owner_uid holds its share),
	 * -EINVAL (not backed by a file). */
	int (*for_mapping)(void *ctx, pid_t pid, uint32_t owner_uid, const struct procmap *map);
	/* The same in three steps (struct module_probe above).  plan returns
	 * 0, -EINVAL (not backed by a file) or -ENOMEM; probe touches no
	 * ctx; apply returns as for_mapping, or -EAGAIN when the probe did
	 * not open a file it now must (plan again with open); done
	 * after apply or instead of it. */
	int (*plan)(void *ctx, pid_t pid, const struct procmap *map, bool open,
		    struct module_probe *ret);
	void (*probe)(struct module_probe *p);
	int (*apply)(void *ctx, uint32_t owner_uid, struct module_probe *p);
	void (*done)(void *ctx, struct module_probe *p);
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
