/* SPDX-License-Identifier: MIT */
/*
 * json.c - the resolved call tree as JSON, for scripts.
 *
 *   { "kind": "cpu", "unit": "samples", "period_ns": N, "total": T,
 *     "frames": [ { "kind", "function", "file", "line", "start_line",
 *                   "module", "build_id", "offset", "symbol_offset",
 *                   "inlined_by" }, ... ],
 *     "processes": [ { "pid", "ns_pid", "comm", "start_time_ns", "cgroup",
 *                      "unit", "exited", "total",
 *                      "tree": { "total", "self", "children": [ NODE ] } } ] }
 *   NODE = { "frame": index in frames, "self", "total", "children": [...] }
 *        | { "thread": { "tid", "comm" }, "self": 0, "total", "children" }
 *
 * Each function inlined at an address is a frame of its own, "inlined_by"
 * naming the frame it was inlined into, so a node is one function at one
 * line and a function's self and total time are sums over its nodes.
 * Children come largest total first (the tree is encode/calltree.c's,
 * shared with the flame graph).  Strings absent from a frame (no
 * file, no module) are left out rather than empty, and so are unknown
 * lines: "start_line", the line the function starts at (a native
 * function's with lines asked for, every Python function's), is there
 * when known.  Kernel frames have the module "[kernel.kallsyms]" (with
 * the kernel's build-id when known), and "symbol_offset", the offset from
 * the start of their function (ksys_write+0x27 is 39; 0 where no symbol
 * names the frame); their "offset", the kernel's absolute address, only
 * when the model keeps kernel addresses (model.h: the client may see
 * them), so that a script can tell a hidden address from a shown one.
 */
#include "base/kindtab.h"
#include "encode/calltree.h"
#include "encode/encode.h"
#include "perfd/macro.h"

/* Node id and its subtree, flushed to s as the text grows, so that a
 * big process's tree is not held twice. */
static int write_node(const struct calltree *t, const struct model *m, uint32_t id,
		      struct jsonw *w, struct encode_sink *s)
{
	const struct calltree_node *n = &t->nodes[id];
	int r = 0;

	jsonw_object_begin(w);
	if (n->parent != CALLTREE_NO_PARENT && (n->frame & CALLTREE_THREAD)) {
		jsonw_key(w, "thread");
		jsonw_object_begin(w);
		jsonw_kv_u64(w, "tid", n->frame & ~CALLTREE_THREAD);
		jsonw_kv_string(w, "comm", model_string(m, n->comm));
		jsonw_object_end(w);
	} else if (n->parent != CALLTREE_NO_PARENT) {
		jsonw_kv_u64(w, "frame", n->frame);
	}
	jsonw_kv_u64(w, "self", n->self);
	jsonw_kv_u64(w, "total", n->total);
	jsonw_key(w, "children");
	jsonw_array_begin(w);
	for (uint32_t i = 0; i < n->n_children && r == 0; i++)
		r = write_node(t, m, t->children[n->first_child + i], w, s);
	jsonw_array_end(w);
	jsonw_object_end(w);
	return r < 0 ? r : encode_sink_flush_jsonw(s, w, ENCODE_JSON_CHUNK);
}

static void write_frame(const struct calltree *t, const struct model *m, size_t i, struct jsonw *w)
{
	uint32_t loc = calltree_frame_location(t, i), ln = (uint32_t)(t->frames[i] & 0xff);
	const struct model_location *l = &m->locations[loc];
	const struct model_line *line = calltree_frame_line(t, m, i);
	const struct model_function *f = &m->functions[line->function];

	jsonw_object_begin(w);
	jsonw_kv_string(w, "kind", frame_kind_names[f->kind]);
	jsonw_kv_string(w, "function", model_string(m, f->name));
	if (f->file) {
		jsonw_kv_string(w, "file", model_string(m, f->file));
		if (line->line)
			jsonw_kv_u64(w, "line", line->line);
	}
	if (f->start_line)
		jsonw_kv_u64(w, "start_line", f->start_line);
	if (l->mapping) {
		const struct model_mapping *mp = &m->mappings[l->mapping - 1];

		jsonw_kv_string(w, "module", model_string(m, mp->path));
		if (mp->build_id)
			jsonw_kv_string(w, "build_id", model_string(m, mp->build_id));
	}
	if (f->kind == FRAME_KIND_KERNEL) {
		jsonw_kv_u64(w, "symbol_offset", l->symbol_offset);
		if (m->kernel_addresses)
			jsonw_kv_u64(w, "offset", l->offset);
	} else if (f->kind != FRAME_KIND_SPECIAL && f->kind != FRAME_KIND_PYTHON) {
		jsonw_kv_u64(w, "offset", l->offset);
	}
	if (ln > 0) {
		uint64_t *outer = u64map_get(&t->frame_index, (uint64_t)loc << 8 | (ln - 1));

		if (outer)
			jsonw_kv_u64(w, "inlined_by", *outer);
	}
	jsonw_object_end(w);
}

int json_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s)
{
	struct calltree t = { 0 };
	struct jsonw doc, *w = &doc;
	int r = calltree_build(&t, m, o->cancel);

	jsonw_init(w);
	if (r == 0) {
		jsonw_object_begin(w);
		jsonw_kv_string(w, "kind", kind_infos[m->kind].name);
		jsonw_kv_string(w, "unit", kind_infos[m->kind].unit);
		if (kind_infos[m->kind].period == PERFD_KIND_PERIOD_PERIODS)
			jsonw_kv_u64(w, "period_ns", o->period_ns);
		jsonw_kv_u64(w, "total", m->total);
		jsonw_key(w, "frames");
		jsonw_array_begin(w);
		for (size_t i = 0; i < t.n_frames && r == 0; i++) {
			write_frame(&t, m, i, w);
			r = encode_sink_flush_jsonw(s, w, ENCODE_JSON_CHUNK);
		}
		jsonw_array_end(w);
		jsonw_key(w, "processes");
		jsonw_array_begin(w);
		for (size_t i = 0; i < m->n_processes && r == 0; i++) {
			const struct model_process *p = &m->processes[i];

			jsonw_object_begin(w);
			jsonw_kv_u64(w, "pid", p->pid);
			jsonw_kv_u64(w, "ns_pid", p->ns_pid);
			jsonw_kv_string(w, "comm", model_string(m, p->comm));
			jsonw_kv_u64(w, "start_time_ns", p->start_time_ns);
			if (p->cgroup)
				jsonw_kv_string(w, "cgroup", model_string(m, p->cgroup));
			if (p->unit)
				jsonw_kv_string(w, "unit", model_string(m, p->unit));
			jsonw_kv_bool(w, "exited", p->exited);
			jsonw_kv_u64(w, "total", p->total);
			jsonw_key(w, "tree");
			r = write_node(&t, m, (uint32_t)i, w, s);
			jsonw_object_end(w);
			if (r == 0)
				r = encode_sink_flush_jsonw(s, w, ENCODE_JSON_CHUNK);
		}
		jsonw_array_end(w);
		jsonw_object_end(w);
		if (r == 0)
			r = encode_sink_flush_jsonw(s, w, 0);
	}
	jsonw_done(w);
	calltree_done(&t);
	return r;
}
