/* SPDX-License-Identifier: MIT */
/*
 * flamepage.c - a flame graph (flame.h) as one self-contained, interactive
 * page: `perfctl snapshot --format html` (through encode/html.c) and
 * `perfctl diff --format html` (cli/diff_flame.c).  Open it in any
 * browser, offline; nothing is fetched.
 *
 * The page is a fixed template, daemon/encode/flamegraph.html (HTML, CSS
 * and the script that draws the graph on a canvas, zooms, searches and
 * shows the figures of a frame under the pointer), with the graph in its
 * middle as JSON, in a <script type="application/json" id="perfd-data">
 * element that the page reads with JSON.parse.  The Makefile turns the
 * template into a C array (od and sed, into $(BUILD)/gen/flamegraph_html.h:
 * no tool beyond coreutils, and no file to find at run time), so the page
 * and the program that writes it always come from one build.
 *
 * The data is the tree's kept nodes laid flat, not a DOM node per frame: a
 * table of names (each written once, with its kind, its module and its
 * colour) and the nodes in depth-first order as four numbers each, [name,
 * total, self, number of children], children largest first:
 *
 *   { "version": 2, "kind", "unit", "period_ns", "memory_sample_bytes",
 *     "total", "time_unix_ns", "duration_ns", "roots": how many,
 *     "kinds": [ names ], "kind_colours": [ 0xRRGGBB per kind ],
 *     "root_colour", "modules": [ "", path, ... ], "names": [ text ],
 *     "name_info": [ kind, module ]..., "name_colours": [ per name ],
 *     "nodes": [ name, total, self, children ]...,
 *     "pruned": { "nodes", "value", "before_value", "min_share" },
 *     "diff": { "before_total", "before_source", "after_source",
 *               "full_change": points drawn in full colour,
 *               "gone": { "nodes", "value" }: kept frames of BEFORE only,
 *               "nodes": [ before total, before self, colour ]... } }
 *
 * "diff" (and "before_value") only in a differential graph, whose
 * "name_colours" are then left out: its nodes are coloured by change.  A
 * node under the flame's min_share (1/20000 of the total, 0.005 %: under a
 * pixel even ten times zoomed) is left out with all below it, its value
 * staying in its parent's total; the page says how many nodes and how much
 * value that was.  So a 100k-stack profile stays a few MiB and the page
 * draws only what is wide enough to see.
 *
 * Escaping: names (which hold anything: C++ templates' '<', '&', quotes,
 * backslashes, bytes that are not UTF-8) go only into the JSON, written by
 * the JSON writer, and the JSON's every '<', '>', '&', U+2028 and U+2029
 * then becomes a \uXXXX escape (html_script_escape()), so no name can end
 * the script element or open a comment in it; the page's script puts text
 * on the canvas or in textContent only.  Cost: the JSON is built once in
 * its own buffer and handed to the output once, escaped on the way in
 * slices.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "encode/flame.h"
#include "gen/flamegraph_html.h"
#include "perfd/macro.h"

#define DATA_MARKER "@PERFD_DATA@"
#define SLICE 4096 /* bytes of JSON escaped at a time */

size_t html_script_escape(const char *s, size_t n, char *out)
{
	size_t at = 0;

	for (size_t i = 0; i < n; i++) {
		const unsigned char *c = (const unsigned char *)s + i;
		const char *esc = NULL;

		if (*c == '<')
			esc = "\\u003c";
		else if (*c == '>')
			esc = "\\u003e";
		else if (*c == '&')
			esc = "\\u0026";
		else if (*c == 0xe2 && i + 2 < n && c[1] == 0x80 && (c[2] == 0xa8 || c[2] == 0xa9))
			esc = c[2] == 0xa8 ? "\\u2028" : "\\u2029";
		if (!esc) {
			if (out)
				out[at] = (char)*c;
			at++;
			continue;
		}
		if (out)
			memcpy(out + at, esc, 6);
		at += 6;
		if (*c == 0xe2)
			i += 2;
	}
	return at;
}

static uint32_t kept_children(const struct flame *f, const struct calltree_node *n)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n->n_children; i++)
		k += flame_kept(f, f->t->children[n->first_child + i]);
	return k;
}

/* Writes node id and, depth first, its kept children; with before, the
 * node's BEFORE figures into b in the same order. */
static void write_node(const struct flame *f, uint32_t id, struct jsonw *w, struct jsonw *b)
{
	const struct calltree_node *n = &f->t->nodes[id];

	jsonw_u64(w, f->node_name[id]);
	jsonw_u64(w, n->total);
	jsonw_u64(w, n->self);
	jsonw_u64(w, kept_children(f, n));
	if (f->o.before) {
		jsonw_u64(b, f->o.before[id].total);
		jsonw_u64(b, f->o.before[id].self);
		jsonw_u64(b, f->node_colour[id]);
	}
	for (uint32_t i = 0; i < n->n_children; i++) {
		uint32_t c = f->t->children[n->first_child + i];

		if (flame_kept(f, c))
			write_node(f, c, w, b);
	}
}

static void write_diff(const struct flame *f, struct jsonw *w, const struct jsonw *nodes)
{
	jsonw_key(w, "diff");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "before_total", f->o.before_total);
	jsonw_kv_string(w, "before_source", f->o.before_source ? f->o.before_source : "");
	jsonw_kv_string(w, "after_source", f->o.after_source ? f->o.after_source : "");
	jsonw_kv_double(w, "full_change", f->full_change);
	jsonw_key(w, "gone");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "nodes", f->gone_nodes);
	jsonw_kv_u64(w, "value", f->gone_value);
	jsonw_object_end(w);
	jsonw_key(w, "nodes");
	jsonw_raw(w, nodes->buf, nodes->len);
	jsonw_object_end(w);
}

static void write_data(const struct flame *f, struct jsonw *w, struct jsonw *before)
{
	const struct flame_opts *o = &f->o;

	jsonw_object_begin(w);
	jsonw_kv_u64(w, "version", 2);
	jsonw_kv_string(w, "kind", o->kind);
	jsonw_kv_string(w, "unit", o->unit);
	if (o->period_ns)
		jsonw_kv_u64(w, "period_ns", o->period_ns);
	if (o->memory_sample_bytes)
		jsonw_kv_u64(w, "memory_sample_bytes", o->memory_sample_bytes);
	jsonw_kv_u64(w, "total", o->total);
	jsonw_kv_u64(w, "time_unix_ns", o->time_unix_ns);
	jsonw_kv_u64(w, "duration_ns", o->duration_ns);
	jsonw_kv_u64(w, "roots", f->t->n_roots);
	jsonw_key(w, "kinds");
	jsonw_array_begin(w);
	for (size_t i = 0; i < o->n_kinds; i++)
		jsonw_string(w, o->kinds[i]);
	jsonw_array_end(w);
	jsonw_key(w, "kind_colours");
	jsonw_array_begin(w);
	for (size_t i = 0; i < o->n_kinds; i++)
		jsonw_u64(w, flame_kind_colour(o->kinds[i]));
	jsonw_array_end(w);
	jsonw_kv_u64(w, "root_colour", FLAME_ROOT_COLOUR);
	jsonw_key(w, "modules");
	jsonw_array_begin(w);
	for (size_t i = 0; i < f->n_modules; i++)
		jsonw_string(w, f->text + f->modules[i]);
	jsonw_array_end(w);
	jsonw_key(w, "names");
	jsonw_array_begin(w);
	for (size_t i = 0; i < f->n_names; i++)
		jsonw_string_len(w, flame_name_text(f, (uint32_t)i), f->names[i].len);
	jsonw_array_end(w);
	jsonw_key(w, "name_info");
	jsonw_array_begin(w);
	for (size_t i = 0; i < f->n_names; i++) {
		jsonw_u64(w, f->names[i].kind);
		jsonw_u64(w, f->names[i].module);
	}
	jsonw_array_end(w);
	if (!o->before) {
		jsonw_key(w, "name_colours");
		jsonw_array_begin(w);
		for (size_t i = 0; i < f->n_names; i++)
			jsonw_u64(w, f->names[i].colour);
		jsonw_array_end(w);
	}
	jsonw_key(w, "nodes");
	jsonw_array_begin(w);
	jsonw_array_begin(before);
	for (uint32_t i = 0; i < f->t->n_roots; i++)
		write_node(f, calltree_root(f->t, i), w, before);
	jsonw_array_end(before);
	jsonw_array_end(w);
	jsonw_key(w, "pruned");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "nodes", f->pruned_nodes);
	jsonw_kv_u64(w, "value", f->pruned_value);
	if (o->before)
		jsonw_kv_u64(w, "before_value", f->pruned_before_value);
	jsonw_kv_double(w, "min_share", o->min_share);
	jsonw_object_end(w);
	if (o->before)
		write_diff(f, w, before);
	jsonw_object_end(w);
}

/* Hands JSON text s (n bytes, valid UTF-8) to out, safe inside a script
 * element; in slices that never cut a UTF-8 sequence, since a JSON string
 * writer behind out may check each piece. */
static int put_script_safe(const struct flame_out *out, const char *s, size_t n)
{
	_cleanup_free_ char *buf = malloc(6 * SLICE);

	if (!buf)
		return -ENOMEM;
	while (n > 0) {
		size_t k = MIN(n, (size_t)SLICE);

		while (k > 1 && k < n && ((unsigned char)s[k] & 0xc0) == 0x80)
			k--;
		out->put(out->ctx, buf, html_script_escape(s, k, buf));
		s += k;
		n -= k;
	}
	return 0;
}

int flame_page_write(const struct flame *f, const struct flame_out *out)
{
	const char *page = (const char *)flamegraph_html;
	size_t size = sizeof(flamegraph_html);
	const char *marker = memmem(page, size, DATA_MARKER, strlen(DATA_MARKER));
	struct jsonw data, before;
	int r;

	if (!marker)
		return -EINVAL; /* a template without its marker: a build error */
	jsonw_init(&data);
	jsonw_init(&before);
	write_data(f, &data, &before);
	r = jsonw_error(&data) ?: jsonw_error(&before);
	/* the template and the data: what the page holds but for the few
	 * characters put_script_safe escapes */
	if (r == 0 && out->reserve && !out->reserve(out->ctx, size + data.len))
		r = -ENOMEM;
	if (r == 0) {
		out->put(out->ctx, page, (size_t)(marker - page));
		r = put_script_safe(out, data.buf, data.len);
		marker += strlen(DATA_MARKER);
		out->put(out->ctx, marker, size - (size_t)(marker - page));
	}
	jsonw_done(&data);
	jsonw_done(&before);
	return r;
}
