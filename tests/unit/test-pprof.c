/* SPDX-License-Identifier: MIT */
/*
 * test-pprof.c - the pprof encoder (daemon/encode/pprof.c): a model built
 * from hand-made parts (fakemodel.h) is encoded into a buffer, the bytes
 * the daemon sends as an answer's frame; the test gunzips them with zlib and unpacks it with the protobuf-c code generated
 * from proto/profile.proto, then checks the tables as a pprof reader needs
 * them: the string table starts with "", ids are 1-based and every
 * reference resolves, stacks are leaf first, inlined lines innermost
 * first, values per kind, the labels, functions' start lines and the
 * kernel's mapping.  go tool pprof reading real
 * snapshots is tests/integration/test_pprof.py.
 */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "profile.pb-c.h"

#include "encode/encode.h"
#include "fakemodel.h"
#include "gunzip.h"

FAKE_SUITE(pprof);

typedef Perftools__Profiles__Profile pb_profile;

#define PERIOD_NS 10000000

/* The profile a client gets from m: gzip, protobuf. */
static pb_profile *encode_model(const struct model *m)
{
	struct encode_opts eo = { .period_ns = PERIOD_NS, .memory_sample_bytes = 1 << 20,
				  .time_unix_ns = 1700000000000000000ULL,
				  .duration_ns = 5000000000ULL };
	size_t n, n_raw;
	char *bytes = fake_encode_bytes(pprof_encode, m, &eo, &n);
	uint8_t *raw = gunzip((const uint8_t *)bytes, n, &n_raw);
	pb_profile *p = perftools__profiles__profile__unpack(NULL, n_raw, raw);

	cr_assert_not_null(p, "not a profile.proto Profile");
	free(raw);
	free(bytes);
	return p;
}

static pb_profile *encode_opts(struct model_opts mo)
{
	struct model *m = fake_build_opts(mo);
	pb_profile *p = encode_model(m);

	model_free(m);
	return p;
}

static const char *str(const pb_profile *p, int64_t i)
{
	cr_assert(i >= 0 && (size_t)i < p->n_string_table, "string index %ld of %zu", (long)i,
		  p->n_string_table);
	return p->string_table[i];
}

/* Every id is its index + 1 and every reference resolves. */
static void check_tables(const pb_profile *p)
{
	cr_assert_gt(p->n_string_table, 0);
	cr_assert_str_eq(p->string_table[0], "");
	for (size_t i = 0; i < p->n_function; i++) {
		cr_assert_eq(p->function[i]->id, i + 1);
		(void)str(p, p->function[i]->name);
		(void)str(p, p->function[i]->filename);
	}
	for (size_t i = 0; i < p->n_mapping; i++) {
		cr_assert_eq(p->mapping[i]->id, i + 1);
		(void)str(p, p->mapping[i]->filename);
		(void)str(p, p->mapping[i]->build_id);
	}
	for (size_t i = 0; i < p->n_location; i++) {
		const Perftools__Profiles__Location *l = p->location[i];

		cr_assert_eq(l->id, i + 1);
		cr_assert_leq(l->mapping_id, p->n_mapping);
		if (l->mapping_id)
			cr_assert_lt(l->address, p->mapping[l->mapping_id - 1]->memory_limit);
		cr_assert_gt(l->n_line, 0);
		for (size_t j = 0; j < l->n_line; j++)
			cr_assert(l->line[j]->function_id >= 1 &&
				  l->line[j]->function_id <= p->n_function);
	}
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];

		cr_assert_eq(s->n_value, p->n_sample_type);
		for (size_t j = 0; j < s->n_location_id; j++)
			cr_assert(s->location_id[j] >= 1 && s->location_id[j] <= p->n_location);
		for (size_t j = 0; j < s->n_label; j++)
			(void)str(p, s->label[j]->key);
	}
}

/* Line j of location id's function name. */
static const char *line_function(const pb_profile *p, uint64_t id, size_t j)
{
	const Perftools__Profiles__Location *l = p->location[id - 1];

	cr_assert_lt(j, l->n_line);
	return str(p, p->function[l->line[j]->function_id - 1]->name);
}

/* The sample whose leaf location's innermost function is leaf. */
static const Perftools__Profiles__Sample *sample_at(const pb_profile *p, const char *leaf)
{
	for (size_t i = 0; i < p->n_sample; i++)
		if (p->sample[i]->n_location_id &&
		    strcmp(line_function(p, p->sample[i]->location_id[0], 0), leaf) == 0)
			return p->sample[i];
	cr_assert_fail("no sample with leaf %s", leaf);
	return NULL;
}

static const Perftools__Profiles__Label *label(const pb_profile *p,
					       const Perftools__Profiles__Sample *s,
					       const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (strcmp(str(p, s->label[i]->key), key) == 0)
			return s->label[i];
	return NULL;
}

Test(pprof, tables_are_one_based_and_inlined_lines_innermost_first)
{
	pb_profile *p;
	const Perftools__Profiles__Sample *s;
	const Perftools__Profiles__Location *l;

	fake_add_app("/system.slice/app.service");
	p = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .lines = true,
					     .python_lines = true });
	check_tables(p);
	cr_assert_eq(p->n_sample, 3);

	/* leaf first; the inlined location lists inner, then outer */
	s = sample_at(p, "inner");
	cr_assert_eq(s->n_location_id, 2);
	l = p->location[s->location_id[0] - 1];
	cr_assert_eq(l->n_line, 2);
	cr_assert_str_eq(line_function(p, l->id, 0), "inner");
	cr_assert_eq(l->line[0]->line, 20);
	cr_assert_str_eq(line_function(p, l->id, 1), "outer");
	cr_assert_eq(l->line[1]->line, 10);
	cr_assert_str_eq(line_function(p, s->location_id[1], 0), "main");
	cr_assert_str_eq(str(p, p->function[l->line[0]->function_id - 1]->filename),
			 "/src/app/b.h");

	/* the binary's mapping, with its path and build-id */
	cr_assert_neq(l->mapping_id, 0);
	cr_assert_str_eq(str(p, p->mapping[l->mapping_id - 1]->filename), "/usr/bin/app");
	cr_assert_str_eq(str(p, p->mapping[l->mapping_id - 1]->build_id), "0123456789abcdef");
	cr_assert(p->mapping[l->mapping_id - 1]->has_inline_frames);

	/* Python frames have no mapping; Python keeps its line */
	s = sample_at(p, "memcpy");
	cr_assert_eq(s->n_location_id, 3);
	cr_assert_str_eq(line_function(p, s->location_id[1], 0), "work");
	cr_assert_eq(p->location[s->location_id[1] - 1]->line[0]->line, 42);
	cr_assert_eq(p->location[s->location_id[1] - 1]->mapping_id, 0);

	/* cpu: samples/count and cpu/nanoseconds = samples x period */
	cr_assert_eq(p->n_sample_type, 2);
	cr_assert_str_eq(str(p, p->sample_type[0]->type), "samples");
	cr_assert_str_eq(str(p, p->sample_type[0]->unit), "count");
	cr_assert_str_eq(str(p, p->sample_type[1]->type), "cpu");
	cr_assert_str_eq(str(p, p->sample_type[1]->unit), "nanoseconds");
	s = sample_at(p, "inner");
	cr_assert_eq(s->value[0], 3);
	cr_assert_eq(s->value[1], 3LL * PERIOD_NS);
	cr_assert_str_eq(str(p, p->period_type->type), "cpu");
	cr_assert_eq(p->period, PERIOD_NS);
	cr_assert_eq(p->time_nanos, 1700000000000000000LL);
	cr_assert_eq(p->duration_nanos, 5000000000LL);

	/* labels: pid, comm, cgroup and unit; no tid without threads */
	cr_assert_eq(label(p, s, "pid")->num, 10);
	cr_assert_str_eq(str(p, label(p, s, "comm")->str), "app");
	cr_assert_str_eq(str(p, label(p, s, "cgroup")->str), "/system.slice/app.service");
	cr_assert_str_eq(str(p, label(p, s, "unit")->str), "app.service");
	cr_assert_null(label(p, s, "tid"));
	perftools__profiles__profile__free_unpacked(p, NULL);
}

/* The Function named name (asserted unique). */
static const Perftools__Profiles__Function *function_named(const pb_profile *p, const char *name)
{
	const Perftools__Profiles__Function *found = NULL;

	for (size_t i = 0; i < p->n_function; i++)
		if (strcmp(str(p, p->function[i]->name), name) == 0) {
			cr_assert_null(found, "two functions %s", name);
			found = p->function[i];
		}
	cr_assert_not_null(found, "no function %s", name);
	return found;
}

/* Each Function starts where its resolver said: the inlined one and the
 * one it is inlined into their own lines, Python its co_firstlineno,
 * kernel and symbol-only functions 0 (unknown); without lines native
 * functions have none, Python ones keep theirs. */
Test(pprof, functions_carry_their_start_line)
{
	pb_profile *p;

	fake_add_app(NULL);
	p = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .lines = true,
					     .python_lines = true });
	check_tables(p);
	cr_assert_eq(function_named(p, "inner")->start_line, 17);
	cr_assert_eq(function_named(p, "outer")->start_line, 8);
	cr_assert_eq(function_named(p, "main")->start_line, 3);
	cr_assert_eq(function_named(p, "work")->start_line, 40);
	cr_assert_eq(function_named(p, "memcpy")->start_line, 0);
	cr_assert_eq(function_named(p, "clear_page")->start_line, 0);
	perftools__profiles__profile__free_unpacked(p, NULL);

	p = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = false });
	check_tables(p);
	cr_assert_eq(function_named(p, "outer")->start_line, 0);
	cr_assert_eq(function_named(p, "main")->start_line, 0);
	cr_assert_eq(function_named(p, "work")->start_line, 40);
	perftools__profiles__profile__free_unpacked(p, NULL);
}

/* Kernel frames have one Mapping, [kernel.kallsyms] with the kernel's
 * build-id, that says it has functions (pprof must not symbolize it
 * again), and whose range holds their addresses. */
Test(pprof, kernel_frames_share_the_kernel_mapping)
{
	const Perftools__Profiles__Mapping *mp;
	const Perftools__Profiles__Location *a, *b;
	const Perftools__Profiles__Sample *s;
	pb_profile *p;

	SET_FAKE_FRAMES(fake_app_frames);
	fake_process(0, 10, "app", NULL);
	fake_add_kind(0, (const uint64_t[]){ KFRAME(0x11), FRAME(1, 0x1) }, 2, 1, 1,
		      PROFILE_KIND_CPU, 1);
	/* a kernel frame the table does not name, as in a module: "f22" */
	fake_add_kind(0, (const uint64_t[]){ KFRAME(0x22), KFRAME(0x11), FRAME(1, 0x1) }, 3, 2, 1,
		      PROFILE_KIND_CPU, 1);
	p = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true,
					     .kernel_addresses = true });
	check_tables(p);
	cr_assert_eq(p->n_mapping, 2, "the app and the kernel");
	a = p->location[sample_at(p, "clear_page")->location_id[0] - 1];
	b = p->location[sample_at(p, "f22")->location_id[0] - 1];
	cr_assert_neq(a->mapping_id, 0, "a kernel frame without a mapping");
	cr_assert_eq(b->mapping_id, a->mapping_id);
	mp = p->mapping[a->mapping_id - 1];
	cr_assert_str_eq(str(p, mp->filename), "[kernel.kallsyms]");
	cr_assert_str_eq(str(p, mp->build_id), FAKE_KERNEL_BUILD_ID);
	cr_assert(mp->has_functions);
	cr_assert_eq(b->address, 0x22);
	cr_assert_gt(mp->memory_limit, 0x22);
	/* the root, main, is the app's */
	s = sample_at(p, "clear_page");
	cr_assert_str_eq(str(p, p->mapping[p->location[s->location_id[s->n_location_id - 1] - 1]
						   ->mapping_id - 1]->filename),
			 "/usr/bin/app");
	perftools__profiles__profile__free_unpacked(p, NULL);
}

/* For a client the kernel would not show its addresses (the model's
 * default), kernel locations have address 0 and the kernel's Mapping
 * spans [0, 1). */
Test(pprof, hidden_kernel_addresses_are_zero)
{
	const Perftools__Profiles__Location *k, *app;
	const Perftools__Profiles__Sample *s;
	pb_profile *p;

	SET_FAKE_FRAMES(fake_app_frames);
	fake_process(0, 10, "app", NULL);
	fake_add_kind(0, (const uint64_t[]){ KFRAME(0x22), FRAME(1, 0x1) }, 2, 1, 1,
		      PROFILE_KIND_CPU, 1);
	p = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true });
	check_tables(p);
	s = sample_at(p, "f22");
	k = p->location[s->location_id[0] - 1];
	app = p->location[s->location_id[1] - 1];
	cr_assert_eq(k->address, 0);
	cr_assert_eq(p->mapping[k->mapping_id - 1]->memory_limit, 1);
	cr_assert_neq(app->mapping_id, k->mapping_id);
	perftools__profiles__profile__free_unpacked(p, NULL);
}

Test(pprof, threads_label_each_sample_with_its_tid)
{
	pb_profile *p;

	fake_add_threads();
	p = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .threads = true,
					     .python_lines = true });
	check_tables(p);
	cr_assert_eq(p->n_sample, 3);
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		const Perftools__Profiles__Label *tid = label(p, s, "tid"), *pid = label(p, s, "pid");

		cr_assert_not_null(tid);
		cr_assert_not_null(pid);
		cr_assert_null(label(p, s, "cgroup"), "no cgroup known, none said");
		if (s->value[0] == 1 || s->value[0] == 2) {
			cr_assert_eq(pid->num, 10);
			cr_assert_eq(tid->num, s->value[0] == 1 ? 10 : 11);
			cr_assert_str_eq(str(p, label(p, s, "comm")->str), "app");
		} else {
			cr_assert_eq(pid->num, 20);
			cr_assert_str_eq(str(p, label(p, s, "comm")->str), "other");
		}
	}
	perftools__profiles__profile__free_unpacked(p, NULL);
}

Test(pprof, memory_is_space_in_bytes)
{
	pb_profile *p;

	SET_FAKE_FRAMES(fake_app_frames);
	fake_process(0, 10, "app", NULL);
	fake_add_kind(0, (const uint64_t[]){ FRAME(2, 0x5), FRAME(1, 0x1) }, 2, 0, 1,
		      PROFILE_KIND_MEMORY, 3 << 20);
	p = encode_opts((struct model_opts){ .kind = PROFILE_KIND_MEMORY, .python_lines = true });
	check_tables(p);
	cr_assert_eq(p->n_sample_type, 1);
	cr_assert_str_eq(str(p, p->sample_type[0]->type), "space");
	cr_assert_str_eq(str(p, p->sample_type[0]->unit), "bytes");
	cr_assert_eq(p->n_sample, 1);
	cr_assert_eq(p->sample[0]->value[0], 3 << 20);
	cr_assert_eq(p->period, 1 << 20);
	perftools__profiles__profile__free_unpacked(p, NULL);
}

Test(pprof, an_empty_model_is_a_valid_profile)
{
	pb_profile *p;

	fake_process(0, 10, "app", NULL);
	p = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true });
	check_tables(p);
	cr_assert_eq(p->n_sample, 0);
	cr_assert_eq(p->n_sample_type, 2);
	perftools__profiles__profile__free_unpacked(p, NULL);
}

/* Many stacks: more than one deflate buffer. */
Test(pprof, a_large_profile_survives_the_stream)
{
	pb_profile *p;
	uint64_t total = 0, expected = 0;

	fake_process(0, 10, "app", NULL);
	for (uint64_t i = 0; i < 20000; i++) {
		fake_add_kind(0, (const uint64_t[]){ FRAME(1, 0x1000 + i), FRAME(1, 0x1) }, 2, 0, 1,
			      PROFILE_KIND_CPU, i % 7 + 1);
		expected += i % 7 + 1;
	}
	p = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true });
	check_tables(p);
	cr_assert_eq(p->n_sample, 20000);
	for (size_t i = 0; i < p->n_sample; i++)
		total += (uint64_t)p->sample[i]->value[0];
	cr_assert_eq(total, expected);
	perftools__profiles__profile__free_unpacked(p, NULL);
}
