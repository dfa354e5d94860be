/* SPDX-License-Identifier: MIT */
/*
 * noread.h - for the tests that what runs on perfd's loop reads no file:
 * a seccomp filter on the calling thread that makes the system calls
 * opening or reading a file fail (and closing one, if asked), and records
 * the first one made.  A file system need not answer (a FUSE server that
 * stops, NFS; FUSE answers every close too), so what reads a process's
 * files belongs on a lane, never on the loop.  So does what reads its
 * memory (process_vm_readv): a page of it may be a file's, never read in.
 */
#ifndef PERFD_TEST_NOREAD_H
#define PERFD_TEST_NOREAD_H

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "perfd/macro.h"

/* The first system call opening, reading or stat'ing a file, or reading
 * another process's memory, made on a thread that called
 * forbid_file_reads, or 0. */
static volatile sig_atomic_t forbidden_call;

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	(void)sig;
	if (!forbidden_call)
		forbidden_call = si->si_syscall;
	uc->uc_mcontext.gregs[REG_RAX] = -EPERM; /* the call fails instead */
}

/* On this thread only (seccomp filters are per thread: the lanes started
 * before are free), the calls that open a file, read its contents (mmap
 * included) or its metadata, and with close_too close a descriptor, fail
 * from now on, and are recorded in forbidden_call.  x86_64 (little-endian:
 * args[4]'s low word is mmap's fd).  Returns 0 or -errno. */
static int forbid_file_reads(bool close_too)
{
#define FORBID(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
		   BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP)
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* mmap of a file, not of anonymous memory (malloc's) */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[4])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		FORBID(__NR_open),
		FORBID(__NR_openat),
		FORBID(__NR_openat2),
		FORBID(__NR_pread64),
		FORBID(__NR_preadv),
		FORBID(__NR_preadv2),
		FORBID(__NR_fstat),
		FORBID(__NR_newfstatat),
		FORBID(__NR_statx),
		FORBID(__NR_lseek),
		FORBID(__NR_process_vm_readv),
		/* no system call has this number */
		FORBID(close_too ? __NR_close : 0xfffffffeu),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
#undef FORBID
	struct sock_fprog prog = { .len = ELEMENTSOF(code), .filter = code };
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };

	forbidden_call = 0;
	if (sigaction(SIGSYS, &sa, NULL) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return -errno;
	return 0;
}

struct noread_call {
	void (*fn)(void *arg);
	void *arg;
	bool close_too;
	int r;
};

static void *noread_thread(void *arg)
{
	struct noread_call *c = arg;

	c->r = forbid_file_reads(c->close_too);
	if (c->r == 0)
		c->fn(c->arg);
	return NULL;
}

/* Calls fn(arg) on a thread of its own that may open and read no file
 * (forbid_file_reads), and returns the first such call it made, or 0.
 * The filter goes with the thread: the rest of the test, and the
 * sanitizers' work at exit, are free. */
static int call_noread(void (*fn)(void *arg), void *arg, bool close_too)
{
	struct noread_call c = { .fn = fn, .arg = arg, .close_too = close_too, .r = -1 };
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, noread_thread, &c), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(c.r, 0, "no seccomp filter: %s", strerror(-c.r));
	return forbidden_call;
}

static inline int call_reading_no_file(void (*fn)(void *arg), void *arg)
{
	return call_noread(fn, arg, false);
}

/* The same, and fn may close no descriptor either. */
static inline int call_closing_no_file(void (*fn)(void *arg), void *arg)
{
	return call_noread(fn, arg, true);
}

#endif
