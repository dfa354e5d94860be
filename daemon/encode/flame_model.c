/* SPDX-License-Identifier: MIT */
/*
 * flame_model.c - a snapshot's model as a flame graph (encode/flame.h),
 * for the formats that draw one: html.c's page and svg.c's picture.
 *
 * The graph is the model's call tree (encode/calltree.c): each process a
 * root, "comm (pid N)"; with threads a "[thread TID COMM]" node below it;
 * frames named as folded output names them, "function (file:line)" where
 * lines exist (a Python frame "qualname (file:line)" with its whole path,
 * a native one with its file's base name), kernel and special frames by
 * their function alone.  Only the nodes the graph keeps are named, each
 * frame once however many nodes it has, each process and thread node on
 * its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/kindtab.h"
#include "encode/encode.h"
#include "encode/flame.h"
#include "perfd/macro.h"

enum { KIND_PROCESS = FRAME_KINDS, KIND_THREAD, N_KINDS };

static int text(struct flame *f, const char *s)
{
	return flame_text(f, s, strlen(s));
}

/* Names node id: returns the name's index or -ENOMEM. */
static int64_t name_node(struct flame *f, const struct model *m, uint32_t id)
{
	const struct calltree_node *n = &f->t->nodes[id];
	const struct model_line *ln;
	const struct model_function *fn;
	const char *file, *base;
	char buf[64];
	int r;

	if (n->parent == CALLTREE_NO_PARENT) {
		const struct model_process *proc = &m->processes[n->frame];

		(void)snprintf(buf, sizeof(buf), " (pid %u)", proc->pid);
		r = text(f, model_string(m, proc->comm)) ?: text(f, buf);
		return r < 0 ? r : flame_name_end(f, KIND_PROCESS, 0);
	}
	if (n->frame & CALLTREE_THREAD) {
		const char *comm = model_string(m, n->comm);

		(void)snprintf(buf, sizeof(buf), "[thread %u%s", n->frame & ~CALLTREE_THREAD,
			       *comm ? " " : "");
		r = text(f, buf) ?: text(f, comm) ?: text(f, "]");
		return r < 0 ? r : flame_name_end(f, KIND_THREAD, 0);
	}
	ln = calltree_frame_line(f->t, m, n->frame);
	fn = &m->functions[ln->function];
	file = model_string(m, fn->file);
	base = fn->kind == FRAME_KIND_PYTHON ? NULL : strrchr(file, '/');
	r = text(f, model_string(m, fn->name));
	if (r == 0 && *file && fn->kind != FRAME_KIND_KERNEL && fn->kind != FRAME_KIND_SPECIAL) {
		r = text(f, " (") ?: text(f, base ? base + 1 : file);
		if (r == 0 && (ln->line || fn->kind != FRAME_KIND_PYTHON)) {
			(void)snprintf(buf, sizeof(buf), ":%u", ln->line);
			r = text(f, buf);
		}
		r = r ?: text(f, ")");
	}
	if (r < 0)
		return r;
	return flame_name_end(f, fn->kind,
			      m->locations[calltree_frame_location(f->t, n->frame)].mapping);
}

/* Names every kept node of f; frame_name caches a frame's name + 1. */
static int name_nodes(struct flame *f, const struct model *m, uint32_t *frame_name)
{
	for (size_t i = 0; i < m->n_mappings; i++) {
		int64_t k = flame_module(f, model_string(m, m->mappings[i].path));

		if (k < 0)
			return (int)k;
	}
	for (uint32_t i = 0; i < f->t->n; i++) {
		const struct calltree_node *n = &f->t->nodes[i];
		bool frame = n->parent != CALLTREE_NO_PARENT && !(n->frame & CALLTREE_THREAD);
		int64_t k;

		if (!flame_kept(f, i))
			continue;
		if (frame && frame_name[n->frame]) {
			f->node_name[i] = frame_name[n->frame] - 1;
			continue;
		}
		k = name_node(f, m, i);
		if (k < 0)
			return (int)k;
		f->node_name[i] = (uint32_t)k;
		if (frame)
			frame_name[n->frame] = (uint32_t)k + 1;
	}
	return flame_finish(f);
}

/* flame_out (the model-free drawing's, which perfctl shares) over a sink:
 * the first error kept for the end. */
struct sink_out {
	struct encode_sink *s;
	int error;
};

static void put_sink(void *ctx, const char *text, size_t n)
{
	struct sink_out *so = ctx;
	int r = encode_sink_write(so->s, text, n);

	if (r < 0 && so->error == 0)
		so->error = r;
}

static bool reserve_sink(void *ctx, size_t n)
{
	struct sink_out *so = ctx;

	return encode_sink_reserve(so->s, n);
}

int flame_model_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *s,
		       double min_share, int (*write)(const struct flame *, const struct flame_out *))
{
	const char *kinds[N_KINDS] = { [KIND_PROCESS] = "process", [KIND_THREAD] = "thread" };
	struct calltree t = { 0 };
	struct flame f = { 0 };
	_cleanup_free_ uint32_t *frame_name = NULL;
	int r = calltree_build(&t, m, o->cancel);

	for (size_t i = 0; i < FRAME_KINDS; i++)
		kinds[i] = frame_kind_names[i];
	if (r == 0)
		r = flame_init(&f, &t, &(struct flame_opts){
			.kind = kind_infos[m->kind].name,
			.unit = kind_infos[m->kind].unit,
			.period_ns = kind_infos[m->kind].period == PERFD_KIND_PERIOD_PERIODS ? o->period_ns : 0,
			.memory_sample_bytes =
				kind_infos[m->kind].period == PERFD_KIND_PERIOD_BYTES ? o->memory_sample_bytes : 0,
			.time_unix_ns = o->time_unix_ns,
			.duration_ns = o->duration_ns,
			.total = m->total,
			.kinds = kinds,
			.n_kinds = N_KINDS,
			.min_share = min_share,
		});
	if (r == 0) {
		frame_name = calloc(t.n_frames + 1, sizeof(*frame_name));
		r = frame_name ? name_nodes(&f, m, frame_name) : -ENOMEM;
	}
	if (r == 0) {
		struct sink_out so = { .s = s };

		r = write(&f, &(struct flame_out){ put_sink, &so, reserve_sink });
		if (r == 0)
			r = so.error;
	}
	flame_done(&f);
	calltree_done(&t);
	return r;
}
