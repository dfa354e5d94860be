/* SPDX-License-Identifier: MIT */
/*
 * formats.h - the snapshot formats, one row each: name (as requested, and
 * the daemon's encoder NAME_encode in daemon/encode/NAME.c) and the file
 * extension perfctl picks it by when -o FILE is given without --format
 * (the longest extension that ends FILE: ".speedscope.json" before ".json"),
 * and whether it is binary (1: bytes, sent in base64, that perfctl will not
 * write to a terminal) or text (0: text or JSON).
 * Adding a format is one row here plus its encoder file.
 */
#ifndef PERFD_FORMATS_H
#define PERFD_FORMATS_H

#define PERFD_FORMATS(X)        \
	X(folded, ".folded", 0)    \
	X(json, ".json", 0)        \
	X(pprof, ".pb.gz", 1)      \
	X(speedscope, ".speedscope.json", 0) \
	X(html, ".html", 0)        \
	X(svg, ".svg", 0)

#endif
