/* SPDX-License-Identifier: MIT */
/* sink.c - see sink.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "encode/sink.h"
#include "perfd/macro.h"

static bool buffer_reserve(struct encode_sink *s, size_t n)
{
	struct encode_buffer *b = container_of(s, struct encode_buffer, sink);
	size_t cap;
	uint8_t *q;

	if (b->error)
		return false;
	if (b->len + n <= b->cap)
		return true;
	cap = MAX(2 * b->cap, b->len + n);
	q = realloc(b->data, cap);
	if (!q) {
		b->error = -ENOMEM;
		return false;
	}
	b->data = q;
	b->cap = cap;
	return true;
}

static int buffer_write(struct encode_sink *s, const void *data, size_t n)
{
	struct encode_buffer *b = container_of(s, struct encode_buffer, sink);

	if (n == 0)
		return b->error;
	if (!buffer_reserve(s, n))
		return b->error;
	memcpy(b->data + b->len, data, n);
	b->len += n;
	return 0;
}

void encode_buffer_init(struct encode_buffer *b)
{
	*b = (struct encode_buffer){ .sink = { buffer_write, buffer_reserve } };
}

void encode_buffer_done(struct encode_buffer *b)
{
	free(b->data);
	encode_buffer_init(b);
}

static int cancel_write(struct encode_sink *s, const void *data, size_t n)
{
	struct encode_cancel_sink *c = container_of(s, struct encode_cancel_sink, sink);

	if (!c->error && c->cancel && atomic_load(c->cancel))
		c->error = -ECANCELED;
	if (!c->error)
		c->error = encode_sink_write(c->to, data, n);
	return c->error;
}

static bool cancel_reserve(struct encode_sink *s, size_t n)
{
	struct encode_cancel_sink *c = container_of(s, struct encode_cancel_sink, sink);

	return !c->error && encode_sink_reserve(c->to, n);
}

void encode_cancel_sink_init(struct encode_cancel_sink *s, struct encode_sink *to,
			     const atomic_bool *cancel)
{
	*s = (struct encode_cancel_sink){ .sink = { cancel_write, cancel_reserve }, .to = to,
					  .cancel = cancel };
}

static int text_write(struct encode_sink *s, const void *data, size_t n)
{
	struct encode_jsonw_sink *j = container_of(s, struct encode_jsonw_sink, sink);

	jsonw_string_append(j->w, data, n);
	return jsonw_error(j->w);
}

/* Room for n bytes of text in the answer's string: an eighth more for the
 * quotes and backslashes the JSON string escapes. */
static bool text_reserve(struct encode_sink *s, size_t n)
{
	struct encode_jsonw_sink *j = container_of(s, struct encode_jsonw_sink, sink);

	return jsonw_reserve(j->w, n + n / 8);
}

static int value_write(struct encode_sink *s, const void *data, size_t n)
{
	struct encode_jsonw_sink *j = container_of(s, struct encode_jsonw_sink, sink);

	if (j->begun)
		jsonw_raw_append(j->w, data, n);
	else
		jsonw_raw(j->w, data, n);
	j->begun = true;
	return jsonw_error(j->w);
}

static bool value_reserve(struct encode_sink *s, size_t n)
{
	struct encode_jsonw_sink *j = container_of(s, struct encode_jsonw_sink, sink);

	return jsonw_reserve(j->w, n);
}

void encode_jsonw_text_init(struct encode_jsonw_sink *s, struct jsonw *w)
{
	*s = (struct encode_jsonw_sink){ .sink = { text_write, text_reserve }, .w = w };
}

void encode_jsonw_value_init(struct encode_jsonw_sink *s, struct jsonw *w)
{
	*s = (struct encode_jsonw_sink){ .sink = { value_write, value_reserve }, .w = w };
}

int encode_sink_flush_jsonw(struct encode_sink *s, struct jsonw *w, size_t min)
{
	int r = jsonw_error(w);

	if (r < 0 || w->len < min || w->len == 0)
		return r;
	r = encode_sink_write(s, w->buf, w->len);
	w->len = 0;
	return r;
}
