/* SPDX-License-Identifier: MIT */
/*
 * top.h - what `perfctl top`'s three files share: the query one refresh
 * asks perfd for (top.c builds the request and keeps the connection), and
 * the frame of text an answer makes (top_text.c), which batch mode prints
 * and the screen (top_screen.c) draws, so both show the very same lines.
 */
#ifndef PERFCTL_TOP_H
#define PERFCTL_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/clock.h"
#include "perfctl.h"
#include "perfd/protocol.h"

struct json_object;

enum top_view { TOP_VIEW_PROCESSES, TOP_VIEW_FUNCTIONS };

/* What the function view counts: CPU samples, memory growth (-M, bytes),
 * or off-CPU time (-W, nanoseconds: where threads wait).  The protocol's
 * kinds, by name in top_kinds. */
enum top_values { TOP_VALUES_CPU, TOP_VALUES_MEMORY, TOP_VALUES_OFFCPU };
extern const char *const top_kinds[3]; /* cpu memory offcpu */

/* The sort keys, as the protocol names them (protocol.h, "top"). */
extern const char *const top_process_sorts[4];  /* cpu rss peak growth */
extern const char *const top_function_sorts[2]; /* self total */

/* What one refresh asks for. */
struct top_query {
	enum top_view view;
	int process_sort;  /* index in top_process_sorts */
	int function_sort; /* index in top_function_sorts */
	enum top_values values; /* functions: what they count */
	uint32_t pid;      /* functions: of this process; 0: of all of them */
	char function[PERFD_TOP_MAX_FUNCTION_BYTES]; /* its callers and callees; "" none */
	char function_kind[16];                      /* of that function ("native") */
	char filter[PERFD_TOP_FILTER_BYTES];         /* comm substring; "" none */
	bool kernel_threads;
	bool all;          /* every live process, not only the active ones */
	unsigned interval; /* whole seconds perfd counts over */
	unsigned rows, offset, depth;
};

/* One session: the connection, kept open for every refresh. */
struct top_session {
	struct ctl_env *env;
	int fd;
	double delay;    /* seconds between refreshes */
	long iterations; /* batch: how many frames; 0: until stopped */
	struct top_query q;
};

/* Asks perfd for one refresh of s->q.  Returns PERFCTL_EXIT_OK and the
 * answer (owned by the caller), each process given its "user" (the name
 * of its uid, or null), or an exit code after reporting the error as
 * ctl_exchange() does. */
enum perfctl_exit top_fetch(struct top_session *s, struct json_object **ret);

/* CLOCK_MONOTONIC in seconds: when refreshes are due. */
static inline double top_now(void)
{
	return (double)now_monotonic_ns() / NSEC_PER_SEC;
}

/* When the refresh after one due at due that started at started is due:
 * delay after the later of the two, so refreshes that ran late (a slow
 * answer, a loaded machine) are not made up for by others back to back. */
double top_next_due(double due, double started, double delay);

/* The screen: runs until q, Ctrl-C, a signal or perfd going away, and
 * leaves the terminal as it found it.  Returns the exit code. */
enum perfctl_exit top_screen_run(struct top_session *s);

/* --- top_text.c: an answer as lines of text ------------------------- */

enum top_line_kind {
	TOP_LINE_HEADER,  /* the host, the view */
	TOP_LINE_COLUMNS, /* column titles */
	TOP_LINE_ROW,     /* an item one can select: a process or a function */
	TOP_LINE_TEXT,    /* anything else (titles of the callers' tree ...) */
};

struct top_line {
	enum top_line_kind kind;
	char *text;
	/* what a ROW stands for */
	uint32_t pid;          /* a process, 0 for a function */
	char *function;        /* a function's name, NULL for a process */
	char function_kind[16];
};

struct top_frame {
	struct top_line *lines;
	size_t n, cap;
	size_t rows;    /* how many of the lines are ROWs */
	size_t matched; /* how many items perfd had, before rows and offset */
};

/* Turns answer (to query q) into f's lines, escaped for a terminal.
 * Returns 0, or -ENOMEM (f holds what was built; free it either way). */
int top_frame_build(struct top_frame *f, const struct top_query *q, struct json_object *answer);
void top_frame_done(struct top_frame *f);

/* How many lines a frame has above its first row in every view (the
 * screen gives perfd the rest of the terminal as rows). */
#define TOP_FRAME_HEADER_LINES 3

#endif
