/* SPDX-License-Identifier: MIT */
/*
 * storebench.c - what the profile store costs over a whole retention, with
 * the daemon's own code (linked from its objects, like symbench and
 * pybench), fed an hour of synthetic samples in a few seconds.
 *
 * The simulated machine: PROCS processes share CPUS CPUs sampled at HZ, the
 * CPUs always busy, so HZ x CPUS samples arrive each simulated second.
 * Which process a sample belongs to follows a Zipf law over the processes
 * (exponent --skew; 0 makes every process equally busy, the worst case
 * for the number of windows).  Each process has its own code (its user
 * addresses are its own, as for 500 different binaries: no stack is shared
 * between processes) and 1 to 8 threads; it has 20..200 distinct stacks of
 * depth 10..40, grown as a call tree (each new stack shares a random
 * prefix, root side, with an earlier one), and a third of them end in one
 * of 64 kernel paths (3..12 frames) shared by all processes, as syscalls
 * are.  A sample picks its thread and its stack by Zipf laws too
 * (exponent 1): a few hot paths, a long tail.  --rss-share F of the
 * processes also send the RSS reading BPF sends when a process's resident
 * set changes (PERFD_EVENT_RSS, at most once a second): one each simulated
 * second, which keeps a window open every second for each of them.
 *
 * The pids are above kernel.pid_max, so no such process exists: the store
 * finds neither /proc entries nor binaries (its attempts fail at once),
 * and every user frame stays an address in no mapping (so the store looks
 * for a JIT map of each process once a simulated second, and re-reads its
 * maps every 8 s at most: failed opens, part of the ingest time below).
 * Timestamps cover SECONDS of CLOCK_MONOTONIC; aggregator_maintain() runs
 * once per simulated second with the simulated time, as the daemon's timer
 * does.  The daemon's code reads CLOCK_MONOTONIC too (when it last read a
 * process's maps): storebench defines clock_gettime() so that clock is
 * the simulated one for the store, the time of the sample being ingested,
 * and times itself with CLOCK_MONOTONIC_RAW.  Otherwise the simulated
 * hour, run in seconds, would run ahead of the store's clock and every
 * sample would look due for a re-read of its maps.  The store's limits are
 * the daemon's defaults (perfd --help).  The hour starts at the same
 * simulated time in every run, so that one seed makes the same windows.
 *
 * Each run measures:
 *   - the process's RSS and the heap in use (mallinfo2) before the store
 *     exists and after the simulated hour, and the store's own count
 *     (memory_bytes, what `perfctl status` reports) with its windows,
 *     stacks and frames;
 *   - the daemon CPU the store costs per simulated second: ingesting that
 *     second's samples and one aggregator_maintain, over the last simulated
 *     minute;
 *   - for the busiest process, over the whole hour: aggregator_query,
 *     model_build (with a resolver that names frames with one snprintf,
 *     not the symbolizer: symbol lookup is symbench's figure) and
 *     folded_encode into a JSON writer, and json_encode of the same
 *     model; QUERY_REPEATS times each, the median kept;
 *   - the same for every process at once (--all), for scale.
 * Prints one JSON object of figures.
 *
 * One run per invocation (RSS growth means something only in a fresh
 * process): bench.py runs it once per run, with another --seed each time.
 *
 * usage: storebench [--procs N] [--hz HZ] [--cpus N] [--seconds S]
 *                   [--skew X] [--rss-share F] [--seed N]
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/jsonw.h"
#include "encode/encode.h"
#include "perfd/macro.h"
#include "perfd/sample.h"
#include "profile/aggregate.h"
#include "profile/model.h"
#include "symbols/symbolize.h"

#define MIN_STACKS 20
#define MAX_STACKS 200
#define MIN_DEPTH 10
#define MAX_DEPTH 40
#define MAX_THREADS 8
#define KERNEL_PATHS 64
#define KERNEL_SHARE 3 /* one stack in KERNEL_SHARE ends in the kernel */
#define KERNEL_BASE 0xffffffff81000000ULL
#define USER_SPAN 0x10000000ULL /* of each process's code */
#define FUNCTION_BYTES 0x100    /* call sites lie within a function's first 256 bytes */
#define QUERY_REPEATS 5
/* When the simulated hour starts, in CLOCK_MONOTONIC seconds (a day after
 * boot: the store's clock is the simulated one, see clock_gettime). */
#define SIM_START_S 86400ULL

struct kpath {
	int depth;
	uint64_t ips[12];
};

struct sim_stack {
	int kdepth; /* frames of the kernel path, 0 for none */
	int kpath;
	int udepth;
	uint64_t ips[MAX_DEPTH]; /* user frames, root first */
};

struct sim_process {
	uint32_t pid;
	uint64_t start_ns;
	int n_threads;
	uint32_t tids[MAX_THREADS];
	int n_stacks;
	struct sim_stack *stacks;
	double *stack_cdf;
	uint64_t samples;
};

struct sim {
	int n_procs;
	struct sim_process *procs;
	double *proc_cdf;
	struct kpath kpaths[KERNEL_PATHS];
	double thread_cdf[MAX_THREADS][MAX_THREADS]; /* [n - 1]: for n threads */
	uint64_t rng;
};

/* CLOCK_MONOTONIC as the store sees it: the simulated time while
 * sim_clock_on, the kernel's otherwise. */
static bool sim_clock_on;
static uint64_t sim_clock_ns;

int clock_gettime(clockid_t id, struct timespec *ts)
{
	if (id == CLOCK_MONOTONIC && sim_clock_on) {
		ts->tv_sec = (time_t)(sim_clock_ns / NSEC_PER_SEC);
		ts->tv_nsec = (long)(sim_clock_ns % NSEC_PER_SEC);
		return 0;
	}
	return (int)syscall(SYS_clock_gettime, id, ts);
}

/* Real time, for storebench's own timing. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rnd(struct sim *s)
{
	/* xorshift64*: plenty for a workload generator */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545f4914f6cdd1dULL;
}

static int between(struct sim *s, int lo, int hi)
{
	return lo + (int)(rnd(s) % (uint64_t)(hi - lo + 1));
}

static double uniform(struct sim *s)
{
	return (rnd(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* The cumulative Zipf law over n ranks with exponent a, in cdf[0..n). */
static void zipf_cdf(double *cdf, int n, double a)
{
	double sum = 0;

	for (int i = 0; i < n; i++)
		cdf[i] = sum += 1.0 / pow(i + 1, a);
	for (int i = 0; i < n; i++)
		cdf[i] /= sum;
}

static int draw(struct sim *s, const double *cdf, int n)
{
	double u = uniform(s);
	int lo = 0, hi = n - 1;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void shuffle(struct sim *s, int *a, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(rnd(s) % (uint64_t)(i + 1)), t = a[i];

		a[i] = a[j];
		a[j] = t;
	}
}

/* A user frame of process index pi: call site `site` in function f. */
static uint64_t user_ip(int pi, int f, int site)
{
	return 0x400000ULL + (uint64_t)pi * USER_SPAN + (uint64_t)f * FUNCTION_BYTES + 16 +
	       (uint64_t)site * 8;
}

static int sim_init(struct sim *s, int n_procs, double skew, uint64_t seed, uint32_t first_pid)
{
	int *rank = calloc(n_procs, sizeof(int));
	uint32_t next_tid = first_pid + (uint32_t)n_procs;

	*s = (struct sim){ .n_procs = n_procs, .rng = seed | 1 };
	s->procs = calloc(n_procs, sizeof(*s->procs));
	s->proc_cdf = calloc(n_procs, sizeof(double));
	if (!rank || !s->procs || !s->proc_cdf)
		return -ENOMEM;

	for (int k = 0; k < KERNEL_PATHS; k++) {
		struct kpath *kp = &s->kpaths[k];
		/* a few entry points, many paths below them */
		uint64_t entry = KERNEL_BASE + (uint64_t)(k % 4) * 0x1000;

		kp->depth = between(s, 3, 12);
		for (int d = 0; d < kp->depth; d++)
			kp->ips[d] = d == 0 ? entry + 0x20 :
					      KERNEL_BASE + 0x100000 + rnd(s) % 0x800000 * 0x10;
	}
	for (int n = 1; n <= MAX_THREADS; n++)
		zipf_cdf(s->thread_cdf[n - 1], n, 1.0);

	for (int i = 0; i < n_procs; i++) {
		struct sim_process *p = &s->procs[i];
		int n_functions;

		p->pid = first_pid + (uint32_t)i;
		p->start_ns = (uint64_t)(i + 1) * NSEC_PER_SEC;
		/* most processes single-threaded, some with a pool */
		p->n_threads = between(s, 0, 3) == 0 ? between(s, 2, MAX_THREADS) : 1;
		p->tids[0] = p->pid;
		for (int t = 1; t < p->n_threads; t++)
			p->tids[t] = next_tid++;
		p->n_stacks = between(s, MIN_STACKS, MAX_STACKS);
		p->stacks = calloc(p->n_stacks, sizeof(*p->stacks));
		p->stack_cdf = calloc(p->n_stacks, sizeof(double));
		if (!p->stacks || !p->stack_cdf)
			return -ENOMEM;
		n_functions = 2 * p->n_stacks + 8;
		for (int k = 0; k < p->n_stacks; k++) {
			struct sim_stack *st = &p->stacks[k];
			int shared = 0;

			st->udepth = between(s, MIN_DEPTH, MAX_DEPTH);
			if (k > 0) {
				/* a branch of the call tree: an earlier stack's
				 * root side, then frames of its own */
				const struct sim_stack *parent = &p->stacks[rnd(s) % (uint64_t)k];

				shared = between(s, 1, MIN(parent->udepth, st->udepth) - 1);
				memcpy(st->ips, parent->ips, shared * sizeof(uint64_t));
			}
			for (int d = shared; d < st->udepth; d++)
				st->ips[d] = user_ip(i, between(s, 0, n_functions - 1), between(s, 0, 7));
			if (between(s, 1, KERNEL_SHARE) == 1) {
				st->kpath = between(s, 0, KERNEL_PATHS - 1);
				st->kdepth = s->kpaths[st->kpath].depth;
			}
		}
		zipf_cdf(p->stack_cdf, p->n_stacks, 1.0);
		rank[i] = i;
	}
	/* busiest first in no particular order of pids */
	shuffle(s, rank, n_procs);
	if (skew > 0) {
		double *w = calloc(n_procs, sizeof(double));

		if (!w)
			return -ENOMEM;
		zipf_cdf(w, n_procs, skew);
		for (int i = 0; i < n_procs; i++)
			s->proc_cdf[rank[i]] = w[i] - (i ? w[i - 1] : 0);
		free(w);
	} else {
		for (int i = 0; i < n_procs; i++)
			s->proc_cdf[i] = 1.0 / n_procs;
	}
	for (int i = 1; i < n_procs; i++)
		s->proc_cdf[i] += s->proc_cdf[i - 1];
	s->proc_cdf[n_procs - 1] = 1.0;
	free(rank);
	return 0;
}

static void sim_done(struct sim *s)
{
	for (int i = 0; i < s->n_procs; i++) {
		free(s->procs[i].stacks);
		free(s->procs[i].stack_cdf);
	}
	free(s->procs);
	free(s->proc_cdf);
}

/* One sample record of a random thread and stack of p, as BPF writes it:
 * kernel frames then user frames, each leaf first. */
static size_t make_sample(struct sim *s, struct sim_process *p, uint64_t ts_ns,
			  struct perfd_sample *out)
{
	const struct sim_stack *st = &p->stacks[draw(s, p->stack_cdf, p->n_stacks)];
	int t = draw(s, s->thread_cdf[p->n_threads - 1], p->n_threads);
	size_t n = 0;

	*out = (struct perfd_sample){
		.hdr = { .kind = PERFD_EVENT_SAMPLE, .tgid = p->pid, .tid = p->tids[t],
			 .cpu = 0, .timestamp_ns = ts_ns, .start_time_ns = p->start_ns },
		.rss_pages = { 2000, 8000, 0 },
		.hiwater_rss_pages = 12000,
		.page_size = 4096,
		.kernel_depth = st->kdepth,
		.user_depth = st->udepth,
		.value_kind = PERFD_VALUE_CPU,
		.value = 1,
	};
	if (t)
		snprintf(out->comm, sizeof(out->comm), "worker-%d", t);
	else
		snprintf(out->comm, sizeof(out->comm), "proc%u", p->pid);
	for (int d = st->kdepth - 1; d >= 0; d--)
		out->ips[n++] = s->kpaths[st->kpath].ips[d];
	for (int d = st->udepth - 1; d >= 0; d--)
		out->ips[n++] = st->ips[d];
	return sizeof(*out) + n * sizeof(uint64_t);
}

/* Names a frame with one snprintf: the function is the address rounded
 * down to FUNCTION_BYTES, so call sites of one function make one location,
 * as symbol names do. */
static size_t cheap_resolve(void *ctx, uint64_t frame, bool lines, struct frame_record *out,
			    size_t cap, char *scratch, size_t size)
{
	uint64_t addr = frame_address(frame);
	bool kernel = frame_module(frame) == FRAME_MODULE_KERNEL;

	snprintf(scratch, size, kernel ? "kfunc_%" PRIx64 : "func_%" PRIx64,
		 addr & ~(uint64_t)(FUNCTION_BYTES - 1));
	out[0] = (struct frame_record){ .kind = kernel ? FRAME_KIND_KERNEL : FRAME_KIND_NATIVE,
					.function = scratch, .offset = addr };
	return 1;
}

static void read_memory(long *rss_kib, long *hwm_kib)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];

	*rss_kib = *hwm_kib = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "VmRSS:", 6) == 0)
			*rss_kib = strtol(line + 6, NULL, 10);
		else if (strncmp(line, "VmHWM:", 6) == 0)
			*hwm_kib = strtol(line + 6, NULL, 10);
	}
	fclose(f);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct query_result {
	double query_ms, model_ms, folded_ms, json_ms;
	size_t stacks, locations, folded_bytes, json_bytes;
};

/* Times aggregator_query over [from_ns, to_ns) of sel, model_build and
 * both encoders, QUERY_REPEATS times; medians into *ret. */
static int time_query(struct aggregator *a, const struct selection *sel, uint64_t from_ns,
		      uint64_t to_ns, struct query_result *ret)
{
	double q[QUERY_REPEATS], mb[QUERY_REPEATS], fo[QUERY_REPEATS], js[QUERY_REPEATS];
	struct model_opts mo = { .kind = PROFILE_KIND_CPU, .python_lines = true,
				 .resolve = cheap_resolve };
	struct encode_opts eo = { .period_ns = NSEC_PER_SEC / 99 };

	for (int k = 0; k < QUERY_REPEATS; k++) {
		struct profile_parts parts = { 0 };
		struct model *m = NULL;
		uint64_t first, end;
		struct jsonw w;
		double t0 = now(), t1, t2, t3;

		if (aggregator_query(a, sel, from_ns, to_ns, &parts, &first, &end) < 0)
			return -ENOMEM;
		t1 = now();
		if (model_build(&mo, &parts, aggregator_stacks(a), &m) < 0)
			return -ENOMEM;
		t2 = now();
		jsonw_init(&w);
		if (folded_encode(m, &eo, &w) < 0)
			return -ENOMEM;
		t3 = now();
		ret->folded_bytes = w.len;
		jsonw_done(&w);
		q[k] = (t1 - t0) * 1e3;
		mb[k] = (t2 - t1) * 1e3;
		fo[k] = (t3 - t2) * 1e3;
		t0 = now();
		jsonw_init(&w);
		if (json_encode(m, &eo, &w) < 0)
			return -ENOMEM;
		js[k] = (now() - t0) * 1e3;
		ret->json_bytes = w.len;
		jsonw_done(&w);
		ret->stacks = m->n_samples;
		ret->locations = m->n_locations;
		model_free(m);
		aggregator_release_parts(a, &parts);
	}
	ret->query_ms = median(q, QUERY_REPEATS);
	ret->model_ms = median(mb, QUERY_REPEATS);
	ret->folded_ms = median(fo, QUERY_REPEATS);
	ret->json_ms = median(js, QUERY_REPEATS);
	return 0;
}

struct run_result {
	/* what the windows hold: entries, and the bytes of the open windows
	 * (structs and maps) and of the sealed ones (the logs' buffers) */
	double window_entries, windows_open, open_mib, log_mib, windows_1s, windows_10s, windows_60s;
	double rss_growth_mib, hwm_growth_mib, heap_growth_mib, store_mib, history_mib;
	double stacks, frames, windows, processes, windows_evicted, samples_lost;
	double samples, busiest_samples, sim_seconds;
	double cpu_ms_per_s, ingest_ns, maintain_ms;
	struct query_result one, all;
};

static void count_windows(struct process *p, void *userdata)
{
	struct run_result *r = userdata;

	struct history_iter it;
	struct history_window w;

	history_iter_init(&it, &p->history);
	while (history_iter_next(&it, &w)) {
		r->window_entries += (double)history_window_entries(&w);
		r->windows_open += !w.sealed;
		r->windows_1s += w.span_s == 1;
		r->windows_10s += w.span_s == 10;
		r->windows_60s += w.span_s == 60;
	}
	r->log_mib += p->history.log.cap / 1048576.0;
	r->open_mib += (p->history.bytes - p->history.log.cap) / 1048576.0;
}

static int run(int n_procs, int hz, int cpus, int seconds, double skew, double rss_share,
	       uint64_t seed, uint32_t first_pid, struct run_result *r)
{
	int n_rss = (int)(rss_share * n_procs + 0.5);
	struct aggregator_limits limits = { .max_processes = 4096, .max_stacks = 200000,
					    .max_frames = 8000000, .max_memory_bytes = 64u << 20,
					    .retention_s = 3600 };
	uint64_t buf[(PERFD_SAMPLE_MAX_SIZE + 7) / 8];
	struct perfd_sample *rec = (struct perfd_sample *)buf;
	struct symbolizer_opts so = { .demangle = true };
	struct symbolizer *sym;
	struct module_registry modules;
	struct aggregator *a;
	struct aggregator_stats st;
	struct sim s;
	long rss0, hwm0, rss1, hwm1;
	size_t heap0;
	uint64_t t0_ns, per_second = (uint64_t)hz * (uint64_t)cpus;
	double tail_cpu = 0, tail_ingest = 0, tail_maintain = 0, wall0;
	int tail = MIN(60, seconds), busiest = 0;
	struct selection sel = { .n_pids = 1 };

	if (sim_init(&s, n_procs, skew, seed, first_pid) < 0)
		return -ENOMEM;
	read_memory(&rss0, &hwm0);
	heap0 = mallinfo2().uordblks;
	int err = symbolizer_new(&so, &sym, NULL);

	if (err < 0)
		return err;
	modules = symbolizer_modules(sym);
	err = aggregator_new(&limits, &modules, &a);
	if (err < 0) {
		symbolizer_free(sym);
		return err;
	}

	/* a fixed start, so that a seed gives the same windows every time */
	t0_ns = SIM_START_S * NSEC_PER_SEC;
	sim_clock_ns = t0_ns;
	sim_clock_on = true;
	wall0 = now();
	for (int sec = 0; sec < seconds; sec++) {
		double c0 = now(), c1;

		for (uint64_t k = 0; k < per_second; k++) {
			/* spread over the second, in order, as the ring gives them */
			uint64_t ts = t0_ns + (uint64_t)sec * NSEC_PER_SEC + k * (NSEC_PER_SEC / per_second);
			struct sim_process *p = &s.procs[draw(&s, s.proc_cdf, s.n_procs)];
			size_t size = make_sample(&s, p, ts, rec);

			sim_clock_ns = ts;
			if (aggregator_ingest(a, rec, size) < 0)
				return -EINVAL;
			p->samples++;
		}
		/* the RSS readings BPF sends, at most one a second per process */
		for (int i = 0; i < n_rss; i++) {
			const struct sim_process *p = &s.procs[i];
			struct perfd_rss ev = {
				.hdr = { .kind = PERFD_EVENT_RSS, .tgid = p->pid, .tid = p->pid,
					 .timestamp_ns = t0_ns + (uint64_t)sec * NSEC_PER_SEC +
							 NSEC_PER_SEC / 2,
					 .start_time_ns = p->start_ns },
				.rss_pages = { 2000, 8000 + (uint64_t)(sec % 100), 0 },
				.hiwater_rss_pages = 12000,
				.page_size = 4096,
			};

			sim_clock_ns = ev.hdr.timestamp_ns;
			if (aggregator_ingest(a, &ev, sizeof(ev)) < 0)
				return -EINVAL;
		}
		c1 = now();
		sim_clock_ns = t0_ns + (uint64_t)(sec + 1) * NSEC_PER_SEC;
		aggregator_maintain(a, sim_clock_ns);
		if (sec >= seconds - tail) {
			tail_ingest += c1 - c0;
			tail_maintain += now() - c1;
			tail_cpu += now() - c0;
		}
	}
	r->sim_seconds = now() - wall0;
	read_memory(&rss1, &hwm1);
	aggregator_get_stats(a, &st);
	aggregator_foreach_process(a, count_windows, r);
	r->rss_growth_mib = (rss1 - rss0) / 1024.0;
	r->hwm_growth_mib = (hwm1 - hwm0) / 1024.0;
	r->heap_growth_mib = (double)(mallinfo2().uordblks - heap0) / 1048576.0;
	r->store_mib = st.memory_bytes / 1048576.0;
	r->history_mib = st.history_bytes / 1048576.0;
	r->stacks = (double)st.stacks;
	r->frames = (double)st.frames;
	r->windows = (double)st.windows;
	r->processes = (double)st.processes;
	r->windows_evicted = (double)st.windows_evicted;
	r->samples_lost = (double)(st.samples_evicted + st.stack_limit);
	r->samples = (double)st.samples;
	r->cpu_ms_per_s = tail_cpu * 1e3 / tail;
	r->ingest_ns = tail_ingest * 1e9 / (tail * (double)per_second);
	r->maintain_ms = tail_maintain * 1e3 / tail;

	for (int i = 1; i < s.n_procs; i++)
		if (s.procs[i].samples > s.procs[busiest].samples)
			busiest = i;
	r->busiest_samples = (double)s.procs[busiest].samples;
	sel.pids[0] = s.procs[busiest].pid;
	if (time_query(a, &sel, t0_ns, t0_ns + (uint64_t)seconds * NSEC_PER_SEC + 1, &r->one) < 0)
		return -ENOMEM;
	sel = (struct selection){ .all = true };
	if (time_query(a, &sel, t0_ns, t0_ns + (uint64_t)seconds * NSEC_PER_SEC + 1, &r->all) < 0)
		return -ENOMEM;

	aggregator_free(a);
	symbolizer_free(sym);
	sim_done(&s);
	return 0;
}

static uint32_t first_free_pid(void)
{
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
	unsigned long max = 4194304;

	if (f) {
		if (fscanf(f, "%lu", &max) != 1)
			max = 4194304;
		fclose(f);
	}
	/* above every pid this kernel hands out */
	return (uint32_t)max + 1000;
}

#define FIELD(name, expr) printf("%s\"%s\": %.6g", first ? "" : ",\n ", name, (double)(expr)), first = false

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "procs", required_argument, NULL, 'p' }, { "hz", required_argument, NULL, 'f' },
		{ "cpus", required_argument, NULL, 'c' },  { "seconds", required_argument, NULL, 's' },
		{ "skew", required_argument, NULL, 'k' },  { "seed", required_argument, NULL, 'S' },
		{ "rss-share", required_argument, NULL, 'R' }, {}
	};
	int n_procs = 500, hz = 99, cpus = (int)sysconf(_SC_NPROCESSORS_ONLN), seconds = 3600, c, r;
	double skew = 1.0, rss_share = 0;
	uint64_t seed = 42;
	struct run_result res = { 0 };
	uint32_t first_pid = first_free_pid();
	bool first = true;

	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (c) {
		case 'p': n_procs = atoi(optarg); break;
		case 'f': hz = atoi(optarg); break;
		case 'c': cpus = atoi(optarg); break;
		case 's': seconds = atoi(optarg); break;
		case 'k': skew = atof(optarg); break;
		case 'S': seed = strtoull(optarg, NULL, 0); break;
		case 'R': rss_share = atof(optarg); break;
		default:
			fprintf(stderr, "usage: %s [--procs N] [--hz HZ] [--cpus N] [--seconds S] "
					"[--skew X] [--rss-share F] [--seed N]\n", argv[0]);
			return 2;
		}
	}
	if (n_procs < 1 || hz < 1 || cpus < 1 || seconds < 1 || skew < 0 || rss_share < 0 ||
	    rss_share > 1) {
		fprintf(stderr, "storebench: bad arguments\n");
		return 2;
	}
	/* The tids go in profile keys (22 bits): they must fit. */
	if (first_pid + (uint32_t)n_procs * (MAX_THREADS + 1) > PROFILE_TID_MAX) {
		fprintf(stderr, "storebench: kernel.pid_max leaves no room for %d processes that "
				"cannot exist\n", n_procs);
		return 1;
	}
	r = run(n_procs, hz, cpus, seconds, skew, rss_share, seed, first_pid, &res);
	if (r < 0) {
		fprintf(stderr, "storebench: %s\n", strerror(-r));
		return 1;
	}
	printf("{\"procs\": %d, \"hz\": %d, \"cpus\": %d, \"seconds\": %d, \"skew\": %g, "
	       "\"rss_share\": %g, \"seed\": %" PRIu64 ",\n ", n_procs, hz, cpus, seconds, skew,
	       rss_share, seed);
	FIELD("rss_growth_mib", res.rss_growth_mib);
	FIELD("hwm_growth_mib", res.hwm_growth_mib);
	FIELD("heap_growth_mib", res.heap_growth_mib);
	FIELD("store_memory_mib", res.store_mib);
	FIELD("history_mib", res.history_mib);
	FIELD("stacks", res.stacks);
	FIELD("frames", res.frames);
	FIELD("windows", res.windows);
	FIELD("windows_1s", res.windows_1s);
	FIELD("windows_10s", res.windows_10s);
	FIELD("windows_60s", res.windows_60s);
	FIELD("window_entries", res.window_entries);
	FIELD("windows_open", res.windows_open);
	FIELD("open_window_mib", res.open_mib);
	FIELD("log_mib", res.log_mib);
	FIELD("processes", res.processes);
	FIELD("windows_evicted", res.windows_evicted);
	FIELD("samples_lost", res.samples_lost);
	FIELD("samples", res.samples);
	FIELD("simulation_s", res.sim_seconds);
	FIELD("cpu_ms_per_s", res.cpu_ms_per_s);
	FIELD("ingest_ns_per_sample", res.ingest_ns);
	FIELD("maintain_ms", res.maintain_ms);
	FIELD("busiest_samples", res.busiest_samples);
	FIELD("one_query_ms", res.one.query_ms);
	FIELD("one_model_ms", res.one.model_ms);
	FIELD("one_folded_ms", res.one.folded_ms);
	FIELD("one_json_ms", res.one.json_ms);
	FIELD("one_stacks", res.one.stacks);
	FIELD("one_locations", res.one.locations);
	FIELD("one_folded_bytes", res.one.folded_bytes);
	FIELD("one_json_bytes", res.one.json_bytes);
	FIELD("all_query_ms", res.all.query_ms);
	FIELD("all_model_ms", res.all.model_ms);
	FIELD("all_folded_ms", res.all.folded_ms);
	FIELD("all_json_ms", res.all.json_ms);
	FIELD("all_stacks", res.all.stacks);
	FIELD("all_folded_bytes", res.all.folded_bytes);
	printf("}\n");
	return fflush(stdout) != 0 || ferror(stdout) ? 1 : 0;
}
