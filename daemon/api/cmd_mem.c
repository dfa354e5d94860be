/* SPDX-License-Identifier: MIT */
/*
 * cmd_mem.c - "mem": one process's memory, from the store: its RSS now by
 * kind, its peak and when, its growth rate and timeline, the code sites
 * whose growth was sampled, and what built the peak.
 *
 * A site is where a memory sample's stack enters the process's own code:
 * the innermost Python frame when the stack has one (the line that built
 * the list, not the allocator under it), else the innermost native frame
 * that is not the kernel's.  A site's self bytes are the samples whose
 * site it is; a function's total bytes are the samples with that function
 * anywhere in their stack, counted once.
 *
 * The peak is attributed to the growth that built it: the samples between
 * the lowest RSS before the peak (the trough) and the peak.  What they do
 * not explain (memory from before perfd saw the process, shared or file
 * pages faulted by others, growth the sampling missed) is reported as
 * unexplained rather than spread over the sites.
 *
 * The two models (the growth's, the peak's) are built in slices on the
 * loop (api/model_slices.h), one after the other, the request pending
 * meanwhile; what the answer says at once is written before them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/cmd_mem.h"
#include "api/command.h"
#include "api/model_slices.h"
#include "api/query.h"
#include "base/clock.h"
#include "base/jsonw.h"
#include "perfd/macro.h"
#include "profile/model.h"
#include "profile/rss.h"

#define MEM_DEFAULT_SINCE 600
#define MEM_DEFAULT_TOP 10
#define MEM_MAX_TOP 100

static int parse_mem(struct json_object *req, void *args, struct perfd_request_error *e)
{
	struct mem_args *r = args;
	int64_t pid = 0, top = MEM_DEFAULT_TOP;
	int k;

	if ((k = request_get_int(req, "pid", 1, INT32_MAX, true, &pid, e)) < 0 ||
	    (k = request_get_int(req, "top", 1, MEM_MAX_TOP, false, &top, e)) < 0)
		return k;
	r->pid = (uint32_t)pid;
	r->top = (unsigned)top;
	r->since_seconds = MEM_DEFAULT_SINCE;
	k = request_get_seconds(req, "since", PERFD_MAX_RETENTION_SECONDS, &r->since_seconds, e);
	return k < 0 ? k : 0;
}

struct site {
	uint32_t function, line;
	uint64_t self, total;
};

/* The location index of the site of sample s: see the design comment. */
static int64_t site_of(const struct model *m, const struct model_sample *s)
{
	int64_t native = -1;

	for (uint32_t k = s->depth; k-- > 0;) {
		uint32_t loc = m->stack_pool[s->first + k];
		enum frame_kind kind = m->locations[loc].kind;

		if (kind == FRAME_KIND_PYTHON)
			return loc;
		if (native < 0 && (kind == FRAME_KIND_NATIVE || kind == FRAME_KIND_JIT))
			native = loc;
	}
	return native;
}

static int cmp_self(const void *x, const void *y)
{
	const struct site *a = x, *b = y;

	if (a->self != b->self)
		return a->self < b->self ? 1 : -1;
	return a->function < b->function ? -1 : a->function > b->function;
}

/* Writes the top sites of model m as an array: function, file, line,
 * self and total bytes. */
static int write_sites(struct jsonw *w, const struct model *m, unsigned top)
{
	_cleanup_free_ struct site *sites = calloc(m->n_lines ? m->n_lines : 1, sizeof(*sites));
	_cleanup_free_ uint64_t *fn_total = calloc(m->n_functions ? m->n_functions : 1, sizeof(uint64_t));
	_cleanup_free_ uint64_t *fn_seen = calloc(m->n_functions ? m->n_functions : 1, sizeof(uint64_t));
	struct u64map by_line; /* (function << 32 | line) -> index + 1 in sites */
	size_t n = 0;

	if (!sites || !fn_total || !fn_seen)
		return -ENOMEM;
	u64map_init(&by_line);
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];
		int64_t loc = site_of(m, s);

		/* every function of the stack, once */
		for (uint32_t k = 0; k < s->depth; k++) {
			const struct model_location *l = &m->locations[m->stack_pool[s->first + k]];

			for (uint32_t j = 0; j < l->n_lines; j++) {
				uint32_t f = m->lines[l->first_line + j].function;

				if (fn_seen[f] != i + 1) {
					fn_seen[f] = i + 1;
					fn_total[f] += s->value;
				}
			}
		}
		if (loc >= 0) {
			const struct model_location *l = &m->locations[loc];
			const struct model_line *ln = &m->lines[l->first_line + l->n_lines - 1];
			bool added;
			uint64_t *slot = u64map_upsert(&by_line, (uint64_t)ln->function << 32 | ln->line, &added);

			if (!slot) {
				u64map_done(&by_line);
				return -ENOMEM;
			}
			if (added) {
				sites[n] = (struct site){ ln->function, ln->line, 0, 0 };
				*slot = ++n;
			}
			sites[*slot - 1].self += s->value;
		}
	}
	u64map_done(&by_line);
	for (size_t i = 0; i < n; i++)
		sites[i].total = fn_total[sites[i].function];
	qsort_safe(sites, n, sizeof(*sites), cmp_self);

	jsonw_array_begin(w);
	for (size_t i = 0; i < n && i < top; i++) {
		const struct model_function *f = &m->functions[sites[i].function];

		jsonw_object_begin(w);
		jsonw_kv_string(w, "function", model_string(m, f->name));
		jsonw_kv_string(w, "kind", frame_kind_names[f->kind]);
		if (f->file)
			jsonw_kv_string(w, "file", model_string(m, f->file));
		if (sites[i].line)
			jsonw_kv_u64(w, "line", sites[i].line);
		jsonw_kv_u64(w, "self_bytes", sites[i].self);
		jsonw_kv_u64(w, "total_bytes", sites[i].total);
		jsonw_object_end(w);
	}
	jsonw_array_end(w);
	return 0;
}

static void write_rss(struct jsonw *w, const uint64_t bytes[PERFD_RSS_COUNTERS])
{
	jsonw_kv_u64(w, "bytes", bytes[PERFD_RSS_FILE] + bytes[PERFD_RSS_ANON] + bytes[PERFD_RSS_SHMEM]);
	jsonw_kv_u64(w, "anon_bytes", bytes[PERFD_RSS_ANON]);
	jsonw_kv_u64(w, "file_bytes", bytes[PERFD_RSS_FILE]);
	jsonw_kv_u64(w, "shmem_bytes", bytes[PERFD_RSS_SHMEM]);
}

/* A mem answer on its way: what it says at once is written first, then
 * the growth's model and the peak's are built in turn, in slices
 * (api/model_slices.h), and written as each comes.  Its client's data
 * meanwhile. */
struct mem_answer {
	struct sliced_answer sa; /* first: the client's data */
	unsigned top;
	struct selection sel; /* the process, by pid and start: it may go meanwhile */
	struct rss_point *pts; /* its timeline */
	size_t n, k, t;        /* points; the peak's; the trough's before it */
	bool peak; /* the model being built is the peak's */
};

static void mem_free(struct sliced_answer *sa)
{
	struct mem_answer *ma = container_of(sa, struct mem_answer, sa);

	free(ma->pts);
	free(ma);
}

static const struct command mem_building = { .name = "mem answer",
					     .cancel = sliced_answer_cancel };


static void mem_built(struct model_slices *s, struct model *m, int r, void *userdata);

/* Starts the model of the memory samples over [from, to) that the client
 * may see.  Returns 0 or -errno. */
static int mem_build(struct mem_answer *ma, uint64_t from, uint64_t to)
{
	struct daemon *d = ma->sa.d;
	struct model_opts mo = daemon_model_opts(d, PROFILE_KIND_MEMORY, true, true, false);
	uint64_t first, end;
	int r = aggregator_query(d->aggregator, &ma->sel, from, to, &ma->sa.parts, &first, &end);

	return r < 0 ? r : sliced_answer_build(&ma->sa, &mo, mem_built);
}

/* A model is built: its part of the answer is written, then the peak's
 * model is started, or the answer sent. */
static void mem_built(struct model_slices *s, struct model *m, int r, void *userdata)
{
	struct mem_answer *ma = container_of((struct sliced_answer *)userdata, struct mem_answer, sa);
	struct jsonw *w = &ma->sa.w;
	const struct rss_point *pts = ma->pts;
	size_t k = ma->k, t = ma->t;

	sliced_answer_built(&ma->sa);
	if (r < 0) {
		sliced_answer_finish(&ma->sa, r);
		return;
	}
	if (!ma->peak) {
		jsonw_kv_u64(w, "sample_bytes", ma->sa.d->memory_sample_bytes);
		jsonw_kv_u64(w, "attributed_bytes", m->total);
		jsonw_key(w, "sites");
		r = write_sites(w, m, ma->top);
		model_free(m);
		/* what built the peak: from the lowest point before it to it */
		jsonw_key(w, "peak_attribution");
		if (r == 0 && ma->n == 0)
			jsonw_raw(w, "null", 4);
		if (r < 0 || ma->n == 0) {
			sliced_answer_finish(&ma->sa, r);
			return;
		}
		ma->peak = true;
		r = mem_build(ma, pts[t].start_ns, pts[k].end_ns);
		if (r < 0)
			sliced_answer_finish(&ma->sa, r);
		return;
	}
	jsonw_object_begin(w);
	jsonw_kv_double(w, "trough_time", monotonic_to_unix(pts[t].end_ns));
	jsonw_kv_u64(w, "trough_bytes", pts[t].total_bytes);
	jsonw_kv_double(w, "peak_time", monotonic_to_unix(pts[k].end_ns));
	jsonw_kv_u64(w, "peak_bytes", pts[k].max_bytes);
	{
		/* growth is sampled gross: memory freed and faulted again in
		 * the range counts each time, so it can exceed the peak */
		uint64_t explained = MIN(m->total, pts[k].max_bytes);

		jsonw_kv_u64(w, "sampled_bytes", m->total);
		jsonw_kv_u64(w, "explained_bytes", explained);
		jsonw_kv_u64(w, "unexplained_bytes", pts[k].max_bytes - explained);
	}
	jsonw_key(w, "sites");
	r = write_sites(w, m, ma->top);
	jsonw_object_end(w);
	model_free(m);
	sliced_answer_finish(&ma->sa, r);
}

/* Writes what ma's answer says of p at once: everything before its sites,
 * whose model is built next; ma->pts and the points n, k and t. */
static int write_head(struct mem_answer *ma, struct process *p, uint64_t from, uint64_t now)
{
	struct jsonw *w = &ma->sa.w;
	struct rss_point *pts = calloc(p->history.n_windows + 1, sizeof(*pts));
	uint64_t rss[PERFD_RSS_COUNTERS], peak_bytes;
	struct rss_trend trend;
	size_t n, k = 0, t = 0;

	if (!pts)
		return -ENOMEM;
	ma->pts = pts;
	/* only the windows the peer may see, as the models' samples */
	n = rss_timeline(p, from, now + 1, &ma->sel.owners, pts, p->history.n_windows + 1);
	rss_trend(pts, n, &trend);
	for (int i = 0; i < PERFD_RSS_COUNTERS; i++)
		rss[i] = p->rss_pages[i] * p->page_size;

	jsonw_kv_u64(w, "pid", p->pid);
	jsonw_kv_string(w, "comm", p->comm);
	jsonw_kv_u64(w, "start_time_ns", p->start_time_ns);
	jsonw_kv_bool(w, "exited", p->exited);
	jsonw_kv_double(w, "from", monotonic_to_unix(from));
	jsonw_kv_double(w, "to", monotonic_to_unix(now));
	jsonw_key(w, "rss");
	jsonw_object_begin(w);
	write_rss(w, rss);
	if (p->rss_ns)
		jsonw_kv_double(w, "time", monotonic_to_unix(p->rss_ns));
	jsonw_object_end(w);

	/* the peak: perfd's own highest reading, or the kernel's high-water
	 * mark when that is higher (a peak from before perfd saw it) */
	peak_bytes = MAX(p->peak_rss_bytes, p->hiwater_rss_bytes);
	jsonw_key(w, "peak");
	jsonw_object_begin(w);
	jsonw_kv_u64(w, "bytes", peak_bytes);
	/* when perfd read its highest; the kernel's mark, lazily updated, may
	 * stand a little above it, or far above for a peak perfd never saw */
	if (p->peak_rss_ns)
		jsonw_kv_double(w, "time", monotonic_to_unix(p->peak_rss_ns));
	jsonw_kv_u64(w, "sampled_peak_bytes", p->peak_rss_bytes);
	jsonw_kv_u64(w, "kernel_hiwater_bytes", p->hiwater_rss_bytes);
	jsonw_kv_string(w, "source", p->peak_rss_bytes >= p->hiwater_rss_bytes ? "samples" :
										  "kernel high-water mark");
	jsonw_object_end(w);

	jsonw_key(w, "growth");
	jsonw_object_begin(w);
	jsonw_kv_double(w, "bytes_per_second", trend.bytes_per_second);
	jsonw_kv_bool(w, "growing", trend.growing);
	jsonw_kv_double(w, "r2", trend.r2);
	jsonw_key(w, "rise_bytes");
	jsonw_i64(w, trend.rise_bytes);
	jsonw_kv_u64(w, "points", trend.points);
	jsonw_object_end(w);

	jsonw_key(w, "timeline");
	jsonw_array_begin(w);
	for (size_t i = 0; i < n; i++) {
		jsonw_object_begin(w);
		jsonw_kv_double(w, "time", monotonic_to_unix(pts[i].end_ns));
		jsonw_kv_u64(w, "seconds", (pts[i].end_ns - pts[i].start_ns) / NSEC_PER_SEC);
		write_rss(w, pts[i].bytes);
		jsonw_kv_u64(w, "max_bytes", pts[i].max_bytes);
		jsonw_object_end(w);
		if (pts[i].max_bytes > pts[k].max_bytes)
			k = i;
	}
	jsonw_array_end(w);

	for (size_t i = 0; i <= k && n; i++)
		if (pts[i].total_bytes <= pts[t].total_bytes)
			t = i;
	ma->n = n;
	ma->k = k;
	ma->t = t;
	return 0;
}

static int run_mem(struct daemon *d, struct client *c, const void *args)
{
	const struct mem_args *req = args;
	uint64_t now = now_monotonic_ns();
	uint64_t from = now - MIN(now, (uint64_t)(req->since_seconds * NSEC_PER_SEC));
	struct mem_answer *ma;
	struct process *p;
	int r;

	p = aggregator_find_process(d->aggregator, req->pid);
	if (!p || !daemon_peer_sees((void *)client_peer(c), p)) {
		command_reply_error(c, PERFD_ERR_NO_SUCH_PROCESS,
				    "no process with pid %u in perfd's history", req->pid);
		return 0;
	}
	ma = calloc(1, sizeof(*ma));
	if (!ma) {
		command_reply_oom(c);
		return 0;
	}
	*ma = (struct mem_answer){
		.sa = { .pending.command = &mem_building, .d = d, .client = c, .free = mem_free },
		.top = req->top,
		.sel = { .pids = { p->pid }, .n_pids = 1,
			 .start_ticks = p->start_time_ns / aggregator_ns_per_tick(d->aggregator),
			 .owners = daemon_peer_owners(client_peer(c)) },
	};
	query_ok_begin(&ma->sa.w);
	r = write_head(ma, p, from, now);
	if (r == 0)
		r = mem_build(ma, from, now + 1);
	if (r < 0) {
		sliced_answer_finish(&ma->sa, r);
		return 0;
	}
	client_set_data(c, ma);
	return SERVER_PENDING;
}

const struct command cmd_mem = {
	.name = "mem",
	.args_size = COMMAND_ARGS_SIZE(struct mem_args),
	.parse = parse_mem,
	.run = run_mem,
	.fresh = true,
};
