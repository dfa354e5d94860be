/* SPDX-License-Identifier: MIT */
/*
 * top_screen.c - `perfctl top`'s live screen (ncurses): a frame per
 * refresh (top_text.c's lines), and keys to sort, filter, and walk from a
 * process to its functions and from a function to its callers and callees.
 *
 * Design: one loop, poll() on the terminal and on perfd's connection with
 * the time left to the next refresh; a key that changes the query asks
 * again at once.  perfd never writes unasked, so its connection turning
 * readable while no request is out means it closed: perfd went away, and
 * top ends at once rather than at the next refresh.  The selection is an
 * item (a pid, a function) and not a line, so it stays on its process
 * when a refresh re-sorts the list.  Views are a stack of queries: Enter
 * pushes one, Esc pops it.
 *
 * The terminal is the user's: curses ends on every way out (q, Ctrl-C,
 * SIGTERM or SIGHUP through a flag, perfd gone, an error), and while it
 * runs stderr goes to a memory file, so that no message, ours or a
 * library's, scribbles over the screen; it is printed once the terminal is
 * back as it was.
 */
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "output.h"
#include "top.h"

#define VIEW_STACK 16
#define KEY_ESCAPE 27

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

struct screen {
	struct top_session *s;
	struct top_query back[VIEW_STACK]; /* the views Esc returns to */
	size_t n_back;
	struct top_frame frame;
	size_t selected; /* among the frame's rows */
	uint32_t sel_pid;
	char sel_function[PERFD_TOP_MAX_FUNCTION_BYTES], sel_kind[16];
	bool editing; /* the filter, on the status line */
	char edit[PERFD_TOP_FILTER_BYTES];
	bool refetch, quit;
	enum perfctl_exit rc;
	char message[256]; /* why top stopped, for after the screen */
};

/* --- stderr held while curses runs ---------------------------------- */

/* Points fd 2 at a memory file; *saved gets the real one.  Returns 0, or
 * -errno with stderr as it was. */
static int hold_stderr(int *saved, int *held)
{
	int mem = memfd_create("perfctl-top-stderr", MFD_CLOEXEC), old;

	if (mem < 0)
		return -errno;
	old = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (old < 0 || (fflush(stderr), dup2(mem, STDERR_FILENO)) < 0) {
		int r = -errno;

		if (old >= 0)
			close(old);
		close(mem);
		return r;
	}
	*saved = old;
	*held = mem;
	return 0;
}

/* Gives fd 2 back and writes on it what was held. */
static void release_stderr(int saved, int held)
{
	char buf[4096];
	ssize_t n;

	fflush(stderr);
	(void)dup2(saved, STDERR_FILENO);
	close(saved);
	if (lseek(held, 0, SEEK_SET) == 0)
		while ((n = read(held, buf, sizeof(buf))) > 0)
			if (write(STDERR_FILENO, buf, (size_t)n) != n)
				break;
	close(held);
}

/* --- the views -------------------------------------------------------- */

static bool in_detail(const struct screen *sc)
{
	return sc->s->q.view == TOP_VIEW_FUNCTIONS && sc->s->q.function[0];
}

/* How many rows perfd is asked for: the lines below the header, less the
 * status line (a function's callers and callees share them). */
static unsigned wanted_rows(const struct screen *sc)
{
	int lines = LINES - TOP_FRAME_HEADER_LINES - 1;

	if (in_detail(sc))
		lines = (lines - 1) / 2;
	return (unsigned)MIN(MAX(lines, 1), PERFD_TOP_MAX_ROWS);
}

static const struct top_line *row_line(const struct screen *sc, size_t row)
{
	for (size_t i = 0, k = 0; i < sc->frame.n; i++)
		if (sc->frame.lines[i].kind == TOP_LINE_ROW && k++ == row)
			return &sc->frame.lines[i];
	return NULL;
}

static void remember_selection(struct screen *sc)
{
	const struct top_line *l = row_line(sc, sc->selected);

	sc->sel_pid = l ? l->pid : 0;
	(void)snprintf(sc->sel_function, sizeof(sc->sel_function), "%s", l && l->function ? l->function : "");
	(void)snprintf(sc->sel_kind, sizeof(sc->sel_kind), "%s", l ? l->function_kind : "");
}

/* After a refresh: the row of the item selected before, else the same
 * place, within the rows there are. */
static void reselect(struct screen *sc)
{
	for (size_t i = 0, k = 0; i < sc->frame.n; i++) {
		const struct top_line *l = &sc->frame.lines[i];

		if (l->kind != TOP_LINE_ROW)
			continue;
		if ((sc->sel_pid && l->pid == sc->sel_pid) ||
		    (sc->sel_function[0] && l->function && strcmp(l->function, sc->sel_function) == 0 &&
		     strcmp(l->function_kind, sc->sel_kind) == 0)) {
			sc->selected = k;
			return;
		}
		k++;
	}
	if (sc->selected >= sc->frame.rows)
		sc->selected = sc->frame.rows ? sc->frame.rows - 1 : 0;
	remember_selection(sc);
}

static void push_view(struct screen *sc)
{
	if (sc->n_back == VIEW_STACK)
		memmove(sc->back, sc->back + 1, (VIEW_STACK - 1) * sizeof(*sc->back));
	else
		sc->n_back++;
	sc->back[sc->n_back - 1] = sc->s->q;
	sc->s->q.offset = 0;
	sc->selected = 0;
	sc->refetch = true;
}

static void pop_view(struct screen *sc)
{
	if (!sc->n_back)
		return;
	/* back to the item it was entered from */
	if (in_detail(sc)) {
		(void)snprintf(sc->sel_function, sizeof(sc->sel_function), "%s", sc->s->q.function);
		(void)snprintf(sc->sel_kind, sizeof(sc->sel_kind), "%s", sc->s->q.function_kind);
		sc->sel_pid = 0;
	} else if (sc->s->q.view == TOP_VIEW_FUNCTIONS) {
		sc->sel_pid = sc->s->q.pid;
		sc->sel_function[0] = 0;
	}
	sc->s->q = sc->back[--sc->n_back];
	sc->refetch = true;
}

static void enter(struct screen *sc)
{
	struct top_query *q = &sc->s->q;
	const struct top_line *l = row_line(sc, sc->selected);

	if (!l)
		return;
	if (q->view == TOP_VIEW_PROCESSES) {
		uint32_t pid = l->pid;

		push_view(sc);
		q->view = TOP_VIEW_FUNCTIONS;
		q->pid = pid;
		q->function[0] = 0;
	} else if (l->function) {
		char name[sizeof(q->function)], kind[sizeof(q->function_kind)];

		(void)snprintf(name, sizeof(name), "%s", l->function);
		(void)snprintf(kind, sizeof(kind), "%s", l->function_kind);
		push_view(sc);
		memcpy(q->function, name, sizeof(name));
		memcpy(q->function_kind, kind, sizeof(kind));
	}
	sc->sel_pid = 0;
	sc->sel_function[0] = 0;
}

/* Moves the selection by delta rows, scrolling perfd's rows (offset) past
 * either end of a list. */
static void move_selection(struct screen *sc, long delta)
{
	struct top_query *q = &sc->s->q;
	long at = (long)sc->selected + delta, rows = (long)sc->frame.rows;

	if (at < 0) {
		if (!in_detail(sc) && q->offset > 0) {
			q->offset = (unsigned)MAX(0L, (long)q->offset + at);
			sc->refetch = true;
		}
		at = 0;
	} else if (at >= rows) {
		if (!in_detail(sc) && q->offset + (unsigned)rows < sc->frame.matched) {
			q->offset = (unsigned)MIN((long)sc->frame.matched - 1, (long)q->offset + at - rows + 1);
			sc->refetch = true;
		}
		at = rows ? rows - 1 : 0;
	}
	sc->selected = (size_t)at;
	remember_selection(sc);
	if (sc->refetch)
		sc->sel_pid = 0, sc->sel_function[0] = 0;
}

/* A query that changes which rows match (or in what order) starts at
 * the top again: the offset scrolled to may be past the new list's end. */
static void requery(struct screen *sc)
{
	sc->s->q.offset = 0;
	sc->refetch = true;
}

static void edit_key(struct screen *sc, int ch)
{
	size_t len = strlen(sc->edit);

	if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
		memcpy(sc->s->q.filter, sc->edit, sizeof(sc->edit));
		sc->editing = false;
		requery(sc);
	} else if (ch == KEY_ESCAPE) {
		sc->editing = false;
	} else if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && len > 0) {
		sc->edit[len - 1] = 0;
	} else if (ch >= 0x20 && ch < 0x7f && len + 1 < sizeof(sc->edit)) {
		sc->edit[len] = (char)ch;
		sc->edit[len + 1] = 0;
	}
}

static void set_sort(struct screen *sc, int *field, int value)
{
	*field = value;
	requery(sc);
}

static void on_key(struct screen *sc, int ch)
{
	struct top_query *q = &sc->s->q;

	if (sc->editing) {
		edit_key(sc, ch);
		return;
	}
	switch (ch) {
	case 'q':
	case 'Q':
		sc->quit = true;
		return;
	case KEY_RESIZE:
		sc->refetch = true; /* as many rows as fit now */
		return;
	case KEY_UP:
		move_selection(sc, -1);
		return;
	case KEY_DOWN:
		move_selection(sc, 1);
		return;
	case KEY_PPAGE:
		move_selection(sc, -(long)MAX(sc->frame.rows, (size_t)1));
		return;
	case KEY_NPAGE:
		move_selection(sc, (long)MAX(sc->frame.rows, (size_t)1));
		return;
	case KEY_HOME:
		if (q->offset)
			q->offset = 0, sc->refetch = true;
		sc->selected = 0;
		remember_selection(sc);
		return;
	case '\n':
	case '\r':
	case KEY_ENTER:
		enter(sc);
		return;
	case KEY_ESCAPE:
	case KEY_BACKSPACE:
		pop_view(sc);
		return;
	}
	if (q->view == TOP_VIEW_PROCESSES) {
		switch (ch) {
		case 'c':
		case 'm':
		case 'p':
		case 'g':
			set_sort(sc, &q->process_sort, ch == 'c' ? 0 : ch == 'm' ? 1 : ch == 'p' ? 2 : 3);
			return;
		case '/':
			sc->editing = true;
			memcpy(sc->edit, q->filter, sizeof(sc->edit));
			return;
		case 'k':
			q->kernel_threads = !q->kernel_threads;
			requery(sc);
			return;
		case 'a':
			q->all = !q->all;
			requery(sc);
			return;
		case 'f':
			push_view(sc);
			q->view = TOP_VIEW_FUNCTIONS;
			q->pid = 0;
			q->function[0] = 0;
			return;
		}
	} else {
		switch (ch) {
		case 's':
		case 't':
			set_sort(sc, &q->function_sort, ch == 's' ? 0 : 1);
			return;
		case 'M':
		case 'W': {
			enum top_values v = ch == 'M' ? TOP_VALUES_MEMORY : TOP_VALUES_OFFCPU;

			q->values = q->values == v ? TOP_VALUES_CPU : v;
			requery(sc);
			return;
		}
		}
	}
}

/* --- drawing ---------------------------------------------------------- */

static void draw_status(struct screen *sc)
{
	const struct top_line *l = row_line(sc, sc->selected);
	char text[512];

	if (sc->editing)
		(void)snprintf(text, sizeof(text), "Filter by name (Enter: apply, Esc: cancel): %s_", sc->edit);
	else if (l && l->pid)
		(void)snprintf(text, sizeof(text), "selected: pid %u - Enter: its functions, arrows: move",
			       l->pid);
	else if (l && l->function)
		(void)snprintf(text, sizeof(text), "selected: %s - Enter: its callers and callees, Esc: back",
			       l->function);
	else
		(void)snprintf(text, sizeof(text), "%s", sc->n_back ? "Esc: back, q: quit" : "q: quit");
	attron(A_BOLD);
	mvaddnstr(LINES - 1, 0, text, COLS);
	attroff(A_BOLD);
}

static void draw(struct screen *sc)
{
	int y = 0;

	erase();
	for (size_t i = 0, k = 0; i < sc->frame.n && y < LINES - 1; i++, y++) {
		const struct top_line *l = &sc->frame.lines[i];
		int attr = l->kind == TOP_LINE_HEADER ? A_BOLD : l->kind == TOP_LINE_COLUMNS ? A_REVERSE : 0;

		if (l->kind == TOP_LINE_ROW && k++ == sc->selected)
			attr = A_REVERSE | A_BOLD;
		attron(attr);
		if (attr & A_REVERSE)
			mvhline(y, 0, ' ', COLS);
		mvaddnstr(y, 0, l->text, COLS);
		attroff(attr);
	}
	draw_status(sc);
	refresh();
}

/* --- the loop --------------------------------------------------------- */

/* One refresh: asks perfd and draws what it said.  False when top must
 * stop (sc->rc says why; the error is on the held stderr). */
static bool refresh_frame(struct screen *sc)
{
	_cleanup_(json_object_putp) struct json_object *answer = NULL;
	struct top_frame f;

	sc->s->q.rows = wanted_rows(sc);
	sc->rc = top_fetch(sc->s, &answer);
	if (sc->rc != PERFCTL_EXIT_OK)
		return false;
	if (top_frame_build(&f, &sc->s->q, answer) < 0) {
		top_frame_done(&f);
		ctl_error(sc->s->env, CTL_ERR_IO, "out of memory");
		sc->rc = PERFCTL_EXIT_FAILURE;
		return false;
	}
	top_frame_done(&sc->frame);
	sc->frame = f;
	reselect(sc);
	draw(sc);
	return true;
}

/* Waits for keys until the next refresh is due, a key asks for one, or
 * top must stop. */
static void wait_keys(struct screen *sc, double due)
{
	while (!sc->quit && !sc->refetch) {
		struct pollfd fds[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
					 { .fd = sc->s->fd, .events = POLLIN } };
		double left = due - top_now();
		int k, ch;

		if (left <= 0)
			return;
		k = poll(fds, 2, (int)ceil(left * 1000));
		if (stop_signal) {
			sc->quit = true;
			if (stop_signal != SIGINT) {
				(void)snprintf(sc->message, sizeof(sc->message), "top: stopped by %s",
					       strsignal(stop_signal));
				sc->rc = PERFCTL_EXIT_FAILURE;
			}
			return;
		}
		if (k < 0 && errno != EINTR) {
			(void)snprintf(sc->message, sizeof(sc->message), "top: poll: %s", strerror(errno));
			sc->rc = PERFCTL_EXIT_FAILURE;
			sc->quit = true;
			return;
		}
		if (k > 0 && fds[1].revents) {
			(void)snprintf(sc->message, sizeof(sc->message),
				       "top: perfd closed the connection (it stopped or restarted): "
				       "lost perfd at %s",
				       sc->s->env->socket_path);
			sc->rc = PERFCTL_EXIT_FAILURE;
			sc->quit = true;
			return;
		}
		if (k > 0 && fds[0].revents & (POLLHUP | POLLERR)) {
			sc->quit = true; /* the terminal went away */
			return;
		}
		/* after EINTR too: a resize arrives as KEY_RESIZE */
		while (!sc->quit && (ch = getch()) != ERR) {
			on_key(sc, ch);
			if (sc->editing || !sc->refetch)
				draw(sc);
		}
	}
}

static void set_stop_signals(void (*handler)(int))
{
	struct sigaction sa = { .sa_handler = handler }; /* no SA_RESTART: poll() returns */

	sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGINT, &sa, NULL);
	(void)sigaction(SIGTERM, &sa, NULL);
	(void)sigaction(SIGHUP, &sa, NULL);
}

enum perfctl_exit top_screen_run(struct top_session *s)
{
	struct screen sc = { .s = s, .rc = PERFCTL_EXIT_OK };
	int saved = -1, held = -1, k;

	(void)setlocale(LC_ALL, "");
	k = hold_stderr(&saved, &held);
	if (k < 0) {
		ctl_error(s->env, CTL_ERR_IO, "top: cannot set stderr aside: %s", strerror(-k));
		return PERFCTL_EXIT_FAILURE;
	}
	/* ours before curses', so that it leaves them alone */
	set_stop_signals(on_stop_signal);
	if (!initscr()) {
		release_stderr(saved, held);
		set_stop_signals(SIG_DFL);
		ctl_error(s->env, CTL_ERR_IO, "top: cannot start the screen (is TERM set?)");
		return PERFCTL_EXIT_FAILURE;
	}
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	(void)curs_set(0);
	set_escdelay(50);

	while (!sc.quit) {
		double due;

		sc.refetch = false;
		if (!refresh_frame(&sc))
			break;
		due = top_now() + s->delay;
		wait_keys(&sc, due);
	}

	endwin();
	top_frame_done(&sc.frame);
	set_stop_signals(SIG_DFL);
	release_stderr(saved, held);
	if (sc.message[0])
		fprintf(stderr, "perfctl: %s\n", sc.message);
	return sc.rc;
}
