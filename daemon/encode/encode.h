/* SPDX-License-Identifier: MIT */
/*
 * encode.h - the table of formats.
 *
 * Every format reads the resolved model (profile/model.h) and writes the
 * bytes of a file in it through a sink (encode/sink.h), whoever asked: a
 * snapshot answer (api/encode_lane.c, where the row's form says how the
 * answer carries them), the exporters (export/exporter.c), the tests.
 * Adding a format is one file with its NAME_encode function plus one row
 * in include/perfd/formats.h; the request parser, its error messages and
 * perfctl's extension guess read that table.
 */
#ifndef PERFD_ENCODE_H
#define PERFD_ENCODE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "encode/sink.h"
#include "perfd/formats.h"
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
	/* NULL, or a flag that, once set, has pprof and OTLP (between
	 * deflate chunks and the encoding's stages) and the call-tree formats
	 * (json, html, svg: while the tree is built, calltree.h) give up
	 * early with -ECANCELED: a lane being stopped (base/offload.h).  Any
	 * format's writes are stopped by its sink (encode_cancel_sink). */
	const atomic_bool *cancel;
};

/* Whether o's cancel flag is set. */
static inline bool encode_cancelled(const struct encode_opts *o)
{
	return o->cancel && atomic_load(o->cancel);
}

/* One row of formats.h.  encode writes m's bytes to s and returns 0 or
 * -errno: -ENOMEM, the sink's error, -ECANCELED (o->cancel). */
struct encoder {
	const char *name;      /* as requested: "folded" */
	const char *extension; /* of a file in it: ".folded" */
	enum perfd_form form;  /* how an answer carries it */
	int (*encode)(const struct model *m, const struct encode_opts *o, struct encode_sink *s);
};

extern const struct encoder encoders[];
extern const size_t n_encoders;

/* The encoder named name (len bytes), or NULL. */
const struct encoder *encoder_find(const char *name, size_t len);

int folded_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s);
int json_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s);
/* gzipped profile.proto */
int pprof_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s);

/* What an OTLP request says of the process besides what the model knows
 * (pid, comm): NULL or "" leaves an attribute out. */
struct otlp_resource {
	const char *host_name;
	const char *service_name;
	const char *container_id;
};

/* The model of one process (-EINVAL otherwise) as the bytes of an OTLP
 * ExportProfilesServiceRequest (encode/otlp.c), with o's labels on every
 * sample as pprof_encode gives them, into s.  Not a row of the table: a
 * request body for a receiver, not a file a user asks for.  Returns 0,
 * -EINVAL, -ENOMEM or -ECANCELED (o->cancel). */
int otlp_encode(const struct model *m, const struct encode_opts *o,
		const struct otlp_resource *res, struct encode_sink *s);
int speedscope_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s);
int html_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s);
int svg_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s);

/* The flame graph of m (flame_model.c), frames under min_share of the
 * total left out, drawn by write (flame_page_write, flame_svg_write) into
 * s: html and svg in one. */
struct flame;
struct flame_out;
int flame_model_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s,
		       double min_share, int (*write)(const struct flame *, const struct flame_out *));

#endif
