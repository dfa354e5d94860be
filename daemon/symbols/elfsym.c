/* SPDX-License-Identifier: MIT */
/*
 * elfsym.c - function symbols of one ELF file, for address -> name lookup.
 *
 * A file is read once with libelf and reduced to three compact tables: the
 * PT_LOAD segments (to turn file offsets from /proc/PID/maps into virtual
 * addresses), the build-id, and a sorted array of disjoint address ranges,
 * each naming the function that owns it.  Names are copied into one string
 * arena, so nothing refers back to libelf or to the fd afterwards.
 *
 * Symbols from .symtab and .dynsym are merged; aliases at one address are
 * reduced to the best name (global over weak over local, a default symbol
 * version over a hidden compat one, .symtab over .dynsym, fewer leading
 * underscores, then alphabetical, so the choice is stable).  Version
 * suffixes ("free@@GLIBC_2.2.5" in .symtab) are dropped from names.  A
 * symbol of size 0 extends to the next symbol (within its segment).  Nested
 * symbols (an assembly entry point inside a bigger function) are flattened
 * at load time so that the innermost one wins and the enclosing one resumes
 * after it.  Loading costs O(n log n) for n symbols; a lookup is one binary
 * search; memory is about 32 bytes per symbol plus its name.
 *
 * A stripped file can be completed later with the function symbols of its
 * separate debug file or its MiniDebugInfo (see debuginfo.h): those share
 * the file's addresses, so the file's own segments stay the reference.  To
 * merge without keeping libelf or a second copy of every symbol, each range
 * remembers in otherwise unused padding how its symbol ranked (binding,
 * version) and whether it had a size; a merge turns the ranges back
 * into candidates, adds the new ones and rebuilds, so the result is the one
 * the unstripped file would have given.  Merging costs O((n + m) log(n + m))
 * for m new symbols, and the tables are rebuilt aside: on failure t is
 * left as it was.
 */
#include "symbols/elfsym.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/elfopen.h"
#include "base/search.h"
#include "perfd/macro.h"
#include "symbols/buildid.h"

/* In a .gnu.version entry: the version is not the default one (the
 * symbol can only be bound by version, like glibc's compat symbols). */
#define VERSYM_HIDDEN 0x8000

/* How a range's symbol ranked among aliases, kept so that a later merge
 * can rank it again: the low two bits are its bind_rank. */
#define RANGE_BIND_MASK 0x03
#define RANGE_HIDDEN 0x04 /* a compat version, not the default one */
#define RANGE_SIZED 0x08  /* had a size; else it ran to the next symbol */

/* [start, end) belongs to the function named names + name, which begins at
 * sym_addr (which is below start when an inner symbol interrupted it). */
struct elf_range {
	uint64_t start, end;
	uint64_t sym_addr;
	uint32_t name;
	uint8_t flags; /* RANGE_*: fills padding, the range stays 32 bytes */
};

_Static_assert(sizeof(struct elf_range) == 32, "the flags must fit in the padding");

struct elf_segment {
	uint64_t offset, vaddr, filesz, memsz;
	bool exec;
};

struct elf_symtab {
	struct elf_range *ranges;
	size_t n_ranges;
	size_t n_syms;
	char *names;
	size_t names_size;
	struct elf_segment *segs;
	size_t n_segs;
	char *build_id;
	bool has_symtab; /* a .symtab was read, from the file or merged */
	size_t memory_limit; /* elf_symtab_set_memory_limit's; 0: none */
};

/* A symbol as read, before merging; name points into libelf's buffers and
 * is only valid until elf_end(); its first len bytes are the name without
 * any version suffix. */
struct sym_candidate {
	uint64_t addr, size;
	const char *name;
	uint32_t len;
	uint8_t bind_rank;      /* 0 global, 1 weak, 2 local */
	uint8_t hidden_version; /* a compat version, not the default one */
	uint8_t from_dynsym;
};

struct elf_symtab *elf_symtab_free(struct elf_symtab *t)
{
	if (!t)
		return NULL;
	free(t->ranges);
	free(t->names);
	free(t->segs);
	free(t->build_id);
	free(t);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct elf_symtab, elf_symtab_free);

static int read_segments(Elf *elf, struct elf_symtab *t)
{
	size_t n;

	if (elf_getphdrnum(elf, &n) < 0)
		return -EINVAL;
	if (n == 0)
		return 0;

	t->segs = calloc(n, sizeof(*t->segs));
	if (!t->segs)
		return -ENOMEM;

	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			return -EINVAL;
		if (ph.p_type != PT_LOAD)
			continue;
		t->segs[t->n_segs++] = (struct elf_segment){
			.offset = ph.p_offset,
			.vaddr = ph.p_vaddr,
			.filesz = ph.p_filesz,
			.memsz = ph.p_memsz,
			.exec = ph.p_flags & PF_X,
		};
	}
	return 0;
}

/* The build-id (buildid.h: from the file, of any length) as a new hex
 * string in *ret; "" for a file without one.  Returns 0 or -ENOMEM. */
static int read_build_id(Elf *elf, char **ret)
{
	const uint8_t *id = NULL;
	size_t len = 0;
	char *s;

	if (build_id_from_elf(elf, BUILD_ID_FROM_FILE, SIZE_MAX, &id, &len) < 0)
		len = 0;
	s = malloc(2 * len + 1);
	if (!s)
		return -ENOMEM;
	(void)build_id_hex(id, len, s, 2 * len + 1); /* cannot fail: it has the room */
	*ret = s;
	return 0;
}

static int bind_rank(unsigned char bind)
{
	switch (bind) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return 0;
	case STB_WEAK:
		return 1;
	default:
		return 2;
	}
}

/* The .gnu.version data describing the symbol table section scn, or
 * NULL (only .dynsym has one). */
static Elf_Data *versym_data(Elf *elf, Elf_Scn *scn)
{
	size_t index = elf_ndxscn(scn);

	for (Elf_Scn *v = elf_nextscn(elf, NULL); v; v = elf_nextscn(elf, v)) {
		GElf_Shdr sh;

		if (gelf_getshdr(v, &sh) && sh.sh_type == SHT_GNU_versym && sh.sh_link == index)
			return elf_getdata(v, NULL);
	}
	return NULL;
}

/* Appends the defined function symbols of one symbol table section to
 * cands, which has room for cap entries of which *n_cands are used. */
static int read_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
			struct sym_candidate *cands, size_t cap, size_t *n_cands)
{
	size_t entsize = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
	Elf_Data *data = elf_getdata(scn, NULL);
	Elf_Data *versym = versym_data(elf, scn);

	if (!data || entsize == 0)
		return -EINVAL;

	/* Entry 0 is the reserved null symbol. */
	for (size_t i = 1; i < data->d_size / entsize; i++) {
		GElf_Sym sym;
		GElf_Versym vs;
		const char *name, *at;
		unsigned char type;
		bool hidden;
		size_t len;

		if (!gelf_getsym(data, (int)i, &sym))
			return -EINVAL;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name)
			continue;
		/* .symtab spells versions into the name: "f@@V" is the
		 * default version, "f@V" a hidden one; .dynsym keeps them in
		 * .gnu.version, where bit 15 marks a hidden one. */
		at = strchr(name, '@');
		len = at ? (size_t)(at - name) : strlen(name);
		hidden = at && at[1] != '@';
		if (versym && gelf_getversym(versym, (int)i, &vs) && (vs & VERSYM_HIDDEN))
			hidden = true;
		if (len == 0 || len > UINT32_MAX)
			continue;
		/* cap counts the entries of the tables' data: reached only
		 * when read_candidates() and this read disagree. */
		if (*n_cands == cap)
			return -EINVAL;

		cands[(*n_cands)++] = (struct sym_candidate){
			.addr = sym.st_value,
			.size = sym.st_size,
			.name = name,
			.len = (uint32_t)len,
			.bind_rank = (uint8_t)bind_rank(GELF_ST_BIND(sym.st_info)),
			.hidden_version = hidden,
			.from_dynsym = sh->sh_type == SHT_DYNSYM,
		};
	}
	return 0;
}

static size_t leading_underscores(const struct sym_candidate *c)
{
	size_t n = 0;

	while (n < c->len && c->name[n] == '_')
		n++;
	return n;
}

/* By address, and at one address the preferred name first. */
static int candidate_cmp(const void *a, const void *b)
{
	const struct sym_candidate *x = a, *y = b;
	size_t ux, uy;
	int r;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->bind_rank != y->bind_rank)
		return x->bind_rank < y->bind_rank ? -1 : 1;
	if (x->hidden_version != y->hidden_version)
		return x->hidden_version < y->hidden_version ? -1 : 1;
	if (x->from_dynsym != y->from_dynsym)
		return x->from_dynsym < y->from_dynsym ? -1 : 1;
	ux = leading_underscores(x);
	uy = leading_underscores(y);
	if (ux != uy)
		return ux < uy ? -1 : 1;
	r = memcmp(x->name, y->name, MIN(x->len, y->len));
	if (r != 0)
		return r;
	return x->len < y->len ? -1 : x->len > y->len;
}

static const struct elf_segment *segment_by_vaddr(const struct elf_symtab *t, uint64_t vaddr)
{
	for (size_t i = 0; i < t->n_segs; i++)
		if (vaddr >= t->segs[i].vaddr && vaddr - t->segs[i].vaddr < t->segs[i].memsz)
			return &t->segs[i];
	return NULL;
}

/* Where the unique symbol i of the sorted array u stops covering: its size
 * if it has one, else the next symbol, but never past its segment. */
static uint64_t symbol_end(const struct elf_symtab *t, const struct sym_candidate *u,
			   size_t n, size_t i)
{
	const struct elf_segment *seg;
	uint64_t end;

	if (u[i].size > 0)
		return u[i].addr + u[i].size < u[i].addr ? UINT64_MAX : u[i].addr + u[i].size;

	end = i + 1 < n ? u[i + 1].addr : UINT64_MAX;
	seg = segment_by_vaddr(t, u[i].addr);
	if (seg && seg->vaddr + seg->memsz < end)
		end = seg->vaddr + seg->memsz;
	return end > u[i].addr ? end : u[i].addr + 1;
}

static uint8_t range_flags(const struct sym_candidate *c)
{
	return (uint8_t)((c->bind_rank & RANGE_BIND_MASK) | (c->hidden_version ? RANGE_HIDDEN : 0) |
			 (c->size > 0 ? RANGE_SIZED : 0));
}

/* Turns the n unique symbols u (sorted, each with its name already at
 * names_off[i] in the arena) into disjoint ranges.  Walking up the
 * addresses with a stack of the symbols still open, each stretch up to the
 * next symbol's start goes to the innermost open symbol, and a symbol whose
 * end is reached is popped so the one around it resumes. */
static int build_ranges(struct elf_symtab *t, const struct sym_candidate *u, size_t n,
			const uint32_t *names_off)
{
	_cleanup_free_ uint64_t *ends = NULL;
	_cleanup_free_ size_t *stack = NULL;
	struct elf_range *shrunk;
	size_t depth = 0;
	uint64_t pos = 0;

	if (n == 0)
		return 0;

	ends = calloc(n, sizeof(*ends));
	stack = calloc(n, sizeof(*stack));
	/* Each range either ends a symbol or is cut by the next one's start. */
	t->ranges = calloc(2 * n, sizeof(*t->ranges));
	if (!ends || !stack || !t->ranges)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		ends[i] = symbol_end(t, u, n, i);

	for (size_t i = 0; i <= n; i++) {
		uint64_t next = i < n ? u[i].addr : UINT64_MAX;

		while (depth > 0 && pos < next) {
			size_t top = stack[depth - 1];
			uint64_t stop;

			if (ends[top] <= pos) {
				depth--;
				continue;
			}
			stop = MIN(ends[top], next);
			t->ranges[t->n_ranges++] = (struct elf_range){
				.start = pos,
				.end = stop,
				.sym_addr = u[top].addr,
				.name = names_off[top],
				.flags = range_flags(&u[top]),
			};
			pos = stop;
		}
		if (i == n)
			break;
		pos = next;
		stack[depth++] = i;
	}

	/* Usually close to n ranges were needed, not 2n; give the rest back.
	 * None at all (every symbol empty, past the others' ends): freed
	 * here, as realloc() to 0 bytes would free it and return NULL, which
	 * read as a failure left t->ranges pointing at freed memory. */
	if (!t->n_ranges) {
		free(t->ranges);
		t->ranges = NULL;
		return 0;
	}
	shrunk = reallocarray(t->ranges, t->n_ranges, sizeof(*t->ranges));
	if (shrunk)
		t->ranges = shrunk;
	return 0;
}

/* Merges the candidates (consumed: sorted and compacted in place) into
 * t->names and t->ranges. */
static int build_symbols(struct elf_symtab *t, struct sym_candidate *cands, size_t n)
{
	_cleanup_free_ uint32_t *names_off = NULL;
	size_t n_unique = 0, arena = 0;

	if (n == 0)
		return 0;

	qsort_safe(cands, n, sizeof(*cands), candidate_cmp);

	/* Keep the first (preferred) name at each address; an alias with a
	 * size lends it to a preferred name without one. */
	for (size_t i = 0; i < n; i++) {
		if (n_unique > 0 && cands[n_unique - 1].addr == cands[i].addr) {
			cands[n_unique - 1].size = MAX(cands[n_unique - 1].size, cands[i].size);
			continue;
		}
		cands[n_unique++] = cands[i];
	}

	for (size_t i = 0; i < n_unique; i++)
		arena += (size_t)cands[i].len + 1;
	if (arena > UINT32_MAX)
		return -EFBIG;

	t->names = malloc(arena);
	names_off = calloc(n_unique, sizeof(*names_off));
	if (!t->names || !names_off)
		return -ENOMEM;
	for (size_t i = 0; i < n_unique; i++) {
		names_off[i] = (uint32_t)t->names_size;
		memcpy(t->names + t->names_size, cands[i].name, cands[i].len);
		t->names[t->names_size + cands[i].len] = '\0';
		t->names_size += (size_t)cands[i].len + 1;
	}
	t->n_syms = n_unique;

	return build_ranges(t, cands, n_unique, names_off);
}

/* -EFBIG when the symbol table of header sh, or the string table it links
 * to, is past ELFSYM_MAX_TABLE_BYTES: refused before either is read. */
static int check_table_size(Elf *elf, const GElf_Shdr *sh)
{
	Elf_Scn *strscn = elf_getscn(elf, sh->sh_link);
	GElf_Shdr strsh;

	if (sh->sh_size > ELFSYM_MAX_TABLE_BYTES)
		return -EFBIG;
	if (strscn && gelf_getshdr(strscn, &strsh) && strsh.sh_type != SHT_NOBITS &&
	    strsh.sh_size > ELFSYM_MAX_TABLE_BYTES)
		return -EFBIG;
	return 0;
}

/* Reads the function symbols of every .symtab and .dynsym of elf into a
 * new array *ret_cands of *ret_n used entries, with room for reserve more
 * after them (*ret_cands stays NULL when there is nothing to hold).  A table
 * a debug file emptied (SHT_NOBITS) has another type and is not read.
 * *ret_symtab tells whether there was a .symtab. */
static int read_candidates(Elf *elf, size_t reserve, struct sym_candidate **ret_cands,
			   size_t *ret_n, bool *ret_symtab)
{
	_cleanup_free_ struct sym_candidate *cands = NULL;
	size_t entsize = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
	size_t total = 0, n = 0;
	bool symtab = false;
	int r;

	if (entsize == 0)
		return -EINVAL;

	/* First pass: an upper bound, so the candidates need one allocation.
	 * It counts the entries of each table's data, not of its header's
	 * sh_size: libelf checks the data lies inside the file, the header
	 * is the file's word (a fuzzed one asked for 6 TiB of candidates). */
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		Elf_Data *data;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return -EINVAL;
		if (sh.sh_type == SHT_SYMTAB)
			symtab = true;
		if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
			continue;
		r = check_table_size(elf, &sh);
		if (r < 0)
			return r;
		data = elf_getdata(scn, NULL);
		if (!data)
			return -EINVAL;
		total += data->d_size / entsize;
	}

	if (total + reserve > 0) {
		if (total + reserve < total)
			return -EFBIG;
		cands = calloc(total + reserve, sizeof(*cands));
		if (!cands)
			return -ENOMEM;
	}

	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn && total > 0; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return -EINVAL;
		if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
			continue;
		r = read_symbols(elf, scn, &sh, cands, total, &n);
		if (r < 0)
			return r;
	}

	*ret_cands = TAKE_PTR(cands);
	*ret_n = n;
	*ret_symtab = symtab;
	return 0;
}

static int read_all_symbols(Elf *elf, struct elf_symtab *t)
{
	_cleanup_free_ struct sym_candidate *cands = NULL;
	size_t n = 0;
	int r;

	r = read_candidates(elf, 0, &cands, &n, &t->has_symtab);
	if (r < 0)
		return r;
	return build_symbols(t, cands, n);
}

/* Beyond the header's contract: -ENOEXEC also covers an ELF file whose
 * header libelf cannot read (truncated, an archive); -EINVAL means the
 * header was fine but a table in the file is malformed. */
int elf_symtab_load_fd(int fd, struct elf_symtab **ret)
{
	_cleanup_(elf_symtab_freep) struct elf_symtab *t = NULL;
	_cleanup_(elf_endp) Elf *elf = NULL;
	int r;

	r = elf_open_fd(fd, &elf);
	if (r < 0)
		return r;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;

	if ((r = read_segments(elf, t)) < 0 || (r = read_build_id(elf, &t->build_id)) < 0 ||
	    (r = read_all_symbols(elf, t)) < 0)
		return r;

	*ret = TAKE_PTR(t);
	return 0;
}

int elf_symtab_load(const char *path, struct elf_symtab **ret)
{
	_cleanup_close_ int fd = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	return elf_symtab_load_fd(fd, ret);
}

/* The symbol that range r belongs to, as a candidate again: its name points
 * into t->names, its size is as far as its ranges reach (the size it was
 * loaded with, unless a later symbol overlapped its end, which cut it
 * there already), and 0 when it had none, so that its end is found anew
 * among the merged symbols.  A symbol split into several ranges yields
 * equal candidates that the merge folds into one.
 *
 * It ranks as a .symtab symbol even when t read it from .dynsym: an
 * unstripped file's .symtab repeats every .dynsym function, but
 * MiniDebugInfo leaves those out, so a name from .dynsym stands for its
 * .symtab twin; otherwise any alias in the merged .symtab would beat it,
 * which the unstripped file would not do. */
static struct sym_candidate candidate_from_range(const struct elf_symtab *t,
						 const struct elf_range *r)
{
	const char *name = t->names + r->name;

	return (struct sym_candidate){
		.addr = r->sym_addr,
		.size = (r->flags & RANGE_SIZED) ? r->end - r->sym_addr : 0,
		.name = name,
		.len = (uint32_t)strlen(name),
		.bind_rank = r->flags & RANGE_BIND_MASK,
		.hidden_version = !!(r->flags & RANGE_HIDDEN),
		.from_dynsym = 0,
	};
}

/* Merges the function symbols of elf into t; see elf_symtab_add_from_fd(). */
static int merge_elf(struct elf_symtab *t, Elf *elf)
{
	_cleanup_free_ struct sym_candidate *cands = NULL;
	_cleanup_free_ char *build_id = NULL;
	struct elf_symtab fresh;
	GElf_Ehdr ehdr;
	size_t n = 0, added;
	bool symtab = false;
	int r;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr))
		return -ENOEXEC;

	r = read_build_id(elf, &build_id);
	if (r < 0)
		return r;
	if (t->build_id && t->build_id[0] && build_id[0] && strcmp(t->build_id, build_id) != 0)
		return -ESTALE;

	r = read_candidates(elf, t->n_ranges, &cands, &n, &symtab);
	if (r < 0)
		return r;
	if (n == 0) {
		t->has_symtab = t->has_symtab || symtab;
		return 0;
	}
	for (size_t i = 0; i < t->n_ranges; i++)
		cands[n++] = candidate_from_range(t, &t->ranges[i]);

	/* Built aside, against t's segments (and with its build-id, which
	 * it counts), so that a failure or a table past t's limit leaves t
	 * whole; the old names stay alive until the new arena has its copy. */
	fresh = (struct elf_symtab){ .segs = t->segs, .n_segs = t->n_segs,
				     .build_id = t->build_id };
	r = build_symbols(&fresh, cands, n);
	if (r >= 0 && t->memory_limit && elf_symtab_memory(&fresh) > t->memory_limit)
		r = -EFBIG;
	if (r < 0) {
		free(fresh.ranges);
		free(fresh.names);
		return r;
	}

	/* Every old symbol keeps its address, so the count does not drop. */
	added = fresh.n_syms > t->n_syms ? fresh.n_syms - t->n_syms : 0;
	free(t->ranges);
	free(t->names);
	t->ranges = fresh.ranges;
	t->n_ranges = fresh.n_ranges;
	t->names = fresh.names;
	t->names_size = fresh.names_size;
	t->n_syms = fresh.n_syms;
	t->has_symtab = t->has_symtab || symtab;
	return (int)MIN(added, (size_t)INT_MAX);
}

int elf_symtab_add_from_fd(struct elf_symtab *t, int fd)
{
	_cleanup_(elf_endp) Elf *elf = NULL;
	int r;

	if (!t)
		return -EINVAL;
	r = elf_open_fd(fd, &elf);
	if (r < 0)
		return r;
	return merge_elf(t, elf);
}

int elf_symtab_add_from_memory(struct elf_symtab *t, const void *image, size_t size)
{
	_cleanup_(elf_endp) Elf *elf = NULL;

	if (!t || (!image && size > 0))
		return -EINVAL;
	if (elf_library_init() < 0)
		return -ENOTSUP;

	if (size < SELFMAG || memcmp(image, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;

	/* elf_memory() takes a writable image, but only reads it when the
	 * Elf is only read: data of another byte order or alignment is
	 * converted into libelf's own buffers. */
	elf = elf_memory((char *)image, size);
	if (!elf)
		return -ENOEXEC;
	return merge_elf(t, elf);
}

bool elf_symtab_has_symtab(const struct elf_symtab *t)
{
	return t && t->has_symtab;
}

int elf_symtab_offset_to_vaddr(const struct elf_symtab *t, uint64_t file_offset,
			       uint64_t *ret_vaddr)
{
	const struct elf_segment *found = NULL;

	if (!t)
		return -ENOENT;

	/* Segments may share a page in the file; code addresses are what
	 * gets symbolized, so an executable segment wins a tie. */
	for (size_t i = 0; i < t->n_segs; i++) {
		const struct elf_segment *s = &t->segs[i];

		if (file_offset < s->offset || file_offset - s->offset >= s->filesz)
			continue;
		if (!found || (s->exec && !found->exec))
			found = s;
	}
	if (!found)
		return -ENOENT;

	*ret_vaddr = found->vaddr + (file_offset - found->offset);
	return 0;
}

static uint64_t range_start(const void *range)
{
	return ((const struct elf_range *)range)->start;
}

const char *elf_symtab_lookup(const struct elf_symtab *t, uint64_t vaddr,
			      uint64_t *ret_offset)
{
	const struct elf_range *r;
	size_t lo;

	if (!t)
		return NULL;

	lo = search_upper_bound(t->ranges, t->n_ranges, sizeof(*t->ranges), vaddr, range_start);
	if (lo == 0)
		return NULL;
	r = &t->ranges[lo - 1];
	if (vaddr >= r->end)
		return NULL;

	if (ret_offset)
		*ret_offset = vaddr - r->sym_addr;
	return t->names + r->name;
}

size_t elf_symtab_count(const struct elf_symtab *t)
{
	return t ? t->n_syms : 0;
}

const char *elf_symtab_build_id(const struct elf_symtab *t)
{
	return t && t->build_id ? t->build_id : "";
}

void elf_symtab_set_memory_limit(struct elf_symtab *t, size_t bytes)
{
	t->memory_limit = bytes;
}

size_t elf_symtab_memory(const struct elf_symtab *t)
{
	if (!t)
		return 0;
	return sizeof(*t) + t->n_ranges * sizeof(*t->ranges) + t->names_size +
	       t->n_segs * sizeof(*t->segs) + (t->build_id ? strlen(t->build_id) + 1 : 0);
}
