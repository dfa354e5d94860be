/* SPDX-License-Identifier: MIT */
/*
 * pprof.c - the pprof format: a gzipped profile.proto message
 * (proto/profile.proto), as go tool pprof, Pyroscope and Parca read it.
 *
 * The model is laid out as profile.proto lays a profile out, so this is a
 * translation, table by table: model function i is Function i + 1,
 * location i is Location i + 1 with its lines turned innermost first (the
 * model keeps them outermost first; pprof wants the caller that the others
 * were inlined into last), mapping i is Mapping i + 1, and each sample's
 * locations are turned leaf first.  Strings get their pprof index when
 * first used; index 0 is "".
 *
 * Addresses are file offsets (frames are normalized at ingest), so every
 * Mapping is laid at address 0 from file offset 0: a location's address is
 * its offset in the file, and a tool that symbolizes again by build-id
 * finds the right code.  Every Mapping says it has functions, files, lines
 * and inlined frames, so pprof does not symbolize it again from whatever
 * binary of that name the reading machine has.  The kernel is one Mapping
 * too, "[kernel.kallsyms]" with the running kernel's build-id, as perf
 * names it; its locations' addresses are the kernel's own (KASLR-shifted)
 * virtual addresses, and frames in kernel modules share it (their
 * addresses are the kernel's as well), or 0 (no address) in a profile for
 * whom the kernel would hide them (model.h), where the kernel's Mapping
 * spans [0, 1).  Python frames have no Mapping.
 * Function.start_line is the model's: the decl line of a native function
 * (with lines), co_firstlineno of a Python one, 0 (unknown) otherwise.
 *
 * Values: a CPU sample is [samples/count, cpu/nanoseconds = samples x
 * period], memory [space/bytes], off-CPU time [off_cpu/nanoseconds].
 * Labels: pid and comm on every sample, cgroup and unit where known, then
 * the caller's (an exported profile's hostname and the configured labels),
 * then tid when threads are kept apart.  The kinds and the label keys are
 * protoschema.h's, which OTLP (otlp.c) reads too; their strings lead the
 * string table, all of them whatever the kind.
 *
 * protobuf-c packs the message straight into zlib's deflate (gzip framing)
 * and the compressed bytes go straight to the sink (a snapshot answer's
 * frame, an exporter's buffer): the packed profile is never held whole.
 * Memory: the protobuf-c structs, a few words per function, line,
 * location, sample and sample frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"

#include "encode/encode.h"
#include "encode/protoschema.h"
#include "encode/strtable.h"
#include "perfd/macro.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

#define PROCESS_LABELS(p) (PROTO_MAX_PROCESS_LABELS + (p)->n_extra) /* room per process */
#define MAX_LABELS(p) (PROCESS_LABELS(p) + 1)                          /* and tid, per sample */

struct pprof {
	const struct model *m;
	pb_profile profile;
	pb_value_type types[PROTO_MAX_VALUES], *type_ptrs[PROTO_MAX_VALUES], period_type;
	struct strtable strings; /* the fixed strings (add_fixed_strings), the model's texts */
	size_t n_fixed;
	int64_t label_keys[PROTO_LABEL_KEYS]; /* their indexes */
	pb_function *functions, **function_ptrs;
	pb_mapping *mappings, **mapping_ptrs;
	pb_location *locations, **location_ptrs;
	pb_line *lines, **line_ptrs;
	pb_sample *samples, **sample_ptrs;
	uint64_t *location_ids;
	int64_t *values;
	size_t n_extra;           /* encode_opts' labels */
	int64_t *extra_strings;   /* their key and value indexes */
	pb_label *process_labels; /* PROTO_MAX_PROCESS_LABELS + n_extra per process */
	size_t *n_process_labels;
	pb_label *tid_labels; /* one per sample, with threads */
	pb_label **label_ptrs; /* MAX_LABELS(p) per sample */
};

static int64_t add_string(struct pprof *p, const char *s)
{
	return strtable_add(&p->strings, s);
}

static int64_t model_str(struct pprof *p, uint32_t id)
{
	return strtable_model(&p->strings, id);
}

/* The index of s among the fixed strings, s added to them if it is not
 * one yet (only before any other string), or -ENOMEM. */
static int64_t fixed_string(struct pprof *p, const char *s)
{
	int64_t i;

	for (size_t k = 1; k < p->n_fixed; k++)
		if (strcmp(p->strings.strings[k], s) == 0)
			return (int64_t)k;
	i = add_string(p, s);
	if (i >= 0)
		p->n_fixed++;
	return i;
}

/* The strings every profile starts with, each once: every kind's value
 * and period types, then the label keys. */
static int add_fixed_strings(struct pprof *p)
{
	p->n_fixed = 1; /* "" */
	for (size_t k = 0; k < PROFILE_KINDS; k++) {
		const struct proto_kind *pk = &proto_kinds[k];

		for (size_t i = 0; i < pk->n_values; i++)
			if (fixed_string(p, pk->values[i].type) < 0 ||
			    fixed_string(p, pk->values[i].unit) < 0)
				return -ENOMEM;
		if (fixed_string(p, pk->period.type) < 0 || fixed_string(p, pk->period.unit) < 0)
			return -ENOMEM;
	}
	for (size_t i = 0; i < PROTO_LABEL_KEYS; i++)
		if ((p->label_keys[i] = fixed_string(p, proto_label_keys[i])) < 0)
			return -ENOMEM;
	return 0;
}

static int value_type(struct pprof *p, pb_value_type *vt, const struct proto_value_type *t)
{
	int64_t type = fixed_string(p, t->type), unit = fixed_string(p, t->unit);

	if (type < 0 || unit < 0)
		return -ENOMEM;
	perftools__profiles__value_type__init(vt);
	vt->type = type;
	vt->unit = unit;
	return 0;
}

static int build_functions(struct pprof *p)
{
	const struct model *m = p->m;

	p->functions = alloc_zeroed(m->n_functions, sizeof(*p->functions));
	p->function_ptrs = alloc_zeroed(m->n_functions, sizeof(*p->function_ptrs));
	if (!p->functions || !p->function_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_functions; i++) {
		pb_function *f = &p->functions[i];

		perftools__profiles__function__init(f);
		f->id = i + 1;
		f->name = f->system_name = model_str(p, m->functions[i].name);
		f->filename = model_str(p, m->functions[i].file);
		f->start_line = m->functions[i].start_line;
		if (f->name < 0 || f->filename < 0)
			return -ENOMEM;
		p->function_ptrs[i] = f;
	}
	p->profile.n_function = m->n_functions;
	p->profile.function = p->function_ptrs;
	return 0;
}

static int build_mappings(struct pprof *p)
{
	const struct model *m = p->m;

	p->mappings = alloc_zeroed(m->n_mappings, sizeof(*p->mappings));
	p->mapping_ptrs = alloc_zeroed(m->n_mappings, sizeof(*p->mapping_ptrs));
	if (!p->mappings || !p->mapping_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_mappings; i++) {
		pb_mapping *mp = &p->mappings[i];

		perftools__profiles__mapping__init(mp);
		mp->id = i + 1;
		mp->filename = model_str(p, m->mappings[i].path);
		mp->build_id = model_str(p, m->mappings[i].build_id);
		if (mp->filename < 0 || mp->build_id < 0)
			return -ENOMEM;
		/* resolved as far as perfd could: see the top of the file */
		mp->has_functions = mp->has_filenames = true;
		mp->has_line_numbers = mp->has_inline_frames = true;
		p->mapping_ptrs[i] = mp;
	}
	p->profile.n_mapping = m->n_mappings;
	p->profile.mapping = p->mapping_ptrs;
	return 0;
}

/* Locations and their lines, innermost first; each mapping's limit is set
 * past the highest address in it. */
static int build_locations(struct pprof *p)
{
	const struct model *m = p->m;

	p->locations = alloc_zeroed(m->n_locations, sizeof(*p->locations));
	p->location_ptrs = alloc_zeroed(m->n_locations, sizeof(*p->location_ptrs));
	p->lines = alloc_zeroed(m->n_lines, sizeof(*p->lines));
	p->line_ptrs = alloc_zeroed(m->n_lines, sizeof(*p->line_ptrs));
	if (!p->locations || !p->location_ptrs || !p->lines || !p->line_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_locations; i++) {
		const struct model_location *l = &m->locations[i];
		pb_location *loc = &p->locations[i];

		perftools__profiles__location__init(loc);
		loc->id = i + 1;
		loc->mapping_id = l->mapping;
		/* a kernel location's is 0 for who may not see it (model.h) */
		if (l->kind == FRAME_KIND_NATIVE || l->kind == FRAME_KIND_JIT ||
		    l->kind == FRAME_KIND_KERNEL)
			loc->address = l->offset;
		if (l->mapping) {
			pb_mapping *mp = &p->mappings[l->mapping - 1];

			mp->memory_limit = MAX(mp->memory_limit, loc->address + 1);
		}
		for (uint32_t j = 0; j < l->n_lines; j++) {
			const struct model_line *ml = &m->lines[l->first_line + j];
			pb_line *ln = &p->lines[l->first_line + j];

			perftools__profiles__line__init(ln);
			ln->function_id = ml->function + 1;
			ln->line = ml->line;
			p->line_ptrs[l->first_line + (l->n_lines - 1 - j)] = ln;
		}
		loc->n_line = l->n_lines;
		loc->line = p->line_ptrs + l->first_line;
		p->location_ptrs[i] = loc;
	}
	p->profile.n_location = m->n_locations;
	p->profile.location = p->location_ptrs;
	return 0;
}

static pb_label *str_label(pb_label *l, int64_t key, int64_t value)
{
	perftools__profiles__label__init(l);
	l->key = key;
	l->str = value;
	return l;
}

static pb_label *num_label(pb_label *l, int64_t key, int64_t value)
{
	perftools__profiles__label__init(l);
	l->key = key;
	l->num = value;
	return l;
}

/* The labels every sample of a process shares: its own, then the
 * caller's (encode_opts.labels). */
static int build_process_labels(struct pprof *p, const struct encode_opts *o)
{
	const struct model *m = p->m;
	size_t per = PROCESS_LABELS(p);

	p->process_labels = alloc_zeroed(m->n_processes * per, sizeof(pb_label));
	p->n_process_labels = alloc_zeroed(m->n_processes, sizeof(size_t));
	p->extra_strings = alloc_zeroed(2 * p->n_extra, sizeof(int64_t));
	if (!p->process_labels || !p->n_process_labels || !p->extra_strings)
		return -ENOMEM;
	for (size_t k = 0; k < 2 * p->n_extra; k++)
		if ((p->extra_strings[k] = add_string(p, o->labels[k])) < 0)
			return -ENOMEM;
	for (size_t i = 0; i < m->n_processes; i++) {
		struct proto_label pl[PROTO_MAX_PROCESS_LABELS];
		size_t n = proto_process_labels(&m->processes[i], pl);
		pb_label *l = p->process_labels + i * per;

		for (size_t k = 0; k < n; k++) {
			int64_t key = p->label_keys[pl[k].key], value;

			if (pl[k].is_num) {
				num_label(&l[k], key, pl[k].num);
				continue;
			}
			if ((value = model_str(p, pl[k].str)) < 0)
				return -ENOMEM;
			str_label(&l[k], key, value);
		}
		for (size_t k = 0; k < p->n_extra; k++)
			str_label(&l[n++], p->extra_strings[2 * k], p->extra_strings[2 * k + 1]);
		p->n_process_labels[i] = n;
	}
	return 0;
}

static int build_samples(struct pprof *p, const struct encode_opts *o)
{
	const struct model *m = p->m;
	const struct proto_kind *kind = &proto_kinds[proto_kind_of(m)];
	int64_t period = proto_period(proto_kind_of(m), o);
	size_t n_types = kind->n_values;

	p->samples = alloc_zeroed(m->n_samples, sizeof(*p->samples));
	p->sample_ptrs = alloc_zeroed(m->n_samples, sizeof(*p->sample_ptrs));
	p->location_ids = alloc_zeroed(m->n_pool, sizeof(*p->location_ids));
	p->values = alloc_zeroed(m->n_samples * n_types, sizeof(*p->values));
	p->label_ptrs = alloc_zeroed(m->n_samples * MAX_LABELS(p), sizeof(*p->label_ptrs));
	p->tid_labels = m->threads ? alloc_zeroed(m->n_samples, sizeof(*p->tid_labels)) : NULL;
	if (!p->samples || !p->sample_ptrs || !p->location_ids || !p->values || !p->label_ptrs ||
	    (m->threads && !p->tid_labels))
		return -ENOMEM;
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];
		pb_sample *ps = &p->samples[i];
		pb_label *pl = p->process_labels + s->process * PROCESS_LABELS(p);
		pb_label **labels = p->label_ptrs + i * MAX_LABELS(p);
		int64_t *v = p->values + i * n_types;

		perftools__profiles__sample__init(ps);
		/* the model's pool is root first, one range per sample */
		for (uint32_t k = 0; k < s->depth; k++)
			p->location_ids[s->first + k] = m->stack_pool[s->first + s->depth - 1 - k] + 1;
		ps->n_location_id = s->depth;
		ps->location_id = p->location_ids + s->first;
		for (size_t k = 0; k < n_types; k++)
			v[k] = proto_value(kind, k, s->value, period);
		ps->n_value = n_types;
		ps->value = v;
		for (size_t k = 0; k < p->n_process_labels[s->process]; k++)
			labels[ps->n_label++] = &pl[k];
		if (m->threads)
			labels[ps->n_label++] = num_label(&p->tid_labels[i], p->label_keys[PROTO_LABEL_TID],
							       s->tid);
		ps->label = labels;
		p->sample_ptrs[i] = ps;
	}
	p->profile.n_sample = m->n_samples;
	p->profile.sample = p->sample_ptrs;
	return 0;
}

static int build(struct pprof *p, const struct model *m, const struct encode_opts *o)
{
	pb_profile *pr = &p->profile;
	enum profile_kind kind = proto_kind_of(m);
	const struct proto_kind *pk = &proto_kinds[kind];
	int r;

	p->m = m;
	p->n_extra = o->n_labels;
	perftools__profiles__profile__init(pr);
	if (strtable_init(&p->strings, m) < 0)
		return -ENOMEM;
	if ((r = add_fixed_strings(p)) < 0)
		return r;
	for (size_t i = 0; i < pk->n_values; i++) {
		if ((r = value_type(p, &p->types[i], &pk->values[i])) < 0)
			return r;
		p->type_ptrs[i] = &p->types[i];
	}
	pr->n_sample_type = pk->n_values;
	pr->sample_type = p->type_ptrs;
	if ((r = value_type(p, &p->period_type, &pk->period)) < 0)
		return r;
	pr->period_type = &p->period_type;
	pr->period = proto_period(kind, o);
	pr->time_nanos = (int64_t)o->time_unix_ns;
	pr->duration_nanos = (int64_t)o->duration_ns;

	if ((r = build_functions(p)) < 0 || (r = build_mappings(p)) < 0 ||
	    (r = build_locations(p)) < 0 || (r = build_process_labels(p, o)) < 0 ||
	    (r = build_samples(p, o)) < 0)
		return r;
	/* last: interning may have moved the table */
	pr->n_string_table = p->strings.n;
	pr->string_table = p->strings.strings;
	return 0;
}

static void pprof_done(struct pprof *p)
{
	strtable_done(&p->strings);
	free(p->functions);
	free(p->function_ptrs);
	free(p->mappings);
	free(p->mapping_ptrs);
	free(p->locations);
	free(p->location_ptrs);
	free(p->lines);
	free(p->line_ptrs);
	free(p->samples);
	free(p->sample_ptrs);
	free(p->location_ids);
	free(p->values);
	free(p->extra_strings);
	free(p->process_labels);
	free(p->n_process_labels);
	free(p->tid_labels);
	free(p->label_ptrs);
}

/* Where protobuf-c's packing goes: gathered into in[] and deflated with
 * gzip framing into out, a sink. */
struct gzip_sink {
	ProtobufCBuffer base; /* first: protobuf-c hands this back to append */
	z_stream z;
	struct encode_sink *out;
	int error;
	const atomic_bool *cancel; /* encode_opts' */
	size_t n_in;
	unsigned char in[64 * 1024];
};

static void deflate_some(struct gzip_sink *s, const unsigned char *data, size_t n, int flush)
{
	unsigned char out[16 * 1024];

	if (!s->error && s->cancel && atomic_load(s->cancel))
		s->error = -ECANCELED;
	if (s->error)
		return;
	s->z.next_in = (Bytef *)data;
	s->z.avail_in = (uInt)n;
	do {
		s->z.next_out = out;
		s->z.avail_out = sizeof(out);
		if (deflate(&s->z, flush) == Z_STREAM_ERROR) {
			s->error = -EIO;
			return;
		}
		if (sizeof(out) > s->z.avail_out &&
		    (s->error = encode_sink_write(s->out, out, sizeof(out) - s->z.avail_out)) < 0)
			return;
	} while (s->z.avail_out == 0);
}

static void pack_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
	struct gzip_sink *s = (struct gzip_sink *)buffer;

	if (s->n_in + len > sizeof(s->in)) {
		deflate_some(s, s->in, s->n_in, Z_NO_FLUSH);
		s->n_in = 0;
	}
	for (; len >= sizeof(s->in); len -= sizeof(s->in), data += sizeof(s->in))
		deflate_some(s, data, sizeof(s->in), Z_NO_FLUSH);
	memcpy(s->in + s->n_in, data, len);
	s->n_in += len;
}

/* Packs and gzips profile into s (its out set).  Returns 0, -ENOMEM,
 * -EIO or -ECANCELED. */
static int gzip_profile(const pb_profile *profile, struct gzip_sink *s)
{
	int r;

	s->base.append = pack_append;
	/* 15 + 16: the largest window, with a gzip header and trailer */
	r = deflateInit2(&s->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
	if (r != Z_OK)
		return r == Z_MEM_ERROR ? -ENOMEM : -EIO;
	(void)perftools__profiles__profile__pack_to_buffer(profile, &s->base);
	deflate_some(s, s->in, s->n_in, Z_FINISH);
	(void)deflateEnd(&s->z);
	return s->error;
}

int pprof_encode(const struct model *m, const struct encode_opts *o, struct encode_sink *out)
{
	_cleanup_free_ struct gzip_sink *s = calloc(1, sizeof(*s));
	struct pprof p = { 0 };
	int r;

	if (!s)
		return -ENOMEM;
	s->out = out;
	s->cancel = o->cancel;
	r = build(&p, m, o);
	if (r == 0 && encode_cancelled(o))
		r = -ECANCELED;
	if (r == 0)
		r = gzip_profile(&p.profile, s);
	pprof_done(&p);
	return r;
}
