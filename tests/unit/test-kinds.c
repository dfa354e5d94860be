/* SPDX-License-Identifier: MIT */
/*
 * test-kinds.c - the rows of include/perfd/kinds.h against every table and
 * switch made from them: base/kindtab.h's table and lookups (and what each
 * kind said before the rows), pprof's types (encode/protoschema.h), what the encoders
 * write per kind (speedscope, json), the kinds top offers, and the lists
 * in perfctl's usage.  The rows are expanded here on their own, so a
 * table that stops following them (a column read wrong, a row skipped, a
 * list written by hand) fails here.  The CLI's reader is checked against
 * the rows in test-profile-read.c (its struct profile is not the
 * daemon's).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "api/request.h"
#include "api/cmd_top.h"
#include "base/jsonw.h"
#include "base/kindtab.h"
#include "encode/encode.h"
#include "encode/protoschema.h"
#include "fakemodel.h"
#include "perfctl.h"
#include "perfd/kinds.h"
#include "perfd/sample.h"
#include "profile/profile.h"

struct row {
	const char *id;
	int value;
	struct kind_info info; /* as the row has it */
};

#define ROW(id_, value_, name, unit, title, kernel, period, counts, kskip, ptype, punit)        \
	{ #id_, value_,                                                                              \
	  { name, unit, title, kernel, PERFD_KIND_PERIOD_##period, PERFD_KIND_COUNTS_##counts, kskip, \
	    ptype, punit } },
static const struct row rows[] = { PERFD_KINDS(ROW) };
#define N_ROWS ELEMENTSOF(rows)

FAKE_SUITE(kinds);

Test(kinds, rows_are_distinct_and_fit_the_key)
{
	/* values 0..n-1, each once: kindtab.c's _Static_asserts */
	for (size_t i = 0; i < N_ROWS; i++) {
		cr_expect_lt((uint64_t)rows[i].value, 1u << 7, "%s: the key has 7 kind bits", rows[i].id);
		for (size_t j = 0; j < i; j++) {
			cr_expect_str_neq(rows[i].info.name, rows[j].info.name);
			/* a pprof file's kind is found by its first type */
			cr_expect_str_neq(kind_pprof_first_type(&kind_infos[i]),
					  kind_pprof_first_type(&kind_infos[j]));
		}
	}
}

/* What each kind said before kinds.h, from the tables it replaced
 * (profile.c, protoschema.c, speedscope.c, flamesvg.c's titles, report's
 * and diff's kernel-frame rule, aggregate.c's memory skip): the rows must
 * still say it.  A new kind adds its line here. */
static const struct known {
	int value;
	struct kind_info info;
} known[] = {
	{ PERFD_VALUE_CPU, { "cpu", "samples", "CPU", true, PERFD_KIND_PERIOD_PERIODS,
			     PERFD_KIND_COUNTS_CPU, 0, "cpu", "nanoseconds" } },
	{ PERFD_VALUE_MEMORY, { "memory", "bytes", "Memory growth", false, PERFD_KIND_PERIOD_BYTES,
				PERFD_KIND_COUNTS_MEMORY, 2, "space", "bytes" } },
	{ PERFD_VALUE_OFFCPU, { "offcpu", "nanoseconds", "Off-CPU", true, PERFD_KIND_PERIOD_NONE,
				PERFD_KIND_COUNTS_WAIT, 3, "off_cpu", "nanoseconds" } },
	{ PERFD_VALUE_WALL, { "wall", "nanoseconds", "Wall clock", true, PERFD_KIND_PERIOD_NONE,
			      PERFD_KIND_COUNTS_TIME, 0, "wall", "nanoseconds" } },
};

Test(kinds, each_kind_says_what_it_said_before)
{
	cr_assert_eq(ELEMENTSOF(known), N_ROWS, "a kind without its known line here");
	for (size_t i = 0; i < ELEMENTSOF(known); i++) {
		const struct kind_info *k = &kind_infos[known[i].value], *w = &known[i].info;

		cr_expect_str_eq(k->name, w->name);
		cr_expect_str_eq(k->unit, w->unit, "%s", w->name);
		cr_expect_str_eq(k->title, w->title, "%s", w->name);
		cr_expect_eq(k->kernel_frames, w->kernel_frames, "%s", w->name);
		cr_expect_eq(k->period, w->period, "%s", w->name);
		cr_expect_eq(k->counts, w->counts, "%s", w->name);
		cr_expect_eq(k->kernel_skip, w->kernel_skip, "%s", w->name);
		cr_expect_str_eq(k->pprof_type, w->pprof_type, "%s", w->name);
		cr_expect_str_eq(k->pprof_unit, w->pprof_unit, "%s", w->name);
		cr_expect_eq(kind_name_kernel_frames(w->name), w->kernel_frames, "%s", w->name);
	}
	cr_expect(kind_name_kernel_frames("alloc_space"), "another tool's kind keeps kernel frames");
}

Test(kinds, names_and_numbers_look_each_other_up)
{
	for (size_t i = 0; i < N_ROWS; i++) {
		const char *name = rows[i].info.name;

		cr_expect_eq(kind_find(name, strlen(name)), rows[i].value, "%s", name);
		cr_expect_eq(kind_by_name(name), &kind_infos[rows[i].value], "%s", name);
		/* a prefix is not the kind */
		cr_expect_eq(kind_find(name, strlen(name) - 1), -EINVAL, "%s", name);
	}
	cr_expect_eq(kind_find("", 0), -EINVAL);
	cr_expect_eq(kind_find("cpux", 4), -EINVAL);
	cr_expect_null(kind_by_name("CPU"));
	cr_expect_null(kind_by_name("gpu"));
}

/* What the store rescales at a new sampling period and counts as samples
 * follows the rows: a kind counted in periods is rescaled; one whose
 * samples count adds to samples expired and evicted. */
Test(kinds, rescaling_and_sample_counts_follow_the_rows)
{
	uint64_t values[PERFD_VALUE_KINDS], want = 0;

	for (size_t i = 0; i < N_ROWS; i++) {
		int k = rows[i].value;

		cr_expect_eq(kind_in_periods(k), rows[i].info.period == PERFD_KIND_PERIOD_PERIODS, "%s",
			     rows[i].id);
		cr_expect_eq(kind_counts_samples(k), rows[i].info.counts == PERFD_KIND_COUNTS_CPU, "%s",
			     rows[i].id);
		values[k] = 1000u << (3 * i);
		if (rows[i].info.counts == PERFD_KIND_COUNTS_CPU)
			want += values[k];
	}
	cr_expect_eq(kind_samples_of(values), want);
	/* as of now: cpu alone is both */
	cr_expect(kind_in_periods(PERFD_VALUE_CPU));
	cr_expect(kind_counts_samples(PERFD_VALUE_CPU));
	cr_expect_not(kind_in_periods(PERFD_VALUE_MEMORY));
	cr_expect_not(kind_counts_samples(PERFD_VALUE_MEMORY));
	cr_expect_not(kind_in_periods(-1));
	cr_expect_not(kind_in_periods(PERFD_VALUE_KINDS));
}

/* The rows' names joined at run time, to hold the literals against. */
static void join(char *buf, size_t size, const char *sep, const char *last)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_ROWS; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%s",
				       i == 0 ? "" : i + 1 == N_ROWS ? last : sep, rows[i].info.name);
	cr_assert_lt(at, size);
}

Test(kinds, usage_lists_every_row_in_order)
{
	const struct ctl_command *const cmds[] = { &ctl_cmd_snapshot, &ctl_cmd_record, &ctl_cmd_report,
						   &ctl_cmd_diff };
	char bar[256], words[256], option[300];

	join(bar, sizeof(bar), "|", "|");
	join(words, sizeof(words), ", ", " or ");
	cr_expect_str_eq(PERFD_KIND_NAMES("|", "|"), bar);
	cr_expect_str_eq(PERFD_KIND_NAMES(", ", " or "), words);
	snprintf(option, sizeof(option), "[--kind %s]", bar);
	for (size_t i = 0; i < ELEMENTSOF(cmds); i++)
		cr_expect_not_null(strstr(cmds[i]->synopsis, option), "%s: %s", cmds[i]->name,
				   cmds[i]->synopsis);
}

Test(kinds, pprof_types_follow_the_rows)
{
	struct encode_opts o = { .period_ns = 7, .memory_sample_bytes = 9 };

	for (size_t i = 0; i < N_ROWS; i++) {
		const struct proto_kind *k = &proto_kinds[rows[i].value];
		bool periods = rows[i].info.period == PERFD_KIND_PERIOD_PERIODS;
		size_t last;

		cr_assert_eq(k->n_values, periods ? 2u : 1u, "%s", rows[i].id);
		last = k->n_values - 1;
		cr_expect_str_eq(k->values[last].type, rows[i].info.pprof_type, "%s", rows[i].id);
		cr_expect_str_eq(k->values[last].unit, rows[i].info.pprof_unit, "%s", rows[i].id);
		cr_expect_eq(k->times_period[last], periods, "%s", rows[i].id);
		cr_expect_str_eq(k->period.type, rows[i].info.pprof_type, "%s", rows[i].id);
		cr_expect_str_eq(k->period.unit, rows[i].info.pprof_unit, "%s", rows[i].id);
		cr_expect_str_eq(k->values[0].type, kind_pprof_first_type(&kind_infos[i]));
		if (periods) {
			cr_expect_str_eq(k->values[0].type, "samples");
			cr_expect_str_eq(k->values[0].unit, "count");
			cr_expect_not(k->times_period[0]);
		}
		cr_expect_eq(proto_period((enum profile_kind)rows[i].value, &o),
			     periods ? 7 : rows[i].info.period == PERFD_KIND_PERIOD_BYTES ? 9 : 0, "%s",
			     rows[i].id);
	}
}

static json_object *encode_kind(fake_encoder *encode, enum profile_kind kind)
{
	static const struct fake_frame frames[] = {
		{ FRAME(1, 0x1), 1, { NATIVE("main", "/src/main.c", 3, 1) } },
	};
	struct encode_opts eo = { .period_ns = 1000, .memory_sample_bytes = 4096 };
	struct model *m;
	json_object *o;

	fake_teardown(); /* a model of this kind alone */
	fake_setup();
	SET_FAKE_FRAMES(frames);
	fake_process(0, 10, "app", NULL);
	fake_add_kind(0, (const uint64_t[]){ FRAME(1, 0x1) }, 1, 0, 1, kind, 3);
	m = fake_build_opts((struct model_opts){ .kind = kind });
	o = fake_encode_json(encode, m, &eo);
	model_free(m);
	return o;
}

/* speedscope's weights are in the pprof unit (the value times the period
 * for a PERIODS kind); json says the kind, its unit and a PERIODS kind's
 * period. */
Test(kinds, encoders_follow_the_rows)
{
	for (size_t i = 0; i < N_ROWS; i++) {
		enum profile_kind kind = (enum profile_kind)rows[i].value;
		bool periods = rows[i].info.period == PERFD_KIND_PERIOD_PERIODS;
		json_object *doc = encode_kind(speedscope_encode, kind);
		json_object *p = json_object_array_get_idx(fake_get(doc, "profiles"), 0);
		char name[64];

		snprintf(name, sizeof(name), "perfd %s snapshot", rows[i].info.name);
		cr_expect_str_eq(json_object_get_string(fake_get(doc, "name")), name);
		cr_expect_str_eq(json_object_get_string(fake_get(p, "unit")), rows[i].info.pprof_unit, "%s",
				 rows[i].id);
		cr_expect_eq(json_object_get_int64(json_object_array_get_idx(fake_get(p, "weights"), 0)),
			     periods ? 3000 : 3, "%s", rows[i].id);
		json_object_put(doc);

		doc = encode_kind(json_encode, kind);
		cr_expect_str_eq(json_object_get_string(fake_get(doc, "kind")), rows[i].info.name);
		cr_expect_str_eq(json_object_get_string(fake_get(doc, "unit")), rows[i].info.unit);
		cr_expect_eq(json_object_object_get_ex(doc, "period_ns", NULL), periods, "%s",
			     rows[i].id);
		json_object_put(doc);
	}
}

/* top offers the kinds something produces (off-CPU time: its wait view;
 * not wall clock, made of two per thread), cpu by default, and names
 * them when it refuses one. */
Test(kinds, top_offers_the_produced_kinds)
{
	struct perfd_request r;
	struct perfd_request_error e;
	char line[256];

	for (size_t i = 0; i < N_ROWS; i++) {
		bool produced = kind_in_top((int)rows[i].value);
		int k;

		snprintf(line, sizeof(line),
			 "{\"version\":1,\"command\":\"top\",\"view\":\"functions\",\"kind\":\"%s\"}", rows[i].info.name);
		memset(&e, 0, sizeof(e));
		k = request_parse(line, strlen(line), &r, &e);
		cr_expect_eq(k, produced ? 0 : -EINVAL, "%s: %d %s", rows[i].id, k,
			     e.message);
		if (k == 0)
			cr_expect_eq(REQUEST_ARGS(&r, struct top_args)->kind, rows[i].value, "%s", rows[i].id);
		else
			for (size_t j = 0; j < N_ROWS; j++)
				if (kind_in_top((int)rows[j].value))
					cr_expect_not_null(strstr(e.message, rows[j].info.name), "%s",
							   e.message);
	}
	snprintf(line, sizeof(line), "{\"version\":1,\"command\":\"top\",\"view\":\"functions\"}");
	cr_assert_eq(request_parse(line, strlen(line), &r, &e), 0);
	cr_expect_eq(REQUEST_ARGS(&r, struct top_args)->kind, PROFILE_KIND_CPU);
	cr_expect(kind_in_top(PERFD_VALUE_OFFCPU));
	cr_expect_not(kind_in_top(PERFD_VALUE_WALL));
}

/* A wall profile is the kinds that are time, in nanoseconds: a CPU value
 * (periods) times the period, an off-CPU value as it is, memory not at
 * all; any other kind takes its own values only. */
Test(kinds, a_wall_profile_sums_cpu_and_off_cpu_time)
{
	cr_expect_eq(kind_value_in(PERFD_VALUE_WALL, PERFD_VALUE_CPU, 3, 10000000), 30000000);
	cr_expect_eq(kind_value_in(PERFD_VALUE_WALL, PERFD_VALUE_OFFCPU, 250, 10000000), 250);
	cr_expect_eq(kind_value_in(PERFD_VALUE_WALL, PERFD_VALUE_MEMORY, 4096, 10000000), 0);
	cr_expect_eq(kind_value_in(PERFD_VALUE_CPU, PERFD_VALUE_CPU, 3, 10000000), 3);
	cr_expect_eq(kind_value_in(PERFD_VALUE_CPU, PERFD_VALUE_OFFCPU, 250, 10000000), 0);
	cr_expect_eq(kind_value_in(PERFD_VALUE_OFFCPU, PERFD_VALUE_CPU, 3, 10000000), 0);
	cr_expect_eq(kind_value_in(PERFD_VALUE_MEMORY, PERFD_VALUE_MEMORY, 4096, 10000000), 4096);
	cr_expect_eq(kind_value_in(PERFD_VALUE_WALL, PERFD_VALUE_KINDS, 3, 10000000), 0);
}
