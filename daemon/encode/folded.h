/* SPDX-License-Identifier: MIT */
/*
 * folded.h - the folded-stack encoder (Brendan Gregg's flamegraph.pl input,
 * also read by speedscope, inferno and `perf script | stackcollapse`).
 *
 * One line per stack: "comm;root;...;leaf COUNT\n".  Kernel frames carry the
 * suffix "_[k]" as in stackcollapse-perf.pl.  Lines come most samples first
 * (ties in an order fixed by their text), so the output is deterministic.  A
 * ';' or a control byte in a name would break the format and is replaced by
 * '_'.
 */
#ifndef PERFD_FOLDED_H
#define PERFD_FOLDED_H

#include <stdint.h>
#include <stdio.h>

#include "profile/stacktab.h"
#include "base/u64map.h"

/* A namer may return several frames for one (inlined functions): it
 * separates them, outermost first, with this byte, which the encoder turns
 * into ';'. */
#define FOLDED_FRAME_SEPARATOR '\x1f'

/* Names a frame into buf (NUL-terminated) and returns buf. */
typedef const char *(*frame_namer_t)(void *ctx, uint64_t frame, char *buf,
				     size_t size);

struct folded;

/* Renders the stacks of counts (stack id -> samples) into lines, merged and
 * sorted.  Returns 0 and a new object, or -ENOMEM. */
int folded_build(const char *comm, const struct u64map *counts, const struct stacktab *stacks,
		 frame_namer_t namer, void *ctx, struct folded **ret);
struct folded *folded_free(struct folded *fd);
size_t folded_lines(const struct folded *fd);
/* Writes the whole profile as the inside of a JSON string (newlines as
 * \n) into out, which must hold what a call with out == NULL returns.
 * Straight from the rendered lines: a large profile is not copied twice. */
size_t folded_json_string(const struct folded *fd, char *out);

/* Builds and writes the folded text.  Returns 0 or -errno (-EIO when the
 * stream failed, -ENOMEM). */
int folded_write(FILE *f, const char *comm, const struct u64map *counts,
		 const struct stacktab *stacks, frame_namer_t namer, void *ctx);

#endif
