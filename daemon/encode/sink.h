/* SPDX-License-Identifier: MIT */
/*
 * sink.h - where an encoder's bytes go.
 *
 * Every format (encode.h) writes the bytes a file of it holds, and only
 * those, through one interface: a snapshot answer's, an exporter's file or
 * request body, a test's buffer are sinks, and the encoder does not know
 * which.  How the bytes travel is the sink's business: in a growing buffer
 * (encode_buffer: a binary answer's frame, an exported file), escaped into
 * the JSON answer's string (a text format), or verbatim as the answer's
 * value (a JSON format).  Cost: one indirect call per write, so encoders
 * write lines or chunks, not bytes.
 */
#ifndef PERFD_ENCODE_SINK_H
#define PERFD_ENCODE_SINK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/jsonw.h"

struct encode_sink {
	/* Takes n more bytes.  Returns 0 or -ENOMEM (sticky: the sink's
	 * later writes fail too). */
	int (*write)(struct encode_sink *s, const void *data, size_t n);
	/* Makes room for about n more bytes at once (an encoder that knows
	 * its size); NULL where that buys nothing.  False on no memory. */
	bool (*reserve)(struct encode_sink *s, size_t n);
};

static inline int encode_sink_write(struct encode_sink *s, const void *data, size_t n)
{
	return s->write(s, data, n);
}

static inline bool encode_sink_reserve(struct encode_sink *s, size_t n)
{
	return !s->reserve || s->reserve(s, n);
}

/* The bytes in one growing buffer: data (malloc'd) and len are the
 * caller's to take or to free with encode_buffer_done(). */
struct encode_buffer {
	struct encode_sink sink;
	uint8_t *data;
	size_t len, cap;
	int error;
};

void encode_buffer_init(struct encode_buffer *b);
void encode_buffer_done(struct encode_buffer *b);

/* Into the JSON writer w.  As text: w's string, which the caller opened
 * (jsonw_string_begin) and closes, each write escaped for JSON (a write
 * must hold whole UTF-8 sequences: a split one would be replaced); as
 * JSON: the bytes are one JSON value written as they are, the value of the
 * key w's open object ends with.  Errors are w's (jsonw_error). */
struct encode_jsonw_sink {
	struct encode_sink sink;
	struct jsonw *w;
	bool begun; /* as JSON: the value's first bytes are written */
};

void encode_jsonw_text_init(struct encode_jsonw_sink *s, struct jsonw *w);
void encode_jsonw_value_init(struct encode_jsonw_sink *s, struct jsonw *w);

/* The writes of an encoder that knows nothing of cancelling passed on to
 * to until *cancel is set, then refused with -ECANCELED (sticky): the
 * encoder stops at its next write, as pprof does at its next deflate chunk
 * (encode_opts.cancel), when its lane is stopped. */
struct encode_cancel_sink {
	struct encode_sink sink;
	struct encode_sink *to;
	const atomic_bool *cancel;
	int error;
};

void encode_cancel_sink_init(struct encode_cancel_sink *s, struct encode_sink *to,
			     const atomic_bool *cancel);

/* For an encoder that writes JSON with a jsonw of its own: w's text so far
 * goes to s and w's buffer is emptied (its nesting is kept), once it holds
 * at least min bytes (0: always), so the document is never held whole.
 * Returns 0 or -ENOMEM (w's or s's). */
int encode_sink_flush_jsonw(struct encode_sink *s, struct jsonw *w, size_t min);
/* The min a JSON format flushes at between its items. */
#define ENCODE_JSON_CHUNK (64 * 1024)

#endif
