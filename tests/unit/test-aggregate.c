/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/aggregate.c, fed with synthetic records built from
 * include/perfd/sample.h: counting per process and stack, process identity
 * (pid + start time), limits and eviction, snapshots (collectors), exits,
 * and normalization of user frames through the test's own /proc/self/maps.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "profile/aggregate.h"
#include "profile/frame.h"
#include "profile/stacktab.h"
#include "symbols/symbolize.h"

#define NOPID 999999999u /* no such process: its maps cannot be read */
#define SEC 1000000000ULL

static struct symbolizer *sym;
static struct aggregator *agg;

static void make(size_t max_processes, size_t max_stacks)
{
	struct aggregator_limits l = { max_processes, max_stacks, 1000000 };

	sym = symbolizer_new(&(struct symbolizer_opts){ .demangle = true }, NULL);
	agg = aggregator_new(&l, sym);
	cr_assert_not_null(agg);
}

static void destroy(void)
{
	aggregator_free(agg);
	symbolizer_free(sym);
}

static int feed(uint32_t tgid, uint64_t start, uint64_t ts, const uint64_t *kips,
		int kd, const uint64_t *uips, int ud, uint64_t rss_anon_pages)
{
	size_t nk = kd > 0 ? kd : 0, nu = ud > 0 ? ud : 0;
	size_t size = sizeof(struct perfd_sample) + (nk + nu) * sizeof(uint64_t);
	struct perfd_sample *s = calloc(1, size);
	int r;

	s->hdr.kind = PERFD_EVENT_SAMPLE;
	s->hdr.tgid = tgid;
	s->hdr.tid = tgid;
	s->hdr.timestamp_ns = ts;
	s->hdr.start_time_ns = start;
	snprintf(s->comm, sizeof(s->comm), "p%u", tgid);
	s->rss_pages[PERFD_RSS_ANON] = rss_anon_pages;
	s->hiwater_rss_pages = rss_anon_pages;
	s->page_size = 4096;
	s->kernel_depth = kd;
	s->user_depth = ud;
	if (nk)
		memcpy(s->ips, kips, nk * sizeof(uint64_t));
	if (nu)
		memcpy(s->ips + nk, uips, nu * sizeof(uint64_t));
	r = aggregator_ingest(agg, s, size);
	free(s);
	return r;
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

static uint64_t count_of(const struct u64map *counts, uint64_t leaf_addr)
{
	U64MAP_FOREACH(slot, counts) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg), slot->key);

		if (s && s->depth && frame_address(s->frames[0]) == leaf_addr)
			return slot->value;
	}
	return 0;
}

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
	cr_assert_eq(p->counts.count, 2);
	/* return addresses are stepped back into the call: leaf stays exact */
	cr_assert_eq(count_of(&p->counts, 0x1000), 3);
	cr_assert_eq(count_of(&p->counts, 0x1100), 1);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.samples, 4);
	cr_assert_eq(st.stacks, 2);
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(process_rss_bytes(p), 10 * 4096);
	destroy();
}

Test(aggregate, kernel_frames_come_first_and_errors_are_marked)
{
	uint64_t k[] = { 0xffffffff81000010ULL, 0xffffffff81000020ULL };
	uint64_t u[] = { 0x1000 };
	struct process *p;
	struct aggregator_stats st;

	make(100, 1000);
	cr_assert_eq(feed(NOPID, 1, SEC, k, 2, u, 1, 1), 0);
	cr_assert_eq(feed(NOPID, 1, SEC, NULL, -14, NULL, -14, 1), 0);
	p = aggregator_find_process(agg, NOPID);
	U64MAP_FOREACH(slot, &p->counts) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg), slot->key);

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
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.kernel_stack_errors, 1);
	cr_assert_eq(st.user_stack_errors, 1);
	destroy();
}

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
	destroy();
}

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

Test(aggregate, stack_limit_evicts_others_or_keeps_the_sample_as_dropped)
{
	struct aggregator_stats st;
	struct process *p;

	make(100, 2);
	feed_user(NOPID, 1, SEC, 0x1000, 0x2000);
	feed_user(NOPID, 1, SEC, 0x1100, 0x2000);
	feed_user(NOPID, 1, SEC, 0x1200, 0x2000); /* no one else to evict */
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(p->total_samples, 3);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.stack_limit, 1);
	cr_assert_eq(st.stacks, 2);
	/* another process's new stack makes room by evicting the first */
	feed_user(NOPID - 1, 1, 2 * SEC, 0x3000, 0x2000);
	aggregator_get_stats(agg, &st);
	cr_assert_null(aggregator_find_process(agg, NOPID));
	cr_assert_eq(st.processes_evicted, 1);
	cr_assert_eq(st.samples_evicted, 3);
	cr_assert_eq(st.stacks, 1);
	destroy();
}

static int exits_seen;

static void on_exit_cb(struct collector *c, void *userdata)
{
	exits_seen++;
}

Test(aggregate, collector_counts_its_window_and_hears_the_exit)
{
	struct collector c = { .pid = NOPID, .begin_ns = 10 * SEC, .end_ns = 20 * SEC,
			       .on_exit = on_exit_cb };
	long tick = 1000000000 / sysconf(_SC_CLK_TCK);
	uint64_t start = 777 * tick;
	struct process *p;

	make(100, 1000);
	c.start_ticks = 777;
	aggregator_add_collector(agg, &c);
	feed_user(NOPID, start, 9 * SEC, 0x1000, 0x2000);       /* before */
	feed_user(NOPID, start, 11 * SEC, 0x1000, 0x2000);
	feed_user(NOPID, start, 12 * SEC, 0x1100, 0x2000);
	feed_user(NOPID, start + 5 * tick, 13 * SEC, 0x1000, 0x2000); /* another process */
	feed_user(NOPID - 1, start, 13 * SEC, 0x1000, 0x2000);  /* another pid */
	feed_user(NOPID, start, 21 * SEC, 0x1000, 0x2000);      /* after */
	cr_assert_eq(c.samples, 2);
	cr_assert_eq(count_of(&c.counts, 0x1000), 1);
	cr_assert_eq(count_of(&c.counts, 0x1100), 1);
	feed_exit(NOPID, start + 5 * tick, 14 * SEC);
	cr_assert_eq(exits_seen, 0);
	feed_exit(NOPID, start, 15 * SEC);
	cr_assert_eq(exits_seen, 1);
	cr_assert(c.exited);
	cr_assert_eq(c.exit_ns, 15 * SEC);
	/* the collector's stacks stay alive after the process is evicted */
	aggregator_remove_collector(agg, &c);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(p->collectors, 0);
	destroy();
}

Test(aggregate, recent_samples_by_second)
{
	struct process *p;

	make(100, 1000);
	feed_user(NOPID, 1, 100 * SEC + 5, 0x1000, 0x2000);
	feed_user(NOPID, 1, 105 * SEC + 5, 0x1000, 0x2000);
	feed_user(NOPID, 1, 109 * SEC + 5, 0x1000, 0x2000);
	p = aggregator_find_process(agg, NOPID);
	cr_assert_eq(process_window_samples(p, 109, 110), 1);
	cr_assert_eq(process_window_samples(p, 105, 110), 2);
	cr_assert_eq(process_window_samples(p, 100, 110), 3);
	cr_assert_eq(process_window_samples(p, 101, 109), 1);
	cr_assert_eq(process_window_samples(p, 140, 200), 0);
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
	cr_assert_eq(aggregator_ingest(agg, &h, sizeof(h)), -EINVAL);
	cr_assert_eq(aggregator_ingest(agg, &h, 3), -EINVAL);
	destroy();
}

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

	make(100, 1000);
	cr_assert_eq(feed_user(getpid(), 1, SEC, leaf, caller), 0);
	p = aggregator_find_process(agg, getpid());
	cr_assert_not_null(p->maps);
	U64MAP_FOREACH(slot, &p->counts) {
		const struct stack *s = stacktab_get(aggregator_stacks(agg), slot->key);

		cr_assert_geq(frame_module(s->frames[0]), FRAME_MODULE_FIRST);
		cr_assert_str_eq(symbolizer_frame_name(sym, s->frames[0], name, sizeof(name)),
				 "aggregate_test_marker");
	}
	destroy();
}

static int maps_changes;

static void count_maps_change(void *userdata, struct process *p)
{
	maps_changes++;
}

Test(aggregate, needs_maps_flag_rereads_with_backoff)
{
	struct aggregator_hooks hooks = { .maps_changed = count_maps_change };
	uint64_t now = 0, u[] = { (uint64_t)(uintptr_t)&aggregate_test_marker };
	struct timespec ts;
	size_t size = sizeof(struct perfd_sample) + sizeof(uint64_t);
	struct perfd_sample *s = calloc(1, size);

	make(100, 1000);
	aggregator_set_hooks(agg, &hooks);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * SEC + ts.tv_nsec;
	s->hdr = (struct perfd_event_header){ .kind = PERFD_EVENT_SAMPLE, .tgid = getpid(),
					      .tid = getpid(), .start_time_ns = 1 };
	s->page_size = 4096;
	s->user_depth = 1;
	memcpy(s->ips, u, sizeof(u));
	s->flags = PERFD_SAMPLE_F_NEEDS_MAPS;

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
