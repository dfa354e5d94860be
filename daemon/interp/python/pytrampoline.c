/* SPDX-License-Identifier: MIT */
/*
 * pytrampoline.c - see pytrampoline.h.
 *
 * A search costs nothing for a process without anonymous executable
 * memory (every Python process not run with -X perf), and two
 * process_vm_readv() calls of at most 2.1 KiB and 64 bytes per 64 KiB chunk
 * otherwise; it runs when the process's maps change (an arena is new),
 * never per sample, and reads only when the candidate mappings moved, and
 * then only the chunks not known as arenas already.
 */
#include "interp/python/pytrampoline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "base/search.h"
#include "interp/python/pycode.h"
#include "perfd/macro.h"

/* The first bytes of a chunk read at once: copies 0, 1 and 2 at the
 * largest stride looked for. */
#define HEAD_BYTES (2 * PYTRAMPOLINE_STRIDE_MAX + PYRUNTIME_TRAMPOLINE_MAX)

static bool is_candidate(const struct procmap *m)
{
	return m->path[0] == '\0' && m->executable && m->readable && !m->writable && !m->shared &&
	       m->end - m->start >= PYTRAMPOLINE_ARENA_SIZE;
}

/* Whether the chunk at addr is an arena of copies of code[0..size), and
 * its stride.  Returns 1 (and *ret_stride), 0, or -ESRCH. */
static int check_chunk(pid_t pid, uint64_t addr, const uint8_t *code, size_t size,
		       uint32_t *ret_stride)
{
	uint8_t head[HEAD_BYTES], last[PYRUNTIME_TRAMPOLINE_MAX];
	uint32_t stride = 0;
	size_t copies;
	int r;

	r = pymem_read(pid, addr, head, sizeof(head));
	if (r < 0)
		return r == -ESRCH ? r : 0;
	if (memcmp(head, code, size) != 0)
		return 0;
	for (size_t s = size; s <= PYTRAMPOLINE_STRIDE_MAX; s++)
		if (memcmp(head + s, code, size) == 0) {
			stride = (uint32_t)s;
			break;
		}
	if (stride == 0 || memcmp(head + 2 * stride, code, size) != 0)
		return 0;
	copies = PYTRAMPOLINE_ARENA_SIZE / stride;
	r = pymem_read(pid, addr + (copies - 1) * stride, last, size);
	if (r < 0)
		return r == -ESRCH ? r : 0;
	if (memcmp(last, code, size) != 0)
		return 0;
	*ret_stride = stride;
	return 1;
}

static int grow(uint64_t **starts, uint32_t **strides, size_t *cap)
{
	size_t c = MAX(*cap * 2, (size_t)8);
	uint64_t *s = realloc(*starts, c * sizeof(**starts));
	uint32_t *t;

	if (!s)
		return -ENOMEM;
	*starts = s;
	t = realloc(*strides, c * sizeof(**strides));
	if (!t)
		return -ENOMEM;
	*strides = t;
	*cap = c;
	return 0;
}

/* The index of the last arena starting at or below addr, + 1; 0: none. */
static size_t arena_upto(const struct pytrampoline_arenas *arenas, uint64_t addr)
{
	return search_upper_bound(arenas->starts, arenas->n, sizeof(*arenas->starts), addr,
				  search_key_u64);
}

uint64_t pytrampoline_signature(const struct procmaps *maps)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL;

	for (size_t i = 0; i < maps->n; i++)
		if (is_candidate(&maps->maps[i]))
			h = hash_u64(hash_u64(h ^ maps->maps[i].start) ^ maps->maps[i].end);
	return h;
}

int pytrampoline_find(pid_t pid, const struct procmaps *maps, const uint8_t *code, size_t size,
		      struct pytrampoline_arenas *arenas)
{
	_cleanup_free_ uint64_t *starts = NULL;
	_cleanup_free_ uint32_t *strides = NULL;
	size_t n = 0, cap = 0, chunks = 0;
	uint64_t signature;

	if (!code || size == 0 || size > PYRUNTIME_TRAMPOLINE_MAX)
		return -EINVAL;
	signature = pytrampoline_signature(maps);
	if (arenas->searched && arenas->signature == signature)
		return (int)arenas->n; /* the same candidates: the same arenas */
	for (size_t i = 0; i < maps->n && n < PYTRAMPOLINE_MAX_ARENAS; i++) {
		const struct procmap *m = &maps->maps[i];

		if (!is_candidate(m))
			continue;
		for (uint64_t a = m->start; m->end - a >= PYTRAMPOLINE_ARENA_SIZE &&
					    n < PYTRAMPOLINE_MAX_ARENAS &&
					    chunks < PYTRAMPOLINE_MAX_CHUNKS;
		     a += PYTRAMPOLINE_ARENA_SIZE) {
			size_t known = arena_upto(arenas, a);
			uint32_t stride;
			int r;

			if (known > 0 && arenas->starts[known - 1] == a) {
				/* CPython never frees an arena: no need to read it again */
				stride = arenas->strides[known - 1];
			} else {
				chunks++;
				r = check_chunk(pid, a, code, size, &stride);
				if (r < 0)
					return r;
				if (r == 0)
					continue;
			}
			if (n == cap && grow(&starts, &strides, &cap) < 0)
				return -ENOMEM;
			starts[n] = a;
			strides[n++] = stride;
		}
	}
	pytrampoline_arenas_done(arenas);
	arenas->starts = TAKE_PTR(starts);
	arenas->strides = TAKE_PTR(strides);
	arenas->n = n;
	arenas->signature = signature;
	arenas->searched = true;
	return (int)n;
}

int pytrampoline_candidates(const struct procmaps *maps, struct procmaps *ret)
{
	size_t n = 0;

	for (size_t i = 0; i < maps->n; i++)
		n += is_candidate(&maps->maps[i]);
	*ret = (struct procmaps){ .maps = calloc(n ? n : 1, sizeof(*ret->maps)) };
	if (!ret->maps)
		return -ENOMEM;
	for (size_t i = 0; i < maps->n; i++)
		if (is_candidate(&maps->maps[i])) {
			ret->maps[ret->n] = maps->maps[i];
			ret->maps[ret->n++].path = (char *)"";
		}
	return 0;
}

int pytrampoline_arenas_copy(const struct pytrampoline_arenas *from,
			     struct pytrampoline_arenas *to)
{
	size_t n = from->n ? from->n : 1;

	pytrampoline_arenas_done(to);
	to->starts = malloc(n * sizeof(*to->starts));
	to->strides = malloc(n * sizeof(*to->strides));
	if (!to->starts || !to->strides) {
		pytrampoline_arenas_done(to);
		return -ENOMEM;
	}
	if (from->n) {
		memcpy(to->starts, from->starts, from->n * sizeof(*to->starts));
		memcpy(to->strides, from->strides, from->n * sizeof(*to->strides));
	}
	to->n = from->n;
	to->signature = from->signature;
	to->searched = from->searched;
	return 0;
}

bool pytrampoline_contains(const struct pytrampoline_arenas *arenas, uint64_t addr)
{
	size_t lo = arena_upto(arenas, addr);

	return lo > 0 && addr - arenas->starts[lo - 1] < PYTRAMPOLINE_ARENA_SIZE;
}

void pytrampoline_arenas_done(struct pytrampoline_arenas *arenas)
{
	free(arenas->starts);
	free(arenas->strides);
	*arenas = (struct pytrampoline_arenas){ 0 };
}
