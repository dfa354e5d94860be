/* SPDX-License-Identifier: MIT */
/*
 * procfs.h - reading what a process exposes, without letting it choose what
 * the daemon (root) opens or how long that takes.
 *
 * Two kinds of files, two ways in:
 *  - the kernel's own files about a process (/proc/PID/stat, status, comm,
 *    cgroup, maps) are read through one descriptor of the /proc/PID
 *    directory, opened once and checked against the process's start time.
 *    A read through the descriptor of a process that has exited fails with
 *    -ESRCH, so a pid reused in between never lends its data to the old
 *    process;
 *  - files a process names (its JIT map, the binaries and debug files under
 *    its root) are opened by procfs_open_in_root: resolved inside the
 *    process's root (RESOLVE_IN_ROOT, never through a magic link, and
 *    through no symlink at all unless the rules allow in-root ones), first
 *    as an O_PATH descriptor, which opens nothing.  Only once fstat has shown
 *    a regular file that passes the rules is it opened for reading, through
 *    that descriptor, with O_NONBLOCK (a FIFO, a device or a file under
 *    another process's lease can make no open wait: the first two are never
 *    opened at all).  Kernel links such as /proc/PID/map_files/ADDR-ADDR
 *    (how a deleted binary is reached) take the same checks through
 *    procfs_open_link.
 *
 * Refusals are -EPERM (not a regular file, wrong owner, hard-linked), -ELOOP
 * (a symlink where none is allowed, or a magic link), -EFBIG (over the size
 * cap) and -EWOULDBLOCK (under another process's lease); -ENOENT is plain
 * absence.  The cost is an extra fstat and
 * open per file, and one read of /proc/PID/stat per checked directory.
 *
 * What is not covered: a lookup on a filesystem the process serves itself
 * (FUSE in its mount namespace) can still wait for it; that needs the opens
 * off the daemon's loop thread.
 */
#ifndef PERFD_PROCFS_H
#define PERFD_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* A start time that procfs_open_pid does not check. */
#define PROCFS_START_ANY UINT64_MAX

/* What a file a process names must be, beyond regular. */
struct procfs_file_rules {
	uint64_t max_size;    /* bytes; 0: any size */
	bool check_owner;     /* owned by owner_uid or by root */
	uint32_t owner_uid;   /* UINT32_MAX (no such user): by root only */
	bool follow_symlinks; /* symlinks inside the root are followed */
	bool single_link;     /* refuse a file with another hard link */
};

/* The start time of a process in clock ticks, as /proc/PID/stat field 22
 * gives it, from its start_boottime in ns (what BPF reads). */
uint64_t procfs_ticks_of(uint64_t start_time_ns);

/* Opens the /proc/PID directory (O_PATH) into *ret_dirfd, after checking
 * that the process there started at start_time_ns (PROCFS_START_ANY: no
 * check).  Returns 0, -ESRCH when there is no such process or another one
 * now has the pid, -EINVAL for pid <= 0, or -errno. */
int procfs_open_pid(pid_t pid, uint64_t start_time_ns, int *ret_dirfd);

/* The starttime field of dirfd's stat, in clock ticks. */
int procfs_start_ticks(int dirfd, uint64_t *ret_ticks);

/* Opens the file name (e.g. "maps") of the /proc/PID directory dirfd for
 * reading.  Returns the descriptor (O_CLOEXEC, the caller's), -ESRCH when
 * the process has exited, or -errno. */
int procfs_open_file(int dirfd, const char *name);

/* Reads at most size - 1 bytes of the file name of dirfd into buf and
 * NUL-terminates it; the rest of a longer file is not read (callers parse
 * only whole lines, so a cut line is ignored).  Returns the length, -ESRCH
 * when the process has exited, or -errno. */
ssize_t procfs_read(int dirfd, const char *name, char *buf, size_t size);

/* The process's comm (its main thread's name) into buf (size >= 2), without
 * its newline.  Returns 0 or -errno (-ESRCH: exited). */
int procfs_read_comm(int dirfd, char *buf, size_t size);

/* From /proc/PID/status: the pid as the process's own pid namespace sees
 * it (the last NSpid field; the host's pid on kernels without NSpid) and
 * its real, effective and saved uids. */
struct procfs_status {
	uint32_t ns_pid;
	uint32_t ppid; /* the parent, in the reader's pid namespace (0: none) */
	uint32_t uid_real, uid_effective, uid_saved;
	/* who could ptrace it, procfs_owner_uid() of the above and of the
	 * owner of the status file read */
	uint32_t owner_uid;
};
int procfs_read_status(int dirfd, struct procfs_status *ret);

/* ptrace's rule for who may trace a process (api/auth.h): its real uid
 * when its real, effective and saved uids agree and it is dumpable, else
 * PERFD_OWNER_NONE (root only).  /proc/PID/status does not tell
 * dumpability, but its owner does: the kernel gives the files (not the
 * directory) of a non-dumpable process's /proc directory to root
 * (task_dump_owner()), a dumpable one's to its effective uid; file_uid is
 * that owner. */
uint32_t procfs_owner_uid(const struct procfs_status *st, uint32_t file_uid);

/* The process's cgroup v2 path ("0::PATH" line) into *ret_path (malloc'd).
 * Returns 0, -ENOENT when it has none (cgroup v1 only), or -errno. */
int procfs_read_cgroup(int dirfd, char **ret_path);

/* The systemd unit a cgroup v2 path belongs to: its innermost element
 * ending in .service or .scope (a pointer into cgroup, up to the next '/'),
 * or NULL. */
const char *procfs_cgroup_unit(const char *cgroup);

/* Opens the process's root directory ("root" under dirfd, as the kernel
 * links it) as an O_PATH descriptor for procfs_open_in_root.  Returns the
 * descriptor or -errno (-ESRCH: exited). */
int procfs_open_root(int dirfd);

/* Opens path (absolute: taken from the process's root) inside rootfd, the
 * descriptor of a process's root (procfs_open_root), or inside the daemon's
 * own tree for AT_FDCWD, as a regular file meeting rules.  Returns a new
 * descriptor (O_RDONLY, O_CLOEXEC, blocking: it is a regular file) or
 * -errno: -EPERM, -ELOOP, -EFBIG, -EWOULDBLOCK when refused (see above). */
int procfs_open_in_root(int rootfd, const char *path, const struct procfs_file_rules *rules);

/* procfs_open_in_root under the root of process pid, if it is still the
 * one that started at start_time_ns (PROCFS_START_ANY: whichever it is):
 * procfs_open_pid, procfs_open_root and procfs_open_in_root in one call. */
int procfs_open_in_process(pid_t pid, uint64_t start_time_ns, const char *path,
			   const struct procfs_file_rules *rules);

/* Like procfs_open_in_root for a link the kernel provides: name (under
 * dirfd, or absolute) is followed as the kernel links it, magic links
 * included, e.g. "/proc/PID/map_files/START-END".  Only regular files that
 * meet rules (follow_symlinks does not apply) are opened. */
int procfs_open_link(int dirfd, const char *name, const struct procfs_file_rules *rules);

/* Opens the file process pid maps at [start, end) from path (as its maps
 * show it) and (dev, inode), the way that survives the most: map_files
 * names the very inode mapped (deleted, or in another mount namespace);
 * the path seen from the process's root comes next.  Either way only a
 * regular file is opened, of any size or owner, and only if it is that
 * inode (-ESTALE otherwise); its stat in *ret_st. */
int procfs_open_mapped_file(pid_t pid, uint64_t start, uint64_t end, const char *path,
			    dev_t dev, uint64_t inode, struct stat *ret_st);

/* Checks an open descriptor against rules again, e.g. before re-reading a
 * kept file that has grown.  Returns 0, or the refusal. */
int procfs_check_fd(int fd, const struct procfs_file_rules *rules);

#endif
