/* SPDX-License-Identifier: MIT */
/*
 * jsonw.h - a streaming JSON writer into one growing buffer.
 *
 * Answers can be tens of MiB (a profile of 100k stacks): building them as
 * json-c trees costs a copy to build, one to print and one to queue.  The
 * writer appends text straight into the buffer the server then sends, and
 * keeps the separators and escaping right so callers never splice JSON by
 * hand.  Strings are escaped for JSON (control bytes as \u00XX) and made
 * valid UTF-8 (a byte that starts no valid sequence becomes U+FFFD), since
 * process names and file names can hold anything.  Out of memory is
 * sticky: every later call does nothing and jsonw_error() says -ENOMEM.
 */
#ifndef PERFD_JSONW_H
#define PERFD_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Nesting tracked; a call tree of 400 frames nests 800 deep. */
#define JSONW_MAX_DEPTH 4096

struct jsonw {
	char *buf;
	size_t len, cap;
	bool oom;
	unsigned depth;
	bool has_items[JSONW_MAX_DEPTH]; /* a comma is due before the next item */
	bool after_key;
};

void jsonw_init(struct jsonw *w);
void jsonw_done(struct jsonw *w);
/* 0, or -ENOMEM when anything was lost. */
int jsonw_error(const struct jsonw *w);
/* Hands the text (NUL-terminated, *ret_len bytes) to the caller. */
char *jsonw_steal(struct jsonw *w, size_t *ret_len);

void jsonw_object_begin(struct jsonw *w);
void jsonw_object_end(struct jsonw *w);
void jsonw_array_begin(struct jsonw *w);
void jsonw_array_end(struct jsonw *w);
void jsonw_key(struct jsonw *w, const char *key);

void jsonw_string(struct jsonw *w, const char *s);
void jsonw_string_len(struct jsonw *w, const char *s, size_t n);
void jsonw_u64(struct jsonw *w, uint64_t v);
void jsonw_i64(struct jsonw *w, int64_t v);
void jsonw_double(struct jsonw *w, double v);
void jsonw_bool(struct jsonw *w, bool v);
void jsonw_null(struct jsonw *w);
/* A value already in JSON text (e.g. json-c's output for an object). */
void jsonw_raw(struct jsonw *w, const char *json, size_t n);
/* More of the value jsonw_raw began, written in pieces. */
void jsonw_raw_append(struct jsonw *w, const char *json, size_t n);

/* s (n bytes) escaped for a JSON string into out (NULL: only measured);
 * returns its length.  What jsonw_string_append writes. */
size_t jsonw_escape(const char *s, size_t n, char *out);
/* Makes room for n more bytes at once (a large answer whose size is
 * known); false when memory ran out. */
bool jsonw_reserve(struct jsonw *w, size_t n);

/* One string value written in pieces; _escaped takes text jsonw_escape
 * made (an encoder that writes one name many times escapes it once). */
void jsonw_string_begin(struct jsonw *w);
void jsonw_string_append(struct jsonw *w, const char *s, size_t n);
void jsonw_string_append_escaped(struct jsonw *w, const char *s, size_t n);
void jsonw_string_end(struct jsonw *w);

/* Shorthands for "key": value inside an object. */
void jsonw_kv_string(struct jsonw *w, const char *key, const char *s);
void jsonw_kv_u64(struct jsonw *w, const char *key, uint64_t v);
void jsonw_kv_double(struct jsonw *w, const char *key, double v);
void jsonw_kv_bool(struct jsonw *w, const char *key, bool v);

#endif
