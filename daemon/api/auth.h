/* SPDX-License-Identifier: MIT */
/*
 * auth.h - who sees what: the authorization of every request.
 *
 * The rule: a peer that is privileged (root, or a process whose groups hold
 * AUTH_PRIVILEGED_GROUP) sees every process; any other peer sees only the
 * processes whose owner_uid is its uid.  What a peer may not see is absent,
 * not forbidden: it is left out of ps, of snapshots and of history, and a
 * request naming it by pid gets exactly the answer a pid without a process
 * gets, so no answer tells that it exists.
 *
 * Why peer credentials and not the socket's file mode: a mode decides only
 * who may connect, all or nothing, but every local user should profile its
 * own processes.  So the socket is world-connectable (0666) and the answer
 * depends on who asks: the kernel records the connecting process's
 * credentials on the socket at connect() (SO_PEERCRED, SO_PEERGROUPS), where
 * nothing the client writes can change them, and a descriptor passed on to
 * another process keeps the credentials of the one that connected.  The
 * group is looked up by name at each accept, so editing /etc/group needs no
 * restart; membership counts as the connecting process's credentials carry
 * it, as for file access (a new login picks up a new group).  When the group
 * does not exist, or cannot be looked up, only root is privileged.
 *
 * The setuid rule: a process's owner_uid is its real uid only when its real,
 * effective and saved uids agree; one whose uids differ (a setuid program, a
 * daemon between privilege changes) has owner_uid PERFD_OWNER_NONE and is
 * seen by privileged peers only.  That is ptrace's rule: a process may trace
 * another of its own uid only when all of the target's uids are that uid, so
 * a user cannot read the stacks of a setuid-root program it started.
 * ptrace also refuses a process that is not dumpable (prctl(PR_SET_DUMPABLE,
 * 0), or one whose uids changed, unless it made itself dumpable again): its
 * owner_uid is PERFD_OWNER_NONE too.
 *
 * Ownership is a property of each moment, not of the process: it changes
 * at setresuid(), prctl() and exec.  So the BPF side reads the owner with
 * every sample (struct perfd_sample's owner_uid), the history keeps it per
 * window (profile/history.h; a window of two owners is root's), and a
 * query gives a peer only the windows, and a snapshot only the samples,
 * recorded under an owner auth_may_see() lets it see: history recorded
 * while a process had another uid, or was not dumpable, is not shown to a
 * user who could not have ptraced it then.  Whether the process itself is
 * listed follows its newest owner.
 *
 * Kernel addresses (KASLR) follow the kernel's rule for /proc/kallsyms
 * instead (ksyms_addresses_shown(), symbols/ksyms.h): the group does not
 * grant them, only CAP_SYSLOG does, which perfd grants to a peer of uid 0
 * whose effective capabilities hold CAP_SYSLOG when it is accepted (a root
 * in a container that dropped it sees no more than its /proc/kallsyms).
 * kptr_restrict and perf_event_paranoid are read at each answer.
 */
#ifndef PERFD_AUTH_H
#define PERFD_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "perfd/sample.h"

#define AUTH_PRIVILEGED_GROUP "perfd"


/* Who is on the other end of a connection, as the kernel recorded it at
 * connect(): effective uid and gid, and pid in perfd's pid namespace. */
struct perfd_peer {
	uint32_t uid, gid, pid;
	bool privileged;
	bool cap_syslog; /* uid 0 with CAP_SYSLOG effective: may see kernel
			  * addresses when kptr_restrict is 0 or 1 */
};

/* Reads the credentials of the process connected to the Unix socket fd and
 * decides whether it is privileged (uid 0, or gid or one of its
 * supplementary groups is AUTH_PRIVILEGED_GROUP's gid, looked up now).
 * Returns 0 or -errno; *ret is written only on success. */
int auth_peer_from_socket(int fd, struct perfd_peer *ret);
/* The same with another group's name (tests; NULL: root only). */
int auth_peer_from_socket_group(int fd, const char *group, struct perfd_peer *ret);

/* The supplementary groups of fd's peer, as SO_PEERGROUPS gives them: a
 * malloc'ed array of *ret_n gids (possibly none).  Returns 0 or -errno. */
int auth_peer_groups(int fd, gid_t **ret, size_t *ret_n);

/* The gid of the group called name.  Returns 0, -ENOENT when there is none,
 * or another -errno when it cannot be looked up. */
int auth_group_gid(const char *name, gid_t *ret);

/* Whether the "CapEff:" line of a /proc/PID/status text holds CAP_SYSLOG.
 * Returns 0, or -EINVAL when there is no well formed line. */
int auth_parse_cap_syslog(FILE *status, bool *ret);

/* Whether peer may see kernel addresses now (kptr_restrict and
 * perf_event_paranoid as they are, peer->cap_syslog). */
bool auth_may_see_kernel_addresses(const struct perfd_peer *peer);

/* Whether peer may see a process whose owner_uid is owner_uid.  A process
 * owned by PERFD_OWNER_NONE is seen only by privileged peers. */
bool auth_may_see(const struct perfd_peer *peer, uint32_t owner_uid);

/* The owner_uid of the process pid, read from /proc/PID/status now
 * (procfs_owner_uid(): PERFD_OWNER_NONE for differing uids or a process
 * that is not dumpable).  Returns 0, -ESRCH when there is no such process,
 * or another -errno. */
int auth_read_owner_uid(uint32_t pid, uint32_t *ret);

/* Whether peer may see the live process pid: true for a privileged peer
 * (whether the pid exists is then the caller's question), else whether the
 * process exists and its owner_uid, read from /proc now, is the peer's uid.
 * The caller answers false exactly as it answers a pid without a process. */
bool auth_may_see_pid(const struct perfd_peer *peer, uint32_t pid);

#endif
