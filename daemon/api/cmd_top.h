/* SPDX-License-Identifier: MIT */
/*
 * cmd_top.h - "top"'s arguments (cmd_top.c parses them; protocol.h says
 * what each field of the request is), and its function table as a unit of
 * its own for tests/unit/test-top.c.
 */
#ifndef PERFD_CMD_TOP_H
#define PERFD_CMD_TOP_H

#include <stdbool.h>
#include <stdint.h>

#include "perfd/protocol.h"

enum top_view { TOP_PROCESSES, TOP_FUNCTIONS };

struct top_args {
	int view;                 /* enum top_view */
	int sort;                 /* an index in that view's sort keys */
	unsigned interval_seconds;
	unsigned rows, offset, depth;
	bool all;                 /* every live process, not the active ones */
	bool kernel_threads;
	char filter[PERFD_TOP_FILTER_BYTES];         /* "" for none */
	int kind;                 /* enum profile_kind (functions) */
	uint32_t pid;             /* the one process (functions); 0: every one */
	char function[PERFD_TOP_MAX_FUNCTION_BYTES]; /* "" for none */
	int function_kind;        /* enum frame_kind, -1 for any */
};

struct model;
struct jsonw;

/* The function view of model m as the fields of the answer (sort ...
 * functions, function) that args ask for, into w.  Returns 0 or -ENOMEM. */
int top_write_function_table(const struct top_args *args, const struct model *m, struct jsonw *w);

#endif
