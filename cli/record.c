/* SPDX-License-Identifier: MIT */
/*
 * record.c - `perfctl record [OPTIONS] -- CMD ARGS...`: runs CMD, profiles
 * it and its descendants from its start until it exits, writes the profile
 * as `snapshot` does, and exits with CMD's status.
 *
 * Design: perfctl forks; the child waits on a pipe (the gate) while perfd
 * takes the live snapshot of the tree rooted at the child's pid (the "tree"
 * selection: the process and its descendants, which perfd follows from
 * their fork in the kernel), then execs CMD, so the profile starts at CMD's
 * first instruction.  The gate opens on perfd's "started" line (live.c's
 * started(), include/perfd/protocol.h), not on a timer: a refusal is
 * perfd's answer instead, and a refused record never runs CMD.  The wait
 * is live.c's; its done() reaps the child at each tick and at SIGCHLD, and,
 * once CMD exited, asks perfd to stop, which answers with the profile of
 * the whole run.  A second close-on-exec pipe tells whether exec failed.
 * CMD runs as perfctl's caller, with its environment, directory, terminal
 * and process group, so a Ctrl-C from the terminal reaches both; what
 * perfctl then does is run_interrupt()'s (perf record's way).  Costs and
 * limits: a snapshot lasts at most PERFD_SNAPSHOT_MAX_SECONDS, so a
 * longer run is profiled for its first hour.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "live.h"
#include "perfd/kinds.h"
#include "output.h"
#include "perfctl.h"
#include "snapshot.h"

/* The exit status when CMD could not be run, as the shells say it. */
#define RECORD_EXIT_CANNOT_RUN 127

struct run {
	pid_t pid;
	int gate;   /* write end: a byte lets the child exec, EOF ends it */
	bool released; /* the gate let the child become CMD */
	int report; /* read end: the child's errno when exec failed */
	bool exited;
	int status;
};

static int parse_args(struct ctl_env *env, int argc, char **argv, struct ctl_snapshot_opts *o)
{
	int at = ctl_snapshot_parse(env, "record", argc, argv, false, o);

	if (at >= 0 && at >= argc) {
		ctl_error(env, CTL_ERR_USAGE, "record: missing the command to run: record [OPTIONS] -- CMD ARGS...");
		return -EINVAL;
	}
	return at;
}

/* The child: waits at the gate, then becomes CMD.  _exit() is right here:
 * a forked copy of perfctl must not flush perfctl's stdio or run its
 * cleanups. */
static _Noreturn void child(struct run *r, int gate, int report, char **cmd)
{
	char go = 0;
	ssize_t n;
	int e;

	/* perfctl's ends: with the gate's write end open here, its EOF
	 * could never come */
	closep(&r->gate);
	closep(&r->report);
	while ((n = read(gate, &go, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		_exit(RECORD_EXIT_CANNOT_RUN); /* perfctl gave up before it */
	/* perfctl ignores SIGPIPE (perfctl.c); an ignored signal stays
	 * ignored across exec, and CMD must run as it would alone */
	(void)signal(SIGPIPE, SIG_DFL);
	execvp(cmd[0], cmd);
	e = errno;
	(void)!write(report, &e, sizeof(e));
	_exit(RECORD_EXIT_CANNOT_RUN);
}

/* live.c's started(): perfd's snapshot now takes every sample of the
 * tree rooted at the child, so the child may become CMD. */
static void run_started(void *userdata)
{
	struct run *r = userdata;

	(void)!write(r->gate, "", 1);
	closep(&r->gate);
	r->released = true;
}

/* live.c's done(), at each tick and at each signal (SIGCHLD wakes the
 * wait): whether CMD exited, reaping it.  A child still at the gate has
 * nothing to wait for unless the gate was closed (interrupted first). */
static bool run_done(void *userdata)
{
	struct run *r = userdata;
	pid_t k;

	if (r->gate >= 0)
		return false;
	if (!r->exited) {
		k = waitpid(r->pid, &r->status, WNOHANG);
		r->exited = k == r->pid || (k < 0 && errno == ECHILD);
	}
	return r->exited;
}

/* live.c's interrupt(), at each Ctrl-C while CMD runs.  As perf record
 * does with its workload: CMD gets the SIGINT (from the terminal, which
 * sends it to the whole foreground group, or passed on here when someone
 * sent it to perfctl alone) and perfctl waits for it to exit, keeping the
 * profile; a command that does not exit gets SIGTERM at the second Ctrl-C
 * (what perf record sends a workload still running when it stops), and
 * SIGKILL from the third on.  The profile is written whatever ends CMD.
 * Before CMD runs, a Ctrl-C closes the gate: the child ends without
 * running it. */
static void run_interrupt(void *userdata, unsigned count, bool from_terminal)
{
	struct run *r = userdata;
	int sig = count == 1 ? SIGINT : count == 2 ? SIGTERM : SIGKILL;

	if (!r->released) {
		closep(&r->gate);
		return;
	}
	if (r->exited)
		return;
	if (sig != SIGINT || !from_terminal)
		(void)kill(r->pid, sig);
	if (count == 1)
		fprintf(stderr, "perfctl: waiting for the command (pid %d) to exit; Ctrl-C again sends it SIGTERM\n",
			(int)r->pid);
	else
		fprintf(stderr, "perfctl: sent %s to the command (pid %d)%s\n", sig == SIGTERM ? "SIGTERM" : "SIGKILL",
			(int)r->pid, sig == SIGTERM ? "; Ctrl-C again sends SIGKILL" : "");
}

/* SIGCHLD's handler: nothing but waking the wait (installed without
 * SA_RESTART), so CMD's exit is seen at once, not at the next tick. */
static void on_sigchld(int sig)
{
}

/* CMD's exit status as a shell gives it: its code, or 128 + the signal. */
static int exit_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return PERFCTL_EXIT_FAILURE;
}

/* Waits for the child (whatever became of the profile). */
static void reap(struct run *r)
{
	closep(&r->gate); /* a child still at the gate ends */
	while (!r->exited) {
		pid_t k = waitpid(r->pid, &r->status, 0);

		r->exited = k == r->pid || (k < 0 && errno != EINTR);
	}
}

enum perfctl_exit do_record(struct ctl_env *env, int argc, char **argv)
{
	struct ctl_snapshot_opts o = { .stop_is_end = true };
	_cleanup_(json_object_putp) struct json_object *req = NULL, *resp = NULL;
	struct run r = { .gate = -1, .report = -1 };
	_cleanup_close_ int gate_read = -1, report_write = -1, fd = -1;
	int gate[2], report[2], at, e = 0;
	enum perfctl_exit rc;

	at = parse_args(env, argc, argv, &o);
	if (at < 0)
		return PERFCTL_EXIT_USAGE;
	rc = ctl_snapshot_prepare(env, "record", &o);
	if (rc != PERFCTL_EXIT_OK)
		return rc;

	if (pipe2(gate, O_CLOEXEC) < 0) {
		ctl_error(env, CTL_ERR_IO, "record: cannot make a pipe: %s", strerror(errno));
		return PERFCTL_EXIT_FAILURE;
	}
	gate_read = gate[0];
	r.gate = gate[1];
	if (pipe2(report, O_CLOEXEC) < 0) {
		ctl_error(env, CTL_ERR_IO, "record: cannot make a pipe: %s", strerror(errno));
		closep(&r.gate);
		return PERFCTL_EXIT_FAILURE;
	}
	r.report = report[0];
	report_write = report[1];
	fflush(NULL); /* nothing buffered is written twice */
	r.pid = fork();
	if (r.pid < 0) {
		ctl_error(env, CTL_ERR_IO, "record: cannot fork: %s", strerror(errno));
		closep(&r.gate);
		closep(&r.report);
		return PERFCTL_EXIT_FAILURE;
	}
	if (r.pid == 0)
		child(&r, gate_read, report_write, argv + at);
	closep(&gate_read);
	closep(&report_write);

	/* the tree rooted at the child, for as long as a snapshot may last */
	o.sel.tree = r.pid;
	o.sel.duration = PERFD_SNAPSHOT_MAX_SECONDS;
	req = ctl_snapshot_request(&o);
	if (!req) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		rc = PERFCTL_EXIT_FAILURE;
	} else {
		struct sigaction chld = { .sa_handler = on_sigchld, .sa_flags = SA_NOCLDSTOP }, old;
		bool woken;

		(void)sigemptyset(&chld.sa_mask);
		woken = sigaction(SIGCHLD, &chld, &old) == 0;
		rc = ctl_live_call(env, req, ctl_selection_timeout_ms(&o.sel),
				   &(struct ctl_live_opts){ .quiet = true,
							    .done = run_done,
							    .started = run_started,
							    .interrupt = run_interrupt,
							    .userdata = &r },
				   &resp, &fd);
		if (woken)
			(void)sigaction(SIGCHLD, &old, NULL);
	}
	reap(&r);
	if (read(r.report, &e, sizeof(e)) == (ssize_t)sizeof(e)) {
		ctl_error(env, CTL_ERR_USAGE, "record: cannot run '%s': %s", argv[at], strerror(e));
		closep(&r.report);
		return RECORD_EXIT_CANNOT_RUN;
	}
	closep(&r.report);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	rc = ctl_snapshot_write(env, fd, resp, &o);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	env->exit_is_cmds = true;
	return (enum perfctl_exit)exit_status(r.status);
}

const struct ctl_command ctl_cmd_record = {
	.name = "record",
	.fn = do_record,
	.options = ctl_record_options,
	.shortopts = ctl_record_shortopts,
	.summary = "run a command and profile it and its children until it exits",
	.synopsis = "[--kind " PERFD_KIND_NAMES("|", "|") "] [--format folded|json|pprof|speedscope|html|svg]\n"
		    "    [--lines] [--no-lines] [--threads] [-o FILE] -- CMD [ARGS...]",
	.help = "Runs CMD (as the caller, with its environment and terminal), profiles it\n"
		"and the processes it starts, from its start until it exits (at most 1h),\n"
		"and writes the profile as 'perfctl snapshot' does: to stdout, or to FILE.\n"
		"Ctrl-C reaches CMD and perfctl waits for it to exit; a second Ctrl-C\n"
		"sends CMD SIGTERM, a third SIGKILL.  The profile of what ran is always\n"
		"written.\n"
		"Exit status: CMD's (128+N when signal N ended it) once the profile is\n"
		"written; 127 when CMD cannot be run; perfctl's own (1..4: 'perfctl\n"
		"--help') when it cannot profile.\n",
};
