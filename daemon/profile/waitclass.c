/* SPDX-License-Identifier: MIT */
/* waitclass.c - see waitclass.h: the table of the kernel's waits. */
#include <stdbool.h>
#include <string.h>

#include "perfd/macro.h"
#include "perfd/sample.h"
#include "profile/waitclass.h"

static const char *const names[WAIT_CLASSES] = {
	[WAIT_OTHER] = "other",	   [WAIT_CPU] = "cpu",	       [WAIT_DISK] = "disk",
	[WAIT_NETWORK] = "network", [WAIT_LOCK] = "lock",	       [WAIT_SLEEP] = "sleep",
	[WAIT_POLL] = "poll",	   [WAIT_PIPE] = "pipe",	       [WAIT_PAGE_FAULT] = "page fault",
	[WAIT_CHILD] = "child",	   [WAIT_GIL] = "GIL",
};

static const char *const frame_names[WAIT_CLASSES] = {
	[WAIT_OTHER] = "[wait: other]",	    [WAIT_CPU] = "[wait: cpu]",
	[WAIT_DISK] = "[wait: disk]",	    [WAIT_NETWORK] = "[wait: network]",
	[WAIT_LOCK] = "[wait: lock]",	    [WAIT_SLEEP] = "[wait: sleep]",
	[WAIT_POLL] = "[wait: poll]",	    [WAIT_PIPE] = "[wait: pipe]",
	[WAIT_PAGE_FAULT] = "[wait: page fault]", [WAIT_CHILD] = "[wait: child]",
	[WAIT_GIL] = "[wait: GIL]",
};

const char *wait_class_name(unsigned c)
{
	return c < WAIT_CLASSES ? names[c] : "?";
}

const char *wait_frame_name(unsigned c)
{
	return c < WAIT_CLASSES ? frame_names[c] : "[wait: ?]";
}

/* Kernel functions that say why a task sleeps, by name or by prefix
 * (a trailing '*'), of the kernels perfd runs on (5.15 to 7.x): where a
 * wait is decided, not the generic schedule_timeout or wait_woken under
 * it.  The first match from the leaf wins, so a socket read that waits in
 * a poll-like helper is still the socket's. */
static const struct {
	const char *name;
	enum wait_class c;
} functions[] = {
	/* sleeping on a timer */
	{ "do_nanosleep", WAIT_SLEEP },
	{ "hrtimer_nanosleep", WAIT_SLEEP },
	{ "common_nsleep", WAIT_SLEEP },
	{ "__x64_sys_pause", WAIT_SLEEP },
	{ "__x64_sys_nanosleep", WAIT_SLEEP },
	{ "__x64_sys_clock_nanosleep", WAIT_SLEEP },
	/* many events at once */
	{ "do_epoll_wait", WAIT_POLL },
	{ "ep_poll", WAIT_POLL },
	{ "do_sys_poll", WAIT_POLL },
	{ "do_poll*", WAIT_POLL },
	{ "do_select", WAIT_POLL },
	{ "core_sys_select", WAIT_POLL },
	{ "io_cqring_wait", WAIT_POLL },
	/* locks */
	{ "futex_wait*", WAIT_LOCK },
	{ "__futex_wait", WAIT_LOCK },
	{ "futex_lock_pi", WAIT_LOCK },
	{ "rwsem_down_*", WAIT_LOCK },
	{ "__mutex_lock*", WAIT_LOCK },
	{ "__rt_mutex_slowlock*", WAIT_LOCK },
	/* pipes and local IPC */
	{ "pipe_read", WAIT_PIPE },
	{ "anon_pipe_*", WAIT_PIPE }, /* 6.16+ */
	{ "pipe_write", WAIT_PIPE },
	{ "pipe_wait*", WAIT_PIPE },
	{ "unix_stream_read_generic", WAIT_PIPE },
	{ "unix_stream_data_wait", WAIT_PIPE },
	{ "unix_dgram_recvmsg", WAIT_PIPE },
	{ "unix_wait_for_peer", WAIT_PIPE },
	{ "do_msgrcv", WAIT_PIPE },
	{ "do_msgsnd", WAIT_PIPE },
	{ "do_semtimedop", WAIT_PIPE },
	/* the network */
	{ "sk_wait_data", WAIT_NETWORK },
	{ "sk_stream_wait_*", WAIT_NETWORK },
	{ "tcp_recvmsg*", WAIT_NETWORK },
	{ "tcp_sendmsg*", WAIT_NETWORK },
	{ "udp_recvmsg", WAIT_NETWORK },
	{ "udpv6_recvmsg", WAIT_NETWORK },
	{ "__skb_wait_for_more_packets", WAIT_NETWORK },
	{ "__skb_recv_datagram", WAIT_NETWORK },
	{ "inet_csk_accept", WAIT_NETWORK },
	{ "inet_wait_for_connect", WAIT_NETWORK },
	{ "__inet_stream_connect", WAIT_NETWORK },
	/* children */
	{ "do_wait", WAIT_CHILD },
	{ "kernel_wait4", WAIT_CHILD },
	/* I/O: block devices, file systems, pages being read */
	{ "io_schedule*", WAIT_DISK },
	{ "blk_*", WAIT_DISK },
	{ "bio_*", WAIT_DISK },
	{ "submit_bio_wait", WAIT_DISK },
	{ "folio_wait_*", WAIT_DISK },
	{ "__folio_lock*", WAIT_DISK },
	{ "wait_on_page_bit*", WAIT_DISK },
	{ "__lock_page*", WAIT_DISK },
	{ "__wait_on_buffer", WAIT_DISK },
	{ "jbd2_*", WAIT_DISK },
	{ "iomap_dio_rw", WAIT_DISK },
	{ "__iomap_dio_rw", WAIT_DISK },
	{ "file_write_and_wait_range", WAIT_DISK },
	{ "request_wait_answer", WAIT_DISK }, /* FUSE */
	{ "fuse_*", WAIT_DISK },
	{ "nfs_*", WAIT_DISK },
};

static bool matches(const char *pattern, const char *name)
{
	size_t n = strlen(pattern);

	if (n && pattern[n - 1] == '*')
		return !strncmp(pattern, name, n - 1);
	return !strcmp(pattern, name);
}

int wait_class_of_function(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(functions); i++)
		if (matches(functions[i].name, name))
			return (int)functions[i].c;
	return -1;
}

static bool in_page_fault(const char *name)
{
	return !strcmp(name, "exc_page_fault") || !strcmp(name, "asm_exc_page_fault") ||
	       !strcmp(name, "do_user_addr_fault") || !strcmp(name, "handle_mm_fault");
}

enum wait_class wait_classify(uint32_t state, const uint64_t *kernel, size_t n,
			      wait_namer_t name, void *ctx)
{
	int found = -1;

	if (state & PERFD_OFFCPU_RUNNABLE)
		return WAIT_CPU;
	for (size_t i = 0; i < n; i++) {
		char buf[128];
		const char *f = name(ctx, kernel[i], buf, sizeof(buf));

		if (!f)
			continue;
		if (in_page_fault(f))
			return WAIT_PAGE_FAULT;
		if (found < 0)
			found = wait_class_of_function(f);
	}
	return found < 0 ? WAIT_OTHER : (enum wait_class)found;
}
