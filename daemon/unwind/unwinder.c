/* SPDX-License-Identifier: MIT */
/* unwinder.c - see unwinder.h for the design. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>

#include "base/clock.h"
#include "base/log.h"
#include "profile/frame.h"
#include "perfd/macro.h"
#include "perfd/unwind.h"
#include "base/rangealloc.h"
#include "symbols/symbolize.h"
#include "base/u64map.h"
#include "unwind/builder.h"
#include "unwind/trampoline.h"
#include "unwind/unwind_table.h"
#include "unwind/unwinder.h"

/* What a table of templated code is a function of (trampoline.h). */
struct copies_id {
	struct trampoline_shape shape;
	uint32_t stride, region_size;
};

_Static_assert(sizeof(struct copies_id) ==
		       8 + TRAMPOLINE_ROWS_MAX * sizeof(struct perfd_unwind_row) + 8,
	       "copies_id is hashed and compared as bytes: no padding");

/* Keys of tables of templated code: above every module id, never
 * U64MAP_EMPTY. */
#define COPIES_KEY_BIT (1ULL << 62)

struct table {
	uint32_t rows_first, rows_count;
	uint32_t fp_first, fp_end; /* unwind_table_fp_range() */
	uint64_t base_vaddr;
	struct unwind_segment *segs;
	size_t n_segs;
	unsigned refs;
	bool building;  /* with the builder: no rows yet */
	/* building, but its file is being opened again on the symbolizer's
	 * lane: handed to the builder once it is (unwinder_retry_opens) */
	bool awaiting_fd;
	int error;      /* <0: could not be built; not retried */
	uint64_t idle_since; /* when refs fell to 0: the LRU order of idle tables */
	struct copies_id *copies; /* a table of templated code: what it was built from */
};

/* What the unwinder keeps of one executable mapping, to describe it again
 * when its table is ready. */
struct proc_map {
	uint64_t start, end, pgoff;
	uint64_t key; /* of its table; 0 when none */
};

struct proc {
	uint32_t pid;
	uint64_t start_time_ns;
	uint32_t mappings_first, mappings_count;
	struct proc_map *maps; /* mappings_count of them */
	uint64_t *keys; /* of the tables it holds a reference on */
	size_t n_keys;
	bool stale; /* a table it holds came back: to be described again */
};

struct unwinder {
	struct unwinder_opts opts;
	struct rangealloc rows, mappings;
	struct u64map tables; /* module id -> struct table * */
	struct u64map procs;  /* pid -> struct proc * */
	uint64_t clock;       /* ticks once per table release */
	struct builder *builder;
	struct build_job *done; /* built, not yet taken in: the next turn's */
	size_t awaiting_fd;     /* tables whose file is being opened again */
	struct unwinder_stats stats;
};

int unwinder_new(const struct unwinder_opts *opts, struct unwinder **ret)
{
	struct unwinder *u = calloc(1, sizeof(*u));
	int r;

	if (!u)
		return -ENOMEM;
	u->opts = *opts;
	u64map_init(&u->tables);
	u64map_init(&u->procs);
	r = rangealloc_init(&u->rows, opts->rows_capacity);
	if (r == 0)
		r = rangealloc_init(&u->mappings, opts->mappings_capacity);
	if (r == 0)
		r = builder_new(opts->rows_fd, opts->max_build_ns, &u->builder);
	if (r < 0) {
		unwinder_free(u);
		return r;
	}
	*ret = u;
	return 0;
}

static void table_free(struct table *t)
{
	if (t) {
		free(t->segs);
		free(t->copies);
		free(t);
	}
}

static void proc_free(struct proc *p)
{
	if (p) {
		free(p->maps);
		free(p->keys);
		free(p);
	}
}

struct unwinder *unwinder_free(struct unwinder *u)
{
	if (!u)
		return NULL;
	builder_free(u->builder); /* first: it may be building */
	for (struct build_job *j = u->done, *next; j; j = next) {
		next = j->next;
		build_job_free(j);
	}
	U64MAP_FOREACH(slot, &u->tables)
		table_free((struct table *)(uintptr_t)slot->value);
	U64MAP_FOREACH(slot, &u->procs)
		proc_free((struct proc *)(uintptr_t)slot->value);
	u64map_done(&u->tables);
	u64map_done(&u->procs);
	rangealloc_done(&u->rows);
	rangealloc_done(&u->mappings);
	free(u);
	return NULL;
}

/* Frees the table idle the longest (no process maps its binary).  Returns
 * false when none is idle. */
static bool evict_idle_table(struct unwinder *u)
{
	uint64_t best_key = 0, best_since = UINT64_MAX;
	struct table *best = NULL;

	U64MAP_FOREACH(slot, &u->tables) {
		struct table *t = (struct table *)(uintptr_t)slot->value;

		if (t->refs == 0 && !t->building && !t->error && t->idle_since < best_since) {
			best = t;
			best_key = slot->key;
			best_since = t->idle_since;
		}
	}
	if (!best)
		return false;
	(void)rangealloc_put(&u->rows, best->rows_first, best->rows_count);
	u64map_remove(&u->tables, best_key);
	table_free(best);
	u->stats.tables_evicted++;
	return true;
}

/* Room for n rows in unwind_rows, made from idle tables if need be.
 * Returns 0 and the range's start, -ENOSPC or -ENOMEM. */
static int reserve_rows(struct unwinder *u, uint32_t n, uint32_t *ret_first)
{
	int r = rangealloc_get(&u->rows, n, ret_first);

	while (r == -ENOSPC && evict_idle_table(u))
		r = rangealloc_get(&u->rows, n, ret_first);
	return r;
}

/* rows[0..n) written into room reserve_rows() found, on this thread.
 * Returns 0 and the range's start, or -errno with nothing taken. */
static int place_rows(struct unwinder *u, const struct perfd_unwind_row *rows, uint32_t n,
		      uint32_t *ret_first)
{
	uint32_t first;
	int r = reserve_rows(u, n, &first);

	if (r < 0)
		return r;
	r = bpf_array_upload(u->opts.rows_fd, first, rows, sizeof(*rows), n);
	if (r < 0) {
		(void)rangealloc_put(&u->rows, first, n);
		return r;
	}
	*ret_first = first;
	return 0;
}

/* Hands the table of key, building, to the builder with a duplicate of
 * the module's descriptor fd (the builder's from then on, closed by it
 * whatever happens).  Returns 0 or -errno (nothing submitted). */
static int table_submit(struct unwinder *u, uint64_t key, int fd)
{
	fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return negative_errno();
	return builder_submit(u->builder, key, fd);
}

/* The table of a module: the one there is (built, failed or being
 * built), or a new one handed to the builder, or to wait for its file to
 * be opened again (symbolizer_module_fd's -EAGAIN).  NULL when none can
 * be started now (no descriptor of the file, no memory: counted as
 * refused; the next process that maps the binary tries again). */
static struct table *table_get(struct unwinder *u, uint64_t key)
{
	uint64_t *slot = u64map_get(&u->tables, key);
	struct table *t;
	int fd;

	if (slot) {
		t = (struct table *)(uintptr_t)*slot;
		if (t->building)
			builder_bump(u->builder, key); /* needed now, again */
		return t;
	}
	/* each build queued holds a descriptor: a user mapping thousands of
	 * binaries at once must not run perfd out of them */
	if (u->stats.tables_building >= UNWINDER_MAX_BUILDS) {
		u->stats.tables_refused++;
		return NULL;
	}
	fd = symbolizer_module_fd(u->opts.symbolizer, (uint16_t)key);
	t = fd >= 0 || fd == -EAGAIN ? calloc(1, sizeof(*t)) : NULL;
	slot = t ? u64map_upsert(&u->tables, key, NULL) : NULL;
	if (!slot) {
		free(t);
		u->stats.tables_refused++;
		return NULL;
	}
	if (fd == -EAGAIN) {
		t->awaiting_fd = true;
		u->awaiting_fd++;
	} else if (table_submit(u, key, fd) < 0) {
		u64map_remove(&u->tables, key);
		free(t);
		u->stats.tables_refused++;
		return NULL;
	}
	t->building = true;
	*slot = (uintptr_t)t;
	u->stats.tables_building++;
	return t;
}

static void table_unref(struct unwinder *u, uint64_t key)
{
	uint64_t *slot = u64map_get(&u->tables, key);
	struct table *t;

	if (!slot)
		return;
	t = (struct table *)(uintptr_t)*slot;
	/* A table no process uses stays uploaded until its rows are needed:
	 * short-lived processes (a shell's children) map the same binaries
	 * again and again, and rebuilding libc's table costs milliseconds. */
	if (--t->refs == 0)
		t->idle_since = ++u->clock;
}

/* The mapping's row-pc adjustment: address - pc_adjust = vaddr - base.
 * The executable segment whose file range overlaps the mapping's decides:
 * linkers (lld) may start it mid-page, so the page-aligned pgoff can lie in
 * the segment before it. */
static bool mapping_adjust(const struct table *t, const struct proc_map *m, uint64_t *ret)
{
	uint64_t lo = m->pgoff, hi = m->pgoff + (m->end - m->start);

	for (size_t i = 0; i < t->n_segs; i++) {
		const struct unwind_segment *s = &t->segs[i];

		if (s->executable && s->offset < hi && s->offset + s->filesz > lo) {
			*ret = m->start - m->pgoff + s->offset - s->vaddr + t->base_vaddr;
			return true;
		}
	}
	return false;
}

static void proc_release(struct unwinder *u, struct proc *p)
{
	for (size_t i = 0; i < p->n_keys; i++)
		table_unref(u, p->keys[i]);
	(void)rangealloc_put(&u->mappings, p->mappings_first, p->mappings_count);
}

/* Writes the description of n mappings of pid into a new range of
 * unwind_mappings (with rows for those whose table is ready, frame
 * pointers for the others) and points pid's entry in unwind_processes at
 * it.  Returns 0 and the range's start, or -errno with nothing taken. */
static int describe(struct unwinder *u, uint32_t pid, const struct proc_map *maps, size_t n,
		    uint32_t *ret_first)
{
	_cleanup_free_ struct perfd_unwind_mapping *entries = calloc(n, sizeof(*entries));
	struct perfd_unwind_process value;
	uint32_t first;
	int r;

	if (!entries)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint64_t *slot = maps[i].key ? u64map_get(&u->tables, maps[i].key) : NULL;
		const struct table *t = slot ? (const struct table *)(uintptr_t)*slot : NULL;
		uint64_t adjust;

		entries[i].start = maps[i].start;
		entries[i].end = maps[i].end;
		if (t && t->building)
			entries[i].rows_first = PERFD_UNWIND_ROWS_PENDING;
		if (!t || t->building || t->error || !mapping_adjust(t, &maps[i], &adjust))
			continue;
		entries[i].pc_adjust = adjust;
		entries[i].rows_first = t->rows_first;
		entries[i].rows_count = t->rows_count;
		entries[i].fp_first = t->fp_first;
		entries[i].fp_end = t->fp_end;
	}
	r = rangealloc_get(&u->mappings, n, &first);
	if (r == 0)
		r = bpf_array_upload(u->opts.mappings_fd, first, entries, sizeof(*entries), n);
	if (r == 0) {
		value = (struct perfd_unwind_process){ first, n };
		if (bpf_map_update_elem(u->opts.processes_fd, &pid, &value, BPF_ANY) < 0)
			r = negative_errno();
	}
	if (r < 0) {
		(void)rangealloc_put(&u->mappings, first, n);
		return r;
	}
	*ret_first = first;
	return 0;
}

/* The table of templated code id describes: the one there is, or one built
 * and uploaded now (a few thousand rows, once for every process that has
 * this template: quicker here than a trip through the builder).  Returns
 * it and its key, or NULL when it cannot be had (no room, no memory, or
 * another template's table under the same key). */
static struct table *copies_table_get(struct unwinder *u, const struct copies_id *id,
				      uint64_t *ret_key)
{
	uint64_t key = COPIES_KEY_BIT | (hash_text((const char *)id, sizeof(*id)) & (COPIES_KEY_BIT - 1));
	uint64_t *slot = u64map_get(&u->tables, key), t0;
	_cleanup_free_ struct perfd_unwind_row *rows = NULL;
	_cleanup_free_ struct unwind_segment *seg = NULL;
	_cleanup_free_ struct copies_id *copy = NULL;
	struct table *t;
	uint32_t first;
	size_t n;
	int r;

	if (slot) {
		t = (struct table *)(uintptr_t)*slot;
		if (!t->copies || memcmp(t->copies, id, sizeof(*id)) != 0)
			return NULL;
		*ret_key = key;
		return t;
	}
	t0 = now_monotonic_ns();
	if (trampoline_table(&id->shape, id->stride, id->region_size, &rows, &n) < 0)
		return NULL;
	seg = calloc(1, sizeof(*seg));
	copy = malloc(sizeof(*copy));
	t = calloc(1, sizeof(*t));
	if (!seg || !copy || !t) {
		free(t);
		return NULL;
	}
	r = place_rows(u, rows, (uint32_t)n, &first);
	slot = r == 0 ? u64map_upsert(&u->tables, key, NULL) : NULL;
	if (!slot) {
		if (r == 0)
			(void)rangealloc_put(&u->rows, first, (uint32_t)n);
		free(t);
		u->stats.tables_refused++;
		return NULL;
	}
	/* One executable segment at vaddr 0 that is the whole region: a
	 * region's mapping (pgoff 0) then gets pc_adjust = its start. */
	*seg = (struct unwind_segment){ .filesz = id->region_size, .executable = true };
	*copy = *id;
	*t = (struct table){ .rows_first = first, .rows_count = (uint32_t)n,
			     .segs = TAKE_PTR(seg), .n_segs = 1, .copies = TAKE_PTR(copy) };
	*slot = (uintptr_t)t;
	u->stats.tables_built++;
	u->stats.upload_ns += now_monotonic_ns() - t0;
	log_debug("Unwind table of templated code (%u-byte template, %u-byte stride, %u-byte regions): %zu rows, built and uploaded in %.1f ms.",
		  id->shape.size, id->stride, id->region_size, n, (now_monotonic_ns() - t0) / 1e6);
	*ret_key = key;
	return t;
}

/* The part [start, end) of mapping m, under table key. */
static struct proc_map map_piece(const struct procmap *m, uint64_t start, uint64_t end,
				 uint64_t key)
{
	return (struct proc_map){ start, end, m->pgoff + (start - m->start), key };
}

/* Appends to pm (at *n) mapping m, split around the regions of copies that
 * lie inside it (from *next on, which it advances past them), each region
 * a mapping of its own with its table; takes a reference on each such
 * table (in held, at *n_held). */
static void split_mapping(struct unwinder *u, const struct procmap *m, uint64_t key,
			  const struct unwind_copies *copies, struct copies_id *id, size_t *next,
			  struct proc_map *pm, size_t *n, uint64_t *held, size_t *n_held)
{
	uint64_t cursor = m->start;

	for (; id && *next < copies->n && copies->starts[*next] < m->end; (*next)++) {
		uint64_t s = copies->starts[*next], e = s + copies->region_size, ckey;
		struct table *t;

		if (s < cursor || e < s || e > m->end)
			continue; /* not inside this mapping */
		id->stride = copies->strides[*next];
		t = copies_table_get(u, id, &ckey);
		if (!t)
			continue;
		if (s > cursor)
			pm[(*n)++] = map_piece(m, cursor, s, key);
		pm[(*n)++] = (struct proc_map){ s, e, 0, ckey };
		t->refs++;
		held[(*n_held)++] = ckey;
		cursor = e;
	}
	if (cursor < m->end)
		pm[(*n)++] = map_piece(m, cursor, m->end, key);
}

int unwinder_update_process(struct unwinder *u, uint32_t pid, uint64_t start_time_ns,
			    const struct procmaps *maps, const uint16_t *module_ids,
			    const struct unwind_copies *copies)
{
	size_t n_copies = copies ? copies->n : 0, n_held = 0, n_pm = 0, next = 0;
	_cleanup_free_ struct proc_map *pm = NULL;
	_cleanup_free_ uint64_t *held = NULL;
	struct copies_id id, *idp = NULL;
	uint64_t *slot;
	struct proc *p, *old;
	uint32_t first;
	int r;

	if (maps->n == 0)
		return 0;
	/* Each table that comes back describes the process again, all its
	 * mappings: past this many, that is quadratic work on the loop (a
	 * user mapping 20,000 binaries held it for seconds). */
	if (maps->n > UNWINDER_MAX_PROCESS_MAPPINGS) {
		u->stats.processes_refused++;
		return -E2BIG;
	}
	/* each region adds at most two pieces: itself and what precedes it */
	pm = calloc(maps->n + 2 * n_copies, sizeof(*pm));
	held = calloc(maps->n + n_copies, sizeof(*held));
	if (!pm || !held)
		return -ENOMEM;
	if (n_copies > 0) {
		memset(&id, 0, sizeof(id)); /* compared and hashed as bytes */
		id.region_size = copies->region_size;
		if (trampoline_decode(copies->code, copies->code_size, &id.shape) == 0)
			idp = &id;
		else
			u->stats.copy_templates_refused++;
	}

	for (size_t i = 0; i < maps->n; i++) {
		const struct procmap *m = &maps->maps[i];
		uint64_t key = module_ids[i];
		struct table *t = NULL;

		if (key >= FRAME_MODULE_FIRST && key <= FRAME_MODULE_LAST)
			t = table_get(u, key);
		/* else anonymous (JIT) or unreadable: frame pointers */
		if (t && !t->error) {
			t->refs++;
			held[n_held++] = key;
		} else {
			key = 0;
		}
		split_mapping(u, m, key, copies, idp, &next, pm, &n_pm, held, &n_held);
	}

	/* Everything that can fail without touching BPF, first: once BPF
	 * reads the new entry there is no going back. */
	p = calloc(1, sizeof(*p));
	if (!p || !(slot = u64map_upsert(&u->procs, pid, NULL))) {
		free(p);
		for (size_t i = 0; i < n_held; i++)
			table_unref(u, held[i]);
		u->stats.processes_refused++;
		return -ENOMEM;
	}
	old = (struct proc *)(uintptr_t)*slot; /* NULL when just added */

	r = describe(u, pid, pm, n_pm, &first);
	if (r < 0) {
		for (size_t i = 0; i < n_held; i++)
			table_unref(u, held[i]);
		free(p);
		if (!old)
			u64map_remove(&u->procs, pid);
		u->stats.processes_refused++;
		return r;
	}

	/* BPF now reads the new entry; the old one's ranges can go. */
	*p = (struct proc){ pid, start_time_ns, first, (uint32_t)n_pm, TAKE_PTR(pm),
			    TAKE_PTR(held), n_held, false };
	*slot = (uintptr_t)p;
	if (old) {
		proc_release(u, old);
		proc_free(old);
	}
	return 0;
}

static bool proc_holds(const struct proc *p, uint64_t key)
{
	for (size_t i = 0; i < p->n_keys; i++)
		if (p->keys[i] == key)
			return true;
	return false;
}

/* Describes a process again, after one of its tables changed state. */
static void redescribe(struct unwinder *u, struct proc *p)
{
	uint32_t first;

	if (describe(u, p->pid, p->maps, p->mappings_count, &first) < 0)
		return; /* it keeps its old description */
	(void)rangealloc_put(&u->mappings, p->mappings_first, p->mappings_count);
	p->mappings_first = first;
}

/* Every process that maps key's binary, described again: its table is
 * ready, or will never be (it was flagged pending until now). */
static void redescribe_holders(struct unwinder *u, uint64_t key)
{
	/* once per process at the end of unwinder_complete, however many of
	 * its tables came back: each describe writes all of its mappings */
	U64MAP_FOREACH(ps, &u->procs) {
		struct proc *p = (struct proc *)(uintptr_t)ps->value;

		if (proc_holds(p, key))
			p->stale = true;
	}
}

static void redescribe_stale(struct unwinder *u)
{
	U64MAP_FOREACH(ps, &u->procs) {
		struct proc *p = (struct proc *)(uintptr_t)ps->value;

		if (p->stale) {
			p->stale = false;
			redescribe(u, p);
		}
	}
}

/* A build that could not be kept (no room, no memory): the table goes, and
 * so do the processes' references on it and their mappings' ties to it, so
 * that the next table of this module starts from none and no process is
 * described with it unless it takes a reference (a later describe of this
 * one would otherwise point BPF at a new table under the same key that it
 * does not hold, whose rows may go to another table once it is evicted);
 * they walk it with frame pointers, no longer flagged as waiting for it. */
static void table_refused(struct unwinder *u, uint64_t key, struct table *t)
{
	u64map_remove(&u->tables, key);
	table_free(t);
	u->stats.tables_refused++;
	U64MAP_FOREACH(slot, &u->procs) {
		struct proc *p = (struct proc *)(uintptr_t)slot->value;
		size_t kept = 0;

		for (size_t i = 0; i < p->n_keys; i++)
			if (p->keys[i] != key)
				p->keys[kept++] = p->keys[i];
		if (kept == p->n_keys)
			continue;
		p->n_keys = kept;
		for (size_t i = 0; i < p->mappings_count; i++)
			if (p->maps[i].key == key)
				p->maps[i].key = 0;
		redescribe(u, p);
	}
}

/* A build that failed: remembered when the file itself has no usable CFI
 * or is past the builder's caps (not retried), refused otherwise. */
static void table_failed(struct unwinder *u, uint64_t key, struct table *t, int r)
{
	if (r == -ENODATA || r == -ENOEXEC || r == -EFBIG || r == -E2BIG || r == -ETIMEDOUT) {
		t->building = false;
		t->error = r;
		if (r == -ETIMEDOUT)
			u->stats.tables_abandoned++;
		else if (r == -E2BIG)
			u->stats.tables_oversized++;
		else
			u->stats.tables_failed++;
		redescribe_holders(u, key);
		return;
	}
	table_refused(u, key, t);
}

/* A table's rows uploaded: it is ready, and every process that maps it is
 * described again. */
static void table_uploaded(struct unwinder *u, uint64_t key, struct table *t, struct build_job *j)
{
	u->stats.upload_ns += j->upload_ns;
	if (j->r < 0) {
		(void)rangealloc_put(&u->rows, t->rows_first, j->table->n_rows);
		table_refused(u, key, t);
		return;
	}
	t->building = false;
	t->rows_count = j->table->n_rows;
	t->fp_first = j->table->fp_first;
	t->fp_end = j->table->fp_end;
	t->base_vaddr = j->table->base_vaddr;
	t->segs = TAKE_PTR(j->segs);
	t->n_segs = j->n_segs;
	u->stats.tables_built++;
	u->stats.cfi_bytes += j->table->cfi_bytes;
	{
		const char *path = "?", *build_id;

		(void)symbolizer_describe_module(u->opts.symbolizer, (uint16_t)key, &path, &build_id);
		log_debug("Unwind table of %s: %zu rows, built in %.1f ms, uploaded in %.1f ms, "
			  "ready %.1f ms after it was asked for.",
			  path, j->table->n_rows, j->build_ns / 1e6, j->upload_ns / 1e6,
			  (now_monotonic_ns() - j->submitted_ns) / 1e6);
	}
	redescribe_holders(u, key);
}

/* A table built: room for its rows in unwind_rows (from idle tables if
 * need be), and its rows uploaded here when they are few, else back to the
 * builder to upload them.  Returns false when the job is done with. */
static bool table_built(struct unwinder *u, uint64_t key, struct table *t, struct build_job *j)
{
	uint32_t first;
	int r;

	u->stats.build_ns += j->build_ns;
	if (j->r < 0) {
		table_failed(u, key, t, j->r);
		return false;
	}
	if (j->table->n_rows > u->opts.loop_upload_max_rows) {
		r = reserve_rows(u, j->table->n_rows, &first);
		if (r == 0) {
			t->rows_first = first;
			builder_submit_upload(u->builder, j, first);
			return true;
		}
	} else {
		/* a small table: one batch here, a round trip saved */
		uint64_t t0 = now_monotonic_ns();

		j->stage = BUILD_STAGE_UPLOAD;
		r = place_rows(u, j->table->rows, j->table->n_rows, &first);
		j->upload_ns = now_monotonic_ns() - t0;
		if (r == 0) {
			t->rows_first = first;
			table_uploaded(u, key, t, j);
			return false;
		}
		u->stats.upload_ns += j->upload_ns;
	}
	table_refused(u, key, t); /* no room, or the upload failed */
	return false;
}

void unwinder_complete(struct unwinder *u)
{
	uint64_t start = now_monotonic_ns();
	struct build_job *j, **tail = &u->done;
	size_t n = 0;

	while (*tail)
		tail = &(*tail)->next;
	*tail = builder_take_done(u->builder);
	while ((j = u->done)) {
		uint64_t *slot;
		struct table *t;

		if (n++ && now_monotonic_ns() - start >= UNWINDER_COMPLETE_SLICE_NS) {
			/* the rest on a later turn, after what else is ready */
			u->stats.completions_cut++;
			(void)!write(builder_fd(u->builder), &(uint64_t){ 1 }, sizeof(uint64_t));
			return;
		}
		u->done = j->next;
		slot = u64map_get(&u->tables, j->key);
		t = slot ? (struct table *)(uintptr_t)*slot : NULL;
		if (t && t->building) {
			if (j->stage == BUILD_STAGE_UPLOAD)
				table_uploaded(u, j->key, t, j);
			else if (table_built(u, j->key, t, j))
				continue; /* back to the builder, to upload */
			/* ready, failed or refused (t is gone then): built */
			u->stats.tables_building--;
		}
		/* a big table's rows were mmapped (base/heap.h): freeing them
		 * gives them back to the system */
		build_job_free(j);
	}
	redescribe_stale(u);
}

void unwinder_retry_opens(struct unwinder *u)
{
	_cleanup_free_ uint64_t *keys = NULL;
	size_t n = 0;

	if (!u->awaiting_fd)
		return;
	/* the keys first: a table refused leaves the map being walked */
	keys = malloc(u->awaiting_fd * sizeof(*keys));
	if (!keys)
		return; /* the next call */
	U64MAP_FOREACH(slot, &u->tables) {
		if (((struct table *)(uintptr_t)slot->value)->awaiting_fd && n < u->awaiting_fd)
			keys[n++] = slot->key;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t *slot = u64map_get(&u->tables, keys[i]);
		struct table *t = slot ? (struct table *)(uintptr_t)*slot : NULL;
		int fd;

		if (!t || !t->awaiting_fd)
			continue;
		fd = symbolizer_module_fd(u->opts.symbolizer, (uint16_t)keys[i]);
		if (fd == -EAGAIN)
			continue;
		t->awaiting_fd = false;
		u->awaiting_fd--;
		if (fd < 0 || table_submit(u, keys[i], fd) < 0) {
			/* no descriptor after all: frame pointers, as when
			 * there was none to begin with */
			u->stats.tables_building--;
			table_refused(u, keys[i], t);
		}
	}
}

int unwinder_fd(const struct unwinder *u)
{
	return builder_fd(u->builder);
}

void unwinder_forget_process(struct unwinder *u, uint32_t pid, uint64_t start_time_ns)
{
	uint64_t *slot = u64map_get(&u->procs, pid);
	struct proc *p;

	if (!slot)
		return;
	p = (struct proc *)(uintptr_t)*slot;
	if (p->start_time_ns != start_time_ns)
		return;
	(void)bpf_map_delete_elem(u->opts.processes_fd, &pid);
	proc_release(u, p);
	proc_free(p);
	u64map_remove(&u->procs, pid);
}

void unwinder_mark_modules(const struct unwinder *u, struct module_set *used)
{
	U64MAP_FOREACH(slot, &u->tables) {
		const struct table *t = (const struct table *)(uintptr_t)slot->value;

		if (!(slot->key & COPIES_KEY_BIT) && (t->refs > 0 || t->building))
			module_set_add(used, (uint16_t)slot->key);
	}
}

void unwinder_forget_module(struct unwinder *u, uint16_t module)
{
	uint64_t *slot = u64map_get(&u->tables, module);
	struct table *t;

	if (!slot)
		return;
	t = (struct table *)(uintptr_t)*slot;
	if (t->refs > 0 || t->building)
		return; /* unwinder_mark_modules said it is in use */
	if (!t->error)
		(void)rangealloc_put(&u->rows, t->rows_first, t->rows_count);
	u64map_remove(&u->tables, module);
	table_free(t);
}

void unwinder_get_stats(const struct unwinder *u, struct unwinder_stats *ret)
{
	*ret = u->stats;
	ret->tables = ret->tables_idle = ret->copy_tables = 0;
	U64MAP_FOREACH(slot, &u->tables) {
		const struct table *t = (const struct table *)(uintptr_t)slot->value;

		ret->tables += !t->error && !t->building;
		ret->copy_tables += t->copies != NULL;
		ret->tables_idle += !t->error && !t->building && t->refs == 0;
	}
	ret->rows_used = u->rows.used;
	ret->rows_capacity = u->rows.capacity;
	ret->mappings_used = u->mappings.used;
	ret->mappings_capacity = u->mappings.capacity;
	ret->processes = u->procs.count;
}
