/* SPDX-License-Identifier: MIT */
/*
 * speedscope.c - speedscope's file format (the schema its npm package
 * ships as file-format-schema.json), one "sampled" profile per process,
 * or per thread when threads are kept apart:
 *
 *   { "$schema": "https://www.speedscope.app/file-format-schema.json",
 *     "exporter": "perfd", "name": "perfd cpu snapshot",
 *     "activeProfileIndex": the heaviest profile (none without profiles),
 *     "shared": { "frames": [ { "name", "file", "line" }, ... ] },
 *     "profiles": [ { "type": "sampled", "name": "COMM (pid PID)"
 *                       (+ " thread TID TCOMM" with threads),
 *                     "unit", "startValue": 0, "endValue": sum of weights,
 *                     "samples": [ [frame, ...] root first ], "weights" } ] }
 *
 * A frame is a function at a line: one per distinct (function, line) of the
 * model's lines, so each function inlined at an address is a frame of its
 * own, as in json.c, and frames are shared by every profile.  "file" and
 * "line" are there where the model knows them (Python frames always, native
 * ones with --lines); kernel frames are named with folded's "_[k]" suffix,
 * so a folded file and a speedscope file of one snapshot read alike.
 * Weights are in the kind's unit as speedscope names units: CPU samples x
 * the period in "nanoseconds", memory in "bytes", off-CPU "nanoseconds".
 * Processes (threads) without samples get no profile.
 *
 * Samples are the model's, grouped by sorting (process, tid, index)
 * triples; nothing is merged again.  Memory: the frames map and two words
 * per model line, three per sample, beside the writer's output.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/kindtab.h"
#include "encode/encode.h"
#include "perfd/macro.h"

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

/* One sample's place: samples of a profile are consecutive once sorted. */
struct entry {
	uint32_t process, tid, sample;
};

struct speedscope {
	const struct model *m;
	enum profile_kind kind;
	uint64_t multiplier;   /* value -> weight */
	uint32_t *line_frame;  /* model line -> frame index */
	uint32_t *frame_line;  /* frame index -> a model line that reads so */
	size_t n_frames;
	struct entry *entries; /* by (process, tid, sample) */
};

static int entry_cmp(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;

	if (a->process != b->process)
		return a->process < b->process ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->sample < b->sample ? -1 : a->sample > b->sample;
}

/* Gives every model line its frame, lines that read alike (one function,
 * one line number) one frame.  Returns 0 or -ENOMEM. */
static int build_frames(struct speedscope *s)
{
	const struct model *m = s->m;
	struct u64map index; /* function << 32 | line -> frame */
	int r = 0;

	s->line_frame = calloc(m->n_lines ? m->n_lines : 1, sizeof(*s->line_frame));
	s->frame_line = calloc(m->n_lines ? m->n_lines : 1, sizeof(*s->frame_line));
	if (!s->line_frame || !s->frame_line)
		return -ENOMEM;
	u64map_init(&index);
	for (size_t i = 0; i < m->n_lines; i++) {
		uint64_t key = (uint64_t)m->lines[i].function << 32 | m->lines[i].line;
		bool fresh;
		uint64_t *v = u64map_upsert(&index, key, &fresh);

		if (!v) {
			r = -ENOMEM;
			break;
		}
		if (fresh) {
			*v = s->n_frames;
			s->frame_line[s->n_frames++] = (uint32_t)i;
		}
		s->line_frame[i] = (uint32_t)*v;
	}
	u64map_done(&index);
	return r;
}

static int build_entries(struct speedscope *s)
{
	const struct model *m = s->m;

	s->entries = calloc(m->n_samples ? m->n_samples : 1, sizeof(*s->entries));
	if (!s->entries)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_samples; i++)
		s->entries[i] = (struct entry){ m->samples[i].process,
						m->threads ? m->samples[i].tid : 0, (uint32_t)i };
	qsort_safe(s->entries, m->n_samples, sizeof(*s->entries), entry_cmp);
	return 0;
}

/* The end of the profile that begins at entry i: the first entry of
 * another process or thread. */
static size_t profile_end(const struct speedscope *s, size_t i)
{
	size_t j = i + 1;

	while (j < s->m->n_samples && s->entries[j].process == s->entries[i].process &&
	       s->entries[j].tid == s->entries[i].tid)
		j++;
	return j;
}

static uint64_t weight(const struct speedscope *s, const struct model_sample *sm)
{
	return sm->value * s->multiplier;
}

static void write_frame(const struct speedscope *s, size_t i, struct jsonw *w)
{
	const struct model *m = s->m;
	const struct model_line *ln = &m->lines[s->frame_line[i]];
	const struct model_function *f = &m->functions[ln->function];
	const char *name = model_string(m, f->name);

	jsonw_object_begin(w);
	jsonw_key(w, "name");
	jsonw_string_begin(w);
	jsonw_string_append(w, name, strlen(name));
	if (f->kind == FRAME_KIND_KERNEL)
		jsonw_string_append(w, "_[k]", 4);
	jsonw_string_end(w);
	if (f->file) {
		jsonw_kv_string(w, "file", model_string(m, f->file));
		if (ln->line)
			jsonw_kv_u64(w, "line", ln->line);
	}
	jsonw_object_end(w);
}

/* "COMM (pid PID)", and " thread TID TCOMM" with threads. */
static void write_profile_name(const struct speedscope *s, const struct model_sample *first,
			       struct jsonw *w)
{
	const struct model *m = s->m;
	const struct model_process *p = &m->processes[first->process];
	const char *comm = model_string(m, p->comm);
	char num[64];

	jsonw_key(w, "name");
	jsonw_string_begin(w);
	jsonw_string_append(w, comm, strlen(comm));
	jsonw_string_append(w, num, (size_t)snprintf(num, sizeof(num), " (pid %" PRIu32 ")", p->pid));
	if (m->threads) {
		const char *tcomm = model_string(m, first->thread_comm);

		jsonw_string_append(w, num, (size_t)snprintf(num, sizeof(num), " thread %" PRIu32 "%s",
							     first->tid, *tcomm ? " " : ""));
		jsonw_string_append(w, tcomm, strlen(tcomm));
	}
	jsonw_string_end(w);
}

/* The profile of entries [i, end), flushed to out as it grows, so that
 * one process's samples are not held twice. */
static int write_profile(const struct speedscope *s, size_t i, size_t end, struct jsonw *w,
			 struct encode_sink *out)
{
	int r = 0;
	const struct model *m = s->m;
	uint64_t total = 0;

	for (size_t k = i; k < end; k++)
		total += weight(s, &m->samples[s->entries[k].sample]);
	jsonw_object_begin(w);
	jsonw_kv_string(w, "type", "sampled");
	write_profile_name(s, &m->samples[s->entries[i].sample], w);
	jsonw_kv_string(w, "unit", kind_infos[s->kind].pprof_unit);
	jsonw_kv_u64(w, "startValue", 0);
	jsonw_kv_u64(w, "endValue", total);
	jsonw_key(w, "samples");
	jsonw_array_begin(w);
	for (size_t k = i; k < end && r == 0; k++) {
		const struct model_sample *sm = &m->samples[s->entries[k].sample];

		jsonw_array_begin(w);
		for (uint32_t d = 0; d < sm->depth; d++) {
			const struct model_location *l = &m->locations[m->stack_pool[sm->first + d]];

			for (uint32_t j = 0; j < l->n_lines; j++)
				jsonw_u64(w, s->line_frame[l->first_line + j]);
		}
		jsonw_array_end(w);
		r = encode_sink_flush_jsonw(out, w, ENCODE_JSON_CHUNK);
	}
	jsonw_array_end(w);
	jsonw_key(w, "weights");
	jsonw_array_begin(w);
	for (size_t k = i; k < end && r == 0; k++) {
		jsonw_u64(w, weight(s, &m->samples[s->entries[k].sample]));
		r = encode_sink_flush_jsonw(out, w, ENCODE_JSON_CHUNK);
	}
	jsonw_array_end(w);
	jsonw_object_end(w);
	return r;
}

/* The index of the profile with the most weight (the first of equals),
 * which speedscope opens on. */
static size_t heaviest_profile(const struct speedscope *s)
{
	uint64_t best = 0;
	size_t best_index = 0, index = 0;

	for (size_t i = 0, end; i < s->m->n_samples; i = end, index++) {
		uint64_t total = 0;

		end = profile_end(s, i);
		for (size_t k = i; k < end; k++)
			total += s->m->samples[s->entries[k].sample].value;
		if (total > best) {
			best = total;
			best_index = index;
		}
	}
	return best_index;
}

static void speedscope_done(struct speedscope *s)
{
	free(s->line_frame);
	free(s->frame_line);
	free(s->entries);
}

int speedscope_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *out)
{
	enum profile_kind kind = m->kind < PROFILE_KINDS ? m->kind : PROFILE_KIND_CPU;
	_cleanup_(speedscope_done) struct speedscope s = { .m = m, .kind = kind };
	_cleanup_(jsonw_done) struct jsonw doc;
	struct jsonw *w = &doc;
	int r;

	jsonw_init(w);
	s.multiplier = kind_infos[kind].period == PERFD_KIND_PERIOD_PERIODS ? o->period_ns : 1;
	r = build_frames(&s);
	if (r == 0)
		r = build_entries(&s);
	if (r == 0) {
		jsonw_object_begin(w);
		jsonw_kv_string(w, "$schema", SPEEDSCOPE_SCHEMA);
		jsonw_kv_string(w, "exporter", "perfd");
		jsonw_key(w, "name");
		jsonw_string_begin(w);
		jsonw_string_append(w, "perfd ", 6);
		jsonw_string_append(w, kind_infos[kind].name, strlen(kind_infos[kind].name));
		jsonw_string_append(w, " snapshot", 9);
		jsonw_string_end(w);
		if (m->n_samples > 0)
			jsonw_kv_u64(w, "activeProfileIndex", heaviest_profile(&s));
		jsonw_key(w, "shared");
		jsonw_object_begin(w);
		jsonw_key(w, "frames");
		jsonw_array_begin(w);
		for (size_t i = 0; i < s.n_frames && r == 0; i++) {
			write_frame(&s, i, w);
			r = encode_sink_flush_jsonw(out, w, ENCODE_JSON_CHUNK);
		}
		jsonw_array_end(w);
		jsonw_object_end(w);
		jsonw_key(w, "profiles");
		jsonw_array_begin(w);
		for (size_t i = 0, end; i < m->n_samples && r == 0; i = end) {
			end = profile_end(&s, i);
			r = write_profile(&s, i, end, w, out);
			if (r == 0)
				r = encode_sink_flush_jsonw(out, w, ENCODE_JSON_CHUNK);
		}
		jsonw_array_end(w);
		jsonw_object_end(w);
		if (r == 0)
			r = encode_sink_flush_jsonw(out, w, 0);
	}
	return r;
}
