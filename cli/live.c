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
 * was, so a second Ctrl-C ends perfctl at once.  A caller with a command
 * of its own (record) takes the Ctrl-Cs instead (o->interrupt) and keeps
 * SIGINT caught until the answer is in, and may ask for perfd's "started"
 * line ahead of the answer (o->started).  The progress line is
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

/* SIGINTs caught, and how many of them the terminal's driver sent
 * (SI_KERNEL: to the whole foreground process group). */
static volatile sig_atomic_t interrupted, from_terminal;

static void on_sigint(int sig, siginfo_t *si, void *context)
{
	interrupted++;
	if (si && si->si_code == SI_KERNEL)
		from_terminal++;
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
	sig_atomic_t told; /* SIGINTs passed to o->interrupt */
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
	/* each SIGINT since the last tick, to the command's owner */
	for (sig_atomic_t n = interrupted; l->o->interrupt && l->told < n;) {
		l->told++;
		erase_progress(l);
		l->o->interrupt(l->o->userdata, (unsigned)l->told, from_terminal > 0);
		from_terminal = 0;
	}
	done = (interrupted && !l->o->interrupt) || (l->o->done && l->o->done(l->o->userdata));
	if (!done) {
		show_progress(l);
		return;
	}
	l->stop_sent = true;
	if (l->caught && !l->o->interrupt)
		(void)sigaction(SIGINT, &l->old_sigint, NULL);
	erase_progress(l);
	stop = ctl_request_new("stop");
	k = stop ? ctl_client_send(fd, stop) : -ENOMEM;
	if (k < 0)
		/* the answer still comes, at the snapshot's end */
		fprintf(stderr, "perfctl: cannot ask perfd to stop the snapshot early: %s\n",
			ctl_client_strerror(k));
	else if (interrupted && !l->o->interrupt)
		fprintf(stderr, "perfctl: stopping after %.1f s; Ctrl-C again to abandon the profile\n",
			elapsed(l));
}

/* Adds "started": true to request when o asks for the line. */
static int ask_started(const struct ctl_live_opts *o, struct json_object *request)
{
	if (!o->started)
		return 0;
	return json_object_object_add(request, "started", json_object_new_boolean(1));
}

/* The exchange of a live snapshot: its "started" line first when o asks
 * for it (o->started is told), then its answer. */
static enum perfctl_exit exchange(const struct ctl_env *env, int fd, struct json_object *request,
				  int timeout_ms, const struct ctl_live_opts *o,
				  const struct ctl_client_watch *watch,
				  struct json_object **ret_response)
{
	_cleanup_(json_object_putp) struct json_object *first = NULL;
	enum perfctl_exit rc;

	rc = ctl_exchange_watched(env, fd, request, timeout_ms, watch, &first);
	if (rc != PERFCTL_EXIT_OK || !o->started)
		goto done;
	if (!json_object_get_boolean(ctl_json_path(first, "started"))) {
		/* the answer itself: a perfd that does not know "started"
		 * answers only at the snapshot's end, which no command that
		 * waits for the line can have reached */
		ctl_error(env, CTL_ERR_PROTOCOL, "perfd did not say when the snapshot started");
		return PERFCTL_EXIT_FAILURE;
	}
	o->started(o->userdata);
	json_object_put(TAKE_PTR(first));
	rc = ctl_receive(env, fd, timeout_ms, watch, &first);
done:
	if (rc == PERFCTL_EXIT_OK)
		*ret_response = TAKE_PTR(first);
	return rc;
}

enum perfctl_exit ctl_live_call(const struct ctl_env *env, struct json_object *request,
				int timeout_ms, const struct ctl_live_opts *o,
				struct json_object **ret_response, int *ret_fd)
{
	struct live l = { .o = o, .last_second = -1 };
	struct ctl_client_watch watch = { .interval_ms = LIVE_TICK_MS, .fn = on_tick, .userdata = &l };
	/* no SA_RESTART: poll() wakes */
	struct sigaction sa = { .sa_sigaction = on_sigint, .sa_flags = SA_SIGINFO };
	_cleanup_close_ int fd = -1;
	enum perfctl_exit rc;

	if (ask_started(o, request) < 0) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	rc = ctl_connect(env, &fd);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	interrupted = from_terminal = 0;
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
	rc = exchange(env, fd, request, timeout_ms, o, &watch, ret_response);
	if (l.caught && (!l.stop_sent || o->interrupt))
		(void)sigaction(SIGINT, &l.old_sigint, NULL);
	erase_progress(&l);
	if (rc == PERFCTL_EXIT_OK && ret_fd)
		*ret_fd = TAKE_FD(fd);
	return rc;
}
