/* SPDX-License-Identifier: MIT */
/*
 * limits.h - what one client and one user may hold of perfd: every such
 * limit in one place, for the server and the commands that enforce them,
 * `status` that shows them and the README that documents them.
 *
 * The design: each shared resource (connections, live snapshots) has a
 * global cap, a share per uid, and a reserve that only root may take, so
 * that no user, by using up its share or everybody's, can keep root out.
 * Root is exempt from the per-uid shares.  A client's unsent answers are
 * capped too: past the cap the server stops reading its requests
 * (server.h, Bounds), so what a client that never reads costs is bounded
 * by the cap plus one answer.  These are constants; the one setting is how
 * long an idle client is kept (--client-idle-timeout, config.c).
 *
 * A live snapshot costs more than its slot: it collects the samples of
 * every process it selects for as long as it runs.  So a uid's live
 * snapshots together may also cover at most LIMITS_SNAPSHOT_PROCESS_SECONDS
 * process-seconds, each counted when it starts as the processes it selects
 * then (the pids it names, or the live processes the store has that match
 * and the uid may see; at least one) times its duration: ten processes for
 * an hour, or six hundred for a minute.  That is decided up front, with an
 * error that names the numbers; what a snapshot's selection gains while it
 * runs (a user spawning processes) is bounded by the store instead, which
 * counts what snapshots collect in --max-memory and gives a uid's
 * snapshots a share of it and of the process slots (profile/aggregate.h,
 * struct collector).
 */
#ifndef PERFD_LIMITS_H
#define PERFD_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#define LIMITS_MAX_CLIENTS 128
#define LIMITS_CLIENTS_PER_UID 16
#define LIMITS_CLIENTS_ROOT_RESERVE 8
#define LIMITS_MAX_SNAPSHOTS 32
#define LIMITS_SNAPSHOTS_PER_UID 8
#define LIMITS_SNAPSHOTS_ROOT_RESERVE 4
#define LIMITS_SNAPSHOT_PROCESS_SECONDS 36000
/* A client's unsent answers past which its requests are not read; reading
 * resumes below half of it. */
#define LIMITS_CLIENT_OUTPUT_BYTES (4u << 20)

/* Whether uid may take one more of a resource of which it holds held_by_uid
 * and everybody holds held.  Returns 0 when it may, -EUSERS when uid's
 * share per_uid is used up, -EBUSY when what is left is root's reserve (or
 * nothing is left). */
int limits_admit(uint32_t uid, size_t held_by_uid, size_t held, size_t total, size_t per_uid,
		 size_t root_reserve);

#endif
