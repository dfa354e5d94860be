/* SPDX-License-Identifier: MIT */
/* unwinder.c - see unwinder.h for the design. */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>

#include "base/clock.h"
#include "base/elfopen.h"
#include "profile/frame.h"
#include "perfd/macro.h"
#include "perfd/unwind.h"
#include "base/rangealloc.h"
#include "symbols/symbolize.h"
#include "base/u64map.h"
#include "unwind/unwind_table.h"
#include "unwind/unwinder.h"

#define UPLOAD_CHUNK 8192

struct segment {
	uint64_t offset, vaddr, filesz;
	bool executable;
};

struct table {
	uint32_t rows_first, rows_count;
	uint64_t base_vaddr;
	struct segment *segs;
	size_t n_segs;
	unsigned refs;
	int error;      /* <0: could not be built; not retried */
	uint64_t idle_since; /* when refs fell to 0: the LRU order of idle tables */
};

struct proc {
	uint32_t pid;
	uint64_t start_time_ns;
	uint32_t mappings_first, mappings_count;
	uint16_t *modules; /* table keys it holds a reference on */
	size_t n_modules;
};

struct unwinder {
	struct unwinder_opts opts;
	struct rangealloc rows, mappings;
	struct u64map tables; /* module id -> struct table * */
	struct u64map procs;  /* pid -> struct proc * */
	uint64_t clock;       /* ticks once per table release */
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
		free(t);
	}
}

static void proc_free(struct proc *p)
{
	if (p) {
		free(p->modules);
		free(p);
	}
}

struct unwinder *unwinder_free(struct unwinder *u)
{
	if (!u)
		return NULL;
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

/* Writes n values into consecutive indexes of an array map, in batches
 * where the kernel can, one by one where it cannot. */
static int upload(int map_fd, uint32_t first, const void *values, size_t value_size, size_t n)
{
	_cleanup_free_ uint32_t *keys = malloc(MIN(n, (size_t)UPLOAD_CHUNK) * sizeof(uint32_t));

	if (!keys && n)
		return -ENOMEM;
	for (size_t done = 0; done < n;) {
		uint32_t count = MIN(n - done, (size_t)UPLOAD_CHUNK);
		const char *v = (const char *)values + done * value_size;

		for (uint32_t i = 0; i < count; i++)
			keys[i] = first + done + i;
		if (bpf_map_update_batch(map_fd, keys, v, &count, NULL) < 0) {
			for (uint32_t i = 0; i < count; i++)
				if (bpf_map_update_elem(map_fd, &keys[i], v + i * value_size, BPF_ANY) < 0)
					return negative_errno();
			count = MIN(n - done, (size_t)UPLOAD_CHUNK);
		}
		done += count;
	}
	return 0;
}

static int read_segments(Elf *elf, struct table *t)
{
	size_t n;

	if (elf_getphdrnum(elf, &n) < 0)
		return -ENOEXEC;
	t->segs = calloc(n ? n : 1, sizeof(*t->segs));
	if (!t->segs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		t->segs[t->n_segs++] = (struct segment){ ph.p_offset, ph.p_vaddr, ph.p_filesz,
							 (ph.p_flags & PF_X) != 0 };
	}
	return 0;
}

/* Frees the table idle the longest (no process maps its binary).  Returns
 * false when none is idle. */
static bool evict_idle_table(struct unwinder *u)
{
	uint64_t best_key = 0, best_since = UINT64_MAX;
	struct table *best = NULL;

	U64MAP_FOREACH(slot, &u->tables) {
		struct table *t = (struct table *)(uintptr_t)slot->value;

		if (t->refs == 0 && !t->error && t->idle_since < best_since) {
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

/* Builds the table of a module and uploads its rows. */
static struct table *table_build(struct unwinder *u, uint64_t key)
{
	struct unwind_table *ut = NULL;
	struct table *t = calloc(1, sizeof(*t));
	uint64_t t0 = now_monotonic_ns();
	Elf *elf = NULL;
	int fd, r;

	if (!t)
		return NULL;
	fd = symbolizer_module_fd(u->opts.symbolizer, (uint16_t)key);
	r = fd;
	if (fd >= 0)
		r = unwind_table_build(fd, &ut);
	if (r == 0)
		r = elf_open_fd(fd, ELF_C_READ_MMAP, &elf);
	if (r == 0)
		r = read_segments(elf, t);
	if (elf)
		elf_end(elf);
	if (r == 0) {
		r = rangealloc_get(&u->rows, ut->n_rows, &t->rows_first);
		while (r == -ENOSPC && evict_idle_table(u))
			r = rangealloc_get(&u->rows, ut->n_rows, &t->rows_first);
	}
	if (r == 0) {
		r = upload(u->opts.rows_fd, t->rows_first, ut->rows, sizeof(*ut->rows), ut->n_rows);
		if (r < 0)
			(void)rangealloc_put(&u->rows, t->rows_first, ut->n_rows);
	}
	if (r == 0) {
		t->rows_count = ut->n_rows;
		t->base_vaddr = ut->base_vaddr;
		u->stats.tables_built++;
		u->stats.cfi_bytes += ut->cfi_bytes;
	} else if (r == -ENODATA || r == -ENOEXEC || r == -EFBIG) {
		/* the file itself has no usable CFI: remembered, not retried */
		t->error = r;
		u->stats.tables_failed++;
	} else {
		/* no room, no memory, a failed upload, no descriptor yet (the
		 * symbolizer opens the file for the next process that maps it,
		 * when the first was gone too soon): the next process that maps
		 * this binary tries again */
		table_free(t);
		t = NULL;
		u->stats.tables_refused++;
	}
	u->stats.build_ns += now_monotonic_ns() - t0;
	if (ut) {
		unwind_table_free(ut);
		/* A big library's table is megabytes of heap, used once to
		 * upload: give it back to the system rather than keep it in
		 * malloc's arena. */
		(void)malloc_trim(0);
	}
	return t;
}

static struct table *table_get(struct unwinder *u, uint64_t key)
{
	uint64_t *slot = u64map_get(&u->tables, key);
	struct table *t;

	if (slot)
		return (struct table *)(uintptr_t)*slot;
	t = table_build(u, key);
	if (!t)
		return NULL;
	slot = u64map_upsert(&u->tables, key, NULL);
	if (!slot) {
		if (!t->error)
			(void)rangealloc_put(&u->rows, t->rows_first, t->rows_count);
		table_free(t);
		return NULL;
	}
	*slot = (uintptr_t)t;
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
static bool mapping_adjust(const struct table *t, const struct procmap *m, uint64_t *ret)
{
	uint64_t lo = m->pgoff, hi = m->pgoff + (m->end - m->start);

	for (size_t i = 0; i < t->n_segs; i++) {
		const struct segment *s = &t->segs[i];

		if (s->executable && s->offset < hi && s->offset + s->filesz > lo) {
			*ret = m->start - m->pgoff + s->offset - s->vaddr + t->base_vaddr;
			return true;
		}
	}
	return false;
}

static void proc_release(struct unwinder *u, struct proc *p)
{
	for (size_t i = 0; i < p->n_modules; i++)
		table_unref(u, p->modules[i]);
	(void)rangealloc_put(&u->mappings, p->mappings_first, p->mappings_count);
}

int unwinder_update_process(struct unwinder *u, uint32_t pid, uint64_t start_time_ns,
			    const struct procmaps *maps, const uint16_t *module_ids)
{
	_cleanup_free_ struct perfd_unwind_mapping *entries = NULL;
	_cleanup_free_ uint16_t *held = NULL;
	struct perfd_unwind_process value;
	size_t n_held = 0;
	uint64_t *slot;
	struct proc *p, *old;
	uint32_t first;
	int r;

	if (maps->n == 0)
		return 0;
	entries = calloc(maps->n, sizeof(*entries));
	held = calloc(maps->n, sizeof(*held));
	if (!entries || !held)
		return -ENOMEM;

	for (size_t i = 0; i < maps->n; i++) {
		const struct procmap *m = &maps->maps[i];
		uint64_t key = module_ids[i];
		struct table *t;
		uint64_t adjust;

		entries[i].start = m->start;
		entries[i].end = m->end;
		if (key < FRAME_MODULE_FIRST || key > FRAME_MODULE_LAST)
			continue; /* anonymous (JIT) or unreadable: frame pointers */
		t = table_get(u, key);
		if (!t || t->error || !mapping_adjust(t, m, &adjust))
			continue;
		entries[i].pc_adjust = adjust;
		entries[i].rows_first = t->rows_first;
		entries[i].rows_count = t->rows_count;
		t->refs++;
		held[n_held++] = (uint16_t)key;
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

	r = rangealloc_get(&u->mappings, maps->n, &first);
	if (r == 0)
		r = upload(u->opts.mappings_fd, first, entries, sizeof(*entries), maps->n);
	if (r == 0) {
		value = (struct perfd_unwind_process){ first, maps->n };
		if (bpf_map_update_elem(u->opts.processes_fd, &pid, &value, BPF_ANY) < 0)
			r = negative_errno();
		if (r < 0)
			(void)rangealloc_put(&u->mappings, first, maps->n);
	}
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
	*p = (struct proc){ pid, start_time_ns, first, maps->n, TAKE_PTR(held), n_held };
	*slot = (uintptr_t)p;
	if (old) {
		proc_release(u, old);
		proc_free(old);
	}
	return 0;
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

void unwinder_get_stats(const struct unwinder *u, struct unwinder_stats *ret)
{
	*ret = u->stats;
	ret->tables = ret->tables_idle = 0;
	U64MAP_FOREACH(slot, &u->tables) {
		const struct table *t = (const struct table *)(uintptr_t)slot->value;

		ret->tables += !t->error;
		ret->tables_idle += !t->error && t->refs == 0;
	}
	ret->rows_used = u->rows.used;
	ret->rows_capacity = u->rows.capacity;
	ret->mappings_used = u->mappings.used;
	ret->mappings_capacity = u->mappings.capacity;
	ret->processes = u->procs.count;
}
