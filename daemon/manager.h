/* SPDX-License-Identifier: MIT */
/*
 * manager.h - the daemon: one sd-event loop owning the sampler, the
 * aggregator, the symbolizer and the socket server, and answering requests.
 *
 * The path of one sample: bpf/perfd.bpf.c -> ring buffer -> sampler.c
 * (drained on a timer, or when the BPF side asks) -> aggregate.c (interned
 * into per-process counts and running snapshots) -> a request arrives at
 * server.c -> manager.c dispatches it -> query.c / folded.c encode the
 * answer (symbolize.c names the frames) -> server.c sends it -> perfctl.
 */
#ifndef PERFD_MANAGER_H
#define PERFD_MANAGER_H

#include <stdbool.h>
#include <stddef.h>

#include "profile/aggregate.h"

struct manager_opts {
	const char *socket_path;
	unsigned frequency_hz;
	size_t ringbuf_bytes;
	struct aggregator_limits limits;
	uint32_t unwind_rows;     /* 0: frame pointers only */
	uint32_t unwind_mappings;
	const char *kallsyms_path;
	const char *debug_dir; /* NULL: /usr/lib/debug */
	size_t symbol_cache_bytes; /* 0: the symbolizer's default */
	bool demangle;
	bool python; /* walk Python frames */
};

struct manager;

/* Sets everything up (BPF attached, socket listening); logs what failed.
 * Returns 0 or -errno. */
int manager_new(const struct manager_opts *opts, struct manager **ret);
/* Runs until SIGTERM/SIGINT.  Returns 0 or -errno. */
int manager_run(struct manager *m);
struct manager *manager_free(struct manager *m);

#endif
