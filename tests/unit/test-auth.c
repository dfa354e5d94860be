/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/api/auth.c: who sees what.
 *
 * The rule is tested on synthetic peers; the credentials on real sockets:
 * a socketpair for our own, and for other users a child that drops to them
 * and connect()s to a listening socket of ours, the way perfctl reaches the
 * daemon.  Those need root (to become someone else) and are skipped, saying
 * so, without it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "api/auth.h"

#define NOBODY 65534u
#define NO_SUCH_GROUP "perfd-test-no-such-group"

/* --- the rule ------------------------------------------------------- */

Test(auth, privileged_peer_sees_every_process)
{
	struct perfd_peer root = { .uid = 0, .privileged = true };
	struct perfd_peer member = { .uid = 1000, .gid = 1000, .privileged = true };

	cr_assert(auth_may_see(&root, 0));
	cr_assert(auth_may_see(&root, 1000));
	cr_assert(auth_may_see(&root, PERFD_OWNER_NONE), "setuid processes are for the privileged");
	cr_assert(auth_may_see(&member, 0));
	cr_assert(auth_may_see(&member, 1001));
	cr_assert(auth_may_see(&member, PERFD_OWNER_NONE));
}

Test(auth, other_peers_see_only_their_own_uid)
{
	struct perfd_peer user = { .uid = 1000, .gid = 1000 };
	struct perfd_peer nonroot_uid0_gid = { .uid = 1000, .gid = 0 };

	cr_assert(auth_may_see(&user, 1000));
	cr_assert(!auth_may_see(&user, 0), "a user sees root's processes");
	cr_assert(!auth_may_see(&user, 1001), "a user sees another user's processes");
	cr_assert(!auth_may_see(&user, PERFD_OWNER_NONE), "a user sees a setuid process");
	/* the gid alone grants nothing: privilege was decided at accept */
	cr_assert(!auth_may_see(&nonroot_uid0_gid, 0));
}

Test(auth, a_peer_of_uid_none_sees_no_setuid_process)
{
	/* what a client whose credentials could not be read is set to */
	struct perfd_peer nobody = { .uid = PERFD_OWNER_NONE, .gid = PERFD_OWNER_NONE };

	cr_assert(!auth_may_see(&nobody, PERFD_OWNER_NONE));
	cr_assert(!auth_may_see(&nobody, 0));
}

/* --- CAP_SYSLOG from /proc/PID/status -------------------------------- */

/* CAP_SYSLOG is bit 34 of "CapEff:", in hex; a status without a well
 * formed line is an error and writes nothing. */
static int parse_cap(const char *text, bool *ret)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int r;

	cr_assert_not_null(f);
	r = auth_parse_cap_syslog(f, ret);
	fclose(f);
	return r;
}

Test(auth, cap_syslog_from_the_effective_set)
{
	bool cap = true;

	cr_assert_eq(parse_cap("Name:\tx\nCapInh:\t0000000400000000\n"
			       "CapEff:\t0000000000000000\n", &cap), 0);
	cr_assert(!cap, "only the effective set counts");
	cr_assert_eq(parse_cap("CapEff:\t000001ffffffffff\n", &cap), 0);
	cr_assert(cap);
	cr_assert_eq(parse_cap("CapEff:\t0000000400000000\n", &cap), 0);
	cr_assert(cap);
	cr_assert_eq(parse_cap("CapEff:\t0000000200000000\n", &cap), 0);
	cr_assert(!cap, "bit 33 is CAP_MAC_ADMIN");
	cap = true;
	cr_assert_eq(parse_cap("CapEff:\tzz\n", &cap), -EINVAL);
	cr_assert_eq(parse_cap("CapEff:\t12g\n", &cap), -EINVAL);
	cr_assert_eq(parse_cap("Name:\tx\n", &cap), -EINVAL);
	cr_assert(cap, "written on an error");
}

static pid_t dead_pid(void)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	return pid;
}

Test(auth, owner_of_live_processes)
{
	uid_t ruid, euid, suid;
	uint32_t owner;

	cr_assert_eq(getresuid(&ruid, &euid, &suid), 0);
	cr_assert_eq(auth_read_owner_uid(getpid(), &owner), 0);
	cr_assert_eq(owner, ruid == euid && ruid == suid ? ruid : PERFD_OWNER_NONE);
	/* kthreadd, the parent of every kernel thread */
	cr_assert_eq(auth_read_owner_uid(2, &owner), 0);
	cr_assert_eq(owner, 0);
	cr_assert_eq(auth_read_owner_uid(dead_pid(), &owner), -ESRCH);
	cr_assert_eq(auth_read_owner_uid(0, &owner), -ESRCH);
}

/* --- credentials of real connections ---------------------------------- */

Test(auth, group_lookup_by_name)
{
	gid_t gid = 42;

	cr_assert_eq(auth_group_gid("root", &gid), 0);
	cr_assert_eq(gid, 0);
	gid = 42;
	cr_assert_eq(auth_group_gid(NO_SUCH_GROUP, &gid), -ENOENT);
	cr_assert_eq(gid, 42);
}

static bool in_group(const char *name)
{
	gid_t gid, groups[4096];
	int n = getgroups(ELEMENTSOF(groups), groups);

	if (auth_group_gid(name, &gid) < 0)
		return false;
	if (getegid() == gid)
		return true;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

Test(auth, socketpair_peer_is_ourselves)
{
	int sv[2];
	struct perfd_peer peer;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(auth_peer_from_socket(sv[0], &peer), 0);
	cr_assert_eq(peer.uid, geteuid());
	cr_assert_eq(peer.gid, getegid());
	cr_assert_eq(peer.pid, (uint32_t)getpid());
	cr_assert_eq(peer.privileged, geteuid() == 0 || in_group(AUTH_PRIVILEGED_GROUP));
	if (geteuid() == 0)
		cr_assert(peer.privileged, "root is not privileged");
	close(sv[0]);
	close(sv[1]);
}

Test(auth, not_a_socket_is_an_error)
{
	struct perfd_peer peer = { .uid = 42 };
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(auth_peer_from_socket(fd, &peer), -ENOTSOCK);
	cr_assert_eq(peer.uid, 42, "a failure wrote the output");
	close(fd);
}

struct creds {
	uid_t ruid, euid, suid;
	gid_t gid;
	size_t n_groups;
	gid_t groups[300];
};

static void require_root(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to connect as another user");
}

/* A child becomes cr and connects to us; we accept.  The child stays,
 * blocked on the connection, until the caller closes it.  Returns the
 * accepted descriptor; *ret_child is the child's pid. */
static int accept_from(const struct creds *cr, pid_t *ret_child)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len = sizeof(sa_family_t);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), cfd;
	struct pollfd pfd;
	pid_t child;

	cr_assert_geq(lfd, 0);
	/* autobind: a fresh abstract name, no file permissions involved */
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, len), 0, "bind: %s", strerror(errno));
	len = sizeof(sa);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	cr_assert_eq(listen(lfd, 1), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		int fd;
		char byte;

		if (setgroups(cr->n_groups, cr->groups) < 0 ||
		    setresgid(cr->gid, cr->gid, cr->gid) < 0 ||
		    setresuid(cr->ruid, cr->euid, cr->suid) < 0 ||
		    /* the uid change made it non-dumpable, which ptrace's rule
		     * (auth.h) hides from its own uid: a process that dropped
		     * privileges for good says it may be traced again */
		    prctl(PR_SET_DUMPABLE, 1) < 0)
			_exit(10);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, len) < 0)
			_exit(11);
		while (read(fd, &byte, 1) > 0)
			;
		_exit(0);
	}
	pfd = (struct pollfd){ .fd = lfd, .events = POLLIN };
	if (poll(&pfd, 1, 10000) != 1) {
		int status = 0;

		(void)kill(child, SIGKILL);
		(void)waitpid(child, &status, 0);
		cr_assert_fail("the child did not connect (status %d)", status);
	}
	cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	cr_assert_geq(cfd, 0);
	close(lfd);
	*ret_child = child;
	return cfd;
}

/* Closes the connection and checks that the child then exited 0. */
static void release(int cfd, pid_t child)
{
	int status;

	close(cfd);
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

static struct perfd_peer peer_of(const struct creds *cr, const char *group, pid_t *ret_child,
				 int *ret_fd)
{
	struct perfd_peer peer;
	int fd = accept_from(cr, ret_child);

	cr_assert_eq(auth_peer_from_socket_group(fd, group, &peer), 0);
	*ret_fd = fd;
	return peer;
}

Test(auth, another_user_is_not_privileged)
{
	struct creds cr = { NOBODY, NOBODY, NOBODY, NOBODY, 0, { 0 } };
	struct perfd_peer peer;
	pid_t child;
	int fd;

	require_root();
	fd = accept_from(&cr, &child);
	cr_assert_eq(auth_peer_from_socket(fd, &peer), 0);
	cr_assert_eq(peer.uid, NOBODY);
	cr_assert_eq(peer.gid, NOBODY);
	cr_assert_eq(peer.pid, (uint32_t)child);
	cr_assert(!peer.privileged, "uid %u is privileged", peer.uid);
	/* and it sees its own process, not ours */
	cr_assert(auth_may_see_pid(&peer, child));
	cr_assert(!auth_may_see_pid(&peer, getpid()), "nobody sees root's process");
	cr_assert(!auth_may_see_pid(&peer, 2), "nobody sees a kernel thread");
	cr_assert(!auth_may_see_pid(&peer, dead_pid()));
	release(fd, child);
}

Test(auth, the_group_makes_a_user_privileged)
{
	/* "root" (gid 0) stands in for perfd's group, which need not exist */
	struct creds supplementary = { NOBODY, NOBODY, NOBODY, NOBODY, 2, { 100, 0 } };
	struct creds primary = { NOBODY, NOBODY, NOBODY, 0, 0, { 0 } };
	struct creds neither = { NOBODY, NOBODY, NOBODY, NOBODY, 1, { 100 } };
	struct perfd_peer peer;
	pid_t child;
	int fd;

	require_root();
	peer = peer_of(&supplementary, "root", &child, &fd);
	cr_assert(peer.privileged, "a supplementary group does not count");
	cr_assert(auth_may_see_pid(&peer, getpid()));
	release(fd, child);

	peer = peer_of(&primary, "root", &child, &fd);
	cr_assert(peer.privileged, "the primary group does not count");
	release(fd, child);

	peer = peer_of(&neither, "root", &child, &fd);
	cr_assert(!peer.privileged, "privileged without the group");
	release(fd, child);

	/* no such group, or none asked for: only root */
	peer = peer_of(&supplementary, NO_SUCH_GROUP, &child, &fd);
	cr_assert(!peer.privileged, "privileged by a group that does not exist");
	release(fd, child);
	peer = peer_of(&supplementary, NULL, &child, &fd);
	cr_assert(!peer.privileged);
	release(fd, child);
}

Test(auth, peer_groups_beyond_the_first_guess)
{
	struct creds cr = { NOBODY, NOBODY, NOBODY, NOBODY, 300, { 0 } };
	_cleanup_free_ gid_t *groups = NULL;
	size_t n = 0;
	pid_t child;
	int fd;

	require_root();
	for (size_t i = 0; i < cr.n_groups; i++)
		cr.groups[i] = 20000 + i; /* need not exist: credentials are numbers */
	fd = accept_from(&cr, &child);
	cr_assert_eq(auth_peer_groups(fd, &groups, &n), 0);
	cr_assert_eq(n, cr.n_groups);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(groups[i], cr.groups[i]);
	release(fd, child);

	cr.n_groups = 0;
	free(TAKE_PTR(groups));
	fd = accept_from(&cr, &child);
	cr_assert_eq(auth_peer_groups(fd, &groups, &n), 0);
	cr_assert_eq(n, 0);
	release(fd, child);
}

Test(auth, a_setuid_process_is_seen_only_by_the_privileged)
{
	/* real uid nobody, effective and saved root: a setuid-root program */
	struct creds cr = { NOBODY, 0, 0, NOBODY, 0, { 0 } };
	struct perfd_peer user = { .uid = NOBODY, .gid = NOBODY };
	struct perfd_peer root = { .uid = 0, .privileged = true };
	uint32_t owner;
	pid_t child;
	int fd;

	require_root();
	fd = accept_from(&cr, &child);
	cr_assert_eq(auth_read_owner_uid(child, &owner), 0);
	cr_assert_eq(owner, PERFD_OWNER_NONE);
	cr_assert(!auth_may_see_pid(&user, child), "the real uid sees its setuid process");
	cr_assert(auth_may_see_pid(&root, child));
	release(fd, child);
}
