/* SPDX-License-Identifier: MIT */
/*
 * test-speedscope.c - the speedscope encoder (daemon/encode/speedscope.c):
 * a model built from hand-made parts (fakemodel.h) is encoded into the JSON
 * writer as the daemon does, read back with json-c, and checked as
 * speedscope reads it: frame indexes resolve, stacks are root first with
 * inlined functions as frames of their own, weights in the kind's unit,
 * one profile per process (per thread with threads), frames shared.  The
 * file checked against speedscope's own schema, from real snapshots, is
 * tests/integration/test_speedscope.py.
 */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <string.h>

#include "base/jsonw.h"
#include "encode/encode.h"
#include "fakemodel.h"

FAKE_SUITE(speedscope);

#define PERIOD_NS 10000000

static json_object *encode_opts(struct model_opts mo)
{
	struct model *m = fake_build_opts(mo);
	struct encode_opts eo = { .period_ns = PERIOD_NS, .memory_sample_bytes = 1 << 20 };
	json_object *o = fake_encode_json(speedscope_encode, m, &eo);

	cr_assert(json_object_is_type(o, json_type_object));
	model_free(m);
	return o;
}

static const char *get_str(json_object *o, const char *key)
{
	return json_object_get_string(fake_get(o, key));
}

static int64_t get_int(json_object *o, const char *key)
{
	return json_object_get_int64(fake_get(o, key));
}

/* The frames array; checks the file's top level on the way. */
static json_object *frames_of(json_object *doc)
{
	cr_assert_str_eq(get_str(doc, "$schema"), "https://www.speedscope.app/file-format-schema.json");
	cr_assert_str_eq(get_str(doc, "exporter"), "perfd");
	return fake_get(fake_get(doc, "shared"), "frames");
}

/* Profile i, whose samples' frame indexes all resolve and whose endValue
 * is its weights' sum. */
static json_object *profile(json_object *doc, size_t i)
{
	json_object *ps = fake_get(doc, "profiles"), *p, *samples, *weights;
	size_t n_frames = json_object_array_length(frames_of(doc));
	int64_t sum = 0;

	cr_assert_lt(i, json_object_array_length(ps));
	p = json_object_array_get_idx(ps, i);
	cr_assert_str_eq(get_str(p, "type"), "sampled");
	cr_assert_eq(get_int(p, "startValue"), 0);
	samples = fake_get(p, "samples");
	weights = fake_get(p, "weights");
	cr_assert_eq(json_object_array_length(samples), json_object_array_length(weights));
	for (size_t k = 0; k < json_object_array_length(samples); k++) {
		json_object *stack = json_object_array_get_idx(samples, k);

		for (size_t d = 0; d < json_object_array_length(stack); d++)
			cr_assert_lt(json_object_get_int64(json_object_array_get_idx(stack, d)),
				     (int64_t)n_frames);
		cr_assert_gt(json_object_get_int64(json_object_array_get_idx(weights, k)), 0);
		sum += json_object_get_int64(json_object_array_get_idx(weights, k));
	}
	cr_assert_eq(get_int(p, "endValue"), sum);
	return p;
}

/* Stack k of profile p as "root;...;leaf" of frame names. */
static void stack_text(json_object *doc, json_object *p, size_t k, char *buf, size_t size)
{
	json_object *stack = json_object_array_get_idx(fake_get(p, "samples"), k);
	json_object *frames = frames_of(doc);
	size_t at = 0;

	buf[0] = '\0';
	for (size_t d = 0; d < json_object_array_length(stack); d++) {
		json_object *f = json_object_array_get_idx(
			frames, json_object_get_int64(json_object_array_get_idx(stack, d)));

		at += (size_t)snprintf(buf + at, size - MIN(at, size), "%s%s", d ? ";" : "",
				       get_str(f, "name"));
	}
}

/* The weight of the sample of p whose stack reads text. */
static int64_t weight_of(json_object *doc, json_object *p, const char *text)
{
	char buf[512];

	for (size_t k = 0; k < json_object_array_length(fake_get(p, "samples")); k++) {
		stack_text(doc, p, k, buf, sizeof(buf));
		if (strcmp(buf, text) == 0)
			return json_object_get_int64(json_object_array_get_idx(fake_get(p, "weights"), k));
	}
	cr_assert_fail("no stack %s", text);
	return 0;
}

/* The frame named name. */
static json_object *frame(json_object *doc, const char *name)
{
	json_object *frames = frames_of(doc);

	for (size_t i = 0; i < json_object_array_length(frames); i++)
		if (strcmp(get_str(json_object_array_get_idx(frames, i), "name"), name) == 0)
			return json_object_array_get_idx(frames, i);
	cr_assert_fail("no frame %s", name);
	return NULL;
}

Test(speedscope, cpu_stacks_root_first_in_nanoseconds)
{
	json_object *doc, *p, *f;

	fake_add_app(NULL);
	doc = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .lines = true,
					       .python_lines = true });
	cr_assert_str_eq(get_str(doc, "name"), "perfd cpu snapshot");
	cr_assert_eq(json_object_array_length(fake_get(doc, "profiles")), 1);
	cr_assert_eq(get_int(doc, "activeProfileIndex"), 0);
	p = profile(doc, 0);
	cr_assert_str_eq(get_str(p, "name"), "app (pid 10)");
	cr_assert_str_eq(get_str(p, "unit"), "nanoseconds");
	cr_assert_eq(get_int(p, "endValue"), 6LL * PERIOD_NS);

	/* root first, each inlined function a frame of its own */
	cr_assert_eq(weight_of(doc, p, "main;outer;inner"), 3LL * PERIOD_NS);
	cr_assert_eq(weight_of(doc, p, "main;work;memcpy"), 2LL * PERIOD_NS);
	cr_assert_eq(weight_of(doc, p, "main;clear_page_[k]"), 1LL * PERIOD_NS);

	f = frame(doc, "inner");
	cr_assert_str_eq(get_str(f, "file"), "/src/app/b.h");
	cr_assert_eq(get_int(f, "line"), 20);
	f = frame(doc, "work");
	cr_assert_str_eq(get_str(f, "file"), "/srv/app.py");
	cr_assert_eq(get_int(f, "line"), 42);
	/* no file, no line: left out, not empty */
	cr_assert(!json_object_object_get_ex(frame(doc, "memcpy"), "file", NULL));
	cr_assert(!json_object_object_get_ex(frame(doc, "clear_page_[k]"), "line", NULL));
	/* one frame per function and line: main is one frame for all three */
	cr_assert_eq(json_object_array_length(frames_of(doc)), 6);
	json_object_put(doc);
}

Test(speedscope, a_profile_per_thread_frames_shared_heaviest_active)
{
	json_object *doc;

	fake_add_threads();
	doc = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .threads = true,
					       .python_lines = true });
	cr_assert_eq(json_object_array_length(fake_get(doc, "profiles")), 3);
	/* by process, then tid */
	cr_assert_str_eq(get_str(profile(doc, 0), "name"), "app (pid 10) thread 10 app");
	cr_assert_str_eq(get_str(profile(doc, 1), "name"), "app (pid 10) thread 11 worker");
	cr_assert_str_eq(get_str(profile(doc, 2), "name"), "other (pid 20) thread 20");
	cr_assert_eq(get_int(profile(doc, 1), "endValue"), 2LL * PERIOD_NS);
	cr_assert_eq(weight_of(doc, profile(doc, 2), "memcpy"), 4LL * PERIOD_NS);
	cr_assert_eq(get_int(doc, "activeProfileIndex"), 2);
	/* without lines, outer, main and memcpy: one frame each for all */
	cr_assert_eq(json_object_array_length(frames_of(doc)), 3);
	json_object_put(doc);

	/* the same without threads: one profile per process */
	doc = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true });
	cr_assert_eq(json_object_array_length(fake_get(doc, "profiles")), 2);
	cr_assert_str_eq(get_str(profile(doc, 0), "name"), "app (pid 10)");
	cr_assert_eq(weight_of(doc, profile(doc, 0), "main;outer"), 3LL * PERIOD_NS);
	cr_assert_str_eq(get_str(profile(doc, 1), "name"), "other (pid 20)");
	json_object_put(doc);
}

Test(speedscope, memory_weighs_bytes)
{
	json_object *doc, *p;

	SET_FAKE_FRAMES(fake_app_frames);
	fake_process(0, 10, "app", NULL);
	fake_add_kind(0, (const uint64_t[]){ FRAME(2, 0x5), FRAME(1, 0x1) }, 2, 0, 1,
		      PROFILE_KIND_MEMORY, 3 << 20);
	doc = encode_opts((struct model_opts){ .kind = PROFILE_KIND_MEMORY, .python_lines = true });
	cr_assert_str_eq(get_str(doc, "name"), "perfd memory snapshot");
	p = profile(doc, 0);
	cr_assert_str_eq(get_str(p, "unit"), "bytes");
	cr_assert_eq(weight_of(doc, p, "main;memcpy"), 3 << 20);
	json_object_put(doc);
}

Test(speedscope, names_are_escaped)
{
	json_object *doc;

	SET_FAKE_FRAMES(fake_app_frames);
	fake_process(0, 10, "a\"b\\c\x01", NULL);
	FAKE_ADD(0, 1, FRAME(1, 0x1));
	doc = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true });
	cr_assert_str_eq(get_str(profile(doc, 0), "name"), "a\"b\\c\x01 (pid 10)");
	json_object_put(doc);
}

Test(speedscope, an_empty_model_has_no_profiles)
{
	json_object *doc;

	fake_process(0, 10, "app", NULL);
	doc = encode_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true });
	cr_assert_eq(json_object_array_length(fake_get(doc, "profiles")), 0);
	cr_assert_eq(json_object_array_length(frames_of(doc)), 0);
	cr_assert(!json_object_object_get_ex(doc, "activeProfileIndex", NULL));
	json_object_put(doc);
}
