/* SPDX-License-Identifier: MIT */
/*
 * formats.h - the snapshot formats, one row each: name (as requested, and
 * the daemon's encoder NAME_encode in daemon/encode/NAME.c) and the file
 * extension perfctl picks it by when -o FILE is given without --format
 * (the longest extension that ends FILE: ".speedscope.json" before ".json").
 * Adding a format is one row here plus its encoder file.
 */
#ifndef PERFD_FORMATS_H
#define PERFD_FORMATS_H

#define PERFD_FORMATS(X)        \
	X(folded, ".folded")    \
	X(json, ".json")        \
	X(pprof, ".pb.gz")      \
	X(speedscope, ".speedscope.json") \
	X(html, ".html")        \
	X(svg, ".svg")

#endif
