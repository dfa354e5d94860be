/* SPDX-License-Identifier: MIT */
/*
 * symbolize.h - the table of binaries (modules) and frame -> name.
 *
 * A module is one executable file, known by (device, inode), whatever paths
 * or processes map it.  When the first process mapping it is sampled, the
 * daemon opens it through /proc/PID/map_files (which works for files deleted
 * since, and for other mount namespaces) and keeps the descriptor, so the
 * symbols and unwind tables can still be read after the process has gone.  Symbol tables are
 * parsed lazily on the first query that needs them, once per module.
 * Kernel frames are named from /proc/kallsyms, read once at start.
 */
#ifndef PERFD_SYMBOLIZE_H
#define PERFD_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procmaps.h"

struct symbolizer;

struct symbolizer_stats {
	size_t modules;
	size_t modules_loaded; /* symbol tables parsed */
	size_t modules_failed; /* could not be opened or parsed */
	size_t kernel_symbols;
	size_t memory_bytes;
};

/* kallsyms_path may be NULL to run without kernel symbols.  *ret_kernel_error
 * gets the -errno from loading them (0 when they loaded). */
struct symbolizer *symbolizer_new(const char *kallsyms_path, int *ret_kernel_error);
struct symbolizer *symbolizer_free(struct symbolizer *s);

/* Returns the module id (FRAME_MODULE_FIRST..LAST) for a file mapping of
 * process pid, registering it (and opening the file) the first time.
 * Returns -ENOSPC when the module table is full, -EINVAL for a mapping that
 * is not backed by a file. */
int symbolizer_module_for_mapping(struct symbolizer *s, pid_t pid,
				  const struct procmap *map);

/* Writes the name of frame into buf (always NUL-terminated; truncated to
 * size) and returns buf.  Frames are never reported as errors: what cannot
 * be named prints as "module+0xOFFSET" or "[unknown]". */
const char *symbolizer_frame_name(struct symbolizer *s, uint64_t frame,
				  char *buf, size_t size);

/* The descriptor of a module's file (owned by s: do not close), -EBADF
 * when it could not be opened, -ENOENT for an unknown id. */
int symbolizer_module_fd(const struct symbolizer *s, uint16_t module);

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *ret);

#endif
