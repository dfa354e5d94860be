/* SPDX-License-Identifier: MIT */
/*
 * strtable.h - the string table of a protobuf profile format: pprof's
 * Profile.string_table and OTLP's ProfilesDictionary.string_table are
 * both a list of texts referred to by index, index 0 being "".
 *
 * The model's strings (profile/model.h) get their index when first used,
 * through a hash map from model string id to index, so a table holds the
 * strings a profile refers to and each once; texts of the encoder's own
 * (sample type names, attribute keys) are added as they are.  Nothing is
 * copied: the table points into the model and at the callers' literals,
 * as protobuf-c packs it (char ** for a repeated string; packing only
 * reads).  Memory: a pointer per string and a map slot per model string.
 */
#ifndef PERFD_ENCODE_STRTABLE_H
#define PERFD_ENCODE_STRTABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/u64map.h"
#include "profile/model.h"

struct strtable {
	const struct model *m;
	char **strings;
	size_t n, cap;
	struct u64map by_model; /* model string id -> index */
};

/* Starts t with "" at index 0. Returns 0 or -ENOMEM (t is then done). */
int strtable_init(struct strtable *t, const struct model *m);
/* Adds s (not copied: it must outlive t) and returns its index, or -ENOMEM. */
int64_t strtable_add(struct strtable *t, const char *s);
/* The index of the model's string id (0 for id 0), added when first used,
 * or -ENOMEM. */
int64_t strtable_model(struct strtable *t, uint32_t id);
void strtable_done(struct strtable *t);

/* An array of n elements of size bytes, zeroed (never NULL for n = 0). */
static inline void *alloc_zeroed(size_t n, size_t size)
{
	return calloc(n ? n : 1, size);
}

#endif
