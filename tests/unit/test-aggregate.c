/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/profile/aggregate.c, the profile store, fed with
 * synthetic records built from include/perfd/sample.h: values per process
 * and stack in the process's history, process identity (pid + start time),
 * limits and eviction (processes, stacks, memory: oldest windows first),
 * the placeholder stack, the fair eviction between owners and the shares
 * of a user's snapshots, snapshots (collectors), queries of the past and
 * the selections they take, maintenance (roll-up, retention, freeing what
 * nothing holds), threads' names, exits, exec, the hooks, and normalization
 * of user frames through the test's own /proc/self/maps.
 */
#include <criterion/criterion.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <inttypes.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/query.h"
#include "base/clock.h"
#include "perfd/macro.h"
#include "profile/aggregate.h"
#include "profile/aggregate_internal.h"
#include "profile/frame.h"
#include "profile/stacktab.h"
#include "symbols/symbolize.h"
#include "noread.h"

#define NOPID 999999999u /* no such process: its maps cannot be read */
#define SEC 1000000000ULL

static struct symbolizer *sym;
static struct aggregator *agg;

static void make_limits(struct aggregator_limits l)
{
	struct module_registry modules;

	cr_assert_eq(symbolizer_new(&(struct symbolizer_opts){ .demangle = true }, &sym, NULL), 0);
	modules = symbolizer_modules(sym);
	cr_assert_eq(aggregator_new(&l, &modules, &agg), 0);
}

static void make(size_t max_processes, size_t max_stacks)
{
	make_limits((struct aggregator_limits){ .max_processes = max_processes,
						.max_stacks = max_stacks,
						.max_frames = 1000000 });
}

static void destroy(void)
{
	aggregator_free(agg);
	symbolizer_free(sym);
}

/* The fields of /proc/PID/stat after the comm, from the state on, in buf
 * (size bytes). */
static const char *stat_fields(pid_t pid, char *buf, size_t size)
{
	char path[64], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f);
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')'); /* comm may hold spaces */
	cr_assert_not_null(p);
	return p + 2;
}

/* The start time of process pid as BPF gives it, so that /proc checks of
 * it pass (its maps, its identity). */
static uint64_t start_ns_of(pid_t pid)
{
	char buf[4096];
	unsigned long long ticks = 0;

	/* state is field 3, starttime field 22 */
	cr_assert_eq(sscanf(stat_fields(pid, buf, sizeof(buf)),
			    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			    "%*d %*d %*d %*d %llu", &ticks), 1);
	return ticks * aggregator_ns_per_tick(agg);
}

static uint64_t self_start_ns(void)
{
	return start_ns_of(getpid());
}

struct sample_spec {
	uint32_t tgid, tid; /* tid 0: the main thread */
	uint64_t start, ts;
	const char *comm;   /* NULL: "pTGID" */
	const uint64_t *kips, *uips;
	int kd, ud;
	uint32_t flags, python_depth;
	uint64_t rss_anon_pages;
	uint64_t value; /* 0: 1 */
	uint32_t owner; /* the sample's owner_uid */
};

static int ingest(const struct sample_spec *sp)
{
	size_t nk = sp->kd > 0 ? sp->kd : 0, nu = sp->ud > 0 ? sp->ud : 0;
	size_t size = sizeof(struct perfd_sample) + (nk + nu) * sizeof(uint64_t) +
		      sp->python_depth * sizeof(struct perfd_python_frame);
	struct perfd_sample *s = calloc(1, size);
	int r;

	cr_assert_not_null(s);
	s->hdr.kind = PERFD_EVENT_SAMPLE;
	s->hdr.tgid = sp->tgid;
	s->hdr.tid = sp->tid ? sp->tid : sp->tgid;
	s->hdr.timestamp_ns = sp->ts;
	s->hdr.start_time_ns = sp->start;
	if (sp->comm)
		snprintf(s->comm, sizeof(s->comm), "%s", sp->comm);
	else
		snprintf(s->comm, sizeof(s->comm), "p%u", sp->tgid);
	s->rss_pages[PERFD_RSS_ANON] = sp->rss_anon_pages;
	s->hiwater_rss_pages = sp->rss_anon_pages;
	s->page_size = 4096;
	s->kernel_depth = sp->kd;
	s->user_depth = sp->ud;
	s->flags = sp->flags;
	s->value = sp->value ? sp->value : 1; /* CPU: mean periods */
	s->python_depth = sp->python_depth;
	s->owner_uid = sp->owner;
	if (nk)
		memcpy(s->ips, sp->kips, nk * sizeof(uint64_t));
	if (nu)
		memcpy(s->ips + nk, sp->uips, nu * sizeof(uint64_t));
	r = aggregator_ingest(agg, s, size);
	free(s);
	return r;
}

static int feed(uint32_t tgid, uint64_t start, uint64_t ts, const uint64_t *kips,
		int kd, const uint64_t *uips, int ud, uint64_t rss_anon_pages)
{
	return ingest(&(struct sample_spec){ .tgid = tgid, .start = start, .ts = ts, .kips = kips,
					     .kd = kd, .uips = uips, .ud = ud,
					     .rss_anon_pages = rss_anon_pages });
}

static int feed_user(uint32_t tgid, uint64_t start, uint64_t ts, uint64_t a, uint64_t b)
{
	uint64_t u[] = { a, b };

	return feed(tgid, start, ts, NULL, 0, u, 2, 10);
}

static void feed_exit(uint32_t tgid, uint64_t start, uint64_t ts)
{
	struct perfd_exit e = { .hdr = { .kind = PERFD_EVENT_EXIT, .tgid = tgid,
					 .timestamp_ns = ts, .start_time_ns = start } };

	cr_assert_eq(aggregator_ingest(agg, &e, sizeof(e)), 0);
}

/* An RSS record (PERFD_EVENT_RSS), or an exec record, which is one too. */
static void feed_counters(uint32_t kind, uint32_t tgid, uint64_t start, uint64_t ts,
			  uint64_t anon_pages)
{
	struct perfd_rss r = { .hdr = { .kind = kind, .tgid = tgid, .tid = tgid,
					.timestamp_ns = ts, .start_time_ns = start },
			       .page_size = 4096 };

	r.rss_pages[PERFD_RSS_ANON] = anon_pages;
	cr_assert_eq(aggregator_ingest(agg, &r, sizeof(r)), 0);
}

static void feed_exec(uint32_t tgid, uint64_t start, uint64_t ts)
{
	feed_counters(PERFD_EVENT_EXEC, tgid, start, ts, 10);
}

/* The value of the entries of prof whose stack has this leaf address. */
static uint64_t count_of(const struct profile_values *prof, uint64_t leaf_addr)
{
	uint64_t n = 0;

	U64MAP_FOREACH(slot, &prof->values) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg),
						     profile_key_stack(slot->key));

		if (s && s->depth && frame_address(s->frames[0]) == leaf_addr)
			n += slot->value;
	}
	return n;
}

/* The value of the entries of prof whose stack has this leaf frame. */
static uint64_t count_of_frame(const struct profile_values *prof, uint64_t leaf)
{
	uint64_t n = 0;

	U64MAP_FOREACH(slot, &prof->values) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg),
						     profile_key_stack(slot->key));

		if (s && s->depth && s->frames[0] == leaf)
			n += slot->value;
	}
	return n;
}

/* count(window, arg) summed over every window of p's history. */
static uint64_t history_sum(const struct process *p,
			    uint64_t (*count)(const struct profile_values *, uint64_t), uint64_t arg)
{
	struct history_iter it;
	struct history_window w;
	uint64_t n = 0;

	history_iter_init(&it, &p->history);
	while (history_iter_next(&it, &w)) {
		struct profile_values one;

		profile_init(&one);
		cr_assert_eq(history_window_merge(&w, aggregator_stacks(agg), &one), 0);
		n += count(&one, arg);
		profile_release(&one, aggregator_stacks(agg));
	}
	return n;
}

/* count_of over every window of p's history. */
static uint64_t history_count_of(const struct process *p, uint64_t leaf_addr)
{
	return history_sum(p, count_of, leaf_addr);
}

static uint64_t history_total(const struct process *p)
{
	struct history_iter it;
	struct history_window w;
	uint64_t n = 0;

	history_iter_init(&it, &p->history);
	while (history_iter_next(&it, &w))
		n += history_window_total(&w, PROFILE_KIND_CPU);
	return n;
}

/* The oldest window of p's history. */
static struct history_window oldest_window(const struct process *p)
{
	struct history_iter it;
	struct history_window w;

	history_iter_init(&it, &p->history);
	cr_assert(history_iter_next(&it, &w), "no window");
	return w;
}

/* The part of parts for pid, or NULL. */
static const struct profile_part *part_of(const struct profile_parts *parts, uint32_t pid)
{
	for (size_t i = 0; i < parts->n; i++)
		if (parts->parts[i].process->pid == pid)
			return &parts->parts[i];
	return NULL;
}

/* CPU samples a query over [from, to) answers with, and in how many parts. */
static uint64_t query_total(const struct selection *sel, uint64_t from, uint64_t to,
			    size_t *ret_parts)
{
	struct profile_parts parts;
	uint64_t first, end, n = 0;

	cr_assert_eq(aggregator_query(agg, sel, from, to, &parts, &first, &end), 0);
	for (size_t i = 0; i < parts.n; i++) {
		cr_assert_gt(parts.parts[i].prof.totals[PROFILE_KIND_CPU], 0,
			     "a part without data in the range");
		n += parts.parts[i].prof.totals[PROFILE_KIND_CPU];
	}
	if (ret_parts)
		*ret_parts = parts.n;
	aggregator_release_parts(agg, &parts);
	return n;
}

static const struct selection select_all = { .all = true };

static struct selection select_pid(uint32_t pid)
{
	return (struct selection){ .pids = { pid }, .n_pids = 1 };
}

/* ---- counting ------------------------------------------------------ */

Test(aggregate, counts_per_process_and_stack)
{
	struct aggregator_stats st;
	struct process *p;

	make(100, 1000);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(feed_user(NOPID, 5, 1 * SEC + i, 0x1000, 0x2000), 0);
	cr_assert_eq(feed_user(NOPID, 5, 1 * SEC + 9, 0x1100, 0x2000), 0);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_not_null(p);
	cr_assert_eq(p->total_samples, 4);
	cr_assert_eq(p->history.n_windows, 1);
	cr_assert_eq(p->history.newest->prof.values.count, 2);
	/* return addresses are stepped back into the call: leaf stays exact */
	cr_assert_eq(history_count_of(p, 0x1000), 3);
	cr_assert_eq(history_count_of(p, 0x1100), 1);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.samples, 4);
	cr_assert_eq(st.stacks, 2);
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(st.windows, 1);
	cr_assert_eq(st.history_bytes, p->history.bytes);
	cr_assert_eq(process_rss_bytes(p), 10 * 4096);
	destroy();
}

Test(aggregate, kernel_frames_come_first_and_errors_are_marked)
{
	uint64_t k[] = { 0xffffffff81000010ULL, 0xffffffff81000020ULL };
	uint64_t u[] = { 0x1000 };
	struct process *p;
	struct aggregator_stats st;
	int seen = 0;

	make(100, 1000);
	cr_assert_eq(feed(NOPID, 1, SEC, k, 2, u, 1, 1), 0);
	cr_assert_eq(feed(NOPID, 1, SEC, NULL, -14, NULL, -14, 1), 0);
	p = aggregator_find_process(agg, NOPID);
	U64MAP_FOREACH(slot, &p->history.newest->prof.values) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg),
						     profile_key_stack(slot->key));

		seen++;
		cr_assert_eq(profile_key_kind(slot->key), PROFILE_KIND_CPU);
		cr_assert_eq(profile_key_tid(slot->key), NOPID & PROFILE_TID_MAX);
		if (s->depth == 3) {
			cr_assert_eq(s->kernel_depth, 2);
			cr_assert_eq(frame_module(s->frames[0]), FRAME_MODULE_KERNEL);
			cr_assert_eq(frame_kernel_address(s->frames[0]), k[0]);
			cr_assert_eq(frame_kernel_address(s->frames[1]), k[1] - 1);
			cr_assert_eq(frame_module(s->frames[2]), FRAME_MODULE_NONE);
		} else {
			cr_assert_eq(s->depth, 2);
			cr_assert_eq(frame_module(s->frames[0]), FRAME_MODULE_SPECIAL);
			cr_assert_eq(frame_address(s->frames[0]), FRAME_SPECIAL_KSTACK_ERROR);
			cr_assert_eq(frame_address(s->frames[1]), FRAME_SPECIAL_USTACK_ERROR);
		}
	}
	cr_assert_eq(seen, 2);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.kernel_stack_errors, 1);
	cr_assert_eq(st.user_stack_errors, 1);
	destroy();
}

Test(aggregate, a_tick_due_before_a_switch_is_rooted_at_its_marker_and_takes_no_rss)
{
	/* PERFD_SAMPLE_F_SWITCHED: charged to the task switched out, without a
	 * stack, its RSS fields the incoming task's */
	uint64_t u[] = { 0x1000 };
	struct process *p;
	int seen = 0;

	make(100, 1000);
	cr_assert_eq(feed(NOPID, 1, SEC, NULL, 0, u, 1, 10), 0);
	cr_assert_eq(ingest(&(struct sample_spec){ .tgid = NOPID, .start = 1, .ts = SEC + 1,
						   .flags = PERFD_SAMPLE_F_SWITCHED,
						   .rss_anon_pages = 5000 }), 0);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(p->total_samples, 2);
	cr_assert_eq(process_rss_bytes(p), 10 * 4096);
	U64MAP_FOREACH(slot, &p->history.newest->prof.values) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg),
						     profile_key_stack(slot->key));

		if (s->depth != 1 || frame_module(s->frames[0]) != FRAME_MODULE_SPECIAL)
			continue;
		seen++;
		cr_assert_eq(frame_address(s->frames[0]), FRAME_SPECIAL_CONTEXT_SWITCH);
		cr_assert_eq(s->kernel_depth, 0);
	}
	cr_assert_eq(seen, 1);
	destroy();
}

/* The root marker of a user stack: none for one walked to its root (by
 * tables, or by frame pointers short of the depth limit), [truncated] for
 * one the table walk could not take to its root, whatever its depth, and
 * [unwind table pending] when that walk met code whose table was being
 * built. */
Test(aggregate, a_stack_that_did_not_reach_its_root_says_so_at_its_root)
{
	const struct {
		uint32_t flags;
		uint64_t marker; /* 0: none */
	} cases[] = {
		{ 0, 0 },
		{ PERFD_SAMPLE_F_DWARF, 0 },
		{ PERFD_SAMPLE_F_DWARF | PERFD_SAMPLE_F_TRUNCATED, FRAME_SPECIAL_TRUNCATED },
		{ PERFD_SAMPLE_F_DWARF | PERFD_SAMPLE_F_TRUNCATED | PERFD_SAMPLE_F_UNWIND_PENDING,
		  FRAME_SPECIAL_UNWIND_PENDING },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		/* a different leaf per case tells the stacks apart */
		uint64_t u[] = { 0x1000 + 0x10 * i, 0x2000 };
		struct process *p;
		int seen = 0;

		make(100, 1000);
		cr_assert_eq(ingest(&(struct sample_spec){ .tgid = NOPID, .start = 1, .ts = SEC,
							   .uips = u, .ud = 2,
							   .flags = cases[i].flags }), 0);
		p = aggregator_find_process(agg, NOPID);
		U64MAP_FOREACH(slot, &p->history.newest->prof.values) {
			const struct stack *s = stacktab_get(aggregator_stacks(agg),
							     profile_key_stack(slot->key));

			seen++;
			cr_assert_eq(s->depth, cases[i].marker ? 3 : 2, "case %zu", i);
			if (cases[i].marker) {
				cr_assert_eq(frame_module(s->frames[2]), FRAME_MODULE_SPECIAL);
				cr_assert_eq(frame_address(s->frames[2]), cases[i].marker,
					     "case %zu", i);
			}
		}
		cr_assert_eq(seen, 1);
		destroy();
	}
}

Test(aggregate, recent_samples_by_second)
{
	struct process *p;

	make(100, 1000);
	feed_user(NOPID, 1, 100 * SEC + 5, 0x1000, 0x2000);
	feed_user(NOPID, 1, 105 * SEC + 5, 0x1000, 0x2000);
	feed_user(NOPID, 1, 109 * SEC + 5, 0x1000, 0x2000);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(process_window_samples(p, 109, 110, NULL), 1);
	cr_assert_eq(process_window_samples(p, 105, 110, NULL), 2);
	cr_assert_eq(process_window_samples(p, 100, 110, NULL), 3);
	cr_assert_eq(process_window_samples(p, 101, 109, NULL), 1);
	cr_assert_eq(process_window_samples(p, 140, 200, NULL), 0);
	destroy();
}

Test(aggregate, a_cpu_sample_counts_the_periods_it_stands_for)
{
	/* a jittered tick that passed two blocks' targets */
	static const uint64_t uips[] = { 0x1000, 0x2000 };
	struct aggregator_stats st;
	struct process *p;

	make(100, 1000);
	cr_assert_eq(ingest(&(struct sample_spec){ .tgid = NOPID, .start = 1, .ts = 100 * SEC + 5,
						   .uips = uips, .ud = 2, .value = 2 }), 0);
	feed_user(NOPID, 1, 100 * SEC + 7, 0x1000, 0x2000);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(process_window_samples(p, 100, 101, NULL), 3);
	cr_assert_eq(p->total_samples, 3);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.samples, 3);
	cr_assert_eq(history_count_of(p, 0x1000), 3);
	destroy();
}

/* A new sampling period (aggregator_scale_periods): the windows, the counts
 * ps reads, and a snapshot collecting, all in the new period. */
Test(aggregate, a_new_period_rescales_the_store_and_the_snapshots_collecting)
{
	struct collector c = { .sel = select_all, .begin_ns = 0, .end_ns = UINT64_MAX };
	struct process *p;

	make(100, 1000);
	aggregator_add_collector(agg, &c);
	for (int i = 0; i < 3; i++)
		feed_user(NOPID, 1, 100 * SEC + 5 + i, 0x1000, 0x2000);
	feed_user(NOPID, 1, 101 * SEC, 0x1100, 0x2000);
	/* 10 ms -> 2 ms: an old sample is 5 new ones */
	aggregator_scale_periods(agg, 10000000, 2000000);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(history_count_of(p, 0x1000), 15);
	cr_assert_eq(history_count_of(p, 0x1100), 5);
	cr_assert_eq(history_total(p), 20);
	cr_assert_eq(p->total_samples, 20);
	cr_assert_eq(process_window_samples(p, 100, 102, NULL), 20);
	cr_assert_eq(count_of(&part_of(&c.parts, NOPID)->prof, 0x1000), 15);
	cr_assert_eq(part_of(&c.parts, NOPID)->prof.totals[PROFILE_KIND_CPU], 20);
	/* and a sample after it counts one of the new period */
	feed_user(NOPID, 1, 101 * SEC + 1, 0x1100, 0x2000);
	cr_assert_eq(history_count_of(p, 0x1100), 6);
	aggregator_remove_collector(agg, &c);
	aggregator_release_parts(agg, &c.parts);
	destroy();
}

Test(aggregate, malformed_records_are_rejected)
{
	struct perfd_sample s = { .hdr = { .kind = PERFD_EVENT_SAMPLE }, .kernel_depth = 5 };
	struct perfd_event_header h = { .kind = 99 };

	make(100, 1000);
	cr_assert_eq(aggregator_ingest(agg, &s, sizeof(s)), -EINVAL); /* frames missing */
	s.kernel_depth = 1000;
	cr_assert_eq(aggregator_ingest(agg, &s, sizeof(s) + 8000), -EINVAL);
	s.kernel_depth = 0;
	s.python_depth = 1; /* its frame is missing */
	cr_assert_eq(aggregator_ingest(agg, &s, sizeof(s)), -EINVAL);
	s.python_depth = 0; /* a CPU sample of no period, or of more than a tick can pass */
	cr_assert_eq(aggregator_ingest(agg, &s, sizeof(s)), -EINVAL);
	s.value = PERFD_CPU_VALUE_MAX + 1;
	cr_assert_eq(aggregator_ingest(agg, &s, sizeof(s)), -EINVAL);
	cr_assert_eq(aggregator_ingest(agg, &h, sizeof(h)), -EINVAL);
	cr_assert_eq(aggregator_ingest(agg, &h, 3), -EINVAL);
	h.kind = PERFD_EVENT_EXIT; /* shorter than an exit */
	cr_assert_eq(aggregator_ingest(agg, &h, sizeof(h)), -EINVAL);
	destroy();
}

/* ---- process identity ---------------------------------------------- */

Test(aggregate, reused_pid_is_a_new_process)
{
	struct aggregator_stats st;
	struct process *p;

	make(100, 1000);
	feed_user(NOPID, 100, SEC, 0x1000, 0x2000);
	feed_user(NOPID, 200, 2 * SEC, 0x1000, 0x2000);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(p->start_time_ns, 200);
	cr_assert_eq(p->total_samples, 1);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.processes, 2);
	cr_assert_eq(st.processes_exited, 1);
	/* the old one stays, queryable, apart from the new one */
	cr_assert_eq(query_total(&select_all, 0, 10 * SEC, NULL), 2);
	{
		struct profile_parts parts;
		uint64_t first, end;
		struct selection sel = select_pid(NOPID);

		cr_assert_eq(aggregator_query(agg, &sel, 0, 10 * SEC, &parts, &first, &end), 0);
		cr_assert_eq(parts.n, 2, "both incarnations of the pid answer");
		cr_assert_neq(parts.parts[0].process, parts.parts[1].process);
		aggregator_release_parts(agg, &parts);
	}
	destroy();
}

/* ---- threads -------------------------------------------------------- */

Test(aggregate, threads_are_named_by_their_latest_comm)
{
	uint64_t u[] = { 0x1000, 0x2000 };
	struct process *p;
	size_t keys = 0;

	make(100, 1000);
	ingest(&(struct sample_spec){ .tgid = NOPID, .start = 1, .ts = SEC, .comm = "app", .uips = u,
				      .ud = 2 });
	ingest(&(struct sample_spec){ .tgid = NOPID, .tid = NOPID - 5, .start = 1, .ts = SEC,
				      .comm = "worker", .uips = u, .ud = 2 });
	p = aggregator_find_process(agg, NOPID);
	cr_assert_str_eq(p->comm, "app");
	cr_assert_str_eq(process_thread_comm(p, NOPID), "app");
	cr_assert_str_eq(process_thread_comm(p, NOPID - 5), "worker");
	cr_assert_null(process_thread_comm(p, 12345));
	/* a thread that names itself later goes by its new name; only the
	 * main thread's names the process */
	ingest(&(struct sample_spec){ .tgid = NOPID, .tid = NOPID - 5, .start = 1, .ts = 2 * SEC,
				      .comm = "worker-renamed", .uips = u, .ud = 2 });
	cr_assert_str_eq(process_thread_comm(p, NOPID - 5), "worker-renamed");
	cr_assert_str_eq(p->comm, "app");
	ingest(&(struct sample_spec){ .tgid = NOPID, .start = 1, .ts = 2 * SEC, .comm = "app2",
				      .uips = u, .ud = 2 });
	cr_assert_str_eq(p->comm, "app2");
	cr_assert_eq(p->n_threads, 2);
	/* values are kept by thread */
	{
		struct history_iter it;
		struct history_window w;

		history_iter_init(&it, &p->history);
		while (history_iter_next(&it, &w))
			keys += history_window_entries(&w);
	}
	cr_assert_eq(keys, 4, "two threads in two windows");
	destroy();
}

/* A process first seen through a thread other than the main one is named
 * by /proc when it can be, else by that thread. */
Test(aggregate, process_first_seen_through_a_thread)
{
	uint64_t u[] = { 0x1000 };
	struct process *p;

	make(100, 1000);
	ingest(&(struct sample_spec){ .tgid = NOPID, .tid = NOPID - 1, .start = 1, .ts = SEC,
				      .comm = "thread-comm", .uips = u, .ud = 1 });
	p = aggregator_find_process(agg, NOPID);
	cr_assert_str_eq(p->comm, "thread-comm");
	ingest(&(struct sample_spec){ .tgid = getpid(), .tid = getpid() + 100000, .start = self_start_ns(),
				      .ts = SEC, .comm = "not-the-main", .uips = u, .ud = 1 });
	p = aggregator_find_process(agg, getpid());
	{
		char comm[64] = "";
		FILE *f = fopen("/proc/self/comm", "re");

		cr_assert_not_null(f);
		cr_assert_not_null(fgets(comm, sizeof(comm), f));
		fclose(f);
		comm[strcspn(comm, "\n")] = 0;
		cr_assert_str_eq(p->comm, comm);
	}
	destroy();
}

Test(aggregate, thread_table_is_bounded)
{
	uint64_t u[] = { 0x1000 };
	struct process *p;

	make(100, 1000);
	for (uint32_t t = 0; t < 5000; t++)
		ingest(&(struct sample_spec){ .tgid = NOPID, .tid = 100 + t, .start = 1, .ts = SEC,
					      .uips = u, .ud = 1 });
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(p->n_threads, 4096);
	cr_assert_not_null(process_thread_comm(p, 100));
	cr_assert_null(process_thread_comm(p, 100 + 4999));
	cr_assert_eq(p->total_samples, 5000, "samples of unnamed threads are lost");
	destroy();
}

/* ---- limits and eviction -------------------------------------------- */

Test(aggregate, process_limit_evicts_exited_then_coldest)
{
	struct aggregator_stats st;

	make(2, 1000);
	feed_user(NOPID, 1, 1 * SEC, 0x1000, 0x2000);
	feed_user(NOPID, 1, 1 * SEC, 0x1000, 0x2000);
	feed_user(NOPID - 1, 1, 2 * SEC, 0x1000, 0x2000);
	feed_exit(NOPID - 1, 1, 3 * SEC);
	feed_user(NOPID - 2, 1, 4 * SEC, 0x1000, 0x2000);
	/* the exited one went, though it was sampled last of the two */
	cr_assert_not_null(aggregator_find_process(agg, NOPID));
	cr_assert_null(aggregator_find_process(agg, NOPID - 1));
	feed_user(NOPID - 3, 1, 5 * SEC, 0x1000, 0x2000);
	/* then the coldest live one */
	cr_assert_null(aggregator_find_process(agg, NOPID));
	cr_assert_not_null(aggregator_find_process(agg, NOPID - 2));
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.processes, 2);
	cr_assert_eq(st.processes_evicted, 2);
	cr_assert_eq(st.samples_evicted, 3);
	destroy();
}

/* Exited processes go in the order they exited (a list, not a search of
 * the store: a host with churn keeps max_processes of them), whatever
 * their last sample; a random stream of new processes and exits keeps the
 * store's array and its list whole (every process found where it is, the
 * count at the limit). */
Test(aggregate, exited_processes_go_in_the_order_they_exited)
{
	uint64_t rng = 7;

	make(3, 1000);
	feed_user(NOPID, 1, 1 * SEC, 0x1000, 0x2000);
	feed_user(NOPID - 1, 1, 2 * SEC, 0x1000, 0x2000);
	feed_user(NOPID - 2, 1, 3 * SEC, 0x1000, 0x2000);
	feed_exit(NOPID - 1, 1, 4 * SEC);
	feed_exit(NOPID, 1, 5 * SEC);
	feed_user(NOPID - 3, 1, 6 * SEC, 0x1000, 0x2000);
	cr_assert_null(aggregator_find_process(agg, NOPID - 1), "the first to exit stayed");
	cr_assert_not_null(aggregator_find_process(agg, NOPID));
	feed_user(NOPID - 4, 1, 7 * SEC, 0x1000, 0x2000);
	cr_assert_null(aggregator_find_process(agg, NOPID));
	cr_assert_not_null(aggregator_find_process(agg, NOPID - 2), "a live one went before");

	for (int i = 0; i < 2000; i++) {
		uint32_t pid = NOPID - 10 - (uint32_t)((rng = rng * 6364136223846793005ULL + 1) >> 33) % 40;

		if ((rng >> 20) & 1)
			feed_exit(pid, 1, (8 + (uint64_t)i) * SEC);
		else
			feed_user(pid, 1, (8 + (uint64_t)i) * SEC, 0x1000, 0x2000);
	}
	{
		struct aggregator_stats st;
		size_t n = 0;

		aggregator_get_stats(agg, &st);
		cr_assert_leq(st.processes, 3);
		cr_assert_leq(st.processes_exited, st.processes);
		for (uint32_t pid = NOPID - 60; pid <= NOPID; pid++) {
			struct process *p = aggregator_find_process(agg, pid);

			n += p != NULL;
		}
		cr_assert_eq(n, st.processes, "%zu found of %zu", n, st.processes);
	}
	destroy();
}

/* A process an answer or a snapshot holds is never evicted; with nothing
 * evictable, the new process's samples are counted as lost. */
Test(aggregate, pinned_processes_are_not_evicted)
{
	struct profile_parts parts;
	uint64_t first, end;
	struct aggregator_stats st;

	make(2, 1000);
	feed_user(NOPID, 1, 1 * SEC, 0x1000, 0x2000);      /* the coldest */
	feed_user(NOPID - 1, 1, 2 * SEC, 0x1000, 0x2000);
	{
		struct selection sel = select_pid(NOPID);

		cr_assert_eq(aggregator_query(agg, &sel, 0, 10 * SEC, &parts, &first, &end), 0);
	}
	cr_assert_eq(parts.n, 1);
	cr_assert_eq(parts.parts[0].process->pins, 1);
	feed_user(NOPID - 2, 1, 3 * SEC, 0x1000, 0x2000);
	cr_assert_not_null(aggregator_find_process(agg, NOPID));
	cr_assert_null(aggregator_find_process(agg, NOPID - 1));
	/* both left are pinned now */
	{
		struct profile_parts more;
		struct selection sel = select_pid(NOPID - 2);

		cr_assert_eq(aggregator_query(agg, &sel, 0, 10 * SEC, &more, &first, &end), 0);
		feed_user(NOPID - 3, 1, 4 * SEC, 0x1000, 0x2000);
		cr_assert_null(aggregator_find_process(agg, NOPID - 3));
		aggregator_get_stats(agg, &st);
		cr_assert_eq(st.samples_evicted, 2); /* NOPID - 1's, and the one with no room */
		aggregator_release_parts(agg, &more);
	}
	aggregator_release_parts(agg, &parts);
	cr_assert_eq(aggregator_find_process(agg, NOPID)->pins, 0);
	feed_user(NOPID - 3, 1, 5 * SEC, 0x1000, 0x2000);
	cr_assert_not_null(aggregator_find_process(agg, NOPID - 3));
	cr_assert_null(aggregator_find_process(agg, NOPID), "unpinned, it was the coldest");
	destroy();
}

/* The stack table full: the oldest windows (of any process) go first and
 * free their stacks, so the new stack fits. */
Test(aggregate, stack_limit_drops_the_oldest_windows_first)
{
	struct aggregator_stats st;
	struct process *p;

	make(100, 2);
	feed_user(NOPID, 1, 1 * SEC, 0x1000, 0x2000);
	feed_user(NOPID, 1, 1 * SEC, 0x1100, 0x2000);
	feed_user(NOPID - 1, 1, 2 * SEC, 0x3000, 0x2000);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.stack_limit, 0);
	cr_assert_eq(st.windows_evicted, 1);
	cr_assert_eq(st.samples_evicted, 2);
	cr_assert_eq(st.values_evicted[PROFILE_KIND_CPU], 2);
	cr_assert_eq(st.stacks, 1);
	cr_assert_eq(st.processes_evicted, 0, "a window was enough");
	p = aggregator_find_process(agg, NOPID);
	cr_assert_not_null(p, "the process stays, without its window");
	cr_assert(history_empty(&p->history));
	cr_assert_eq(history_count_of(aggregator_find_process(agg, NOPID - 1), 0x3000), 1);
	destroy();
}

/* When nothing can free a stack (a snapshot holds them all), the sample
 * is kept under the placeholder stack and counted. */
Test(aggregate, stack_limit_keeps_the_sample_under_the_placeholder)
{
	struct collector c = { .sel = select_pid(NOPID), .begin_ns = 0, .end_ns = 100 * SEC };
	struct aggregator_stats st;
	struct process *p;
	bool placeholder = false;

	make(100, 2);
	aggregator_add_collector(agg, &c);
	feed_user(NOPID, 1, 1 * SEC, 0x1000, 0x2000);
	feed_user(NOPID, 1, 1 * SEC, 0x1100, 0x2000);
	feed_user(NOPID, 1, 2 * SEC, 0x1200, 0x2000);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(p->total_samples, 3);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.stack_limit, 1);
	cr_assert_eq(st.stacks, 2);
	cr_assert_eq(c.samples, 3);
	U64MAP_FOREACH(slot, &c.parts.parts[0].prof.values) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg),
						     profile_key_stack(slot->key));

		if (s->depth == 1 && frame_module(s->frames[0]) == FRAME_MODULE_SPECIAL &&
		    frame_address(s->frames[0]) == FRAME_SPECIAL_STACK_LIMIT) {
			placeholder = true;
			cr_assert_eq(slot->value, 1);
		}
	}
	cr_assert(placeholder, "no sample under the placeholder stack");
	cr_assert_eq(history_total(p), p->total_samples - st.samples_evicted);
	aggregator_remove_collector(agg, &c);
	aggregator_release_parts(agg, &c.parts);
	destroy();
}

/* Under max_memory_bytes, unique stacks without end: the store stays
 * under the cap, drops whole windows, oldest first, and counts them;
 * the recent windows stay queryable.  Nothing is lost uncounted. */
Test(aggregate, memory_cap_drops_the_oldest_windows)
{
	const size_t cap = 512 * 1024;
	const uint64_t per_second = 100, seconds = 300;
	struct aggregator_stats st;
	struct process *a, *b;
	uint64_t fed = 0;

	make_limits((struct aggregator_limits){ .max_processes = 100, .max_stacks = 1000000,
						.max_frames = 10000000, .max_memory_bytes = cap,
						.retention_s = 100000 });
	/* process a for the first half, b for the second */
	for (uint64_t s = 0; s < seconds; s++)
		for (uint64_t i = 0; i < per_second; i++) {
			uint32_t pid = s < seconds / 2 ? NOPID : NOPID - 1;

			cr_assert_eq(feed_user(pid, 1, (1000 + s) * SEC + i * (SEC / per_second),
					       0x100000 + fed, 0x2000), 0);
			fed++;
			aggregator_get_stats(agg, &st);
			cr_assert_leq(st.memory_bytes, cap, "%zu bytes over a cap of %zu after %lu samples",
				      st.memory_bytes, cap, (unsigned long)fed);
		}
	aggregator_get_stats(agg, &st);
	cr_assert_gt(st.windows_evicted, 0);
	cr_assert_eq(st.samples, fed);
	a = aggregator_find_process(agg, NOPID);
	b = aggregator_find_process(agg, NOPID - 1);
	cr_assert_not_null(a, "a process was evicted while windows were left");
	cr_assert_not_null(b);
	cr_assert_eq(st.processes_evicted, 0);
	/* every value is either held or counted as dropped */
	cr_assert_eq(history_total(a) + history_total(b) + st.samples_evicted, fed);
	cr_assert_eq(st.values_evicted[PROFILE_KIND_CPU], st.samples_evicted);
	/* what went was the oldest: the older process lost everything before
	 * the newer lost anything, and what is kept is the most recent seconds */
	cr_assert(history_empty(&a->history), "a kept windows older than b's");
	cr_assert_eq(b->history.newest->start_s, 1000 + seconds - 1);
	{
		uint64_t kept = history_total(b), oldest = history_oldest_s(&b->history);

		cr_assert_eq(kept, (1000 + seconds - oldest) * per_second,
			     "the windows kept are not the most recent ones");
		cr_assert_eq(st.windows, b->history.n_windows);
		/* the last seconds answer; the first ones are gone */
		cr_assert_eq(query_total(&select_all, (1000 + seconds - 2) * SEC,
					 (1000 + seconds) * SEC, NULL), 2 * per_second);
		cr_assert_eq(query_total(&select_all, 1000 * SEC, 1010 * SEC, NULL), 0);
	}
	destroy();
}

/* ---- history and queries -------------------------------------------- */

Test(aggregate, samples_land_in_the_history_and_queries_find_them)
{
	struct profile_parts parts;
	uint64_t first, end;
	struct selection sel = select_pid(NOPID);

	make(100, 1000);
	feed_user(NOPID, 1, 10 * SEC + 1, 0x1000, 0x2000);
	feed_user(NOPID, 1, 10 * SEC + 2, 0x1000, 0x2000);
	feed_user(NOPID, 1, 11 * SEC + 5, 0x1100, 0x2000);
	cr_assert_eq(aggregator_query(agg, &sel, 10 * SEC, 12 * SEC, &parts, &first, &end), 0);
	cr_assert_eq(parts.n, 1);
	cr_assert_eq(parts.parts[0].process->pid, NOPID);
	cr_assert_eq(parts.parts[0].process->pins, 1);
	cr_assert_eq(count_of(&parts.parts[0].prof, 0x1000), 2);
	cr_assert_eq(count_of(&parts.parts[0].prof, 0x1100), 1);
	cr_assert_eq(first, 10 * SEC);
	cr_assert_eq(end, 12 * SEC);
	aggregator_release_parts(agg, &parts);
	cr_assert_eq(aggregator_find_process(agg, NOPID)->pins, 0);
	cr_assert_eq(parts.n, 0);

	/* one second of the two */
	cr_assert_eq(query_total(&sel, 11 * SEC, 12 * SEC, NULL), 1);
	/* ranges without them: no part at all, no span */
	cr_assert_eq(aggregator_query(agg, &sel, 20 * SEC, 30 * SEC, &parts, &first, &end), 0);
	cr_assert_eq(parts.n, 0);
	cr_assert_eq(first, 0);
	cr_assert_eq(end, 0);
	aggregator_release_parts(agg, &parts);
	cr_assert_eq(query_total(&sel, 0, 10 * SEC, NULL), 0);
	destroy();
}

/* Hand-made processes for selection_matches. */
static struct process proc(uint32_t pid, uint64_t start_ns, const char *comm, const char *cgroup)
{
	struct process p = { .pid = pid, .start_time_ns = start_ns, .cgroup = (char *)cgroup };

	snprintf(p.comm, sizeof(p.comm), "%s", comm);
	return p;
}

/* At 100 Hz (ticks of 10 ms), in an empty store. */
static bool matches(const struct selection *sel, const struct process *p)
{
	bool r;

	make(16, 16);
	r = selection_matches(agg, sel, p);
	destroy();
	return r;
}

Test(aggregate, selection_by_pids)
{
	struct selection sel = { .pids = { 5, 7, 9 }, .n_pids = 3 };
	struct process p5 = proc(5, 0, "a", NULL), p6 = proc(6, 0, "a", NULL),
		       p9 = proc(9, 0, "b", NULL);

	cr_assert(matches(&sel, &p5));
	cr_assert_not(matches(&sel, &p6));
	cr_assert(matches(&sel, &p9));
	/* with one pid, the incarnation by its start time in ticks */
	sel = (struct selection){ .pids = { 5 }, .n_pids = 1, .start_ticks = 42 };
	p5.start_time_ns = 42 * 10000000ULL + 123;
	cr_assert(matches(&sel, &p5));
	p5.start_time_ns = 43 * 10000000ULL;
	cr_assert_not(matches(&sel, &p5));
	/* with several it is not asked */
	sel = (struct selection){ .pids = { 5, 6 }, .n_pids = 2, .start_ticks = 42 };
	cr_assert(matches(&sel, &p5));
}

Test(aggregate, selection_by_comm_is_exact)
{
	struct selection sel = { .comm = "app" };
	struct process a = proc(1, 0, "app", NULL), b = proc(2, 0, "app2", NULL),
		       c = proc(3, 0, "ap", NULL), full = proc(4, 0, "fifteen-chars-x", NULL);

	cr_assert(matches(&sel, &a));
	cr_assert_not(matches(&sel, &b));
	cr_assert_not(matches(&sel, &c));
	snprintf(sel.comm, sizeof(sel.comm), "fifteen-chars-x");
	cr_assert(matches(&sel, &full));
	/* with pids too, both must hold */
	sel = (struct selection){ .pids = { 1, 2 }, .n_pids = 2, .comm = "app" };
	cr_assert(matches(&sel, &a));
	cr_assert_not(matches(&sel, &b));
}

struct cgroup_case {
	const char *selected, *cgroup;
	bool match;
};

Test(aggregate, selection_by_cgroup_is_the_path_or_below_it)
{
	static const struct cgroup_case cases[] = {
		{ "/a/b", "/a/b", true },
		{ "/a/b", "/a/b/c", true },
		{ "/a/b", "/a/b/c/d.scope", true },
		{ "/a/b", "/a/bc", false },
		{ "/a/b", "/a/b.service", false },
		{ "/a/b", "/a", false },
		{ "/a/b", "/x/a/b", false },
		{ "/a/b", NULL, false },
		{ "/a/b/", "/a/b", true },
		{ "/a/b/", "/a/b/c", true },
		{ "/a/b/", "/a/bc", false },
		{ "/", "/a/b", true },
		{ "/", "/", true },
		{ "/", NULL, false },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct selection sel = { 0 };
		struct process p = proc(1, 0, "x", cases[i].cgroup);

		snprintf(sel.cgroup, sizeof(sel.cgroup), "%s", cases[i].selected);
		cr_assert_eq(matches(&sel, &p), cases[i].match, "cgroup %s %s %s",
			     cases[i].selected, cases[i].match ? "should take" : "takes",
			     cases[i].cgroup ? cases[i].cgroup : "(none)");
	}
}

Test(aggregate, selection_by_unit_is_a_path_element)
{
	static const struct cgroup_case cases[] = {
		{ "foo.service", "/system.slice/foo.service", true },
		{ "foo.service", "/system.slice/foo.service/worker", true },
		{ "foo.service", "/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service", true },
		{ "foo.service", "/system.slice/foo.service2", false },
		{ "foo.service", "/system.slice/myfoo.service", false },
		{ "foo.service", "/system.slice/foo.servic", false },
		{ "foo.service", "foo.service", true },
		{ "foo.service", NULL, false },
		{ "system.slice", "/system.slice/foo.service", true },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct selection sel = { 0 };
		struct process p = proc(1, 0, "x", cases[i].cgroup);

		snprintf(sel.unit, sizeof(sel.unit), "%s", cases[i].selected);
		cr_assert_eq(matches(&sel, &p), cases[i].match, "unit %s %s %s", cases[i].selected,
			     cases[i].match ? "should take" : "takes",
			     cases[i].cgroup ? cases[i].cgroup : "(none)");
	}
}

static bool even_pids_only(void *userdata, const struct process *p)
{
	(*(int *)userdata)++;
	return p->pid % 2 == 0;
}

Test(aggregate, selection_all_none_and_visible)
{
	int calls = 0;
	struct selection none = { 0 }, all = { .all = true },
			 visible = { .all = true, .visible = even_pids_only, .visible_userdata = &calls };
	struct process p1 = proc(1, 0, "x", NULL), p2 = proc(2, 0, "x", "/a");

	cr_assert_not(matches(&none, &p1), "an empty selection takes everything");
	cr_assert(matches(&all, &p1));
	cr_assert(matches(&all, &p2));
	cr_assert_not(matches(&visible, &p1));
	cr_assert(matches(&visible, &p2));
	cr_assert_eq(calls, 2);
	/* visible() has the last word over any selector */
	visible = (struct selection){ .pids = { 1 }, .n_pids = 1, .visible = even_pids_only,
				      .visible_userdata = &calls };
	cr_assert_not(matches(&visible, &p1));
	/* ... and is not asked about a process the selectors refuse */
	calls = 0;
	visible = (struct selection){ .comm = "y", .visible = even_pids_only,
				      .visible_userdata = &calls };
	cr_assert_not(matches(&visible, &p2));
	cr_assert_eq(calls, 0);
}

/* The store's processes selected by pid list, comm, cgroup, unit, all and
 * visible(), each a part of its own. */
Test(aggregate, queries_take_the_selected_processes)
{
	static const char *const cgroups[] = { "/system.slice/web.service", "/system.slice/web.service/w1",
					       "/system.slice/webx.service", NULL };
	struct process *p[4];
	int calls = 0;
	size_t n;

	make(100, 1000);
	for (uint32_t i = 0; i < 4; i++) {
		for (uint32_t k = 0; k <= i; k++) /* p[i] has i + 1 samples */
			ingest(&(struct sample_spec){ .tgid = NOPID - i, .start = 1, .ts = SEC,
						      .comm = i < 2 ? "web" : "db",
						      .uips = (const uint64_t[]){ 0x1000 }, .ud = 1 });
		p[i] = aggregator_find_process(agg, NOPID - i);
		cr_assert_null(p[i]->cgroup, "NOPID has a cgroup");
		/* set by hand, taken back before the store goes (it counts
		 * the cgroups it read itself) */
		p[i]->cgroup = cgroups[i] ? strdup(cgroups[i]) : NULL;
	}
	{
		struct selection sel = { .pids = { NOPID, NOPID - 3 }, .n_pids = 2 };

		cr_assert_eq(query_total(&sel, 0, 10 * SEC, &n), 1 + 4);
		cr_assert_eq(n, 2);
	}
	{
		struct selection sel = { .comm = "web" };

		cr_assert_eq(query_total(&sel, 0, 10 * SEC, &n), 1 + 2);
		cr_assert_eq(n, 2);
	}
	{
		struct selection sel = { .cgroup = "/system.slice/web.service" };

		cr_assert_eq(query_total(&sel, 0, 10 * SEC, &n), 1 + 2);
		cr_assert_eq(n, 2);
	}
	{
		struct selection sel = { .unit = "webx.service" };

		cr_assert_eq(query_total(&sel, 0, 10 * SEC, &n), 3);
		cr_assert_eq(n, 1);
	}
	cr_assert_eq(query_total(&select_all, 0, 10 * SEC, &n), 10);
	cr_assert_eq(n, 4);
	{
		struct selection sel = { .all = true, .visible = even_pids_only,
					 .visible_userdata = &calls };

		/* NOPID is odd: NOPID - 1 and NOPID - 3 */
		cr_assert_eq(query_total(&sel, 0, 10 * SEC, &n), 2 + 4);
		cr_assert_eq(n, 2);
	}
	{
		struct selection none = { 0 };

		cr_assert_eq(query_total(&none, 0, 10 * SEC, &n), 0);
		cr_assert_eq(n, 0);
	}
	for (uint32_t i = 0; i < 4; i++) {
		free(p[i]->cgroup);
		p[i]->cgroup = NULL;
	}
	destroy();
}

/* ---- maintenance ------------------------------------------------------ */

Test(aggregate, maintain_rolls_windows_up)
{
	struct aggregator_stats st;
	struct process *p;

	make_limits((struct aggregator_limits){ .max_processes = 100, .max_stacks = 1000,
						.max_frames = 100000, .retention_s = 100000 });
	for (uint64_t s = 1000; s < 1300; s++)
		feed_user(NOPID, 1, s * SEC, 0x1000 + s % 3, 0x2000);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(p->history.n_windows, 300);
	aggregator_maintain(agg, 1300 * SEC);
	aggregator_get_stats(agg, &st);
	cr_assert_lt(p->history.n_windows, 300);
	cr_assert_eq(st.windows, p->history.n_windows);
	cr_assert_eq(st.history_bytes, p->history.bytes);
	cr_assert_eq(st.windows_expired, 0);
	cr_assert_eq(oldest_window(p).span_s, 10);
	cr_assert(oldest_window(p).sealed);
	cr_assert_eq(p->history.newest->span_s, 1);
	cr_assert_eq(query_total(&select_all, 0, 2000 * SEC, NULL), 300);
	cr_assert_eq(history_count_of(p, 0x1000 + 1000 % 3), 100);
	destroy();
}

Test(aggregate, maintain_expires_by_retention_and_frees_exited_processes)
{
	struct aggregator_stats st;

	make_limits((struct aggregator_limits){ .max_processes = 100, .max_stacks = 1000,
						.max_frames = 100000, .retention_s = 60 });
	for (uint64_t s = 100; s < 110; s++) {
		feed_user(NOPID, 1, s * SEC, 0x1000, 0x2000);
		feed_user(NOPID - 1, 1, s * SEC, 0x1000, 0x2000);
	}
	feed_exit(NOPID, 1, 110 * SEC);
	/* within the retention the exited one stays, and answers */
	aggregator_maintain(agg, 150 * SEC);
	cr_assert_not_null(aggregator_find_process(agg, NOPID));
	cr_assert_eq(query_total(&select_all, 0, 200 * SEC, NULL), 20);
	/* past it, windows go; so does the exited process, not the live one */
	aggregator_maintain(agg, 165 * SEC);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.windows_expired, 2 * 5);
	cr_assert_eq(st.samples_expired, 2 * 5);
	cr_assert_eq(st.processes_expired, 0);
	aggregator_maintain(agg, 500 * SEC);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.windows_expired, 2 * 10);
	cr_assert_eq(st.samples_expired, 2 * 10);
	cr_assert_eq(st.processes_expired, 1);
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(st.processes_exited, 0);
	cr_assert_eq(st.windows, 0);
	cr_assert_eq(st.history_bytes, 0);
	cr_assert_eq(st.stacks, 0, "expired windows kept their stacks");
	cr_assert_null(aggregator_find_process(agg, NOPID));
	cr_assert_not_null(aggregator_find_process(agg, NOPID - 1), "a live process was freed");
	destroy();
}

/* An answer holds its processes: expired, they stay until it is released,
 * and what it holds stays readable. */
Test(aggregate, maintain_keeps_what_an_answer_holds)
{
	struct profile_parts parts;
	uint64_t first, end;
	struct aggregator_stats st;
	struct process *p;

	make_limits((struct aggregator_limits){ .max_processes = 100, .max_stacks = 1000,
						.max_frames = 100000, .retention_s = 60 });
	feed_user(NOPID, 1, 100 * SEC, 0x1000, 0x2000);
	feed_user(NOPID, 1, 101 * SEC, 0x1000, 0x2000);
	feed_exit(NOPID, 1, 102 * SEC);
	cr_assert_eq(aggregator_query(agg, &select_all, 0, 200 * SEC, &parts, &first, &end), 0);
	cr_assert_eq(parts.n, 1);
	p = parts.parts[0].process;
	aggregator_maintain(agg, 1000 * SEC);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.windows_expired, 2);
	cr_assert_eq(st.processes_expired, 0, "freed under the answer");
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(p->pid, NOPID);
	cr_assert_eq(count_of(&parts.parts[0].prof, 0x1000), 2);
	cr_assert_eq(st.stacks, 1, "the answer's stack was freed");
	aggregator_release_parts(agg, &parts);
	aggregator_maintain(agg, 1001 * SEC);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.processes_expired, 1);
	cr_assert_eq(st.processes, 0);
	cr_assert_eq(st.stacks, 0);
	cr_assert_null(aggregator_find_process(agg, NOPID));
	destroy();
}

/* Whether p's windows are ref's: the same spans, sealed or not, with the
 * same CPU totals. */
static void expect_same_windows(const struct process *p, const struct history *ref, uint64_t s)
{
	struct history_iter ia, ib;
	struct history_window wa, wb;

	history_iter_init(&ia, &p->history);
	history_iter_init(&ib, ref);
	while (history_iter_next(&ib, &wb)) {
		cr_assert(history_iter_next(&ia, &wa), "pid %u at %lu: a window missing", p->pid,
			  (unsigned long)s);
		cr_assert(wa.start_s == wb.start_s && wa.span_s == wb.span_s &&
				  wa.sealed == wb.sealed &&
				  history_window_total(&wa, PROFILE_KIND_CPU) ==
					  history_window_total(&wb, PROFILE_KIND_CPU),
			  "pid %u at %lu: [%lu,+%u) vs [%lu,+%u)", p->pid, (unsigned long)s,
			  (unsigned long)wa.start_s, wa.span_s, (unsigned long)wb.start_s, wb.span_s);
	}
	cr_assert_not(history_iter_next(&ia, &wa), "pid %u at %lu: an extra window", p->pid,
		      (unsigned long)s);
}

/* Maintenance visits a process only when something in it is due (the
 * store keeps due times in an array of their own, so that a full store's
 * pass does not read every history): whatever the order of samples, idle
 * stretches, exits and removals (which move another process into the
 * freed slot), every process holds, at every second, the windows of a
 * history maintained every second, and an exited one goes at the very
 * second its last window expires. */
Test(aggregate, maintain_visits_what_is_due_and_misses_nothing)
{
	enum { N = 48 };
	const uint64_t retention = 40, frames[] = { 0x1000, 0x2000 };
	struct stacktab *refstacks;
	struct history ref[N];
	bool started[N] = { 0 }, seen[N] = { 0 }, exited[N] = { 0 }, gone[N] = { 0 };
	uint64_t rng = 0x853c49e6748fea9bull, refkey;
	size_t n_gone = 0, n_live = 0;
	uint32_t id;

	cr_assert_eq(stacktab_new(&(struct stacktab_limits){ 16, 1000 }, &refstacks), 0);
	make_limits((struct aggregator_limits){ .max_processes = 1000, .max_stacks = 1000,
						.max_frames = 100000, .retention_s = retention });
	cr_assert_not_null(refstacks);
	cr_assert_eq(stacktab_intern(refstacks, frames, 2, 0, &id), 0);
	refkey = profile_key(id, 1, PROFILE_KIND_CPU);
	for (int i = 0; i < N; i++)
		history_init(&ref[i]);
	for (uint64_t s = 1000; s < 2600; s++) {
		for (int i = 0; i < N; i++) {
			uint32_t pid = NOPID - (uint32_t)i;
			uint64_t ts = s * SEC + rng % SEC;

			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			started[i] |= s >= 1000 + (uint64_t)i * 25;
			if (!started[i] || exited[i])
				continue;
			/* busy and idle stretches, out of step with each other */
			if ((s + (uint64_t)i * 37) / 150 % 2 == 0 && rng % 3 == 0) {
				cr_assert_eq(feed_user(pid, 1, ts, 0x1000, 0x2000), 0);
				cr_assert_eq(history_add(&ref[i], refstacks, ts, 0, refkey, 1), 0);
				seen[i] = true;
			}
			if ((rng >> 32) % 1200 == 0) {
				feed_exit(pid, 1, ts);
				exited[i] = true;
			}
		}
		aggregator_maintain(agg, s * SEC);
		for (int i = 0; i < N; i++) {
			struct process *p = aggregator_find_process(agg, NOPID - (uint32_t)i);

			if (!seen[i] || gone[i])
				continue;
			history_maintain(&ref[i], refstacks, s, retention, NULL);
			if (exited[i] && history_empty(&ref[i])) {
				cr_assert_null(p, "pid %u stayed at %lu with nothing left",
					       NOPID - (uint32_t)i, (unsigned long)s);
				gone[i] = true;
				n_gone++;
				continue;
			}
			cr_assert_not_null(p, "pid %u gone at %lu with windows left",
					   NOPID - (uint32_t)i, (unsigned long)s);
			expect_same_windows(p, &ref[i], s);
		}
	}
	for (int i = 0; i < N; i++) {
		n_live += !exited[i];
		history_release(&ref[i], refstacks);
	}
	cr_assert_gt(n_gone, 3, "too few removals to test the moves");
	cr_assert_gt(n_live, 3);
	stacktab_free(refstacks);
	destroy();
}

/* An eviction moves the last process into the freed slot: its due time
 * goes with it, so its window is sealed when due, not when the evicted
 * one's would have been. */
Test(aggregate, an_eviction_moves_a_process_with_its_due_time)
{
	struct process *b;

	make_limits((struct aggregator_limits){ .max_processes = 2, .max_stacks = 1000,
						.max_frames = 100000, .retention_s = 60 });
	feed_user(NOPID, 1, 100 * SEC, 0x1000, 0x2000);
	feed_exit(NOPID, 1, 101 * SEC);
	aggregator_maintain(agg, 106 * SEC); /* sealed: due again at 161 */
	feed_user(NOPID - 1, 1, 150 * SEC, 0x1000, 0x2000);
	aggregator_maintain(agg, 151 * SEC); /* due at 151 + HISTORY_SEAL_AFTER_S */
	feed_user(NOPID - 2, 1, 151 * SEC, 0x1000, 0x2000); /* evicts the exited one */
	cr_assert_null(aggregator_find_process(agg, NOPID));
	b = aggregator_find_process(agg, NOPID - 1);
	cr_assert_not_null(b);
	aggregator_maintain(agg, (151 + HISTORY_SEAL_AFTER_S - 1) * SEC);
	cr_assert_not(oldest_window(b).sealed, "sealed early");
	aggregator_maintain(agg, (151 + HISTORY_SEAL_AFTER_S) * SEC);
	cr_assert(oldest_window(b).sealed, "not sealed when due");
	destroy();
}

/* The store's byte count follows what its processes hold, wherever that
 * changes: once a process is gone, the figure is what it was before the
 * process came (stacks aside, whose table keeps its capacity).  Here the
 * identity (cgroup, owner) is read at exec, not at first sight (the first
 * sample said "kernel thread"), as when /proc could not be read then or the
 * process moved to another cgroup before its exec. */
Test(aggregate, memory_follows_a_process_described_at_exec)
{
	struct aggregator_stats base, st;
	uint64_t u[] = { 0x1000, 0x2000 };
	size_t base_stacks;
	uint64_t start;
	struct process *p;

	make_limits((struct aggregator_limits){ .max_processes = 100, .max_stacks = 1000,
						.max_frames = 100000, .retention_s = 60 });
	/* a process that stays, without windows: the tables have their
	 * first capacity */
	feed_user(NOPID, 1, SEC, 0x1000, 0x2000);
	aggregator_maintain(agg, 1000 * SEC);
	aggregator_get_stats(agg, &base);
	base_stacks = stacktab_memory(aggregator_stacks(agg));
	cr_assert_eq(base.windows, 0);

	start = self_start_ns();
	ingest(&(struct sample_spec){ .tgid = getpid(), .start = start, .ts = 1001 * SEC,
				      .uips = u, .ud = 2, .flags = PERFD_SAMPLE_F_KTHREAD });
	p = aggregator_find_process(agg, getpid());
	cr_assert_null(p->cgroup);
	feed_exec(getpid(), start, 1002 * SEC);
	cr_assert_not_null(p->cgroup, "exec read no cgroup: nothing to check here");
	cr_assert_not_null(p->maps);
	ingest(&(struct sample_spec){ .tgid = getpid(), .start = start, .ts = 1002 * SEC,
				      .uips = u, .ud = 2 });
	aggregator_get_stats(agg, &st);
	cr_assert_gt(st.memory_bytes, base.memory_bytes);
	feed_exit(getpid(), start, 1003 * SEC);
	aggregator_maintain(agg, 2000 * SEC);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.processes_expired, 1);
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(st.memory_bytes - stacktab_memory(aggregator_stacks(agg)),
		     base.memory_bytes - base_stacks,
		     "%zu bytes besides stacks once the process went, %zu before it came",
		     st.memory_bytes - stacktab_memory(aggregator_stacks(agg)),
		     base.memory_bytes - base_stacks);
	destroy();
}

/* ---- collectors -------------------------------------------------------- */

static int exits_seen;

static void on_exit_cb(struct collector *c, void *userdata)
{
	exits_seen++;
}

Test(aggregate, collector_counts_its_window_and_hears_the_exit)
{
	struct collector c = { .sel = select_pid(NOPID), .begin_ns = 10 * SEC, .end_ns = 20 * SEC,
			       .on_exit = on_exit_cb };
	long tick = 1000000000 / sysconf(_SC_CLK_TCK);
	uint64_t start = 777 * tick;
	const struct profile_part *part;
	struct process *p;

	make(100, 1000);
	c.sel.start_ticks = 777;
	exits_seen = 0;
	aggregator_add_collector(agg, &c);
	feed_user(NOPID, start, 9 * SEC, 0x1000, 0x2000);       /* before */
	feed_user(NOPID, start, 11 * SEC, 0x1000, 0x2000);
	feed_user(NOPID, start, 12 * SEC, 0x1100, 0x2000);
	feed_user(NOPID, start + 5 * tick, 13 * SEC, 0x1000, 0x2000); /* another process */
	feed_user(NOPID - 1, start, 13 * SEC, 0x1000, 0x2000);  /* another pid */
	feed_user(NOPID, start + 5 * tick, 21 * SEC, 0x1000, 0x2000); /* after */
	cr_assert_eq(c.samples, 2);
	cr_assert_eq(c.parts.n, 1);
	part = &c.parts.parts[0];
	cr_assert_eq(part->process->start_time_ns, start);
	cr_assert_eq(count_of(&part->prof, 0x1000), 1);
	cr_assert_eq(count_of(&part->prof, 0x1100), 1);
	cr_assert_eq(part->process->pins, 1);
	feed_exit(NOPID, start + 5 * tick, 14 * SEC);
	cr_assert_eq(exits_seen, 0);
	feed_exit(NOPID, start, 15 * SEC);
	cr_assert_eq(exits_seen, 1);
	cr_assert(c.exited);
	cr_assert_eq(c.exit_ns, 15 * SEC);
	/* the parts stay for the caller after the collector stops */
	p = part->process;
	aggregator_remove_collector(agg, &c);
	feed_user(NOPID - 1, start, 14 * SEC, 0x1000, 0x2000);
	cr_assert_eq(c.samples, 2);
	cr_assert_eq(p->pins, 1);
	aggregator_release_parts(agg, &c.parts);
	cr_assert_eq(p->pins, 0);
	cr_assert_eq(c.parts.n, 0);
	destroy();
}

/* A collector with a pid-less selection takes every process it selects,
 * a part each, and hears no exit. */
Test(aggregate, collector_by_comm_takes_several_processes)
{
	struct collector c = { .sel = { .comm = "web" }, .begin_ns = 0, .end_ns = 100 * SEC,
			       .on_exit = on_exit_cb };
	uint64_t u[] = { 0x1000 };

	make(100, 1000);
	exits_seen = 0;
	aggregator_add_collector(agg, &c);
	for (uint32_t i = 0; i < 3; i++)
		ingest(&(struct sample_spec){ .tgid = NOPID - i, .start = 1, .ts = SEC,
					      .comm = i < 2 ? "web" : "db", .uips = u, .ud = 1 });
	feed_exit(NOPID, 1, 2 * SEC);
	cr_assert_eq(c.parts.n, 2);
	cr_assert_eq(c.samples, 2);
	cr_assert_not_null(part_of(&c.parts, NOPID));
	cr_assert_not_null(part_of(&c.parts, NOPID - 1));
	cr_assert_null(part_of(&c.parts, NOPID - 2));
	cr_assert_eq(exits_seen, 0);
	cr_assert_not(c.exited);
	/* destroying the store with a collector in it releases its parts */
	destroy();
}

/* ---- hooks, exec and /proc ------------------------------------------- */

__attribute__((noinline)) static uint64_t probe_here(void)
{
	return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

__attribute__((noinline)) int aggregate_test_marker(void);
__attribute__((noinline)) int aggregate_test_marker(void)
{
	return 42;
}

Test(aggregate, user_frames_normalize_to_binary_and_symbolize)
{
	uint64_t leaf = (uint64_t)(uintptr_t)&aggregate_test_marker + 1;
	uint64_t caller = probe_here();
	struct process *p;
	char name[256];
	int seen = 0;

	make(100, 1000);
	cr_assert_eq(feed_user(getpid(), self_start_ns(), SEC, leaf, caller), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p->maps);
	cr_assert_eq(p->ns_pid, (uint32_t)getpid());
	cr_assert_eq(p->owner_uid, getuid());
	U64MAP_FOREACH(slot, &p->history.newest->prof.values) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg),
						     profile_key_stack(slot->key));

		seen++;
		cr_assert_geq(frame_module(s->frames[0]), FRAME_MODULE_FIRST);
		/* the first ask has the lane build the table */
		(void)symbolizer_frame_name(sym, s->frames[0], name, sizeof(name));
		cr_assert_eq(symbolizer_settle(sym, 30000), 0);
		cr_assert_str_eq(symbolizer_frame_name(sym, s->frames[0], name, sizeof(name)),
				 "aggregate_test_marker");
	}
	cr_assert_eq(seen, 1);
	destroy();
}

/* A process that is not the one /proc has under its pid (another start
 * time) is never described from it. */
Test(aggregate, another_incarnation_is_not_read_from_proc)
{
	struct process *p;

	make(100, 1000);
	cr_assert_eq(feed_user(getpid(), self_start_ns() + SEC, SEC, 0x1000, 0x2000), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_null(p->maps);
	cr_assert_null(p->cgroup);
	cr_assert_eq(p->owner_uid, PERFD_OWNER_NONE);
	destroy();
}

static void feed_rss_pages(uint32_t tgid, uint64_t start, uint64_t ts, uint64_t anon_pages)
{
	feed_counters(PERFD_EVENT_RSS, tgid, start, ts, anon_pages);
}

static void feed_rss(uint32_t tgid, uint64_t start, uint64_t ts)
{
	feed_rss_pages(tgid, start, ts, 10);
}

/* A child between fork and exec has its parent's mm: its first RSS
 * readings are the parent's.  After its exec, its peak and its RSS trend
 * are the new program's alone, and a reading taken before the exec but
 * drained after it (another CPU's ring position) changes neither. */
Test(aggregate, memory_starts_over_at_exec)
{
	struct query_window w = { .first_second = 9, .end_second = 18, .seconds = 9 };
	struct rss_trend t;
	struct process *p;

	make_limits((struct aggregator_limits){ .max_processes = 100, .max_stacks = 1000,
						.max_frames = 100000, .retention_s = 600 });
	/* the parent's 400 MB, then the exec, then a late reading of it */
	feed_rss_pages(NOPID, 1, 10 * SEC, 100000);
	feed_rss_pages(NOPID, 1, 10 * SEC + SEC / 2, 100000);
	feed_counters(PERFD_EVENT_EXEC, NOPID, 1, 11 * SEC + SEC / 5, 300);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_not_null(p);
	feed_rss_pages(NOPID, 1, 11 * SEC + SEC / 10, 200000);
	/* until the new program is read again, its RSS is the exec's */
	cr_assert_eq(process_rss_bytes(p), 300 * 4096, "RSS %" PRIu64 " bytes", process_rss_bytes(p));
	cr_assert_eq(process_peak_rss_bytes(p), 300 * 4096, "peak %" PRIu64 " bytes",
		     process_peak_rss_bytes(p));
	/* the new program grows 1,000 pages a second */
	for (uint64_t i = 0; i < 4; i++)
		feed_rss_pages(NOPID, 1, (13 + i) * SEC + SEC / 2, 1000 * (i + 1));
	cr_assert_eq(process_peak_rss_bytes(p), 4000 * 4096, "peak %" PRIu64 " bytes",
		     process_peak_rss_bytes(p));
	query_rss_trend(p, &w, NULL, &t);
	cr_assert_eq(t.points, 4, "%zu points", t.points);
	cr_assert_float_eq(t.bytes_per_second, 1000.0 * 4096, 1.0, "%.0f bytes/s", t.bytes_per_second);
	destroy();
}

/* This process's name as /proc gives it. */
static void self_comm(char *buf, size_t size)
{
	FILE *f = fopen("/proc/self/comm", "re");

	cr_assert_not_null(f);
	cr_assert_not_null(fgets(buf, (int)size, f));
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
}

/* A process first seen in an RSS record (no comm from BPF) gets its
 * name and identity from /proc, through one checked directory, and its
 * maps only with its first stack to name (an exec before that does not
 * read them either); one that is gone, or whose pid is another
 * incarnation's, is marked so and not looked for again, its exec
 * included. */
Test(aggregate, a_new_process_is_read_from_proc_and_a_gone_one_never_again)
{
	char comm[64];
	struct process *p;

	self_comm(comm, sizeof(comm));
	make(100, 1000);
	feed_rss(getpid(), self_start_ns(), SEC);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p);
	cr_assert_not(p->proc_gone);
	cr_assert_str_eq(p->comm, comm);
	cr_assert_not_null(p->cgroup);
	cr_assert_eq(p->owner_uid, getuid());
	cr_assert_null(p->maps, "maps read for a process with no stack to name");
	feed_exec(getpid(), self_start_ns(), SEC + SEC / 2);
	cr_assert_null(p->maps, "maps read at the exec of a process with no stack to name");
	cr_assert_eq(feed_user(getpid(), self_start_ns(), 2 * SEC,
			       (uint64_t)(uintptr_t)&feed_user + 1, (uint64_t)(uintptr_t)&feed_exit + 1), 0);
	cr_assert_not_null(p->maps);
	cr_assert_gt(p->maps->n, 0);

	feed_rss(NOPID, 1, SEC);
	p = aggregator_find_process(agg, NOPID);
	cr_assert(p->proc_gone);
	cr_assert_null(p->maps);

	/* our pid, another start: the process there is not this one */
	feed_rss(getpid(), self_start_ns() + SEC, 2 * SEC);
	p = aggregator_find_process(agg, getpid());
	cr_assert_eq(p->start_time_ns, self_start_ns() + SEC);
	cr_assert(p->proc_gone);
	feed_exec(getpid(), self_start_ns() + SEC, 3 * SEC);
	cr_assert_null(p->maps);
	cr_assert_null(p->cgroup);
	cr_assert_str_eq(p->comm, "");
	destroy();
}

/* An RSS or exec record carries the comm of the thread that sent it, which
 * may be from before an exec the daemon has not read yet (a child between
 * fork and exec has its parent's; a record drained late, an older image's):
 * /proc names a live process, and the record only one already gone. */
Test(aggregate, a_records_comm_names_only_a_process_already_gone)
{
	struct perfd_rss r = { .hdr = { .kind = PERFD_EVENT_RSS, .tgid = getpid(), .tid = getpid(),
					.timestamp_ns = SEC },
			       .page_size = 4096, .comm = "stale" };
	char comm[64];
	struct process *p;

	self_comm(comm, sizeof(comm));
	make(100, 1000);
	r.hdr.start_time_ns = self_start_ns();
	cr_assert_eq(aggregator_ingest(agg, &r, sizeof(r)), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p);
	cr_assert_str_eq(p->comm, comm, "named by an RSS record");
	r.hdr.kind = PERFD_EVENT_EXEC;
	r.hdr.timestamp_ns = 2 * SEC;
	cr_assert_eq(aggregator_ingest(agg, &r, sizeof(r)), 0);
	cr_assert_str_eq(p->comm, comm, "named by an exec record");

	r.hdr.tgid = r.hdr.tid = NOPID;
	r.hdr.kind = PERFD_EVENT_RSS;
	memcpy(r.comm, "gone", sizeof("gone"));
	cr_assert_eq(aggregator_ingest(agg, &r, sizeof(r)), 0);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_str_eq(p->comm, "gone");
	memcpy(r.comm, "gone-exec", sizeof("gone-exec"));
	r.hdr.kind = PERFD_EVENT_EXEC;
	cr_assert_eq(aggregator_ingest(agg, &r, sizeof(r)), 0);
	cr_assert_str_eq(p->comm, "gone-exec");
	destroy();
}

static int maps_changes, gone_calls, rewrites;
static uint32_t gone_pid;

static void count_maps_change(void *userdata, struct process *p)
{
	maps_changes++;
}

static void count_gone(void *userdata, const struct process *p)
{
	gone_calls++;
	gone_pid = p->pid;
}

/* Replaces the user frames by one Python frame word per Python frame. */
static size_t rewrite_python(void *userdata, const struct process *p, const struct perfd_sample *s,
			     uint64_t *frames, size_t n, size_t cap)
{
	rewrites++;
	cr_assert_geq(cap, s->python_depth);
	for (uint32_t i = 0; i < s->python_depth; i++)
		frames[i] = frame_make(FRAME_MODULE_PYTHON, 0x100 + i);
	return s->python_depth;
}

/* A sample of this process with one user frame at addr, flagged as BPF
 * flags code it found no mapping for (after make(): the start time is in
 * the aggregator's ticks). */
static struct perfd_sample *flagged_self_sample(uint64_t addr, size_t *ret_size)
{
	size_t size = sizeof(struct perfd_sample) + sizeof(uint64_t);
	struct perfd_sample *s = calloc(1, size);

	cr_assert_not_null(s);
	s->hdr = (struct perfd_event_header){ .kind = PERFD_EVENT_SAMPLE, .tgid = getpid(),
					      .tid = getpid(), .start_time_ns = self_start_ns() };
	s->page_size = 4096;
	s->value = 1;
	s->user_depth = 1;
	s->ips[0] = addr;
	s->flags = PERFD_SAMPLE_F_NEEDS_MAPS;
	*ret_size = size;
	return s;
}

Test(aggregate, needs_maps_flag_rereads_with_backoff)
{
	struct aggregator_hooks hooks = { .maps_changed = count_maps_change };
	uint64_t now = 0, u[] = { (uint64_t)(uintptr_t)&aggregate_test_marker };
	struct timespec ts;
	struct perfd_sample *s;
	size_t size;

	make(100, 1000);
	s = flagged_self_sample(u[0], &size);
	maps_changes = 0;
	aggregator_set_hooks(agg, &hooks);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * SEC + ts.tv_nsec;

	/* first sight: maps read once; a flagged sample taken before that
	 * read cannot show it missed anything */
	s->hdr.timestamp_ns = now - SEC;
	cr_assert_eq(aggregator_ingest(agg, s, size), 0);
	cr_assert_eq(maps_changes, 1);
	/* a flagged sample taken after the read re-reads, then they back off
	 * (16 ms at first) */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * SEC + ts.tv_nsec;
	s->hdr.timestamp_ns = now;
	aggregator_ingest(agg, s, size);
	cr_assert_eq(maps_changes, 2);
	s->hdr.timestamp_ns = now + 1000;
	aggregator_ingest(agg, s, size);
	cr_assert_eq(maps_changes, 2, "re-read again without waiting");
	/* without the flag, an address inside the maps reads nothing */
	s->flags = 0;
	s->hdr.timestamp_ns = now + 100 * SEC;
	aggregator_ingest(agg, s, size);
	cr_assert_eq(maps_changes, 2);
	free(s);
	destroy();
}

/* Re-reads that find the maps as they were back off; one that finds a new
 * mapping (a dlopen() in progress) starts the wait over, so the next
 * library is not missed for seconds. */
Test(aggregate, a_reread_that_finds_new_mappings_starts_the_backoff_over)
{
	struct aggregator_hooks hooks = { .maps_changed = count_maps_change };
	uint64_t t, long_wait, u[] = { (uint64_t)(uintptr_t)&aggregate_test_marker };
	struct perfd_sample *s;
	struct process *p;
	size_t size;
	void *extra;
	int fd;

	make(100, 1000);
	s = flagged_self_sample(u[0], &size);
	maps_changes = 0;
	aggregator_set_hooks(agg, &hooks);
	t = now_monotonic_ns();
	s->hdr.timestamp_ns = t;
	cr_assert_eq(aggregator_ingest(agg, s, size), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p);
	/* nothing new, five times: the wait grows */
	for (int i = 0; i < 5; i++) {
		t = MAX(t, now_monotonic_ns()) + p->maps_reread_wait_ns + 1;
		s->hdr.timestamp_ns = t;
		cr_assert_eq(aggregator_ingest(agg, s, size), 0);
	}
	cr_assert_eq(maps_changes, 6);
	long_wait = p->maps_reread_wait_ns;
	cr_assert_geq(long_wait, 8 * 16 * 1000 * 1000ull, "no back-off: %lu ns", (unsigned long)long_wait);

	/* a new executable mapping, found by the next re-read: back to 16 ms */
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	extra = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	cr_assert_neq(extra, MAP_FAILED);
	close(fd);
	t = MAX(t, now_monotonic_ns()) + long_wait + 1;
	s->hdr.timestamp_ns = t;
	cr_assert_eq(aggregator_ingest(agg, s, size), 0);
	cr_assert_eq(maps_changes, 7);
	cr_assert_leq(p->maps_reread_wait_ns, 16 * 1000 * 1000ull,
		      "a re-read that found a new mapping kept the wait at %lu ns",
		      (unsigned long)p->maps_reread_wait_ns);
	munmap(extra, 4096);
	free(s);
	destroy();
}

/* exec: the old image is gone for its describers, the new one's maps are
 * read at once; the process and its history stay. */
Test(aggregate, exec_reads_the_new_image)
{
	struct aggregator_hooks hooks = { .maps_changed = count_maps_change,
					  .process_gone = count_gone };
	uint64_t start;
	struct process *p;

	make(100, 1000);
	maps_changes = gone_calls = 0;
	aggregator_set_hooks(agg, &hooks);
	start = self_start_ns();
	feed_user(getpid(), start, SEC, 0x1000, 0x2000);
	cr_assert_eq(maps_changes, 1);
	p = aggregator_find_process(agg, getpid());
	p->jit_module = 7; /* as if a JIT map had been found */
	feed_exec(getpid(), start, 2 * SEC);
	cr_assert_eq(gone_calls, 1);
	cr_assert_eq(gone_pid, (uint32_t)getpid());
	cr_assert_eq(maps_changes, 2);
	cr_assert_eq(aggregator_find_process(agg, getpid()), p, "exec made a new process");
	cr_assert_not(p->exited);
	cr_assert_eq(p->jit_module, 0);
	cr_assert_eq(history_total(p), 1);
	/* exec of a process never seen, or of another incarnation: nothing */
	feed_exec(NOPID, 1, 2 * SEC);
	feed_exec(getpid(), start + SEC, 2 * SEC);
	cr_assert_eq(gone_calls, 1);
	cr_assert_eq(maps_changes, 2);
	destroy();
}

/* A followed process forked (struct perfd_fork). */
static void feed_fork(uint32_t tgid, uint64_t start, uint32_t parent, uint64_t parent_start,
		      uint64_t ts)
{
	struct perfd_fork f = { .hdr = { .kind = PERFD_EVENT_FORK, .tgid = tgid, .tid = tgid,
					 .timestamp_ns = ts, .start_time_ns = start },
				.comm = "child", .parent_start_time_ns = parent_start,
				.parent_tgid = parent, .page_size = 4096 };

	cr_assert_eq(aggregator_ingest(agg, &f, sizeof(f)), 0);
}

/* A tree collector decides membership once: its root (the first
 * incarnation met), each child at its fork record, and their children,
 * however short-lived (NOPID: no /proc at all); a process the fork
 * records do not lead to is not taken, even with a parent link the store
 * holds; and the exec of a member never sampled is looked at (its maps
 * read), while one of a process no tree follows is not. */
Test(aggregate, a_tree_takes_its_members_at_their_fork)
{
	struct aggregator_hooks hooks = { .maps_changed = count_maps_change };
	struct collector c = { .sel = { .tree = (uint32_t)getpid() }, .begin_ns = 0,
			       .end_ns = UINT64_MAX };
	struct process *child, *grandchild, *stranger;
	uint64_t start;

	make(100, 1000);
	start = self_start_ns();
	maps_changes = 0;
	aggregator_set_hooks(agg, &hooks);
	aggregator_add_collector(agg, &c);
	cr_assert(aggregator_follows(agg, (uint32_t)getpid(), NULL));
	feed_exec(getpid(), start, SEC);
	cr_assert_eq(maps_changes, 1, "the root's exec was not looked at");
	feed_fork(NOPID, 5, getpid(), start, SEC + 1);
	feed_fork(NOPID - 1, 6, NOPID, 5, SEC + 2);
	feed_fork(NOPID - 2, 7, NOPID, 4, SEC + 3); /* of an older incarnation */
	child = aggregator_find_process(agg, NOPID);
	grandchild = aggregator_find_process(agg, NOPID - 1);
	stranger = aggregator_find_process(agg, NOPID - 2);
	cr_assert(child && grandchild && stranger);
	cr_assert_eq(child->ppid, (uint32_t)getpid());
	cr_assert(selection_matches(agg, &c.sel, aggregator_find_process(agg, getpid())));
	cr_assert(selection_matches(agg, &c.sel, child));
	cr_assert(selection_matches(agg, &c.sel, grandchild));
	cr_assert_not(selection_matches(agg, &c.sel, stranger));
	cr_assert(aggregator_follows(agg, NOPID - 1, NULL));
	cr_assert_not(aggregator_follows(agg, NOPID - 1, &c));
	feed_exec(NOPID - 3, 8, SEC + 4); /* no tree follows it */
	cr_assert_null(aggregator_find_process(agg, NOPID - 3));
	aggregator_remove_collector(agg, &c);
	aggregator_release_parts(agg, &c.parts);
	cr_assert_not(aggregator_follows(agg, (uint32_t)getpid(), NULL));
	destroy();
}

/* The state letter of pid in /proc/PID/stat ('Z': a zombie). */
static char process_state(pid_t pid)
{
	char buf[4096];

	return stat_fields(pid, buf, sizeof(buf))[0];
}

/* A process on its way out (a zombie here) reads as no mappings at all,
 * not as an error: a re-read then keeps the maps it ran with, so that its
 * samples still to be drained are named. */
Test(aggregate, an_exiting_process_keeps_its_maps)
{
	int pipefd[2], status;
	uint64_t start;
	struct process *p;
	size_t n;
	pid_t child;
	char c;

	make(100, 1000);
	cr_assert_eq(pipe(pipefd), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		close(pipefd[1]);
		(void)!read(pipefd[0], &c, 1);
		_exit(0);
	}
	close(pipefd[0]);
	start = start_ns_of(child);
	/* the child runs this binary's code: a stack in it has maps to read */
	cr_assert_eq(feed_user((uint32_t)child, start, SEC, (uint64_t)(uintptr_t)&feed_user + 1,
			       (uint64_t)(uintptr_t)&feed_exit + 1), 0);
	p = aggregator_find_process(agg, (uint32_t)child);
	cr_assert_not_null(p);
	cr_assert_not_null(p->maps);
	n = p->maps->n;
	cr_assert_gt(n, 0);

	close(pipefd[1]);
	for (int i = 0; i < 1000 && process_state(child) != 'Z'; i++)
		usleep(1000);
	cr_assert_eq(process_state(child), 'Z');
	/* a later sample in code its maps do not cover: they are read again */
	p->maps_reread_wait_ns = 0;
	cr_assert_eq(feed_user((uint32_t)child, start, now_monotonic_ns() + SEC, 0x1000, 0x2000), 0);
	cr_assert_gt(p->maps_read_ns, SEC, "the maps were not read again");
	cr_assert_not_null(p->maps);
	cr_assert_eq(p->maps->n, n, "an exiting process's maps went from %zu to %zu", n, p->maps->n);
	cr_assert_eq(waitpid(child, &status, 0), child);
	destroy();
}

static int revisits;

/* Looks again once more 5 s after the first look, then is done. */
static void count_revisit(void *userdata, struct process *p)
{
	if (revisits++ == 0)
		p->revisit_ns = 15 * SEC;
}

/* Revisits run when due, on the caller's clock, not at a process's next
 * sample (which reaches the store a drain later): each once, a process
 * that exited never, and the answer is the earliest still to come. */
Test(aggregate, revisits_run_when_due_and_say_when_the_next_is)
{
	struct aggregator_hooks hooks = { .revisit = count_revisit };
	struct process *a, *b, *gone;

	make(100, 1000);
	aggregator_set_hooks(agg, &hooks);
	revisits = 0;
	feed_rss(1000001, 1, SEC);
	feed_rss(1000002, 1, SEC);
	feed_rss(1000003, 1, SEC);
	a = aggregator_find_process(agg, 1000001);
	b = aggregator_find_process(agg, 1000002);
	gone = aggregator_find_process(agg, 1000003);
	cr_assert_eq(aggregator_revisit(agg, 5 * SEC), 0, "nothing asked for");
	a->revisit_ns = 10 * SEC;
	b->revisit_ns = 12 * SEC;
	gone->revisit_ns = 9 * SEC;
	feed_exit(1000003, 1, 2 * SEC);
	cr_assert_eq(aggregator_revisit(agg, 5 * SEC), 10 * SEC);
	cr_assert_eq(revisits, 0, "ran before its time");
	/* a sample does not run it: the timer does */
	cr_assert_eq(feed_user(1000001, 1, 11 * SEC, 0x1000, 0x2000), 0);
	cr_assert_eq(revisits, 0, "a sample ran the revisit");
	cr_assert_eq(aggregator_revisit(agg, 11 * SEC), 12 * SEC, "a's again (15 s) or b's (12 s)");
	cr_assert_eq(revisits, 1);
	cr_assert_eq(a->revisit_ns, 15 * SEC);
	cr_assert_eq(aggregator_revisit(agg, 20 * SEC), 0);
	cr_assert_eq(revisits, 3, "a twice and b once: %d", revisits);
	cr_assert_eq(gone->revisit_ns, 9 * SEC, "an exited process was revisited");
	destroy();
}

/* Whether this process has executable memory that is no file's. */
static bool self_has_anonymous_code(void)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "re");

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, " r-xp ") || strstr(line, " rwxp "))
			found |= !strchr(line, '/') && !strstr(line, "[vdso]") &&
				 !strstr(line, "[vsyscall]");
	fclose(f);
	return found;
}

/* The JIT map the two tests below write as this process's: removed also
 * when an assertion ended the test, so that a later process given this
 * pid does not inherit it. */
static void remove_own_jit_map(void)
{
	char path[64];

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	(void)unlink(path);
}

/* The JIT map (/tmp/perf-PID.map) is looked for where there is code
 * without a file for it to name: not in a process of files only, and at
 * once when such code is mapped (here found at exec). */
Test(aggregate, a_jit_map_is_looked_for_where_code_has_no_file, .fini = remove_own_jit_map)
{
	char path[64];
	uint64_t start;
	struct process *p;
	void *code;
	FILE *f;

	cr_assert_not(self_has_anonymous_code(), "the test process already has anonymous code");
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	f = fopen(path, "we");
	cr_assert_not_null(f);
	fprintf(f, "7f0000001000 100 jitted\n");
	fclose(f);
	make(100, 1000);
	start = self_start_ns();
	cr_assert_eq(feed_user(getpid(), start, SEC, (uint64_t)(uintptr_t)&feed_user + 1,
			       (uint64_t)(uintptr_t)&feed_exit + 1), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p->maps);
	cr_assert_eq(p->jit_module, 0, "looked for a JIT map with no code to name");
	code = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(code, MAP_FAILED);
	feed_exec(getpid(), start, 2 * SEC);
	cr_assert_gt(p->jit_module, 0, "no JIT map found for anonymous code");
	munmap(code, 4096);
	unlink(path);
	destroy();
}

/* process_gone: at exit, at a reused pid and at eviction, once each. */
Test(aggregate, process_gone_is_told_once_per_process)
{
	struct aggregator_hooks hooks = { .process_gone = count_gone };
	struct aggregator_stats st;

	make(2, 1000);
	gone_calls = 0;
	aggregator_set_hooks(agg, &hooks);
	feed_user(NOPID, 1, SEC, 0x1000, 0x2000);
	feed_exit(NOPID, 1, 2 * SEC);
	cr_assert_eq(gone_calls, 1);
	feed_exit(NOPID, 1, 2 * SEC); /* the exit of a process seen exiting */
	cr_assert_eq(gone_calls, 1);
	feed_user(NOPID - 1, 1, 3 * SEC, 0x1000, 0x2000);
	feed_user(NOPID - 1, 2, 4 * SEC, 0x1000, 0x2000); /* its pid reused */
	cr_assert_eq(gone_calls, 2);
	cr_assert_eq(gone_pid, NOPID - 1);
	/* NOPID (exited) and the old NOPID - 1 (exited) were evicted for the
	 * new incarnation and this one: told already, not again */
	feed_user(NOPID - 2, 1, 5 * SEC, 0x1000, 0x2000);
	cr_assert_eq(gone_calls, 2);
	/* a live one evicted is told */
	feed_user(NOPID - 3, 1, 6 * SEC, 0x1000, 0x2000);
	cr_assert_eq(gone_calls, 3);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.processes_evicted, 3);
	destroy();
}

Test(aggregate, python_samples_go_through_the_rewrite_hook)
{
	struct aggregator_hooks hooks = { .rewrite_user_frames = rewrite_python };
	uint64_t u[] = { 0x1000, 0x2000 }, k[] = { 0xffffffff81000010ULL };
	struct process *p;
	const struct stack *s = NULL;

	make(100, 1000);
	rewrites = 0;
	aggregator_set_hooks(agg, &hooks);
	ingest(&(struct sample_spec){ .tgid = NOPID, .start = 1, .ts = SEC, .kips = k, .kd = 1,
				      .uips = u, .ud = 2 });
	cr_assert_eq(rewrites, 0, "a sample without Python frames was rewritten");
	ingest(&(struct sample_spec){ .tgid = NOPID, .start = 1, .ts = SEC, .kips = k, .kd = 1,
				      .uips = u, .ud = 2, .python_depth = 3,
				      .flags = PERFD_SAMPLE_F_PYTHON });
	cr_assert_eq(rewrites, 1);
	p = aggregator_find_process(agg, NOPID);
	U64MAP_FOREACH(slot, &p->history.newest->prof.values) {
		const struct stack *x = stacktab_get(aggregator_stacks(agg),
						     profile_key_stack(slot->key));

		if (x->depth == 4)
			s = x;
	}
	cr_assert_not_null(s, "no stack of the kernel frame and three Python frames");
	cr_assert_eq(s->kernel_depth, 1);
	cr_assert_eq(frame_module(s->frames[0]), FRAME_MODULE_KERNEL);
	for (int i = 1; i < 4; i++) {
		cr_assert_eq(frame_module(s->frames[i]), FRAME_MODULE_PYTHON);
		cr_assert_eq(frame_address(s->frames[i]), 0x100 + (uint64_t)(i - 1));
	}
	destroy();
}

static bool frames_read;
static unsigned frames_waits;

/* The hook's reads: done or not (frames_read). */
static bool python_frames_wait(void *userdata, const struct process *p,
			       const struct perfd_sample *s)
{
	frames_waits++;
	return !frames_read;
}

/* One Python frame word per Python frame: 0x100 + i when read, 0x999
 * when not. */
static size_t rewrite_python_if_read(void *userdata, const struct process *p,
				     const struct perfd_sample *s, uint64_t *frames, size_t n,
				     size_t cap)
{
	for (uint32_t i = 0; i < s->python_depth; i++)
		frames[i] = frame_make(FRAME_MODULE_PYTHON, frames_read ? 0x100 + i : 0x999);
	return s->python_depth;
}

/* An aggregator whose hooks read Python frames (not read yet). */
static void make_with_frame_reads(void)
{
	static const struct aggregator_hooks hooks = { .rewrite_user_frames = rewrite_python_if_read,
						       .frames_wait = python_frames_wait,
						       .process_gone = count_gone };

	make(100, 1000);
	aggregator_set_hooks(agg, &hooks);
	frames_read = false;
	frames_waits = 0;
	gone_calls = 0;
}

/* A sample of NOPID at ts with two Python frames (python_depth 0: none). */
static void ingest_python(uint64_t ts, uint32_t python_depth)
{
	uint64_t u[] = { 0x1000, 0x2000 }, k[] = { 0xffffffff81000010ULL };

	ingest(&(struct sample_spec){ .tgid = NOPID, .start = 1, .ts = ts, .kips = k, .kd = 1,
				      .uips = u, .ud = 2, .python_depth = python_depth,
				      .flags = python_depth ? PERFD_SAMPLE_F_PYTHON : 0 });
}

/* An aggregator as make_with_frame_reads() makes it, and two samples of
 * NOPID from base on waiting for their frames: NOPID's process. */
static struct process *two_samples_waiting(uint64_t base)
{
	struct process *p;

	make_with_frame_reads();
	for (int i = 0; i < 2; i++)
		ingest_python(base + i, 2);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(p->n_parked, 2);
	return p;
}

/* The samples in prof whose first frame past the kernel's is the Python
 * frame word addr. */
static uint64_t count_of_python(const struct profile_values *prof, uint64_t addr)
{
	uint64_t n = 0;

	U64MAP_FOREACH(slot, &prof->values) {
		const struct stack *x = stacktab_get(aggregator_stacks(agg),
						     profile_key_stack(slot->key));

		if (x && x->depth > x->kernel_depth &&
		    x->frames[x->kernel_depth] == frame_make(FRAME_MODULE_PYTHON, addr))
			n += slot->value;
	}
	return n;
}

static uint64_t python_samples(const struct process *p, uint64_t addr)
{
	return history_sum(p, count_of_python, addr);
}

/* A sample whose interpreter frames are being read (hooks.frames_wait)
 * waits for the reads: it goes in, named, once they are back
 * (aggregator_frames_read), and nothing is lost; a read not back within
 * FRAMES_WAIT_NS lets the samples in at maintenance, unread, and counted.
 * A sample without Python frames never asks. */
Test(aggregate, python_samples_wait_for_their_frames_to_be_read)
{
	/* now: maintenance expires what is older than the retention */
	uint64_t base = now_monotonic_ns();
	struct aggregator_stats st;
	struct process *p;

	make_with_frame_reads();
	ingest_python(base, 0);
	cr_assert_eq(frames_waits, 0, "a sample without Python frames asked to wait");
	for (int i = 0; i < 3; i++)
		ingest_python(base + i, 2);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(p->n_parked, 3, "%zu samples wait", p->n_parked);
	cr_assert_eq(python_samples(p, 0x999) + python_samples(p, 0x100), 0,
		     "a sample went in before its frames were read");
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.samples_waited_for_frames, 3);

	frames_read = true;
	aggregator_frames_read(agg, p);
	cr_assert_eq(p->n_parked, 0);
	cr_assert_eq(python_samples(p, 0x100), 3, "the samples that waited went in named");
	cr_assert_eq(python_samples(p, 0x999), 0);

	/* a read that does not come back */
	frames_read = false;
	for (int i = 0; i < 2; i++)
		ingest_python(base + 10 + i, 2);
	cr_assert_eq(p->n_parked, 2);
	aggregator_maintain(agg, now_monotonic_ns() + FRAMES_WAIT_NS / 2);
	cr_assert_eq(p->n_parked, 2, "let in before FRAMES_WAIT_NS");
	aggregator_maintain(agg, now_monotonic_ns() + FRAMES_WAIT_NS);
	cr_assert_eq(p->n_parked, 0, "still waiting past FRAMES_WAIT_NS");
	cr_assert_eq(python_samples(p, 0x999), 2, "the late samples were lost");
	/* nor does the next, until the read is back */
	ingest_python(base + 20, 2);
	cr_assert_eq(p->n_parked, 0, "a sample waited for a read given up on");
	cr_assert_eq(python_samples(p, 0x999), 3);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.frames_waits_late, 1);
	cr_assert_eq(st.samples_waited_for_frames, 5);
	aggregator_frames_read(agg, p);
	ingest_python(base + 30, 2);
	cr_assert_eq(p->n_parked, 1, "once the read was back, a sample did not wait again");
	destroy();
}

/* A process's exit waits behind its samples waiting for their frames: it
 * ends after them (a snapshot of it ends with them), and the hooks are
 * told it is gone only once they are in. */
Test(aggregate, an_exit_goes_after_the_samples_waiting_for_their_frames)
{
	uint64_t base = now_monotonic_ns();
	struct aggregator_stats st;
	struct process *p;

	p = two_samples_waiting(base);
	feed_exit(NOPID, 1, base + 5);
	cr_assert_not(p->exited, "the exit went before the samples waiting for their frames");
	cr_assert_eq(gone_calls, 0, "the hooks forgot the process its waiting samples need");
	frames_read = true;
	aggregator_frames_read(agg, p);
	cr_assert(p->exited, "the exit did not follow its samples");
	cr_assert_eq(gone_calls, 1);
	cr_assert_eq(python_samples(p, 0x100), 2, "the samples that waited went in named");
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.exits_waited, 1);
	destroy();
}

/* The reads of an image an exec replaced are of memory that is gone: the
 * samples that waited for them go in at the exec, unread, and the new
 * image's samples wait for reads of their own. */
Test(aggregate, an_exec_lets_in_the_old_images_samples_unread)
{
	uint64_t base = now_monotonic_ns();
	struct process *p;

	p = two_samples_waiting(base);
	feed_exec(NOPID, 1, base + 5);
	cr_assert_eq(p->n_parked, 0, "the old image's samples still wait after its exec");
	cr_assert_eq(python_samples(p, 0x999), 2, "the old image's samples were lost");
	cr_assert_eq(gone_calls, 1, "the hooks were not told the old image is gone");
	ingest_python(base + 10, 2);
	cr_assert_eq(p->n_parked, 1, "the new image's sample did not wait for its frames");
	destroy();
}

/* ---- owners: fair eviction, snapshots' shares ------------------------ */

/* Samples say their owner only when newer than what /proc said at first
 * sight (now): these tests' seconds start after now. */
static uint64_t owner_epoch_s(void)
{
	return now_monotonic_ns() / SEC + 10;
}

static int feed_owned(uint32_t pid, uint32_t owner, uint64_t ts, uint64_t leaf)
{
	uint64_t u[] = { leaf, 0x2000 };

	return ingest(&(struct sample_spec){ .tgid = pid, .start = 1, .ts = ts, .uips = u, .ud = 2,
					     .owner = owner });
}

/* User B's process ran early and exited; then user C churns processes
 * with ever new stacks under a small memory cap.  C is past its share of
 * the store, so the cap takes C's own oldest windows, and B's history,
 * the oldest of all, stays whole.  A store that drops the oldest windows
 * of all drops B's first. */
Test(aggregate, memory_cap_takes_the_churning_owners_history_not_another_users)
{
	const size_t cap = 512 * 1024;
	const uint32_t b = 1000, c = 2000;
	uint64_t t0 = owner_epoch_s(), leaf = 0x100000, fed_b = 0;
	struct aggregator_stats st;
	struct process *pb;

	make_limits((struct aggregator_limits){ .max_processes = 1000, .max_stacks = 1000000,
						.max_frames = 10000000, .max_memory_bytes = cap,
						.retention_s = 100000 });
	for (uint64_t s = 0; s < 5; s++)
		for (uint64_t i = 0; i < 20; i++, fed_b++)
			cr_assert_eq(feed_owned(NOPID, b, (t0 + s) * SEC + i * 1000, leaf++), 0);
	feed_exit(NOPID, 1, (t0 + 5) * SEC);
	/* C: a new process every 5 s, 100 new stacks a second, 300 s */
	for (uint64_t s = 5; s < 305; s++)
		for (uint64_t i = 0; i < 100; i++) {
			uint32_t pid = NOPID - 1 - (uint32_t)(s / 5);

			cr_assert_eq(feed_owned(pid, c, (t0 + s) * SEC + i * 1000, leaf++), 0);
			if (i == 99 && s % 5 == 4)
				feed_exit(pid, 1, (t0 + s) * SEC + 999999);
			aggregator_get_stats(agg, &st);
			cr_assert_leq(st.memory_bytes, cap);
		}
	aggregator_get_stats(agg, &st);
	cr_assert_gt(st.windows_evicted, 0, "the cap was never reached");
	cr_assert_gt(st.evictions_memory, 0);
	cr_assert_gt(st.evictions_own + st.evictions_heaviest, 0);
	pb = aggregator_find_process(agg, NOPID);
	cr_assert_not_null(pb, "B's process was evicted for C's churn");
	cr_assert_eq(pb->owner_uid, b);
	cr_assert_eq(history_total(pb), fed_b, "B lost %lu of its %lu samples to C's churn",
		     (unsigned long)(fed_b - history_total(pb)), (unsigned long)fed_b);
	destroy();
}

/* The process limit takes a slot from the owner with the most processes:
 * B's two exited processes, the first to exit, stay while C's churn
 * evicts C's own. */
Test(aggregate, process_limit_takes_a_slot_from_the_owner_with_the_most)
{
	uint64_t t0 = owner_epoch_s();
	struct aggregator_stats st;

	make(8, 100000);
	for (uint32_t i = 0; i < 2; i++) {
		cr_assert_eq(feed_owned(NOPID - i, 1000, (t0 + i) * SEC, 0x1000), 0);
		feed_exit(NOPID - i, 1, (t0 + i) * SEC + 1);
	}
	for (uint32_t i = 0; i < 40; i++) {
		cr_assert_eq(feed_owned(NOPID - 10 - i, 2000, (t0 + 10 + i) * SEC, 0x1000), 0);
		feed_exit(NOPID - 10 - i, 1, (t0 + 10 + i) * SEC + 1);
	}
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.processes, 8);
	cr_assert_eq(st.evictions_process_limit, 34);
	cr_assert_not_null(aggregator_find_process(agg, NOPID), "B's process went for C's");
	cr_assert_not_null(aggregator_find_process(agg, NOPID - 1), "B's process went for C's");
	cr_assert_not_null(aggregator_find_process(agg, NOPID - 10 - 39), "C's newest went");
	destroy();
}

/* The stack limit, too, takes from the owner past its share: C's new
 * stacks drop C's own oldest windows, not B's. */
Test(aggregate, stack_limit_takes_the_admitting_owners_windows_past_its_share)
{
	uint64_t t0 = owner_epoch_s(), leaf = 0x100000;
	struct process *pb;

	make(100, 200);
	for (uint64_t s = 0; s < 3; s++)
		for (int i = 0; i < 10; i++)
			cr_assert_eq(feed_owned(NOPID, 1000, (t0 + s) * SEC + (uint64_t)i, leaf++), 0);
	for (uint64_t s = 3; s < 60; s++)
		for (int i = 0; i < 10; i++)
			cr_assert_eq(feed_owned(NOPID - 1, 2000, (t0 + s) * SEC + (uint64_t)i, leaf++), 0);
	pb = aggregator_find_process(agg, NOPID);
	cr_assert_not_null(pb);
	cr_assert_eq(history_total(pb), 30, "B's windows went for C's stacks");
	destroy();
}

/* A user's snapshots pin at most a quarter of the process slots: past
 * it, the samples of processes not yet in them are left out, counted,
 * and the limit met is named.  Root's are not limited. */
Test(aggregate, a_users_snapshots_pin_at_most_their_share_of_processes)
{
	struct collector user = { .sel = { .all = true }, .uid = 1000, .end_ns = UINT64_MAX };
	struct collector root = { .sel = { .all = true }, .uid = 0, .end_ns = UINT64_MAX };
	uint64_t t0 = owner_epoch_s();
	struct aggregator_stats st;

	make(8, 100000); /* a share of 2 */
	aggregator_add_collector(agg, &user);
	aggregator_add_collector(agg, &root);
	for (uint32_t i = 0; i < 5; i++)
		cr_assert_eq(feed_owned(NOPID - i, 1000, (t0 + i) * SEC, 0x1000), 0);
	cr_assert_eq(feed_owned(NOPID, 1000, (t0 + 6) * SEC, 0x1000), 0); /* one it has */
	cr_assert_eq(user.parts.n, 2);
	cr_assert_eq(user.samples, 3);
	cr_assert_eq(user.samples_refused, 3);
	cr_assert_eq(user.refused_by, COLLECTOR_REFUSED_PINS);
	cr_assert_eq(root.parts.n, 5);
	cr_assert_eq(root.samples_refused, 0);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.snapshot_samples_refused_pins, 3);
	aggregator_remove_collector(agg, &user);
	aggregator_release_parts(agg, &user.parts);
	destroy();
}

/* What snapshots collect counts in the store's memory, and a user's
 * snapshots hold at most a quarter of it: past it their samples are left
 * out (the history keeps them). */
Test(aggregate, a_users_snapshots_hold_at_most_their_share_of_memory)
{
	const size_t cap = 512 * 1024;
	struct collector user = { .sel = { .all = true }, .uid = 1000, .end_ns = UINT64_MAX };
	uint64_t t0 = owner_epoch_s(), leaf = 0x100000;
	struct aggregator_stats st;

	make_limits((struct aggregator_limits){ .max_processes = 100, .max_stacks = 1000000,
						.max_frames = 10000000, .max_memory_bytes = cap,
						.retention_s = 100000 });
	aggregator_add_collector(agg, &user);
	for (uint64_t i = 0; i < 20000; i++)
		cr_assert_eq(feed_owned(NOPID, 1000, t0 * SEC + i * 10000, leaf++), 0);
	aggregator_get_stats(agg, &st);
	cr_assert_gt(user.samples_refused, 0, "the snapshot held %zu bytes", user.bytes);
	cr_assert_eq(user.refused_by, COLLECTOR_REFUSED_MEMORY);
	/* checked before each sample: one more can double its map */
	cr_assert_leq(user.bytes, 2 * cap / AGG_SNAPSHOT_MEMORY_SHARE);
	cr_assert_eq(st.snapshot_bytes, user.bytes, "the snapshot is not counted in the store");
	cr_assert_leq(st.memory_bytes, cap);
	cr_assert_eq(st.snapshot_samples_refused_memory, user.samples_refused);
	aggregator_remove_collector(agg, &user);
	aggregator_release_parts(agg, &user.parts);
	destroy();
}

/* A probe that waits for gate_fd to be readable: a FUSE server that does
 * not answer, until the test answers for it. */
static int gate_fd = -1;
static void (*real_probe)(struct module_probe *p);

static atomic_int probes_entered;

static void gated_probe(struct module_probe *p)
{
	struct pollfd pfd = { .fd = gate_fd, .events = POLLIN };

	atomic_fetch_add(&probes_entered, 1);
	(void)poll(&pfd, 1, 10000);
	real_probe(p);
}

/* agg and sym, with every probe gated (gated_probe) and the maps lane
 * started. */
static void make_gated(size_t max_processes)
{
	struct module_registry modules;

	gate_fd = eventfd(0, EFD_CLOEXEC);
	cr_assert_geq(gate_fd, 0);
	cr_assert_eq(symbolizer_new(&(struct symbolizer_opts){ .demangle = true }, &sym, NULL), 0);
	modules = symbolizer_modules(sym);
	real_probe = modules.probe;
	modules.probe = gated_probe;
	cr_assert_eq(aggregator_new(&(struct aggregator_limits){ .max_processes = max_processes,
								 .max_stacks = 1000,
								 .max_frames = 1000000 },
				    &modules, &agg), 0);
	cr_assert_eq(aggregator_start_maps_lane(agg), 0);
}

/* Takes the lane's jobs back until none is out (10 s at most). */
static void complete_all(struct aggregator_stats *st)
{
	aggregator_get_stats(agg, st);
	for (int i = 0; i < 1000 && st->module_probes_pending; i++) {
		struct pollfd pfd = { .fd = aggregator_fd(agg), .events = POLLIN };

		(void)poll(&pfd, 1, 10);
		aggregator_complete(agg);
		aggregator_get_stats(agg, st);
	}
	cr_assert_eq(st->module_probes_pending, 0, "the lane's jobs came back");
}

/* Waits for the lane to give the store its jobs back until p has none. */
static void complete_probes(struct process *p)
{
	for (int i = 0; i < 500 && p->probe_job; i++) {
		struct pollfd pfd = { .fd = aggregator_fd(agg), .events = POLLIN };

		(void)poll(&pfd, 1, 10);
		aggregator_complete(agg);
	}
	cr_assert_null(p->probe_job);
}

/* With the lane, the files a process maps are identified off the loop
 * (profile/procread.c): ingesting its first sample returns while the probe hangs,
 * the sample waits rather than be named without its module, and goes in
 * named from its binary once the probe answers. */
Test(aggregate, mapped_files_are_identified_on_the_lane_and_samples_wait_for_them)
{
	uint64_t leaf = (uint64_t)(uintptr_t)&aggregate_test_marker + 1;
	uint64_t caller = probe_here();
	struct aggregator_stats st;
	struct process *p;
	uint64_t t0, one = 1;
	int seen = 0;

	make_gated(100);
	t0 = now_monotonic_ns();
	cr_assert_eq(feed_user(getpid(), self_start_ns(), SEC, leaf, caller), 0);
	cr_assert_lt(now_monotonic_ns() - t0, 2 * SEC, "the loop did not wait for the probe");
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p->maps);
	cr_assert_not_null(p->probe_job, "the binaries are being identified on the lane");
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.samples_waited_for_maps, 1);
	cr_assert(!p->history.newest || p->history.newest->prof.values.count == 0);
	aggregator_complete(agg); /* nothing back yet */
	cr_assert_not_null(p->probe_job);
	cr_assert_eq(write(gate_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	complete_probes(p);
	U64MAP_FOREACH(slot, &p->history.newest->prof.values) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg),
						     profile_key_stack(slot->key));

		seen++;
		cr_assert_geq(frame_module(s->frames[0]), FRAME_MODULE_FIRST);
	}
	cr_assert_eq(seen, 1);
	destroy();
	close(gate_fd);
}

/* A process freed while its files are being probed: the job comes back
 * to nobody, and what it opened is closed. */
Test(aggregate, a_probe_outliving_its_process_leaks_nothing)
{
	uint64_t leaf = (uint64_t)(uintptr_t)&aggregate_test_marker + 1;
	struct symbolizer_stats sst;
	struct process *p;
	uint64_t one = 1;

	make_gated(1);
	cr_assert_eq(feed_user(getpid(), self_start_ns(), SEC, leaf, leaf), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p->probe_job);
	/* another process takes its place (max_processes 1): it exits first */
	feed_exit(getpid(), self_start_ns(), 2 * SEC);
	cr_assert_eq(feed(NOPID, 1, 3 * SEC, NULL, 0, NULL, 0, 0), 0);
	cr_assert_null(aggregator_find_process(agg, getpid()));
	cr_assert_eq(write(gate_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	for (int i = 0; i < 200; i++) {
		struct pollfd pfd = { .fd = aggregator_fd(agg), .events = POLLIN };

		(void)poll(&pfd, 1, 10);
		aggregator_complete(agg);
	}
	symbolizer_get_stats(sym, &sst);
	cr_assert_eq(sst.fds_open, 0, "nothing taken by a process gone");
	destroy();
	close(gate_fd);
}

/* A probe that does not come back within MODPROBE_WAIT_NS is given up
 * on: the samples that waited go in (their frames in the file not yet
 * identified stay unnamed, never another module's), and the job, when it
 * returns at last, is only released. */
Test(aggregate, a_probe_that_does_not_answer_is_given_up_on)
{
	uint64_t leaf = (uint64_t)(uintptr_t)&aggregate_test_marker + 1;
	struct symbolizer_stats sst;
	struct aggregator_stats st;
	struct process *p;
	uint64_t one = 1, total = 0;

	make_gated(100);
	cr_assert_eq(feed_user(getpid(), self_start_ns(), SEC, leaf, leaf), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p->probe_job);
	cr_assert_eq(feed_user(getpid(), self_start_ns(), now_monotonic_ns() + 2 * SEC, leaf, leaf),
		     0);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.module_probes_late, 1);
	cr_assert_null(p->probe_job);
	U64MAP_FOREACH(slot, &p->history.newest->prof.values) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg),
						     profile_key_stack(slot->key));

		total++;
		cr_assert_lt(frame_module(s->frames[0]), FRAME_MODULE_FIRST,
			     "not named from a module it was not identified as");
	}
	cr_assert_geq(total, 1);
	cr_assert_eq(p->late_job != NULL, true, "still the process's, for what it finds");
	cr_assert_eq(write(gate_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	for (int i = 0; i < 500 && p->late_job; i++) {
		struct pollfd pfd = { .fd = aggregator_fd(agg), .events = POLLIN };

		(void)poll(&pfd, 1, 10);
		aggregator_complete(agg);
	}
	cr_assert_null(p->late_job);
	/* back at last: what it found names the maps from now on */
	symbolizer_get_stats(sym, &sst);
	cr_assert_geq(sst.fds_open, 1);
	for (size_t i = 0; i < p->maps->n; i++)
		if (p->maps->maps[i].start <= leaf && leaf < p->maps->maps[i].end)
			cr_assert_geq(p->map_modules[i], FRAME_MODULE_FIRST);
	destroy();
	close(gate_fd);
}

/* A process whose every sample waits for its probe may send no other (it
 * blocks, or exits): the maintenance pass gives up on the probe as well,
 * and the sample that waited goes in. */
Test(aggregate, a_probe_that_does_not_answer_is_given_up_on_without_another_sample)
{
	uint64_t leaf = (uint64_t)(uintptr_t)&aggregate_test_marker + 1;
	struct aggregator_stats st;
	struct process *p;
	uint64_t one = 1;

	make_gated(100);
	cr_assert_eq(feed_user(getpid(), self_start_ns(), now_monotonic_ns(), leaf, leaf), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p->probe_job);
	aggregator_maintain(agg, now_monotonic_ns());
	cr_assert_not_null(p->probe_job, "not given up on before its time");
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.module_probes, 1);
	cr_assert_eq(st.module_probes_pending, 1);
	aggregator_maintain(agg, now_monotonic_ns() + 2 * SEC);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.module_probes_late, 1);
	cr_assert_eq(st.samples_waited_for_maps, 1);
	cr_assert_null(p->probe_job);
	cr_assert_eq(p->n_parked, 0, "the sample that waited went in");
	cr_assert_not_null(p->history.newest);
	cr_assert_eq(p->history.newest->prof.values.count, 1);
	cr_assert_eq(write(gate_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	complete_all(&st); /* the late job is released when it comes back */
	destroy();
	close(gate_fd);
}

struct jit_recheck {
	uint64_t start, code;
	int r1, r2;
};

/* Two samples in the anonymous code: the first looks for the map again
 * (the look is due), the second finds the look out. */
static void feed_in_jit_code(void *arg)
{
	struct jit_recheck *c = arg;
	uint64_t ts = now_monotonic_ns();

	c->r1 = feed_user(getpid(), c->start, ts, c->code + 0x10, (uint64_t)(uintptr_t)&feed_user + 1);
	c->r2 = feed_user(getpid(), c->start, ts + 1, c->code + 0x10,
			  (uint64_t)(uintptr_t)&feed_user + 1);
}

/* The JIT map is a file in the process's root, on whatever it mounted
 * there: it is opened on the lane, with the process's probes, never on
 * the loop; the samples in its code wait for it and go in named by it. */
Test(aggregate, a_jit_map_is_opened_on_the_lane_and_samples_in_its_code_wait_for_it,
     .fini = remove_own_jit_map)
{
	struct jit_recheck c = { .start = 0 };
	struct aggregator_stats before, after;
	uint64_t one = 1;
	struct process *p;
	char path[64];
	void *code;
	FILE *f;

	make_gated(100);
	cr_assert_eq(write(gate_fd, &one, sizeof(one)), (ssize_t)sizeof(one)); /* files: at once */
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	unlink(path);
	code = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(code, MAP_FAILED);
	c.code = (uint64_t)(uintptr_t)code;
	c.start = self_start_ns();
	/* the first look, with the maps: no map yet */
	cr_assert_eq(feed_user(getpid(), c.start, now_monotonic_ns(), c.code + 0x10,
			       (uint64_t)(uintptr_t)&feed_user + 1), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p);
	complete_probes(p);
	cr_assert_eq(p->jit_module, 0, "a JIT module with no map");
	/* the JIT writes its map */
	f = fopen(path, "we");
	cr_assert_not_null(f);
	fprintf(f, "%" PRIx64 " 100 jitted_fn\n", c.code);
	fclose(f);
	aggregator_get_stats(agg, &before);
	p->jit_checked_ns = 0; /* JIT_MAP_RECHECK_NS later */
	cr_assert_eq(call_reading_no_file(feed_in_jit_code, &c), 0,
		     "the loop opened or read a file looking for the JIT map");
	cr_assert_eq(c.r1, 0);
	cr_assert_eq(c.r2, 0);
	cr_assert_not_null(p->probe_job, "no look on the lane");
	aggregator_get_stats(agg, &after);
	cr_assert_eq(after.samples_waited_for_maps, before.samples_waited_for_maps + 1,
		     "the sample after the look did not wait for it");
	complete_probes(p);
	cr_assert_gt(p->jit_module, 0, "the lane's look found no map");
	cr_assert_eq(history_sum(p, count_of_frame, frame_make(p->jit_module, c.code + 0x10)), 1,
		     "the sample that waited is not named by the map");
	munmap(code, 4096);
	unlink(path);
	destroy();
	close(gate_fd);
}

/* A probe out when its process exits comes back after the hooks were told
 * the process is gone: they are not told of its maps again (the unwinder
 * and Python would describe a process no one will ever tell them is gone). */
Test(aggregate, a_probe_back_after_the_exit_tells_the_hooks_nothing)
{
	struct aggregator_hooks hooks = { .maps_changed = count_maps_change,
					  .process_gone = count_gone };
	uint64_t leaf = (uint64_t)(uintptr_t)&aggregate_test_marker + 1, one = 1, start;
	struct process *p;

	make_gated(100);
	maps_changes = gone_calls = 0;
	aggregator_set_hooks(agg, &hooks);
	start = self_start_ns();
	cr_assert_eq(feed_user(getpid(), start, now_monotonic_ns(), leaf, leaf), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p->probe_job, "no probe on the lane");
	cr_assert_eq(maps_changes, 0, "told before the probe was back");
	feed_exit(getpid(), start, now_monotonic_ns());
	cr_assert_eq(gone_calls, 1);
	cr_assert_eq(write(gate_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	complete_probes(p);
	cr_assert_eq(maps_changes, 0, "the hooks were told of the maps of a process gone");
	destroy();
	close(gate_fd);
}

/* The module id a process's maps give addr, MODULE_NONE when none. */
static uint16_t module_at(const struct process *p, uint64_t addr)
{
	for (size_t i = 0; p->maps && i < p->maps->n; i++)
		if (p->maps->maps[i].start <= addr && addr < p->maps->maps[i].end)
			return p->map_modules[i];
	return MODULE_NONE;
}

/* Whether all of p's file mappings are on one device. */
static bool one_device(const struct process *p)
{
	const struct procmap *first = NULL;

	for (size_t i = 0; i < p->maps->n; i++) {
		const struct procmap *m = &p->maps->maps[i];

		if (!m->inode || m->path[0] != '/')
			continue;
		if (!first)
			first = m;
		else if (m->dev_major != first->dev_major || m->dev_minor != first->dev_minor)
			return false;
	}
	return true;
}

/* A probe in one file for long makes the file's device slow: another
 * process's files there are not probed (on the lane, where each would
 * hold a lane the same way, nor on the loop) until that probe is back;
 * then they are identified at the next read. */
Test(aggregate, a_device_whose_probe_hangs_is_not_probed_again_until_it_answers)
{
	uint64_t leaf = (uint64_t)(uintptr_t)&aggregate_test_marker + 1;
	struct aggregator_stats st;
	struct process *child_p;
	int pipefd[2], status;
	uint64_t one = 1, start;
	pid_t child;
	char c;

	make_gated(100);
	cr_assert_eq(pipe(pipefd), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		close(pipefd[1]);
		(void)!read(pipefd[0], &c, 1);
		_exit(0);
	}
	close(pipefd[0]);
	start = start_ns_of(child);
	cr_assert_eq(feed_user(getpid(), self_start_ns(), now_monotonic_ns(), leaf, leaf), 0);
	cr_assert_not_null(aggregator_find_process(agg, getpid())->probe_job);
	/* the lane in its first file for longer than MODPROBE_WAIT_NS */
	for (int i = 0; i < 1000 && !atomic_load(&probes_entered); i++)
		usleep(1000);
	usleep(MODPROBE_WAIT_NS / 1000 + 100 * 1000);
	cr_assert_eq(feed_user((uint32_t)child, start, now_monotonic_ns(), leaf, leaf), 0);
	child_p = aggregator_find_process(agg, (uint32_t)child);
	cr_assert_not_null(child_p);
	cr_assert_not_null(child_p->maps);
	cr_assert_eq(module_at(child_p, leaf), MODULE_NONE);
	cr_assert(child_p->maps_partial, "read again once the device answers");
	aggregator_get_stats(agg, &st);
	/* nothing on that device was planned for the child: if all its
	 * files are there (they are on one file system here), no job */
	if (one_device(child_p))
		cr_assert_eq(st.module_probes, 1, "a device that hangs was probed again");
	else
		cr_assert_leq(st.module_probes, 2);
	cr_assert_eq(write(gate_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	complete_all(&st);
	child_p->maps_reread_wait_ns = 0;
	cr_assert_eq(feed_user((uint32_t)child, start, now_monotonic_ns(), leaf, leaf), 0);
	if (child_p->probe_job)
		complete_probes(child_p);
	cr_assert_geq(module_at(child_p, leaf), FRAME_MODULE_FIRST, "identified once it answers");
	close(pipefd[1]);
	cr_assert_eq(waitpid(child, &status, 0), child);
	destroy();
	close(gate_fd);
}

/* More new processes at once than probe slots (a make -j within one turn
 * of the loop): the rest wait in the queue, their samples with them, and
 * are probed as slots come back; every one is named, none on the loop. */
Test(aggregate, a_burst_of_new_processes_past_the_probe_slots_waits_for_them)
{
	enum { N = MODPROBE_JOBS_MAX + 3 };
	uint64_t leaf = (uint64_t)(uintptr_t)&aggregate_test_marker + 1;
	struct aggregator_stats st;
	pid_t child[N];
	int pipefd[2], status;
	uint64_t one = 1;
	char c;

	make_gated(100);
	cr_assert_eq(pipe(pipefd), 0);
	for (int i = 0; i < N; i++) {
		child[i] = fork();
		cr_assert_geq(child[i], 0);
		if (child[i] == 0) {
			close(pipefd[1]);
			(void)!read(pipefd[0], &c, 1);
			_exit(0);
		}
	}
	close(pipefd[0]);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(feed_user((uint32_t)child[i], start_ns_of(child[i]), now_monotonic_ns(),
				       leaf, leaf),
			     0);
		cr_assert_not_null(aggregator_find_process(agg, (uint32_t)child[i])->probe_job,
				   "process %d of %d waits for its probe", i + 1, N);
	}
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.module_probes, MODPROBE_JOBS_MAX, "the rest are queued");
	cr_assert_eq(st.samples_waited_for_maps, N);
	cr_assert_eq(write(gate_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	for (int i = 0; i < N; i++)
		complete_probes(aggregator_find_process(agg, (uint32_t)child[i]));
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.module_probes, N);
	cr_assert_eq(st.module_probes_late, 0);
	for (int i = 0; i < N; i++) {
		struct process *p = aggregator_find_process(agg, (uint32_t)child[i]);

		cr_assert_geq(module_at(p, leaf), FRAME_MODULE_FIRST, "process %d named", i + 1);
		cr_assert_eq(p->n_parked, 0);
		cr_assert_not_null(p->history.newest, "its sample went in");
	}
	close(pipefd[1]);
	for (int i = 0; i < N; i++)
		cr_assert_eq(waitpid(child[i], &status, 0), child[i]);
	destroy();
	close(gate_fd);
}
