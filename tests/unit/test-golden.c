/* SPDX-License-Identifier: MIT */
/*
 * test-golden.c - every output format, byte for byte, against files kept
 * in tests/unit/golden/: the guard of refactors that must not change what
 * a user gets (issue 29).
 *
 * Four profiles are built by hand (fakemodel.h), the same on every run: a
 * CPU profile of two processes, one with two threads, native frames (one
 * with an inlined call) and kernel frames; a memory profile; a Python
 * process with a JIT frame; and an empty one.  Each is encoded by every
 * row of the formats table (include/perfd/formats.h), as the daemon does,
 * and the profile a client gets is compared with golden/NAME.EXTENSION:
 *   - a text format (folded, html, svg): its string, read back from JSON
 *     (the answer's "profile" string, encode_jsonw_text_init);
 *     an html page is held to the template built into perfd, and only the
 *     flame graph's data at its marker is stored (NAME.html-data);
 *   - json and speedscope: the encoder's JSON bytes as they are;
 *   - a binary format (pprof): its bytes (the answer's frame), and a gzip
 *     stream is kept inflated (NAME.pb for ".pb.gz"): the deflate stream is zlib's
 *     to choose (another zlib, or other flush points, compress the same
 *     profile differently), the profile inside is perfd's.
 * The one-process profiles also go through the OTLP exporter's encoder
 * (NAME.otlp.pb).  Its scope carries perfd_version, which changes with
 * every commit and which no option sets: that one field is set to
 * "VERSION" by unpacking and packing the message again with protobuf-c,
 * the library the encoder packs with; the same round trip without the
 * change is checked to give the encoder's bytes back, so nothing else can
 * hide behind it.  Times come from the encoder options, fixed here.
 *
 * The files sit next to this source, found through __FILE__: the suite
 * runs from the top of the tree (make unit), whichever build made it.
 * After a change meant to alter an output, rewrite them with
 *   PERFD_GOLDEN_UPDATE=1 build/tests/test-golden
 * and review their diff before committing it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/flamegraph_html.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include "base/jsonw.h"
#include "encode/encode.h"
#include "fakemodel.h"
#include "gunzip.h"
#include "perfd/version.h"

FAKE_SUITE(golden);

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest pb_request;

#define GOLDEN_SUBDIR "golden"
#define OTLP_EXTENSION ".otlp.pb"

#define JIT_MODULE 3
#define PYTHON_MODULE 4
#define KADDR(a) (0xffff000000000000ULL | (a))
/* A native record at its offset in the file, as the symbolizer gives it. */
#define NAT(fn, file_, line_, start_, module_, offset_)                                     \
	{ .kind = FRAME_KIND_NATIVE, .function = fn, .file = file_, .line = line_,           \
	  .start_line = start_, .module = module_, .offset = offset_ }
#define KSYM(fn, addr, symoff)                                                            \
	{ .kind = FRAME_KIND_KERNEL, .function = fn, .module = FRAME_MODULE_KERNEL,         \
	  .offset = KADDR(addr), .symbol_offset = symoff }

/* Names chosen to need escaping in some format: C++'s <, >, & and a
 * comma, a space in a thread's name. */
static const struct fake_frame golden_frames[] = {
	{ FRAME(1, 0x1000), 1, { NAT("main", "/src/app/main.c", 12, 10, 1, 0x1000) } },
	{ FRAME(1, 0x1100), 2, { NAT("parse", "/src/app/parse.c", 40, 31, 1, 0x1100),
				 NAT("next_token", "/src/app/lex.h", 7, 5, 1, 0x1100) } },
	{ FRAME(1, 0x1200), 1,
	  { NAT("std::map<int, char>::at(int const&)", "/usr/include/c++/map", 530, 528, 1,
		0x1200) } },
	{ FRAME(2, 0x2200), 1, { NAT("memcpy", NULL, 0, 0, 2, 0x2200) } },
	{ FRAME(2, 0x2300), 1, { NAT("write", NULL, 0, 0, 2, 0x2300) } },
	{ KFRAME(0x81000010), 1, { KSYM("entry_SYSCALL_64", 0x81000010, 0x10) } },
	{ KFRAME(0x81200040), 1, { KSYM("ksys_write", 0x81200040, 0x40) } },
	{ KFRAME(0x81300008), 1, { KSYM("clear_page_erms", 0x81300008, 0x8) } },
	{ PYFRAME(0x1), 1, { PYTHON_FROM("<module>", "/srv/job.py", 3, 1) } },
	{ PYFRAME(0x2), 1, { PYTHON_FROM("handle", "/srv/job.py", 21, 18) } },
	{ PYFRAME(0x3), 1, { PYTHON_FROM("render", "/srv/tmpl.py", 88, 80) } },
	{ FRAME(JIT_MODULE, 0x40), 1,
	  { { .kind = FRAME_KIND_JIT, .function = "py::hot_loop", .module = JIT_MODULE,
	      .offset = 0x40 } } },
	{ FRAME(PYTHON_MODULE, 0x5000), 1,
	  { NAT("_PyEval_EvalFrameDefault", NULL, 0, 0, PYTHON_MODULE, 0x5000) } },
};

/* fakemodel.h's modules, and the JIT's and the interpreter's. */
static bool golden_describe(void *ctx, uint16_t module, const char **ret_path,
			    const char **ret_build_id)
{
	switch (module) {
	case JIT_MODULE:
		*ret_path = "/tmp/perf-400.map";
		*ret_build_id = "";
		return true;
	case PYTHON_MODULE:
		*ret_path = "/usr/bin/python3.12";
		*ret_build_id = "fedcba98765432100123456789abcdef01234567";
		return true;
	default:
		return fake_describe(ctx, module, ret_path, ret_build_id);
	}
}

static struct model *golden_build(struct model_opts o)
{
	o.describe = golden_describe;
	return fake_build_opts(o);
}

#define ADD(i, tid, kind, value, kernel_depth, ...)                                          \
	do {                                                                                 \
		const uint64_t add_frames_[] = { __VA_ARGS__ };                              \
		fake_add_kind(i, add_frames_, ELEMENTSOF(add_frames_), kernel_depth, tid, kind, \
			      value);                                                        \
	} while (0)

/* app (pid 100, in a unit's cgroup) on threads "app" and "io worker",
 * other (pid 200) on one unnamed thread; stacks leaf first. */
static struct model *cpu_profile(void)
{
	SET_FAKE_FRAMES(golden_frames);
	fake_process(0, 100, "app", "/system.slice/app.service");
	fake_process(1, 200, "other", NULL);
	fake_thread(0, 100, "app");
	fake_thread(0, 101, "io worker");
	ADD(0, 100, PROFILE_KIND_CPU, 5, 0, FRAME(1, 0x1100), FRAME(1, 0x1000));
	ADD(0, 100, PROFILE_KIND_CPU, 2, 0, FRAME(2, 0x2200), FRAME(1, 0x1100), FRAME(1, 0x1000));
	ADD(0, 101, PROFILE_KIND_CPU, 3, 2, KFRAME(0x81200040), KFRAME(0x81000010),
	    FRAME(2, 0x2300), FRAME(1, 0x1000));
	ADD(0, 101, PROFILE_KIND_CPU, 1, 0, FRAME(1, 0x1200), FRAME(1, 0x1000));
	ADD(1, 200, PROFILE_KIND_CPU, 4, 0, FRAME(2, 0x2200), FRAME(1, 0x1000));
	return golden_build((struct model_opts){ .kind = PROFILE_KIND_CPU, .lines = true,
						 .python_lines = true, .threads = true,
						 .kernel_addresses = true });
}

/* grow (pid 300) adds memory under parse and main, a page fault's kernel
 * frame on top of one stack. */
static struct model *memory_profile(void)
{
	SET_FAKE_FRAMES(golden_frames);
	fake_process(0, 300, "grow", "/user.slice/grow.scope");
	ADD(0, 1, PROFILE_KIND_MEMORY, 4 << 20, 1, KFRAME(0x81300008), FRAME(2, 0x2200),
	    FRAME(1, 0x1100), FRAME(1, 0x1000));
	ADD(0, 1, PROFILE_KIND_MEMORY, 3 << 20, 0, FRAME(1, 0x1100), FRAME(1, 0x1000));
	ADD(0, 1, PROFILE_KIND_MEMORY, 1 << 20, 0, FRAME(1, 0x1000));
	return golden_build((struct model_opts){ .kind = PROFILE_KIND_MEMORY,
						 .python_lines = true });
}

/* python3 (pid 400): Python frames above the interpreter's loop, JIT
 * code and a native call on top of them. */
static struct model *python_profile(void)
{
	SET_FAKE_FRAMES(golden_frames);
	fake_process(0, 400, "python3", NULL);
	ADD(0, 1, PROFILE_KIND_CPU, 7, 0, FRAME(JIT_MODULE, 0x40), PYFRAME(0x3), PYFRAME(0x2),
	    PYFRAME(0x1), FRAME(PYTHON_MODULE, 0x5000));
	ADD(0, 1, PROFILE_KIND_CPU, 2, 0, PYFRAME(0x2), PYFRAME(0x1),
	    FRAME(PYTHON_MODULE, 0x5000));
	ADD(0, 1, PROFILE_KIND_CPU, 1, 0, FRAME(2, 0x2200), PYFRAME(0x3), PYFRAME(0x2),
	    PYFRAME(0x1), FRAME(PYTHON_MODULE, 0x5000));
	return golden_build((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true });
}

static struct model *empty_profile(void)
{
	return golden_build((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = true });
}

static const char *const golden_labels[] = { "env", "test" };

static const struct encode_opts golden_opts = {
	.period_ns = 10000000,
	.memory_sample_bytes = 1 << 20,
	.time_unix_ns = 1700000000000000000ULL,
	.duration_ns = 5000000000ULL,
	.labels = golden_labels,
	.n_labels = ELEMENTSOF(golden_labels) / 2,
};

struct bytes {
	uint8_t *data;
	size_t len;
};

static void bytes_done(struct bytes *b)
{
	free(b->data);
	*b = (struct bytes){ 0 };
}

/* The directory of the golden files, beside this source. */
static void golden_path(char *buf, size_t size, const char *name, const char *extension)
{
	const char *slash = strrchr(__FILE__, '/');
	int dir_len = slash ? (int)(slash - __FILE__) : 1;
	int n = snprintf(buf, size, "%.*s/%s/%s%s", dir_len, slash ? __FILE__ : ".",
			 GOLDEN_SUBDIR, name, extension);

	cr_assert(n > 0 && (size_t)n < size, "path too long");
}

/* Whole file at path, or -errno. */
static int read_file(const char *path, struct bytes *ret)
{
	_cleanup_fclose_ FILE *f = fopen(path, "rbe");
	struct bytes b = { 0 };
	size_t cap = 0;

	if (!f)
		return -errno;
	for (;;) {
		size_t k;

		if (b.len == cap) {
			cap = cap ? 2 * cap : 65536;
			b.data = realloc(b.data, cap);
			cr_assert_not_null(b.data);
		}
		k = fread(b.data + b.len, 1, cap - b.len, f);
		b.len += k;
		if (k == 0)
			break;
	}
	if (ferror(f)) {
		bytes_done(&b);
		return -EIO;
	}
	*ret = b;
	return 0;
}

/* With PERFD_GOLDEN_UPDATE=1 writes got as the golden file of name and
 * extension; otherwise compares got with it byte for byte and names the
 * first byte that differs. */
static void check_golden(const char *name, const char *extension, const struct bytes *got)
{
	_cleanup_(bytes_done) struct bytes want = { 0 };
	const char *update = getenv("PERFD_GOLDEN_UPDATE");
	char path[4096];
	size_t i;
	int r;

	golden_path(path, sizeof(path), name, extension);
	if (update && strcmp(update, "1") == 0) {
		_cleanup_fclose_ FILE *f = fopen(path, "wbe");

		cr_assert_not_null(f, "%s: %s", path, strerror(errno));
		cr_assert_eq(fwrite(got->data, 1, got->len, f), got->len, "%s: short write", path);
		cr_assert_eq(fflush(f), 0, "%s: %s", path, strerror(errno));
		return;
	}
	r = read_file(path, &want);
	cr_assert_eq(r, 0, "%s: %s (run from the top of the tree; PERFD_GOLDEN_UPDATE=1 writes it)",
		     path, strerror(-r));
	for (i = 0; i < got->len && i < want.len && got->data[i] == want.data[i]; i++)
		;
	cr_expect(i == got->len && i == want.len,
		  "%s: differs at byte %zu (%zu bytes now, %zu in the file)", path, i, got->len,
		  want.len);
}

/* What a client gets from e for m, as the file perfctl would write (see
 * the top of this file): *ret and the extension it is stored under. */
static void encode_as_client(const struct encoder *e, const struct model *m, struct bytes *ret,
			     char *extension, size_t size)
{
	snprintf(extension, size, "%s", e->extension);
	if (e->form == PERFD_FORM_TEXT) {
		ret->data = (uint8_t *)fake_encode_text(e->encode, m, &golden_opts);
		ret->len = strlen((char *)ret->data);
		return;
	}
	ret->data = (uint8_t *)fake_encode_bytes(e->encode, m, &golden_opts, &ret->len);
	if (e->form == PERFD_FORM_JSON)
		return;
	if (ret->len >= 2 && ret->data[0] == 0x1f && ret->data[1] == 0x8b) {
		size_t len = strlen(extension);
		uint8_t *raw = gunzip(ret->data, ret->len, &ret->len);

		free(ret->data);
		ret->data = raw;
		if (len > 3 && strcmp(extension + len - 3, ".gz") == 0)
			extension[len - 3] = '\0';
	}
}

/* The OTLP request of the one process of m, its scope's version set to
 * "VERSION" (see the top of this file). */
static void encode_otlp(const struct model *m, struct bytes *ret)
{
	struct otlp_resource res = { .host_name = "box", .service_name = "app.service",
				     .container_id = "0123456789abcdef" };
	_cleanup_(bytes_done) struct bytes raw = { 0 };
	struct encode_buffer b;
	pb_request *req;
	char version[] = "VERSION", *unpacked = NULL;

	encode_buffer_init(&b);
	cr_assert_eq(otlp_encode(m, &golden_opts, &res, &b.sink), 0);
	raw.data = TAKE_PTR(b.data);
	raw.len = b.len;
	req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
		NULL, raw.len, raw.data);
	cr_assert_not_null(req, "not an ExportProfilesServiceRequest");
	for (int pass = 0; pass < 2; pass++) {
		size_t len =
			opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(
				req);

		ret->data = malloc(len ? len : 1);
		cr_assert_not_null(ret->data);
		ret->len =
			opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(
				req, ret->data);
		cr_assert_eq(ret->len, len);
		if (pass == 1)
			break;
		cr_assert(ret->len == raw.len && memcmp(ret->data, raw.data, raw.len) == 0,
			  "protobuf-c does not pack the encoder's request back to its bytes");
		bytes_done(ret);
		cr_assert_eq(req->n_resource_profiles, 1);
		cr_assert_eq(req->resource_profiles[0]->n_scope_profiles, 1);
		cr_assert_str_eq(req->resource_profiles[0]->scope_profiles[0]->scope->version,
				 perfd_version);
		/* the unpacked string goes back before the message is freed */
		unpacked = req->resource_profiles[0]->scope_profiles[0]->scope->version;
		req->resource_profiles[0]->scope_profiles[0]->scope->version = version;
	}
	req->resource_profiles[0]->scope_profiles[0]->scope->version = unpacked;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		req, NULL);
}

/* An html page is flamegraph.html with the flame graph's data at its
 * marker (encode/flamepage.c).  The page is held to the template itself,
 * as built into perfd, and only the data is stored: four copies of the
 * template's 400 lines under golden/ would be a change to regenerate at
 * every edit of the template, and would check nothing more. */
#define PAGE_MARKER "@PERFD_DATA@"

static void strip_template(struct bytes *page, char *extension, size_t size)
{
	const char *t = (const char *)flamegraph_html;
	size_t t_len = sizeof(flamegraph_html);
	const char *marker = memmem(t, t_len, PAGE_MARKER, strlen(PAGE_MARKER));
	size_t head, tail;

	cr_assert_not_null(marker, "flamegraph.html has no %s", PAGE_MARKER);
	head = (size_t)(marker - t);
	tail = t_len - head - strlen(PAGE_MARKER);
	cr_assert_geq(page->len, head + tail, "the page is shorter than its template");
	cr_assert(memcmp(page->data, t, head) == 0, "the page does not start with the template");
	cr_assert(memcmp(page->data + page->len - tail, marker + strlen(PAGE_MARKER), tail) == 0,
		  "the page does not end with the template");
	memmove(page->data, page->data + head, page->len - head - tail);
	page->len -= head + tail;
	snprintf(extension, size, ".html-data");
}

/* m (freed here) in every format against the golden files of name. */
static void check_all_formats(const char *name, struct model *m)
{
	for (size_t i = 0; i < n_encoders; i++) {
		_cleanup_(bytes_done) struct bytes got = { 0 };
		char extension[64];

		encode_as_client(&encoders[i], m, &got, extension, sizeof(extension));
		if (strcmp(encoders[i].name, "html") == 0)
			strip_template(&got, extension, sizeof(extension));
		check_golden(name, extension, &got);
	}
	if (m->n_processes == 1) {
		_cleanup_(bytes_done) struct bytes got = { 0 };

		encode_otlp(m, &got);
		check_golden(name, OTLP_EXTENSION, &got);
	}
	model_free(m);
}

Test(golden, cpu)
{
	check_all_formats("cpu", cpu_profile());
}

Test(golden, memory)
{
	check_all_formats("memory", memory_profile());
}

Test(golden, python_and_jit)
{
	check_all_formats("python", python_profile());
}

Test(golden, empty)
{
	check_all_formats("empty", empty_profile());
}
