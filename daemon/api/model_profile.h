/* SPDX-License-Identifier: MIT */
/*
 * model_profile.h - the daemon's model (profile/model.h) as the analysis
 * model (analysis/profile.h), so that the analysis perfd runs itself
 * (`top`) is the code perfctl runs on files and snapshots (`report`).
 * It sits on the daemon's side: analysis/ is linked into perfctl too and
 * knows nothing of the model.
 */
#ifndef PERFD_API_MODEL_PROFILE_H
#define PERFD_API_MODEL_PROFILE_H

#include <stdint.h>

#include "analysis/profile.h"

struct model;

/* Where a frame of the analysis profile came from in the model. */
struct model_frame_origin {
	uint32_t function; /* the model function it is */
	uint32_t mapping;  /* the first known mapping of its locations, 0: none */
};

/* The samples of m as a profile of its kind: each location one frame, the
 * function its symbol names (its outermost line: code inlined into a
 * function is that function's, as snapshot and report have it without
 * --lines) at the line it ran, in that function's file; kernel locations
 * are kernel frames.  Processes and threads are not frames.  Returns 0,
 * the profile in *ret (profile_free() it) and each of its frames' origin
 * in *ret_origins (p->n_frames entries; free() it), or -ENOMEM, -E2BIG (a
 * stack past PROFILE_MAX_DEPTH). */
int model_profile_new(const struct model *m, struct profile **ret,
		      struct model_frame_origin **ret_origins);

#endif
