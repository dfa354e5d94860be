/* SPDX-License-Identifier: MIT */
/*
 * test-otlp.c - the OTLP profiles encoder (daemon/encode/otlp.c) and the
 * container id the exporter puts in its resource (export/container.c).
 *
 * A model built from hand-made parts (fakemodel.h) is encoded as the
 * exporter does, and the bytes are unpacked with the protobuf-c code
 * generated from proto/opentelemetry/ (v1.8.0); the test then checks the
 * message as an OTLP reader needs it: every dictionary table starts with
 * its zero value and every index resolves, stacks are leaf first and
 * inlined lines innermost first, the sample type per kind, the resource
 * attributes, the labels as sample attributes and the build-ids as
 * mapping attributes.  A real receiver decoding real exports with protoc
 * is tests/integration/test_export.py.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include "encode/encode.h"
#include "export/container.h"
#include "fakemodel.h"

FAKE_SUITE(otlp);

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dictionary;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Location pb_location;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pb_attribute;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;

#define PERIOD_NS 10000000

static pb_request *encode(struct model_opts mo, const char *const *labels, size_t n_labels)
{
	struct model *m = fake_build_opts(mo);
	struct encode_opts eo = { .period_ns = PERIOD_NS, .memory_sample_bytes = 1 << 20,
				  .time_unix_ns = 1700000000000000000ULL, .duration_ns = 5000000000ULL,
				  .labels = labels, .n_labels = n_labels };
	struct otlp_resource res = { .host_name = "box", .service_name = "app.service",
				     .container_id = NULL };
	struct encode_buffer b;
	pb_request *req;

	encode_buffer_init(&b);
	cr_assert_eq(otlp_encode(m, &eo, &res, &b.sink), 0);
	req = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
		NULL, b.len, b.data);
	cr_assert_not_null(req, "not an ExportProfilesServiceRequest");
	encode_buffer_done(&b);
	model_free(m);
	return req;
}

static void done(pb_request *req)
{
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		req, NULL);
}

static const char *str(const pb_dictionary *d, int32_t i)
{
	cr_assert(i >= 0 && (size_t)i < d->n_string_table, "string index %d of %zu", i,
		  d->n_string_table);
	return d->string_table[i];
}

static const pb_profile *the_profile(const pb_request *req)
{
	cr_assert_eq(req->n_resource_profiles, 1);
	cr_assert_eq(req->resource_profiles[0]->n_scope_profiles, 1);
	cr_assert_eq(req->resource_profiles[0]->scope_profiles[0]->n_profiles, 1);
	return req->resource_profiles[0]->scope_profiles[0]->profiles[0];
}

/* Every table starts with its zero value and every index resolves. */
static void check_tables(const pb_request *req)
{
	const pb_dictionary *d = req->dictionary;
	const pb_profile *p = the_profile(req);

	cr_assert_not_null(d);
	cr_assert_gt(d->n_string_table, 0);
	cr_assert_str_eq(d->string_table[0], "");
	cr_assert_gt(d->n_mapping_table, 0);
	cr_assert_eq(d->mapping_table[0]->filename_strindex, 0);
	cr_assert_eq(d->mapping_table[0]->n_attribute_indices, 0);
	cr_assert_gt(d->n_location_table, 0);
	cr_assert_eq(d->location_table[0]->n_line, 0);
	cr_assert_gt(d->n_function_table, 0);
	cr_assert_eq(d->function_table[0]->name_strindex, 0);
	cr_assert_gt(d->n_stack_table, 0);
	cr_assert_eq(d->stack_table[0]->n_location_indices, 0);
	cr_assert_gt(d->n_link_table, 0);
	cr_assert_gt(d->n_attribute_table, 0);
	cr_assert_eq(d->attribute_table[0]->key_strindex, 0);
	for (size_t i = 1; i < d->n_function_table; i++) {
		(void)str(d, d->function_table[i]->name_strindex);
		(void)str(d, d->function_table[i]->filename_strindex);
	}
	for (size_t i = 1; i < d->n_mapping_table; i++) {
		(void)str(d, d->mapping_table[i]->filename_strindex);
		for (size_t j = 0; j < d->mapping_table[i]->n_attribute_indices; j++)
			cr_assert_lt((size_t)d->mapping_table[i]->attribute_indices[j], d->n_attribute_table);
	}
	for (size_t i = 1; i < d->n_location_table; i++) {
		const pb_location *l = d->location_table[i];

		cr_assert_lt((size_t)l->mapping_index, d->n_mapping_table);
		if (l->mapping_index)
			cr_assert_lt(l->address, d->mapping_table[l->mapping_index]->memory_limit);
		cr_assert_gt(l->n_line, 0);
		for (size_t j = 0; j < l->n_line; j++)
			cr_assert(l->line[j]->function_index >= 1 &&
				  (size_t)l->line[j]->function_index < d->n_function_table);
	}
	for (size_t i = 0; i < d->n_attribute_table; i++)
		(void)str(d, d->attribute_table[i]->key_strindex);
	for (size_t i = 0; i < p->n_sample; i++) {
		const pb_sample *s = p->sample[i];

		cr_assert_eq(s->n_values, 1);
		cr_assert(s->stack_index >= 1 && (size_t)s->stack_index < d->n_stack_table);
		for (size_t j = 0; j < d->stack_table[s->stack_index]->n_location_indices; j++) {
			int32_t l = d->stack_table[s->stack_index]->location_indices[j];

			cr_assert(l >= 1 && (size_t)l < d->n_location_table);
		}
		for (size_t j = 0; j < s->n_attribute_indices; j++)
			cr_assert_lt((size_t)s->attribute_indices[j], d->n_attribute_table);
	}
}

static const char *line_function(const pb_dictionary *d, int32_t loc, size_t j)
{
	const pb_location *l = d->location_table[loc];

	cr_assert_lt(j, l->n_line);
	return str(d, d->function_table[l->line[j]->function_index]->name_strindex);
}

static const pb_sample *sample_at(const pb_request *req, const char *leaf)
{
	const pb_dictionary *d = req->dictionary;
	const pb_profile *p = the_profile(req);

	for (size_t i = 0; i < p->n_sample; i++) {
		const Opentelemetry__Proto__Profiles__V1development__Stack *st =
			d->stack_table[p->sample[i]->stack_index];

		if (st->n_location_indices && !strcmp(line_function(d, st->location_indices[0], 0), leaf))
			return p->sample[i];
	}
	cr_assert_fail("no sample with leaf %s", leaf);
	return NULL;
}

/* The value of the sample attribute key (NULL: none). */
static const pb_any *sample_attr(const pb_request *req, const pb_sample *s, const char *key)
{
	const pb_dictionary *d = req->dictionary;

	for (size_t i = 0; i < s->n_attribute_indices; i++) {
		const pb_attribute *a = d->attribute_table[s->attribute_indices[i]];

		if (!strcmp(str(d, a->key_strindex), key))
			return a->value;
	}
	return NULL;
}

static const pb_any *resource_attr(const pb_request *req, const char *key)
{
	const Opentelemetry__Proto__Resource__V1__Resource *r = req->resource_profiles[0]->resource;

	cr_assert_not_null(r);
	for (size_t i = 0; i < r->n_attributes; i++)
		if (!strcmp(r->attributes[i]->key, key))
			return r->attributes[i]->value;
	return NULL;
}

Test(otlp, the_dictionary_resolves_and_stacks_are_leaf_first)
{
	static const char *const labels[] = { "hostname", "box", "team", "perf" };
	pb_request *req;
	const pb_dictionary *d;
	const pb_profile *p;
	const pb_sample *s;
	const pb_location *l;
	const Opentelemetry__Proto__Profiles__V1development__Stack *st;

	fake_add_app("/system.slice/app.service");
	req = encode((struct model_opts){ .kind = PROFILE_KIND_CPU, .lines = true, .python_lines = true },
		     labels, 2);
	check_tables(req);
	d = req->dictionary;
	p = the_profile(req);
	cr_assert_eq(p->n_sample, 3);

	/* leaf first; the inlined location lists inner, then outer */
	s = sample_at(req, "inner");
	st = d->stack_table[s->stack_index];
	cr_assert_eq(st->n_location_indices, 2);
	l = d->location_table[st->location_indices[0]];
	cr_assert_eq(l->n_line, 2);
	cr_assert_str_eq(line_function(d, st->location_indices[0], 0), "inner");
	cr_assert_eq(l->line[0]->line, 20);
	cr_assert_str_eq(line_function(d, st->location_indices[0], 1), "outer");
	cr_assert_str_eq(line_function(d, st->location_indices[1], 0), "main");

	/* the binary's mapping, with its path and build-id attribute */
	cr_assert_neq(l->mapping_index, 0);
	cr_assert_str_eq(str(d, d->mapping_table[l->mapping_index]->filename_strindex), "/usr/bin/app");
	cr_assert_eq(d->mapping_table[l->mapping_index]->n_attribute_indices, 1);
	{
		const pb_attribute *a =
			d->attribute_table[d->mapping_table[l->mapping_index]->attribute_indices[0]];

		cr_assert_str_eq(str(d, a->key_strindex), "process.executable.build_id.gnu");
		cr_assert_str_eq(a->value->string_value, "0123456789abcdef");
	}

	/* cpu: samples/count, with cpu/nanoseconds between samples */
	cr_assert_str_eq(str(d, p->sample_type->type_strindex), "samples");
	cr_assert_str_eq(str(d, p->sample_type->unit_strindex), "count");
	cr_assert_str_eq(str(d, p->period_type->type_strindex), "cpu");
	cr_assert_str_eq(str(d, p->period_type->unit_strindex), "nanoseconds");
	cr_assert_eq(p->period, PERIOD_NS);
	cr_assert_eq(s->values[0], 3);
	cr_assert_eq(p->time_unix_nano, 1700000000000000000ULL);
	cr_assert_eq(p->duration_nano, 5000000000ULL);

	/* the labels, as attributes of every sample */
	cr_assert_eq(sample_attr(req, s, "pid")->int_value, 10);
	cr_assert_str_eq(sample_attr(req, s, "comm")->string_value, "app");
	cr_assert_str_eq(sample_attr(req, s, "cgroup")->string_value, "/system.slice/app.service");
	cr_assert_str_eq(sample_attr(req, s, "unit")->string_value, "app.service");
	cr_assert_str_eq(sample_attr(req, s, "hostname")->string_value, "box");

	/* the resource: the process */
	cr_assert_str_eq(resource_attr(req, "host.name")->string_value, "box");
	cr_assert_eq(resource_attr(req, "process.pid")->int_value, 10);
	cr_assert_str_eq(resource_attr(req, "process.executable.name")->string_value, "app");
	cr_assert_str_eq(resource_attr(req, "service.name")->string_value, "app.service");
	cr_assert_null(resource_attr(req, "container.id"));
	cr_assert_str_eq(req->resource_profiles[0]->scope_profiles[0]->scope->name, "perfd");
	done(req);
}

Test(otlp, memory_is_space_in_bytes)
{
	pb_request *req;
	const pb_dictionary *d;
	const pb_profile *p;

	SET_FAKE_FRAMES(fake_app_frames);
	fake_process(0, 10, "app", NULL);
	fake_add_kind(0, (const uint64_t[]){ FRAME(2, 0x5), FRAME(1, 0x1) }, 2, 0, 1,
		      PROFILE_KIND_MEMORY, 4 << 20);
	req = encode((struct model_opts){ .kind = PROFILE_KIND_MEMORY }, NULL, 0);
	check_tables(req);
	d = req->dictionary;
	p = the_profile(req);
	cr_assert_str_eq(str(d, p->sample_type->type_strindex), "space");
	cr_assert_str_eq(str(d, p->sample_type->unit_strindex), "bytes");
	cr_assert_eq(p->period, 1 << 20);
	cr_assert_eq(p->n_sample, 1);
	cr_assert_eq(p->sample[0]->values[0], 4 << 20);
	done(req);
}

Test(otlp, a_model_of_two_processes_is_refused)
{
	struct encode_opts eo = { .period_ns = PERIOD_NS };
	struct otlp_resource res = { 0 };
	struct model *m;
	struct encode_buffer b;

	encode_buffer_init(&b);
	SET_FAKE_FRAMES(fake_app_frames);
	fake_process(0, 10, "app", NULL);
	fake_process(1, 11, "other", NULL);
	fake_add_kind(0, (const uint64_t[]){ FRAME(1, 0x1) }, 1, 0, 1, PROFILE_KIND_CPU, 1);
	fake_add_kind(1, (const uint64_t[]){ FRAME(1, 0x1) }, 1, 0, 1, PROFILE_KIND_CPU, 1);
	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU });
	cr_assert_eq(otlp_encode(m, &eo, &res, &b.sink), -EINVAL);
	cr_assert_eq(b.len, 0);
	model_free(m);
}

Test(otlp, container_ids_come_from_the_cgroup_path)
{
	static const char id[] = "4b825dc642cb6eb9a060e54bf8d69288fbee4904a5b0c5e1d4b0e1a4f2b3c4d5";
	char buf[CONTAINER_ID_LEN + 1];
	char path[256];

	snprintf(path, sizeof(path), "/system.slice/docker-%s.scope", id);
	cr_assert(container_id_from_cgroup(path, buf, sizeof(buf)));
	cr_assert_str_eq(buf, id);
	snprintf(path, sizeof(path), "/kubepods.slice/kubepods-pod1.slice/cri-containerd-%s.scope", id);
	cr_assert(container_id_from_cgroup(path, buf, sizeof(buf)));
	cr_assert_str_eq(buf, id);
	snprintf(path, sizeof(path), "/docker/%s", id);
	cr_assert(container_id_from_cgroup(path, buf, sizeof(buf)));
	cr_assert_str_eq(buf, id);
	snprintf(path, sizeof(path), "/machine.slice/libpod-%s.scope/container", id);
	cr_assert(container_id_from_cgroup(path, buf, sizeof(buf)));
	cr_assert_str_eq(buf, id);

	cr_assert_not(container_id_from_cgroup("/system.slice/app.service", buf, sizeof(buf)));
	cr_assert_not(container_id_from_cgroup("/user.slice/user-1000.slice/session-2.scope", buf,
					       sizeof(buf)));
	/* 63 and 65 hex digits are no id */
	snprintf(path, sizeof(path), "/docker-%.63s.scope", id);
	cr_assert_not(container_id_from_cgroup(path, buf, sizeof(buf)));
	snprintf(path, sizeof(path), "/docker-%sa.scope", id);
	cr_assert_not(container_id_from_cgroup(path, buf, sizeof(buf)));
	cr_assert_not(container_id_from_cgroup("", buf, sizeof(buf)));
	cr_assert_not(container_id_from_cgroup(NULL, buf, sizeof(buf)));
}
