/* SPDX-License-Identifier: MIT */
/*
 * profile.c - the analysis model's builder (profile.h): strings and
 * frames interned in hash maps keyed by their hash (even keys, probing by
 * two, so never the map's reserved key), frame ids appended to one pool,
 * a stack a run of it.  Lookups are O(1) expected; memory is the pool, the
 * frames and the distinct names, each grown by doubling.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/profile.h"
#include "base/array.h"

int profile_fail(char *err, int error, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		(void)vsnprintf(err, PROFILE_ERROR_MAX, fmt, ap);
		va_end(ap);
	}
	return error;
}

const char *profile_format_name(enum profile_format f)
{
	static const char *const names[] = {
		[PROFILE_FORMAT_FOLDED] = "folded",
		[PROFILE_FORMAT_JSON] = "json",
		[PROFILE_FORMAT_PPROF] = "pprof",
		[PROFILE_FORMAT_LIVE] = "live",
	};

	return (size_t)f < ELEMENTSOF(names) ? names[f] : "folded";
}

int64_t profile_intern_string(struct profile *p, const char *s, size_t n)
{
	uint64_t h = hash_text(s, n);

	if (n == 0)
		return 0;
	/* even keys, probing by two: never the map's reserved UINT64_MAX */
	for (uint64_t key = h & ~1ULL;; key = (key + 2) & ~1ULL) {
		bool fresh;
		uint64_t *id = u64map_upsert(&p->strings_by_hash, key, &fresh);

		if (!id)
			return -ENOMEM;
		if (!fresh) {
			const char *o = p->text + *id;

			if (strncmp(o, s, n) != 0 || o[n] != '\0')
				continue;
			return (int64_t)*id;
		}
		if (p->text_len + n + 1 > UINT32_MAX ||
		    array_grow((void **)&p->text, &p->text_cap, p->text_len + n + 1, 1, 256) < 0) {
			u64map_remove(&p->strings_by_hash, key);
			return p->text_len + n + 1 > UINT32_MAX ? -E2BIG : -ENOMEM;
		}
		memcpy(p->text + p->text_len, s, n);
		p->text[p->text_len + n] = '\0';
		*id = p->text_len;
		p->text_len += n + 1;
		return (int64_t)*id;
	}
}

int64_t profile_find_string(const struct profile *p, const char *s, size_t n)
{
	if (n == 0)
		return 0;
	for (uint64_t key = hash_text(s, n) & ~1ULL;; key = (key + 2) & ~1ULL) {
		const uint64_t *id = u64map_get(&p->strings_by_hash, key);

		if (!id)
			return -ENOENT;
		if (strncmp(p->text + *id, s, n) == 0 && p->text[*id + n] == '\0')
			return (int64_t)*id;
	}
}

int64_t profile_intern_cstring(struct profile *p, const char *s)
{
	return profile_intern_string(p, s, strlen(s));
}

int64_t profile_intern_frame(struct profile *p, uint32_t function, uint32_t file, uint32_t line,
			     bool kernel, uint8_t kind)
{
	uint64_t h = hash_u64(((uint64_t)function << 32 | file) ^
			      hash_u64((uint64_t)kind << 33 | (uint64_t)line << 1 | kernel));

	for (uint64_t key = h & ~1ULL;; key = (key + 2) & ~1ULL) {
		bool fresh;
		uint64_t *id = u64map_upsert(&p->frames_by_hash, key, &fresh);
		struct profile_frame *f;

		if (!id)
			return -ENOMEM;
		if (!fresh) {
			f = &p->frames[*id];
			if (f->function != function || f->file != file || f->line != line ||
			    f->kernel != kernel || f->kind != kind)
				continue;
			return (int64_t)*id;
		}
		if (array_grow((void **)&p->frames, &p->cap_frames, p->n_frames + 1, sizeof(*p->frames), 256) < 0) {
			u64map_remove(&p->frames_by_hash, key);
			return -ENOMEM;
		}
		p->frames[p->n_frames] = (struct profile_frame){ function, file, line, kernel, kind, 0 };
		*id = p->n_frames;
		return (int64_t)p->n_frames++;
	}
}

void profile_stack_begin(struct profile *p)
{
	p->stack_start = p->n_pool;
}

int profile_stack_push(struct profile *p, uint32_t frame, char *err)
{
	size_t max_refs = p->format == PROFILE_FORMAT_LIVE ? UINT32_MAX : PROFILE_MAX_FRAME_REFS;

	if (p->n_pool - p->stack_start >= PROFILE_MAX_DEPTH)
		return profile_fail(err, -E2BIG, "a stack deeper than %d frames", PROFILE_MAX_DEPTH);
	if (p->n_pool >= max_refs)
		return profile_fail(err, -E2BIG, "more than %zu frames in all the stacks", max_refs);
	if (array_grow((void **)&p->pool, &p->cap_pool, p->n_pool + 1, sizeof(*p->pool), 256) < 0)
		return -ENOMEM;
	p->pool[p->n_pool++] = frame;
	return 0;
}

int profile_stack_end(struct profile *p, uint64_t value, char *err)
{
	if (value == 0) {
		p->n_pool = p->stack_start;
		return 0;
	}
	if (p->total + value < p->total)
		return profile_fail(err, -EOVERFLOW, "the values add up past 2^64");
	if (p->format != PROFILE_FORMAT_LIVE && p->n_stacks >= PROFILE_MAX_STACKS)
		return profile_fail(err, -E2BIG, "more than %zu stacks", PROFILE_MAX_STACKS);
	if (array_grow((void **)&p->stacks, &p->cap_stacks, p->n_stacks + 1, sizeof(*p->stacks), 256) < 0)
		return -ENOMEM;
	p->stacks[p->n_stacks++] = (struct profile_stack){
		.value = value,
		.first = (uint32_t)p->stack_start,
		.depth = (uint32_t)(p->n_pool - p->stack_start),
	};
	p->total += value;
	return 0;
}

int profile_set_kind(struct profile *p, const char *kind, const char *unit)
{
	int64_t k = profile_intern_cstring(p, kind), u = profile_intern_cstring(p, unit);

	if (k < 0 || u < 0)
		return k < 0 ? (int)k : (int)u;
	p->kind = (uint32_t)k;
	p->unit = (uint32_t)u;
	return 0;
}

int profile_new(enum profile_format format, struct profile **ret)
{
	_cleanup_(profile_freep) struct profile *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->format = format;
	u64map_init(&p->strings_by_hash);
	u64map_init(&p->frames_by_hash);
	/* id 0 is the empty string */
	p->text = calloc(1, 256);
	if (!p->text)
		return -ENOMEM;
	p->text_cap = 256;
	p->text_len = 1;
	*ret = TAKE_PTR(p);
	return 0;
}

struct profile *profile_free(struct profile *p)
{
	if (!p)
		return NULL;
	free(p->text);
	free(p->frames);
	free(p->pool);
	free(p->stacks);
	u64map_done(&p->strings_by_hash);
	u64map_done(&p->frames_by_hash);
	free(p);
	return NULL;
}
