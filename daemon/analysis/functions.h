/* SPDX-License-Identifier: MIT */
/*
 * functions.h - a profile's stacks summed per function: self and total
 * (inclusive) value of each function, who calls a function and what it
 * calls, as one level (`perfctl report --callers/--callees`) or as trees
 * cut to a budget of nodes (`perfctl top`), and the dominant path through
 * the wrappers (`perfctl diagnose`).  Pure computation on the analysis
 * model (profile.h), no I/O: perfctl runs it on files and snapshots,
 * perfd on its live store for `top`, so both say the same of the same
 * stacks.  The report_ prefix is the table's name, `perfctl report`'s.
 */
#ifndef PERFD_ANALYSIS_FUNCTIONS_H
#define PERFD_ANALYSIS_FUNCTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/profile.h"
#include "base/u64map.h"
#include "perfd/macro.h"

enum report_sort {
	REPORT_SORT_SELF,
	REPORT_SORT_TOTAL,
	REPORT_SORT_NAME,
};

struct report_opts {
	bool lines;       /* a row per function and line, not per function */
	bool skip_kernel; /* leave kernel frames out of every stack */
	bool by_name;     /* a row per name, side and kind, whatever the file
			   * (diff: a folded file knows no files; top: two functions
			   * of one name and kind are one row); the row's file is
			   * one of them */
};

/* One function (or, with lines, one line of a function). */
struct report_row {
	uint32_t function, file; /* string ids of the profile; file 0: unknown */
	uint32_t line;           /* with lines, the row's; else the lowest seen; 0: unknown */
	bool kernel;
	uint8_t kind;            /* its frames' (struct profile_frame) */
	uint64_t self;  /* of the stacks it is the leaf of */
	uint64_t total; /* of the stacks it is in, once per stack */
};

struct report {
	const struct profile *p; /* not owned; must outlive the report */
	struct report_opts opts;
	struct report_row *rows;
	size_t n_rows;
	uint32_t *frame_row; /* profile frame id -> row */
	uint64_t total;      /* the profile's */
};

/* A caller of a function, or a callee; row REPORT_ROOT stands for "none":
 * the function was the outermost frame of the stack. */
#define REPORT_ROOT UINT32_MAX
struct report_edge {
	uint32_t row;
	uint64_t value;
};

struct report_relatives {
	uint64_t total; /* of the stacks holding the function */
	uint64_t self;  /* of those it is the leaf of (callees only) */
	struct report_edge *edges; /* largest first */
	size_t n_edges;
};

/* Sums p's stacks per row.  Returns 0 and the report in *ret
 * (report_free() it), or -ENOMEM. */
int report_build(const struct profile *p, const struct report_opts *o, struct report **ret);

struct report *report_free(struct report *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct report, report_free)

/* The rows' indexes in the order asked for (ties: the other of self and
 * total, then a fixed order by name, file, line and side), into order
 * (n_rows entries). */
void report_order(const struct report *r, enum report_sort sort, uint32_t *order);

/* The first row in that order into *ret_row: 0, -ENOENT for an empty
 * report, or -ENOMEM. */
int report_first(const struct report *r, enum report_sort sort, uint32_t *ret_row);

/* Marks in match (n_rows entries) the rows of the function named name
 * ("name_[k]" for a kernel one; a plain name takes the user-space
 * function, else the kernel one).  Returns how many. */
size_t report_match(const struct report *r, const char *name, bool *match);

/* Who calls the function named name (see report_match()): per stack
 * holding it, the frame above its outermost call, so the edges' values
 * add up to its total, recursion counted once.  Returns 0 and the callers
 * in *ret (free its edges), -ENOENT when no row has that name, -ENOMEM. */
int report_callers(const struct report *r, const char *name, struct report_relatives *ret);

/* What it calls: per stack holding it, the frame below its innermost call,
 * or its self when that call is the leaf; edges plus self add up to its
 * total.  Returns as report_callers(). */
int report_callees(const struct report *r, const char *name, struct report_relatives *ret);

/* Callers or callees as a tree: a stack's value goes along the frames
 * above the outermost call (up to the root, then REPORT_ROOT) or below the
 * innermost one, depth levels deep; one level is report_callers()'s or
 * report_callees()'s edges. */
#define REPORT_TOP UINT32_MAX /* the parent of the nodes of the first level */
struct report_node {
	uint32_t parent; /* a node, or REPORT_TOP */
	uint32_t row;    /* or REPORT_ROOT */
	uint64_t value;
	uint32_t first_child, n_children; /* in the tree's order[] */
};

struct report_tree {
	const struct report *r;
	uint64_t total, self; /* as report_relatives' */
	struct report_node *nodes;
	size_t n, cap;
	struct u64map index; /* (parent + 1) << 32 | row -> node */
	uint32_t *order;     /* nodes by parent (the first level last), then as the edges */
	bool *sent;          /* report_tree_choose()'s */
};

/* The tree of the rows marked in match (report_match()), callers or
 * callees, depth levels (>= 1).  Returns 0 and *ret (report_tree_done()
 * it, also on failure), or -ENOMEM. */
int report_tree_build(const struct report *r, const bool *match, bool callers, unsigned depth,
		      struct report_tree *ret);

/* Marks in t->sent the budget nodes an answer holds, level by level and
 * the largest of each level first: every direct caller (or callee) before
 * any of their own, so one deep subtree cannot crowd out a sibling of
 * nearly its share.  A node is sent only with its parent.  0 or -ENOMEM. */
int report_tree_choose(struct report_tree *t, size_t budget);

/* The first and the number of the children of node (REPORT_TOP: the first
 * level) in t->order, largest first. */
void report_tree_children(const struct report_tree *t, uint32_t node, size_t *ret_first,
			  size_t *ret_n);

void report_tree_done(struct report_tree *t);

/* Where the time goes through the wrappers: from the function with the
 * largest total, up through the callers that wrap it (its caller in at
 * least pass_through of its stacks, passing at least pass_through of their
 * own to it: stacks cut short hold the inner functions and not main, so the
 * largest total is not always the outermost wrapper's), then down through
 * every callee that carries at least pass_through of its caller, to the
 * first function whose time is divided or spent in itself.  Returns 0, that
 * function's row in *ret_row and its callees in *ret_callees (free its
 * edges), and the wrappers passed through, outermost first, in path (at
 * most max_path, their number in *ret_n_path); -ENOENT for an empty
 * report, -ENOMEM. */
int report_dominant(const struct report *r, double pass_through, uint32_t *path, size_t max_path,
		    size_t *ret_n_path, uint32_t *ret_row, struct report_relatives *ret_callees);

/* 100 * part / whole, 0 for an empty whole. */
double report_percent(uint64_t part, uint64_t whole);

#endif
