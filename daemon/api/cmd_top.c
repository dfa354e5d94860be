/* SPDX-License-Identifier: MIT */
/*
 * cmd_top.c - "top": one refresh of `perfctl top`, computed from the
 * store's live aggregates when it is asked for, and holding only what the
 * screen shows: "rows" rows from "offset", trees "depth" deep, all capped.
 *
 * Two views of the last "interval" whole seconds (query.h's window, the
 * one ps counts):
 *
 *  processes  those ps would list (on CPU, or their RSS moved; "all":
 *             every live one) that the client may see, less kernel threads
 *             unless asked for and those whose comm lacks "filter", sorted
 *             by CPU, RSS, peak RSS or growth: ps's list and rows
 *             (query_list_processes), with top's filters, sort and window
 *             of growth, and a few fields more; and for the rows sent only,
 *             the top function by self, from one model of their stacks cut
 *             to the leaf (model_opts.leaf_only): naming it costs one frame
 *             per distinct leaf, not the whole stacks.
 *  functions  of one process ("pid"), or of every process the list would
 *             take: each function's self and total (a stack counts once
 *             for each function in it, however often it recurses), sorted
 *             by either; with "function", its callers and callees as
 *             trees: above its outermost call and below its innermost one
 *             in each stack, each frame the function its symbol names
 *             (code inlined into it is its own) at the line it ran.  A
 *             memory view leaves kernel frames out, as mem and report do:
 *             they are the page-fault path under every sample.  Functions
 *             are keyed by name and kind (kernel, native, Python, JIT):
 *             two of one name in two files are one row, shown with its
 *             first frame's file; a Python and a native one are two.
 *
 * The function view's numbers are the analysis module's
 * (analysis/functions.h), the code `perfctl report`, `diff` and
 * `diagnose` run: the model is turned into the analysis model
 * (api/model_profile.h) and summed as report sums a file, so top and
 * report say the same of the same stacks, ties in the same order.  It runs
 * here, in perfd, and not in perfctl as report does, because top asks
 * every second and the answer holds only what the screen shows (rows
 * from "offset", trees cut to a budget of "rows" nodes): shipping the
 * whole profile to perfctl each second would cost far more than the table.
 * report runs in perfctl because a file has no daemon, and a snapshot
 * from perfd takes a file's path so the two read alike.
 *
 * Both open with the host: CPUs, frequency, samples profiled and lost per
 * second, the daemon's own CPU and RSS (rates.h).
 *
 * Cost: the process view touches every process once (its per-second
 * sample counters; its RSS windows only when sorted by growth, else those
 * of the rows sent); the function view builds one model of its selection
 * over the interval, the price of a snapshot of it.  Either view's model
 * is built in slices on the loop (api/model_slices.h), the request
 * pending meanwhile (struct top_answer); the function table is then
 * computed from the model in one go, on a lane.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/functions.h"
#include "api/auth.h"
#include "api/cmd_top.h"
#include "api/command.h"
#include "api/model_profile.h"
#include "api/model_slices.h"
#include "api/query.h"
#include "base/clock.h"
#include "base/jsonw.h"
#include "base/kindtab.h"
#include "collect/sampler.h"
#include "perfd/macro.h"
#include "process/procfs.h"
#include "profile/model.h"
#include "profile/rss.h"

static const char *const view_names[] = { "processes", "functions" };
enum { SORT_SELF, SORT_TOTAL };
static const char *const function_sorts[] = { "self", "total" };

static int parse_top(struct json_object *req, void *args, struct perfd_request_error *e)
{
	/* the kinds something produces, the first (cpu) by default */
	const char *kinds[PROFILE_KINDS];
	enum profile_kind kind_of[PROFILE_KINDS];
	size_t n_kinds = 0;
	struct top_args *t = args;
	int64_t interval = PERFD_TOP_DEFAULT_INTERVAL, rows = PERFD_TOP_DEFAULT_ROWS, offset = 0,
		depth = PERFD_TOP_DEFAULT_DEPTH, pid = 0;
	int k, kind = 0;

	for (size_t i = 0; i < PROFILE_KINDS; i++)
		if (kind_in_top((int)i)) {
			kind_of[n_kinds] = (enum profile_kind)i;
			kinds[n_kinds++] = kind_infos[i].name;
		}
	t->view = TOP_PROCESSES;
	t->function_kind = -1;
	if ((k = request_get_choice(req, "view", view_names, ELEMENTSOF(view_names), &t->view, e)) < 0 ||
	    (k = request_get_int(req, "interval", 1, PERFD_TOP_MAX_INTERVAL, false, &interval, e)) < 0 ||
	    (k = request_get_int(req, "rows", 1, PERFD_TOP_MAX_ROWS, false, &rows, e)) < 0 ||
	    (k = request_get_int(req, "offset", 0, PERFD_TOP_MAX_OFFSET, false, &offset, e)) < 0 ||
	    (k = request_get_int(req, "depth", 1, PERFD_TOP_MAX_DEPTH, false, &depth, e)) < 0 ||
	    (k = request_get_int(req, "pid", 1, INT32_MAX, false, &pid, e)) < 0 ||
	    (k = request_get_bool(req, "all", &t->all, e)) < 0 ||
	    (k = request_get_bool(req, "kernel_threads", &t->kernel_threads, e)) < 0 ||
	    (k = request_get_name(req, "filter", t->filter, sizeof(t->filter), e)) < 0 ||
	    (k = request_get_choice(req, "kind", kinds, n_kinds, &kind, e)) < 0 ||
	    (k = request_get_name(req, "function", t->function, sizeof(t->function), e)) < 0 ||
	    (k = request_get_choice(req, "function_kind", frame_kind_names, FRAME_KINDS,
				    &t->function_kind, e)) < 0)
		return k;
	if (t->view == TOP_PROCESSES)
		k = request_get_choice(req, "sort", query_sort_names, QUERY_SORTS, &t->sort, e);
	else
		k = request_get_choice(req, "sort", function_sorts, ELEMENTSOF(function_sorts), &t->sort, e);
	if (k < 0)
		return k;
	if (t->view == TOP_PROCESSES && (pid || kind || t->function[0]))
		return request_fail(e, PERFD_ERR_BAD_REQUEST,
			    "\"pid\", \"kind\" and \"function\" are for \"view\": \"functions\"");
	t->interval_seconds = (unsigned)interval;
	t->kind = kind_of[kind];
	t->pid = (uint32_t)pid;
	t->rows = (unsigned)rows;
	t->offset = (unsigned)offset;
	t->depth = (unsigned)depth;
	return 0;
}

struct top_ctx {
	struct daemon *d;
	const struct perfd_peer *peer;
	const struct top_args *req;
	uint64_t now_ns;            /* when the windows were taken */
	struct query_window win;    /* the interval */
	struct query_window growth; /* the growth rates' window */
};

/* A top answer on its way: its head written at once, its model built in
 * slices, then the rest written from it.  Its client's data meanwhile. */
struct top_answer {
	struct sliced_answer sa; /* first: the client's data; its parts pin
				  * the model's processes */
	struct top_args req; /* ctx.req */
	struct top_ctx ctx;
	/* the process view's */
	struct query_list_opts o;
	struct query_process_row *rows;
	size_t matched, first, n;
	/* the function view's: NULL for every process (pinned by its part) */
	struct process *p;
};

/* Whether the filters take p ("kernel_threads", "filter"). */
static bool filters_take(void *userdata, const struct process *p)
{
	const struct top_ctx *ctx = userdata;
	const struct top_args *t = ctx->req;

	return (t->kernel_threads || !p->kthread) && (!t->filter[0] || strcasestr(p->comm, t->filter));
}

/* Whether the client may see p and the filters take it. */
static bool takes_visible(void *userdata, const struct process *p)
{
	const struct top_ctx *ctx = userdata;

	return auth_may_see(ctx->peer, p->owner_uid) && filters_take(userdata, p);
}

static void write_host(const struct top_ctx *ctx, struct jsonw *w)
{
	struct daemon *d = ctx->d;
	struct rates_reading now, delta;

	/* the time and the window the rows count, not the rates' reading
	 * below, which may be a second later */
	daemon_read_rates(d, &now);
	jsonw_kv_double(w, "time", monotonic_to_unix(ctx->now_ns));
	jsonw_kv_double(w, "window_start", monotonic_to_unix(ctx->win.first_second * NSEC_PER_SEC));
	jsonw_kv_double(w, "window_end", monotonic_to_unix(ctx->win.end_second * NSEC_PER_SEC));
	jsonw_kv_double(w, "interval_seconds", ctx->win.seconds);
	jsonw_key(w, "host");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "cpus", sampler_cpus(d->sampler));
	jsonw_kv_u64(w, "frequency_hz", d->frequency_hz);
	if (rates_over(&d->rates, &now, ctx->win.seconds, &delta) && delta.ns > 0) {
		double s = (double)delta.ns / NSEC_PER_SEC;

		jsonw_kv_double(w, "rate_seconds", s);
		jsonw_kv_double(w, "samples_per_second", (double)delta.samples / s);
		jsonw_kv_u64(w, "samples_lost", delta.lost);
		jsonw_kv_double(w, "daemon_cpu_percent", 100.0 * (double)delta.cpu_ns / (double)delta.ns);
	}
	jsonw_kv_u64(w, "samples_lost_total", now.lost);
	jsonw_kv_u64(w, "daemon_rss_bytes", daemon_rss_bytes());
	jsonw_object_end(w);
}

/* --- the process view ------------------------------------------------- */

/* The function of the most self samples of each of the n processes of
 * rows, by model process index, into top[] (UINT32_MAX: none) and its
 * value into top_value[]. */
static int top_functions(const struct model *m, uint32_t *top, uint64_t *top_value)
{
	struct u64map sums; /* process << 32 | function -> value */

	u64map_init(&sums);
	for (size_t i = 0; i < m->n_processes; i++)
		top[i] = UINT32_MAX, top_value[i] = 0;
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];
		const struct model_location *l;
		uint64_t *v;

		if (!s->depth)
			continue;
		l = &m->locations[m->stack_pool[s->first + s->depth - 1]];
		/* the innermost line: the code at the address, not its inliner */
		v = u64map_upsert(&sums, (uint64_t)s->process << 32 |
					  m->lines[l->first_line + l->n_lines - 1].function, NULL);
		if (!v) {
			u64map_done(&sums);
			return -ENOMEM;
		}
		*v += s->value;
	}
	U64MAP_FOREACH(slot, &sums) {
		uint32_t proc = (uint32_t)(slot->key >> 32), f = (uint32_t)slot->key;

		if (slot->value > top_value[proc] || (slot->value == top_value[proc] && f < top[proc])) {
			top[proc] = f;
			top_value[proc] = slot->value;
		}
	}
	u64map_done(&sums);
	return 0;
}

static void write_process(const struct query_list_opts *o, struct jsonw *w,
			  struct query_process_row *row, const struct model *m, uint32_t function,
			  uint64_t value, uint64_t total)
{
	const struct process *p = row->p;

	jsonw_object_begin(w);
	query_write_process_fields(w, o, row);
	if (p->owner_uid != PERFD_OWNER_NONE)
		jsonw_kv_u64(w, "uid", p->owner_uid);
	jsonw_kv_bool(w, "kernel_thread", p->kthread);
	if (m && function != UINT32_MAX) {
		const struct model_function *f = &m->functions[function];

		jsonw_kv_string(w, "top_function", model_string(m, f->name));
		jsonw_kv_string(w, "top_function_kind", frame_kind_names[f->kind]);
		if (f->file)
			jsonw_kv_string(w, "top_function_file", model_string(m, f->file));
		jsonw_kv_double(w, "top_function_percent", total ? 100.0 * (double)value / (double)total : 0);
	}
	jsonw_object_end(w);
}

static void top_built(struct model_slices *s, struct model *m, int r, void *userdata);

/* Lists the processes and starts the model of the rows sent: their leaves,
 * resolved once.  Returns 0 or -errno. */
static int start_processes(struct top_answer *ta)
{
	const struct top_ctx *ctx = &ta->ctx;
	const struct top_args *t = ctx->req;
	struct aggregator *a = ctx->d->aggregator;
	struct owner_filter owners = daemon_peer_owners(ctx->peer);
	struct model_opts mo = daemon_model_opts(ctx->d, PROFILE_KIND_CPU, false, false, false);
	int r;

	ta->o = (struct query_list_opts){ .peer = ctx->peer, .window = &ctx->win,
					  .growth = &ctx->growth, .all = ctx->req->all,
					  .sort = (enum query_sort)t->sort,
					  .frequency_hz = ctx->d->frequency_hz, .takes = filters_take,
					  .aggregator = ctx->d->aggregator,
					  .userdata = (void *)ctx };
	r = query_list_processes(a, &ta->o, &ta->rows, &ta->matched);
	if (r < 0)
		return r;
	ta->first = MIN((size_t)t->offset, ta->matched);
	ta->n = MIN((size_t)t->rows, ta->matched - ta->first);
	for (size_t i = 0; i < ta->n && r == 0; i++)
		r = aggregator_query_process(a, ta->rows[ta->first + i].p,
					     ctx->win.first_second * NSEC_PER_SEC,
					     ctx->win.end_second * NSEC_PER_SEC, &owners, &ta->sa.parts);
	mo.leaf_only = true;
	return r < 0 ? r : sliced_answer_build(&ta->sa, &mo, top_built);
}

/* The rows, each with its top function from m. */
static int write_processes(struct top_answer *ta, const struct model *m)
{
	const struct top_args *t = &ta->req;
	struct jsonw *w = &ta->sa.w;
	_cleanup_free_ uint32_t *top = calloc(ta->n + 1, sizeof(*top));
	_cleanup_free_ uint64_t *top_value = calloc(ta->n + 1, sizeof(*top_value));
	int r;

	if (!top || !top_value)
		return -ENOMEM;
	r = top_functions(m, top, top_value);
	if (r < 0)
		return r;
	jsonw_kv_string(w, "sort", query_sort_names[t->sort]);
	jsonw_kv_double(w, "growth_seconds", ta->ctx.growth.seconds);
	jsonw_kv_u64(w, "matched", ta->matched);
	jsonw_kv_u64(w, "offset", ta->first);
	jsonw_key(w, "processes");
	jsonw_array_begin(w);
	/* the model's processes are the parts', in the rows' order */
	for (size_t i = 0; i < ta->n; i++)
		write_process(&ta->o, w, &ta->rows[ta->first + i], m, top[i], top_value[i],
			      m->processes[i].total);
	jsonw_array_end(w);
	return 0;
}

/* --- the function view ------------------------------------------------ */

/* The function table: the analysis' rows of the model's stacks, and what
 * top shows of each row beyond them, from the model function of its first
 * frame (its kind, its file, its first line) and the first mapping known. */
struct ftable {
	const struct model *m;
	const struct report *r;
	struct model_frame_origin *rows; /* per row */
};

static void write_frow_fields(const struct ftable *t, struct jsonw *w, uint32_t i)
{
	const struct model *m = t->m;
	const struct report_row *row = &t->r->rows[i];
	const struct model_function *mf = &m->functions[t->rows[i].function];

	jsonw_kv_string(w, "function", profile_string(t->r->p, row->function));
	jsonw_kv_string(w, "kind", frame_kind_names[mf->kind]);
	if (mf->file)
		jsonw_kv_string(w, "file", model_string(m, mf->file));
	if (row->line || mf->start_line)
		jsonw_kv_u64(w, "line", row->line ? row->line : mf->start_line);
	if (t->rows[i].mapping) {
		const char *path = model_string(m, m->mappings[t->rows[i].mapping - 1].path);
		const char *base = strrchr(path, '/');

		if (*path)
			jsonw_kv_string(w, "module", base ? base + 1 : path);
	}
}

static void write_frow(const struct ftable *t, struct jsonw *w, uint32_t i)
{
	const struct report_row *row = &t->r->rows[i];

	write_frow_fields(t, w, i);
	jsonw_kv_u64(w, "self", row->self);
	jsonw_kv_u64(w, "total", row->total);
	jsonw_kv_double(w, "self_percent", report_percent(row->self, t->m->total));
	jsonw_kv_double(w, "total_percent", report_percent(row->total, t->m->total));
}

/* Writes the children of node (REPORT_TOP: the first level) that
 * report_tree_choose() sent as an array under key, largest first. */
static void write_tree(const struct ftable *t, struct jsonw *w, const struct report_tree *tree,
		       const char *key, uint32_t node, uint64_t whole)
{
	size_t first, n;

	report_tree_children(tree, node, &first, &n);
	jsonw_key(w, key);
	jsonw_array_begin(w);
	for (size_t i = 0; i < n; i++) {
		uint32_t id = tree->order[first + i];
		const struct report_node *child = &tree->nodes[id];

		if (!tree->sent[id])
			continue;
		jsonw_object_begin(w);
		if (child->row == REPORT_ROOT)
			jsonw_kv_bool(w, "root", true);
		else
			write_frow_fields(t, w, child->row);
		jsonw_kv_u64(w, "value", child->value);
		jsonw_kv_double(w, "percent", report_percent(child->value, whole));
		if (child->n_children)
			write_tree(t, w, tree, key, id, whole);
		jsonw_object_end(w);
	}
	jsonw_array_end(w);
}

/* Marks in match the row of the function asked for: of its kind when
 * given, else the first of that name, a user one before a kernel one (as
 * report_match() takes a name).  Returns it, or REPORT_ROOT for none. */
static uint32_t find_target(const struct report *r, const struct top_args *a, bool *match)
{
	bool kernel = a->function_kind == FRAME_KIND_KERNEL;
	char name[sizeof(a->function) + 4];

	(void)snprintf(name, sizeof(name), "%s%s", a->function, kernel ? "_[k]" : "");
	if (report_match(r, name, match) == 0)
		return REPORT_ROOT;
	for (size_t i = 0; i < r->n_rows; i++)
		if (match[i] && (a->function_kind < 0 || r->rows[i].kind == a->function_kind)) {
			memset(match, 0, r->n_rows * sizeof(*match));
			match[i] = true;
			return (uint32_t)i;
		}
	memset(match, 0, r->n_rows * sizeof(*match));
	return REPORT_ROOT;
}

int top_write_function_table(const struct top_args *a, const struct model *m, struct jsonw *w)
{
	_cleanup_(profile_freep) struct profile *p = NULL;
	_cleanup_free_ struct model_frame_origin *frames = NULL, *rows = NULL;
	_cleanup_(report_freep) struct report *r = NULL;
	_cleanup_free_ uint32_t *order = NULL;
	_cleanup_free_ bool *match = NULL;
	_cleanup_(report_tree_done) struct report_tree callers = { 0 }, callees = { 0 };
	/* a memory view leaves kernel frames out, as mem and report do */
	struct report_opts ro = { .by_name = true, .skip_kernel = !kind_infos[m->kind].kernel_frames };
	struct ftable t = { .m = m };
	uint32_t target = REPORT_ROOT;
	size_t first = 0, n = 0, matched = 0;
	bool detail;
	int k;

	if ((k = model_profile_new(m, &p, &frames)) < 0 || (k = report_build(p, &ro, &r)) < 0)
		return k;
	rows = calloc(r->n_rows + 1, sizeof(*rows));
	order = calloc(r->n_rows + 1, sizeof(*order));
	match = calloc(r->n_rows + 1, sizeof(*match));
	if (!rows || !order || !match)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_rows; i++)
		rows[i].function = UINT32_MAX;
	for (size_t f = 0; f < p->n_frames; f++) {
		struct model_frame_origin *o = &rows[r->frame_row[f]];

		if (o->function == UINT32_MAX)
			o->function = frames[f].function;
		if (!o->mapping)
			o->mapping = frames[f].mapping;
	}
	/* the rows of kernel frames left out are in no stack: not listed */
	for (size_t i = 0; i < r->n_rows; i++)
		matched += r->rows[i].total > 0;
	if (a->function[0])
		target = find_target(r, a, match);
	/* the function sampled: its callers and callees are the answer, and
	 * the list it was picked from is not sorted or sent */
	detail = target != REPORT_ROOT && r->rows[target].total > 0;
	if (detail) {
		if ((k = report_tree_build(r, match, true, a->depth, &callers)) < 0 ||
		    (k = report_tree_build(r, match, false, a->depth, &callees)) < 0 ||
		    (k = report_tree_choose(&callers, a->rows)) < 0 ||
		    (k = report_tree_choose(&callees, a->rows)) < 0)
			return k;
	} else {
		/* the rows in no stack sort last: their self and total are 0 */
		report_order(r, a->sort == SORT_SELF ? REPORT_SORT_SELF : REPORT_SORT_TOTAL, order);
		first = MIN((size_t)a->offset, matched);
		n = MIN((size_t)a->rows, matched - first);
	}

	t.r = r;
	t.rows = rows;
	jsonw_kv_string(w, "sort", function_sorts[a->sort]);
	jsonw_kv_string(w, "kind", kind_infos[m->kind].name);
	jsonw_kv_string(w, "unit", kind_infos[m->kind].unit);
	jsonw_kv_bool(w, "kernel_frames", kind_infos[m->kind].kernel_frames);
	jsonw_kv_u64(w, "total", m->total);
	jsonw_kv_u64(w, "processes_sampled", m->n_processes);
	jsonw_kv_u64(w, "matched", matched);
	jsonw_kv_u64(w, "offset", first);
	if (!detail) {
		jsonw_key(w, "functions");
		jsonw_array_begin(w);
		for (size_t i = 0; i < n; i++) {
			jsonw_object_begin(w);
			write_frow(&t, w, order[first + i]);
			jsonw_object_end(w);
		}
		jsonw_array_end(w);
	}
	if (a->function[0]) {
		jsonw_key(w, "function");
		if (!detail) {
			jsonw_raw(w, "null", 4);
		} else {
			jsonw_object_begin(w);
			write_frow(&t, w, target);
			jsonw_kv_u64(w, "depth", a->depth);
			write_tree(&t, w, &callers, "callers", REPORT_TOP, r->rows[target].total);
			write_tree(&t, w, &callees, "callees", REPORT_TOP, r->rows[target].total);
			jsonw_object_end(w);
		}
	}
	return 0;
}

/* Starts the model of the function view's selection.  Returns 0 or -errno. */
static int start_functions(struct top_answer *ta)
{
	const struct top_ctx *ctx = &ta->ctx;
	struct aggregator *a = ctx->d->aggregator;
	struct selection sel = { .all = true, .visible = takes_visible,
				 .visible_userdata = (void *)ctx,
				 .owners = daemon_peer_owners(ctx->peer) };
	struct model_opts mo = daemon_model_opts(ctx->d, (enum profile_kind)ctx->req->kind, true,
						 true, false);
	uint64_t from = ctx->win.first_second * NSEC_PER_SEC, to = ctx->win.end_second * NSEC_PER_SEC;
	uint64_t first, end;
	int r;

	if (ta->p)
		r = aggregator_query_process(a, ta->p, from, to, &sel.owners, &ta->sa.parts);
	else
		r = aggregator_query(a, &sel, from, to, &ta->sa.parts, &first, &end);
	return r < 0 ? r : sliced_answer_build(&ta->sa, &mo, top_built);
}

/* On a lane (api/encode_lane.h): the table reads only the model and the
 * request's arguments.  On the loop it held it 55 ms for the functions of
 * a 10 s window of ~40k unique stacks (tests/bench/model-slices.py). */
static int write_function_table(const struct model *m, const void *args,
				const atomic_bool *cancel, struct jsonw *w)
{
	(void)cancel;
	return top_write_function_table(args, m, w);
}

/* Writes the process, if one, and has a lane write the table and answer. */
static void write_functions(struct top_answer *ta, struct model *m)
{
	struct process *p = ta->p;

	if (p) {
		jsonw_kv_u64(&ta->sa.w, "pid", p->pid);
		jsonw_kv_string(&ta->sa.w, "comm", p->comm);
		jsonw_kv_bool(&ta->sa.w, "exited", p->exited);
	}
	sliced_answer_finish_on_lane(&ta->sa, write_function_table, &ta->req,
				     sizeof(ta->req), "top functions", m);
}

static void top_free(struct sliced_answer *sa)
{
	struct top_answer *ta = container_of(sa, struct top_answer, sa);

	free(ta->rows);
	free(ta);
}

static const struct command top_building = { .name = "top answer",
					     .cancel = sliced_answer_cancel };

static void top_built(struct model_slices *s, struct model *m, int r, void *userdata)
{
	struct top_answer *ta = container_of((struct sliced_answer *)userdata, struct top_answer, sa);

	if (r == 0 && ta->req.view != TOP_PROCESSES) {
		write_functions(ta, m);
		return;
	}
	/* the rows' processes stay pinned until it is written */
	if (r == 0)
		r = write_processes(ta, m);
	model_free(m);
	sliced_answer_finish(&ta->sa, r);
}

static int run_top(struct daemon *d, struct client *c, const void *args)
{
	const struct top_args *req = args;
	struct top_answer *ta;
	struct process *p = NULL;
	int r;

	if (req->view == TOP_FUNCTIONS && req->pid) {
		p = aggregator_find_process(d->aggregator, req->pid);
		if (!p || !auth_may_see(client_peer(c), p->owner_uid)) {
			command_reply_error(c, PERFD_ERR_NO_SUCH_PROCESS,
					    "no process with pid %u in perfd's history", req->pid);
			return 0;
		}
	}
	ta = calloc(1, sizeof(*ta));
	if (!ta) {
		command_reply_oom(c);
		return 0;
	}
	*ta = (struct top_answer){
		.sa = { .pending.command = &top_building, .d = d, .client = c, .free = top_free },
		.req = *req, .p = p };
	ta->ctx = (struct top_ctx){ .d = d, .peer = client_peer(c), .req = &ta->req,
				    .now_ns = now_monotonic_ns() };
	query_window_last(ta->ctx.now_ns, req->interval_seconds, d->start_ns, &ta->ctx.win);
	query_window_last(ta->ctx.now_ns, MAX(req->interval_seconds, PERFD_TOP_GROWTH_SECONDS),
			  d->start_ns, &ta->ctx.growth);

	query_ok_begin(&ta->sa.w);
	jsonw_kv_string(&ta->sa.w, "view", view_names[req->view]);
	write_host(&ta->ctx, &ta->sa.w);
	r = req->view == TOP_PROCESSES ? start_processes(ta) : start_functions(ta);
	if (r < 0) {
		sliced_answer_finish(&ta->sa, r);
		return 0;
	}
	client_set_data(c, ta);
	return SERVER_PENDING;
}

const struct command cmd_top = {
	.name = "top",
	.args_size = COMMAND_ARGS_SIZE(struct top_args),
	.parse = parse_top,
	.run = run_top,
	.fresh = true,
};
