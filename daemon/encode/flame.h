/* SPDX-License-Identifier: MIT */
/*
 * flame.h - a flame graph ready to draw, whoever built it and whatever
 * draws it: a call tree (encode/calltree.h) with the nodes wide enough to
 * see, a name for each of them (text, kind, module) and its colour.  Two
 * writers draw it, flamepage.c (the interactive html page) and flamesvg.c
 * (a static SVG); two builders make it, the daemon from a snapshot's model
 * (flame_model.c: `snapshot --format html|svg`) and perfctl from two
 * profiles read back (cli/diff_flame.c: `diff --format html|svg`).  So
 * there is one flame graph, drawn one way, and a differential graph is the
 * same graph with a second value per node.  Nothing here knows the model:
 * perfctl links these files.
 *
 * A differential graph is AFTER's tree with BEFORE's stacks merged in (the
 * union: a frame of BEFORE only is a node of AFTER-value 0), each node
 * carrying both values; it is coloured by the change of its total share,
 * after - before in points of each side's own total, so runs of different
 * lengths compare.  Red is growth and blue shrinkage, as in Brendan
 * Gregg's differential flame graphs and Pyroscope's diff view, full colour
 * at the largest change of a frame drawn (but at least
 * FLAME_FULL_CHANGE_MIN points, so an unchanged program's noise stays
 * pale), white for none.
 *
 * Pruning: a node under min_share of its profile's total (in a
 * differential graph: of both profiles') is left out with everything below
 * it, and counted; roots are always kept.  Names are added only for the
 * nodes kept, so a 100k-stack profile costs names for what is drawn only.
 * Colours are 0xRRGGBB, computed here once for both writers: a family per
 * kind (kernel, native, Python, JIT, ...) and a shade per name (a hash of
 * its text), or the change.
 */
#ifndef PERFD_FLAME_H
#define PERFD_FLAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "encode/calltree.h"

#define FLAME_PRUNED UINT32_MAX       /* node_name of a node left out */
#define FLAME_UNNAMED (UINT32_MAX - 1) /* node_name of a node kept, not named yet */
#define FLAME_FULL_CHANGE_MIN 2.0     /* points of share change drawn in full colour, at least */
#define FLAME_ROOT_COLOUR 0xd6d6d6u   /* the "all" box above the roots */

/* Where a writer's text goes: the daemon's answer (a JSON string, through
 * jsonw_string_append) or perfctl's output buffer.  reserve (NULL: none)
 * is told once, before the first put of a page whose size is known, about
 * how many bytes will follow, so a buffer of many MiB grows once instead
 * of being copied at every doubling; false: out of memory. */
struct flame_out {
	void (*put)(void *ctx, const char *s, size_t n);
	void *ctx;
	bool (*reserve)(void *ctx, size_t n);
};

struct flame_name {
	uint32_t text, len; /* in the flame's text */
	uint32_t kind;      /* index in kinds */
	uint32_t module;    /* index in modules; 0: none */
	uint32_t colour;    /* of a frame of this name in a plain graph */
};

/* A node's values in the profile before (a differential graph). */
struct flame_before {
	uint64_t total, self;
};

struct flame_opts {
	const char *kind, *unit; /* "cpu", "samples"; static strings */
	uint64_t period_ns;      /* of a CPU sample; 0: unknown */
	uint64_t memory_sample_bytes, time_unix_ns, duration_ns; /* 0: unknown */
	uint64_t total;          /* of the tree's roots */
	const char *const *kinds; /* the frame kinds' names, as name.kind indexes them */
	size_t n_kinds;
	double min_share; /* of the total: narrower nodes are left out */
	/* a differential graph: per tree node (t->n entries), or NULL */
	const struct flame_before *before;
	uint64_t before_total;
	const char *before_source, *after_source; /* what each side was read from */
};

struct flame {
	const struct calltree *t; /* not owned */
	struct flame_opts o;      /* strings and arrays not owned */
	uint32_t *node_name;      /* per tree node: a name, FLAME_PRUNED or FLAME_UNNAMED */
	uint32_t *node_colour;    /* per tree node, differential only */
	size_t kept, pruned_nodes;
	uint64_t pruned_value, pruned_before_value; /* of the subtrees left out */
	size_t gone_nodes;      /* differential: kept nodes of BEFORE only (the outermost) */
	uint64_t gone_value;    /* and their BEFORE value */
	double full_change;     /* differential: points drawn in full colour */

	char *text; /* names' and modules' text, each NUL-terminated */
	size_t text_len, text_cap;
	size_t name_start; /* of the name being written */
	struct flame_name *names;
	size_t n_names, cap_names;
	uint32_t *modules; /* text offsets; modules[0] is "" */
	size_t n_modules, cap_modules;
};

/* Sets f up to draw t (linked, and kept unchanged until flame_done()) and
 * decides which nodes are kept.  Returns 0 or -ENOMEM; flame_done() f
 * either way. */
int flame_init(struct flame *f, const struct calltree *t, const struct flame_opts *o);
void flame_done(struct flame *f);

/* The name being written grows by s[0..n). */
int flame_text(struct flame *f, const char *s, size_t n);
/* Ends the name being written.  Returns its index, or -ENOMEM. */
int64_t flame_name_end(struct flame *f, uint32_t kind, uint32_t module);
/* Adds a module (a path).  Returns its index (> 0), or -ENOMEM. */
int64_t flame_module(struct flame *f, const char *path);

/* Once every kept node is named: the differential colours.  Returns 0, or
 * -EINVAL when a kept node has no name, -ENOMEM. */
int flame_finish(struct flame *f);

static inline bool flame_kept(const struct flame *f, uint32_t node)
{
	return f->node_name[node] != FLAME_PRUNED;
}

static inline const char *flame_name_text(const struct flame *f, uint32_t name)
{
	return f->text + f->names[name].text;
}

/* Node's colour as drawn: its change's, or its name's. */
static inline uint32_t flame_colour(const struct flame *f, uint32_t node)
{
	return f->o.before ? f->node_colour[node] : f->names[f->node_name[node]].colour;
}

/* The colour of a kind's frames (shade 0, for a legend). */
uint32_t flame_kind_colour(const char *kind);

/* 100 * v / whole, 0 for an empty whole. */
static inline double flame_share(uint64_t v, uint64_t whole)
{
	return whole ? 100.0 * (double)v / (double)whole : 0.0;
}

/* The change of node's total share, after - before, in points. */
double flame_change(const struct flame *f, uint32_t node);

/* --- the writers ----------------------------------------------------------- */

/* The interactive page (flamepage.c), for a graph of at least
 * FLAME_PAGE_MIN_SHARE (0.005 %: under a pixel even zoomed ten times).  Returns 0 or -ENOMEM; what out
 * does with the text, and its own errors, are the caller's. */
#define FLAME_PAGE_MIN_SHARE (1.0 / 20000)
int flame_page_write(const struct flame *f, const struct flame_out *out);

/* The static SVG (flamesvg.c), FLAME_SVG_WIDTH pixels wide.  Returns as
 * flame_page_write(). */
#define FLAME_SVG_WIDTH 1200
#define FLAME_SVG_MIN_SHARE (0.5 / FLAME_SVG_WIDTH) /* half a pixel */
int flame_svg_write(const struct flame *f, const struct flame_out *out);

/* s (n bytes of JSON text) with every '<', '>', '&', U+2028 and U+2029
 * as a \uXXXX escape, into out (NULL: only measured; at most 6 n bytes);
 * returns its length.  The result means the same JSON and cannot end, or
 * open a comment in, the HTML <script> element that holds it. */
size_t html_script_escape(const char *s, size_t n, char *out);

#endif
