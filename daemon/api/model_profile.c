/* SPDX-License-Identifier: MIT */
/*
 * model_profile.c - the daemon's model as the analysis model
 * (model_profile.h).  One pass over the samples: a model function's name
 * and file are interned once (a cache per function), each location is one
 * frame, interned by the analysis model's builder.  Cost: the profile's
 * size (~4 bytes a frame reference) plus 8 bytes a model function, made
 * for each top refresh of the function view.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/model_profile.h"
#include "base/array.h"
#include "base/kindtab.h"
#include "perfd/macro.h"
#include "profile/model.h"

/* The profile's id of model string id, through cache (UINT32_MAX: not yet). */
static int64_t string_of(struct profile *p, const struct model *m, uint32_t id, uint32_t *cache)
{
	int64_t r;

	if (*cache != UINT32_MAX)
		return *cache;
	r = profile_intern_cstring(p, model_string(m, id));
	if (r >= 0)
		*cache = (uint32_t)r;
	return r;
}

int model_profile_new(const struct model *m, struct profile **ret,
		      struct model_frame_origin **ret_origins)
{
	_cleanup_(profile_freep) struct profile *p = NULL;
	_cleanup_free_ struct model_frame_origin *origins = NULL;
	_cleanup_free_ uint32_t *names = NULL, *files = NULL;
	size_t cap = 0;
	int r;

	r = profile_new(PROFILE_FORMAT_LIVE, &p);
	if (r < 0)
		return r;
	r = profile_set_kind(p, kind_infos[m->kind].name, kind_infos[m->kind].unit);
	if (r < 0)
		return r;
	names = malloc((m->n_functions + 1) * sizeof(*names));
	files = malloc((m->n_functions + 1) * sizeof(*files));
	if (!names || !files)
		return -ENOMEM;
	memset(names, 0xff, (m->n_functions + 1) * sizeof(*names));
	memset(files, 0xff, (m->n_functions + 1) * sizeof(*files));

	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];

		profile_stack_begin(p);
		for (uint32_t k = 0; k < s->depth; k++) {
			const struct model_location *l = &m->locations[m->stack_pool[s->first + k]];
			const struct model_line *ln = &m->lines[l->first_line];
			const struct model_function *mf = &m->functions[ln->function];
			int64_t name = string_of(p, m, mf->name, &names[ln->function]);
			int64_t file = mf->file ? string_of(p, m, mf->file, &files[ln->function]) : 0;
			size_t known = p->n_frames;
			int64_t f;

			if (name < 0 || file < 0)
				return name < 0 ? (int)name : (int)file;
			/* keyed by its function's kind, the kind the answer
			 * shows and a client asks for */
			f = profile_intern_frame(p, (uint32_t)name, (uint32_t)file, ln->line,
						 mf->kind == FRAME_KIND_KERNEL, (uint8_t)mf->kind);
			if (f < 0)
				return (int)f;
			if ((size_t)f == known) {
				if (array_grow((void **)&origins, &cap, p->n_frames, sizeof(*origins), 256) < 0)
					return -ENOMEM;
				origins[f] = (struct model_frame_origin){ ln->function, l->mapping };
			} else if (!origins[f].mapping) {
				origins[f].mapping = l->mapping;
			}
			r = profile_stack_push(p, (uint32_t)f, NULL);
			if (r < 0)
				return r;
		}
		r = profile_stack_end(p, s->value, NULL);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(p);
	*ret_origins = TAKE_PTR(origins);
	return 0;
}
