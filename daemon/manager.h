/* SPDX-License-Identifier: MIT */
/*
 * manager.h - the daemon: one sd-event loop owning the sampler, the drain
 * thread, the store, the symbolizer and the socket server; it sets them up,
 * runs the loop and tears them down.  Requests go to api/command.c's table.
 *
 * The path of one sample: bpf/perfd.bpf.c -> ring buffer -> collect/drain.c
 * (its own thread, on the ring's wake-ups or every second) -> queue ->
 * profile/ingest.c on the loop (interned, added to the process's time
 * windows and to running snapshots) -> a request arrives at api/server.c
 * -> api/command.c runs its command (api/cmd_*.c) -> profile/model.c
 * resolves the profile (symbols/, interp/python) -> encode/ writes it ->
 * api/server.c sends it -> perfctl.
 *
 * Every interval, export/exporter.c takes each process's profiles of the
 * interval from the store, encodes them on the loop and hands them to the
 * exporters' threads (files, Pyroscope), so neither a slow disk nor a dead
 * backend holds the loop or the drain thread.
 */
#ifndef PERFD_MANAGER_H
#define PERFD_MANAGER_H

#include <stdbool.h>
#include <stddef.h>

#include "profile/aggregate.h"

struct manager;

struct config;
struct config_args;
struct sampler_opts;

/* The sampler's options for cfg, as the daemon loads it (and as perfd
 * --check does, check.h); ctx is left for the caller. */
void manager_sampler_opts(const struct config *cfg, struct sampler_opts *ret);

/* Sets everything up (BPF attached, socket listening) as cfg says, taking
 * cfg (freed, even on failure); logs what failed.  args stays the
 * caller's, alive until manager_free(): a SIGHUP loads the configuration
 * again from them (config.h).  Returns 0 or -errno. */
int manager_new(struct config *cfg, const struct config_args *args, struct manager **ret);
/* Runs until SIGTERM/SIGINT; SIGHUP reloads the configuration.  Returns 0
 * or -errno. */
int manager_run(struct manager *m);
struct manager *manager_free(struct manager *m);

#endif
