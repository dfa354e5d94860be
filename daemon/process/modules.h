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
 * symbolizer_vdso_module, jit_plan/jit_probe/jit_apply/jit_done
 * symbolizer_jit_plan and its kin, note_jit_frame
 * symbolizer_note_jit_frame, with their contracts.  All are required:
 * the store calls them without looking.
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

/* A process's JIT map (/tmp/perf-PID.map, or its jitdump) looked for in
 * the same three steps, for the same reason: the map is a file in the
 * process's root, on whatever file system it mounted there.
 * - jit_plan, on the loop: the process's JIT module if it has one (an
 *   id), else a descriptor slot reserved (0);
 * - jit_probe, anywhere: opens the first of paths that is there, under
 *   the rules a JIT map must meet (its owner, one link, its size);
 * - jit_apply, on the loop: registers the module with the descriptor.
 * jit_done releases what apply did not take. */
#define JIT_PROBE_PATHS 2
struct jit_probe {
	/* in: the caller's */
	pid_t pid;
	uint64_t start_time_ns;
	uint32_t owner_uid;
	char paths[JIT_PROBE_PATHS][64]; /* in the process's root; "" ends them */
	/* in: jit_plan's */
	bool reserved;
	/* out: jit_probe's */
	bool probed;
	int fd;      /* -1, or the map opened */
	int error;   /* when none was: -errno of the first open that found a file
	             * (refused), else -ENOENT; -ESRCH: the process is gone */
	int opened;  /* the index in paths of the one opened */
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
	/* The JIT module of a process in three steps (struct jit_probe
	 * above).  jit_plan returns the id the process's map has already, 0
	 * when planned, or -ENOMEM; jit_probe touches no ctx; jit_apply
	 * returns an id, or -errno when refused (counted) or missing; jit_done
	 * after jit_apply or instead of it. */
	int (*jit_plan)(void *ctx, struct jit_probe *p);
	void (*jit_probe)(struct jit_probe *p);
	int (*jit_apply)(void *ctx, struct jit_probe *p);
	void (*jit_done)(void *ctx, struct jit_probe *p);
	/* A sample's frame in a JIT module: its map may need reading again. */
	void (*note_jit_frame)(void *ctx, uint64_t frame);
	void *ctx;
};

#endif
