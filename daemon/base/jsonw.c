/* SPDX-License-Identifier: MIT */
/* jsonw.c - see jsonw.h for the design. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "base/utf8.h"

void jsonw_init(struct jsonw *w)
{
	*w = (struct jsonw){ 0 };
}

void jsonw_done(struct jsonw *w)
{
	free(w->buf);
	*w = (struct jsonw){ 0 };
}

int jsonw_error(const struct jsonw *w)
{
	return w->oom ? -ENOMEM : 0;
}

static bool reserve(struct jsonw *w, size_t n)
{
	size_t cap;
	char *b;

	if (w->oom)
		return false;
	if (w->len + n + 1 <= w->cap)
		return true;
	cap = w->cap ? w->cap : 4096;
	while (cap < w->len + n + 1)
		cap *= 2;
	b = realloc(w->buf, cap);
	if (!b) {
		w->oom = true;
		return false;
	}
	w->buf = b;
	w->cap = cap;
	return true;
}

static void put(struct jsonw *w, const char *s, size_t n)
{
	if (!reserve(w, n))
		return;
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = 0;
}

char *jsonw_steal(struct jsonw *w, size_t *ret_len)
{
	char *b;

	if (w->oom || !reserve(w, 0))
		return NULL;
	/* put() terminates what it wrote; a writer that wrote nothing has a
	 * fresh buffer that nothing terminated yet */
	w->buf[w->len] = 0;
	b = w->buf;
	*ret_len = w->len;
	*w = (struct jsonw){ 0 };
	return b;
}

/* The comma before a value in an array or a key in an object. */
static void item(struct jsonw *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (w->depth > 0 && w->depth <= JSONW_MAX_DEPTH) {
		if (w->has_items[w->depth - 1])
			put(w, ",", 1);
		w->has_items[w->depth - 1] = true;
	}
}

static void open_(struct jsonw *w, char c)
{
	item(w);
	put(w, &c, 1);
	w->depth++;
	if (w->depth <= JSONW_MAX_DEPTH)
		w->has_items[w->depth - 1] = false;
	else
		w->oom = true; /* deeper than we track: refuse rather than emit bad JSON */
}

static void close_(struct jsonw *w, char c)
{
	if (w->depth > 0)
		w->depth--;
	put(w, &c, 1);
}

void jsonw_object_begin(struct jsonw *w) { open_(w, '{'); }
void jsonw_object_end(struct jsonw *w) { close_(w, '}'); }
void jsonw_array_begin(struct jsonw *w) { open_(w, '['); }
void jsonw_array_end(struct jsonw *w) { close_(w, ']'); }

size_t jsonw_escape(const char *str, size_t n, char *out)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t at = 0;

#define EMIT(p, k)                                     \
	do {                                           \
		if (out)                               \
			memcpy(out + at, (p), (k));    \
		at += (k);                             \
	} while (0)
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		uint32_t cp;
		size_t k = c >= 0x20 && c != '"' && c != '\\' ? utf8_len(s + i, n - i, &cp) : 0;
		char esc[8];

		if (k > 0) {
			EMIT(s + i, k);
			i += k;
			continue;
		}
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			EMIT(esc, 2);
		} else if (c == '\n') {
			EMIT("\\n", 2);
		} else if (c == '\t') {
			EMIT("\\t", 2);
		} else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			EMIT(esc, 6);
		} else {
			EMIT("\xef\xbf\xbd", 3); /* U+FFFD */
		}
		i++;
	}
#undef EMIT
	return at;
}

bool jsonw_reserve(struct jsonw *w, size_t n)
{
	return reserve(w, n);
}

void jsonw_string_append_escaped(struct jsonw *w, const char *s, size_t n)
{
	put(w, s, n);
}

void jsonw_string_append(struct jsonw *w, const char *s, size_t n)
{
	size_t k = jsonw_escape(s, n, NULL);

	if (!reserve(w, k))
		return;
	jsonw_escape(s, n, w->buf + w->len);
	w->len += k;
	w->buf[w->len] = 0;
}

void jsonw_string_begin(struct jsonw *w)
{
	item(w);
	put(w, "\"", 1);
}

void jsonw_string_end(struct jsonw *w)
{
	put(w, "\"", 1);
}

void jsonw_string_len(struct jsonw *w, const char *s, size_t n)
{
	jsonw_string_begin(w);
	jsonw_string_append(w, s, n);
	jsonw_string_end(w);
}

void jsonw_string(struct jsonw *w, const char *s)
{
	jsonw_string_len(w, s ? s : "", s ? strlen(s) : 0);
}

void jsonw_key(struct jsonw *w, const char *key)
{
	jsonw_string(w, key);
	put(w, ":", 1);
	w->after_key = true;
}

void jsonw_u64(struct jsonw *w, uint64_t v)
{
	char b[32];

	item(w);
	put(w, b, (size_t)snprintf(b, sizeof(b), "%" PRIu64, v));
}

void jsonw_i64(struct jsonw *w, int64_t v)
{
	char b[32];

	item(w);
	put(w, b, (size_t)snprintf(b, sizeof(b), "%" PRId64, v));
}

void jsonw_double(struct jsonw *w, double v)
{
	char b[64];

	item(w);
	if (!isfinite(v))
		v = 0; /* JSON has no NaN or infinity */
	put(w, b, (size_t)snprintf(b, sizeof(b), "%.15g", v));
}

void jsonw_bool(struct jsonw *w, bool v)
{
	item(w);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void jsonw_null(struct jsonw *w)
{
	item(w);
	put(w, "null", 4);
}

void jsonw_raw(struct jsonw *w, const char *json, size_t n)
{
	item(w);
	put(w, json, n);
}

void jsonw_raw_append(struct jsonw *w, const char *json, size_t n)
{
	put(w, json, n);
}

void jsonw_kv_string(struct jsonw *w, const char *key, const char *s)
{
	jsonw_key(w, key);
	jsonw_string(w, s);
}

void jsonw_kv_u64(struct jsonw *w, const char *key, uint64_t v)
{
	jsonw_key(w, key);
	jsonw_u64(w, v);
}

void jsonw_kv_double(struct jsonw *w, const char *key, double v)
{
	jsonw_key(w, key);
	jsonw_double(w, v);
}

void jsonw_kv_bool(struct jsonw *w, const char *key, bool v)
{
	jsonw_key(w, key);
	jsonw_bool(w, v);
}
