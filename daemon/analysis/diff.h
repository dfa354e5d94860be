/* SPDX-License-Identifier: MIT */
/*
 * diff.h - two profiles compared per function, as `perfctl diff` prints
 * them: each function's self and total value on both sides, as a share of
 * its own profile's total, and the change of those shares in points, the
 * largest change first.  Pure computation on two analysis profiles
 * (profile.h), built on functions.h's rows; no I/O.
 */
#ifndef PERFD_ANALYSIS_DIFF_H
#define PERFD_ANALYSIS_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/profile.h"
#include "perfd/macro.h"

struct diff_side {
	uint64_t self, total; /* 0 on the side where the function is absent */
	double self_percent, total_percent; /* of that side's profile total */
};

/* One function, matched across the profiles by its name and its side of
 * the kernel boundary (a folded file knows no files, so files cannot be
 * part of the key). */
struct diff_row {
	const char *function; /* in one profile's strings: they must outlive the diff */
	bool kernel;
	struct diff_side before, after;
	double self_delta, total_delta; /* after's share - before's, in points */
	double change;                  /* the larger of |self_delta| and |total_delta| */
};

struct diff {
	uint64_t before_total, after_total;
	struct diff_row *rows; /* the largest change first; ties by name, user before kernel */
	size_t n_rows;
};

/* Compares before and after per function (report_build()'s rows, kernel
 * frames left out with skip_kernel; functions in no stack of either side
 * left out too).  Returns 0 and the diff in *ret
 * (diff_free() it), or -ENOMEM. */
int diff_build(const struct profile *before, const struct profile *after, bool skip_kernel,
	       struct diff **ret);

/* Frees d; accepts NULL; returns NULL. */
struct diff *diff_free(struct diff *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct diff, diff_free)

#endif
