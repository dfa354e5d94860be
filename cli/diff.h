/* SPDX-License-Identifier: MIT */
/*
 * diff.h - two profiles compared, as `perfctl diff` shows them: the table
 * of the analysis module (analysis/diff.h), or drawn as a differential
 * flame graph (diff_flame.c).  Pure computation on two struct profiles
 * (analysis/profile.h); no I/O.
 */
#ifndef PERFCTL_DIFF_H
#define PERFCTL_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/diff.h"
#include "perfd/macro.h"
#include "profile_read.h"

struct diff_flame_opts {
	bool svg;         /* the static SVG, not the interactive page */
	bool skip_kernel; /* leave kernel frames out (memory) */
	const char *before_source, *after_source; /* named in the graph */
};

/* The differential flame graph of before and after (diff_flame.c): a page
 * or an SVG document in *ret (free() it), *ret_len bytes.  Returns 0, or
 * -ENOMEM, -E2BIG (names past 2^30 bytes). */
int diff_flame(const struct profile *before, const struct profile *after,
	       const struct diff_flame_opts *o, char **ret, size_t *ret_len);

#endif
