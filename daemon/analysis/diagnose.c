/* SPDX-License-Identifier: MIT */
/*
 * diagnose.c - the rules of `perfctl diagnose` (diagnose.h).
 *
 * Design: diagnose computes nothing the report does not already compute.
 * By self is the report's first row by self, at the line of it with the
 * most self (a second report, with lines, of the same profile).  By total
 * follows report_dominant(): down through every callee that carries at
 * least DIAGNOSE_PASS_THROUGH of its caller (_start, main and other
 * wrappers), to the first function whose time is divided or spent in
 * itself; it is a coordinator when its self is below
 * DIAGNOSE_COORDINATOR_SELF of its total.  Cost: two reports and the
 * passes of report_dominant(), O(frame references) each.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/diagnose.h"

/* The line of row's function in by_line with the most self into *ret (0:
 * none known); 0 or -ENOMEM. */
static int line_of_most_self(const struct report *r, uint32_t row, const struct report *by_line,
			     uint32_t *ret)
{
	_cleanup_free_ uint32_t *order = malloc((by_line->n_rows + 1) * sizeof(*order));
	const struct report_row *w = &r->rows[row];

	if (!order)
		return -ENOMEM;
	*ret = 0;
	report_order(by_line, REPORT_SORT_SELF, order);
	for (size_t i = 0; i < by_line->n_rows; i++) {
		const struct report_row *l = &by_line->rows[order[i]];

		if (l->function == w->function && l->file == w->file && l->kernel == w->kernel) {
			*ret = l->line;
			break;
		}
	}
	return 0;
}

int diagnose_cpu(const struct report *cpu, const struct profile *lined, struct diagnose_cpu *ret)
{
	_cleanup_(report_freep) struct report *by_line = NULL;
	const struct report_opts lo = { .lines = true };
	struct diagnose_cpu c = { 0 };
	const struct report_row *w;
	uint32_t row, line;
	int k;

	k = report_first(cpu, REPORT_SORT_SELF, &row);
	if (k == -ENOENT) {
		*ret = c;
		return 0;
	}
	if (k < 0)
		return k;
	w = &cpu->rows[row];
	c.by_self = (struct diagnose_finding){ true, row, w->self, w->total, w->line };
	k = report_build(lined, &lo, &by_line);
	if (k < 0)
		return k;
	k = line_of_most_self(cpu, row, by_line, &line);
	if (k < 0)
		return k;
	if (line)
		c.by_self.line = line;

	/* the function the time passes down to through the wrappers */
	k = report_dominant(cpu, DIAGNOSE_PASS_THROUGH, c.path, ELEMENTSOF(c.path), &c.n_path, &row,
			    &c.callees);
	if (k < 0)
		return k;
	w = &cpu->rows[row];
	c.by_total = (struct diagnose_finding){ true, row, w->self, w->total, w->line };
	c.coordinator = c.callees.n_edges > 0 &&
			(double)c.callees.self < DIAGNOSE_COORDINATOR_SELF * (double)c.callees.total;
	*ret = c;
	return 0;
}

void diagnose_cpu_done(struct diagnose_cpu *c)
{
	free(c->callees.edges);
	c->callees = (struct report_relatives){ 0 };
}

/* The key of map with the most value into *key, *value (0, 0: empty). */
static void most(const struct u64map *m, uint32_t *key, uint64_t *value)
{
	*key = 0;
	*value = 0;
	U64MAP_FOREACH(slot, m)
		if (slot->value > *value || (slot->value == *value && slot->key < *key)) {
			*key = (uint32_t)slot->key;
			*value = slot->value;
		}
}

static int add_to(struct u64map *m, uint64_t key, uint64_t value)
{
	bool added;
	uint64_t *slot = u64map_upsert(m, key, &added);

	if (!slot)
		return -ENOMEM;
	*slot = (added ? 0 : *slot) + value;
	return 0;
}

static bool named(const struct profile *p, uint32_t frame, const char *name)
{
	return strcmp(profile_string(p, p->frames[frame].function), name) == 0;
}

int diagnose_waits(const struct profile *off, struct diagnose_waits *ret)
{
	static const char prefix[] = "[wait: ";
	struct u64map classes, sites, code;
	int r = 0;

	*ret = (struct diagnose_waits){ 0 };
	u64map_init(&classes);
	u64map_init(&sites);
	u64map_init(&code);
	/* the classes, by their leaf */
	for (size_t i = 0; i < off->n_stacks && r == 0; i++) {
		const struct profile_stack *s = &off->stacks[i];
		uint32_t leaf;

		if (!s->depth)
			continue;
		leaf = off->pool[s->first + s->depth - 1];
		if (strncmp(profile_string(off, off->frames[leaf].function), prefix, sizeof(prefix) - 1))
			continue;
		ret->total += s->value;
		if (named(off, leaf, "[wait: cpu]"))
			ret->cpu += s->value;
		else if (named(off, leaf, "[wait: GIL]"))
			ret->gil += s->value;
		r = add_to(&classes, leaf, s->value);
	}
	if (r == 0)
		most(&classes, &ret->top_class, &ret->top);
	/* where the top class waited */
	for (size_t i = 0; i < off->n_stacks && r == 0 && ret->top; i++) {
		const struct profile_stack *s = &off->stacks[i];
		const uint32_t *f = off->pool + s->first;
		uint32_t site;
		size_t at;

		if (!s->depth || f[s->depth - 1] != ret->top_class)
			continue;
		for (at = s->depth - 1; at > 0 && off->frames[f[at - 1]].kernel; at--)
			;
		if (at == 0)
			continue; /* kernel frames only */
		at--;
		site = f[at];
		r = add_to(&sites, site, s->value);
		/* a call in the program itself is its code */
		if (off->frames[site].module && !strstr(profile_string(off, off->frames[site].module), ".so"))
			continue;
		/* an interpreter's code (no module: a Python line) first, or
		 * the interpreter's own C would stand for it (a GIL wait's
		 * PyCOND_TIMEDWAIT) */
		for (size_t up = at; r == 0 && up > 0; up--) {
			const struct profile_frame *c = &off->frames[f[up - 1]];

			if (c->file && c->line && !c->module && !c->kernel) {
				at = up;
				break;
			}
		}
		for (; r == 0 && at > 0; at--) {
			const struct profile_frame *c = &off->frames[f[at - 1]];

			if (c->file && c->line && (!c->module || c->module != off->frames[site].module))
				break;
		}
		if (r == 0 && at > 0)
			r = add_to(&code, f[at - 1], s->value);
	}
	if (r == 0) {
		most(&sites, &ret->site, &ret->site_total);
		most(&code, &ret->code, &ret->code_total);
	}
	u64map_done(&classes);
	u64map_done(&sites);
	u64map_done(&code);
	return r;
}

int diagnose_gil(const struct profile *wall, struct diagnose_gil *ret)
{
	struct u64map totals, waits, held, code;
	uint64_t best_share_num = 0, best_share_den = 1;
	int r = 0;

	*ret = (struct diagnose_gil){ 0 };
	u64map_init(&totals);
	u64map_init(&waits);
	u64map_init(&held);
	u64map_init(&code);
	/* each thread's time, waits and hold */
	for (size_t i = 0; i < wall->n_stacks && r == 0; i++) {
		const struct profile_stack *s = &wall->stacks[i];
		const uint32_t *f = wall->pool + s->first;

		if (s->depth < 2 ||
		    strncmp(profile_string(wall, wall->frames[f[0]].function), "[thread ", 8))
			continue;
		r = add_to(&totals, f[0], s->value);
		if (r == 0 && named(wall, f[s->depth - 1], "[wait: GIL]"))
			r = add_to(&waits, f[0], s->value);
		if (r == 0 && named(wall, f[1], "[GIL: held]"))
			r = add_to(&held, f[0], s->value);
	}
	/* who waits the largest share of its time */
	U64MAP_FOREACH(slot, &waits) {
		uint64_t *t = u64map_get(&totals, slot->key);

		if (t && *t && (unsigned __int128)slot->value * best_share_den >
				       (unsigned __int128)best_share_num * *t) {
			best_share_num = slot->value;
			best_share_den = *t;
			ret->waiter = (uint32_t)slot->key;
		}
	}
	if (ret->waiter) {
		ret->waiter_total = best_share_den;
		ret->waiter_waits = best_share_num;
	}
	/* who else held it the longest */
	U64MAP_FOREACH(slot, &held)
		if (slot->key != ret->waiter && slot->value > ret->holder_held) {
			ret->holder = (uint32_t)slot->key;
			ret->holder_held = slot->value;
		}
	if (ret->holder)
		ret->holder_total = *u64map_get(&totals, ret->holder);
	/* and where: its held stacks' innermost frame with a line */
	for (size_t i = 0; i < wall->n_stacks && r == 0 && ret->holder; i++) {
		const struct profile_stack *s = &wall->stacks[i];
		const uint32_t *f = wall->pool + s->first;

		if (s->depth < 2 || f[0] != ret->holder || !named(wall, f[1], "[GIL: held]"))
			continue;
		for (size_t at = s->depth; at > 2; at--) {
			const struct profile_frame *c = &wall->frames[f[at - 1]];

			if (c->file && c->line && !c->kernel) {
				r = add_to(&code, f[at - 1], s->value);
				break;
			}
		}
	}
	if (r == 0)
		most(&code, &ret->code, &ret->code_held);
	u64map_done(&totals);
	u64map_done(&waits);
	u64map_done(&held);
	u64map_done(&code);
	return r;
}

bool diagnose_waiting(double cpu_percent)
{
	return cpu_percent < DIAGNOSE_WAITING_PERCENT;
}

bool diagnose_too_little_growth(uint64_t bytes, uint64_t sample_bytes)
{
	/* a site named from a sample or two is a guess, not a finding */
	return sample_bytes && bytes / sample_bytes < DIAGNOSE_MIN_MEMORY_SAMPLES;
}
