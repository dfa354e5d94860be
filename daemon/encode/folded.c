/* SPDX-License-Identifier: MIT */
/*
 * folded.c - see folded.h.
 *
 * Built for profiles of 100k+ stacks.  Names are interned: each distinct
 * frame is named once (frame -> name id), and frames that name alike share
 * one id, so a line is a short array of name ids rather than text.  Lines
 * that read alike (two addresses in one function) are merged through a hash
 * of their ids, only merged lines are sorted, and the text is written once,
 * straight into the caller's buffer (plain, or as a JSON string body: the
 * escaped length of every name is known in advance).  Memory: 4 bytes per
 * frame of each stack, plus the names.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "encode/folded.h"
#include "profile/frame.h"
#include "perfd/macro.h"

struct name {
	uint32_t offset, len; /* in the names arena, sanitized, NUL-terminated */
	uint32_t json_len;    /* len once '"' and '\\' are escaped */
	uint64_t hash;        /* of the text: what lines hash, so their order
			       * does not depend on the order names were met */
};

struct line {
	uint32_t first; /* in the ids pool: root first */
	uint32_t depth;
	uint64_t hash;
	uint64_t count;
};

struct folded {
	char comm[64];
	uint32_t comm_len, comm_json_len;
	char *names_text;
	size_t names_len, names_cap;
	struct name *names;
	size_t n_names, cap_names;
	uint32_t *ids;
	size_t n_ids, cap_ids;
	struct line *lines;
	size_t n;
};

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t c;
	void *q;

	if (need <= *cap)
		return 0;
	c = MAX(*cap * 2, need + 1024);
	q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

static uint64_t bytes_hash(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL; /* FNV-1a */
	return h;
}

static uint32_t json_len(const char *s, size_t n)
{
	uint32_t k = n;

	for (size_t i = 0; i < n; i++)
		k += s[i] == '"' || s[i] == '\\';
	return k;
}

/* Copies name with ';' and control bytes replaced (they would break the
 * format) into dst; returns its length. */
static size_t sanitize(char *dst, const char *name, size_t max)
{
	size_t n = 0;

	for (; name[n] && n < max; n++) {
		unsigned char c = name[n];

		dst[n] = c == FOLDED_FRAME_SEPARATOR ? ';' :
			 c == ';' || c < 0x20 || c == 0x7f ? '_' : c;
	}
	dst[n] = 0;
	return n;
}

struct interner {
	struct u64map by_frame; /* frame -> name id */
	struct u64map by_text;  /* text hash (+ probing) -> name id */
	frame_namer_t namer;
	void *ctx;
};

/* The id of a frame's sanitized name (kernel suffix included), naming the
 * frame the first time it is seen; -ENOMEM. */
static int64_t name_id(struct folded *fd, struct interner *in, uint64_t frame)
{
	char buf[1024], text[1024 + 8];
	bool added;
	uint64_t *slot = u64map_upsert(&in->by_frame, frame, &added), key, hash;
	size_t len;

	if (!slot)
		return -ENOMEM;
	if (!added)
		return (int64_t)*slot;
	len = sanitize(text, in->namer(in->ctx, frame, buf, sizeof(buf)), 1024);
	if (frame_module(frame) == FRAME_MODULE_KERNEL) {
		memcpy(text + len, "_[k]", 5);
		len += 4;
	}
	hash = bytes_hash(text, len, 0xcbf29ce484222325ULL);
	for (key = hash & ~1ULL;; key = (key + 2) & ~1ULL) {
		bool fresh;
		uint64_t *id = u64map_upsert(&in->by_text, key, &fresh);
		struct name *nm;

		if (!id)
			goto oom;
		if (!fresh) {
			nm = &fd->names[*id];
			if (nm->len != len || memcmp(fd->names_text + nm->offset, text, len) != 0)
				continue; /* another name with this hash */
			/* the slot pointer may have moved with the upsert above */
			*u64map_get(&in->by_frame, frame) = *id;
			return (int64_t)*id;
		}
		if (grow((void **)&fd->names, &fd->cap_names, fd->n_names + 1, sizeof(*fd->names)) < 0 ||
		    grow((void **)&fd->names_text, &fd->names_cap, fd->names_len + len + 1, 1) < 0) {
			u64map_remove(&in->by_text, key);
			goto oom;
		}
		nm = &fd->names[fd->n_names];
		*nm = (struct name){ fd->names_len, len, json_len(text, len), hash };
		memcpy(fd->names_text + fd->names_len, text, len + 1);
		fd->names_len += len + 1;
		*id = fd->n_names;
		*u64map_get(&in->by_frame, frame) = fd->n_names;
		return (int64_t)fd->n_names++;
	}
oom:
	u64map_remove(&in->by_frame, frame);
	return -ENOMEM;
}

/* Most samples first; ties by hash, so the order is deterministic without
 * comparing texts. */
static int line_cmp(const void *x, const void *y)
{
	const struct line *a = x, *b = y;

	if (a->count != b->count)
		return a->count < b->count ? 1 : -1;
	return a->hash < b->hash ? -1 : a->hash > b->hash;
}

struct folded *folded_free(struct folded *fd)
{
	if (fd) {
		free(fd->names_text);
		free(fd->names);
		free(fd->ids);
		free(fd->lines);
		free(fd);
	}
	return NULL;
}

int folded_build(const char *comm, const struct u64map *counts, const struct stacktab *stacks,
		 frame_namer_t namer, void *ctx, struct folded **ret)
{
	struct interner in = { .namer = namer, .ctx = ctx };
	struct u64map by_hash; /* line hash (+ probing) -> line index */
	struct folded *fd = calloc(1, sizeof(*fd));
	int r = 0;

	if (!fd)
		return -ENOMEM;
	u64map_init(&in.by_frame);
	u64map_init(&in.by_text);
	u64map_init(&by_hash);
	fd->comm_len = sanitize(fd->comm, comm, sizeof(fd->comm) - 1);
	fd->comm_json_len = json_len(fd->comm, fd->comm_len);
	fd->lines = calloc(counts->count ? counts->count : 1, sizeof(*fd->lines));
	if (!fd->lines) {
		r = -ENOMEM;
		goto out;
	}
	U64MAP_FOREACH(slot, counts) {
		const struct stack *s = stacktab_get(stacks, (uint32_t)slot->key);
		struct line l = { .count = slot->value, .first = fd->n_ids, .hash = 0x9e3779b97f4a7c15ULL };
		uint64_t key;

		if (!s || slot->value == 0)
			continue;
		if (grow((void **)&fd->ids, &fd->cap_ids, fd->n_ids + s->depth, sizeof(*fd->ids)) < 0) {
			r = -ENOMEM;
			goto out;
		}
		for (int i = (int)s->depth - 1; i >= 0; i--) {
			int64_t id = name_id(fd, &in, s->frames[i]);

			if (id < 0) {
				r = -ENOMEM;
				goto out;
			}
			fd->ids[fd->n_ids++] = (uint32_t)id;
			l.hash = hash_u64(l.hash ^ fd->names[id].hash);
		}
		l.depth = s->depth;
		/* Stacks that read alike make one line. */
		for (key = l.hash & ~1ULL;; key = (key + 2) & ~1ULL) {
			bool added;
			uint64_t *idx = u64map_upsert(&by_hash, key, &added);
			struct line *o;

			if (!idx) {
				r = -ENOMEM;
				goto out;
			}
			if (added) {
				*idx = fd->n;
				fd->lines[fd->n++] = l;
				break;
			}
			o = &fd->lines[*idx];
			if (o->depth == l.depth &&
			    memcmp(fd->ids + o->first, fd->ids + l.first, l.depth * sizeof(uint32_t)) == 0) {
				o->count += l.count;
				fd->n_ids = l.first; /* drop the duplicate's ids */
				break;
			}
		}
	}
	qsort_safe(fd->lines, fd->n, sizeof(*fd->lines), line_cmp);
out:
	u64map_done(&in.by_frame);
	u64map_done(&in.by_text);
	u64map_done(&by_hash);
	if (r < 0)
		fd = folded_free(fd);
	*ret = fd;
	return r;
}

/* Appends the n bytes of s, escaped for JSON when json; returns the new end. */
static size_t put(char *out, size_t at, const char *s, size_t n, bool json)
{
	if (!json) {
		memcpy(out + at, s, n);
		return at + n;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			out[at++] = '\\';
		out[at++] = s[i];
	}
	return at;
}

/* Writes (out != NULL) or measures the whole text, plain or JSON-escaped. */
static size_t emit(const struct folded *fd, char *out, bool json)
{
	size_t at = 0;

	for (size_t i = 0; i < fd->n; i++) {
		const struct line *l = &fd->lines[i];
		char count[32];
		int k = snprintf(count, sizeof(count), json ? " %llu\\n" : " %llu\n",
				 (unsigned long long)l->count);

		if (out)
			at = put(out, at, fd->comm, fd->comm_len, json);
		else
			at += json ? fd->comm_json_len : fd->comm_len;
		for (uint32_t d = 0; d < l->depth; d++) {
			const struct name *nm = &fd->names[fd->ids[l->first + d]];

			if (out) {
				out[at++] = ';';
				if (nm->json_len == nm->len || !json)
					at = put(out, at, fd->names_text + nm->offset, nm->len, false);
				else
					at = put(out, at, fd->names_text + nm->offset, nm->len, true);
			} else {
				at += 1 + (json ? nm->json_len : nm->len);
			}
		}
		if (out)
			memcpy(out + at, count, k);
		at += k;
	}
	return at;
}

size_t folded_json_string(const struct folded *fd, char *out)
{
	return emit(fd, out, true);
}

size_t folded_lines(const struct folded *fd)
{
	return fd->n;
}

int folded_write(FILE *f, const char *comm, const struct u64map *counts,
		 const struct stacktab *stacks, frame_namer_t namer, void *ctx)
{
	struct folded *fd;
	char *text;
	size_t n;
	int r = folded_build(comm, counts, stacks, namer, ctx, &fd);

	if (r < 0)
		return r;
	n = emit(fd, NULL, false);
	text = malloc(n + 1);
	if (!text) {
		folded_free(fd);
		return -ENOMEM;
	}
	emit(fd, text, false);
	fwrite(text, 1, n, f);
	free(text);
	folded_free(fd);
	return fflush(f) != 0 || ferror(f) ? -EIO : 0;
}
