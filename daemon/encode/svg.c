/* SPDX-License-Identifier: MIT */
/*
 * svg.c - the snapshot as a static SVG flame graph (`perfctl snapshot
 * --format svg`, or -o FILE.svg), for where a page's script cannot run: a
 * README, a bug report, an image viewer.  The model's flame graph
 * (flame_model.c) written by flamesvg.c, which has the picture's design;
 * frames under half a pixel of its width are left out, and counted in it.
 */
#include "encode/encode.h"
#include "encode/flame.h"

int svg_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s)
{
	return flame_model_encode(m, o, s, FLAME_SVG_MIN_SHARE, flame_svg_write);
}
