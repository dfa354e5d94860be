/* SPDX-License-Identifier: MIT */
/*
 * procfs.c - see procfs.h.
 *
 * The kernel's files are read whole into bounded buffers (comm 64 bytes,
 * stat 2 KiB, status and cgroup 64 KiB) and parsed by whole lines of bounded
 * length; what lies past a bound is not read.  A file a process names is
 * first an O_PATH descriptor, checked with fstat, then reopened for reading
 * through /proc/thread-self/fd/N, which reaches exactly that inode: there is
 * no window in which a rename could slip another file in.
 */
#include "process/procfs.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"
#include "perfd/macro.h"
#include "perfd/sample.h"

#define COMM_READ_MAX 64
/* stat is one line of 52 numbers after a comm of at most 64 bytes. */
#define STAT_READ_MAX 2048
/* status is about 1.5 KiB; only a huge "Groups:" line makes it long, and
 * it comes after Uid (NSpid, past it, is then lost: ns_pid is the pid). */
#define STATUS_READ_MAX (64 * 1024)
#define STATUS_LINE_MAX 1024
/* One line per cgroup v1 hierarchy and the v2 one, each path < PATH_MAX. */
#define CGROUP_READ_MAX (64 * 1024)
#define CGROUP_LINE_MAX (4096 + 16)

uint64_t procfs_ticks_of(uint64_t start_time_ns)
{
	long hz = sysconf(_SC_CLK_TCK);

	return start_time_ns / (NSEC_PER_SEC / (hz > 0 ? (uint64_t)hz : 100));
}

/* A lookup under the /proc/PID of a process that has exited fails with
 * ENOENT; say what it means. */
static int gone_if_absent(int r)
{
	return r == -ENOENT ? -ESRCH : r;
}

int procfs_open_file(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);

	return fd < 0 ? gone_if_absent(negative_errno()) : fd;
}

/* Reads at most size - 1 bytes of fd into buf, NUL-terminated: the
 * length, or -errno. */
static ssize_t read_whole(int fd, char *buf, size_t size)
{
	size_t n = 0;

	while (n < size - 1) {
		ssize_t got = read(fd, buf + n, size - 1 - n);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	buf[n] = '\0';
	return (ssize_t)n;
}

ssize_t procfs_read(int dirfd, const char *name, char *buf, size_t size)
{
	_cleanup_close_ int fd = -1;

	if (size == 0)
		return -EINVAL;
	fd = procfs_open_file(dirfd, name);
	if (fd < 0)
		return fd;
	return read_whole(fd, buf, size);
}

int procfs_start_ticks(int dirfd, uint64_t *ret_ticks)
{
	char buf[STAT_READ_MAX], *p, *end;
	unsigned long long v;
	ssize_t n;

	n = procfs_read(dirfd, "stat", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	/* comm (field 2) may hold anything, but nothing after its ')' */
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	/* p is at the end of field 2; each blank found starts the next one */
	for (int field = 2; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EIO;
	}
	p++;
	errno = 0;
	v = strtoull(p, &end, 10);
	if (errno || end == p || (*end != ' ' && *end != '\n' && *end != '\0'))
		return -EIO;
	*ret_ticks = v;
	return 0;
}

int procfs_open_pid(pid_t pid, uint64_t start_time_ns, int *ret_dirfd)
{
	_cleanup_close_ int fd = -1;
	char path[32];
	uint64_t ticks;
	int r;

	if (pid <= 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return gone_if_absent(negative_errno());
	if (start_time_ns != PROCFS_START_ANY) {
		r = procfs_start_ticks(fd, &ticks);
		if (r < 0)
			return r;
		if (ticks != procfs_ticks_of(start_time_ns))
			return -ESRCH; /* the pid is another process's now */
	}
	*ret_dirfd = TAKE_FD(fd);
	return 0;
}

int procfs_read_comm(int dirfd, char *buf, size_t size)
{
	char comm[COMM_READ_MAX];
	ssize_t n;

	if (size < 2)
		return -EINVAL;
	n = procfs_read(dirfd, "comm", comm, sizeof(comm));
	if (n < 0)
		return (int)n;
	while (n > 0 && comm[n - 1] == '\n')
		n--;
	if (n == 0)
		return -EIO;
	n = MIN((size_t)n, size - 1);
	memcpy(buf, comm, (size_t)n);
	buf[n] = '\0';
	return 0;
}

/* Calls fn for each whole line of text (its '\n' replaced by NUL) of at
 * most max_line bytes; a longer or unterminated one is skipped.  Stops when
 * fn returns nonzero and returns that, else 0. */
static int foreach_line(char *text, size_t max_line, int (*fn)(char *line, void *userdata),
			void *userdata)
{
	char *nl;

	for (char *line = text; (nl = strchr(line, '\n')); line = nl + 1) {
		int r;

		if ((size_t)(nl - line) > max_line)
			continue;
		*nl = '\0';
		r = fn(line, userdata);
		if (r)
			return r;
	}
	return 0;
}

/* Parses a blank-separated list of decimal uint32 after a "Name:" tag into
 * v[0..cap); returns how many, or -EINVAL for anything else on the line. */
static int parse_u32_list(const char *p, uint32_t *v, int cap)
{
	int n = 0;

	for (;;) {
		unsigned long x;
		char *end;

		while (*p == '\t' || *p == ' ')
			p++;
		if (*p == '\0')
			return n;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		x = strtoul(p, &end, 10);
		if (errno || x > UINT32_MAX || (*end != '\0' && *end != '\t' && *end != ' '))
			return -EINVAL;
		if (n < cap)
			v[n] = (uint32_t)x;
		n++;
		p = end;
	}
}

struct status_parse {
	struct procfs_status st;
	bool have_pid, have_nspid, have_uid;
};

static int status_line(char *line, void *userdata)
{
	struct status_parse *sp = userdata;
	uint32_t v[64];
	int n;

	if (strncmp(line, "Pid:", 4) == 0) {
		if (parse_u32_list(line + 4, v, 1) == 1) {
			if (!sp->have_nspid)
				sp->st.ns_pid = v[0];
			sp->have_pid = true;
		}
	} else if (strncmp(line, "PPid:", 5) == 0) {
		if (parse_u32_list(line + 5, v, 1) == 1)
			sp->st.ppid = v[0];
	} else if (strncmp(line, "NSpid:", 6) == 0) {
		/* one pid per namespace level, the innermost last (at most 32) */
		n = parse_u32_list(line + 6, v, (int)ELEMENTSOF(v));
		if (n > 0 && n <= (int)ELEMENTSOF(v)) {
			sp->st.ns_pid = v[n - 1];
			sp->have_nspid = true;
		}
	} else if (strncmp(line, "Uid:", 4) == 0) {
		/* real, effective, saved set, filesystem */
		if (parse_u32_list(line + 4, v, 4) == 4) {
			sp->st.uid_real = v[0];
			sp->st.uid_effective = v[1];
			sp->st.uid_saved = v[2];
			sp->have_uid = true;
		}
	}
	return 0;
}

uint32_t procfs_owner_uid(const struct procfs_status *st, uint32_t file_uid)
{
	if (st->uid_real != st->uid_effective || st->uid_real != st->uid_saved ||
	    file_uid != st->uid_real)
		return PERFD_OWNER_NONE;
	return st->uid_real;
}

int procfs_read_status(int dirfd, struct procfs_status *ret)
{
	_cleanup_free_ char *buf = malloc(STATUS_READ_MAX);
	_cleanup_close_ int fd = -1;
	struct status_parse sp = {};
	struct stat file;
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	/* read here rather than by procfs_read: the owner is the owner of the
	 * file that was read, not of one opened again */
	fd = procfs_open_file(dirfd, "status");
	if (fd < 0)
		return fd;
	n = read_whole(fd, buf, STATUS_READ_MAX);
	if (n < 0)
		return (int)n;
	if (fstat(fd, &file) < 0)
		return negative_errno();
	(void)foreach_line(buf, STATUS_LINE_MAX, status_line, &sp);
	if (!sp.have_pid || !sp.have_uid)
		return -EIO;
	sp.st.owner_uid = procfs_owner_uid(&sp.st, file.st_uid);
	*ret = sp.st;
	return 0;
}

static int cgroup_line(char *line, void *userdata)
{
	char **path = userdata;

	if (strncmp(line, "0::", 3) != 0)
		return 0;
	*path = strdup(line + 3);
	return *path ? 1 : -ENOMEM;
}

int procfs_read_cgroup(int dirfd, char **ret_path)
{
	_cleanup_free_ char *buf = malloc(CGROUP_READ_MAX);
	char *path = NULL;
	ssize_t n;
	int r;

	if (!buf)
		return -ENOMEM;
	n = procfs_read(dirfd, "cgroup", buf, CGROUP_READ_MAX);
	if (n < 0)
		return (int)n;
	r = foreach_line(buf, CGROUP_LINE_MAX, cgroup_line, &path);
	if (r < 0)
		return r;
	if (!path)
		return -ENOENT;
	*ret_path = path;
	return 0;
}

int procfs_open_root(int dirfd)
{
	int fd = openat(dirfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? gone_if_absent(negative_errno()) : fd;
}

/* fstat of fd into *st, and the verdict of rules (NULL: regular only). */
static int check_stat(int fd, const struct procfs_file_rules *rules, struct stat *st)
{
	if (fstat(fd, st) < 0)
		return negative_errno();
	if (!S_ISREG(st->st_mode))
		return -EPERM;
	if (!rules)
		return 0;
	if (rules->max_size && (uint64_t)st->st_size > rules->max_size)
		return -EFBIG;
	if (rules->check_owner && st->st_uid != 0 && st->st_uid != rules->owner_uid)
		return -EPERM;
	/* 0 links is a file deleted since it was opened: still its own */
	if (rules->single_link && st->st_nlink > 1)
		return -EPERM;
	return 0;
}

int procfs_check_fd(int fd, const struct procfs_file_rules *rules)
{
	struct stat st;

	return check_stat(fd, rules, &st);
}

/* Takes an O_PATH descriptor; if it is a file rules accept, opens that
 * very inode for reading and returns the new descriptor. */
static int open_checked(int pathfd, const struct procfs_file_rules *rules)
{
	_cleanup_close_ int fd = -1;
	struct stat before, after;
	char self[48];
	int r;

	r = check_stat(pathfd, rules, &before);
	if (r < 0)
		return r;
	/* The magic link of our own descriptor: the inode just checked,
	 * wherever its name has moved since.  O_NONBLOCK so that a lease
	 * another process holds on it fails the open (-EWOULDBLOCK) instead
	 * of making it wait for the lease to break. */
	snprintf(self, sizeof(self), "/proc/thread-self/fd/%d", pathfd);
	fd = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	/* Checked again: it may have grown in between. */
	r = check_stat(fd, rules, &after);
	if (r < 0)
		return r;
	if (after.st_dev != before.st_dev || after.st_ino != before.st_ino)
		return -ESTALE;
	/* O_NONBLOCK was for the open only; the caller gets a plain fd. */
	if (fcntl(fd, F_SETFL, 0) < 0)
		return negative_errno();
	return TAKE_FD(fd);
}

int procfs_open_in_root(int rootfd, const char *path, const struct procfs_file_rules *rules)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_close_ int pathfd = -1;

	if (rootfd != AT_FDCWD)
		how.resolve |= RESOLVE_IN_ROOT;
	else if (path[0] != '/')
		return -EINVAL; /* the daemon's cwd is no root */
	if (!rules || !rules->follow_symlinks)
		how.resolve |= RESOLVE_NO_SYMLINKS;
	/* No fallback without openat2 (Linux 5.6): the BPF ring buffer perfd
	 * needs came after it, and a seccomp filter that refuses it is obeyed
	 * by opening nothing rather than by opening unchecked paths. */
	pathfd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	if (pathfd < 0)
		return negative_errno();
	return open_checked(pathfd, rules);
}

int procfs_open_in_process(pid_t pid, uint64_t start_time_ns, const char *path,
			   const struct procfs_file_rules *rules)
{
	_cleanup_close_ int dirfd = -1, rootfd = -1;
	int r = procfs_open_pid(pid, start_time_ns, &dirfd);

	if (r < 0)
		return r;
	rootfd = procfs_open_root(dirfd);
	if (rootfd < 0)
		return rootfd;
	return procfs_open_in_root(rootfd, path, rules);
}

int procfs_open_link(int dirfd, const char *name, const struct procfs_file_rules *rules)
{
	_cleanup_close_ int pathfd = openat(dirfd, name, O_PATH | O_CLOEXEC);

	if (pathfd < 0)
		return negative_errno();
	return open_checked(pathfd, rules);
}

const char *procfs_cgroup_unit(const char *cgroup)
{
	const char *unit = NULL;

	/* the innermost path element that is a systemd unit */
	for (const char *p = cgroup; p && *p; p = strchr(p, '/')) {
		size_t len;

		p += *p == '/';
		len = strcspn(p, "/");
		if ((len > 8 && strncmp(p + len - 8, ".service", 8) == 0) ||
		    (len > 6 && strncmp(p + len - 6, ".scope", 6) == 0))
			unit = p;
	}
	return unit;
}

int procfs_open_mapped_file(pid_t pid, uint64_t start, uint64_t end, const char *path,
			    dev_t dev, uint64_t inode, struct stat *ret_st)
{
	static const struct procfs_file_rules binary = { .follow_symlinks = true };
	char p[96];
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, start, end);
	fd = procfs_open_link(AT_FDCWD, p, &binary);
	if (fd < 0 && path[0] == '/')
		fd = procfs_open_in_process(pid, PROCFS_START_ANY, path, &binary);
	if (fd < 0)
		return fd;
	if (fstat(fd, ret_st) < 0 || ret_st->st_dev != dev || ret_st->st_ino != inode) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}
