/* SPDX-License-Identifier: MIT */
/*
 * test-profile-read.c - the snapshot readers (cli/profile_read.c).  One
 * profile written by hand in the three formats perfd writes (folded, the
 * json call tree, a gzipped profile.proto packed here with the generated
 * protobuf-c code) must read as the same stacks: frames root first, the
 * comm and thread frames left out, inlined pprof lines turned outermost
 * first, kernel frames told apart.  Then malformed input: every prefix
 * of each good file, random byte changes, and hand-made breakage (bad
 * counts, indexes outside their tables, stacks past the depth cap, sums
 * past 2^64) must give an error with a message, never a crash (the suite
 * runs under ASan in `make SANITIZE=1 unit`).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "perfd/kinds.h"
#include "profile.pb-c.h"
#include "profile_read.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__ValueType pb_value_type;

#define PERIOD_NS 1000000

/* The profile of every good fixture below, as canon() prints it. */
static const char *const expected =
	"main;outer@o.c:4;inner@o.c:9 3\n"
	"main;work 1\n"
	"main;work;hot@hot.c:10 5\n"
	"main;work;sys[k] 2\n";

static const char folded[] = "app;main;work;hot (hot.c:10) 5\n"
			     "app;main;work;sys_[k] 2\r\n"
			     "\n"
			     "app;[thread 7 t];main;work 1\n"
			     "app;main;outer (o.c:4);inner (o.c:9) 3";

static const char json[] =
	"{\"kind\":\"cpu\",\"unit\":\"samples\",\"period_ns\":1000000,\"total\":11,"
	"\"frames\":[{\"kind\":\"native\",\"function\":\"main\",\"module\":\"/bin/app\",\"offset\":16},"
	"{\"kind\":\"native\",\"function\":\"work\"},"
	"{\"kind\":\"native\",\"function\":\"hot\",\"file\":\"hot.c\",\"line\":10},"
	"{\"kind\":\"kernel\",\"function\":\"sys\"},"
	"{\"kind\":\"native\",\"function\":\"outer\",\"file\":\"o.c\",\"line\":4},"
	"{\"kind\":\"native\",\"function\":\"inner\",\"file\":\"o.c\",\"line\":9,\"inlined_by\":4}],"
	"\"processes\":[{\"pid\":1,\"comm\":\"app\",\"total\":11,\"tree\":{\"self\":0,\"total\":11,"
	"\"children\":["
	"{\"frame\":0,\"self\":0,\"total\":10,\"children\":["
	"{\"frame\":1,\"self\":0,\"total\":7,\"children\":["
	"{\"frame\":2,\"self\":5,\"total\":5,\"children\":[]},"
	"{\"frame\":3,\"self\":2,\"total\":2,\"children\":[]}]},"
	"{\"frame\":4,\"self\":0,\"total\":3,\"children\":[{\"frame\":5,\"self\":3,\"total\":3}]}]},"
	"{\"thread\":{\"tid\":7,\"comm\":\"t\"},\"self\":0,\"total\":1,\"children\":["
	"{\"frame\":0,\"self\":0,\"total\":1,\"children\":[{\"frame\":1,\"self\":1,\"total\":1}]}]}"
	"]}}]}\n";

static int strcmp_indirect(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Writes the profile's stacks one a line, "f;f@file:line;k[k] VALUE",
 * sorted, stacks that read alike merged: the same text for the same
 * profile whatever order a reader met its parts in. */
static char *canon(const struct profile *p)
{
	char **lines = calloc(p->n_stacks + 1, sizeof(*lines));
	uint64_t *values = calloc(p->n_stacks + 1, sizeof(*values));
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	cr_assert(lines && values);
	for (size_t i = 0; i < p->n_stacks; i++) {
		const struct profile_stack *s = &p->stacks[i];
		size_t sz = 0;
		FILE *l = open_memstream(&lines[i], &sz);

		for (uint32_t j = 0; j < s->depth; j++) {
			const struct profile_frame *fr = &p->frames[p->pool[s->first + j]];

			fprintf(l, "%s%s", j ? ";" : "", profile_string(p, fr->function));
			if (fr->file)
				fprintf(l, "@%s", profile_string(p, fr->file));
			if (fr->line)
				fprintf(l, ":%u", fr->line);
			if (fr->kernel)
				fprintf(l, "[k]");
		}
		/* the value after a tab, which no name here holds */
		fprintf(l, "\t%020llu", (unsigned long long)s->value);
		fclose(l);
	}
	qsort(lines, p->n_stacks, sizeof(*lines), strcmp_indirect);
	f = open_memstream(&out, &len);
	for (size_t i = 0; i < p->n_stacks;) {
		size_t key = strrchr(lines[i], '\t') - lines[i], j = i;
		unsigned long long v = 0;

		for (; j < p->n_stacks && strncmp(lines[j], lines[i], key + 1) == 0; j++)
			v += strtoull(lines[j] + key + 1, NULL, 10);
		fprintf(f, "%.*s %llu\n", (int)key, lines[i], v);
		i = j;
	}
	fclose(f);
	for (size_t i = 0; i < p->n_stacks; i++)
		free(lines[i]);
	free(lines);
	free(values);
	return out;
}

/* Reads data as a profile, asserting success. */
static struct profile *read_ok(const void *data, size_t len, const char *kind)
{
	char err[PROFILE_ERROR_MAX] = "";
	struct profile *p = NULL;
	int r = profile_read(data, len, kind, &p, err);

	cr_assert_eq(r, 0, "profile_read: %d (%s)", r, err);
	cr_assert_not_null(p);
	return p;
}

/* Reads data as a profile, asserting the error and that it says why. */
static void read_fails(const void *data, size_t len, const char *kind, int error, const char *what)
{
	char err[PROFILE_ERROR_MAX] = "";
	struct profile *p = NULL;
	int r = profile_read(data, len, kind, &p, err);

	cr_assert_eq(r, error, "%s: profile_read gave %d, not %d (%s)", what, r, error, err);
	cr_assert_null(p, "%s: a profile despite the error", what);
	cr_assert(err[0], "%s: no message", what);
}

static void assert_canon(const struct profile *p, const char *want)
{
	char *got = canon(p);

	cr_assert_str_eq(got, want);
	free(got);
}

/* --- a pprof file, packed and gzipped here ------------------------------- */

static uint8_t *gzip_bytes(const uint8_t *src, size_t n, size_t *ret_len)
{
	z_stream z = { 0 };
	size_t cap = deflateBound(&z, n) + 64;
	uint8_t *out = malloc(cap + n + 64);

	cr_assert_not_null(out);
	cr_assert_eq(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	cap = deflateBound(&z, n) + 64;
	out = realloc(out, cap);
	z.next_in = (Bytef *)src;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	*ret_len = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

static uint8_t *pack_gzip(const pb_profile *pr, size_t *ret_len)
{
	size_t n = perftools__profiles__profile__get_packed_size(pr);
	uint8_t *raw = malloc(n + 1), *gz;

	cr_assert_not_null(raw);
	perftools__profiles__profile__pack(pr, raw);
	gz = gzip_bytes(raw, n, ret_len);
	free(raw);
	return gz;
}

/* The fixture's profile as perfd's encoder lays it out; tests break it
 * before packing. */
struct pb_fixture {
	pb_profile pr;
	char *strings[16];
	pb_value_type types[2], *type_ptrs[2], period_type;
	pb_function functions[6], *function_ptrs[6];
	pb_line lines[7], *line_ptrs[7];
	pb_location locations[5], *location_ptrs[5];
	pb_mapping mapping, *mapping_ptr;
	pb_sample samples[4], *sample_ptrs[4];
	uint64_t ids[4][3];
	int64_t values[4][2];
};

enum { S_EMPTY, S_SAMPLES, S_COUNT, S_CPU, S_NS, S_MAIN, S_WORK, S_HOT, S_HOT_C, S_SYS,
       S_OUTER, S_INNER, S_O_C, S_SPACE, S_BYTES, N_STRINGS };

static void pb_fixture_init(struct pb_fixture *x)
{
	static const char *const strings[N_STRINGS] = {
		"", "samples", "count", "cpu", "nanoseconds", "main", "work", "hot", "hot.c",
		"sys", "outer", "inner", "o.c", "space", "bytes",
	};
	/* function: name, file */
	static const int64_t fn[6][2] = {
		{ S_MAIN, 0 }, { S_WORK, 0 }, { S_HOT, S_HOT_C },
		{ S_SYS, 0 },  { S_OUTER, S_O_C }, { S_INNER, S_O_C },
	};
	/* samples: location ids leaf first, value */
	static const struct {
		size_t n;
		uint64_t ids[3];
		int64_t value;
	} samples[4] = {
		{ 3, { 3, 2, 1 }, 5 }, { 3, { 4, 2, 1 }, 2 }, { 2, { 2, 1 }, 1 }, { 2, { 5, 1 }, 3 },
	};

	memset(x, 0, sizeof(*x));
	perftools__profiles__profile__init(&x->pr);
	for (size_t i = 0; i < N_STRINGS; i++)
		x->strings[i] = (char *)strings[i];
	x->pr.string_table = x->strings;
	x->pr.n_string_table = N_STRINGS;
	for (size_t i = 0; i < 2; i++) {
		perftools__profiles__value_type__init(&x->types[i]);
		x->type_ptrs[i] = &x->types[i];
	}
	x->types[0].type = S_SAMPLES;
	x->types[0].unit = S_COUNT;
	x->types[1].type = S_CPU;
	x->types[1].unit = S_NS;
	x->pr.sample_type = x->type_ptrs;
	x->pr.n_sample_type = 2;
	perftools__profiles__value_type__init(&x->period_type);
	x->period_type.type = S_CPU;
	x->period_type.unit = S_NS;
	x->pr.period_type = &x->period_type;
	x->pr.period = PERIOD_NS;

	for (size_t i = 0; i < 6; i++) {
		perftools__profiles__function__init(&x->functions[i]);
		x->functions[i].id = i + 1;
		x->functions[i].name = x->functions[i].system_name = fn[i][0];
		x->functions[i].filename = fn[i][1];
		x->function_ptrs[i] = &x->functions[i];
	}
	x->pr.function = x->function_ptrs;
	x->pr.n_function = 6;

	perftools__profiles__mapping__init(&x->mapping);
	x->mapping.id = 1;
	x->mapping_ptr = &x->mapping;
	x->pr.mapping = &x->mapping_ptr;
	x->pr.n_mapping = 1;

	/* locations 1..4 one line each (main, work, hot:10, sys); 5 holds
	 * inner:9 inlined into outer:4, innermost first */
	for (size_t i = 0; i < 7; i++) {
		perftools__profiles__line__init(&x->lines[i]);
		x->line_ptrs[i] = &x->lines[i];
	}
	x->lines[0].function_id = 1;
	x->lines[1].function_id = 2;
	x->lines[2].function_id = 3;
	x->lines[2].line = 10;
	x->lines[3].function_id = 4;
	x->lines[4].function_id = 6;
	x->lines[4].line = 9;
	x->lines[5].function_id = 5;
	x->lines[5].line = 4;
	for (size_t i = 0; i < 5; i++) {
		pb_location *l = &x->locations[i];

		perftools__profiles__location__init(l);
		l->id = i + 1;
		l->mapping_id = 1;
		l->address = 0x10 * (i + 1);
		l->line = &x->line_ptrs[i];
		l->n_line = i == 4 ? 2 : 1;
		x->location_ptrs[i] = l;
	}
	/* perfd's kernel frames: no mapping, a kernel address */
	x->locations[3].mapping_id = 0;
	x->locations[3].address = 0xffffffff81000000ULL;
	x->pr.location = x->location_ptrs;
	x->pr.n_location = 5;

	for (size_t i = 0; i < 4; i++) {
		pb_sample *s = &x->samples[i];

		perftools__profiles__sample__init(s);
		memcpy(x->ids[i], samples[i].ids, sizeof(x->ids[i]));
		s->location_id = x->ids[i];
		s->n_location_id = samples[i].n;
		x->values[i][0] = samples[i].value;
		x->values[i][1] = samples[i].value * PERIOD_NS;
		s->value = x->values[i];
		s->n_value = 2;
		x->sample_ptrs[i] = s;
	}
	x->pr.sample = x->sample_ptrs;
	x->pr.n_sample = 4;
}

static uint8_t *good_pprof(size_t *len)
{
	struct pb_fixture x;

	pb_fixture_init(&x);
	return pack_gzip(&x.pr, len);
}

/* --- the same profile in three formats ------------------------------------ */

Test(formats, folded_reads_as_the_stacks)
{
	struct profile *p = read_ok(folded, strlen(folded), NULL);

	cr_assert_eq(p->format, PROFILE_FORMAT_FOLDED);
	cr_assert_str_eq(profile_string(p, p->kind), "cpu");
	cr_assert_str_eq(profile_string(p, p->unit), "samples");
	cr_assert_eq(p->period_ns, 0, "folded carries no period");
	cr_assert_eq(p->total, 11);
	assert_canon(p, expected);
	profile_free(p);
}

Test(formats, json_reads_as_the_stacks)
{
	struct profile *p = read_ok(json, strlen(json), NULL);

	cr_assert_eq(p->format, PROFILE_FORMAT_JSON);
	cr_assert_str_eq(profile_string(p, p->kind), "cpu");
	cr_assert_eq(p->period_ns, PERIOD_NS);
	cr_assert_eq(p->total, 11);
	assert_canon(p, expected);
	profile_free(p);
}

Test(formats, pprof_reads_as_the_stacks)
{
	size_t len;
	uint8_t *gz = good_pprof(&len);
	struct profile *p = read_ok(gz, len, NULL);

	cr_assert_eq(p->format, PROFILE_FORMAT_PPROF);
	cr_assert_str_eq(profile_string(p, p->kind), "cpu");
	cr_assert_str_eq(profile_string(p, p->unit), "samples");
	cr_assert_eq(p->period_ns, PERIOD_NS);
	cr_assert_eq(p->total, 11, "the samples' count, not their nanoseconds");
	assert_canon(p, expected);
	profile_free(p);
	free(gz);
}

Test(formats, whole_snapshot_answer_reads_as_its_profile)
{
	char *doc = NULL;
	struct profile *p;

	cr_assert(asprintf(&doc, "  {\"version\":1,\"ok\":true,\"format\":\"json\",\"profile\":%s}\n",
			   json) > 0);
	p = read_ok(doc, strlen(doc), NULL);
	assert_canon(p, expected);
	profile_free(p);
	free(doc);
}

Test(formats, kind_picks_a_pprof_sample_type_and_must_match_json)
{
	struct pb_fixture x;
	uint8_t *gz;
	size_t len;
	struct profile *p;

	/* a memory profile: one sample type, space/bytes */
	pb_fixture_init(&x);
	x.types[0].type = S_SPACE;
	x.types[0].unit = S_BYTES;
	x.pr.n_sample_type = 1;
	x.pr.period_type = NULL;
	for (size_t i = 0; i < 4; i++)
		x.samples[i].n_value = 1;
	gz = pack_gzip(&x.pr, &len);
	p = read_ok(gz, len, NULL);
	cr_assert_str_eq(profile_string(p, p->kind), "memory");
	cr_assert_str_eq(profile_string(p, p->unit), "bytes");
	cr_assert_eq(p->period_ns, 0);
	profile_free(p);
	p = read_ok(gz, len, "memory");
	profile_free(p);
	read_fails(gz, len, "cpu", -ENOENT, "cpu of a memory pprof");
	free(gz);

	read_fails(json, strlen(json), "memory", -ENOENT, "memory of a cpu json");
	read_fails(json, strlen(json), "bogus", -EINVAL, "a kind that does not exist");
	p = read_ok(folded, strlen(folded), "memory");
	cr_assert_str_eq(profile_string(p, p->unit), "bytes", "--kind names a folded file's unit");
	profile_free(p);
}

/* Every row of perfd/kinds.h, expanded here on its own: the reader names
 * a file of the kind as the row does, finds a pprof file's kind by its
 * first sample type (the count of samples for a kind counted in periods),
 * gives a json file without a unit the row's, and keeps a period only for
 * a kind counted in periods. */
#define KIND_ROW(id, value, name_, unit_, title, kernel, period, counts, kskip, ptype, punit) \
	{ .name = name_, .unit = unit_,                                                           \
	  .periods = PERFD_KIND_PERIOD_##period == PERFD_KIND_PERIOD_PERIODS,                     \
	  .pprof_type = PERFD_KIND_PERIOD_##period == PERFD_KIND_PERIOD_PERIODS ? "samples" : ptype },
static const struct {
	const char *name, *unit, *pprof_type;
	bool periods;
} kind_rows[] = { PERFD_KINDS(KIND_ROW) };

Test(formats, every_kind_of_the_table_reads_back)
{
	for (size_t k = 0; k < ELEMENTSOF(kind_rows); k++) {
		const char *name = kind_rows[k].name;
		struct pb_fixture x;
		char doc[256];
		uint8_t *gz;
		size_t len;
		struct profile *p;

		p = read_ok(folded, strlen(folded), name);
		cr_expect_str_eq(profile_string(p, p->kind), name);
		cr_expect_str_eq(profile_string(p, p->unit), kind_rows[k].unit, "%s", name);
		profile_free(p);

		snprintf(doc, sizeof(doc),
			 "{\"kind\":\"%s\",\"period_ns\":5,\"frames\":[],\"processes\":[]}", name);
		p = read_ok(doc, strlen(doc), NULL);
		cr_expect_str_eq(profile_string(p, p->kind), name);
		cr_expect_str_eq(profile_string(p, p->unit), kind_rows[k].unit, "%s", name);
		cr_expect_eq(p->period_ns, kind_rows[k].periods ? 5u : 0u, "%s", name);
		profile_free(p);

		pb_fixture_init(&x);
		x.strings[S_SPACE] = (char *)kind_rows[k].pprof_type;
		x.types[0].type = S_SPACE;
		x.pr.n_sample_type = 1;
		for (size_t i = 0; i < 4; i++)
			x.samples[i].n_value = 1;
		gz = pack_gzip(&x.pr, &len);
		p = read_ok(gz, len, NULL);
		cr_expect_str_eq(profile_string(p, p->kind), name);
		cr_expect_str_eq(profile_string(p, p->unit), kind_rows[k].unit, "%s", name);
		profile_free(p);
		p = read_ok(gz, len, name);
		profile_free(p);
		free(gz);
	}
}

Test(formats, frames_are_interned_once)
{
	struct profile *p = read_ok(folded, strlen(folded), NULL);

	/* main, work, hot, sys, outer, inner */
	cr_assert_eq(p->n_frames, 6);
	cr_assert_eq(p->n_stacks, 4);
	profile_free(p);
}

/* --- folded details ------------------------------------------------------- */

Test(folded, frame_names_split_into_function_file_and_line)
{
	static const char text[] =
		"c;operator()(int) const;f (x.py);g (lib/y.c:0);h (weird (name));"
		"[thread x];k_[k];py (<string>:3) 1\n";
	struct profile *p = read_ok(text, strlen(text), NULL);

	assert_canon(p, "operator()(int) const;f@x.py;g@lib/y.c;h (weird (name));[thread x];"
			"k[k];py@<string>:3 1\n");
	profile_free(p);
}

Test(folded, malformed_lines_say_which)
{
	static const struct {
		const char *text, *what;
	} bad[] = {
		{ "c;a\n", "no count" },
		{ "c;a 12x\n", "count with junk" },
		{ "c;a -3\n", "negative count" },
		{ "c;a 18446744073709551616\n", "count past 2^64" },
		{ "c;a \n", "empty count" },
		{ "c;;a 1\n", "empty frame" },
		{ "c;a; 1\n", "empty last frame" },
		{ "c; (x.c:1) 1\n", "frame without a name" },
		{ "c;a 1\n 1\n", "a line that is only a count" },
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		read_fails(bad[i].text, strlen(bad[i].text), NULL, -EBADMSG, bad[i].what);
	read_fails("c;a 1\n\0c;b 2\n", 13, NULL, -EBADMSG, "a NUL byte");
	read_fails("c;a 18446744073709551615\nc;b 1\n", 31, NULL, -EOVERFLOW, "a sum past 2^64");
}

Test(folded, stacks_past_the_depth_cap_are_refused)
{
	size_t n = PROFILE_MAX_DEPTH + 1, len = 0;
	char *text = malloc(4 * n + 16);
	struct profile *p;

	cr_assert_not_null(text);
	len += (size_t)sprintf(text, "c");
	for (size_t i = 0; i < n - 1; i++)
		len += (size_t)sprintf(text + len, ";f");
	len += (size_t)sprintf(text + len, " 1\n");
	p = read_ok(text, len, NULL);
	cr_assert_eq(p->stacks[0].depth, PROFILE_MAX_DEPTH, "the cap itself is fine");
	profile_free(p);
	len -= 3;
	len += (size_t)sprintf(text + len, ";f 1\n");
	read_fails(text, len, NULL, -E2BIG, "one frame deeper");
	free(text);
}

Test(folded, empty_input_is_an_empty_profile)
{
	struct profile *p = read_ok("", 0, NULL);

	cr_assert_eq(p->n_stacks, 0);
	cr_assert_eq(p->total, 0);
	profile_free(p);
}

/* --- json details ------------------------------------------------------------ */

Test(json, malformed_documents_say_what)
{
	static const struct {
		const char *text, *what;
	} bad[] = {
		{ "{", "cut short" },
		{ "{\"frames\":[],\"processes\":[]} x", "bytes after the document" },
		{ "{\"frames\":{},\"processes\":[]}", "frames not an array" },
		{ "{\"frames\":[]}", "no processes" },
		{ "{\"frames\":[{\"file\":\"x\"}],\"processes\":[]}", "a frame without a function" },
		{ "{\"frames\":[{\"function\":\"f\",\"line\":-1}],\"processes\":[]}", "negative line" },
		{ "{\"frames\":[{\"function\":\"f\",\"line\":4294967296}],\"processes\":[]}", "line past 32 bits" },
		{ "{\"frames\":[],\"processes\":[{\"pid\":1}]}", "a process without a tree" },
		{ "{\"frames\":[],\"processes\":[{\"tree\":{\"total\":1}}]}", "a node without self" },
		{ "{\"frames\":[],\"processes\":[{\"tree\":{\"self\":-1}}]}", "negative self" },
		{ "{\"frames\":[],\"processes\":[{\"tree\":{\"self\":\"1\"}}]}", "self a string" },
		{ "{\"frames\":[],\"processes\":[{\"tree\":{\"self\":0,\"children\":{}}}]}", "children not an array" },
		{ "{\"frames\":[],\"processes\":[{\"tree\":{\"self\":0,\"children\":[{\"frame\":0,\"self\":1}]}}]}",
		  "a frame index outside the table" },
		{ "{\"frames\":[{\"function\":\"f\"}],\"processes\":[{\"tree\":{\"self\":0,\"children\":[{\"self\":1}]}}]}",
		  "a node with neither frame nor thread" },
		{ "{\"frames\":[{\"function\":\"f\"}],\"processes\":[{\"tree\":{\"self\":0,\"children\":[3]}}]}",
		  "a node that is not an object" },
		{ "{\"kind\":\"cpu\",\"period_ns\":\"x\",\"frames\":[],\"processes\":[]}", "period a string" },
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		read_fails(bad[i].text, strlen(bad[i].text), NULL, -EBADMSG, bad[i].what);
	{
		static const char sum[] =
			"{\"frames\":[{\"function\":\"f\"}],\"processes\":[{\"tree\":{\"self\":0,\"children\":["
			"{\"frame\":0,\"self\":18446744073709551615},{\"frame\":0,\"self\":1}]}}]}";

		read_fails(sum, strlen(sum), NULL, -EOVERFLOW, "a sum past 2^64");
	}
}

/* A chain of n nested nodes, each with self 1. */
static char *json_chain(size_t n, size_t *ret_len)
{
	size_t cap = 64 + n * 48, len = 0;
	char *t = malloc(cap);

	cr_assert_not_null(t);
	len += (size_t)sprintf(t, "{\"frames\":[{\"function\":\"f\"}],\"processes\":[{\"tree\":{\"self\":0,\"children\":[");
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(t + len, "{\"frame\":0,\"self\":1,\"children\":[");
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(t + len, "]}");
	len += (size_t)sprintf(t + len, "]}}]}");
	*ret_len = len;
	return t;
}

Test(json, deep_trees_stop_at_the_cap_without_deep_recursion)
{
	size_t len;
	char *t = json_chain(PROFILE_MAX_DEPTH, &len);
	struct profile *p = read_ok(t, len, NULL);

	/* every node with self is a stack of its path: recursion counts */
	cr_assert_eq(p->n_stacks, PROFILE_MAX_DEPTH);
	cr_assert_eq(p->stacks[PROFILE_MAX_DEPTH - 1].depth, PROFILE_MAX_DEPTH);
	profile_free(p);
	free(t);

	t = json_chain(PROFILE_MAX_DEPTH + 1, &len);
	read_fails(t, len, NULL, -E2BIG, "one node deeper");
	free(t);
	/* far deeper than the cap: json-c's nesting limit stops it first */
	t = json_chain(100000, &len);
	read_fails(t, len, NULL, -EBADMSG, "100000 levels");
	free(t);
}

/* --- pprof details ------------------------------------------------------------ */

typedef void (*breakage)(struct pb_fixture *x);

static void no_strings(struct pb_fixture *x) { x->pr.n_string_table = 0; }
static void first_string_not_empty(struct pb_fixture *x) { x->strings[0] = "x"; }
static void name_outside_table(struct pb_fixture *x) { x->functions[2].name = N_STRINGS; }
static void negative_string_index(struct pb_fixture *x) { x->functions[2].filename = -1; }
static void type_outside_table(struct pb_fixture *x) { x->types[0].type = 99; }
static void no_sample_types(struct pb_fixture *x) { x->pr.n_sample_type = 0; }
static void missing_location(struct pb_fixture *x) { x->ids[0][0] = 42; }
static void missing_function(struct pb_fixture *x) { x->lines[2].function_id = 42; }
static void duplicate_function(struct pb_fixture *x) { x->functions[1].id = 1; }
static void zero_location_id(struct pb_fixture *x) { x->locations[4].id = 0; }
static void value_count(struct pb_fixture *x) { x->samples[1].n_value = 1; }
static void negative_value(struct pb_fixture *x) { x->values[2][0] = -4; }
static void nameless_function(struct pb_fixture *x) { x->functions[0].name = 0; }

Test(pprof, broken_tables_say_what)
{
	static const struct {
		breakage fn;
		const char *what;
	} bad[] = {
		{ no_strings, "no string table" },
		{ first_string_not_empty, "string 0 not empty" },
		{ name_outside_table, "a name outside the string table" },
		{ negative_string_index, "a negative string index" },
		{ type_outside_table, "a sample type outside the string table" },
		{ no_sample_types, "no sample types" },
		{ missing_location, "a sample naming a missing location" },
		{ missing_function, "a line naming a missing function" },
		{ duplicate_function, "two functions with one id" },
		{ zero_location_id, "a location with id 0" },
		{ value_count, "a sample with too few values" },
		{ negative_value, "a negative value" },
		{ nameless_function, "a function without a name" },
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		struct pb_fixture x;
		size_t len;
		uint8_t *gz;

		pb_fixture_init(&x);
		bad[i].fn(&x);
		gz = pack_gzip(&x.pr, &len);
		read_fails(gz, len, NULL, -EBADMSG, bad[i].what);
		free(gz);
	}
}

Test(pprof, not_a_message_and_not_gzip)
{
	static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 0x42, 0x13 };
	size_t len;
	uint8_t *gz = gzip_bytes(junk, sizeof(junk), &len);

	read_fails(gz, len, NULL, -EBADMSG, "gzip of junk");
	gz[len / 2] ^= 0x55;
	gz[len / 2 + 1] ^= 0xaa;
	{
		char err[PROFILE_ERROR_MAX] = "";
		struct profile *p = NULL;

		cr_assert_lt(profile_read((const char *)gz, len, NULL, &p, err), 0, "a corrupt stream read");
		cr_assert(err[0]);
	}
	free(gz);
	read_fails("\x1f\x8b", 2, NULL, -EBADMSG, "the magic alone");
}

Test(pprof, stacks_past_the_depth_cap_are_refused)
{
	struct pb_fixture x;
	uint64_t *ids = malloc((PROFILE_MAX_DEPTH + 1) * sizeof(*ids));
	uint8_t *gz;
	size_t len;

	cr_assert_not_null(ids);
	pb_fixture_init(&x);
	for (size_t i = 0; i <= PROFILE_MAX_DEPTH; i++)
		ids[i] = 2;
	x.samples[0].location_id = ids;
	x.samples[0].n_location_id = PROFILE_MAX_DEPTH + 1;
	gz = pack_gzip(&x.pr, &len);
	read_fails(gz, len, NULL, -E2BIG, "a sample one location past the cap");
	free(gz);
	free(ids);
}

Test(pprof, unpacked_size_is_capped)
{
	/* a small gzip member that unpacks past the cap: zeros compress well */
	size_t n = PROFILE_MAX_UNPACKED_BYTES + 4096, len;
	uint8_t *zeros = calloc(1, n), *gz;

	cr_assert_not_null(zeros);
	gz = gzip_bytes(zeros, n, &len);
	free(zeros);
	cr_assert_lt(len, (size_t)1 << 20);
	read_fails(gz, len, NULL, -EFBIG, "a gzip bomb");
	free(gz);
}

/* --- fuzz-ish: cut short and changed at random ------------------------------ */

/* Reads data; success or an error with a message, never a crash. */
static void read_anything(const uint8_t *data, size_t len)
{
	char err[PROFILE_ERROR_MAX] = "";
	struct profile *p = NULL;
	int r = profile_read((const char *)data, len, NULL, &p, err);

	if (r < 0) {
		cr_assert_null(p);
		cr_assert(r == -ENOMEM || err[0], "error %d without a message", r);
	} else {
		cr_assert_not_null(p);
		for (size_t i = 0; i < p->n_stacks; i++)
			for (uint32_t j = 0; j < p->stacks[i].depth; j++)
				cr_assert_lt(p->pool[p->stacks[i].first + j], p->n_frames);
		profile_free(p);
	}
}

static void fuzz(const uint8_t *good, size_t len, bool prefixes_fail)
{
	uint8_t *copy = malloc(len);
	unsigned seed = 12;

	cr_assert_not_null(copy);
	for (size_t n = 0; n < len; n++) {
		char err[PROFILE_ERROR_MAX] = "";
		struct profile *p = NULL;
		int r;

		memcpy(copy, good, n);
		r = profile_read((const char *)copy, n, NULL, &p, err);
		if (prefixes_fail && n > 0)
			cr_assert_lt(r, 0, "a prefix of %zu of %zu bytes read", n, len);
		profile_free(p);
		read_anything(copy, n);
	}
	for (int round = 0; round < 3000; round++) {
		memcpy(copy, good, len);
		for (int k = 0, changes = 1 + rand_r(&seed) % 4; k < changes; k++)
			copy[rand_r(&seed) % len] = (uint8_t)rand_r(&seed);
		read_anything(copy, len);
	}
	free(copy);
}

Test(fuzz, folded_cut_and_changed, .timeout = 120)
{
	fuzz((const uint8_t *)folded, strlen(folded), false);
}

Test(fuzz, json_cut_and_changed, .timeout = 120)
{
	/* every prefix of the document lacks its closing brace */
	fuzz((const uint8_t *)json, strlen(json) - 1, true);
}

Test(fuzz, pprof_cut_and_changed, .timeout = 120)
{
	size_t len;
	uint8_t *gz = good_pprof(&len);

	fuzz(gz, len, true);
	free(gz);
}

Test(fuzz, pprof_message_changed_before_gzip, .timeout = 120)
{
	struct pb_fixture x;
	size_t n, len;
	uint8_t *raw, *gz;
	unsigned seed = 7;

	pb_fixture_init(&x);
	n = perftools__profiles__profile__get_packed_size(&x.pr);
	raw = malloc(n);
	cr_assert_not_null(raw);
	perftools__profiles__profile__pack(&x.pr, raw);
	for (int round = 0; round < 3000; round++) {
		uint8_t *copy = malloc(n);

		cr_assert_not_null(copy);
		memcpy(copy, raw, n);
		for (int k = 0, changes = 1 + rand_r(&seed) % 3; k < changes; k++)
			copy[rand_r(&seed) % n] = (uint8_t)rand_r(&seed);
		gz = gzip_bytes(copy, rand_r(&seed) % 8 ? n : rand_r(&seed) % n, &len);
		read_anything(gz, len);
		free(gz);
		free(copy);
	}
	free(raw);
}

/* --- files -------------------------------------------------------------------- */

Test(file, errors_of_the_file_itself)
{
	char dir[] = "/tmp/perfd-unit.XXXXXX", path[64];
	char err[PROFILE_ERROR_MAX] = "";
	struct profile *p = NULL;
	int fd;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(profile_read_file(dir, NULL, &p, err), -EISDIR);
	snprintf(path, sizeof(path), "%s/none", dir);
	cr_assert_eq(profile_read_file(path, NULL, &p, err), -ENOENT);

	/* past the cap: refused by its size, before reading */
	snprintf(path, sizeof(path), "%s/big", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)PROFILE_MAX_FILE_BYTES + 1), 0);
	close(fd);
	cr_assert_eq(profile_read_file(path, NULL, &p, err), -EFBIG);
	cr_assert(err[0]);
	unlink(path);

	snprintf(path, sizeof(path), "%s/ok.folded", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_eq(write(fd, folded, strlen(folded)), (ssize_t)strlen(folded));
	close(fd);
	cr_assert_eq(profile_read_file(path, NULL, &p, err), 0, "%s", err);
	assert_canon(p, expected);
	profile_free(p);
	unlink(path);
	rmdir(dir);
}
