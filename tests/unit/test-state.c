/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/state/: the state file's framing (statefile.c: a
 * round trip, a torn record, bounds of the payload cursor), a restored
 * window's place in a history (history_restore), and the store's round trip
 * through a state directory (persist.c): what one store flushed, another
 * reads back, with every value and frame names as they resolved when
 * written, and a second flush writing nothing twice.
 */
#include <criterion/criterion.h>
#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "perfd/macro.h"
#include "profile/aggregate.h"
#include "profile/history.h"
#include "profile/stacktab.h"
#include "state/persist.h"
#include "state/statefile.h"
#include "state/writer.h"
#include "symbols/symbolize.h"

#define SEC 1000000000ULL
#define NOPID 4194000u /* no such process (pid_max is at most 2^22): restored as exited */

Test(statefile, records_round_trip_and_a_torn_one_ends_the_good_part)
{
	static const uint8_t boot[16] = { 1, 2, 3 };
	struct sbuf b = { 0 };
	struct statefile_reader r;
	struct scur c;
	uint8_t got_boot[16], type;
	char name[16];
	size_t at, whole;

	statefile_put_header(&b, boot);
	at = statefile_begin_record(&b, 7);
	sbuf_put_varint(&b, 300);
	sbuf_put_str(&b, "hello");
	statefile_end_record(&b, at);
	whole = b.len;
	at = statefile_begin_record(&b, 8);
	sbuf_put_varint(&b, 1);
	statefile_end_record(&b, at);
	cr_assert(!b.failed);

	cr_assert_eq(statefile_open(&r, b.data, b.len, got_boot), 0);
	cr_assert_eq(memcmp(got_boot, boot, 16), 0);
	cr_assert_eq(statefile_next(&r, &type, &c), 1);
	cr_assert_eq(type, 7);
	cr_assert_eq(scur_varint(&c), 300);
	cr_assert_str_eq(scur_str(&c, name, sizeof(name) - 1), "hello");
	cr_assert(scur_done(&c));
	/* reading past the payload yields nothing and says so */
	cr_assert_eq(scur_varint(&c), 0);
	cr_assert(c.bad);
	cr_assert_eq(statefile_next(&r, &type, &c), 1);
	cr_assert_eq(statefile_next(&r, &type, &c), 0);

	/* the last record cut short: the first is still read, good ends there */
	cr_assert_eq(statefile_open(&r, b.data, b.len - 1, got_boot), 0);
	cr_assert_eq(statefile_next(&r, &type, &c), 1);
	cr_assert_eq(statefile_next(&r, &type, &c), -EBADMSG);
	cr_assert_eq(r.good, whole);
	/* a flipped byte fails its CRC */
	b.data[whole - 2] ^= 1;
	cr_assert_eq(statefile_open(&r, b.data, b.len, got_boot), 0);
	cr_assert_eq(statefile_next(&r, &type, &c), -EBADMSG);
	/* a damaged header is not a state file */
	b.data[9] ^= 1;
	cr_assert_eq(statefile_open(&r, b.data, b.len, got_boot), -EBADMSG);
	sbuf_done(&b);
}

Test(statefile, a_string_longer_than_asked_or_with_a_nul_is_bad)
{
	const uint8_t long_one[] = { 5, 'a', 'b', 'c', 'd', 'e' };
	const uint8_t nul[] = { 2, 'a', 0 };
	char buf[8];
	struct scur c = { .p = long_one, .end = long_one + sizeof(long_one) };

	scur_str(&c, buf, 4);
	cr_assert(c.bad);
	c = (struct scur){ .p = nul, .end = nul + sizeof(nul) };
	scur_str(&c, buf, 4);
	cr_assert(c.bad);
}

Test(history, a_restored_window_goes_after_the_newest_only)
{
	struct stacktab *t;
	const uint64_t frames[] = { 1, 2 };
	struct history h;
	uint32_t id;
	uint64_t key, value = 5;

	cr_assert_eq(stacktab_new(&(struct stacktab_limits){ 16, 64 }, &t), 0);
	cr_assert_eq(stacktab_intern(t, frames, 2, 0, &id), 0);
	key = profile_key(id, 7, PROFILE_KIND_CPU);
	history_init(&h);
	cr_assert_eq(history_restore(&h, t, &(struct history_restored){
		.start_s = 100, .span_s = 10, .keys = &key, .values = &value, .n = 1 }), 0);
	/* overlapping the one before: refused */
	cr_assert_eq(history_restore(&h, t, &(struct history_restored){
		.start_s = 105, .span_s = 1, .keys = &key, .values = &value, .n = 1 }), -EINVAL);
	cr_assert_eq(history_restore(&h, t, &(struct history_restored){
		.start_s = 110, .span_s = 1, .keys = &key, .values = &value, .n = 1 }), 0);
	cr_assert_eq(h.n_windows, 2);
	/* each window holds a reference of its own on the stack */
	cr_assert_eq(stacktab_get(t, id)->refs, 3);
	history_release(&h, t);
	cr_assert_eq(stacktab_get(t, id)->refs, 1);
	stacktab_free(t);
}

/* ---- a store through a state directory ---- */

static char dir[] = "/tmp/perfd-test-state-XXXXXX";
static unsigned resolved;

static size_t fake_resolve(void *ctx, uint64_t frame, bool lines, struct frame_record *out,
			   size_t cap, char *scratch, size_t size)
{
	struct persist *ps = ctx;

	if (frame_module(frame) == FRAME_MODULE_STORED)
		return persist_resolve(ps, frame, lines, out, cap);
	resolved++;
	snprintf(scratch, size, "fn_%llx", (unsigned long long)frame_address(frame));
	out[0] = (struct frame_record){ .kind = FRAME_KIND_KERNEL, .function = scratch,
					.module = FRAME_MODULE_KERNEL,
					.offset = frame_kernel_address(frame) };
	return 1;
}

static bool fake_describe(void *ctx, uint16_t module, const char **path, const char **build_id)
{
	return false;
}

static struct aggregator *new_store(struct symbolizer *sym)
{
	struct module_registry modules = symbolizer_modules(sym);
	struct aggregator *a;

	cr_assert_eq(aggregator_new(&(struct aggregator_limits){ .max_processes = 16,
								  .max_stacks = 1000,
								  .max_frames = 10000,
								  .retention_s = 3600 },
				    &modules, &a),
		     0);
	return a;
}

static void sample(struct aggregator *a, uint64_t ts, uint64_t leaf)
{
	struct {
		struct perfd_sample s;
		uint64_t ips[2];
	} rec = { 0 };

	rec.s.hdr.kind = PERFD_EVENT_SAMPLE;
	rec.s.hdr.tgid = rec.s.hdr.tid = NOPID;
	rec.s.hdr.timestamp_ns = ts;
	rec.s.hdr.start_time_ns = 42 * SEC;
	snprintf(rec.s.comm, sizeof(rec.s.comm), "gone");
	rec.s.flags = PERFD_SAMPLE_F_KTHREAD;
	rec.s.kernel_depth = 2;
	rec.s.value = 1;
	rec.s.owner_uid = 1000;
	rec.ips[0] = 0xffffffff81000000ULL + leaf;
	rec.ips[1] = 0xffffffff81100000ULL;
	cr_assert_eq(aggregator_ingest(a, &rec, sizeof(rec)), 0);
}

static uint64_t count(struct aggregator *a, const char *leaf, struct persist *ps)
{
	struct selection sel = { .pids = { NOPID }, .n_pids = 1 };
	struct profile_parts parts = { 0 };
	uint64_t first, end, n = 0;

	cr_assert_eq(aggregator_query(a, &sel, 0, UINT64_MAX / 2, &parts, &first, &end), 0);
	for (size_t i = 0; i < parts.n; i++)
		U64MAP_FOREACH(slot, &parts.parts[i].prof.values) {
			const struct stack *s = stacktab_get(aggregator_stacks(a),
							     profile_key_stack(slot->key));
			struct frame_record rec[4];
			char scratch[64];

			fake_resolve(ps, s->frames[0], true, rec, 4, scratch, sizeof(scratch));
			if (!leaf || strcmp(rec[0].function, leaf) == 0)
				n += slot->value;
		}
	aggregator_release_parts(a, &parts);
	return n;
}

/* one process, 30 s of samples from t0, 8 a second in two functions: 3:1 */
static uint64_t three_to_one(uint64_t second, uint64_t k)
{
	return k < 6 ? 0x10 : 0x20;
}

/* 15 s in one function, then 15 s in the other */
static uint64_t one_then_the_other(uint64_t second, uint64_t k)
{
	return second < 15 ? 0x10 : 0x20;
}

/* A new state directory, open, and a with 30 s of one process's samples
 * from t0 (leaf names the function of the k-th of a second's 8). */
static struct persist *sampled_into_new_state(struct aggregator *a, uint64_t t0, uint64_t now,
					      uint64_t (*leaf)(uint64_t second, uint64_t k))
{
	struct persist *ps;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(persist_open(&(struct persist_opts){ .dir = dir, .retention_s = 3600 }, &ps), 0);
	for (uint64_t s = 0; s < 30; s++)
		for (uint64_t k = 0; k < 8; k++)
			sample(a, t0 + s * SEC + k * (SEC / 8), leaf(s, k));
	aggregator_maintain(a, now);
	return ps;
}

Test(persist, a_store_read_back_holds_every_value_under_its_names)
{
	struct symbolizer *sym;
	struct aggregator *a, *b;
	struct persist *ps, *again;
	struct persist_stats st;
	uint64_t now = now_monotonic_ns(), t0 = (now / SEC - 60) * SEC;

	cr_assert_eq(symbolizer_new(&(struct symbolizer_opts){ 0 }, &sym, NULL), 0);
	a = new_store(sym);
	ps = sampled_into_new_state(a, t0, now, three_to_one);
	{
		struct persist_names names = { fake_resolve, fake_describe, ps, NULL };

		persist_flush(ps, a, &names, 10000000, now, false);
		persist_get_stats(ps, &st);
		cr_assert_eq(st.windows_written, 30, "%" PRIu64 " windows written", st.windows_written);
		cr_assert_eq(st.processes_written, 1);
		cr_assert_eq(st.stacks_written, 2);
		cr_assert_eq(resolved, 3, "%u frames resolved", resolved); /* two leaves, one caller */
		/* nothing new: nothing written again */
		persist_flush(ps, a, &names, 10000000, now, true);
		persist_get_stats(ps, &st);
		cr_assert_eq(st.windows_written, 30);
	}
	persist_free(ps);

	/* read back with no writer, as the fuzz harness reads */
	cr_assert_eq(persist_open(&(struct persist_opts){ .dir = dir, .retention_s = 3600,
							  .read_only = true }, &again), 0);
	b = new_store(sym);
	/* read back at half the sampling period: each old sample is two */
	persist_restore(again, b, 5000000, now);
	persist_get_stats(again, &st);
	cr_assert_eq(st.windows_restored, 30);
	{
		struct persist_names names = { .resolve = fake_resolve, .describe = fake_describe,
						 .ctx = again };

		/* read_only: what was read back is not written again */
		persist_flush(again, b, &names, 5000000, now + 10 * SEC, true);
		persist_get_stats(again, &st);
		cr_assert_eq(st.flushes + st.windows_written + st.bytes_written, 0);
		cr_assert_eq(st.segments, 1, "%" PRIu64 " segments", st.segments);
	}
	cr_assert_eq(st.processes_restored, 1);
	cr_assert_eq(count(b, NULL, again), 2 * 240);
	cr_assert_eq(count(b, "fn_ffff81000010", again), 2 * 180);
	cr_assert_eq(count(b, "fn_ffff81000020", again), 2 * 60);
	/* the process is over: no /proc for it */
	cr_assert(aggregator_find_process(b, NOPID)->exited);
	cr_assert_eq(aggregator_find_process(b, NOPID)->owner_uid, 1000);

	aggregator_free(a);
	aggregator_free(b);
	persist_free(again);
	symbolizer_free(sym);
}

Test(persist, the_restored_names_go_with_the_windows_that_named_them)
{
	struct symbolizer *sym;
	struct aggregator *a, *b;
	struct persist *ps, *again;
	struct persist_stats st;
	struct aggregator_stats as;
	uint64_t now = now_monotonic_ns(), t0 = (now / SEC - 60) * SEC;
	size_t whole;

	cr_assert_eq(symbolizer_new(&(struct symbolizer_opts){ 0 }, &sym, NULL), 0);
	a = new_store(sym);
	ps = sampled_into_new_state(a, t0, now, one_then_the_other);
	{
		struct persist_names names = { fake_resolve, fake_describe, ps, NULL };

		persist_flush(ps, a, &names, 10000000, now, true);
	}
	persist_free(ps);

	cr_assert_eq(persist_open(&(struct persist_opts){ .dir = dir, .retention_s = 3600 }, &again), 0);
	b = new_store(sym);
	persist_restore(again, b, 10000000, now);
	persist_get_stats(again, &st);
	aggregator_get_stats(b, &as);
	whole = st.restored_bytes;
	cr_assert_gt(whole, 0);
	cr_assert_eq(as.restored_table_bytes, whole, "the store counts %zu of %zu bytes",
		     as.restored_table_bytes, whole);
	{
		struct persist_names names = { fake_resolve, fake_describe, again, NULL };
		/* the first 20 s are past the retention: the first function's
		 * stack goes, and its name with it; the second's stays */
		uint64_t later = t0 + (3600 + 20) * SEC;

		aggregator_maintain(b, later);
		persist_flush(again, b, &names, 10000000, later, false);
		persist_get_stats(again, &st);
		cr_assert_eq(st.restored_table_compacted, 1);
		cr_assert_lt(st.restored_bytes, whole);
		cr_assert_eq(count(b, "fn_ffff81000020", again), 10 * 8);
		cr_assert_eq(count(b, "fn_ffff81000010", again), 0);
		/* all of it past the retention: the table goes */
		later = t0 + (3600 + 180) * SEC; /* past roll-ups too */
		aggregator_maintain(b, later);
		persist_flush(again, b, &names, 10000000, later + 10 * SEC, false);
		persist_get_stats(again, &st);
		aggregator_get_stats(b, &as);
		cr_assert_eq(st.restored_table_freed, 1);
		cr_assert_eq(st.restored_bytes, 0);
		cr_assert_eq(as.restored_table_bytes, 0);
	}

	aggregator_free(a);
	aggregator_free(b);
	persist_free(again);
	symbolizer_free(sym);
}

/* A new function every second */
static uint64_t new_each_second(uint64_t second, uint64_t k)
{
	return 0x100 + second;
}

static size_t slow_resolve(void *ctx, uint64_t frame, bool lines, struct frame_record *out,
			   size_t cap, char *scratch, size_t size)
{
	struct timespec ms5 = { 0, 5 * 1000 * 1000 };

	nanosleep(&ms5, NULL);
	return fake_resolve(ctx, frame, lines, out, cap, scratch, size);
}

/* A flush writes on the loop for PERSIST_FLUSH_SLICE_NS, then leaves the
 * rest to the next: between windows too, not only between processes, so
 * that one process's burst of windows of new frames (each named as it is
 * written, 5 ms each here: 150 ms in all) does not hold the loop either.
 * Every window is written in the end, in order. */
Test(persist, a_burst_of_one_process_is_written_in_slices)
{
	struct symbolizer *sym;
	struct aggregator *a;
	struct persist *ps;
	struct persist_stats st;
	uint64_t now = now_monotonic_ns(), t0 = (now / SEC - 60) * SEC;
	struct persist_names names;
	int flushes = 1;

	cr_assert_eq(symbolizer_new(&(struct symbolizer_opts){ 0 }, &sym, NULL), 0);
	a = new_store(sym);
	ps = sampled_into_new_state(a, t0, now, new_each_second);
	names = (struct persist_names){ slow_resolve, fake_describe, ps, NULL };
	persist_flush(ps, a, &names, 10000000, now, false);
	persist_get_stats(ps, &st);
	cr_assert_eq(st.flushes_cut, 1);
	cr_assert_lt(st.windows_written, 10, "%" PRIu64 " windows in one slice", st.windows_written);
	cr_assert_geq(st.windows_written, 1);
	/* a cut flush goes on a second later */
	while (st.windows_written < 30 && flushes < 60) {
		persist_flush(ps, a, &names, 10000000, now + (uint64_t)flushes * SEC, false);
		persist_get_stats(ps, &st);
		flushes++;
	}
	cr_assert_eq(st.windows_written, 30, "%" PRIu64 " windows after %d flushes",
		     st.windows_written, flushes);
	persist_free(ps);
	aggregator_free(a);
	symbolizer_free(sym);
}

/* The writer syncs what perfd's own death cannot lose (it is in the
 * kernel at once) only at its pace: the first batch, then none within
 * STATE_SYNC_NS; a segment left for the next, and when asked. */
static uint64_t appended(struct state_writer *w, uint64_t seq, const char *bytes)
{
	struct sbuf b = { 0 };
	struct state_writer_stats st;

	sbuf_put_bytes(&b, bytes, strlen(bytes));
	cr_assert(state_writer_append(w, seq, &b));
	sbuf_done(&b);
	/* out of work, the lane's idle hook runs; this waits for it */
	state_writer_wait(w, false);
	state_writer_get_stats(w, &st);
	return st.syncs;
}

Test(state_writer, syncs_at_its_pace_when_a_segment_is_left_and_when_asked)
{
	struct state_writer *w;
	struct state_writer_stats st;
	char name[64], path[sizeof(dir) + 64], got[16] = "";
	FILE *f;
	int dfd;

	cr_assert_not_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(dfd, 0);
	cr_assert_eq(state_writer_new(dfd, 1 << 20, &w), 0);
	close(dfd);
	cr_assert_eq(appended(w, 1, "ab"), 1, "the first batch is synced");
	cr_assert_eq(appended(w, 1, "cd"), 1, "a batch within STATE_SYNC_NS is not");
	cr_assert_eq(appended(w, 2, "ef"), 2, "segment 1, left, is");
	state_writer_wait(w, true);
	state_writer_get_stats(w, &st);
	cr_assert_eq(st.syncs, 3, "asked, segment 2 is");
	state_writer_wait(w, true);
	state_writer_get_stats(w, &st);
	cr_assert_eq(st.syncs, 3, "nothing appended since: nothing to sync");
	cr_assert_eq(st.appends, 3);
	state_writer_free(w);

	state_segment_name(1, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(got, sizeof(got), f));
	fclose(f);
	cr_assert_str_eq(got, "abcd", "what was not synced was written all the same");
}
