/* SPDX-License-Identifier: MIT */
/* model.c - see model.h for the design. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/clock.h"
#include "base/kindtab.h"
#include "perfd/macro.h"
#include "process/procfs.h"
#include "process/procmaps.h"
#include "profile/frame.h"
#include "profile/model.h"
#include "profile/stacktab.h"

const char *const frame_kind_names[FRAME_KINDS] = {
	[FRAME_KIND_KERNEL] = "kernel", [FRAME_KIND_NATIVE] = "native",
	[FRAME_KIND_PYTHON] = "python", [FRAME_KIND_JIT] = "jit",
	[FRAME_KIND_SPECIAL] = "special",
};

/* The indexes used while building; gone once the model is built. */
struct builder {
	struct model *m;
	const struct model_opts *o;
	struct u64map strings;   /* text hash (+ probing) -> string id */
	struct u64map functions; /* hash (+ probing) -> function index */
	struct u64map locations; /* hash (+ probing) -> location index */
	struct u64map by_frame;  /* frame word -> location index */
	struct u64map mappings;  /* module -> mapping index + 1 */
	struct u64map samples;   /* hash (+ probing) -> sample index */
	const struct process *process; /* whose part is being added */
};

/* Probes map from hash for an equal entry (eq) or a free slot; the keys
 * are hash & ~1 stepped by 2 so that UINT64_MAX is never one.  Returns
 * the slot, *fresh telling whether it is new. */
static uint64_t *probe(struct u64map *map, uint64_t hash, bool (*eq)(void *, uint64_t),
		       void *ctx, bool *fresh)
{
	for (uint64_t key = hash & ~1ULL;; key = (key + 2) & ~1ULL) {
		uint64_t *v = u64map_upsert(map, key, fresh);

		if (!v || *fresh || eq(ctx, *v))
			return v;
	}
}

struct text_ref {
	struct model *m;
	const char *s;
	size_t n;
};

static bool text_eq(void *ctx, uint64_t id)
{
	struct text_ref *t = ctx;

	return strncmp(t->m->strings + id, t->s, t->n) == 0 && t->m->strings[id + t->n] == 0;
}

/* The id of string s (NULL is ""), interned; -ENOMEM. */
static int64_t intern_string(struct builder *b, const char *s)
{
	struct model *m = b->m;
	struct text_ref t = { m, s ? s : "", strlen(s ? s : "") };
	bool fresh;
	uint64_t *slot;

	if (!t.n)
		return 0;
	slot = probe(&b->strings, hash_text(t.s, t.n), text_eq, &t, &fresh);
	if (!slot)
		return -ENOMEM;
	if (!fresh)
		return (int64_t)*slot;
	if (array_grow((void **)&m->strings, &m->strings_cap, m->strings_len + t.n + 1, 1, 64) < 0) {
		*slot = 0; /* "" never equals a non-empty text: harmless */
		return -ENOMEM;
	}
	memcpy(m->strings + m->strings_len, t.s, t.n + 1);
	*slot = m->strings_len;
	m->strings_len += t.n + 1;
	return (int64_t)*slot;
}

struct function_ref {
	struct model *m;
	struct model_function f;
};

static bool function_eq(void *ctx, uint64_t i)
{
	struct function_ref *r = ctx;
	const struct model_function *g = &r->m->functions[i];

	return g->name == r->f.name && g->file == r->f.file && g->kind == r->f.kind &&
	       g->start_line == r->f.start_line;
}

/* A function's name as every format writes it: never empty.  What the
 * process says is its name may be (a Python function given a code object
 * whose co_name is ""), and a consumer may take a nameless function for a
 * broken profile: perfctl refuses one. */
static const char *function_name(const struct frame_record *rec)
{
	return rec->function && *rec->function ? rec->function : MODEL_UNNAMED;
}

static int64_t intern_function(struct builder *b, const struct frame_record *rec)
{
	struct model *m = b->m;
	int64_t n = intern_string(b, function_name(rec)),
		f = n < 0 ? n : intern_string(b, rec->file);
	struct function_ref r = { m, { (uint32_t)n, (uint32_t)f, rec->kind, rec->start_line } };
	uint64_t *slot;
	bool fresh;

	if (n < 0 || f < 0)
		return -ENOMEM;
	slot = probe(&b->functions,
		     hash_u64(hash_u64((uint64_t)n << 32 | (uint64_t)f) ^
			      ((uint64_t)rec->start_line << 8 | rec->kind)),
		     function_eq, &r, &fresh);
	if (!slot)
		return -ENOMEM;
	if (!fresh)
		return (int64_t)*slot;
	if (array_grow((void **)&m->functions, &m->cap_functions, m->n_functions + 1,
		       sizeof(*m->functions), 64) < 0) {
		*slot = UINT32_MAX; /* no function has that index */
		return -ENOMEM;
	}
	m->functions[m->n_functions] = r.f;
	*slot = m->n_functions;
	return (int64_t)m->n_functions++;
}

static int64_t mapping_for(struct builder *b, uint16_t module)
{
	struct model *m = b->m;
	const char *path = NULL, *build_id = NULL;
	int64_t p, id;
	bool fresh;
	uint64_t *slot;

	/* binaries, JIT maps and the kernel; Python and special frames have
	 * no mapping */
	if (!b->o->describe || ((module < FRAME_MODULE_FIRST || module > FRAME_MODULE_LAST) &&
				module != FRAME_MODULE_KERNEL))
		return 0;
	slot = u64map_upsert(&b->mappings, module, &fresh);
	if (!slot)
		return -ENOMEM;
	if (!fresh)
		return (int64_t)*slot;
	if (!b->o->describe(b->o->ctx, module, &path, &build_id)) {
		*slot = 0;
		return 0;
	}
	/* The path as this process mapped it: a module stands for one file
	 * under every path it is mapped at (a hard link, " (deleted)").  (Not
	 * the kernel's: [vsyscall] is a mapping with kernel addresses.) */
	if (module != FRAME_MODULE_KERNEL && b->process && b->process->maps)
		for (size_t j = 0; j < b->process->maps->n; j++)
			if (b->process->map_modules[j] == module) {
				path = b->process->maps->maps[j].path;
				break;
			}
	p = intern_string(b, path);
	id = p < 0 ? p : intern_string(b, build_id);
	if (id < 0 || array_grow((void **)&m->mappings, &m->cap_mappings, m->n_mappings + 1,
				 sizeof(*m->mappings), 64) < 0) {
		u64map_remove(&b->mappings, module);
		return -ENOMEM;
	}
	m->mappings[m->n_mappings++] = (struct model_mapping){ module, (uint32_t)p, (uint32_t)id };
	*slot = m->n_mappings;
	return (int64_t)*slot;
}

struct location_ref {
	struct model *m;
	const struct model_location *l;
	const struct model_line *lines;
};

static bool location_eq(void *ctx, uint64_t i)
{
	struct location_ref *r = ctx;
	const struct model_location *o = &r->m->locations[i];

	return o->hash == r->l->hash && o->n_lines == r->l->n_lines && o->kind == r->l->kind &&
	       o->mapping == r->l->mapping &&
	       memcmp(r->m->lines + o->first_line, r->lines, o->n_lines * sizeof(*r->lines)) == 0;
}

/* The location frame resolves to, resolving it the first time. */
static int64_t location_for(struct builder *b, uint64_t frame)
{
	struct model *m = b->m;
	struct frame_record rec[FRAME_MAX_INLINE];
	struct model_line lines[FRAME_MAX_INLINE];
	struct model_location l = { 0 };
	char scratch[1024];
	struct location_ref r = { m, &l, lines };
	uint64_t *slot;
	bool fresh;
	size_t n;
	int64_t mp;

	slot = u64map_get(&b->by_frame, frame);
	if (slot)
		return (int64_t)*slot;
	if (b->o->pending && b->o->pending(b->o->ctx, frame, b->o->lines))
		m->pending_frames++;
	n = b->o->resolve(b->o->ctx, frame, b->o->lines, rec, ELEMENTSOF(rec), scratch,
			  sizeof(scratch));
	n = MAX(MIN(n, ELEMENTSOF(rec)), (size_t)1);
	l.kind = rec[n - 1].kind;
	l.offset = rec[n - 1].offset;
	if (l.kind == FRAME_KIND_KERNEL) {
		l.symbol_offset = rec[n - 1].symbol_offset;
		if (!b->o->kernel_addresses)
			l.offset = 0;
	}
	l.hash = hash_u64(l.kind);
	mp = mapping_for(b, rec[n - 1].module);
	if (mp < 0)
		return -ENOMEM;
	l.mapping = (uint32_t)mp;
	for (size_t i = 0; i < n; i++) {
		bool line_wanted = rec[i].kind == FRAME_KIND_PYTHON ? b->o->python_lines : b->o->lines;
		int64_t f = intern_function(b, &rec[i]);

		if (f < 0)
			return -ENOMEM;
		lines[i] = (struct model_line){ (uint32_t)f, line_wanted ? rec[i].line : 0 };
		l.hash = hash_u64(l.hash ^ ((uint64_t)lines[i].function << 32 | lines[i].line));
	}
	l.n_lines = (uint32_t)n;
	l.hash = hash_u64(l.hash ^ l.mapping);
	slot = probe(&b->locations, l.hash, location_eq, &r, &fresh);
	if (!slot)
		return -ENOMEM;
	if (fresh) {
		if (array_grow((void **)&m->locations, &m->cap_locations, m->n_locations + 1,
			       sizeof(*m->locations), 64) < 0 ||
		    array_grow((void **)&m->lines, &m->cap_lines, m->n_lines + n, sizeof(*m->lines),
			       64) < 0) {
			*slot = UINT32_MAX;
			return -ENOMEM;
		}
		l.first_line = (uint32_t)m->n_lines;
		memcpy(m->lines + m->n_lines, lines, n * sizeof(*lines));
		m->n_lines += n;
		m->locations[m->n_locations] = l;
		*slot = m->n_locations++;
	}
	{
		uint64_t id = *slot, *f = u64map_upsert(&b->by_frame, frame, NULL);

		if (!f)
			return -ENOMEM;
		*f = id;
		return (int64_t)id;
	}
}

struct sample_ref {
	struct model *m;
	const struct model_sample *s;
};

static bool sample_eq(void *ctx, uint64_t i)
{
	struct sample_ref *r = ctx;
	const struct model_sample *o = &r->m->samples[i];

	return o->hash == r->s->hash && o->depth == r->s->depth && o->process == r->s->process &&
	       o->tid == r->s->tid &&
	       memcmp(r->m->stack_pool + o->first, r->m->stack_pool + r->s->first,
		      o->depth * sizeof(uint32_t)) == 0;
}

static int add_stack(struct builder *b, uint32_t process, uint32_t tid, uint32_t thread_comm,
		     const struct stack *st, uint64_t value)
{
	struct model *m = b->m;
	struct model_sample s = { .first = (uint32_t)m->n_pool, .process = process, .tid = tid,
				  .thread_comm = thread_comm, .value = value };
	struct sample_ref r = { m, &s };
	uint64_t *slot;
	bool fresh;

	if (array_grow((void **)&m->stack_pool, &m->cap_pool, m->n_pool + st->depth, sizeof(uint32_t), 64) < 0)
		return -ENOMEM;
	s.hash = hash_u64(((uint64_t)process << 32) | tid);
	for (int i = b->o->leaf_only ? MIN((int)st->depth - 1, 0) : (int)st->depth - 1; i >= 0; i--) {
		int64_t loc = location_for(b, st->frames[i]);

		if (loc < 0)
			return -ENOMEM;
		m->stack_pool[m->n_pool + s.depth++] = (uint32_t)loc;
		s.hash = hash_u64(s.hash ^ (uint64_t)loc);
	}
	slot = probe(&b->samples, s.hash, sample_eq, &r, &fresh);
	if (!slot)
		return -ENOMEM;
	if (!fresh) {
		m->samples[*slot].value += value;
		return 0; /* the duplicate's locations are dropped from the pool */
	}
	if (array_grow((void **)&m->samples, &m->cap_samples, m->n_samples + 1, sizeof(*m->samples), 64) < 0) {
		*slot = UINT32_MAX;
		return -ENOMEM;
	}
	m->n_pool += s.depth;
	m->samples[m->n_samples] = s;
	*slot = m->n_samples++;
	return 0;
}

static int add_process(struct builder *b, const struct process *p, struct model_process *mp)
{
	const char *unit = p->cgroup ? procfs_cgroup_unit(p->cgroup) : NULL;
	char unit_buf[256] = "";
	int64_t comm = intern_string(b, p->comm), cg, un;

	if (unit)
		snprintf(unit_buf, sizeof(unit_buf), "%.*s", (int)strcspn(unit, "/"), unit);
	cg = comm < 0 ? comm : intern_string(b, p->cgroup);
	un = cg < 0 ? cg : intern_string(b, unit_buf);
	if (un < 0)
		return -ENOMEM;
	*mp = (struct model_process){ .pid = p->pid, .ns_pid = p->ns_pid,
				      .start_time_ns = p->start_time_ns, .comm = (uint32_t)comm,
				      .cgroup = (uint32_t)cg, .unit = (uint32_t)un,
				      .exited = p->exited };
	return 0;
}

struct model *model_free(struct model *m)
{
	if (m) {
		free(m->strings);
		free(m->functions);
		free(m->lines);
		free(m->locations);
		free(m->mappings);
		free(m->stack_pool);
		free(m->samples);
		free(m->processes);
		free(m);
	}
	return NULL;
}

/* The build in progress (model.h): where it stands between steps. */
struct model_builder {
	struct builder b;
	struct model_opts o;
	const struct profile_parts *parts;
	const struct stacktab *stacks;
	size_t part;    /* the part being added, parts->n once all are */
	size_t slot;    /* the next slot of its values to look at */
	bool in_part;   /* its process is added: its stacks follow */
	int r;          /* the first failure: every later step returns it */
};

struct model_builder *model_builder_free(struct model_builder *mb)
{
	if (mb) {
		u64map_done(&mb->b.strings);
		u64map_done(&mb->b.functions);
		u64map_done(&mb->b.locations);
		u64map_done(&mb->b.by_frame);
		u64map_done(&mb->b.mappings);
		u64map_done(&mb->b.samples);
		model_free(mb->b.m);
		free(mb);
	}
	return NULL;
}

int model_builder_new(const struct model_opts *opts, const struct profile_parts *parts,
		      const struct stacktab *stacks, struct model_builder **ret)
{
	_cleanup_(model_builder_freep) struct model_builder *mb = calloc(1, sizeof(*mb));
	struct model *m;

	if (!mb)
		return -ENOMEM;
	mb->o = *opts;
	mb->parts = parts;
	mb->stacks = stacks;
	mb->b.o = &mb->o;
	u64map_init(&mb->b.strings);
	u64map_init(&mb->b.functions);
	u64map_init(&mb->b.locations);
	u64map_init(&mb->b.by_frame);
	u64map_init(&mb->b.mappings);
	u64map_init(&mb->b.samples);
	m = mb->b.m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->kind = opts->kind;
	m->threads = opts->threads;
	m->kernel_addresses = opts->kernel_addresses;
	/* string id 0 is "" */
	if (array_grow((void **)&m->strings, &m->strings_cap, 1, 1, 64) < 0 ||
	    !(m->processes = calloc(parts->n ? parts->n : 1, sizeof(*m->processes))))
		return -ENOMEM;
	m->strings[m->strings_len++] = 0;
	*ret = TAKE_PTR(mb);
	return 0;
}

/* Adds the stack in slot of the current part; 1 when it had one to add. */
static int add_slot(struct model_builder *mb, const struct u64map_slot *slot)
{
	const struct profile_part *part = &mb->parts->parts[mb->part];
	struct model *m = mb->b.m;
	struct model_process *mp = &m->processes[m->n_processes];
	const struct stack *st;
	uint32_t tid;
	int64_t tcomm = 0;
	uint64_t value;

	if (slot->key == U64MAP_EMPTY || slot->value == 0 ||
	    !(value = kind_value_in(mb->o.kind, profile_key_kind(slot->key), slot->value,
				    mb->o.period_ns)) ||
	    !(st = stacktab_get(mb->stacks, profile_key_stack(slot->key))))
		return 0;
	tid = mb->o.threads ? profile_key_tid(slot->key) : 0;
	if (tid)
		tcomm = intern_string(&mb->b, process_thread_comm(part->process, tid));
	if (tcomm < 0 ||
	    add_stack(&mb->b, (uint32_t)m->n_processes, tid, (uint32_t)tcomm, st, value) < 0)
		return -ENOMEM;
	mp->total += value;
	return 1;
}

int model_builder_step(struct model_builder *mb, const struct model_budget *budget)
{
	struct model *m = mb->b.m;
	size_t added = 0;

	while (mb->r == 0 && mb->part < mb->parts->n) {
		const struct profile_part *part = &mb->parts->parts[mb->part];
		const struct u64map *values = &part->prof.values;
		struct model_process *mp = &m->processes[m->n_processes];
		size_t n_slots = values->slots ? values->mask + 1 : 0;

		/* the process as it is now: pinned by the part, not frozen */
		mb->b.process = part->process;
		if (!mb->in_part) {
			mb->r = add_process(&mb->b, part->process, mp);
			mb->in_part = mb->r == 0;
			mb->slot = 0;
			continue;
		}
		for (; mb->slot < n_slots; mb->slot++) {
			int k;

			if (budget && ((budget->max_stacks && added >= budget->max_stacks) ||
				       (budget->deadline_ns && added &&
					now_monotonic_ns() >= budget->deadline_ns)))
				return 0;
			k = add_slot(mb, &values->slots[mb->slot]);
			if (k < 0)
				return mb->r = k;
			added += (size_t)k;
		}
		m->total += mp->total;
		m->n_processes++;
		mb->part++;
		mb->in_part = false;
	}
	return mb->r < 0 ? mb->r : 1;
}

int model_builder_finish(struct model_builder *mb, struct model **ret)
{
	int r = mb->r < 0 ? mb->r : model_builder_step(mb, NULL);

	if (r < 0)
		return r;
	*ret = TAKE_PTR(mb->b.m);
	return 0;
}

int model_build(const struct model_opts *opts, const struct profile_parts *parts,
		const struct stacktab *stacks, struct model **ret)
{
	_cleanup_(model_builder_freep) struct model_builder *mb = NULL;
	int r = model_builder_new(opts, parts, stacks, &mb);

	*ret = NULL;
	return r < 0 ? r : model_builder_finish(mb, ret);
}
