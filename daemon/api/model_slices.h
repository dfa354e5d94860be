/* SPDX-License-Identifier: MIT */
/*
 * model_slices.h - an answer's model built on the loop, a slice at a time,
 * with the names of its frames.
 *
 * A model of ~60k unique stacks took 340-650 ms to build under load, in
 * one turn of the loop, and every other client (root's status too) waited
 * for it.  Here the build (profile/model.h's builder) runs a step
 * (base/loopstep.h) of MODEL_SLICE_NS a turn: between two slices the loop
 * serves whatever became ready first, yet a loop that is never idle (a
 * client pipelining requests) cannot starve the build: it gets a slice
 * every LOOP_STEP_STARVED_NS at least.  The loop thread builds, as before, so the resolvers
 * (symbolizer, interp/python, persist) stay the loop's alone.
 *
 * A model whose frames read module+offset because their tables were being
 * built off the loop (model.pending_frames) is thrown away and built again
 * once the names are there (daemon.h's names wait, within
 * DAEMON_NAMES_WAIT_MS): the caller gets the model it answers with.
 *
 * The request stays pending meanwhile: the caller keeps this with its
 * client's data (api/command.h), and a client that goes away, or a
 * command cancelled, frees it (model_slices_free): the build stops where
 * it is, its half-built model is freed, its wait for names ended.  The
 * parts stay with the caller, unchanged, until then (model.h says why the
 * store may change meanwhile).  Cost: a build takes a little longer (a
 * clock read per stack, the loop's other work between slices), and its
 * parts stay pinned that long.
 *
 * A sliced_answer is the part of such a pending command (mem, top) that
 * holds its writer, its parts and its build, and sends the answer once
 * the last model is written into it.
 */
#ifndef PERFD_MODEL_SLICES_H
#define PERFD_MODEL_SLICES_H

#include <systemd/sd-event.h>

#include "api/command.h"
#include "api/encode_lane.h"
#include "base/jsonw.h"
#include "profile/model.h"

struct model_slices;


/* Called from the loop once the model is built: m is the caller's (r 0),
 * or NULL and r < 0.  s is the caller's to free, here or later. */
typedef void (*model_slices_done_t)(struct model_slices *s, struct model *m, int r,
				    void *userdata);

/* Starts building parts (resolved with o) on d's loop; done is called
 * from a later turn, never from inside this call.  Returns 0 or -errno
 * (-ENOMEM, sd-event's): nothing was started. */
int model_slices_start(struct daemon *d, const struct model_opts *o,
		       const struct profile_parts *parts, model_slices_done_t done, void *userdata,
		       struct model_slices **ret);
/* Stops the build, if it is still going, and frees it.  Accepts NULL. */
struct model_slices *model_slices_free(struct model_slices *s);

/* An answer written as its models come (mem's, top's): the start of its
 * command's client data, which holds what the command needs besides. */
struct sliced_answer {
	struct command_pending pending; /* first: the client's data */
	struct daemon *d;
	struct client *client;
	struct jsonw w;             /* the answer so far, an open object */
	struct profile_parts parts; /* of the model being built */
	struct model_slices *build;
	/* frees what the command holds besides, and sa (its container) */
	void (*free)(struct sliced_answer *sa);
};

/* Starts building sa->parts (filled by the caller) with o; done as for
 * model_slices_start, with sa as userdata.  Returns 0 or -errno. */
int sliced_answer_build(struct sliced_answer *sa, const struct model_opts *o,
			model_slices_done_t done);
/* In done: the build is over; its parts are released. */
void sliced_answer_built(struct sliced_answer *sa);
/* Closes the answer and sends it (r < 0: the error instead), then frees
 * sa. */
void sliced_answer_finish(struct sliced_answer *sa, int r);
/* Has a lane write m with write (api/encode_lane.h: encode_lane_write,
 * which takes m, copies args) into the answer, close and send it; frees
 * sa now. */
void sliced_answer_finish_on_lane(struct sliced_answer *sa, answer_write_t write,
				  const void *args, size_t args_size, const char *what,
				  struct model *m);
/* A command's cancel (command.h) for a client whose data is one. */
void sliced_answer_cancel(struct daemon *d, struct client *c);

#endif
