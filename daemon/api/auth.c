/* SPDX-License-Identifier: MIT */
/* auth.c - see auth.h for the rule and why it is built on peer credentials. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "api/auth.h"
#include "process/procfs.h"
#include "symbols/ksyms.h"

#define AUTH_CAP_SYSLOG 34 /* linux/capability.h's CAP_SYSLOG */

/* SO_PEERGROUPS is sized at run time; this covers most users at once. */
#define AUTH_GROUPS_FIRST_GUESS 64
/* NSS answers for one group larger than this are refused, not chased. */
#define AUTH_GROUP_BUFFER_MAX (4u << 20)

int auth_peer_groups(int fd, gid_t **ret, size_t *ret_n)
{
	_cleanup_free_ gid_t *groups = NULL;
	socklen_t len = AUTH_GROUPS_FIRST_GUESS * sizeof(gid_t);

	/* The kernel answers ERANGE with the size it needs; the groups are
	 * those of connect() time and cannot grow, so two rounds suffice, but
	 * a changed answer is simply asked again. */
	for (;;) {
		gid_t *bigger = realloc(groups, MAX(len, (socklen_t)sizeof(gid_t)));
		socklen_t got = len;

		if (!bigger)
			return -ENOMEM;
		groups = bigger;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &got) == 0) {
			len = got;
			break;
		}
		if (errno != ERANGE)
			return negative_errno();
		if (got <= len)
			return -EIO; /* ERANGE without a larger size: do not spin */
		len = got;
	}
	*ret_n = len / sizeof(gid_t);
	*ret = TAKE_PTR(groups);
	return 0;
}

int auth_group_gid(const char *name, gid_t *ret)
{
	long hint = sysconf(_SC_GETGR_R_SIZE_MAX);
	size_t size = hint > 0 ? (size_t)hint : 1024;

	for (;;) {
		_cleanup_free_ char *buf = malloc(size);
		struct group gr, *found = NULL;
		int r;

		if (!buf)
			return -ENOMEM;
		r = getgrnam_r(name, &gr, buf, size, &found);
		if (r == 0) {
			if (!found)
				return -ENOENT;
			*ret = gr.gr_gid;
			return 0;
		}
		if (r != ERANGE)
			return -r;
		if (size >= AUTH_GROUP_BUFFER_MAX)
			return -ERANGE;
		size *= 2;
	}
}

/* Whether the process pid has CAP_SYSLOG effective now; false when that
 * cannot be read (fails closed).  The pid is SO_PEERCRED's, read at accept
 * while the client waits for its answers; 0 (a peer in a pid namespace
 * perfd cannot see) reads nothing. */
static bool peer_cap_syslog(uint32_t pid)
{
	char path[sizeof("/proc//status") + 10];
	_cleanup_fclose_ FILE *f = NULL;
	bool cap = false;

	if (pid == 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	return f && auth_parse_cap_syslog(f, &cap) == 0 && cap;
}

int auth_peer_from_socket_group(int fd, const char *group, struct perfd_peer *ret)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	_cleanup_free_ gid_t *groups = NULL;
	size_t n_groups = 0;
	gid_t privileged_gid;
	bool privileged;
	int r;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return negative_errno();
	if (len != sizeof(cred))
		return -EIO;
	privileged = cred.uid == 0;
	/* No group, or none we can look up now: root only (fails closed). */
	if (!privileged && group && auth_group_gid(group, &privileged_gid) == 0) {
		r = auth_peer_groups(fd, &groups, &n_groups);
		/* A kernel before 4.13 has no SO_PEERGROUPS: the primary gid
		 * still counts, the supplementary groups cannot. */
		if (r < 0 && r != -ENOPROTOOPT)
			return r;
		privileged = cred.gid == privileged_gid;
		for (size_t i = 0; i < n_groups && !privileged; i++)
			privileged = groups[i] == privileged_gid;
	}
	*ret = (struct perfd_peer){
		.uid = cred.uid,
		.gid = cred.gid,
		.pid = cred.pid,
		.privileged = privileged,
		.cap_syslog = cred.uid == 0 && peer_cap_syslog(cred.pid),
	};
	return 0;
}

int auth_peer_from_socket(int fd, struct perfd_peer *ret)
{
	return auth_peer_from_socket_group(fd, AUTH_PRIVILEGED_GROUP, ret);
}

bool auth_may_see(const struct perfd_peer *peer, uint32_t owner_uid)
{
	if (peer->privileged)
		return true;
	return owner_uid != PERFD_OWNER_NONE && owner_uid == peer->uid;
}

int auth_parse_cap_syslog(FILE *status, bool *ret)
{
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;

	while (getline(&line, &cap, status) >= 0) {
		unsigned long long v;
		char *end;

		if (strncmp(line, "CapEff:", 7) != 0)
			continue;
		errno = 0;
		v = strtoull(line + 7, &end, 16);
		if (errno || end == line + 7 || (*end != '\n' && *end))
			return -EINVAL;
		*ret = (v >> AUTH_CAP_SYSLOG) & 1;
		return 0;
	}
	return ferror(status) ? -EIO : -EINVAL;
}

bool auth_may_see_kernel_addresses(const struct perfd_peer *peer)
{
	return ksyms_addresses_shown_now(peer->cap_syslog);
}

int auth_read_owner_uid(uint32_t pid, uint32_t *ret)
{
	_cleanup_close_ int dirfd = -1;
	struct procfs_status st;
	int r;

	if (pid == 0 || pid > INT32_MAX)
		return -ESRCH;
	r = procfs_open_pid((pid_t)pid, PROCFS_START_ANY, &dirfd);
	if (r < 0)
		return r;
	r = procfs_read_status(dirfd, &st);
	if (r < 0)
		return r;
	*ret = st.owner_uid;
	return 0;
}

bool auth_may_see_pid(const struct perfd_peer *peer, uint32_t pid)
{
	uint32_t owner;

	if (peer->privileged)
		return true;
	return auth_read_owner_uid(pid, &owner) == 0 && auth_may_see(peer, owner);
}
