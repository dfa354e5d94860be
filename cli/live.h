/* SPDX-License-Identifier: MIT */
/*
 * live.h - waiting for a live snapshot's answer (`snapshot --duration`,
 * `record`): progress on stderr when it is a terminal, and Ctrl-C that
 * ends the snapshot early and keeps what it sampled.
 */
#ifndef PERFCTL_LIVE_H
#define PERFCTL_LIVE_H

#include <stdbool.h>

#include "perfctl.h"

struct json_object;

struct ctl_live_opts {
	double seconds; /* the snapshot's duration, for the progress line (0: none) */
	bool quiet;     /* no progress line: the terminal is another program's (record) */
	/* Asked every tick: true when the snapshot should stop now (record's
	 * command exited).  NULL: only Ctrl-C stops it. */
	bool (*done)(void *userdata);
	/* Set: the request asks perfd for its "started" line
	 * (include/perfd/protocol.h), and started(userdata) is called when
	 * it comes, before the wait for the answer goes on. */
	void (*started)(void *userdata);
	/* Set: a SIGINT does not stop the snapshot; interrupt(userdata,
	 * count, from_terminal) is called at the tick after each one (count:
	 * 1 for the first; from_terminal: the terminal's driver sent it, to
	 * the whole foreground process group), and SIGINT stays caught until
	 * the answer is in.  done() still says when to stop. */
	void (*interrupt)(void *userdata, unsigned count, bool from_terminal);
	void *userdata;
};

/* Sends request (a live snapshot) to perfd and waits up to timeout_ms for
 * its answer, as ctl_call() does, meanwhile: a progress line on stderr
 * when it is a terminal, and at the first SIGINT (or when o->done says so)
 * a "stop" that makes perfd answer at once with what it sampled; a second
 * SIGINT ends perfctl as usual (o->interrupt changes both).  Returns ctl_call_keep()'s exit
 * codes, answer and connection (ret_fd NULL: closed). */
enum perfctl_exit ctl_live_call(const struct ctl_env *env, struct json_object *request,
				int timeout_ms, const struct ctl_live_opts *o,
				struct json_object **ret_response, int *ret_fd);

#endif
