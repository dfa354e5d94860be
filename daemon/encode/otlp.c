/* SPDX-License-Identifier: MIT */
/*
 * otlp.c - one process's profile as an OTLP profiles export request
 * (proto/opentelemetry/.../profiles_service.proto, opentelemetry-proto
 * v1.8.0), the body of an OTLP/HTTP POST to /v1development/profiles.
 *
 * The request holds one ResourceProfiles (the process: host.name,
 * process.pid, process.executable.name, service.name, container.id where
 * known), one ScopeProfiles (perfd and its version) and one Profile, and
 * the ProfilesDictionary its tables are in.  As in pprof.c, the model is
 * already laid out as the format lays a profile out, so this is a
 * translation, table by table, each table starting with the zero value
 * the format asks for: model mapping i is mapping_table[i + 1], location
 * i location_table[i + 1] (its lines turned innermost first), function i
 * function_table[i + 1]; sample i gets stack_table[i + 1], its locations
 * turned leaf first.  Addresses are file offsets and every mapping is laid
 * at 0 from file offset 0, as pprof.c explains (kernel addresses too: the
 * kernel's own, or 0 where the model hides them); a mapping's build-id is
 * its attribute process.executable.build_id.gnu (the semantic conventions'
 * name for the hex GNU build-id).
 *
 * Values: OTLP v1.8.0 has one sample type per profile, so a CPU profile
 * counts samples/count with period_type cpu/nanoseconds and period the
 * sampling period (the time is samples x period, as pprof's second value
 * states it); memory is space/bytes with period the mean bytes per
 * sample, off-CPU time off_cpu/nanoseconds.  Every sample carries the
 * labels pprof.c gives it (pid, comm, cgroup, unit, then the caller's) as
 * attributes: one attribute_indices list shared by all samples.  The kinds
 * and the labels are protoschema.h's, which pprof.c reads too.
 *
 * The request is packed into one buffer of its packed size (the export
 * worker sends it as it is).  Memory: the protobuf-c structs, a few words
 * per mapping, function, line, location, sample and sample frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include "encode/encode.h"
#include "encode/protoschema.h"
#include "encode/strtable.h"
#include "perfd/macro.h"
#include "perfd/protocol.h"
#include "perfd/version.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles pb_resource_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles pb_scope_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dictionary;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType pb_value_type;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Stack pb_stack;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping pb_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location pb_location;
typedef Opentelemetry__Proto__Profiles__V1development__Line pb_line;
typedef Opentelemetry__Proto__Profiles__V1development__Function pb_function;
typedef Opentelemetry__Proto__Profiles__V1development__Link pb_link;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pb_attribute;
typedef Opentelemetry__Proto__Resource__V1__Resource pb_resource;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope pb_scope;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_key_value;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;

#define BUILD_ID_KEY "process.executable.build_id.gnu"
#define MAX_RESOURCE 5  /* host.name, process.pid, .executable.name, service.name, container.id */

struct otlp {
	const struct model *m;
	struct strtable strings;
	pb_request request;
	pb_resource_profiles resource_profiles, *resource_profiles_ptr;
	pb_resource resource;
	pb_key_value resource_kv[MAX_RESOURCE], *resource_kv_ptrs[MAX_RESOURCE];
	pb_any resource_values[MAX_RESOURCE];
	pb_scope_profiles scope_profiles, *scope_profiles_ptr;
	pb_scope scope;
	pb_profile profile, *profile_ptr;
	pb_value_type sample_type, period_type;
	pb_dictionary dict;
	pb_mapping *mappings, **mapping_ptrs;
	int32_t *mapping_attrs; /* one build-id attribute index per mapping */
	pb_location *locations, **location_ptrs;
	pb_line *lines, **line_ptrs;
	pb_function *functions, **function_ptrs;
	pb_link link, *link_ptr;
	pb_attribute *attrs, **attr_ptrs;
	pb_any *attr_values;
	size_t n_attrs;
	pb_stack *stacks, **stack_ptrs;
	int32_t *stack_locations;
	pb_sample *samples, **sample_ptrs;
	int64_t *values;
	int32_t *sample_attrs; /* shared by every sample */
	size_t n_sample_attrs;
};

/* Appends attribute key = a string value (strings already indexed, or
 * text) or an int, to the attribute table.  Returns its index or -ENOMEM. */
static int32_t add_attr(struct otlp *p, const char *key, const char *text, int64_t model_id,
			bool is_int, int64_t num)
{
	pb_attribute *a = &p->attrs[p->n_attrs];
	pb_any *v = &p->attr_values[p->n_attrs];
	int64_t k = strtable_add(&p->strings, key);

	if (k < 0)
		return -ENOMEM;
	opentelemetry__proto__profiles__v1development__key_value_and_unit__init(a);
	opentelemetry__proto__common__v1__any_value__init(v);
	a->key_strindex = (int32_t)k;
	if (is_int) {
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		v->int_value = num;
	} else {
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		/* protobuf-c wants char *; packing only reads it */
		v->string_value = (char *)(text ? text : model_string(p->m, (uint32_t)model_id));
	}
	a->value = v;
	p->attr_ptrs[p->n_attrs] = a;
	return (int32_t)p->n_attrs++;
}

static int build_mappings(struct otlp *p)
{
	const struct model *m = p->m;

	p->mappings = alloc_zeroed(m->n_mappings + 1, sizeof(*p->mappings));
	p->mapping_ptrs = alloc_zeroed(m->n_mappings + 1, sizeof(*p->mapping_ptrs));
	p->mapping_attrs = alloc_zeroed(m->n_mappings, sizeof(*p->mapping_attrs));
	if (!p->mappings || !p->mapping_ptrs || !p->mapping_attrs)
		return -ENOMEM;
	for (size_t i = 0; i <= m->n_mappings; i++) {
		pb_mapping *mp = &p->mappings[i];

		opentelemetry__proto__profiles__v1development__mapping__init(mp);
		p->mapping_ptrs[i] = mp;
		if (i == 0)
			continue; /* the zero value */
		int64_t f = strtable_model(&p->strings, m->mappings[i - 1].path);
		uint32_t build_id = m->mappings[i - 1].build_id;

		if (f < 0)
			return -ENOMEM;
		mp->filename_strindex = (int32_t)f;
		if (build_id && model_string(m, build_id)[0]) {
			int32_t a = add_attr(p, BUILD_ID_KEY, NULL, build_id, false, 0);

			if (a < 0)
				return a;
			p->mapping_attrs[i - 1] = a;
			mp->n_attribute_indices = 1;
			mp->attribute_indices = &p->mapping_attrs[i - 1];
		}
	}
	p->dict.n_mapping_table = m->n_mappings + 1;
	p->dict.mapping_table = p->mapping_ptrs;
	return 0;
}

static int build_functions(struct otlp *p)
{
	const struct model *m = p->m;

	p->functions = alloc_zeroed(m->n_functions + 1, sizeof(*p->functions));
	p->function_ptrs = alloc_zeroed(m->n_functions + 1, sizeof(*p->function_ptrs));
	if (!p->functions || !p->function_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i <= m->n_functions; i++) {
		pb_function *f = &p->functions[i];

		opentelemetry__proto__profiles__v1development__function__init(f);
		p->function_ptrs[i] = f;
		if (i == 0)
			continue;
		int64_t name = strtable_model(&p->strings, m->functions[i - 1].name);
		int64_t file = strtable_model(&p->strings, m->functions[i - 1].file);

		if (name < 0 || file < 0)
			return -ENOMEM;
		f->name_strindex = f->system_name_strindex = (int32_t)name;
		f->filename_strindex = (int32_t)file;
		f->start_line = m->functions[i - 1].start_line;
	}
	p->dict.n_function_table = m->n_functions + 1;
	p->dict.function_table = p->function_ptrs;
	return 0;
}

/* Locations and their lines, innermost first; each mapping's limit is set
 * past the highest address in it. */
static int build_locations(struct otlp *p)
{
	const struct model *m = p->m;

	p->locations = alloc_zeroed(m->n_locations + 1, sizeof(*p->locations));
	p->location_ptrs = alloc_zeroed(m->n_locations + 1, sizeof(*p->location_ptrs));
	p->lines = alloc_zeroed(m->n_lines, sizeof(*p->lines));
	p->line_ptrs = alloc_zeroed(m->n_lines, sizeof(*p->line_ptrs));
	if (!p->locations || !p->location_ptrs || !p->lines || !p->line_ptrs)
		return -ENOMEM;
	opentelemetry__proto__profiles__v1development__location__init(&p->locations[0]);
	p->location_ptrs[0] = &p->locations[0];
	for (size_t i = 0; i < m->n_locations; i++) {
		const struct model_location *l = &m->locations[i];
		pb_location *loc = &p->locations[i + 1];

		opentelemetry__proto__profiles__v1development__location__init(loc);
		loc->mapping_index = (int32_t)l->mapping; /* model: index + 1, 0 none */
		/* a kernel location's is 0 for who may not see it (model.h) */
		if (l->kind == FRAME_KIND_NATIVE || l->kind == FRAME_KIND_JIT ||
		    l->kind == FRAME_KIND_KERNEL)
			loc->address = l->offset;
		if (l->mapping) {
			pb_mapping *mp = &p->mappings[l->mapping];

			mp->memory_limit = MAX(mp->memory_limit, loc->address + 1);
		}
		for (uint32_t j = 0; j < l->n_lines; j++) {
			const struct model_line *ml = &m->lines[l->first_line + j];
			pb_line *ln = &p->lines[l->first_line + j];

			opentelemetry__proto__profiles__v1development__line__init(ln);
			ln->function_index = (int32_t)ml->function + 1;
			ln->line = ml->line;
			p->line_ptrs[l->first_line + (l->n_lines - 1 - j)] = ln;
		}
		loc->n_line = l->n_lines;
		loc->line = p->line_ptrs + l->first_line;
		p->location_ptrs[i + 1] = loc;
	}
	p->dict.n_location_table = m->n_locations + 1;
	p->dict.location_table = p->location_ptrs;
	return 0;
}

/* The labels every sample shares (pprof.c's: the process's, then the
 * caller's), as attributes. */
static int build_sample_attrs(struct otlp *p, const struct encode_opts *o)
{
	struct proto_label pl[PROTO_MAX_PROCESS_LABELS];
	size_t n = proto_process_labels(&p->m->processes[0], pl);
	int32_t a;

	p->sample_attrs =
		alloc_zeroed(PROTO_MAX_PROCESS_LABELS + o->n_labels, sizeof(*p->sample_attrs));
	if (!p->sample_attrs)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		if ((a = add_attr(p, proto_label_keys[pl[k].key], NULL, pl[k].str, pl[k].is_num,
				  pl[k].num)) < 0)
			return a;
		p->sample_attrs[p->n_sample_attrs++] = a;
	}
	for (size_t k = 0; k < o->n_labels; k++) {
		if ((a = add_attr(p, o->labels[2 * k], o->labels[2 * k + 1], 0, false, 0)) < 0)
			return a;
		p->sample_attrs[p->n_sample_attrs++] = a;
	}
	return 0;
}

static int build_samples(struct otlp *p, const struct encode_opts *o)
{
	const struct model *m = p->m;
	const struct proto_kind *kind = &proto_kinds[proto_kind_of(m)];
	int64_t period = proto_period(proto_kind_of(m), o);

	p->stacks = alloc_zeroed(m->n_samples + 1, sizeof(*p->stacks));
	p->stack_ptrs = alloc_zeroed(m->n_samples + 1, sizeof(*p->stack_ptrs));
	p->stack_locations = alloc_zeroed(m->n_pool, sizeof(*p->stack_locations));
	p->samples = alloc_zeroed(m->n_samples, sizeof(*p->samples));
	p->sample_ptrs = alloc_zeroed(m->n_samples, sizeof(*p->sample_ptrs));
	p->values = alloc_zeroed(m->n_samples, sizeof(*p->values));
	if (!p->stacks || !p->stack_ptrs || !p->stack_locations || !p->samples || !p->sample_ptrs ||
	    !p->values)
		return -ENOMEM;
	opentelemetry__proto__profiles__v1development__stack__init(&p->stacks[0]);
	p->stack_ptrs[0] = &p->stacks[0];
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];
		pb_stack *st = &p->stacks[i + 1];
		pb_sample *ps = &p->samples[i];

		opentelemetry__proto__profiles__v1development__stack__init(st);
		/* the model's pool is root first, one range per sample */
		for (uint32_t k = 0; k < s->depth; k++)
			p->stack_locations[s->first + k] =
				(int32_t)m->stack_pool[s->first + s->depth - 1 - k] + 1;
		st->n_location_indices = s->depth;
		st->location_indices = p->stack_locations + s->first;
		p->stack_ptrs[i + 1] = st;

		opentelemetry__proto__profiles__v1development__sample__init(ps);
		ps->stack_index = (int32_t)i + 1;
		p->values[i] = proto_value(kind, 0, s->value, period); /* the first type alone */
		ps->n_values = 1;
		ps->values = &p->values[i];
		ps->n_attribute_indices = p->n_sample_attrs;
		ps->attribute_indices = p->sample_attrs;
		p->sample_ptrs[i] = ps;
	}
	p->dict.n_stack_table = m->n_samples + 1;
	p->dict.stack_table = p->stack_ptrs;
	p->profile.n_sample = m->n_samples;
	p->profile.sample = p->sample_ptrs;
	return 0;
}

/* The resource: the process, as the semantic conventions name it. */
static int build_resource(struct otlp *p, const struct otlp_resource *res)
{
	const struct model_process *pr = &p->m->processes[0];
	const char *keys[MAX_RESOURCE] = { "host.name", "process.pid", "process.executable.name",
					   "service.name", "container.id" };
	const char *texts[MAX_RESOURCE] = { res->host_name, NULL, model_string(p->m, pr->comm),
					    res->service_name, res->container_id };
	size_t n = 0;

	opentelemetry__proto__resource__v1__resource__init(&p->resource);
	for (size_t i = 0; i < MAX_RESOURCE; i++) {
		pb_key_value *kv = &p->resource_kv[n];
		pb_any *v = &p->resource_values[n];

		if (i != 1 && (!texts[i] || !texts[i][0]))
			continue;
		opentelemetry__proto__common__v1__key_value__init(kv);
		opentelemetry__proto__common__v1__any_value__init(v);
		kv->key = (char *)keys[i];
		if (i == 1) {
			v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
			v->int_value = pr->pid;
		} else {
			v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
			v->string_value = (char *)texts[i];
		}
		kv->value = v;
		p->resource_kv_ptrs[n++] = kv;
	}
	p->resource.n_attributes = n;
	p->resource.attributes = p->resource_kv_ptrs;
	return 0;
}

static int value_type(struct otlp *p, pb_value_type *vt, const struct proto_value_type *type)
{
	int64_t t = strtable_add(&p->strings, type->type), u = strtable_add(&p->strings, type->unit);

	if (t < 0 || u < 0)
		return -ENOMEM;
	opentelemetry__proto__profiles__v1development__value_type__init(vt);
	vt->type_strindex = (int32_t)t;
	vt->unit_strindex = (int32_t)u;
	return 0;
}

static int build(struct otlp *p, const struct model *m, const struct encode_opts *o,
		 const struct otlp_resource *res)
{
	enum profile_kind kind = proto_kind_of(m);
	pb_profile *pr = &p->profile;
	size_t n_attrs;
	int r;

	if (m->n_processes != 1)
		return -EINVAL;
	p->m = m;
	if (strtable_init(&p->strings, m) < 0)
		return -ENOMEM;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(
		&p->request);
	opentelemetry__proto__profiles__v1development__resource_profiles__init(&p->resource_profiles);
	opentelemetry__proto__profiles__v1development__scope_profiles__init(&p->scope_profiles);
	opentelemetry__proto__common__v1__instrumentation_scope__init(&p->scope);
	opentelemetry__proto__profiles__v1development__profile__init(pr);
	opentelemetry__proto__profiles__v1development__profiles_dictionary__init(&p->dict);
	opentelemetry__proto__profiles__v1development__link__init(&p->link);

	/* attributes: the zero value, a build-id per mapping, the labels */
	n_attrs = 1 + m->n_mappings + PROTO_MAX_PROCESS_LABELS + o->n_labels;
	p->attrs = alloc_zeroed(n_attrs, sizeof(*p->attrs));
	p->attr_ptrs = alloc_zeroed(n_attrs, sizeof(*p->attr_ptrs));
	p->attr_values = alloc_zeroed(n_attrs, sizeof(*p->attr_values));
	if (!p->attrs || !p->attr_ptrs || !p->attr_values)
		return -ENOMEM;
	opentelemetry__proto__profiles__v1development__key_value_and_unit__init(&p->attrs[0]);
	p->attr_ptrs[p->n_attrs++] = &p->attrs[0];

	/* OTLP v1.8.0: one sample type, the kind's first */
	if ((r = value_type(p, &p->sample_type, &proto_kinds[kind].values[0])) < 0 ||
	    (r = value_type(p, &p->period_type, &proto_kinds[kind].period)) < 0)
		return r;
	pr->sample_type = &p->sample_type;
	pr->period_type = &p->period_type;
	pr->period = proto_period(kind, o);
	pr->time_unix_nano = o->time_unix_ns;
	pr->duration_nano = o->duration_ns;

	if ((r = build_mappings(p)) < 0 || (r = build_functions(p)) < 0 ||
	    (r = build_locations(p)) < 0 || (r = build_sample_attrs(p, o)) < 0 ||
	    (r = build_samples(p, o)) < 0 || (r = build_resource(p, res)) < 0)
		return r;

	p->link_ptr = &p->link;
	p->dict.n_link_table = 1;
	p->dict.link_table = &p->link_ptr;
	p->dict.n_attribute_table = p->n_attrs;
	p->dict.attribute_table = p->attr_ptrs;
	/* last: interning may have moved the table */
	p->dict.n_string_table = p->strings.n;
	p->dict.string_table = p->strings.strings;

	p->scope.name = (char *)"perfd";
	p->scope.version = (char *)perfd_version;
	p->profile_ptr = pr;
	p->scope_profiles.scope = &p->scope;
	p->scope_profiles.n_profiles = 1;
	p->scope_profiles.profiles = &p->profile_ptr;
	p->scope_profiles_ptr = &p->scope_profiles;
	p->resource_profiles.resource = &p->resource;
	p->resource_profiles.n_scope_profiles = 1;
	p->resource_profiles.scope_profiles = &p->scope_profiles_ptr;
	p->resource_profiles_ptr = &p->resource_profiles;
	p->request.n_resource_profiles = 1;
	p->request.resource_profiles = &p->resource_profiles_ptr;
	p->request.dictionary = &p->dict;
	return 0;
}

static void otlp_done(struct otlp *p)
{
	strtable_done(&p->strings);
	free(p->mappings);
	free(p->mapping_ptrs);
	free(p->mapping_attrs);
	free(p->locations);
	free(p->location_ptrs);
	free(p->lines);
	free(p->line_ptrs);
	free(p->functions);
	free(p->function_ptrs);
	free(p->attrs);
	free(p->attr_ptrs);
	free(p->attr_values);
	free(p->stacks);
	free(p->stack_ptrs);
	free(p->stack_locations);
	free(p->samples);
	free(p->sample_ptrs);
	free(p->values);
	free(p->sample_attrs);
}

/* protobuf-c's packing, straight into a sink; the first error kept. */
struct pack_sink {
	ProtobufCBuffer base; /* first: protobuf-c hands this back to append */
	struct encode_sink *out;
	int error;
};

static void pack_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
	struct pack_sink *s = (struct pack_sink *)buffer;

	if (s->error == 0)
		s->error = encode_sink_write(s->out, data, len);
}

int otlp_encode(const struct model *m, const struct encode_opts *o,
		const struct otlp_resource *res, struct encode_sink *out)
{
	_cleanup_free_ struct otlp *p = calloc(1, sizeof(*p));
	struct pack_sink s = { .base.append = pack_append, .out = out };
	int r;

	if (!p)
		return -ENOMEM;
	r = build(p, m, o, res);
	if (r == 0 && encode_cancelled(o))
		r = -ECANCELED;
	if (r == 0 &&
	    !encode_sink_reserve(out,
				 opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(
					 &p->request)))
		r = -ENOMEM;
	if (r == 0) {
		(void)opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack_to_buffer(
			&p->request, &s.base);
		r = s.error;
	}
	otlp_done(p);
	return r;
}
