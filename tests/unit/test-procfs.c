/* SPDX-License-Identifier: MIT */
/*
 * test-procfs.c - unit tests for daemon/process/procfs.c: what a hostile
 * process could put where the daemon looks, opened through this test's own
 * /proc/self/root (a process root like any other) or a scratch directory
 * as the root, and the /proc/PID readers against this process, a child
 * and a child that has exited.
 *
 * "Refused without blocking" is proved, not timed: a writer blocked in
 * opening a FIFO would be released by any reader, so it still being blocked
 * after the daemon's attempt shows the FIFO was never opened.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "perfd/macro.h"
#include "perfd/sample.h"
#include "process/procfs.h"
#include "process/procmaps.h"

FIXTURE_SUITE(procfs, 30);

/* This process's root, as the daemon opens a process's root. */
static int own_root(void)
{
	_cleanup_close_ int dirfd = -1;
	int rootfd;

	cr_assert_eq(procfs_open_pid(getpid(), PROCFS_START_ANY, &dirfd), 0);
	rootfd = procfs_open_root(dirfd);
	cr_assert_geq(rootfd, 0, "procfs_open_root: %s", strerror(-rootfd));
	return rootfd;
}

static void write_bytes(const char *path, size_t size)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	for (size_t i = 0; i < size; i++)
		cr_assert_eq(write(fd, "x", 1), 1);
}

/* Opens path under own root with rules; closes what it got.  Returns
 * 0 or the -errno. */
static int try_open(const char *path, const struct procfs_file_rules *rules)
{
	_cleanup_close_ int rootfd = own_root();
	int fd = procfs_open_in_root(rootfd, path, rules);

	if (fd < 0)
		return fd;
	(void)close(fd);
	return 0;
}

static atomic_int writer_state; /* 1 while blocked in open, 2 once it returned */

static void *fifo_writer(void *path)
{
	int fd;

	atomic_store(&writer_state, 1);
	fd = open(path, O_WRONLY | O_CLOEXEC); /* returns once a reader opens */
	atomic_store(&writer_state, 2);
	if (fd >= 0)
		(void)close(fd);
	return NULL;
}

Test(procfs, fifo_is_refused_and_never_opened)
{
	const struct timespec settle = { 0, 100 * 1000 * 1000 };
	char path[PATH_MAX];
	pthread_t writer;
	int fd;

	path_in_workdir(path, sizeof(path), "perf-1.map");
	cr_assert_eq(mkfifo(path, 0644), 0);
	cr_assert_eq(pthread_create(&writer, NULL, fifo_writer, path), 0);
	(void)nanosleep(&settle, NULL);
	cr_assert_eq(atomic_load(&writer_state), 1);

	cr_expect_eq(try_open(path, NULL), -EPERM);
	cr_expect_eq(try_open(path, &(struct procfs_file_rules){ .follow_symlinks = true }),
		     -EPERM);

	(void)nanosleep(&settle, NULL);
	cr_expect_eq(atomic_load(&writer_state), 1, "the FIFO was opened for reading");
	/* release the writer */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pthread_join(writer, NULL), 0);
	(void)close(fd);
}

Test(procfs, symlinks_are_refused_unless_allowed_and_stay_inside_the_root)
{
	const struct procfs_file_rules follow = { .follow_symlinks = true };
	char target[PATH_MAX], link[PATH_MAX], escape[PATH_MAX];
	_cleanup_close_ int rootfd = -1;
	int fd;

	path_in_workdir(target, sizeof(target), "target");
	path_in_workdir(link, sizeof(link), "link");
	path_in_workdir(escape, sizeof(escape), "escape");
	write_bytes(target, 10);
	cr_assert_eq(symlink(target, link), 0);
	cr_expect_eq(try_open(link, NULL), -ELOOP);
	cr_expect_eq(try_open(link, &follow), 0);

	/* A directory symlink in the middle of the path counts too. */
	path_in_workdir(link, sizeof(link), "dirlink");
	cr_assert_eq(symlink(workdir, link), 0);
	cr_assert(strlen(link) + sizeof("/target") < sizeof(link));
	strcat(link, "/target");
	cr_expect_eq(try_open(link, NULL), -ELOOP);
	cr_expect_eq(try_open(link, &follow), 0);

	/* With the scratch directory as the root, an absolute link means
	 * its own /etc, which does not exist: never the host's. */
	cr_assert_eq(symlink("/etc/passwd", escape), 0);
	rootfd = open(workdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(rootfd, 0);
	cr_expect_eq(procfs_open_in_root(rootfd, "/escape", &follow), -ENOENT);
	cr_expect_eq(procfs_open_in_root(rootfd, "/../../../../etc/passwd", &follow), -ENOENT);
	fd = procfs_open_in_root(rootfd, "/target", NULL);
	cr_expect_geq(fd, 0, "in-root file: %s", strerror(-fd));
	if (fd >= 0)
		(void)close(fd);
}

Test(procfs, magic_links_are_refused)
{
	const struct procfs_file_rules follow = { .follow_symlinks = true };

	cr_expect_eq(try_open("/proc/self/exe", &follow), -ELOOP);
	cr_expect_eq(try_open("/proc/self/root/etc/passwd", &follow), -ELOOP);
}

Test(procfs, directories_and_devices_are_refused)
{
	cr_expect_eq(try_open(workdir, NULL), -EPERM);
	cr_expect_eq(try_open("/dev/null", NULL), -EPERM);
	cr_expect_eq(try_open("/dev/zero", NULL), -EPERM);
}

Test(procfs, size_cap)
{
	char path[PATH_MAX];

	path_in_workdir(path, sizeof(path), "hundred");
	write_bytes(path, 100);
	cr_expect_eq(try_open(path, &(struct procfs_file_rules){ .max_size = 99 }), -EFBIG);
	cr_expect_eq(try_open(path, &(struct procfs_file_rules){ .max_size = 100 }), 0);
	cr_expect_eq(try_open(path, &(struct procfs_file_rules){ .max_size = 0 }), 0);
}

Test(procfs, owner_rule_accepts_the_owner_and_root_only)
{
	struct procfs_file_rules rules = { .check_owner = true };
	uid_t owner = geteuid() == 0 ? 65534 : geteuid();
	char path[PATH_MAX];

	path_in_workdir(path, sizeof(path), "owned");
	write_bytes(path, 10);
	if (geteuid() == 0)
		cr_assert_eq(chown(path, owner, owner), 0);
	rules.owner_uid = owner;
	cr_expect_eq(try_open(path, &rules), 0);
	rules.owner_uid = owner + 1;
	cr_expect_eq(try_open(path, &rules), -EPERM);
	rules.owner_uid = UINT32_MAX; /* nobody in particular: root only */
	cr_expect_eq(try_open(path, &rules), -EPERM);
	/* a root-owned file satisfies any owner */
	cr_expect_eq(try_open("/etc/passwd", &rules), 0);
	rules.owner_uid = owner + 1;
	cr_expect_eq(try_open("/etc/passwd", &rules), 0);
}

Test(procfs, hard_links_are_refused_when_asked)
{
	struct procfs_file_rules rules = { .single_link = true };
	char path[PATH_MAX], other[PATH_MAX];

	path_in_workdir(path, sizeof(path), "one");
	path_in_workdir(other, sizeof(other), "two");
	write_bytes(path, 10);
	cr_expect_eq(try_open(path, &rules), 0);
	cr_assert_eq(link(path, other), 0);
	cr_expect_eq(try_open(path, &rules), -EPERM);
	cr_expect_eq(try_open(path, NULL), 0);
}

Test(procfs, a_lease_cannot_make_the_open_wait)
{
	char path[PATH_MAX];
	_cleanup_close_ int holder = -1;
	struct timespec t0, t1;
	int r;

	/* Breaking the lease signals its holder, this process. */
	(void)signal(SIGIO, SIG_IGN);
	path_in_workdir(path, sizeof(path), "leased");
	write_bytes(path, 10);
	holder = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(holder, 0);
	if (fcntl(holder, F_SETLEASE, F_WRLCK) < 0)
		cr_skip_test("no write lease on %s: %s", workdir, strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = try_open(path, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_expect_eq(r, -EWOULDBLOCK, "open under a lease: %s", strerror(-r));
	/* without O_NONBLOCK it would wait lease-break-time (45 s) */
	cr_expect_lt(t1.tv_sec - t0.tv_sec, 2);
	(void)fcntl(holder, F_SETLEASE, F_UNLCK);
}

Test(procfs, checks_a_kept_descriptor_again)
{
	struct procfs_file_rules rules = { .max_size = 100 };
	_cleanup_close_ int rootfd = own_root(), fd = -1;
	char path[PATH_MAX];

	path_in_workdir(path, sizeof(path), "growing");
	write_bytes(path, 50);
	fd = procfs_open_in_root(rootfd, path, &rules);
	cr_assert_geq(fd, 0);
	cr_expect_eq(procfs_check_fd(fd, &rules), 0);
	cr_assert_eq(truncate(path, 101), 0);
	cr_expect_eq(procfs_check_fd(fd, &rules), -EFBIG);
	/* the descriptor is a plain blocking one */
	cr_expect_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
}

Test(procfs, kernel_links_are_followed_to_regular_files_only)
{
	struct procmaps *maps = NULL;
	const struct procmap *exe = NULL;
	char link[128];
	int fd;

	/* map_files: how a deleted binary is opened */
	cr_assert_eq(procmaps_read_pid(getpid(), true, &maps), 0);
	for (size_t i = 0; i < maps->n && !exe; i++)
		if (maps->maps[i].path[0] == '/')
			exe = &maps->maps[i];
	cr_assert_not_null(exe);
	snprintf(link, sizeof(link), "/proc/self/map_files/%lx-%lx", (unsigned long)exe->start,
		 (unsigned long)exe->end);
	fd = procfs_open_link(AT_FDCWD, link, NULL);
	cr_expect_geq(fd, 0, "%s: %s", link, strerror(-fd));
	if (fd >= 0)
		(void)close(fd);
	procmaps_free(maps);
	/* a link to something that is not a regular file */
	cr_expect_eq(procfs_open_link(AT_FDCWD, "/proc/self/cwd", NULL), -EPERM);
}

static uint64_t ns_per_tick(void)
{
	return 1000000000ULL / (uint64_t)sysconf(_SC_CLK_TCK);
}

Test(procfs, start_time_must_match)
{
	_cleanup_close_ int dirfd = -1;
	uint64_t ticks, start_ns;
	int fd = -1;

	cr_assert_eq(procfs_open_pid(getpid(), PROCFS_START_ANY, &dirfd), 0);
	cr_assert_eq(procfs_start_ticks(dirfd, &ticks), 0);
	start_ns = ticks * ns_per_tick() + 12345; /* BPF's ns, within the tick */
	cr_expect_eq(procfs_ticks_of(start_ns), ticks);

	cr_expect_eq(procfs_open_pid(getpid(), start_ns, &fd), 0);
	closep(&fd);
	fd = -1;
	cr_expect_eq(procfs_open_pid(getpid(), start_ns + ns_per_tick(), &fd), -ESRCH);
	cr_expect_eq(fd, -1, "ret_dirfd written on failure");
	cr_expect_eq(procfs_open_pid(getpid(), start_ns - ns_per_tick(), &fd), -ESRCH);
	cr_expect_eq(procfs_open_pid(0, PROCFS_START_ANY, &fd), -EINVAL);
	cr_expect_eq(procfs_open_pid(-5, PROCFS_START_ANY, &fd), -EINVAL);
	cr_expect_eq(procmaps_read_process(getpid(), start_ns + ns_per_tick(), true,
					   &(struct procmaps *){ NULL }),
		     -ESRCH);
}

Test(procfs, reads_this_process)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ char *cgroup = NULL, *line = NULL;
	struct procfs_status st;
	char comm[16], want[16] = "";
	FILE *f;
	size_t cap = 0;

	cr_assert_eq(procfs_open_pid(getpid(), PROCFS_START_ANY, &dirfd), 0);
	cr_assert_eq(prctl(PR_SET_NAME, "procfs-test", 0, 0, 0), 0);
	cr_assert_eq(procfs_read_comm(dirfd, comm, sizeof(comm)), 0);
	cr_expect_str_eq(comm, "procfs-test");
	/* a short buffer gets what fits */
	cr_assert_eq(procfs_read_comm(dirfd, want, 5), 0);
	cr_expect_str_eq(want, "proc");

	cr_assert_eq(procfs_read_status(dirfd, &st), 0);
	cr_expect_eq(st.ns_pid, (uint32_t)getpid());
	cr_expect_eq(st.uid_real, getuid());
	cr_expect_eq(st.uid_effective, geteuid());

	f = fopen("/proc/self/cgroup", "re");
	cr_assert_not_null(f);
	while (getline(&line, &cap, f) > 0)
		if (strncmp(line, "0::", 3) == 0)
			break;
	fclose(f);
	cr_assert_eq(procfs_read_cgroup(dirfd, &cgroup), 0);
	line[strcspn(line, "\n")] = '\0';
	cr_expect_str_eq(cgroup, line + 3);
}

Test(procfs, read_is_capped)
{
	_cleanup_close_ int dirfd = -1;
	char buf[8];

	cr_assert_eq(procfs_open_pid(getpid(), PROCFS_START_ANY, &dirfd), 0);
	cr_expect_eq(procfs_read(dirfd, "status", buf, sizeof(buf)), 7);
	cr_expect_eq(strlen(buf), 7);
	cr_expect_eq(strncmp(buf, "Name:", 5), 0);
}

Test(procfs, a_child_that_exited_cannot_be_read_through_its_directory)
{
	_cleanup_close_ int dirfd = -1, other = -1;
	struct procfs_status st;
	struct procmaps *maps = NULL;
	char comm[16], *cgroup = NULL;
	uint64_t ticks;
	int status;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	cr_assert_eq(procfs_open_pid(pid, PROCFS_START_ANY, &dirfd), 0);
	cr_assert_eq(procfs_read_status(dirfd, &st), 0);
	cr_expect_eq(st.ns_pid, (uint32_t)pid);
	cr_assert_eq(procfs_start_ticks(dirfd, &ticks), 0);
	cr_assert_eq(procmaps_read_dirfd(dirfd, true, &maps), 0);
	procmaps_free(maps);
	maps = NULL;

	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);

	cr_expect_eq(procfs_read_status(dirfd, &st), -ESRCH);
	cr_expect_eq(procfs_read_comm(dirfd, comm, sizeof(comm)), -ESRCH);
	cr_expect_eq(procfs_read_cgroup(dirfd, &cgroup), -ESRCH);
	cr_expect_null(cgroup);
	cr_expect_eq(procfs_start_ticks(dirfd, &ticks), -ESRCH);
	cr_expect_eq(procmaps_read_dirfd(dirfd, true, &maps), -ESRCH);
	cr_expect_null(maps);
	cr_expect_eq(procfs_open_root(dirfd), -ESRCH);
	cr_expect_eq(procfs_open_pid(pid, PROCFS_START_ANY, &other), -ESRCH);
}

/* The unit of a cgroup is its innermost .service or .scope element, up to
 * the next '/'; a path without one has none. */
Test(procfs, cgroup_unit_is_the_innermost_service_or_scope)
{
	const char *u;

	u = procfs_cgroup_unit("/system.slice/nginx.service");
	cr_assert_str_eq(u, "nginx.service");
	u = procfs_cgroup_unit("/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope/sub");
	cr_assert_eq(strncmp(u, "run-r1.scope/", 13), 0, "%s", u);
	cr_assert_null(procfs_cgroup_unit("/"));
	cr_assert_null(procfs_cgroup_unit("/system.slice"));
	cr_assert_null(procfs_cgroup_unit("/a/.service"), "a bare suffix is no unit");
	cr_assert_null(procfs_cgroup_unit(""));
}

/* --- who owns a process: ptrace's rule --------------------------------- */

static uint32_t owner(uint32_t real, uint32_t effective, uint32_t saved, uint32_t file_uid)
{
	struct procfs_status st = { .uid_real = real, .uid_effective = effective, .uid_saved = saved };

	return procfs_owner_uid(&st, file_uid);
}

Test(procfs, owner_is_the_real_uid_when_all_agree_and_it_is_dumpable)
{
	cr_expect_eq(owner(1000, 1000, 1000, 1000), 1000);
	cr_expect_eq(owner(0, 0, 0, 0), 0);
	cr_expect_eq(owner(4294967294u, 4294967294u, 4294967294u, 4294967294u), 4294967294u);
}

Test(procfs, owner_is_none_when_uids_differ_or_it_is_not_dumpable)
{
	/* a setuid-root program started by 1000 */
	cr_expect_eq(owner(1000, 0, 0, 0), PERFD_OWNER_NONE);
	/* root that dropped its effective uid, keeping the saved one */
	cr_expect_eq(owner(0, 1000, 0, 1000), PERFD_OWNER_NONE);
	/* only the saved uid differs: it can still become that uid again */
	cr_expect_eq(owner(1000, 1000, 0, 1000), PERFD_OWNER_NONE);
	/* not dumpable: the kernel gives its /proc files to root */
	cr_expect_eq(owner(1000, 1000, 1000, 0), PERFD_OWNER_NONE);
}

Test(procfs, owner_of_this_process)
{
	struct procfs_status st;
	int dirfd = -1;

	cr_assert_eq(procfs_open_pid(getpid(), PROCFS_START_ANY, &dirfd), 0);
	cr_assert_eq(procfs_read_status(dirfd, &st), 0);
	cr_expect_eq(st.owner_uid, getuid() == geteuid() ? getuid() : PERFD_OWNER_NONE);
	close(dirfd);
}
