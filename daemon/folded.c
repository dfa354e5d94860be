/* SPDX-License-Identifier: MIT */
/* folded.c - see folded.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "folded.h"
#include "frame.h"
#include "perfd/macro.h"

struct line {
	char *text; /* without the count */
	uint64_t count;
};

static int line_cmp(const void *x, const void *y)
{
	const struct line *a = x, *b = y;

	if (a->count != b->count)
		return a->count < b->count ? 1 : -1;
	return strcmp(a->text, b->text);
}

static int text_cmp(const void *x, const void *y)
{
	return strcmp(((const struct line *)x)->text, ((const struct line *)y)->text);
}

static void put_name(FILE *f, const char *name)
{
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		fputc(*p == ';' || *p < 0x20 || *p == 0x7f ? '_' : *p, f);
}

/* Renders one stack root first into a malloc'ed string. */
static char *render(const char *comm, const struct stack *s,
		    frame_namer_t namer, void *ctx)
{
	char *text = NULL, name[1024];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	put_name(f, comm);
	for (int i = (int)s->depth - 1; i >= 0; i--) {
		fputc(';', f);
		put_name(f, namer(ctx, s->frames[i], name, sizeof(name)));
		if (frame_module(s->frames[i]) == FRAME_MODULE_KERNEL)
			fputs("_[k]", f);
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

int folded_write(FILE *f, const char *comm, const struct u64map *counts,
		 const struct stacktab *stacks, frame_namer_t namer, void *ctx)
{
	_cleanup_free_ struct line *lines = NULL;
	size_t n = 0;
	int r = 0;

	lines = calloc(counts->count ? counts->count : 1, sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	U64MAP_FOREACH(slot, counts) {
		const struct stack *s = stacktab_get(stacks, (uint32_t)slot->key);

		if (!s || slot->value == 0)
			continue;
		lines[n].text = render(comm, s, namer, ctx);
		if (!lines[n].text) {
			r = -ENOMEM;
			goto out;
		}
		lines[n++].count = slot->value;
	}
	/* Different stacks may name the same after symbolization (two
	 * addresses in one function): sort by text to merge them, then by
	 * count for the output. */
	qsort(lines, n, sizeof(*lines), text_cmp);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && strcmp(lines[i].text, lines[j].text) == 0; j++) {
			lines[i].count += lines[j].count;
			lines[j].count = 0;
		}
	}
	qsort(lines, n, sizeof(*lines), line_cmp);
	for (size_t i = 0; i < n && lines[i].count > 0; i++)
		fprintf(f, "%s %llu\n", lines[i].text,
			(unsigned long long)lines[i].count);
	if (fflush(f) != 0 || ferror(f))
		r = -EIO;
out:
	for (size_t i = 0; i < n; i++)
		free(lines[i].text);
	return r;
}
