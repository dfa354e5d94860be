/* SPDX-License-Identifier: MIT */
/* symbolize.c - see symbolize.h for the design and symbolize_internal.h for
 * how the symbolizer is split: here it is made and freed, its cache of
 * parsed tables kept within its limit, and frames named. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/elfopen.h"
#include "base/offload.h"
#include "perfd/macro.h"
#include "profile/waitclass.h"
#include "symbols/debuginfo.h"
#include "symbols/demangle.h"
#include "symbols/elfsym.h"
#include "symbols/jitdump.h"
#include "symbols/jitread.h"
#include "symbols/ksyms.h"
#include "symbols/perfmap.h"
#include "symbols/srcline.h"
#include "symbols/symload.h"
#include "symbols/symbolize_internal.h"

int symbolizer_new(const struct symbolizer_opts *opts, struct symbolizer **ret,
		   int *ret_kernel_error)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	int r = 0;

	if (!s)
		return -ENOMEM;
	u64map_init(&s->by_file);
	u64map_init(&s->jit_by_process);
	u64map_init(&s->by_owner);
	s->demangle = opts->demangle;
	s->cache_limit = opts->cache_bytes ? opts->cache_bytes : 256u << 20;
	s->max_fds = opts->max_fds ? opts->max_fds : SYMBOLIZER_MAX_FDS;
	s->max_modules = opts->max_modules && opts->max_modules < MODULES_MAX ? opts->max_modules :
										 MODULES_MAX;
	s->debug_dir = strdup(opts->debug_dir ? opts->debug_dir : DEBUGINFO_DEFAULT_DIR);
	s->free_ids = malloc(MODULES_MAX * sizeof(*s->free_ids));
	r = !s->debug_dir || !s->free_ids ? -ENOMEM :
	    offload_new(&(struct offload_opts){ .lanes = 3, .small_lanes = 1, .background = true,
						.take_back = true, .name = "perfd-sym" },
			&s->lane);
	if (r < 0) {
		free(s->debug_dir);
		free(s->free_ids);
		free(s);
		return r;
	}
	if (opts->kallsyms_path)
		r = ksyms_load(opts->kallsyms_path, &s->ksyms);
	/* without it the kernel's mapping only goes without a build-id */
	if (opts->kernel_notes_path)
		(void)ksyms_read_build_id(opts->kernel_notes_path, s->kernel_build_id,
					  sizeof(s->kernel_build_id));
	if (ret_kernel_error)
		*ret_kernel_error = r;
	*ret = s;
	return 0;
}

void sym_forget_demangled(struct module *m)
{
	U64MAP_FOREACH(slot, &m->demangled)
		free((char *)(uintptr_t)slot->value);
	u64map_done(&m->demangled);
}

void sym_drop_srcline(struct module *m)
{
	if (m->indexing) {
		m->indexing->owns_srcline = true;
		m->indexing = NULL;
		m->srcline = NULL;
	}
	m->srcline = srcline_free(m->srcline);
}

void sym_unload(struct module *m)
{
	m->perfmap = perfmap_free(m->perfmap);
	m->perfmap_size = 0;
	sym_forget_demangled(m);
	m->symtab = elf_symtab_free(m->symtab);
	sym_drop_srcline(m);
	m->srcline_error = 0;
}

size_t sym_loaded_bytes(const struct module *m)
{
	struct srcline_stats st = { 0 };

	if (m->srcline)
		srcline_get_stats(m->srcline, &st);
	return (m->symtab ? elf_symtab_memory(m->symtab) : 0) + st.memory_bytes +
	       u64map_memory(&m->demangled) + (m->perfmap ? perfmap_memory(m->perfmap) : 0);
}

size_t sym_module_room(const struct symbolizer *s)
{
	return s->cache_limit / 2;
}

void sym_trim_cache(struct symbolizer *s, const struct module *keep)
{
	size_t total = 0;

	for (size_t i = 0; i < s->n_modules; i++)
		total += sym_loaded_bytes(&s->modules[i]);
	while (total > s->cache_limit) {
		struct module *lru = NULL;

		for (size_t i = 0; i < s->n_modules; i++) {
			struct module *m = &s->modules[i];

			if (m != keep && (m->symtab || m->perfmap) &&
			    (!lru || m->last_used < lru->last_used))
				lru = m;
		}
		if (!lru)
			break;
		total -= sym_loaded_bytes(lru);
		sym_unload(lru);
		s->stats.cache_evictions++;
	}
}

struct symbolizer *symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return NULL;
	offload_free(s->lane); /* first: it may be reading */
	for (size_t i = 0; i < s->n_modules; i++) {
		struct module *m = &s->modules[i];

		m->indexing = NULL; /* freed with the lane, and not the srcline's owner */
		free(m->path);
		closep(&m->fd);
		closep(&m->debug_fd);
		sym_unload(m);
	}
	free(s->debug_dir);
	free(s->modules);
	free(s->free_ids);
	free(s->reopen_queue);
	u64map_done(&s->by_file);
	u64map_done(&s->jit_by_process);
	u64map_done(&s->by_owner);
	ksyms_free(s->ksyms);
	free(s);
	return NULL;
}

static const char *special_name(uint64_t what)
{
	switch (what) {
	case FRAME_SPECIAL_STACK_LIMIT:
		return "[dropped: stack table full]";
	case FRAME_SPECIAL_KSTACK_ERROR:
		return "[kernel stack unavailable]";
	case FRAME_SPECIAL_USTACK_ERROR:
		return "[user stack unavailable]";
	case FRAME_SPECIAL_UNWIND_PENDING:
		return "[unwind table pending]";
	case FRAME_SPECIAL_TRUNCATED:
		return "[truncated]";
	case FRAME_SPECIAL_CONTEXT_SWITCH:
		return "[context switch]";
	case FRAME_SPECIAL_GIL_HELD:
		return "[GIL: held]";
	case FRAME_SPECIAL_GIL_WAITING:
		return "[GIL: waiting]";
	case FRAME_SPECIAL_GIL_RELEASED:
		return "[GIL: released]";
	default:
		if (what >= FRAME_SPECIAL_WAIT && what < FRAME_SPECIAL_WAIT + WAIT_CLASSES)
			return wait_frame_name((unsigned)(what - FRAME_SPECIAL_WAIT));
		return "[unknown]";
	}
}

void symbolizer_note_jit_frame(struct symbolizer *s, uint64_t frame)
{
	struct module *m = module_of(s, frame_module(frame));
	uint64_t now;

	if (!m || m->kind != MODULE_JIT || m->perfmap_reading ||
	    (m->perfmap && perfmap_lookup(m->perfmap, frame_address(frame), NULL)))
		return;
	now = now_monotonic_ns();
	if (now - m->perfmap_checked_ns < SYMBOLIZER_JIT_CHECK_NS)
		return;
	m->perfmap_checked_ns = now;
	sym_refresh_perfmap(s, m);
}

static const char *jit_name(struct symbolizer *s, struct module *m, uint64_t addr)
{
	const char *name = NULL;

	m->last_used = ++s->clock;
	if (m->perfmap)
		name = perfmap_lookup(m->perfmap, addr, NULL);
	/* a later query may find it: the look is the lane's */
	if (!name)
		sym_refresh_perfmap(s, m);
	return name;
}

/* The demangled form of a name owned by module m's symbol table or line
 * tables, cached by the name's address for as long as they are loaded. */
static const char *demangled(struct symbolizer *s, struct module *m, const char *name)
{
	uint64_t *slot;
	bool added;
	char *d;

	if (!s->demangle || name[0] != '_')
		return name;
	slot = u64map_upsert(&m->demangled, (uintptr_t)name, &added);
	if (!slot)
		return name;
	if (!added) {
		s->stats.demangle_cache_hits++;
		return *slot ? (const char *)(uintptr_t)*slot : name;
	}
	s->stats.demangle_cache_misses++;
	d = demangle(name);
	*slot = (uintptr_t)d;
	return d ? d : name;
}

/* The demangled name of the symbol at vaddr of file module m, or NULL. */
static const char *file_symbol(struct symbolizer *s, struct module *m, struct elf_symtab *t,
			       uint64_t vaddr)
{
	uint64_t off;
	const char *name = elf_symtab_lookup(t, vaddr, &off);

	return name ? demangled(s, m, name) : NULL;
}

/* Resolves a frame the symbol tables name (no lines): one record. */
static size_t resolve_symbol(struct symbolizer *s, uint64_t frame, struct frame_record *out,
			     char *scratch, size_t size)
{
	uint16_t module = frame_module(frame);
	uint64_t addr = frame_address(frame);
	const char *name = NULL;
	uint64_t off = 0;

	s->stats.lookups++;
	*out = (struct frame_record){ .kind = FRAME_KIND_NATIVE, .offset = addr };
	if (module == FRAME_MODULE_KERNEL) {
		out->kind = FRAME_KIND_KERNEL;
		out->module = FRAME_MODULE_KERNEL;
		out->offset = frame_kernel_address(frame);
		if (s->ksyms)
			name = ksyms_lookup(s->ksyms, out->offset, NULL, &off);
		out->function = name ? name : "[unknown]";
		out->symbol_offset = name ? off : 0;
	} else if (module == FRAME_MODULE_SPECIAL) {
		out->kind = FRAME_KIND_SPECIAL;
		out->function = special_name(addr);
	} else if (module_of(s, module)) {
		struct module *m = module_of(s, module);

		out->module = module;
		if (m->kind == MODULE_JIT) {
			out->kind = FRAME_KIND_JIT;
			name = jit_name(s, m, addr);
			if (!name) {
				snprintf(scratch, size, "[jit]+0x%" PRIx64, addr);
				name = scratch;
			}
		} else {
			struct elf_symtab *t = sym_module_symtab(s, m);
			uint64_t vaddr;

			if (t && elf_symtab_offset_to_vaddr(t, addr, &vaddr) == 0)
				name = file_symbol(s, m, t, vaddr);
			if (!name) {
				snprintf(scratch, size, "%s+0x%" PRIx64, m->basename, addr);
				name = scratch;
			}
		}
		out->function = name;
	} else {
		out->function = "[unknown]";
	}
	return 1;
}

const char *symbolizer_frame_name(struct symbolizer *s, uint64_t frame,
				  char *buf, size_t size)
{
	struct frame_record r;
	char scratch[PATH_MAX + 32];

	resolve_symbol(s, frame, &r, scratch, sizeof(scratch));
	snprintf(buf, size, "%s", r.function);
	return buf;
}

size_t symbolizer_resolve(struct symbolizer *s, uint64_t frame, bool lines,
			  struct frame_record *out, size_t cap, char *scratch, size_t size)
{
	uint16_t module = frame_module(frame);
	struct srcline_frame chain[FRAME_MAX_INLINE];
	struct elf_symtab *t;
	struct module *m;
	uint64_t vaddr;
	size_t k = 0;
	int n;

	m = module_of(s, module);
	if (!lines || cap < 1 || !m)
		return resolve_symbol(s, frame, out, scratch, size);
	t = m->kind == MODULE_FILE ? sym_module_symtab(s, m) : NULL;
	if (!t || elf_symtab_offset_to_vaddr(t, frame_address(frame), &vaddr) < 0)
		return resolve_symbol(s, frame, out, scratch, size);
	if (!m->srcline && !m->srcline_error)
		sym_start_line_load(s, m); /* named without lines until it is done */
	n = m->srcline ? srcline_lookup_indexed(m->srcline, vaddr, chain, ELEMENTSOF(chain)) : 0;
	if (n == -EAGAIN)
		sym_start_unit_index(s, m); /* named without lines until it is indexed */
	if (n <= 0)
		return resolve_symbol(s, frame, out, scratch, size);

	/* chain[] is innermost first; records are outermost first, and the
	 * outermost is the function the symbol table names (its first line
	 * is DWARF's for the function around the address). */
	resolve_symbol(s, frame, &out[0], scratch, size);
	for (int i = n - 1; i >= 0 && k < cap; i--, k++) {
		const char *fn = chain[i].function;

		if (k > 0) {
			/* an inlined frame without a name is its caller's */
			out[k] = out[0];
			out[k].function = fn ? demangled(s, m, fn) : out[0].function;
		}
		out[k].file = chain[i].file;
		out[k].line = chain[i].line;
		out[k].start_line = chain[i].decl_line;
	}
	return k;
}

void symbolizer_get_stats(const struct symbolizer *s, struct symbolizer_stats *ret)
{
	size_t mem = sizeof(*s) + s->cap_modules * sizeof(struct module) +
		     MODULES_MAX * sizeof(*s->free_ids) + u64map_memory(&s->by_file) +
		     u64map_memory(&s->jit_by_process) + u64map_memory(&s->by_owner);

	*ret = s->stats;
	for (size_t i = 0; i < s->n_modules; i++) {
		const struct module *m = &s->modules[i];
		size_t loaded;

		if (m->kind == MODULE_FREE)
			continue;
		loaded = sym_loaded_bytes(m);
		mem += strlen(m->path) + 1 + loaded;
		ret->cache_bytes += loaded;
		/* not parsed, or without a descriptor to parse it from */
		ret->modules_failed += m->load_error < 0 ||
				       (m->kind == MODULE_FILE && !m->symtab && m->fd < 0 &&
					(!m->verified || m->fd_error < 0));
	}
	ret->modules = s->live_modules;
	ret->modules_limit = s->max_modules;
	ret->fds_open = s->open_fds;
	ret->fds_closing = atomic_load(&s->fds_closing);
	ret->fds_limit = s->max_fds;
	ret->kernel_symbols = s->ksyms ? ksyms_count(s->ksyms) : 0;
	ret->cache_limit = s->cache_limit;
	ret->memory_bytes = mem;
}
