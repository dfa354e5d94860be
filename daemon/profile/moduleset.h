/* SPDX-License-Identifier: MIT */
/*
 * moduleset.h - a set of module ids (frame.h), one bit each: 8 KiB for
 * every id there is.  The daemon marks in one the modules something still
 * refers to (a process's mappings, a stack's frames, an unwind table in
 * use), and the symbolizer gives back the ids of the others
 * (symbolizer_release_unused).
 */
#ifndef PERFD_MODULESET_H
#define PERFD_MODULESET_H

#include <stdbool.h>
#include <stdint.h>

#include "profile/frame.h"

struct module_set {
	uint64_t bits[(FRAME_MODULE_LAST + 1 + 63) / 64];
};

static inline void module_set_add(struct module_set *s, uint16_t id)
{
	if (id <= FRAME_MODULE_LAST)
		s->bits[id / 64] |= 1ULL << (id % 64);
}

static inline bool module_set_has(const struct module_set *s, uint16_t id)
{
	return id <= FRAME_MODULE_LAST && (s->bits[id / 64] >> (id % 64)) & 1;
}

#endif
