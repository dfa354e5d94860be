/* SPDX-License-Identifier: MIT */
/*
 * container.h - a process's container id, from its cgroup v2 path.
 *
 * Container runtimes name a container's cgroup after its id, a 64-digit
 * hex string: docker-ID.scope (Docker under systemd), /docker/ID
 * (cgroupfs), cri-containerd-ID.scope, crio-ID.scope, libpod-ID.scope
 * (Podman), kubepods' pods holding those.  The id is the innermost path
 * component holding a run of exactly 64 hex digits; a path without one is
 * no container (a systemd service, a user session).  Nothing is read: the
 * path is the one perfd already keeps for each process.
 */
#ifndef PERFD_EXPORT_CONTAINER_H
#define PERFD_EXPORT_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>

#define CONTAINER_ID_LEN 64

/* The container id in cgroup into buf (at least CONTAINER_ID_LEN + 1
 * bytes); false, buf untouched, when there is none. */
bool container_id_from_cgroup(const char *cgroup, char *buf, size_t len);

#endif
