/* SPDX-License-Identifier: MIT */
/*
 * folded.c - the folded-stack format (Brendan Gregg's flamegraph.pl input,
 * also read by speedscope, inferno and `perf script | stackcollapse`).
 *
 * One line per stack: "comm;root;...;leaf COUNT\n" (with threads,
 * "comm;[thread TID COMM];root;..."); kernel frames carry the suffix
 * "_[k]" as in stackcollapse-perf.pl; a native frame with lines reads
 * "function (file:line)" with the file's directories dropped, and each
 * function inlined there is a frame of its own; a Python frame reads
 * "qualname (file:line)", or "qualname (file)" without lines.  A ';' or a
 * control byte in a name would break the format and is replaced by '_'.
 * Lines come most samples first, ties in an order fixed by their text (a
 * hash of it), so the output is deterministic whatever order the samples
 * came in; stacks that read alike make one line.
 *
 * Built for 100k+ stacks: each line of a location of the model is named
 * once, names that read alike share one id, a line is an array of name
 * ids, and only the merged lines are sorted and written.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "encode/encode.h"
#include "perfd/macro.h"

struct name {
	uint32_t offset, len; /* in the text arena */
	uint64_t hash;        /* of the text */
};

struct line {
	uint32_t first, depth; /* name ids in ids[], root first */
	uint64_t hash;
	uint64_t count;
};

struct folded {
	char *text;
	size_t text_len, text_cap;
	struct name *names;
	size_t n_names, cap_names;
	struct u64map by_text; /* text hash (+ probing) -> name id */
	uint32_t *ids;
	size_t n_ids, cap_ids;
	struct line *lines;
	size_t n_lines, cap_lines;
	struct u64map by_line; /* line hash (+ probing) -> line index */
};

/* Appends s sanitized; returns 0 or -ENOMEM. */
static int append(struct folded *f, const char *s, size_t n)
{
	if (array_grow((void **)&f->text, &f->text_cap, f->text_len + n + 1, 1, 1024) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		f->text[f->text_len++] = c == ';' || c < 0x20 || c == 0x7f ? '_' : (char)c;
	}
	return 0;
}

static int appendf(struct folded *f, const char *fmt, ...) _printf_(2, 3);
static int appendf(struct folded *f, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return append(f, buf, (size_t)MIN(MAX(n, 0), (int)sizeof(buf) - 1));
}

/* Interns the text from offset start to the end of the arena as a name
 * (dropping it from the arena when an equal name exists).  Returns its id
 * or -ENOMEM. */
static int64_t finish_name(struct folded *f, size_t start)
{
	size_t len = f->text_len - start;
	uint64_t h = hash_text(f->text + start, len);

	for (uint64_t key = h & ~1ULL;; key = (key + 2) & ~1ULL) {
		bool fresh;
		uint64_t *id = u64map_upsert(&f->by_text, key, &fresh);
		struct name *nm;

		if (!id)
			return -ENOMEM;
		if (!fresh) {
			nm = &f->names[*id];
			if (nm->len != len || memcmp(f->text + nm->offset, f->text + start, len) != 0)
				continue;
			f->text_len = start;
			return (int64_t)*id;
		}
		if (array_grow((void **)&f->names, &f->cap_names, f->n_names + 1, sizeof(*f->names), 1024) < 0) {
			u64map_remove(&f->by_text, key);
			return -ENOMEM;
		}
		f->names[f->n_names] = (struct name){ (uint32_t)start, (uint32_t)len, h };
		*id = f->n_names;
		return (int64_t)f->n_names++;
	}
}

static int append_line(struct folded *f, const struct model *m, const struct model_line *ln)
{
	const struct model_function *fn = &m->functions[ln->function];
	const char *file = model_string(m, fn->file);
	int r = append(f, model_string(m, fn->name), strlen(model_string(m, fn->name)));

	if (r < 0 || !*file)
		return r;
	if (fn->kind == FRAME_KIND_PYTHON)
		return ln->line ? appendf(f, " (%s:%u)", file, ln->line) : appendf(f, " (%s)", file);
	if (fn->kind == FRAME_KIND_NATIVE || fn->kind == FRAME_KIND_JIT) {
		const char *base = strrchr(file, '/');

		return appendf(f, " (%s:%u)", base ? base + 1 : file, ln->line);
	}
	return 0;
}

/* Names each line of a location, outermost first, into line_names (by
 * index in the model's lines): an inlined function is a frame of its own,
 * so no name holds a ';' and stacks that read alike have the same ids. */
static int location_names(struct folded *f, const struct model *m,
			  const struct model_location *l, int64_t *line_names)
{
	for (uint32_t i = 0; i < l->n_lines; i++) {
		size_t start = f->text_len;
		int64_t id;

		if (append_line(f, m, &m->lines[l->first_line + i]) < 0 ||
		    (l->kind == FRAME_KIND_KERNEL && append(f, "_[k]", 4) < 0) ||
		    (id = finish_name(f, start)) < 0)
			return -ENOMEM;
		line_names[l->first_line + i] = id;
	}
	return 0;
}

static int add_line(struct folded *f, const uint32_t *ids, uint32_t depth, uint64_t count)
{
	struct line l = { .first = (uint32_t)f->n_ids, .depth = depth, .count = count,
			  .hash = 0x9e3779b97f4a7c15ULL };

	/* of the names' texts, not their ids: the order of ties below
	 * depends on the text alone, not on the order names were met */
	for (uint32_t i = 0; i < depth; i++)
		l.hash = hash_u64(l.hash ^ f->names[ids[i]].hash);
	for (uint64_t key = l.hash & ~1ULL;; key = (key + 2) & ~1ULL) {
		bool fresh;
		uint64_t *idx = u64map_upsert(&f->by_line, key, &fresh);
		struct line *o;

		if (!idx)
			return -ENOMEM;
		if (!fresh) {
			o = &f->lines[*idx];
			if (o->depth != depth || memcmp(f->ids + o->first, ids, depth * sizeof(*ids)) != 0)
				continue;
			o->count += count;
			return 0;
		}
		if (array_grow((void **)&f->lines, &f->cap_lines, f->n_lines + 1, sizeof(*f->lines), 1024) < 0 ||
		    array_grow((void **)&f->ids, &f->cap_ids, f->n_ids + depth, sizeof(*f->ids), 1024) < 0) {
			u64map_remove(&f->by_line, key);
			return -ENOMEM;
		}
		memcpy(f->ids + f->n_ids, ids, depth * sizeof(*ids));
		f->n_ids += depth;
		*idx = f->n_lines;
		f->lines[f->n_lines++] = l;
		return 0;
	}
}

/* What follows name i in line l's text: ';', or -1 at its end. */
static int after_name(const struct line *l, uint32_t i)
{
	return i + 1 < l->depth ? ';' : -1;
}

/* Most samples first, then by the hash of the lines' text, then (two equal
 * hashes) in the byte order of the text.  Names hold no ';', so where one
 * name begins the other, the text goes on with the shorter one's ';' (or
 * its end) against the longer one's next byte. */
static int line_cmp(const void *x, const void *y, void *ctx)
{
	const struct line *a = x, *b = y;
	const struct folded *f = ctx;

	if (a->count != b->count)
		return a->count < b->count ? 1 : -1;
	/* Ties by a hash of the text (a fixed order, and one comparison where
	 * walking 100k lines' names cost a fifth of a big snapshot), by the
	 * text itself only if two hashes meet. */
	if (a->hash != b->hash)
		return a->hash < b->hash ? -1 : 1;
	for (uint32_t i = 0; i < a->depth && i < b->depth; i++) {
		uint32_t ia = f->ids[a->first + i], ib = f->ids[b->first + i];
		const struct name *na = &f->names[ia], *nb = &f->names[ib];
		int c, ca, cb;

		if (ia == ib)
			continue;
		c = memcmp(f->text + na->offset, f->text + nb->offset, MIN(na->len, nb->len));
		if (c || na->len == nb->len)
			return c;
		ca = na->len < nb->len ? after_name(a, i) : (unsigned char)f->text[na->offset + nb->len];
		cb = na->len < nb->len ? (unsigned char)f->text[nb->offset + na->len] : after_name(b, i);
		return ca < cb ? -1 : 1;
	}
	return a->depth < b->depth ? -1 : a->depth > b->depth;
}

static void folded_done(struct folded *f)
{
	free(f->text);
	free(f->names);
	free(f->ids);
	free(f->lines);
	u64map_done(&f->by_text);
	u64map_done(&f->by_line);
}

static int build(struct folded *f, const struct model *m)
{
	_cleanup_free_ int64_t *line_names = calloc(m->n_lines ? m->n_lines : 1, sizeof(int64_t));
	_cleanup_free_ int64_t *roots = calloc(m->n_processes ? m->n_processes : 1, sizeof(int64_t));
	_cleanup_free_ uint32_t *ids = NULL;
	size_t cap = 0;

	if (!line_names || !roots)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_locations; i++)
		if (location_names(f, m, &m->locations[i], line_names) < 0)
			return -ENOMEM;
	for (size_t i = 0; i < m->n_processes; i++) {
		const char *comm = model_string(m, m->processes[i].comm);
		size_t start = f->text_len;

		if (append(f, comm, strnlen(comm, 63)) < 0 || (roots[i] = finish_name(f, start)) < 0)
			return -ENOMEM;
	}
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];
		uint32_t d = 0;

		if (array_grow((void **)&ids, &cap, 2, sizeof(*ids), 1024) < 0)
			return -ENOMEM;
		ids[d++] = (uint32_t)roots[s->process];
		if (m->threads) {
			const char *comm = model_string(m, s->thread_comm);
			size_t start = f->text_len;
			int64_t t;

			if (appendf(f, "[thread %u%s%s]", s->tid, *comm ? " " : "", comm) < 0 ||
			    (t = finish_name(f, start)) < 0)
				return -ENOMEM;
			ids[d++] = (uint32_t)t;
		}
		for (uint32_t k = 0; k < s->depth; k++) {
			const struct model_location *l = &m->locations[m->stack_pool[s->first + k]];

			if (array_grow((void **)&ids, &cap, d + l->n_lines, sizeof(*ids), 1024) < 0)
				return -ENOMEM;
			for (uint32_t j = 0; j < l->n_lines; j++)
				ids[d++] = (uint32_t)line_names[l->first_line + j];
		}
		if (add_line(f, ids, d, s->value) < 0)
			return -ENOMEM;
	}
	qsort_r_safe(f->lines, f->n_lines, sizeof(*f->lines), line_cmp, f);
	return 0;
}

/* Writes the lines to s, each whole in one write (a sink that escapes
 * for JSON then never sees a name cut in two), gathered in line. */
static int write_lines(const struct folded *f, struct encode_buffer *line, struct encode_sink *s)
{
	size_t size = 0;
	int r = 0;

	/* the size first: one allocation for the whole text where the sink
	 * has one */
	for (size_t i = 0; i < f->n_lines; i++) {
		const struct line *l = &f->lines[i];

		size += l->depth + 24; /* ';'s, " COUNT\n" */
		for (uint32_t d = 0; d < l->depth; d++)
			size += f->names[f->ids[l->first + d]].len;
	}
	if (!encode_sink_reserve(s, size))
		return -ENOMEM;
	for (size_t i = 0; i < f->n_lines && r == 0; i++) {
		const struct line *l = &f->lines[i];
		char count[32];

		line->len = 0;
		for (uint32_t d = 0; d < l->depth; d++) {
			const struct name *n = &f->names[f->ids[l->first + d]];

			if (d > 0)
				(void)encode_sink_write(&line->sink, ";", 1);
			(void)encode_sink_write(&line->sink, f->text + n->offset, n->len);
		}
		(void)encode_sink_write(&line->sink, count,
					(size_t)snprintf(count, sizeof(count), " %" PRIu64 "\n",
							 l->count));
		r = line->error ? line->error : encode_sink_write(s, line->data, line->len);
	}
	return r;
}

int folded_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s)
{
	struct folded f = { 0 };
	struct encode_buffer line;
	int r;

	encode_buffer_init(&line);
	u64map_init(&f.by_text);
	u64map_init(&f.by_line);
	r = build(&f, m);
	if (r == 0)
		r = write_lines(&f, &line, s);
	encode_buffer_done(&line);
	folded_done(&f);
	return r;
}
