/* SPDX-License-Identifier: MIT */
/*
 * formats.h - the snapshot formats, one row each: name (as requested, and
 * the daemon's encoder NAME_encode in daemon/encode/NAME.c), the file
 * extension perfctl picks it by when -o FILE is given without --format
 * (the longest extension that ends FILE: ".speedscope.json" before ".json"),
 * and its form, which says how an answer carries it (protocol.h):
 *   PERFD_FORM_TEXT    text, the answer's "profile" string;
 *   PERFD_FORM_JSON    one JSON document, the answer's "profile" value;
 *   PERFD_FORM_BINARY  bytes, a frame after the answer's line, which
 *                      perfctl will not write to a terminal.
 * Adding a format is one row here plus its encoder file.
 */
#ifndef PERFD_FORMATS_H
#define PERFD_FORMATS_H

enum perfd_form {
	PERFD_FORM_TEXT,
	PERFD_FORM_JSON,
	PERFD_FORM_BINARY,
};

#define PERFD_FORMATS(X)                                \
	X(folded, ".folded", PERFD_FORM_TEXT)              \
	X(json, ".json", PERFD_FORM_JSON)                  \
	X(pprof, ".pb.gz", PERFD_FORM_BINARY)              \
	X(speedscope, ".speedscope.json", PERFD_FORM_JSON) \
	X(html, ".html", PERFD_FORM_TEXT)                  \
	X(svg, ".svg", PERFD_FORM_TEXT)

#endif
