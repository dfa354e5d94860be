/* SPDX-License-Identifier: MIT */
/*
 * html.c - the profile as one self-contained, interactive flame graph page
 * (`perfctl snapshot --format html`, or -o FILE.html): open it in any
 * browser, offline; nothing is fetched.
 *
 * The page is a fixed template, daemon/encode/flamegraph.html (HTML, CSS
 * and the script that draws the graph on a canvas, zooms, searches and
 * shows the figures of a frame under the pointer), with the profile in its
 * middle as JSON, in a <script type="application/json" id="perfd-data">
 * element that the page reads with JSON.parse.  The Makefile turns the
 * template into a C array (od and sed, into $(BUILD)/gen/flamegraph_html.h:
 * no tool beyond coreutils, and no file to find at run time), so the page
 * and the daemon that writes it always come from one build.
 *
 * The data is the call tree of encode/calltree.c laid flat, not a DOM node
 * per frame: a table of names (each written once, with its kind and its
 * module) and the nodes in depth-first order as four numbers each, [name,
 * total, self, number of children], children largest first:
 *
 *   { "kind", "unit", "period_ns", "memory_sample_bytes", "total",
 *     "time_unix_ns", "duration_ns", "roots": number of processes,
 *     "kinds": [ "kernel", "native", "python", "jit", "special", "process",
 *                "thread" ],
 *     "modules": [ "", path, ... ], "names": [ text ], "name_info": [ kind,
 *     module ]..., "nodes": [ name, total, self, children ]...,
 *     "pruned": { "nodes", "value", "min_share" } }
 *
 * Each process is a root, "comm (pid N)"; with threads a "[thread TID
 * COMM]" node follows; frames read as in folded output, "function
 * (file:line)" where lines exist.  A node below 1/PRUNE_DENOMINATOR of the
 * total (0.005 %: under a pixel even ten times zoomed) is left out with all
 * below it, its value staying in its parent's total; the page says how many
 * nodes and how much value that was.  So a 100k-stack profile stays a few
 * MiB and the page draws only what is wide enough to see.
 *
 * Escaping: names (which hold anything: C++ templates' '<', '&', quotes,
 * backslashes, bytes that are not UTF-8) go only into the JSON, written by
 * the JSON writer, and the JSON's every '<', '>', '&', U+2028 and U+2029
 * then becomes a \uXXXX escape (html_script_escape()), so no name can end
 * the script element or open a comment in it; the page's script puts text
 * on the canvas or in textContent only.  The whole page is then the
 * answer's "profile" string.  Cost: the JSON is built once in its own
 * buffer and copied once into the answer, escaped on the way in slices.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "encode/calltree.h"
#include "encode/encode.h"
#include "gen/flamegraph_html.h"
#include "perfd/macro.h"

#define PRUNE_DENOMINATOR 20000 /* keep nodes of at least 1/20000 of the total */
#define DATA_MARKER "@PERFD_DATA@"
#define SLICE 4096 /* bytes of JSON escaped at a time */

enum { KIND_PROCESS = FRAME_KINDS, KIND_THREAD };

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

struct page {
	const struct model *m;
	struct calltree t;
	uint32_t *frame_name; /* per calltree frame: its name's index + 1, 0 for none yet */
	uint32_t *names;      /* per name: the first node that bears it */
	size_t n_names;
	uint64_t min_value; /* of a node drawn */
	size_t kept;
	uint64_t pruned_value;
};

static bool kept(const struct page *p, const struct calltree_node *n)
{
	return n->total > 0 && n->total >= p->min_value;
}

/* The index of node id's name, added at its first use: one per frame, one
 * per process or thread node. */
static uint32_t name_of(struct page *p, uint32_t id)
{
	const struct calltree_node *n = &p->t.nodes[id];
	bool frame = n->parent != CALLTREE_NO_PARENT && !(n->frame & CALLTREE_THREAD);

	if (frame && p->frame_name[n->frame])
		return p->frame_name[n->frame] - 1;
	p->names[p->n_names] = id;
	if (frame)
		p->frame_name[n->frame] = (uint32_t)p->n_names + 1;
	return (uint32_t)p->n_names++;
}

/* Writes node id and, depth first, its children wide enough to draw. */
static void write_node(struct page *p, uint32_t id, struct jsonw *w)
{
	const struct calltree_node *n = &p->t.nodes[id];
	uint32_t k = 0;

	/* children come largest first: the ones kept are a prefix */
	while (k < n->n_children && kept(p, calltree_child(&p->t, n, k)))
		k++;
	for (uint32_t i = k; i < n->n_children; i++)
		p->pruned_value += calltree_child(&p->t, n, i)->total;
	p->kept++;
	jsonw_u64(w, name_of(p, id));
	jsonw_u64(w, n->total);
	jsonw_u64(w, n->self);
	jsonw_u64(w, k);
	for (uint32_t i = 0; i < k; i++)
		write_node(p, p->t.children[n->first_child + i], w);
}

/* The text of node id's name, as folded output writes it. */
static void write_name(const struct page *p, uint32_t id, struct jsonw *w)
{
	const struct model *m = p->m;
	const struct calltree_node *n = &p->t.nodes[id];
	const struct model_line *ln;
	const struct model_function *f;
	const char *file, *base;
	char buf[64];

	jsonw_string_begin(w);
	if (n->parent == CALLTREE_NO_PARENT) {
		const struct model_process *proc = &m->processes[id];

		jsonw_string_append(w, model_string(m, proc->comm), strlen(model_string(m, proc->comm)));
		jsonw_string_append(w, buf, (size_t)snprintf(buf, sizeof(buf), " (pid %u)", proc->pid));
	} else if (n->frame & CALLTREE_THREAD) {
		const char *comm = model_string(m, n->comm);

		jsonw_string_append(w, buf, (size_t)snprintf(buf, sizeof(buf), "[thread %u%s",
							      n->frame & ~CALLTREE_THREAD, *comm ? " " : ""));
		jsonw_string_append(w, comm, strlen(comm));
		jsonw_string_append(w, "]", 1);
	} else {
		ln = calltree_frame_line(&p->t, m, n->frame);
		f = &m->functions[ln->function];
		file = model_string(m, f->file);
		base = f->kind == FRAME_KIND_PYTHON ? NULL : strrchr(file, '/');
		jsonw_string_append(w, model_string(m, f->name), strlen(model_string(m, f->name)));
		if (*file && f->kind != FRAME_KIND_KERNEL && f->kind != FRAME_KIND_SPECIAL) {
			jsonw_string_append(w, " (", 2);
			file = base ? base + 1 : file;
			jsonw_string_append(w, file, strlen(file));
			if (ln->line || f->kind != FRAME_KIND_PYTHON)
				jsonw_string_append(w, buf, (size_t)snprintf(buf, sizeof(buf), ":%u", ln->line));
			jsonw_string_append(w, ")", 1);
		}
	}
	jsonw_string_end(w);
}

/* [kind, module] of node id's name: module an index in "modules". */
static void write_name_info(const struct page *p, uint32_t id, struct jsonw *w)
{
	const struct calltree_node *n = &p->t.nodes[id];

	if (n->parent == CALLTREE_NO_PARENT || (n->frame & CALLTREE_THREAD)) {
		jsonw_u64(w, n->parent == CALLTREE_NO_PARENT ? KIND_PROCESS : KIND_THREAD);
		jsonw_u64(w, 0);
	} else {
		const struct model_line *ln = calltree_frame_line(&p->t, p->m, n->frame);

		jsonw_u64(w, p->m->functions[ln->function].kind);
		jsonw_u64(w, p->m->locations[calltree_frame_location(&p->t, n->frame)].mapping);
	}
}

static void write_data(struct page *p, const struct encode_opts *o, struct jsonw *w)
{
	const struct model *m = p->m;

	jsonw_object_begin(w);
	jsonw_kv_u64(w, "version", 1);
	jsonw_kv_string(w, "kind", profile_kinds[m->kind].name);
	jsonw_kv_string(w, "unit", profile_kinds[m->kind].unit);
	if (m->kind == PROFILE_KIND_CPU)
		jsonw_kv_u64(w, "period_ns", o->period_ns);
	if (m->kind == PROFILE_KIND_MEMORY)
		jsonw_kv_u64(w, "memory_sample_bytes", o->memory_sample_bytes);
	jsonw_kv_u64(w, "total", m->total);
	jsonw_kv_u64(w, "time_unix_ns", o->time_unix_ns);
	jsonw_kv_u64(w, "duration_ns", o->duration_ns);
	jsonw_kv_u64(w, "roots", m->n_processes);
	jsonw_key(w, "kinds");
	jsonw_array_begin(w);
	for (size_t i = 0; i < FRAME_KINDS; i++)
		jsonw_string(w, frame_kind_names[i]);
	jsonw_string(w, "process");
	jsonw_string(w, "thread");
	jsonw_array_end(w);
	jsonw_key(w, "modules");
	jsonw_array_begin(w);
	jsonw_string(w, "");
	for (size_t i = 0; i < m->n_mappings; i++)
		jsonw_string(w, model_string(m, m->mappings[i].path));
	jsonw_array_end(w);
	/* nodes first: walking them names the names */
	jsonw_key(w, "nodes");
	jsonw_array_begin(w);
	for (size_t i = 0; i < m->n_processes; i++)
		write_node(p, (uint32_t)i, w);
	jsonw_array_end(w);
	jsonw_key(w, "names");
	jsonw_array_begin(w);
	for (size_t i = 0; i < p->n_names; i++)
		write_name(p, p->names[i], w);
	jsonw_array_end(w);
	jsonw_key(w, "name_info");
	jsonw_array_begin(w);
	for (size_t i = 0; i < p->n_names; i++)
		write_name_info(p, p->names[i], w);
	jsonw_array_end(w);
	jsonw_key(w, "pruned");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "nodes", p->t.n - p->kept);
	jsonw_kv_u64(w, "value", p->pruned_value);
	jsonw_kv_double(w, "min_share", 1.0 / PRUNE_DENOMINATOR);
	jsonw_object_end(w);
	jsonw_object_end(w);
}

/* Appends JSON text s (n bytes, valid UTF-8) to w's string, safe inside a
 * script element; in slices that never cut a UTF-8 sequence, since the
 * writer checks each piece. */
static int append_script_safe(struct jsonw *w, const char *s, size_t n)
{
	_cleanup_free_ char *out = malloc(6 * SLICE);

	if (!out)
		return -ENOMEM;
	while (n > 0) {
		size_t k = MIN(n, (size_t)SLICE);

		while (k > 1 && k < n && ((unsigned char)s[k] & 0xc0) == 0x80)
			k--;
		jsonw_string_append(w, out, html_script_escape(s, k, out));
		s += k;
		n -= k;
	}
	return 0;
}

int html_encode(const struct model *m, const struct encode_opts *o, struct jsonw *w)
{
	const char *page = (const char *)flamegraph_html;
	size_t size = sizeof(flamegraph_html);
	const char *marker = memmem(page, size, DATA_MARKER, strlen(DATA_MARKER));
	struct page p = { .m = m };
	struct jsonw data;
	int r;

	if (!marker)
		return -EINVAL; /* a template without its marker: a build error */
	r = calltree_build(&p.t, m);
	p.frame_name = calloc(p.t.n_frames + 1, sizeof(*p.frame_name));
	p.names = malloc((p.t.n + 1) * sizeof(*p.names));
	if (r == 0 && (!p.frame_name || !p.names))
		r = -ENOMEM;
	p.min_value = (m->total + PRUNE_DENOMINATOR - 1) / PRUNE_DENOMINATOR;
	jsonw_init(&data);
	if (r == 0) {
		write_data(&p, o, &data);
		r = jsonw_error(&data);
	}
	if (r == 0 && !jsonw_reserve(w, size + data.len + data.len / 8))
		r = -ENOMEM;
	if (r == 0) {
		jsonw_string_begin(w);
		jsonw_string_append(w, page, (size_t)(marker - page));
		r = append_script_safe(w, data.buf, data.len);
		marker += strlen(DATA_MARKER);
		jsonw_string_append(w, marker, size - (size_t)(marker - page));
		jsonw_string_end(w);
	}
	if (r == 0)
		r = jsonw_error(w);
	jsonw_done(&data);
	free(p.frame_name);
	free(p.names);
	calltree_done(&p.t);
	return r;
}
