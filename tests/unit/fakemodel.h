/* SPDX-License-Identifier: MIT */
/*
 * fakemodel.h - profile parts built by hand and a resolver that needs no
 * binaries, for the suites of the model and of its encoders.  Header-only:
 * each suite is one program.
 *
 * A test fills fake_frames (what each frame word resolves to), makes
 * processes with fake_process() and adds values with fake_add(); then
 * fake_build() resolves them into a model exactly as the manager does,
 * through fake_resolve() and fake_describe().
 *
 * fake_resolve() behaves like the daemon's resolvers: with lines, every
 * record of a frame (outermost first); without, a native or kernel frame is
 * its outermost function alone, without file, line or start line; a Python
 * frame always has its file, line and start line (the model drops the line
 * when not asked for).  A
 * frame not in the table reads "fADDR" in hex.  fake_encode_text() runs a
 * text format's encoder and reads its string back as a client does.
 */
#ifndef PERFD_TEST_FAKEMODEL_H
#define PERFD_TEST_FAKEMODEL_H

#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonw.h"
#include "encode/encode.h"
#include "perfd/macro.h"
#include "profile/aggregate.h"
#include "profile/frame.h"
#include "profile/model.h"
#include "profile/profile.h"
#include "profile/stacktab.h"

/* frame_make() as a constant expression, for tables. */
#define FRAME(module, address) ((uint64_t)(module) << FRAME_ADDRESS_BITS | (uint64_t)(address))
#define KFRAME(address) FRAME(FRAME_MODULE_KERNEL, address)
#define PYFRAME(address) FRAME(FRAME_MODULE_PYTHON, address)

#define NATIVE(fn, file_, line_, module_) \
	{ .kind = FRAME_KIND_NATIVE, .function = fn, .file = file_, .line = line_, .module = module_ }
/* ... whose function starts at line start_ */
#define NATIVE_FROM(fn, file_, line_, start_, module_)                                        \
	{ .kind = FRAME_KIND_NATIVE, .function = fn, .file = file_, .line = line_,           \
	  .start_line = start_, .module = module_ }
#define KERNEL(fn) { .kind = FRAME_KIND_KERNEL, .function = fn, .module = FRAME_MODULE_KERNEL }
#define PYTHON(fn, file_, line_) \
	{ .kind = FRAME_KIND_PYTHON, .function = fn, .file = file_, .line = line_ }
#define PYTHON_FROM(fn, file_, line_, start_)                                               \
	{ .kind = FRAME_KIND_PYTHON, .function = fn, .file = file_, .line = line_,           \
	  .start_line = start_ }

struct fake_frame {
	uint64_t frame;
	size_t n;
	struct frame_record rec[FRAME_MAX_INLINE]; /* outermost first */
};

#define FAKE_MAX_PROCS 4
#define FAKE_KERNEL_BUILD_ID "24a3598fd700114d0a1b1a4871badcee75d0acac"

static const struct fake_frame *fake_frames;
static size_t n_fake_frames;
static unsigned fake_resolve_calls, fake_describe_calls;
static struct stacktab *fake_stacks;
static struct process fake_procs[FAKE_MAX_PROCS];
static struct profile_parts fake_parts;

_unused_ static size_t fake_resolve(void *ctx, uint64_t frame, bool lines, struct frame_record *out,
				    size_t cap, char *scratch, size_t size)
{
	uint16_t module = frame_module(frame);

	fake_resolve_calls++;
	for (size_t i = 0; i < n_fake_frames; i++) {
		const struct fake_frame *f = &fake_frames[i];
		size_t n = MIN(f->n, cap);

		if (f->frame != frame)
			continue;
		if (!lines && f->rec[0].kind != FRAME_KIND_PYTHON) {
			out[0] = f->rec[0];
			out[0].file = NULL;
			out[0].line = out[0].start_line = 0;
			return 1;
		}
		memcpy(out, f->rec, n * sizeof(*out));
		return n;
	}
	snprintf(scratch, size, "f%llx", (unsigned long long)frame_address(frame));
	out[0] = (struct frame_record){
		.kind = module == FRAME_MODULE_KERNEL ? FRAME_KIND_KERNEL : FRAME_KIND_NATIVE,
		.function = scratch,
		.module = module <= FRAME_MODULE_LAST || module == FRAME_MODULE_KERNEL ? module : 0,
		.offset = frame_address(frame),
	};
	return 1;
}

/* Modules 1 and 2 are files (2 without a build-id), the kernel is
 * described as the symbolizer does; others are unknown. */
_unused_ static bool fake_describe(void *ctx, uint16_t module, const char **ret_path,
				   const char **ret_build_id)
{
	fake_describe_calls++;
	switch (module) {
	case 1:
		*ret_path = "/usr/bin/app";
		*ret_build_id = "0123456789abcdef";
		return true;
	case 2:
		*ret_path = "/usr/lib/libc.so.6";
		*ret_build_id = "";
		return true;
	case FRAME_MODULE_KERNEL:
		*ret_path = "[kernel.kallsyms]";
		*ret_build_id = FAKE_KERNEL_BUILD_ID;
		return true;
	default:
		return false;
	}
}

_unused_ static void fake_setup(void)
{
	struct stacktab_limits l = { 100000, 1000000 };

	cr_assert_eq(stacktab_new(&l, &fake_stacks), 0);
	memset(fake_procs, 0, sizeof(fake_procs));
	fake_parts = (struct profile_parts){ 0 };
	fake_parts.parts = calloc(FAKE_MAX_PROCS, sizeof(*fake_parts.parts));
	cr_assert_not_null(fake_parts.parts);
	fake_parts.cap = FAKE_MAX_PROCS;
	fake_frames = NULL;
	n_fake_frames = 0;
	fake_resolve_calls = fake_describe_calls = 0;
}

/* Every stack reference the parts took goes with them. */
_unused_ static void fake_teardown(void)
{
	for (size_t i = 0; i < fake_parts.n; i++)
		profile_release(&fake_parts.parts[i].prof, fake_stacks);
	free(fake_parts.parts);
	fake_parts = (struct profile_parts){ 0 };
	for (size_t i = 0; i < FAKE_MAX_PROCS; i++) {
		free(fake_procs[i].cgroup);
		free(fake_procs[i].thread_comms);
		u64map_done(&fake_procs[i].thread_index);
	}
	cr_expect_eq(stacktab_count(fake_stacks), 0, "stack references leaked");
	stacktab_free(fake_stacks);
}

#define FAKE_SUITE(name) TestSuite(name, .init = fake_setup, .fini = fake_teardown)

#define SET_FAKE_FRAMES(table)                                                 \
	do {                                                                   \
		fake_frames = (table);                                         \
		n_fake_frames = ELEMENTSOF(table);                             \
	} while (0)

/* Process (and part) number i of the answer. */
_unused_ static struct process *fake_process(size_t i, uint32_t pid, const char *comm,
					     const char *cgroup)
{
	struct process *p = &fake_procs[i];

	cr_assert_lt(i, FAKE_MAX_PROCS);
	p->pid = pid;
	p->ns_pid = pid;
	p->start_time_ns = 1000 * pid;
	snprintf(p->comm, sizeof(p->comm), "%s", comm);
	p->cgroup = cgroup ? strdup(cgroup) : NULL;
	u64map_init(&p->thread_index);
	fake_parts.parts[i].process = p;
	profile_init(&fake_parts.parts[i].prof);
	fake_parts.n = MAX(fake_parts.n, i + 1);
	return p;
}

/* Names thread tid of process i as the aggregator does when it first
 * sees it. */
_unused_ static void fake_thread(size_t i, uint32_t tid, const char *comm)
{
	struct process *p = &fake_procs[i];
	uint64_t *slot;

	if (p->n_threads == p->cap_threads) {
		p->cap_threads = p->cap_threads ? 2 * p->cap_threads : 4;
		p->thread_comms = realloc(p->thread_comms, p->cap_threads * sizeof(*p->thread_comms));
		cr_assert_not_null(p->thread_comms);
	}
	snprintf(p->thread_comms[p->n_threads], sizeof(*p->thread_comms), "%s", comm);
	slot = u64map_upsert(&p->thread_index, tid, NULL);
	cr_assert_not_null(slot);
	*slot = ++p->n_threads;
}

/* Adds value of kind to process i's part for the stack frames (leaf
 * first; the first kernel_depth are the kernel's) on thread tid. */
_unused_ static void fake_add_kind(size_t i, const uint64_t *frames, uint16_t depth,
				   uint16_t kernel_depth, uint32_t tid, enum profile_kind kind,
				   uint64_t value)
{
	uint32_t id;

	cr_assert_lt(i, fake_parts.n);
	cr_assert_eq(stacktab_intern(fake_stacks, frames, depth, kernel_depth, &id), 0);
	cr_assert_eq(profile_add(&fake_parts.parts[i].prof, fake_stacks,
				 profile_key(id, tid, kind), value), 0);
	stacktab_unref(fake_stacks, id); /* the profile holds its own */
}

#define FAKE_ADD(i, value, ...)                                                       \
	do {                                                                          \
		const uint64_t fa_frames_[] = { __VA_ARGS__ };                        \
		fake_add_kind(i, fa_frames_, ELEMENTSOF(fa_frames_), 0, 1, PROFILE_KIND_CPU, \
			      value);                                                 \
	} while (0)

/* The frames the encoders' suites resolve: native with an inlined call
 * (modules 1 and 2), kernel, Python. */
_unused_ static const struct fake_frame fake_app_frames[] = {
	{ FRAME(1, 0x1), 1, { NATIVE_FROM("main", "/src/app/main.c", 5, 3, 1) } },
	/* inner inlined into outer at 0x2: outermost first in the model */
	{ FRAME(1, 0x2), 2, { NATIVE_FROM("outer", "/src/app/a.c", 10, 8, 1),
			      NATIVE_FROM("inner", "/src/app/b.h", 20, 17, 1) } },
	{ FRAME(2, 0x5), 1, { NATIVE("memcpy", NULL, 0, 2) } },
	{ KFRAME(0x11), 1, { KERNEL("clear_page") } },
	{ PYFRAME(0x7), 1, { PYTHON_FROM("work", "/srv/app.py", 42, 40) } },
};

/* One process, app (pid 10, in cgroup), on fake_app_frames:
 * main;outer;inner 3, main;work;memcpy 2 and main;clear_page 1 (kernel). */
_unused_ static void fake_add_app(const char *cgroup)
{
	SET_FAKE_FRAMES(fake_app_frames);
	fake_process(0, 10, "app", cgroup);
	FAKE_ADD(0, 3, FRAME(1, 0x2), FRAME(1, 0x1));
	FAKE_ADD(0, 2, FRAME(2, 0x5), PYFRAME(0x7), FRAME(1, 0x1));
	fake_add_kind(0, (const uint64_t[]){ KFRAME(0x11), FRAME(1, 0x1) }, 2, 1, 1,
		      PROFILE_KIND_CPU, 1);
}

/* Two processes, one with two threads, on fake_app_frames: app (pid 10)
 * runs main;outer 1 on thread 10 "app" and 2 on thread 11 "worker"; other
 * (pid 20, thread 20 unnamed) runs memcpy 4. */
_unused_ static void fake_add_threads(void)
{
	SET_FAKE_FRAMES(fake_app_frames);
	fake_process(0, 10, "app", NULL);
	fake_process(1, 20, "other", NULL);
	fake_thread(0, 10, "app");
	fake_thread(0, 11, "worker");
	fake_add_kind(0, (const uint64_t[]){ FRAME(1, 0x2), FRAME(1, 0x1) }, 2, 0, 10,
		      PROFILE_KIND_CPU, 1);
	fake_add_kind(0, (const uint64_t[]){ FRAME(1, 0x2), FRAME(1, 0x1) }, 2, 0, 11,
		      PROFILE_KIND_CPU, 2);
	fake_add_kind(1, (const uint64_t[]){ FRAME(2, 0x5) }, 1, 0, 20, PROFILE_KIND_CPU, 4);
}

/* The model of the parts, resolved as the manager does; o.describe, when
 * set, describes the modules instead of fake_describe(). */
_unused_ static struct model *fake_build_opts(struct model_opts o)
{
	struct model *m = NULL;

	o.resolve = fake_resolve;
	if (!o.describe)
		o.describe = fake_describe;
	cr_assert_eq(model_build(&o, &fake_parts, fake_stacks, &m), 0);
	cr_assert_not_null(m);
	return m;
}

_unused_ static struct model *fake_build(void)
{
	return fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true });
}

/* What encode (a format whose "profile" is a string) writes for m, read
 * back with json-c's strict tokener as a client reads the answer; the
 * caller frees it. */
/* A model of stacks distinct stacks of one sample each, of process
 * "big", depth frames deep and four callees a frame: frame k from the root
 * is FRAME(1, 0x100000 * (k + 1) + i / 4^(depth - 1 - k)) in stack i.  The
 * encoders' 100k-stack cases. */
_unused_ static struct model *fake_fanout_model(uint32_t stacks, int depth)
{
	uint64_t frames[32];

	cr_assert_leq(depth, 32);
	fake_process(0, 1, "big", NULL);
	for (uint32_t i = 0; i < stacks; i++) {
		for (int k = 0; k < depth; k++) /* leaf first: frame k is at depth depth-1-k */
			frames[k] = FRAME(1, 0x100000 * (uint64_t)(depth - k) + (i >> (2 * k)));
		fake_add_kind(0, frames, (uint16_t)depth, 0, 1, PROFILE_KIND_CPU, 1);
	}
	return fake_build();
}

/* o's member key, which must be there. */
_unused_ static json_object *fake_get(json_object *o, const char *key)
{
	json_object *v = NULL;

	cr_assert(json_object_object_get_ex(o, key, &v), "no \"%s\" in %s", key,
		  json_object_to_json_string(o));
	return v;
}

typedef int fake_encoder(const struct model *, const struct encode_opts *, struct encode_sink *);

/* The bytes encode writes for m (through a buffer sink, as a file gets
 * them), NUL-terminated, *ret_len of them; the caller frees them. */
_unused_ static char *fake_encode_bytes(fake_encoder *encode, const struct model *m,
					const struct encode_opts *eo, size_t *ret_len)
{
	struct encode_buffer b;
	char *bytes;

	encode_buffer_init(&b);
	cr_assert_eq(encode(m, eo, &b.sink), 0);
	cr_assert_eq(encode_sink_write(&b.sink, "", 1), 0);
	bytes = (char *)TAKE_PTR(b.data);
	*ret_len = b.len - 1;
	encode_buffer_done(&b);
	return bytes;
}

/* text parsed as strict JSON with nothing after it; the caller puts it. */
_unused_ static json_object *fake_parse_json(const char *text, size_t len)
{
	struct json_tokener *tok = json_tokener_new();
	json_object *o;

	cr_assert_not_null(tok);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, text, (int)len);
	cr_assert_not_null(o, "not strict JSON: %.*s", (int)MIN(len, 400), text);
	cr_assert_eq(json_tokener_get_parse_end(tok), len, "bytes after the JSON");
	json_tokener_free(tok);
	return o;
}

/* What a JSON format's encode writes for m, parsed; the caller puts it. */
_unused_ static json_object *fake_encode_json(fake_encoder *encode, const struct model *m,
					      const struct encode_opts *eo)
{
	size_t len;
	char *text = fake_encode_bytes(encode, m, eo, &len);
	json_object *o = fake_parse_json(text, len);

	free(text);
	return o;
}

/* What a text format's encode writes for m, as a client reads it from an
 * answer: escaped into a JSON string (encode_jsonw_text_init) and read
 * back.  The caller frees it. */
_unused_ static char *fake_encode_text(fake_encoder *encode, const struct model *m,
				       const struct encode_opts *eo)
{
	struct encode_jsonw_sink s;
	struct jsonw w;
	json_object *o;
	char *text;

	jsonw_init(&w);
	encode_jsonw_text_init(&s, &w);
	jsonw_string_begin(&w);
	cr_assert_eq(encode(m, eo, &s.sink), 0);
	jsonw_string_end(&w);
	cr_assert_eq(jsonw_error(&w), 0);
	o = fake_parse_json(w.buf, w.len);
	cr_assert(json_object_is_type(o, json_type_string), "not a string");
	text = strdup(json_object_get_string(o));
	cr_assert_not_null(text);
	cr_assert_eq(strlen(text), (size_t)json_object_get_string_len(o), "a NUL in the text");
	json_object_put(o);
	jsonw_done(&w);
	return text;
}

#endif
