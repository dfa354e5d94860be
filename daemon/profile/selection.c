/* SPDX-License-Identifier: MIT */
/*
 * selection.c - which processes a selection takes (pid, comm, cgroup, unit, a
 * process tree), the collectors that take samples from now on, and the
 * profile parts a query gets from the store.
 * The store's design is aggregate.h's; what its files share,
 * aggregate_internal.h's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile/aggregate_internal.h"

/* Whether name is one element of the path (between slashes). */
static bool path_has_element(const char *path, const char *name)
{
	size_t len = strlen(name);

	for (const char *e = path; e && *e; e = strchr(e, '/')) {
		e += *e == '/';
		if (strncmp(e, name, len) == 0 && (e[len] == '/' || e[len] == '\0'))
			return true;
	}
	return false;
}

/* Parent links followed at most, so that a loop (a pid reused by a
 * process's own ancestor) cannot hang a walk. */
#define SELECTION_TREE_MAX_DEPTH 64

/* Whether p is root or descends from it, by the parents a holds. */
static bool descends_from(struct aggregator *a, const struct process *p, uint32_t root)
{
	for (int depth = 0; p && depth < SELECTION_TREE_MAX_DEPTH; depth++) {
		if (p->pid == root)
			return true;
		if (!p->ppid || p->ppid == p->pid)
			return false;
		p = aggregator_find_process(a, p->ppid);
	}
	return false;
}

/* Whether p is a member of a collector's tree (struct selection): its
 * pid and incarnation; the root's incarnation is the first one met. */
static bool tree_member(struct u64map *members, uint32_t pid, uint64_t start_time_ns)
{
	uint64_t *v = u64map_get(members, pid);

	if (!v)
		return false;
	if (*v == 0)
		*v = start_time_ns;
	return *v == start_time_ns;
}

/* Makes the process (pid, start) a member of every tree collector that
 * has its parent (ppid, parent_start; 0: the one the store holds now, or
 * any) as one. */
void agg_adopt(struct aggregator *a, uint32_t pid, uint64_t start, uint32_t ppid,
	       uint64_t parent_start)
{
	struct process *parent = NULL;

	if (!ppid || ppid == pid)
		return;
	if (!parent_start) {
		parent = aggregator_find_process(a, ppid);
		parent_start = parent && !parent->exited ? parent->start_time_ns : 0;
	}
	for (struct collector *c = a->collectors; c; c = c->next) {
		uint64_t *v;

		if (!c->sel.tree_members || !u64map_get(c->sel.tree_members, ppid) ||
		    (parent_start && !tree_member(c->sel.tree_members, ppid, parent_start)))
			continue;
		v = u64map_upsert(c->sel.tree_members, pid, NULL);
		if (v)
			*v = start;
	}
}

bool aggregator_follows(const struct aggregator *a, uint32_t pid, const struct collector *except)
{
	for (const struct collector *c = a->collectors; c; c = c->next)
		if (c != except && c->sel.tree_members && u64map_get(c->sel.tree_members, pid))
			return true;
	return false;
}

bool selection_matches(struct aggregator *a, const struct selection *sel, const struct process *p)
{
	uint64_t ns_per_tick = a->ns_per_tick;

	if (sel->n_pids > 0) {
		bool found = false;

		for (size_t i = 0; i < sel->n_pids && !found; i++)
			found = sel->pids[i] == p->pid;
		if (!found || (sel->n_pids == 1 && sel->start_ticks &&
			       p->start_time_ns / ns_per_tick != sel->start_ticks))
			return false;
	}
	if (sel->comm[0] && strncmp(sel->comm, p->comm, PERFD_TASK_COMM_LEN - 1) != 0)
		return false;
	if (sel->cgroup[0]) {
		size_t len = strlen(sel->cgroup);

		/* the cgroup itself or one below it */
		while (len > 1 && sel->cgroup[len - 1] == '/')
			len--;
		if (!p->cgroup || strncmp(p->cgroup, sel->cgroup, len) != 0 ||
		    (p->cgroup[len] != '\0' && p->cgroup[len] != '/' && len > 1))
			return false;
	}
	if (sel->unit[0] && (!p->cgroup || !path_has_element(p->cgroup, sel->unit)))
		return false;
	if (sel->tree && !(sel->tree_members ? tree_member(sel->tree_members, p->pid, p->start_time_ns) :
					       descends_from(a, p, sel->tree)))
		return false;
	if (!sel->all && !sel->n_pids && !sel->comm[0] && !sel->cgroup[0] && !sel->unit[0] &&
	    !sel->tree)
		return false;
	return !sel->visible || sel->visible(sel->visible_userdata, p);
}

/* The part of parts for process p, NULL when there is none. */
static struct profile_part *part_find(const struct profile_parts *parts, const struct process *p)
{
	for (size_t i = 0; i < parts->n; i++)
		if (parts->parts[i].process == p)
			return &parts->parts[i];
	return NULL;
}

/* The part of parts for process p, added (and p pinned) when new; NULL
 * when memory ran out. */
static struct profile_part *part_for(struct profile_parts *parts, struct process *p)
{
	struct profile_part *part = part_find(parts, p);

	if (part)
		return part;
	if (parts->n == parts->cap) {
		size_t cap = parts->cap ? 2 * parts->cap : 4;
		struct profile_part *q = realloc(parts->parts, cap * sizeof(*q));

		if (!q)
			return NULL;
		parts->parts = q;
		parts->cap = cap;
	}
	part = &parts->parts[parts->n++];
	part->process = p;
	profile_init(&part->prof);
	p->pins++;
	return part;
}

/* Which of its uid's shares (see struct collector) c may not go past to
 * take a sample of p, COLLECTOR_REFUSED_NONE when it may take it. */
static enum collector_refusal collector_refuses(const struct aggregator *a,
						const struct collector *c, const struct process *p)
{
	size_t bytes = 0, pins = 0;

	if (c->uid == 0)
		return COLLECTOR_REFUSED_NONE;
	for (const struct collector *o = a->collectors; o; o = o->next)
		if (o->uid == c->uid) {
			bytes += o->bytes;
			pins += o->parts.n;
		}
	if (a->limits.max_memory_bytes &&
	    bytes >= a->limits.max_memory_bytes / AGG_SNAPSHOT_MEMORY_SHARE)
		return COLLECTOR_REFUSED_MEMORY;
	if (!part_find(&c->parts, p) &&
	    pins >= MAX(a->limits.max_processes / AGG_SNAPSHOT_PIN_SHARE, 1))
		return COLLECTOR_REFUSED_PINS;
	return COLLECTOR_REFUSED_NONE;
}

void agg_feed_collectors(struct aggregator *a, struct process *p,
			 const struct perfd_sample *s, uint64_t key, uint64_t value)
{
	for (struct collector *c = a->collectors; c; c = c->next) {
		struct profile_part *part;
		enum collector_refusal refused;
		size_t before;

		if (s->hdr.timestamp_ns < c->begin_ns || s->hdr.timestamp_ns > c->end_ns ||
		    !owner_filter_takes(&c->sel.owners, s->owner_uid) ||
		    !selection_matches(a, &c->sel, p))
			continue;
		refused = collector_refuses(a, c, p);
		if (refused != COLLECTOR_REFUSED_NONE) {
			c->samples_refused++;
			c->refused_by = refused;
			(*(refused == COLLECTOR_REFUSED_MEMORY ? &a->stats.snapshot_samples_refused_memory :
								&a->stats.snapshot_samples_refused_pins))++;
			continue;
		}
		part = part_for(&c->parts, p);
		if (!part)
			continue;
		before = profile_memory(&part->prof);
		if (profile_add(&part->prof, a->stacks, key, value) == 0)
			c->samples++;
		c->bytes += profile_memory(&part->prof) - before;
		a->collector_bytes += profile_memory(&part->prof) - before;
	}
}

/* The members of c's tree among the processes the store holds now, by
 * the parents it holds: decided once, here; later ones are decided as
 * they come (agg_adopt).  Out of memory, c's selection walks the parents at
 * each sample instead. */
static void seed_tree(struct aggregator *a, struct collector *c)
{
	bool ok;

	u64map_init(&c->tree_members);
	c->sel.tree_members = NULL;
	ok = u64map_upsert(&c->tree_members, c->sel.tree, NULL) != NULL;
	for (size_t i = 0; ok && i < a->n_procs; i++) {
		struct process *p = a->procs[i];
		uint64_t *v;

		if (p->exited || !descends_from(a, p, c->sel.tree))
			continue;
		v = u64map_upsert(&c->tree_members, p->pid, NULL);
		ok = v != NULL;
		if (ok)
			*v = p->start_time_ns;
	}
	if (ok)
		c->sel.tree_members = &c->tree_members;
	else
		u64map_done(&c->tree_members);
}

void aggregator_add_collector(struct aggregator *a, struct collector *c)
{
	if (c->sel.tree)
		seed_tree(a, c);
	c->parts = (struct profile_parts){ 0 };
	c->bytes = 0;
	c->samples = c->samples_refused = 0;
	c->refused_by = COLLECTOR_REFUSED_NONE;
	c->exited = false;
	c->next = a->collectors;
	a->collectors = c;
}

void aggregator_remove_collector(struct aggregator *a, struct collector *c)
{
	for (struct collector **pp = &a->collectors; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			/* its parts are the caller's now, answered at once */
			a->collector_bytes -= c->bytes;
			break;
		}
	c->next = NULL;
	if (c->sel.tree_members) {
		u64map_done(&c->tree_members);
		c->sel.tree_members = NULL;
	}
}

void aggregator_release_parts(struct aggregator *a, struct profile_parts *parts)
{
	for (size_t i = 0; i < parts->n; i++) {
		struct process *p = parts->parts[i].process;

		profile_release(&parts->parts[i].prof, a->stacks);
		if (!--p->pins)
			agg_due_now(a, p); /* an exited one may go now */
	}
	free(parts->parts);
	*parts = (struct profile_parts){ 0 };
}

int aggregator_query_process(struct aggregator *a, struct process *p, uint64_t from_ns,
			     uint64_t to_ns, const struct owner_filter *owners,
			     struct profile_parts *parts)
{
	uint64_t first = UINT64_MAX, end = 0;
	struct profile_part *part = part_for(parts, p);

	if (!part)
		return -ENOMEM;
	if (history_query(&p->history, a->stacks, now_monotonic_ns(), from_ns, to_ns, owners,
			  &part->prof, &first, &end) < 0) {
		profile_release(&part->prof, a->stacks);
		p->pins--;
		parts->n--;
		return -ENOMEM;
	}
	return 0;
}

int aggregator_query(struct aggregator *a, const struct selection *sel, uint64_t from_ns,
		     uint64_t to_ns, struct profile_parts *ret, uint64_t *first_ns,
		     uint64_t *end_ns)
{
	struct profile_parts parts = { 0 };
	uint64_t first = UINT64_MAX, end = 0;
	/* once: every process's window in progress is cut at the same now */
	uint64_t now = now_monotonic_ns();

	for (size_t i = 0; i < a->n_procs; i++) {
		struct process *p = a->procs[i];
		struct profile_part *part;

		if (history_empty(&p->history) || !selection_matches(a, sel, p))
			continue;
		part = part_for(&parts, p);
		if (!part || history_query(&p->history, a->stacks, now, from_ns, to_ns,
					   &sel->owners, &part->prof, &first, &end) < 0) {
			aggregator_release_parts(a, &parts);
			return -ENOMEM;
		}
		if (part->prof.values.count == 0) {
			/* nothing in the range: not part of the answer */
			profile_release(&part->prof, a->stacks);
			p->pins--;
			parts.n--;
		}
	}
	*ret = parts;
	*first_ns = first == UINT64_MAX ? 0 : first;
	*end_ns = end;
	return 0;
}
