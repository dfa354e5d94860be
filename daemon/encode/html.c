/* SPDX-License-Identifier: MIT */
/*
 * html.c - the snapshot as one self-contained, interactive flame graph
 * page (`perfctl snapshot --format html`, or -o FILE.html): the model's
 * flame graph (flame_model.c) written by flamepage.c, which has the page's
 * design and data layout.  Frames under 1/FLAME_PAGE_MIN_SHARE of the
 * total are left out, and counted on the page.
 */
#include "encode/encode.h"
#include "encode/flame.h"

int html_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s)
{
	return flame_model_encode(m, o, s, FLAME_PAGE_MIN_SHARE, flame_page_write);
}
