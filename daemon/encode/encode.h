/* SPDX-License-Identifier: MIT */
/*
 * encode.h - the table of snapshot formats.
 *
 * Every format reads the resolved model (profile/model.h) and writes the
 * value of the answer's "profile" field with the JSON writer: a string
 * for text formats (folded), an object for json.  Adding a format is one
 * file with its NAME_encode function plus one row in
 * include/perfd/formats.h; the request parser, its error messages and
 * perfctl's extension guess read that table.
 */
#ifndef PERFD_ENCODE_H
#define PERFD_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/jsonw.h"
#include "profile/model.h"

struct encode_opts {
	uint64_t period_ns; /* of a CPU sample, to state time */
};

struct encoder {
	const char *name;      /* as requested: "folded" */
	const char *extension; /* of a file in it: ".folded" */
	int (*encode)(const struct model *m, const struct encode_opts *o, struct jsonw *w);
};

extern const struct encoder encoders[];
extern const size_t n_encoders;

/* The encoder named name (len bytes), or NULL. */
const struct encoder *encoder_find(const char *name, size_t len);

int folded_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w);
int json_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w);

#endif
