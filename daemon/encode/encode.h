/* SPDX-License-Identifier: MIT */
/*
 * encode.h - the table of snapshot formats.
 *
 * Every format reads the resolved model (profile/model.h) and writes the
 * value of the answer's "profile" field with the JSON writer: a string
 * for text formats (folded, html, svg), an object for json, and for a binary format
 * (pprof) a string of its bytes in base64, which encoder_encoding() names
 * so that the answer can say so.  Adding a format is one
 * file with its NAME_encode function plus one row in
 * include/perfd/formats.h; the request parser, its error messages and
 * perfctl's extension guess read that table.
 */
#ifndef PERFD_ENCODE_H
#define PERFD_ENCODE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/jsonw.h"
#include "profile/model.h"

struct encode_opts {
	uint64_t period_ns;           /* of a CPU sample, to state time */
	uint64_t memory_sample_bytes; /* mean growth a memory sample stands for */
	uint64_t time_unix_ns;        /* where the answer's range begins; 0: unknown */
	uint64_t duration_ns;         /* how long the range is */
	/* pprof and OTLP only: labels every sample carries besides the process's own,
	 * as n_labels (key, value) pairs, not copied */
	const char *const *labels;
	size_t n_labels;
	/* NULL, or a flag that, once set, has pprof and OTLP give up early
	 * with -ECANCELED (checked between deflate chunks and between the
	 * encoding's stages): a lane being stopped (base/offload.h) */
	const atomic_bool *cancel;
};

/* Whether o's cancel flag is set. */
static inline bool encode_cancelled(const struct encode_opts *o)
{
	return o->cancel && atomic_load(o->cancel);
}

struct encoder {
	const char *name;      /* as requested: "folded" */
	const char *extension; /* of a file in it: ".folded" */
	bool binary;           /* bytes, sent in base64 */
	int (*encode)(const struct model *m, const struct encode_opts *o, struct jsonw *w);
};

extern const struct encoder encoders[];
extern const size_t n_encoders;

/* The encoder named name (len bytes), or NULL. */
const struct encoder *encoder_find(const char *name, size_t len);

/* How e's "profile" string is encoded: "base64" for a binary format, NULL
 * for text and JSON ones. */
const char *encoder_encoding(const struct encoder *e);

int folded_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w);
int json_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w);
int pprof_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w);
/* The gzipped profile.proto bytes themselves, for a file or a request
 * body: *ret (malloc'd, the caller's) and *ret_len.  Returns 0, -ENOMEM
 * or -ECANCELED (o->cancel). */
int pprof_encode_bytes(const struct model *m, const struct encode_opts *o, uint8_t **ret,
		       size_t *ret_len);

/* What an OTLP request says of the process besides what the model knows
 * (pid, comm): NULL or "" leaves an attribute out. */
struct otlp_resource {
	const char *host_name;
	const char *service_name;
	const char *container_id;
};

/* The model of one process (-EINVAL otherwise) as the bytes of an OTLP
 * ExportProfilesServiceRequest (encode/otlp.c), with o's labels on every
 * sample as pprof_encode_bytes gives them: *ret (malloc'd, the caller's)
 * and *ret_len.  Returns 0, -EINVAL, -ENOMEM or -ECANCELED (o->cancel). */
int otlp_encode_bytes(const struct model *m, const struct encode_opts *o,
		      const struct otlp_resource *res, uint8_t **ret, size_t *ret_len);
int speedscope_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w);
int html_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w);
int svg_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w);

/* The flame graph of m (flame_model.c), frames under min_share of the
 * total left out, drawn by write (flame_page_write, flame_svg_write) into
 * w's string: html and svg in one. */
struct flame;
struct flame_out;
int flame_model_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w,
		       double min_share, int (*write)(const struct flame *, const struct flame_out *));

#endif
