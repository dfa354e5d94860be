/* SPDX-License-Identifier: MIT */
/* model_slices.c - see model_slices.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "api/command.h"
#include "api/model_slices.h"
#include "base/clock.h"
#include "base/loopstep.h"
#include "base/log.h"
#include "perfd/macro.h"

struct model_slices {
	struct daemon *d;
	struct model_opts o;
	const struct profile_parts *parts;
	struct loop_step step;
	struct model_builder *builder; /* NULL while waiting for names */
	struct names_wait names;
	bool final; /* builds with the names there are, waiting no more */
	bool counted; /* in d->models.building */
	model_slices_done_t done;
	void *userdata;
	uint64_t start_ns, slices, max_slice_ns; /* for the log */
};

DEFINE_TRIVIAL_CLEANUP_FUNC(struct model_slices, model_slices_free);

/* Starts (again) at the first part.  Returns 0 or -errno. */
static int build(struct model_slices *s)
{
	int r = model_builder_new(&s->o, s->parts, aggregator_stacks(s->d->aggregator), &s->builder);

	return r < 0 ? r : loop_step_arm(&s->step);
}

static void on_names(struct daemon *d, struct names_wait *w)
{
	struct model_slices *s = container_of(w, struct model_slices, names);
	int r;

	s->final = d->names_final;
	r = build(s);
	if (r < 0) {
		s->counted = false;
		d->models.building--;
		s->done(s, NULL, r, s->userdata); /* may free s */
	}
}

static void on_slice(void *userdata)
{
	struct model_slices *s = userdata;
	uint64_t t0 = now_monotonic_ns(), dt;
	struct model *m = NULL;
	int r;

	r = model_builder_step(s->builder, &(struct model_budget){ .deadline_ns = t0 + MODEL_SLICE_NS });
	dt = now_monotonic_ns() - t0;
	s->slices++;
	s->max_slice_ns = MAX(s->max_slice_ns, dt);
	s->d->models.slices++;
	s->d->models.max_slice_ns = MAX(s->d->models.max_slice_ns, dt);
	if (r == 0) {
		r = loop_step_arm(&s->step); /* more in a later turn */
		if (r == 0)
			return;
	}
	if (r > 0)
		r = model_builder_finish(s->builder, &m);
	s->builder = model_builder_free(s->builder);
	if (r >= 0 && m->pending_frames && !s->final) {
		m = model_free(m);
		s->names.ready = on_names;
		if (daemon_wait_for_names(s->d, &s->names) == 0)
			return;
		s->final = true; /* no timer: what there is now */
		r = build(s);
		if (r == 0)
			return;
	}
	s->counted = false;
	s->d->models.built++;
	s->d->models.building--;
	if (m)
		log_debug("Model: %zu samples, %zu locations built in %" PRIu64
			  " slices of at most %.1f ms, %.1f ms in all.",
			  m->n_samples, m->n_locations, s->slices, s->max_slice_ns / 1e6,
			  (now_monotonic_ns() - s->start_ns) / 1e6);
	s->done(s, m, r < 0 ? r : 0, s->userdata); /* may free s */
}

int model_slices_start(struct daemon *d, const struct model_opts *o,
		       const struct profile_parts *parts, model_slices_done_t done, void *userdata,
		       struct model_slices **ret)
{
	_cleanup_(model_slices_freep) struct model_slices *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	*s = (struct model_slices){ .d = d, .o = *o, .parts = parts, .final = d->names_final,
				    .done = done, .userdata = userdata,
				    .start_ns = now_monotonic_ns() };
	r = loop_step_init(&s->step, d->event, "model-slices", on_slice, s);
	if (r >= 0)
		r = build(s);
	if (r < 0)
		return r;
	d->models.building++;
	s->counted = true;
	*ret = TAKE_PTR(s);
	return 0;
}

struct model_slices *model_slices_free(struct model_slices *s)
{
	if (s) {
		if (s->counted) {
			s->d->models.building--;
			s->d->models.cancelled++;
		}
		loop_step_done(&s->step);
		model_builder_free(s->builder);
		daemon_stop_waiting(s->d, &s->names);
		free(s);
	}
	return NULL;
}

static void sliced_answer_free(struct sliced_answer *sa)
{
	sa->build = model_slices_free(sa->build);
	aggregator_release_parts(sa->d->aggregator, &sa->parts);
	jsonw_done(&sa->w);
	sa->free(sa);
}

int sliced_answer_build(struct sliced_answer *sa, const struct model_opts *o,
			model_slices_done_t done)
{
	return model_slices_start(sa->d, o, &sa->parts, done, sa, &sa->build);
}

void sliced_answer_built(struct sliced_answer *sa)
{
	sa->build = model_slices_free(sa->build);
	aggregator_release_parts(sa->d->aggregator, &sa->parts);
}

void sliced_answer_finish(struct sliced_answer *sa, int r)
{
	if (r >= 0)
		jsonw_object_end(&sa->w);
	client_set_data(sa->client, NULL);
	command_reply_writer(sa->client, &sa->w, r);
	sliced_answer_free(sa);
}

void sliced_answer_finish_on_lane(struct sliced_answer *sa, answer_write_t write,
				  const void *args, size_t args_size, const char *what,
				  struct model *m)
{
	client_set_data(sa->client, NULL);
	encode_lane_write(sa->d->encode_lane, sa->client, write, args, args_size, what, m, &sa->w);
	sliced_answer_free(sa);
}

void sliced_answer_cancel(struct daemon *d, struct client *c)
{
	sliced_answer_free(client_get_data(c));
}
