/* SPDX-License-Identifier: MIT */
/*
 * srcline.c - ELF virtual address -> inlined chain of (function, file:line),
 * from the DWARF of one binary (libdw).  See srcline.h for the contract.
 *
 * Three tables answer a lookup, each by binary search:
 *  - at open, which compile unit covers which addresses: .debug_aranges
 *    (libdw's dwarf_getaranges), plus the DW_AT_low_pc/high_pc/ranges of
 *    the units aranges leave out (clang writes no aranges by default);
 *  - per unit, built on the unit's first lookup by one walk of its DIE
 *    tree: every function and inlined subroutine with code is a "scope"
 *    (name, first line, parent scope, call site in the parent), and their address
 *    ranges are flattened into non-overlapping segments, each naming the
 *    innermost scope there;
 *  - per unit, libdw's line table (dwarf_getsrclines, which libdw keeps).
 * A chain is then the line row for the innermost scope, and the parent
 * links up to the function, each outer frame at the call site of the
 * frame inside it: what `addr2line -i` prints.
 *
 * The alternative, dwarf_getscopes() per address, walks the unit's DIEs on
 * every lookup (twice for an inlined instance, to find its abstract
 * origin's scopes); indexing once costs a walk per unit, 24 bytes per
 * function or inlined call and 16 per segment (all of libc: 1.4 MiB), and
 * makes a lookup three binary searches.
 * A direct-mapped cache of recent lookups, allocated on the first lookup,
 * answers repeated addresses (a profile's hot ones) without searching.
 * Names and file names point into libdw's copies of the sections (read, not
 * mapped: see elfopen.h); only file names
 * recorded relative to comp_dir are copied (joined) into an arena.
 * Split DWARF is not followed: a skeleton unit has the line table but its
 * DIEs are in the .dwo, so its addresses get file:line without functions.
 *
 * Threads: decoding a unit's line program and walking its DIEs take
 * seconds for a big unit (a crafted one: as long as its 256 MiB allow), so
 * the daemon's loop never does it.  It calls srcline_lookup_indexed, which
 * answers from indexed units only and marks any other it is asked about as
 * wanted; one other thread at a time (a lane, symload.h) indexes the wanted
 * units meanwhile (srcline_index_wanted).  What they share is a unit's
 * state, an atomic published with release once the unit's tables are
 * complete and read with acquire before they are: a unit is written only
 * by the indexer before it is published and only read (and its paths
 * filled, by the reader alone) after.  The reader never calls into libdw
 * for a unit not published, and for a published one only reads the line
 * and file tables libdw built, so libdw's own caches (abbreviations, the
 * unit tree, its allocator) are touched by the indexer alone.  The memory
 * and counts an indexer adds are atomics; the cache, the arena of joined
 * paths and the lookup counts are the reader's.  The owner must not free
 * a struct srcline an indexer is working on.  A unit whose indexing takes
 * more than SRCLINE_UNIT_MAX_NS of CPU time is refused (counted; its
 * lookups get -ETIME): the DIE walk checks the clock as it goes.  libdw's
 * decode of a line program cannot be stopped, so one longer than
 * SRCLINE_UNIT_MAX_LINE_BYTES is refused before it starts (-EFBIG).
 *
 * Memory: what libdw reads and builds stays in its Dwarf until
 * srcline_free, so it is counted in memory_bytes, which the symbol cache
 * charges: the debug sections at their decompressed size and the unit
 * list (SRCLINE_CU_BYTES a unit) at open; a unit's abbreviation table
 * (SRCLINE_ABBREV_FACTOR, measured) before its DIE walk and its rows
 * (SRCLINE_ROW_BYTES, measured) as soon as they are decoded, also for a
 * unit that fails after.  Before a decode, the unit's abbreviations and
 * worst case of rows (a row per byte of its program) are checked against
 * the memory limit, so a file's line tables never pass it: what a crafted
 * file makes libdw hold is bounded by the limit, not by its 256 MiB of
 * .debug_line.  The check
 * counts what the opener read and the indexer added, not the reader's
 * cache and paths (tens of KiB, and the reader's to write).
 */
#include "symbols/srcline.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <limits.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/clock.h"
#include "base/elfopen.h"
#include "base/search.h"
#include "perfd/macro.h"

#define SCOPE_NONE UINT32_MAX
/* DIE nesting deeper than this is taken for a corrupt unit. */
#define WALK_DEPTH_MAX 256
/* The DIE walk looks at the clock once per this many DIEs. */
#define WALK_CLOCK_EVERY 256

/* A unit's state; a negative value is the -errno it failed with (not
 * retried). */
enum {
	UNIT_UNSEEN, /* not indexed, not asked for */
	UNIT_WANTED, /* asked for by srcline_lookup_indexed */
	UNIT_READY,  /* indexed: its tables are complete, and only read */
};

/* Recent-lookup cache: slots, and the frames one slot holds (deeper chains
 * are not cached).  256 * 112 bytes = 28 KiB per binary, only once used. */
#define CACHE_SLOTS 256
#define CACHE_FRAMES 4

/* [lo, hi) of code in unit. */
struct unit_range {
	uint64_t lo, hi;
	uint32_t unit;
};

/* A function (parent SCOPE_NONE) or an inlined call of one into parent,
 * at call_file:call_line of parent's code.  decl_line is the function's
 * own first line (its abstract origin's for an inlined or out-of-line
 * instance), 0 when unknown: read once here, it costs a lookup nothing
 * and fits in what was padding. */
struct scope {
	const char *name;
	uint32_t parent;
	uint32_t call_file; /* index in the unit's file table; UINT32_MAX: unknown */
	uint32_t call_line;
	uint32_t decl_line;
};

/* From lo up to the next segment's lo, scope is the innermost one
 * (SCOPE_NONE: none). */
struct segment {
	uint64_t lo;
	uint32_t scope;
};

struct unit {
	Dwarf_Die die;
	atomic_int state; /* UNIT_*, or -errno; see the design comment */
	Dwarf_Lines *lines; /* NULL when the unit has no line table */
	bool rows_counted;  /* libdw's rows are in indexed_memory (libdw keeps
			     * them, also when the unit is indexed again) */
	bool abbrevs_counted; /* and its abbreviations (SRCLINE_ABBREV_FACTOR) */
	uint64_t abbrev_bytes; /* of .debug_abbrev, from its table to the next */
	size_t n_lines;
	Dwarf_Files *files;
	size_t n_files;
	const char *comp_dir;
	const char **paths; /* per file index once resolved; path_none: no name */
	struct scope *scopes;
	struct segment *segs;
	size_t n_scopes, n_segs;
};

struct cache_slot {
	uint64_t vaddr;
	uint32_t n; /* frames; UINT32_MAX: empty slot */
	struct srcline_frame frames[CACHE_FRAMES];
};

/* Bump allocator for the joined file names: freed all at once. */
struct arena_chunk {
	struct arena_chunk *next;
	size_t used, size;
	char data[];
};

struct srcline {
	Elf *elf;
	Dwarf *dw;
	struct unit *units; /* sorted by CU DIE offset */
	size_t n_units;
	struct unit_range *ranges; /* sorted by lo */
	size_t n_ranges;
	struct cache_slot *cache;
	struct arena_chunk *arena;
	size_t memory, lookups, cache_hits; /* the reader's (and the opener's) */
	/* the indexer's: what its units hold, how many, how many refused */
	atomic_size_t indexed_memory, units_loaded, units_refused;
	atomic_bool wanted; /* a unit was marked UNIT_WANTED since the last pass */
	uint64_t unit_max_ns; /* SRCLINE_UNIT_MAX_NS, unless a test sets it */
	uint64_t unit_max_line_bytes; /* SRCLINE_UNIT_MAX_LINE_BYTES, likewise */
	size_t memory_limit;   /* srcline_set_memory_limit; SIZE_MAX: none */
	size_t opened_memory;  /* memory once opened: the indexer's to read */
	uint64_t line_bytes; /* of .debug_line (its uncompressed size) */
	Elf_Scn *line_scn;   /* .debug_line (or .zdebug_line), NULL when none */
};

/* A file index whose name libdw does not know, once looked up. */
static const char path_none[] = "";

/* --- ownership ------------------------------------------------------- */

static void unit_done(struct unit *u)
{
	free(u->paths);
	free(u->scopes);
	free(u->segs);
}

struct srcline *srcline_free(struct srcline *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n_units; i++)
		unit_done(&s->units[i]);
	free(s->units);
	free(s->ranges);
	free(s->cache);
	while (s->arena) {
		struct arena_chunk *next = s->arena->next;

		free(s->arena);
		s->arena = next;
	}
	if (s->dw)
		(void)dwarf_end(s->dw);
	if (s->elf)
		(void)elf_end(s->elf);
	free(s);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct srcline, srcline_free);

/* Grows *array (of *cap elements of size) to hold at least need. */
static int grow(void *array, size_t *cap, size_t need, size_t size)
{
	void **p = array;
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2 / size)
			return -ENOMEM;
		n *= 2;
	}
	q = realloc(*p, n * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* dir + "/" + name, allocated from s's arena; NULL when out of memory. */
static const char *arena_join(struct srcline *s, const char *dir, const char *name)
{
	size_t ld = strlen(dir), ln = strlen(name);
	bool slash = ld > 0 && dir[ld - 1] != '/';
	size_t need = ld + slash + ln + 1;
	struct arena_chunk *c = s->arena;
	char *p;

	if (!c || c->size - c->used < need) {
		size_t size = MAX(need, (size_t)16384 - sizeof(*c));

		c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->used = 0;
		c->size = size;
		c->next = s->arena;
		s->arena = c;
		s->memory += sizeof(*c) + size;
	}
	p = c->data + c->used;
	memcpy(p, dir, ld);
	if (slash)
		p[ld] = '/';
	memcpy(p + ld + slash, name, ln + 1);
	c->used += need;
	return p;
}

/* --- the unit index ------------------------------------------------- */

static int cmp_unit_offset(const void *a, const void *b)
{
	Dwarf_Off x = dwarf_dieoffset((Dwarf_Die *)&((const struct unit *)a)->die);
	Dwarf_Off y = dwarf_dieoffset((Dwarf_Die *)&((const struct unit *)b)->die);

	return x < y ? -1 : x > y;
}

static int cmp_range(const void *a, const void *b)
{
	const struct unit_range *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->hi < y->hi ? -1 : x->hi > y->hi;
}

/* A unit's key: the offset of its CU DIE, which orders s->units. */
static uint64_t unit_die_offset(const void *elem)
{
	/* libdw's prototype takes no const; it only reads */
	return dwarf_dieoffset((Dwarf_Die *)&((const struct unit *)elem)->die);
}

/* The unit whose CU DIE is at offset, or -1. */
static ssize_t unit_by_offset(const struct srcline *s, Dwarf_Off offset)
{
	size_t n = search_upper_bound(s->units, s->n_units, sizeof(*s->units), offset,
				      unit_die_offset);

	return n > 0 && unit_die_offset(&s->units[n - 1]) == offset ? (ssize_t)(n - 1) : -1;
}

/* Code never starts at 0 in a linked binary: a range there (or ending
 * before it starts, or at a -1/-2 tombstone) is what the linker left of a
 * discarded function or section, and would shadow real code. */
static bool range_is_code(uint64_t lo, uint64_t hi)
{
	return lo != 0 && lo < hi && lo < UINT64_MAX - 1;
}

static int add_range(struct srcline *s, uint64_t lo, uint64_t hi, size_t unit,
		     size_t *cap)
{
	if (!range_is_code(lo, hi))
		return 0;
	if (grow(&s->ranges, cap, s->n_ranges + 1, sizeof(*s->ranges)) < 0)
		return -ENOMEM;
	s->ranges[s->n_ranges++] = (struct unit_range){ .lo = lo, .hi = hi, .unit = (uint32_t)unit };
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Turns each unit's abbrev_bytes, its table's offset in .debug_abbrev
 * (UINT64_MAX: unknown), into the table's bytes: from there to the next
 * table any unit starts at (tables[], n of them, all units' offsets), or
 * the section's end.  An unknown one is the whole section. */
static void abbrev_spans(struct srcline *s, uint64_t *tables, size_t n)
{
	GElf_Shdr sh;
	Elf_Scn *scn = elf_find_section(s->elf, ".debug_abbrev", &sh);
	uint64_t size = scn ? elf_section_bytes(s->elf, &sh) : 0;

	qsort_safe(tables, n, sizeof(*tables), cmp_u64);
	for (size_t i = 0; i < s->n_units; i++) {
		uint64_t off = s->units[i].abbrev_bytes, end = size;
		/* the first table past off */
		size_t lo = search_upper_bound(tables, n, sizeof(*tables), off, search_key_u64);

		if (lo < n && tables[lo] < end)
			end = tables[lo];
		s->units[i].abbrev_bytes = off < end ? end - off : size;
	}
}

/* The compile units (not type or partial units: those have no code) and
 * their ranges.  aranges, when present, are the cheap source; a unit they
 * do not list is asked for its own ranges, which costs reading its DIE. */
static int index_units(struct srcline *s)
{
	_cleanup_free_ bool *listed = NULL;
	_cleanup_free_ uint64_t *tables = NULL;
	Dwarf_Aranges *aranges = NULL;
	size_t cap = 0, cap_r = 0, n_aranges = 0, n_all = 0, cap_t = 0;
	Dwarf_CU *cu = NULL;
	int r;

	for (;;) {
		Dwarf_Half version;
		uint8_t unit_type;
		Dwarf_Off abbrev_offset = UINT64_MAX;
		Dwarf_Die die, cu_die;

		r = dwarf_get_units(s->dw, cu, &cu, &version, &unit_type, &die, NULL);
		if (r < 0)
			return -EBADMSG;
		if (r > 0)
			break;
		n_all++;
		if (dwarf_cu_die(cu, &cu_die, NULL, &abbrev_offset, NULL, NULL, NULL, NULL) &&
		    abbrev_offset != UINT64_MAX) {
			if (grow(&tables, &cap_t, n_all, sizeof(*tables)) < 0)
				return -ENOMEM;
			tables[n_all - 1] = abbrev_offset;
		}
		if (unit_type != DW_UT_compile && unit_type != DW_UT_skeleton)
			continue;
		if (s->n_units >= UINT32_MAX)
			return -EFBIG;
		if (grow(&s->units, &cap, s->n_units + 1, sizeof(*s->units)) < 0)
			return -ENOMEM;
		s->units[s->n_units] = (struct unit){ .die = die, .abbrev_bytes = abbrev_offset };
		atomic_init(&s->units[s->n_units].state, UNIT_UNSEEN);
		s->n_units++;
	}
	if (s->n_units == 0)
		return -ENODATA;
	qsort_safe(s->units, s->n_units, sizeof(*s->units), cmp_unit_offset);
	abbrev_spans(s, tables, tables ? n_all : 0);
	s->memory += n_all * SRCLINE_CU_BYTES;

	listed = calloc(s->n_units, sizeof(*listed));
	if (!listed)
		return -ENOMEM;

	/* A file without .debug_aranges (or with one libdw cannot read) is
	 * indexed from the units alone. */
	if (dwarf_getaranges(s->dw, &aranges, &n_aranges) != 0)
		n_aranges = 0;
	for (size_t i = 0; i < n_aranges; i++) {
		Dwarf_Arange *a = dwarf_onearange(aranges, i);
		Dwarf_Addr addr;
		Dwarf_Word len;
		Dwarf_Off off;
		ssize_t u;

		if (!a || dwarf_getarangeinfo(a, &addr, &len, &off) != 0)
			return -EBADMSG;
		u = unit_by_offset(s, off);
		if (u < 0)
			continue;
		listed[u] = true;
		if (len > UINT64_MAX - addr)
			continue;
		r = add_range(s, addr, addr + len, (size_t)u, &cap_r);
		if (r < 0)
			return r;
	}

	for (size_t u = 0; u < s->n_units; u++) {
		Dwarf_Addr base, lo, hi;
		ptrdiff_t off = 0;

		if (listed[u])
			continue;
		while ((off = dwarf_ranges(&s->units[u].die, off, &base, &lo, &hi)) > 0) {
			r = add_range(s, lo, hi, u, &cap_r);
			if (r < 0)
				return r;
		}
		/* A unit whose ranges cannot be read is left out, not fatal:
		 * the others still answer. */
	}

	qsort_safe(s->ranges, s->n_ranges, sizeof(*s->ranges), cmp_range);
	s->memory += cap * sizeof(*s->units) + cap_r * sizeof(*s->ranges);
	return 0;
}

static uint64_t range_lo(const void *range)
{
	return ((const struct unit_range *)range)->lo;
}

/* The unit covering vaddr, or NULL.  Ranges of different units do not
 * overlap in sane DWARF; when they do, the one starting last wins. */
static struct unit *unit_for(const struct srcline *s, uint64_t vaddr)
{
	size_t lo = search_upper_bound(s->ranges, s->n_ranges, sizeof(*s->ranges), vaddr, range_lo);

	if (lo == 0 || vaddr >= s->ranges[lo - 1].hi)
		return NULL;
	return &s->units[s->ranges[lo - 1].unit];
}

/* --- the scopes of one unit ----------------------------------------- */

/* A scope's address range, before flattening.  depth orders a scope after
 * the ones it is nested in when their ranges start and end alike. */
struct interval {
	uint64_t lo, hi;
	uint32_t depth, scope;
};

struct builder {
	struct scope *scopes;
	size_t n_scopes, cap_scopes;
	struct interval *ivs;
	size_t n_ivs, cap_ivs;
	size_t dies;          /* walked so far */
	uint64_t deadline_ns; /* the thread's CPU time past which the walk gives up */
	const atomic_bool *cancel; /* the walk gives up once set (NULL: never) */
};

static void builder_done(struct builder *b)
{
	free(b->scopes);
	free(b->ivs);
}

/* The name a frame shows: the linkage name when there is one (C++, Rust:
 * unique, and spelt as in the symbol table), else DW_AT_name; both looked
 * up through DW_AT_abstract_origin and DW_AT_specification, so an inlined
 * or out-of-line instance gets its abstract function's name. */
static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *name;

	name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
	if (!name)
		name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
	if (!name)
		name = dwarf_diename(die);
	return name;
}

/* The line the function of die starts at: DW_AT_decl_line, which
 * dwarf_decl_line() looks up through DW_AT_abstract_origin and
 * DW_AT_specification (dwarf_attr_integrate), so an inlined or
 * out-of-line instance gets its abstract function's.  0 when unknown. */
static uint32_t die_decl_line(Dwarf_Die *die)
{
	int line;

	if (dwarf_decl_line(die, &line) != 0 || line <= 0)
		return 0;
	return (uint32_t)line;
}

static uint32_t die_udata(Dwarf_Die *die, unsigned attr, uint32_t absent)
{
	Dwarf_Attribute a;
	Dwarf_Word v;

	if (dwarf_formudata(dwarf_attr(die, attr, &a), &v) != 0 || v >= UINT32_MAX)
		return absent;
	return (uint32_t)v;
}

/* Adds die (a subprogram or an inlined subroutine) as a scope inside
 * parent, with its address ranges.  *ret_scope is its id, or SCOPE_NONE
 * when it has no code (a declaration, an abstract instance, code the
 * linker discarded): then it and what it contains are of no interest. */
static int add_scope(struct builder *b, Dwarf_Die *die, uint32_t parent, uint32_t depth,
		     uint32_t *ret_scope)
{
	size_t first = b->n_ivs;
	uint32_t id = (uint32_t)b->n_scopes;
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;

	if (b->n_scopes >= SCOPE_NONE)
		return -EFBIG;
	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		if (!range_is_code(lo, hi))
			continue;
		if (grow(&b->ivs, &b->cap_ivs, b->n_ivs + 1, sizeof(*b->ivs)) < 0)
			return -ENOMEM;
		b->ivs[b->n_ivs++] = (struct interval){ lo, hi, depth, id };
	}
	if (off < 0)
		return -EBADMSG;
	if (b->n_ivs == first) {
		*ret_scope = SCOPE_NONE;
		return 0;
	}
	if (grow(&b->scopes, &b->cap_scopes, b->n_scopes + 1, sizeof(*b->scopes)) < 0)
		return -ENOMEM;
	b->scopes[b->n_scopes++] = (struct scope){
		.name = die_name(die),
		.decl_line = die_decl_line(die),
		.parent = parent,
		.call_file = parent == SCOPE_NONE ? UINT32_MAX
						  : die_udata(die, DW_AT_call_file, UINT32_MAX),
		.call_line = parent == SCOPE_NONE ? 0 : die_udata(die, DW_AT_call_line, 0),
	};
	*ret_scope = id;
	return 0;
}

/* Collects the scopes among the children of die, which is inside scope.
 * Functions are looked for at any depth (C++ and Rust nest them in
 * namespaces and types), inlined calls inside functions, inlined calls and
 * blocks.  A function nested in another (GNU C) is a scope of its own, not
 * an inlined call. */
static int walk(struct builder *b, Dwarf_Die *die, uint32_t scope, uint32_t depth)
{
	Dwarf_Die child;
	int r;

	if (depth > WALK_DEPTH_MAX)
		return -EBADMSG;
	r = dwarf_child(die, &child);
	if (r != 0)
		return r < 0 ? -EBADMSG : 0;
	do {
		uint32_t inner = scope;
		bool descend;

		if (++b->dies % WALK_CLOCK_EVERY == 0) {
			if (b->cancel && atomic_load_explicit(b->cancel, memory_order_relaxed))
				return -ECANCELED;
			if (thread_cpu_ns() > b->deadline_ns)
				return -ETIME;
		}

		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
			r = add_scope(b, &child, SCOPE_NONE, depth, &inner);
			descend = inner != SCOPE_NONE;
			break;
		case DW_TAG_inlined_subroutine:
			r = add_scope(b, &child, scope, depth, &inner);
			descend = inner != SCOPE_NONE;
			break;
		case DW_TAG_lexical_block:
		case DW_TAG_try_block:
		case DW_TAG_catch_block:
		case DW_TAG_namespace:
		case DW_TAG_module:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_interface_type:
			r = 0;
			descend = true;
			break;
		default:
			r = 0;
			descend = false;
		}
		if (r < 0)
			return r;
		if (descend && dwarf_haschildren(&child)) {
			r = walk(b, &child, inner, depth + 1);
			if (r < 0)
				return r;
		}
		r = dwarf_siblingof(&child, &child);
	} while (r == 0);
	return r < 0 ? -EBADMSG : 0;
}

static int cmp_interval(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	if (x->hi != y->hi)
		return x->hi > y->hi ? -1 : 1; /* the enclosing one first */
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return x->scope < y->scope ? -1 : x->scope > y->scope;
}

/* Appends "from lo on, scope", folding it into the last segment when that
 * starts at lo too or names the same scope. */
static void emit(struct segment *segs, size_t *n, uint64_t lo, uint32_t scope)
{
	if (*n > 0 && segs[*n - 1].lo == lo) {
		segs[*n - 1].scope = scope;
		if (*n > 1 && segs[*n - 2].scope == scope)
			(*n)--;
		return;
	}
	if (*n > 0 && segs[*n - 1].scope == scope)
		return;
	segs[(*n)++] = (struct segment){ lo, scope };
}

/* Turns the nested intervals into segments: sorted enclosing-first, each
 * pushed on a stack of the open ones, so the top of the stack is the
 * innermost scope.  An interval that sticks out of the one enclosing it
 * (not valid DWARF) is cut at its end.  At most 2n + 1 segments. */
static int flatten(struct builder *b, struct segment **ret, size_t *ret_n)
{
	_cleanup_free_ struct interval *stack = NULL;
	_cleanup_free_ struct segment *segs = NULL;
	size_t n = 0, sp = 0;

	*ret = NULL;
	*ret_n = 0;
	if (b->n_ivs == 0)
		return 0;
	qsort_safe(b->ivs, b->n_ivs, sizeof(*b->ivs), cmp_interval);
	stack = malloc(b->n_ivs * sizeof(*stack));
	segs = malloc((2 * b->n_ivs + 1) * sizeof(*segs));
	if (!stack || !segs)
		return -ENOMEM;

	for (size_t i = 0; i <= b->n_ivs; i++) {
		struct interval iv = i < b->n_ivs ? b->ivs[i] : (struct interval){ .lo = UINT64_MAX };

		while (sp > 0 && stack[sp - 1].hi <= iv.lo) {
			uint64_t end = stack[--sp].hi;

			emit(segs, &n, end, sp > 0 ? stack[sp - 1].scope : SCOPE_NONE);
		}
		if (i == b->n_ivs)
			break;
		if (sp > 0 && iv.hi > stack[sp - 1].hi)
			iv.hi = stack[sp - 1].hi;
		if (iv.lo >= iv.hi)
			continue;
		stack[sp++] = iv;
		emit(segs, &n, iv.lo, iv.scope);
	}

	*ret = realloc(segs, n * sizeof(*segs)) ?: segs;
	segs = NULL;
	*ret_n = n;
	return 0;
}

/* The length of u's line program, from the unit_length that starts it in
 * .debug_line (as libdw has it in memory, decompressed), or 0 when that
 * cannot be told here (libdw then judges the program itself). */
static uint64_t unit_program_bytes(const struct srcline *s, struct unit *u)
{
	Elf_Data *d = s->line_scn ? elf_getdata(s->line_scn, NULL) : NULL;
	Dwarf_Attribute a;
	Dwarf_Word off;
	uint32_t len32;
	uint64_t len64;

	if (!d || !d->d_buf || dwarf_formudata(dwarf_attr(&u->die, DW_AT_stmt_list, &a), &off) != 0 ||
	    off > d->d_size || d->d_size - off < sizeof(len32))
		return 0;
	memcpy(&len32, (const char *)d->d_buf + off, sizeof(len32));
	if (len32 != UINT32_MAX) /* the 32-bit DWARF format */
		return len32;
	if (d->d_size - off - sizeof(len32) < sizeof(len64))
		return 0;
	memcpy(&len64, (const char *)d->d_buf + off + sizeof(len32), sizeof(len64));
	return len64;
}

/* Indexes u (the indexer's, not published yet): line table, file table,
 * scopes.  -ETIME when the thread's CPU time passes deadline_ns before
 * the DIE walk is done (libdw's decode of the line program cannot be
 * stopped, but its time counts), -ECANCELED once *cancel is set. */
static int unit_load(struct srcline *s, struct unit *u, uint64_t deadline_ns,
		     const atomic_bool *cancel)
{
	_cleanup_(builder_done) struct builder b = { .deadline_ns = deadline_ns,
						     .cancel = cancel };
	uint64_t program = unit_program_bytes(s, u);
	uint64_t abbrevs = u->abbrevs_counted ? 0 : u->abbrev_bytes * SRCLINE_ABBREV_FACTOR;
	size_t held = s->opened_memory +
		      atomic_load_explicit(&s->indexed_memory, memory_order_relaxed);
	Dwarf_Attribute a;
	int r;

	/* libdw's decode cannot be stopped, and what it decodes stays: a
	 * program too long to decode in time, or whose rows (at most one per
	 * byte) could take the file past its memory, is not started */
	if (program > s->unit_max_line_bytes || held > s->memory_limit ||
	    abbrevs > s->memory_limit - held ||
	    program > (s->memory_limit - held - abbrevs) / SRCLINE_ROW_BYTES)
		return -EFBIG;

	/* the walk below has libdw parse the unit's abbreviations, which it
	 * keeps until srcline_free (also when the unit fails after) */
	if (!u->abbrevs_counted) {
		u->abbrevs_counted = true;
		atomic_fetch_add_explicit(&s->indexed_memory, abbrevs, memory_order_relaxed);
	}

	r = dwarf_getsrclines(&u->die, &u->lines, &u->n_lines);
	if (r == 0 && !u->rows_counted) {
		u->rows_counted = true;
		atomic_fetch_add_explicit(&s->indexed_memory, u->n_lines * SRCLINE_ROW_BYTES,
					  memory_order_relaxed);
	}
	if (r != 0 || dwarf_getsrcfiles(&u->die, &u->files, &u->n_files) != 0) {
		/* No DW_AT_stmt_list is no line table; one that cannot be
		 * read is a broken unit. */
		if (dwarf_hasattr(&u->die, DW_AT_stmt_list))
			return -EBADMSG;
		u->lines = NULL;
		u->files = NULL;
		u->n_lines = u->n_files = 0;
	}
	u->comp_dir = dwarf_formstring(dwarf_attr(&u->die, DW_AT_comp_dir, &a));
	if (u->n_files > 0) {
		u->paths = calloc(u->n_files, sizeof(*u->paths));
		if (!u->paths)
			return -ENOMEM;
	}

	if (thread_cpu_ns() > deadline_ns)
		return -ETIME;
	r = walk(&b, &u->die, SCOPE_NONE, 0);
	if (r < 0)
		return r;
	r = flatten(&b, &u->segs, &u->n_segs);
	if (r < 0)
		return r;

	u->scopes = b.n_scopes ? realloc(b.scopes, b.n_scopes * sizeof(*b.scopes)) : NULL;
	if (u->scopes || b.n_scopes == 0)
		b.scopes = NULL;
	else
		u->scopes = TAKE_PTR(b.scopes); /* shrinking failed: keep as is */
	u->n_scopes = b.n_scopes;
	atomic_fetch_add_explicit(&s->indexed_memory,
				  u->n_files * sizeof(*u->paths) + u->n_scopes * sizeof(*u->scopes) +
					  u->n_segs * sizeof(*u->segs),
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&s->units_loaded, 1, memory_order_relaxed);
	return 0;
}

static uint64_t segment_lo(const void *seg)
{
	return ((const struct segment *)seg)->lo;
}

/* The innermost scope at vaddr, or SCOPE_NONE. */
static uint32_t unit_scope(const struct unit *u, uint64_t vaddr)
{
	size_t lo = search_upper_bound(u->segs, u->n_segs, sizeof(*u->segs), vaddr, segment_lo);

	return lo == 0 ? SCOPE_NONE : u->segs[lo - 1].scope;
}

/* The line table's row for vaddr: the last row at or before it, unless
 * that row ends a sequence (vaddr is past the code it describes).  libdw
 * sorts rows by address, ends of sequences first, so the last of the rows
 * at one address wins, as in dwarf_getsrc_die() and eu-addr2line.  The
 * search is written out, not base/search.h's: the rows are libdw's, read
 * one by one through calls that can fail, not an array. */
static Dwarf_Line *unit_line(const struct unit *u, uint64_t vaddr)
{
	size_t lo = 0, hi = u->n_lines;
	Dwarf_Line *line;
	bool end;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		Dwarf_Addr a;

		line = dwarf_onesrcline(u->lines, mid);
		if (!line || dwarf_lineaddr(line, &a) != 0)
			return NULL;
		if (a <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	line = dwarf_onesrcline(u->lines, lo - 1);
	if (!line || dwarf_lineendsequence(line, &end) != 0 || end)
		return NULL;
	return line;
}

/* The full name of file idx of u's file table: as recorded when absolute,
 * else joined to comp_dir (once, then remembered).  *ret is NULL when the
 * table has no such file. */
static int unit_path(struct srcline *s, struct unit *u, size_t idx, const char **ret)
{
	const char *name;

	*ret = NULL;
	if (idx >= u->n_files)
		return 0;
	if (!u->paths[idx]) {
		name = dwarf_filesrc(u->files, idx, NULL, NULL);
		if (!name)
			name = path_none;
		else if (name[0] != '/' && u->comp_dir && u->comp_dir[0]) {
			name = arena_join(s, u->comp_dir, name);
			if (!name)
				return -ENOMEM;
		}
		u->paths[idx] = name;
	}
	*ret = u->paths[idx] == path_none ? NULL : u->paths[idx];
	return 0;
}

/* The file and line of a row.  The row's file table is the unit's (the
 * same Dwarf_Files); were it ever another, its name is given as libdw has
 * it, rather than joined into memory on every lookup. */
static int line_position(struct srcline *s, struct unit *u, Dwarf_Line *line,
			 const char **ret_file, unsigned *ret_line)
{
	Dwarf_Files *files;
	size_t idx;
	int no;

	*ret_file = NULL;
	*ret_line = 0;
	if (!line)
		return 0;
	if (dwarf_lineno(line, &no) == 0 && no > 0)
		*ret_line = (unsigned)no;
	if (dwarf_line_file(line, &files, &idx) != 0)
		return 0;
	if (files == u->files)
		return unit_path(s, u, idx, ret_file);
	*ret_file = dwarf_filesrc(files, idx, NULL, NULL);
	return 0;
}

/* --- API --------------------------------------------------------------- */

/* Whether the ELF has DWARF debug info: a .debug_info (or the old
 * compressed .zdebug_info) with contents.  Checked here rather than from
 * dwarf_begin_elf's error, whose codes libdw does not export, and because
 * libdw also accepts a file with only .debug_line or .debug_frame.
 * *ret_bytes gets the size in the file of the sections libdw reads into
 * memory (every .debug_* and .zdebug_* one).  -EFBIG for a .debug_line
 * past SRCLINE_MAX_LINE_BYTES. */
static int has_debug_info(Elf *elf, uint64_t *ret_bytes, uint64_t *ret_line_bytes,
			  Elf_Scn **ret_line_scn)
{
	uint64_t bytes = 0, line_bytes = 0;
	size_t shstrndx;
	int found = 0;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENOEXEC;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		const char *name;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return -ENOEXEC;
		if (sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (strcmp(name, ".debug_info") == 0 || strcmp(name, ".zdebug_info") == 0)
			found = 1;
		if (strncmp(name, ".debug_", 7) == 0 || strncmp(name, ".zdebug_", 8) == 0)
			bytes += elf_section_bytes(elf, &sh); /* decompressed, as held */
		if (strcmp(name, ".debug_line") == 0 || strcmp(name, ".zdebug_line") == 0) {
			line_bytes = elf_section_bytes(elf, &sh);
			if (line_bytes > SRCLINE_MAX_LINE_BYTES)
				return -EFBIG;
			*ret_line_scn = scn;
		}
	}
	*ret_bytes = bytes;
	*ret_line_bytes = line_bytes;
	return found;
}

/* Whether the string sections the DWARF's names point into end with a
 * NUL.  libdw (0.188) reads a DW_FORM_strp or DW_FORM_line_strp name (DIE
 * names, DWARF 5 line program headers' file and directory names) with
 * strlen from its offset, having checked only that the offset is inside
 * the section: in a section whose last byte is not NUL, the last string
 * runs past libdw's copy of it, into the heap (found by fuzz-srcline,
 * tests/fuzz/corpus/srcline/regress-unterminated-line-str).  Called once libdw
 * has read the sections: their data is then what it reads (decompressed
 * when compressed).  -EBADMSG for a section that does not end so. */
static int strings_terminated(Elf *elf)
{
	static const char *const names[] = { ".debug_str", ".debug_line_str", ".zdebug_str",
					      ".zdebug_line_str" };
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENOEXEC;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		const char *name;
		Elf_Data *d;
		GElf_Shdr sh;
		bool strings = false;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		for (size_t i = 0; name && i < ELEMENTSOF(names); i++)
			strings |= strcmp(name, names[i]) == 0;
		if (!strings)
			continue;
		d = elf_getdata(scn, NULL);
		if (d && d->d_buf && d->d_size > 0 && ((const char *)d->d_buf)[d->d_size - 1] != '\0')
			return -EBADMSG;
	}
	return 0;
}

/* A dwz'd file names an alternate file of shared DIEs and strings in
 * .gnu_debugaltlink, which libdw opens itself at the first DIE or string
 * that refers to it: with a blocking open() (a FIFO there hangs the
 * caller) and dwarf_begin(), which maps the file (truncated by its owner,
 * a SIGBUS).  The name is the file's owner's to choose, so libdw is told
 * there is none: dwarf_setalt(dw, -1) is its own "looked, not found"
 * (elfutils 0.188's dwarf_getalt returns NULL for it).  A libdw that does
 * not know that mark hands it back; such a file is then refused
 * (-ENOTSUP).  Lines and the DIEs in the file itself still resolve; names
 * kept in the alternate file are missing. */
static int no_alt_file(Dwarf *dw)
{
	Dwarf *const none = (Dwarf *)(intptr_t)-1;
	const void *build_id;
	const char *name;

	if (dwelf_dwarf_gnu_debugaltlink(dw, &name, &build_id) <= 0)
		return 0; /* none named (or unreadable: libdw finds none either) */
	dwarf_setalt(dw, none);
	if (dwarf_getalt(dw) == NULL)
		return 0;
	dwarf_setalt(dw, NULL);
	return -ENOTSUP;
}

int srcline_open(int fd, struct srcline **ret)
{
	_cleanup_(srcline_freep) struct srcline *s = NULL;
	uint64_t debug_bytes;
	int r;

	if (elf_library_init() < 0)
		return -ENOTSUP;
	if (fd < 0 || !ret)
		return -EINVAL;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->memory = sizeof(*s);
	s->unit_max_ns = SRCLINE_UNIT_MAX_NS;
	s->unit_max_line_bytes = SRCLINE_UNIT_MAX_LINE_BYTES;
	s->memory_limit = SIZE_MAX;
	r = elf_open_fd(fd, &s->elf);
	if (r < 0)
		return r;
	r = has_debug_info(s->elf, &debug_bytes, &s->line_bytes, &s->line_scn);
	if (r <= 0)
		return r < 0 ? r : -ENODATA;
	if (debug_bytes > SRCLINE_MAX_DEBUG_BYTES)
		return -EFBIG;
	/* libdw reads (pread, into memory) every debug section it knows
	 * here, so the file is not needed after: a truncation later cannot
	 * reach us. */
	s->dw = dwarf_begin_elf(s->elf, DWARF_C_READ, NULL);
	if (!s->dw)
		return -EBADMSG;
	r = strings_terminated(s->elf);
	if (r < 0)
		return r;
	r = no_alt_file(s->dw);
	if (r < 0)
		return r;
	if (elf_cntl(s->elf, ELF_C_FDDONE) != 0)
		return -EIO;
	s->memory += debug_bytes;
	r = index_units(s);
	if (r < 0)
		return r;
	s->opened_memory = s->memory;

	*ret = TAKE_PTR(s);
	return 0;
}

static size_t cache_index(uint64_t vaddr)
{
	return (size_t)((vaddr * 0x9e3779b97f4a7c15ULL) >> 56) % CACHE_SLOTS;
}

/* Walks the chain from the innermost scope and fills ret[] (see srcline.h
 * on a chain longer than max).  Returns the number of frames written, and
 * in *ret_depth the length of the whole chain. */
static int build_chain(struct srcline *s, struct unit *u, uint32_t scope, Dwarf_Line *line,
		       struct srcline_frame *ret, size_t max, size_t *ret_depth)
{
	size_t depth = 1, n = 0;
	uint32_t sc = scope;
	int r;

	for (uint32_t p = scope; p != SCOPE_NONE && u->scopes[p].parent != SCOPE_NONE;
	     p = u->scopes[p].parent)
		depth++;
	*ret_depth = depth;

	for (size_t i = 0; i < depth; i++) {
		struct srcline_frame f = {};

		if (i == 0) {
			f.function = sc == SCOPE_NONE ? NULL : u->scopes[sc].name;
			f.decl_line = sc == SCOPE_NONE ? 0 : u->scopes[sc].decl_line;
			r = line_position(s, u, line, &f.file, &f.line);
		} else {
			const struct scope *inner = &u->scopes[sc];

			sc = inner->parent;
			f.function = u->scopes[sc].name;
			f.decl_line = u->scopes[sc].decl_line;
			f.line = inner->call_line;
			r = inner->call_file == UINT32_MAX
				    ? 0
				    : unit_path(s, u, inner->call_file, &f.file);
		}
		if (r < 0)
			return r;
		/* No room for all: the outermost takes the last slot. */
		if (i < max - 1 || i == depth - 1)
			ret[n++] = f;
	}
	return (int)n;
}

/* Indexes u, not published yet, and publishes it: UNIT_READY, or the
 * -errno it failed with (then not retried), except -ENOMEM and
 * -ECANCELED, which leave it unseen (asked for again by a later lookup).
 * The indexer's alone. */
static int unit_index(struct srcline *s, struct unit *u, const atomic_bool *cancel)
{
	int r = unit_load(s, u, thread_cpu_ns() + s->unit_max_ns, cancel);
	bool again = r == -ENOMEM || r == -ECANCELED;

	if (r < 0) {
		unit_done(u);
		u->lines = NULL;
		u->files = NULL;
		u->paths = NULL;
		u->scopes = NULL;
		u->segs = NULL;
		u->n_lines = u->n_files = u->n_scopes = u->n_segs = 0;
	}
	if (r == -ETIME || r == -EFBIG)
		atomic_fetch_add_explicit(&s->units_refused, 1, memory_order_relaxed);
	atomic_store_explicit(&u->state, again ? UNIT_UNSEEN : r < 0 ? r : UNIT_READY,
			      memory_order_release);
	return r;
}

int srcline_index_all(struct srcline *s)
{
	int refused = 0;

	if (s->line_bytes > SRCLINE_INDEX_ALL_MAX_LINE_BYTES)
		return 0;
	for (size_t i = 0; i < s->n_units; i++) {
		struct unit *u = &s->units[i];
		int state = atomic_load_explicit(&u->state, memory_order_acquire);
		int r;

		if (state == UNIT_READY || state < 0)
			continue;
		r = unit_index(s, u, NULL);
		if (r == -ENOMEM)
			return -ENOMEM;
		refused += (r == -ETIME || r == -EFBIG) && refused < INT_MAX;
	}
	return refused;
}

int srcline_index_wanted(struct srcline *s, const atomic_bool *cancel)
{
	int refused = 0;

	/* A unit marked after this pass went by it sets wanted again: the
	 * next round (or the owner's next job, srcline_wants) takes it. */
	while (atomic_exchange_explicit(&s->wanted, false, memory_order_acq_rel)) {
		for (size_t i = 0; i < s->n_units; i++) {
			struct unit *u = &s->units[i];
			int r;

			if (cancel && atomic_load_explicit(cancel, memory_order_relaxed))
				return -ECANCELED;
			if (atomic_load_explicit(&u->state, memory_order_acquire) != UNIT_WANTED)
				continue;
			r = unit_index(s, u, cancel);
			if (r == -ENOMEM || r == -ECANCELED)
				return r;
			refused += (r == -ETIME || r == -EFBIG) && refused < INT_MAX;
		}
	}
	return refused;
}

bool srcline_wants(struct srcline *s)
{
	return atomic_load_explicit(&s->wanted, memory_order_acquire);
}

/* The unit covering vaddr ready for a lookup (*ret NULL when none covers
 * it): indexed now when may_index (the caller takes the time), else
 * marked wanted and -EAGAIN.  -errno of a unit that failed. */
static int unit_ready(struct srcline *s, uint64_t vaddr, bool may_index, struct unit **ret)
{
	struct unit *u = unit_for(s, vaddr);
	int state, expect = UNIT_UNSEEN;

	*ret = u;
	if (!u)
		return 0;
	state = atomic_load_explicit(&u->state, memory_order_acquire);
	if (state == UNIT_READY)
		return 0;
	if (state < 0)
		return state;
	if (may_index) {
		int r = unit_index(s, u, NULL);

		return r < 0 ? r : 0;
	}
	/* Marked once: the flag, set after the mark, makes the indexer's
	 * next round (or the owner's next job) see it. */
	if (atomic_compare_exchange_strong_explicit(&u->state, &expect, UNIT_WANTED,
						    memory_order_relaxed, memory_order_relaxed))
		atomic_store_explicit(&s->wanted, true, memory_order_release);
	return -EAGAIN;
}

int srcline_want(struct srcline *s, uint64_t vaddr)
{
	struct unit *u;
	int r = unit_ready(s, vaddr, false, &u);

	return r == -EAGAIN ? r : 0;
}

static int lookup(struct srcline *s, uint64_t vaddr, struct srcline_frame *ret, size_t max,
		  bool may_index)
{
	struct cache_slot *slot = NULL;
	size_t depth = 0;
	struct unit *u;
	Dwarf_Line *line;
	uint32_t scope;
	int n = 0;

	if (!s || !ret || max == 0)
		return -EINVAL;
	s->lookups++;

	/* Not having the cache only makes lookups slower. */
	if (!s->cache) {
		s->cache = malloc(CACHE_SLOTS * sizeof(*s->cache));
		if (s->cache) {
			for (size_t i = 0; i < CACHE_SLOTS; i++)
				s->cache[i].n = UINT32_MAX;
			s->memory += CACHE_SLOTS * sizeof(*s->cache);
		}
	}
	if (s->cache) {
		slot = &s->cache[cache_index(vaddr)];
		if (slot->n != UINT32_MAX && slot->vaddr == vaddr && slot->n <= max) {
			s->cache_hits++;
			memcpy(ret, slot->frames, slot->n * sizeof(*ret));
			return (int)slot->n;
		}
	}

	{
		int r = unit_ready(s, vaddr, may_index, &u);

		if (r < 0)
			return r;
	}
	if (u) {
		scope = unit_scope(u, vaddr);
		line = unit_line(u, vaddr);
		if (scope != SCOPE_NONE || line) {
			n = build_chain(s, u, scope, line, ret, max, &depth);
			if (n < 0)
				return n;
		}
	}

	/* Only a whole chain is cached: one cut short by max is not the
	 * answer for a caller with more room. */
	if (slot && (size_t)n == depth && depth <= CACHE_FRAMES) {
		slot->vaddr = vaddr;
		slot->n = (uint32_t)n;
		memcpy(slot->frames, ret, (size_t)n * sizeof(*ret));
	}
	return n;
}

int srcline_lookup(struct srcline *s, uint64_t vaddr, struct srcline_frame *ret, size_t max)
{
	return lookup(s, vaddr, ret, max, true);
}

int srcline_lookup_indexed(struct srcline *s, uint64_t vaddr, struct srcline_frame *ret,
			   size_t max)
{
	return lookup(s, vaddr, ret, max, false);
}

void srcline_set_unit_limits(struct srcline *s, uint64_t ns, uint64_t line_bytes)
{
	s->unit_max_ns = ns;
	s->unit_max_line_bytes = line_bytes;
}

void srcline_set_memory_limit(struct srcline *s, size_t bytes)
{
	s->memory_limit = bytes;
}

void srcline_get_stats(const struct srcline *s, struct srcline_stats *ret)
{
	*ret = (struct srcline_stats){
		.units = s->n_units,
		.units_loaded = atomic_load_explicit(&s->units_loaded, memory_order_relaxed),
		.units_refused = atomic_load_explicit(&s->units_refused, memory_order_relaxed),
		.lookups = s->lookups,
		.cache_hits = s->cache_hits,
		.memory_bytes = s->memory +
				atomic_load_explicit(&s->indexed_memory, memory_order_relaxed),
	};
}
