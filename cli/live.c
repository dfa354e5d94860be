/* SPDX-License-Identifier: MIT */
/*
 * live.c - the wait for a live snapshot, see live.h.
 *
 * Design: perfd answers a live snapshot only at its end, so perfctl sits in
 * poll() on the connection; the wait wakes every LIVE_TICK_MS (and at a
 * signal) to redraw the progress line and to look at the SIGINT flag.  The
 * handler only sets the flag (installed without SA_RESTART, so it also
 * interrupts the poll); the tick sends {"command":"stop"} on the same
 * connection, which perfd takes ahead of its turn and answers with the
 * snapshot itself (include/perfd/protocol.h), then puts SIGINT back as it
 * was, so a second Ctrl-C ends perfctl at once.  The progress line is
 * rewritten in place ("\r", erase to the end) and erased before anything
 * else is printed.  perfd does not tell how many samples a live snapshot
 * holds until it answers, so the line shows the time only.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "base/clock.h"
#include "call.h"
#include "format.h"
#include "client.h"
#include "live.h"
#include "output.h"
#include "perfd/macro.h"

#define LIVE_TICK_MS 200

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	interrupted = 1;
}

struct live {
	const struct ctl_live_opts *o;
	uint64_t start_ns;
	struct sigaction old_sigint;
	bool caught;    /* SIGINT is on_sigint's until the stop */
	bool progress;  /* stderr is a terminal */
	bool shown;     /* a progress line is on the screen */
	bool stop_sent; /* or could not be: nothing more to do */
	long last_second;
};

static double elapsed(const struct live *l)
{
	return (double)(now_monotonic_ns() - l->start_ns) / NSEC_PER_SEC;
}

static void erase_progress(struct live *l)
{
	if (l->shown)
		fputs("\r\033[K", stderr);
	l->shown = false;
}

static void show_progress(struct live *l)
{
	long s = (long)floor(elapsed(l));
	char now[CTL_DURATION_MAX], total[CTL_DURATION_MAX];

	if (!l->progress || l->stop_sent || s == l->last_second)
		return;
	l->last_second = s;
	ctl_format_duration((double)s, now);
	ctl_format_duration(ceil(l->o->seconds), total);
	if (l->o->seconds > 0)
		fprintf(stderr, "\r\033[Kperfctl: sampling, %s of %s (Ctrl-C: stop and keep the profile)",
			now, total);
	else
		fprintf(stderr, "\r\033[Kperfctl: sampling, %s (Ctrl-C: stop and keep the profile)", now);
	l->shown = true;
}

static void on_tick(void *userdata, int fd)
{
	struct live *l = userdata;
	_cleanup_(json_object_putp) struct json_object *stop = NULL;
	bool done;
	int k;

	if (l->stop_sent)
		return;
	done = interrupted || (l->o->done && l->o->done(l->o->userdata));
	if (!done) {
		show_progress(l);
		return;
	}
	l->stop_sent = true;
	if (l->caught)
		(void)sigaction(SIGINT, &l->old_sigint, NULL);
	erase_progress(l);
	stop = ctl_request_new("stop");
	k = stop ? ctl_client_send(fd, stop) : -ENOMEM;
	if (k < 0)
		/* the answer still comes, at the snapshot's end */
		fprintf(stderr, "perfctl: cannot ask perfd to stop the snapshot early: %s\n",
			ctl_client_strerror(k));
	else if (interrupted)
		fprintf(stderr, "perfctl: stopping after %.1f s; Ctrl-C again to abandon the profile\n",
			elapsed(l));
}

enum perfctl_exit ctl_live_call(const struct ctl_env *env, struct json_object *request,
				int timeout_ms, const struct ctl_live_opts *o,
				struct json_object **ret_response)
{
	struct live l = { .o = o, .last_second = -1 };
	struct ctl_client_watch watch = { .interval_ms = LIVE_TICK_MS, .fn = on_tick, .userdata = &l };
	struct sigaction sa = { .sa_handler = on_sigint }; /* no SA_RESTART: poll() wakes */
	_cleanup_close_ int fd = -1;
	enum perfctl_exit rc;

	rc = ctl_connect(env, &fd);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	interrupted = 0;
	l.progress = !o->quiet && isatty(STDERR_FILENO);
	l.start_ns = now_monotonic_ns();
	(void)sigemptyset(&sa.sa_mask);
	/* without the handler, Ctrl-C ends perfctl as it always did; and one
	 * started with SIGINT ignored (a job in the background of a script)
	 * keeps ignoring it */
	l.caught = sigaction(SIGINT, &sa, &l.old_sigint) == 0;
	if (l.caught && l.old_sigint.sa_handler == SIG_IGN) {
		(void)sigaction(SIGINT, &l.old_sigint, NULL);
		l.caught = false;
	}
	rc = ctl_exchange_watched(env, fd, request, timeout_ms, &watch, ret_response);
	if (l.caught && !l.stop_sent)
		(void)sigaction(SIGINT, &l.old_sigint, NULL);
	erase_progress(&l);
	return rc;
}
