/* SPDX-License-Identifier: MIT */
/* symloads.c - the symbolizer's tables built on its lanes (symbolize.h,
 * symbolize_internal.h): symbol tables, debug files searched, line
 * tables and their units, JIT maps parsed; started when a lookup needs
 * one, taken back by symbolizer_complete. */

#include <errno.h>
#include <stdio.h>

#include "base/clock.h"
#include "base/elfopen.h"
#include "base/offload.h"
#include "perfd/macro.h"
#include "symbols/debuginfo.h"
#include "symbols/debugsearch.h"
#include "symbols/elfsym.h"
#include "symbols/jitdump.h"
#include "symbols/jitread.h"
#include "symbols/perfmap.h"
#include "symbols/srcline.h"
#include "symbols/symload.h"
#include "symbols/symbolize_internal.h"

/* Has l look m's separate debug file up by build-id, on the lane, under
 * the root of the last process seen mapping it: the first time (a load's:
 * the slower searches follow in symload_done), or again when the LRU closed
 * the descriptor of one found (its open is a file system's to answer, so
 * never the loop's).  Returns 0 or -ENOMEM. */
static int ask_build_id_lookup(struct symbolizer *s, const struct module *m, struct symload *l)
{
	_cleanup_free_ char *path = sym_mapped_path(m);
	char root[64];

	if (!path)
		return -ENOMEM;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)m->pid);
	return symload_set_search(l, path, root, s->debug_dir);
}

/* Whether a load of m is to look its debug file up (see above). */
static bool debug_lookup_wanted(const struct module *m)
{
	return m->kind == MODULE_FILE &&
	       (m->debug_source == DEBUG_UNSEARCHED ||
		(m->debug_source == DEBUG_FILE && m->debug_fd < 0));
}

uint64_t sym_module_key(const struct symbolizer *s, const struct module *m)
{
	return (uint64_t)(m - s->modules) | (uint64_t)m->serial << 32;
}

struct module *sym_module_of_key(struct symbolizer *s, uint64_t key)
{
	size_t i = (uint32_t)key;
	struct module *m = i < s->n_modules ? &s->modules[i] : NULL;

	return m && m->serial == key >> 32 ? m : NULL;
}

/* Has the lane build m's symbol table (symload.h), unless it does
 * already: from the binary, with the symbols of a stripped binary's debug
 * file merged, as m->debug_source says (the build-id lookup on the lane
 * too, the first time; the slower searches follow in symload_done).  The
 * table m has, if any, serves until the new one is taken back.  Nothing
 * when m has no descriptor now (tried again when a process maps it), or
 * not yet: started when the lane has opened it again (resume). */
static void start_symtab_load(struct symbolizer *s, struct module *m)
{
	struct symload *l;
	int fd, dfd = -1;

	if (m->symtab_loading)
		return;
	fd = sym_module_fd(s, m);
	m->load_waits_fd = fd == -EAGAIN;
	if (fd < 0)
		return;
	if (m->kind == MODULE_FILE && m->debug_source == DEBUG_FILE && !m->merge_refused)
		dfd = m->debug_fd; /* -1: the lane finds it again (below) */
	if (symload_new(sym_module_key(s, m), SYMLOAD_SYMBOLS, fd, dfd, &l) < 0)
		return; /* out of memory or descriptors: tried again at the next lookup */
	l->memory_limit = sym_module_room(s);
	l->mini = m->debug_source == DEBUG_MINI && !m->merge_refused;
	if (debug_lookup_wanted(m) && !m->merge_refused && ask_build_id_lookup(s, m, l) < 0) {
		symload_free(l);
		return;
	}
	/* an unbounded pool refuses only after offload_finish, never called
	 * on this one (offload_free stops it) */
	(void)offload_submit(s->lane, &l->job);
	m->symtab_loading = true;
	s->stats.symtab_loads_pending++;
	s->stats.cache_misses++;
}

void sym_start_line_load(struct symbolizer *s, struct module *m)
{
	struct symload *l;
	int fd, dfd;

	if (m->srcline_loading)
		return;
	fd = sym_module_fd(s, m);
	if (fd < 0) {
		/* no descriptor now, or not yet (-EAGAIN: it is being opened
		 * again, and the frames wait for it): another time */
		if (fd != -EBADF && fd != -EAGAIN)
			m->srcline_error = fd;
		return;
	}
	/* a debug file whose descriptor was closed is found again by the
	 * lane, if the binary has no lines of its own */
	dfd = m->debug_source == DEBUG_FILE ? m->debug_fd : -1;
	if (symload_new(sym_module_key(s, m), SYMLOAD_LINES, fd, dfd, &l) < 0)
		return;
	if (m->debug_source == DEBUG_FILE && dfd < 0 && ask_build_id_lookup(s, m, l) < 0) {
		symload_free(l);
		return;
	}
	/* libdw's rows included, beside the module's symbols */
	l->memory_limit = sym_module_room(s) - MIN(sym_module_room(s), elf_symtab_memory(m->symtab));
	(void)offload_submit(s->lane, &l->job);
	m->srcline_loading = true;
	s->stats.line_loads_pending++;
}

void sym_start_unit_index(struct symbolizer *s, struct module *m)
{
	struct symload *l;

	if (m->indexing || !m->srcline ||
	    symload_new_units(sym_module_key(s, m), m->srcline, &l) < 0)
		return; /* out of memory: asked for again by the next lookup */
	(void)offload_submit(s->lane, &l->job);
	m->indexing = l;
	s->stats.line_loads_pending++;
}

/* A stripped binary whose debug file no build-id names: the .gnu_debuglink
 * search and MiniDebugInfo read whole files and go to the lane
 * (debugsearch.h); what they find is merged by another load. */
static void start_debug_search(struct symbolizer *s, struct module *m)
{
	_cleanup_free_ char *path = sym_mapped_path(m);
	struct debugsearch *q;
	char root[64];
	int fd = sym_module_fd(s, m);

	if (fd == -EAGAIN) {
		m->search_waits_fd = true; /* still unsearched: resume starts it */
		return;
	}
	m->debug_source = DEBUG_NONE;
	if (!path || fd < 0)
		return;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)m->pid);
	/* the job keeps a descriptor of its own: the LRU may close fd */
	if (debugsearch_new(sym_module_key(s, m), fd, path, root, s->debug_dir, &q) < 0)
		return; /* out of memory or descriptors: named from .dynsym */
	(void)offload_submit(s->lane, &q->job);
	m->debug_source = DEBUG_SEARCHING;
	s->stats.debug_searches_pending++;
}

/* Gives m the descriptor of its debug file, dfd, counted. */
static void take_debug_fd(struct symbolizer *s, struct module *m, int dfd)
{
	sym_make_fd_room(s, m, 1);
	s->open_fds -= m->debug_fd >= 0;
	sym_close_later(s, TAKE_FD(m->debug_fd));
	m->debug_fd = dfd;
	s->open_fds++;
	sym_lru_touch(s, m);
	m->debug_source = DEBUG_FILE;
}

/* Gives m the debug file l looked up by build-id, if it found one; one
 * that was m's and is not found again (found by .gnu_debuglink, or gone)
 * leaves m unsearched, for the slower search to follow. */
static void found_again(struct symbolizer *s, struct module *m, struct symload *l)
{
	if (l->found_debug_fd >= 0)
		take_debug_fd(s, m, TAKE_FD(l->found_debug_fd));
	else if (l->looked_up && m->debug_source == DEBUG_FILE && m->debug_fd < 0)
		m->debug_source = DEBUG_UNSEARCHED;
}

/* Takes a built table back (a module given back meanwhile, whose id may
 * name another file now, takes nothing: the serial says).  A stripped
 * binary whose debug file was not found by build-id gets its slower
 * search now. */
static void symload_done(struct symbolizer *s, struct symload *l)
{
	struct module *m = sym_module_of_key(s, l->job.key);

	if (l->what == SYMLOAD_UNITS) {
		s->stats.line_loads_pending--;
		s->stats.line_units_refused += l->units_refused;
		if (!m || m->indexing != l)
			return; /* unloaded meanwhile: the job owns what it read */
		m->indexing = NULL;
		/* asked for while the job ran past them */
		if (srcline_wants(m->srcline))
			sym_start_unit_index(s, m);
		sym_trim_cache(s, m); /* the units count against the cache too */
		return;
	}
	if (l->what == SYMLOAD_LINES) {
		s->stats.line_loads_pending--;
		s->stats.line_units_refused += l->units_refused;
		if (!m || !m->srcline_loading)
			return;
		m->srcline_loading = false;
		s->stats.tables_refused += l->error == -EFBIG;
		found_again(s, m, l);
		if (l->error < 0) {
			m->srcline_error = l->error;
			return;
		}
		sym_drop_srcline(m);
		m->srcline = TAKE_PTR(l->srcline);
		sym_trim_cache(s, m); /* line tables count against the cache too */
		return;
	}
	s->stats.symtab_loads_pending--;
	if (!m || !m->symtab_loading)
		return;
	m->symtab_loading = false;
	s->stats.debug_files_refused += l->refused;
	if (l->error < 0) {
		s->stats.tables_refused += l->error == -EFBIG;
		if (!m->symtab) /* a reload that failed keeps the table it had */
			m->load_error = l->error;
		return;
	}
	sym_forget_demangled(m);
	elf_symtab_free(m->symtab);
	m->symtab = TAKE_PTR(l->symtab);
	s->stats.modules_loaded++;
	/* a debug file counts once, when first found (here, or by a search) */
	if (l->found_debug_fd >= 0)
		s->stats.debug_files += l->merge_error >= 0 && m->debug_source != DEBUG_FILE;
	found_again(s, m, l);
	s->stats.tables_refused += l->merge_error == -EFBIG;
	m->merge_refused = m->merge_refused || l->merge_error == -EFBIG;
	if (m->kind == MODULE_FILE && !elf_symtab_has_symtab(m->symtab)) {
		if (m->debug_source == DEBUG_UNSEARCHED)
			start_debug_search(s, m);
		else if ((m->debug_source == DEBUG_FILE || m->debug_source == DEBUG_MINI) &&
			 l->merge_error == 1 && !m->merge_refused)
			start_symtab_load(s, m); /* a search ended while it was built */
	}
	/* line tables opened beside the table this one replaces (a merge's
	 * reload) may leave it no room: read again within what it leaves */
	if (m->srcline && sym_loaded_bytes(m) > sym_module_room(s)) {
		sym_drop_srcline(m);
		m->srcline_error = 0;
	}
	sym_trim_cache(s, m);
}

/* Takes a finished search back: its debug file or MiniDebugInfo becomes
 * the module's, merged by a load on the lane if its symbols are loaded
 * (else at the next load, as after an eviction).  A module given back
 * meanwhile takes nothing. */
static void debug_search_done(struct symbolizer *s, struct debugsearch *q)
{
	struct module *m = sym_module_of_key(s, q->job.key);
	struct symload *l;
	int fd;

	s->stats.debug_searches_pending--;
	s->stats.debug_files_refused += q->refused;
	if (!m || m->debug_source != DEBUG_SEARCHING)
		return;
	m->debug_source = DEBUG_NONE;
	s->stats.debug_files += q->debug_fd >= 0;
	s->stats.minidebuginfo += q->debug_fd < 0 && q->image;
	if (q->debug_fd >= 0)
		take_debug_fd(s, m, TAKE_FD(q->debug_fd));
	else if (q->image)
		m->debug_source = DEBUG_MINI;
	if (m->debug_source == DEBUG_NONE || !m->symtab || m->symtab_loading)
		return;
	if (m->debug_source == DEBUG_FILE) {
		start_symtab_load(s, m);
		return;
	}
	/* the image unpacked once: the load takes it (one waiting for the
	 * descriptor unpacks it again) */
	fd = sym_module_fd(s, m);
	m->load_waits_fd = fd == -EAGAIN;
	if (fd < 0 || symload_new(sym_module_key(s, m), SYMLOAD_SYMBOLS, fd, -1, &l) < 0)
		return;
	l->memory_limit = sym_module_room(s);
	l->image = TAKE_PTR(q->image);
	l->image_size = q->image_size;
	(void)offload_submit(s->lane, &l->job);
	m->symtab_loading = true;
	s->stats.symtab_loads_pending++;
}

/* (Re)reads a JIT module's perf map or jitdump.  Reads through the
 * descriptor opened while the process lived, so it works after the
 * process is gone; one the LRU closed is opened again on the lane, and
 * the look waits for it (sym_reopen_resume).  The job tells whether the
 * map grew, and parses it then, only while the file still meets the rules
 * it was opened under (a map grown past them is refused once per size,
 * its old names kept); jit_read_done takes it in. */
void sym_refresh_perfmap(struct symbolizer *s, struct module *m)
{
	struct jitread_want want = { .rules = sym_jit_map_rules(m->jit_owner_uid),
				     .parsed_size = m->perfmap ? m->perfmap_size : -1,
				     .refused_size = m->perfmap_refused_size,
				     .max_size = (off_t)MIN(s->cache_limit, (size_t)INT64_MAX) };
	struct jitread *j;
	int fd;

	if (m->perfmap_reading)
		return;
	fd = sym_module_fd(s, m);
	m->load_waits_fd = fd == -EAGAIN;
	if (fd < 0 || jitread_new(sym_module_key(s, m), fd, &want, &j) < 0)
		return; /* out of memory or descriptors: tried again at the next miss */
	(void)offload_submit(s->lane, &j->job);
	m->perfmap_reading = true;
	s->stats.jit_maps_pending++;
}

/* Takes a finished look back: a parsed map becomes the module's, unless
 * it is past the caps or the module's room (refused once per size, the
 * old names kept).  A module given back meanwhile takes nothing. */
static void jit_read_done(struct symbolizer *s, struct jitread *j)
{
	struct module *m = sym_module_of_key(s, j->job.key);

	s->stats.jit_maps_pending--;
	if (!m || m->kind != MODULE_JIT || !m->perfmap_reading)
		return;
	m->perfmap_reading = false;
	if (j->unchanged)
		return;
	if (j->error >= 0 && perfmap_memory(j->map) > sym_module_room(s))
		j->error = -EFBIG;
	if (j->refused || j->error == -EFBIG) {
		m->perfmap_refused_size = j->size;
		s->stats.jit_maps_refused++;
	}
	if (j->error < 0)
		return;
	perfmap_free(m->perfmap);
	m->perfmap = TAKE_PTR(j->map);
	m->perfmap_size = j->size;
	s->stats.jit_maps++;
	sym_trim_cache(s, m);
}

/* A line load waits for the next lookup that wants lines, which finds the
 * descriptor then; the rest is rechecked, as a probe may have given the
 * module its descriptor (and a load run) meanwhile. */
void sym_reopen_resume(struct symbolizer *s, struct module *m)
{
	bool load, search;

	if (!m)
		return;
	load = m->load_waits_fd;
	search = m->search_waits_fd;
	m->load_waits_fd = m->search_waits_fd = false;
	if (m->fd < 0)
		return; /* named as it can be without */
	if (m->kind == MODULE_JIT) {
		if (load)
			sym_refresh_perfmap(s, m);
		return;
	}
	if (search && m->debug_source == DEBUG_UNSEARCHED && m->symtab &&
	    !elf_symtab_has_symtab(m->symtab))
		start_debug_search(s, m);
	/* a first load, or a merge of debug symbols */
	if (load && (!m->symtab || (!elf_symtab_has_symtab(m->symtab) && !m->merge_refused &&
				    (m->debug_source == DEBUG_FILE || m->debug_source == DEBUG_MINI))))
		start_symtab_load(s, m);
}

void symbolizer_complete(struct symbolizer *s)
{
	struct offload_job *j = offload_take_done(s->lane), *next;

	for (; j; j = next) {
		next = j->next;
		if (jitread_is(j)) {
			jit_read_done(s, jitread_of(j));
			jitread_free(jitread_of(j));
		} else if (symload_is(j)) {
			struct symload *l = symload_of(j);

			symload_done(s, l);
			/* its dups, closed on the lane too (modtab.c) */
			sym_close_later(s, TAKE_FD(l->fd));
			sym_close_later(s, TAKE_FD(l->debug_fd));
			sym_close_later(s, TAKE_FD(l->found_debug_fd));
			symload_free(l);
		} else if (sym_reopen_is(j)) {
			sym_reopen_resume(s, sym_reopen_done(s, j));
			j->free(j);
		} else if (sym_close_is(j)) {
			j->free(j);
		} else {
			struct debugsearch *q = debugsearch_of(j);

			debug_search_done(s, q);
			sym_close_later(s, TAKE_FD(q->debug_fd));
			debugsearch_free(q);
		}
	}
	/* the slots given back, once the descriptors taken are used */
	sym_pump_reopens(s);
}

int symbolizer_fd(const struct symbolizer *s)
{
	return offload_fd(s->lane);
}

struct elf_symtab *sym_module_symtab(struct symbolizer *s, struct module *m)
{
	m->last_used = ++s->clock;
	if (m->symtab || m->load_error < 0) {
		s->stats.cache_hits += m->symtab != NULL;
		return m->symtab;
	}
	start_symtab_load(s, m);
	return NULL;
}

/* Whether the unit of m's line tables covering frame waits for the lane
 * (whose job is started then, if it is not running). */
static bool unit_pending(struct symbolizer *s, struct module *m, uint64_t frame)
{
	uint64_t vaddr;

	if (elf_symtab_offset_to_vaddr(m->symtab, frame_address(frame), &vaddr) < 0 ||
	    srcline_want(m->srcline, vaddr) != -EAGAIN)
		return false;
	sym_start_unit_index(s, m);
	return true;
}

bool symbolizer_frame_pending(struct symbolizer *s, uint64_t frame, bool lines)
{
	struct module *m = module_of(s, frame_module(frame));

	if (!m || m->kind == MODULE_JIT)
		return false;
	if (!m->symtab)
		(void)sym_module_symtab(s, m);
	/* a load, or the open that it waits for */
	if (m->symtab_loading || m->load_waits_fd)
		return true;
	if (!lines)
		return false;
	if (m->kind == MODULE_FILE && m->symtab && !m->srcline && !m->srcline_error)
		sym_start_line_load(s, m);
	if (m->srcline_loading || (m->reopening && m->symtab && !m->srcline && !m->srcline_error))
		return true;
	return m->kind == MODULE_FILE && m->symtab && m->srcline && unit_pending(s, m, frame);
}

size_t symbolizer_loads_pending(const struct symbolizer *s)
{
	return s->stats.symtab_loads_pending + s->stats.line_loads_pending +
	       s->stats.fds_reopening;
}

int symbolizer_settle(struct symbolizer *s, unsigned timeout_ms)
{
	uint64_t end = now_monotonic_ns() + (uint64_t)timeout_ms * 1000000;

	for (;;) {
		uint64_t now = now_monotonic_ns();
		int r;

		symbolizer_complete(s);
		if (!symbolizer_loads_pending(s) && !s->stats.debug_searches_pending &&
		    !s->stats.jit_maps_pending && !atomic_load(&s->fds_closing))
			return 0;
		/* what is left waits for slots only probes' taking back on
		 * the loop gives: the lane cannot end it */
		if (symbolizer_loads_pending(s) == s->reopens_waiting &&
		    !s->stats.debug_searches_pending && !s->stats.jit_maps_pending &&
		    !atomic_load(&s->fds_closing))
			return -ETIMEDOUT;
		if (now >= end)
			return -ETIMEDOUT;
		r = offload_wait_idle(s->lane, (unsigned)((end - now) / 1000000) + 1);
		if (r < 0 && r != -ETIMEDOUT)
			return r;
	}
}
