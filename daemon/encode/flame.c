/* SPDX-License-Identifier: MIT */
/*
 * flame.c - see flame.h.  Pruning is one pass over the nodes in index
 * order: calltree_node() makes a parent before its children, so a node's
 * parent is decided before it and no recursion is needed.  Colours are
 * HSL, as a person would pick them, turned into RGB here so that the page
 * and the SVG draw exactly the same ones.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/u64map.h"
#include "encode/flame.h"
#include "perfd/macro.h"

/* A family per kind: hue, saturation and lightness of shade 0 (percent),
 * and how far a name's shade moves the hue (its lightness moves by 8). */
static const struct {
	const char *kind;
	double hue, saturation, lightness, spread;
} families[] = {
	{ "kernel", 44, 90, 55, 10 },   { "native", 0, 70, 64, 18 },
	{ "user", 0, 70, 64, 18 },      { "python", 135, 45, 55, 30 },
	{ "jit", 190, 60, 52, 20 },     { "special", 0, 0, 72, 0 },
	{ "process", 220, 30, 74, 10 }, { "thread", 220, 25, 82, 10 },
};

/* 0xRRGGBB of hue h (degrees), saturation s and lightness l (0..1). */
static uint32_t hsl(double h, double s, double l)
{
	double c = (1 - fabs(2 * l - 1)) * s, hp = fmod(fmod(h, 360) + 360, 360) / 60;
	double x = c * (1 - fabs(fmod(hp, 2) - 1)), m = l - c / 2;
	/* per sector of 60 degrees: which of r, g, b gets c and which x */
	static const uint8_t big[6] = { 0, 1, 1, 2, 2, 0 }, mid[6] = { 1, 0, 2, 1, 0, 2 };
	double rgb[3] = { 0, 0, 0 };
	int sector = MIN((int)hp, 5);
	uint32_t out = 0;

	rgb[big[sector]] = c;
	rgb[mid[sector]] = x;
	for (int i = 0; i < 3; i++)
		out = out << 8 | (uint32_t)lround(fmin(fmax(rgb[i] + m, 0), 1) * 255);
	return out;
}

static int family_of(const char *kind)
{
	for (size_t i = 0; i < ELEMENTSOF(families); i++)
		if (strcmp(families[i].kind, kind) == 0)
			return (int)i;
	return 5; /* special: grey */
}

static uint32_t kind_colour(const char *kind, double shade)
{
	int k = family_of(kind);

	return hsl(families[k].hue + families[k].spread * shade, families[k].saturation / 100,
		   (families[k].lightness + 8 * shade) / 100);
}

uint32_t flame_kind_colour(const char *kind)
{
	return kind_colour(kind, 0);
}

/* A name's shade in [0, 1): from the hash of its text, so a name keeps
 * its colour from one graph to the next. */
static double shade_of(const char *s, size_t n)
{
	/* FNV's high bits hardly move for short names: avalanche them */
	return (double)(hash_u64(hash_text(s, n)) >> 32) / 4294967296.0;
}

double flame_change(const struct flame *f, uint32_t node)
{
	return flame_share(f->t->nodes[node].total, f->o.total) -
	       flame_share(f->o.before[node].total, f->o.before_total);
}

/* Growth red, shrinkage blue, paler as the change is smaller. */
static uint32_t change_colour(double change, double full)
{
	double t = fmin(fabs(change) / full, 1);

	if (fabs(change) < 0.005)
		return 0xe8e8e8;
	return hsl(change > 0 ? 0 : 217, 0.80, 0.90 - 0.42 * t);
}

static bool wide_enough(const struct flame *f, uint32_t i, uint64_t min, uint64_t min_before)
{
	const struct calltree_node *n = &f->t->nodes[i];
	uint64_t b = f->o.before ? f->o.before[i].total : 0;

	return (n->total > 0 && n->total >= min) || (b > 0 && b >= min_before);
}

int flame_init(struct flame *f, const struct calltree *t, const struct flame_opts *o)
{
	uint64_t min = (uint64_t)ceil((double)o->total * o->min_share);
	uint64_t min_before = (uint64_t)ceil((double)o->before_total * o->min_share);

	*f = (struct flame){ .t = t, .o = *o };
	f->node_name = malloc((t->n ? t->n : 1) * sizeof(*f->node_name));
	f->text = calloc(1, 256);
	f->modules = calloc(16, sizeof(*f->modules));
	if (!f->node_name || !f->text || !f->modules)
		return -ENOMEM;
	f->text_cap = 256;
	f->text_len = 1; /* offset 0: "", the name of no module */
	f->name_start = 1;
	f->cap_modules = 16;
	f->n_modules = 1;
	for (size_t i = 0; i < t->n; i++) {
		const struct calltree_node *n = &t->nodes[i];
		bool root = n->parent == CALLTREE_NO_PARENT;

		if (root || (flame_kept(f, n->parent) && wide_enough(f, (uint32_t)i, min, min_before))) {
			f->node_name[i] = FLAME_UNNAMED;
			f->kept++;
			/* of BEFORE only, and the outermost such */
			if (o->before && n->total == 0 && (root || t->nodes[n->parent].total > 0)) {
				f->gone_nodes++;
				f->gone_value += o->before[i].total;
			}
			continue;
		}
		f->node_name[i] = FLAME_PRUNED;
		f->pruned_nodes++;
		if (flame_kept(f, n->parent)) {
			f->pruned_value += n->total;
			f->pruned_before_value += o->before ? o->before[i].total : 0;
		}
	}
	return 0;
}

void flame_done(struct flame *f)
{
	free(f->node_name);
	free(f->node_colour);
	free(f->text);
	free(f->names);
	free(f->modules);
	*f = (struct flame){ 0 };
}

/* Appends s[0..n) and a NUL to the text without ending anything. */
static int put_text(struct flame *f, const char *s, size_t n)
{
	if (f->text_len + n + 1 > UINT32_MAX ||
	    array_grow((void **)&f->text, &f->text_cap, f->text_len + n + 1, 1, 4096) < 0)
		return -ENOMEM;
	memcpy(f->text + f->text_len, s, n);
	f->text_len += n;
	f->text[f->text_len] = '\0';
	return 0;
}

int flame_text(struct flame *f, const char *s, size_t n)
{
	return put_text(f, s, n);
}

int64_t flame_name_end(struct flame *f, uint32_t kind, uint32_t module)
{
	size_t len = f->text_len - f->name_start;

	if (kind >= f->o.n_kinds || module >= f->n_modules)
		return -EINVAL;
	if (put_text(f, "", 0) < 0 ||
	    array_grow((void **)&f->names, &f->cap_names, f->n_names + 1, sizeof(*f->names), 256) < 0)
		return -ENOMEM;
	f->names[f->n_names] = (struct flame_name){
		.text = (uint32_t)f->name_start,
		.len = (uint32_t)len,
		.kind = kind,
		.module = module,
		.colour = kind_colour(f->o.kinds[kind], shade_of(f->text + f->name_start, len)),
	};
	f->text_len++; /* past the NUL */
	f->name_start = f->text_len;
	return (int64_t)f->n_names++;
}

int64_t flame_module(struct flame *f, const char *path)
{
	size_t at = f->name_start;

	if (f->text_len != f->name_start)
		return -EINVAL; /* in the middle of a name */
	if (put_text(f, path, strlen(path)) < 0 ||
	    array_grow((void **)&f->modules, &f->cap_modules, f->n_modules + 1, sizeof(*f->modules), 16) < 0)
		return -ENOMEM;
	f->text_len++;
	f->name_start = f->text_len;
	f->modules[f->n_modules] = (uint32_t)at;
	return (int64_t)f->n_modules++;
}

int flame_finish(struct flame *f)
{
	double largest = 0;

	for (size_t i = 0; i < f->t->n; i++)
		if (f->node_name[i] == FLAME_UNNAMED)
			return -EINVAL;
	if (!f->o.before)
		return 0;
	f->node_colour = malloc((f->t->n ? f->t->n : 1) * sizeof(*f->node_colour));
	if (!f->node_colour)
		return -ENOMEM;
	for (size_t i = 0; i < f->t->n; i++)
		if (flame_kept(f, (uint32_t)i))
			largest = fmax(largest, fabs(flame_change(f, (uint32_t)i)));
	f->full_change = fmax(largest, FLAME_FULL_CHANGE_MIN);
	for (size_t i = 0; i < f->t->n; i++)
		f->node_colour[i] = flame_kept(f, (uint32_t)i)
					    ? change_colour(flame_change(f, (uint32_t)i), f->full_change)
					    : 0;
	return 0;
}
