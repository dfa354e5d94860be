/* SPDX-License-Identifier: MIT */
/* encode.c - see encode.h; the rows come from include/perfd/formats.h. */
#include <string.h>

#include "encode/encode.h"
#include "perfd/formats.h"

#define ROW(name, ext, form) { #name, ext, form, name##_encode },
const struct encoder encoders[] = { PERFD_FORMATS(ROW) };
#undef ROW

const size_t n_encoders = sizeof(encoders) / sizeof(encoders[0]);

const struct encoder *encoder_find(const char *name, size_t len)
{
	for (size_t i = 0; i < n_encoders; i++)
		if (strlen(encoders[i].name) == len && memcmp(encoders[i].name, name, len) == 0)
			return &encoders[i];
	return NULL;
}
