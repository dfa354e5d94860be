/* SPDX-License-Identifier: MIT */
/*
 * manager.h - the daemon: one sd-event loop owning the sampler, the drain
 * thread, the store, the symbolizer and the socket server; it sets them up,
 * runs the loop and tears them down.  Requests go to api/command.c's table.
 *
 * The path of one sample: bpf/perfd.bpf.c -> ring buffer -> collect/drain.c
 * (its own thread, on the ring's wake-ups or every 200 ms) -> queue ->
 * profile/aggregate.c on the loop (interned, added to the process's time
 * windows and to running snapshots) -> a request arrives at api/server.c
 * -> api/command.c runs its command (api/cmd_*.c) -> profile/model.c
 * resolves the profile (symbols/, interp/python) -> encode/ writes it ->
 * api/server.c sends it -> perfctl.
 */
#ifndef PERFD_MANAGER_H
#define PERFD_MANAGER_H

#include <stdbool.h>
#include <stddef.h>

#include "profile/aggregate.h"

struct manager_opts {
	const char *socket_path;
	unsigned frequency_hz;
	bool fixed_period; /* every tick of a 1/frequency timer samples */
	size_t ringbuf_bytes;
	struct aggregator_limits limits;
	uint32_t unwind_rows;     /* 0: frame pointers only */
	uint32_t unwind_mappings;
	const char *kallsyms_path;
	const char *kernel_notes_path; /* the kernel's build-id; NULL: none */
	const char *debug_dir; /* NULL: /usr/lib/debug */
	size_t symbol_cache_bytes; /* 0: the symbolizer's default */
	bool demangle;
	bool python; /* walk Python frames */
	uint64_t memory_sample_bytes; /* mean growth per memory sample; 0: off */
};

struct manager;

/* Sets everything up (BPF attached, socket listening); logs what failed.
 * Returns 0 or -errno. */
int manager_new(const struct manager_opts *opts, struct manager **ret);
/* Runs until SIGTERM/SIGINT.  Returns 0 or -errno. */
int manager_run(struct manager *m);
struct manager *manager_free(struct manager *m);

#endif
