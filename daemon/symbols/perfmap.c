/* SPDX-License-Identifier: MIT */
/*
 * perfmap.c - see perfmap.h.  Entries are kept sorted by start with the
 * overlaps resolved at parse time, so a lookup is one binary search; names
 * live in one arena.  A map of 100k JIT functions parses in tens of ms.
 * The file is the process's to write, so it is read within bounds: lines
 * into one buffer of PERFMAP_LINE_MAX bytes (longer ones are skipped),
 * PERFMAP_MAX_BYTES in all.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/lineread.h"
#include "base/search.h"
#include "perfd/macro.h"
#include "symbols/perfmap.h"

struct entry {
	uint64_t start, end;
	size_t name; /* offset into names */
	size_t order; /* as added (line, record): later wins */
};

struct perfmap {
	struct entry *entries;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
};

static int by_start_then_order(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

static int parse_line(char *line, uint64_t *start, uint64_t *size, char **name)
{
	char *end;

	errno = 0;
	*start = strtoull(line, &end, 16);
	if (errno || end == line || *end != ' ')
		return -EINVAL;
	line = end + 1;
	*size = strtoull(line, &end, 16);
	if (errno || end == line || *end != ' ' || *size == 0 || *start + *size < *start)
		return -EINVAL;
	*name = end + 1;
	end = strchr(*name, '\n');
	if (!end)
		return -EINVAL; /* the JIT is still writing this line */
	*end = 0;
	return **name ? 0 : -EINVAL;
}

/* Keeps, for each address, only the entry written last: walks entries by
 * start and drops or trims those a later-written one overlaps. */
static size_t resolve_overlaps(struct entry *e, size_t n)
{
	size_t out = 0;

	for (size_t i = 0; i < n; i++) {
		while (out > 0 && e[out - 1].end > e[i].start) {
			struct entry *prev = &e[out - 1];

			if (prev->order > e[i].order) {
				/* the earlier-starting one is newer: trim this one */
				e[i].start = prev->end;
				break;
			}
			if (prev->start < e[i].start) {
				prev->end = e[i].start; /* keep its head */
				break;
			}
			out--; /* fully covered by a newer one */
		}
		if (e[i].start < e[i].end)
			e[out++] = e[i];
	}
	return out;
}

int perfmap_new(struct perfmap **ret)
{
	struct perfmap *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	*ret = m;
	return 0;
}

/* Room for one more entry; 0 or -ENOMEM. */
static int reserve_entry(struct perfmap *m)
{
	size_t c;
	struct entry *e;

	if (m->n < m->cap)
		return 0;
	c = m->cap ? m->cap * 2 : 256;
	e = realloc(m->entries, c * sizeof(*e));
	if (!e)
		return -ENOMEM;
	m->entries = e;
	m->cap = c;
	return 0;
}

int perfmap_add(struct perfmap *m, uint64_t start, uint64_t size, const char *name,
		size_t name_len)
{
	int r;

	if (size == 0 || start + size < start || name_len == 0)
		return -EINVAL;
	r = reserve_entry(m);
	if (r < 0)
		return r;
	if (m->names_len + name_len + 1 > m->names_cap) {
		size_t c = MAX(m->names_cap * 2, m->names_len + name_len + 1 + 4096);
		char *p = realloc(m->names, c);

		if (!p)
			return -ENOMEM;
		m->names = p;
		m->names_cap = c;
	}
	memcpy(m->names + m->names_len, name, name_len);
	m->names[m->names_len + name_len] = '\0';
	m->entries[m->n] = (struct entry){ start, start + size, m->names_len, m->n };
	m->n++;
	m->names_len += name_len + 1;
	return 0;
}

int perfmap_add_named_as(struct perfmap *m, uint64_t start, uint64_t size, size_t index)
{
	int r;

	if (index >= m->n)
		return -ENOENT;
	if (size == 0 || start + size < start)
		return -EINVAL;
	r = reserve_entry(m);
	if (r < 0)
		return r;
	m->entries[m->n] = (struct entry){ start, start + size, m->entries[index].name, m->n };
	m->n++;
	return 0;
}

const char *perfmap_name_at(const struct perfmap *m, size_t index)
{
	return index < m->n ? m->names + m->entries[index].name : NULL;
}

void perfmap_seal(struct perfmap *m)
{
	qsort_safe(m->entries, m->n, sizeof(*m->entries), by_start_then_order);
	/* two passes settle chains of overlaps; after them no two overlap */
	m->n = resolve_overlaps(m->entries, m->n);
	qsort_safe(m->entries, m->n, sizeof(*m->entries), by_start_then_order);
	m->n = resolve_overlaps(m->entries, m->n);
}

int perfmap_parse(FILE *f, struct perfmap **ret, size_t *ret_skipped)
{
	_cleanup_free_ char *line = malloc(PERFMAP_LINE_MAX + 1);
	struct perfmap *m = NULL;
	size_t skipped = 0, lines = 0;
	uint64_t bytes = 0;
	ssize_t len;
	int r = -ENOMEM;

	if (!line || perfmap_new(&m) < 0)
		goto fail;
	while ((len = line_read(f, line, PERFMAP_LINE_MAX + 1, &bytes)) != 0) {
		uint64_t start, size;
		char *name;

		if (len < 0 && len != -E2BIG) {
			r = (int)len;
			goto fail;
		}
		if (bytes > PERFMAP_MAX_BYTES || ++lines > PERFMAP_MAX_ENTRIES) {
			r = -EFBIG;
			goto fail;
		}
		if (len < 0 || parse_line(line, &start, &size, &name) < 0) {
			skipped++;
			continue;
		}
		r = perfmap_add(m, start, size, name, strlen(name));
		if (r < 0)
			goto fail;
	}
	perfmap_seal(m);
	if (ret_skipped)
		*ret_skipped = skipped;
	*ret = m;
	return 0;
fail:
	perfmap_free(m);
	return r;
}

static uint64_t entry_start(const void *entry)
{
	return ((const struct entry *)entry)->start;
}

const char *perfmap_lookup(const struct perfmap *m, uint64_t addr, uint64_t *ret_offset)
{
	size_t lo = search_upper_bound(m->entries, m->n, sizeof(*m->entries), addr, entry_start);

	if (lo == 0 || addr >= m->entries[lo - 1].end)
		return NULL;
	if (ret_offset)
		*ret_offset = addr - m->entries[lo - 1].start;
	return m->names + m->entries[lo - 1].name;
}

size_t perfmap_count(const struct perfmap *m)
{
	return m->n;
}

size_t perfmap_memory(const struct perfmap *m)
{
	return sizeof(*m) + m->cap * sizeof(struct entry) + m->names_cap;
}

struct perfmap *perfmap_free(struct perfmap *m)
{
	if (m) {
		free(m->entries);
		free(m->names);
		free(m);
	}
	return NULL;
}
