/* SPDX-License-Identifier: MIT */
/*
 * test-unwind-table.c - unit tests for daemon/unwind_table.c.
 *
 * Two independent oracles.  First, binutils: `readelf --debug-dump=
 * frames-interp` prints the interpreted CFI table of a file (LOC, CFA, the
 * saved registers); for fixtures built at run time with the system compiler
 * (-O2 without frame pointers, -O0 with, a shared library with PLT calls,
 * .debug_frame only, compressed, in a separate debug-info file), for libc
 * and for the vDSO, every row readelf prints is checked at its first byte,
 * its second and its last against unwind_table_find(), and so is the END
 * after every FDE that no other FDE continues.  Second, real code: the
 * test captures its own rip/rsp/rbp, walks its own stack with the rows the
 * way the BPF program does (tables built from the files in /proc/self/maps,
 * the load bias from the maps and the program headers), and compares the
 * return addresses with glibc's backtrace(), which uses libgcc's DWARF
 * unwinder; once from plain code and once from a signal handler, through
 * libc's signal trampoline.  Under -fno-omit-frame-pointer (the sanitized
 * build) that walk goes through RBP rows, otherwise through RSP rows.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <ftw.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stddef.h>
#include <ucontext.h>
#include <unistd.h>

#include "fixture.h"
#include "perfd/macro.h"
#include "unwind/unwind_table.h"

extern char **environ;

/* --- fixtures ------------------------------------------------------------ */

static const char fixture_source[] =
	"#include <alloca.h>\n"
	"#include <stdio.h>\n"
	"#include <string.h>\n"
	"\n"
	/* Code without any CFI: a gap between FDEs by construction. */
	"__asm__(\".pushsection .text\\n\"\n"
	"        \".p2align 4\\n\"\n"
	"        \".globl fx_nocfi\\n.type fx_nocfi, @function\\nfx_nocfi:\\n\"\n"
	"        \"nop\\nnop\\nnop\\nret\\n\"\n"
	"        \".size fx_nocfi, .-fx_nocfi\\n\"\n"
	"        \".popsection\\n\");\n"
	"void fx_nocfi(void);\n"
	"\n"
	"__attribute__((noinline)) int fx_leaf(int x) { return x * 7 + 3; }\n"
	/* keeps values in callee-saved registers across calls */
	"__attribute__((noinline)) long fx_saves(long a, long b, long c)\n"
	"{\n"
	"	long r = 0;\n"
	"	for (long i = 0; i < a; i++)\n"
	"		r += fx_leaf((int)(i ^ b)) * c;\n"
	"	return r + fx_leaf((int)r);\n"
	"}\n"
	/* alloca needs a frame pointer even with -fomit-frame-pointer */
	"__attribute__((noinline)) int fx_alloca(int n)\n"
	"{\n"
	"	char *p = alloca(n);\n"
	"	memset(p, 1, n);\n"
	"	return fx_leaf(p[n - 1]);\n"
	"}\n"
	/* a CFA offset beyond int16 at -O2 */
	"__attribute__((noinline)) int fx_bigframe(int n)\n"
	"{\n"
	"	volatile char buf[40000];\n"
	"	buf[n] = 1;\n"
	"	return buf[n / 2] + fx_leaf(n);\n"
	"}\n"
	/* calls through the PLT (strlen, puts; fx_leaf too in the library) */
	"__attribute__((noinline)) int fx_calls(const char *s)\n"
	"{\n"
	"	fx_nocfi();\n"
	"	return (int)strlen(s) + puts(s) + fx_alloca(16) + fx_leaf(1);\n"
	"}\n"
	"\n"
	"#ifndef FX_LIB\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	return fx_saves(argc, 3, 5) + fx_calls(argv[0]) + fx_bigframe(argc) > 0 ? 0 : 1;\n"
	"}\n"
	"#endif\n";

/* No CFI at all: no C runtime, no unwind tables. */
static const char nocfi_source[] =
	"void fx_start(void) { for (;;) __asm__ volatile(\"pause\"); }\n";

/* A function 5 GiB above the rest of the code.  .eh_frame cannot reach it
 * (its FDEs hold 32-bit pc-relative addresses), .debug_frame can. */
static const char far_source[] =
	"__attribute__((noinline, section(\"farcode\"))) int far_fn(int x) { return x * 3; }\n"
	"int main(int argc, char **argv) { return far_fn(argc) == 3 ? 0 : 1; }\n";

enum fixture {
	FX_O2,
	FX_O0,
	FX_SHARED,
	FX_DEBUG_FRAME,
	FX_DEBUG_FRAME_ZLIB,
	FX_NOCFI,
	FX_STRIPPED,
	FX_FAR,
	FX_DEBUG_ONLY,
	_FX_MAX,
};

static const char *const fixture_file[_FX_MAX] = {
	[FX_O2] = "fx-o2",
	[FX_O0] = "fx-o0",
	[FX_SHARED] = "libfx.so",
	[FX_DEBUG_FRAME] = "fx-debug-frame",
	[FX_DEBUG_FRAME_ZLIB] = "fx-debug-frame-zlib",
	[FX_NOCFI] = "fx-nocfi",
	[FX_STRIPPED] = "fx-stripped",
	[FX_FAR] = "fx-far",
	[FX_DEBUG_ONLY] = "fx.debug",
};

FIXTURE_SUITE(unwind_table, 240);

/* The tests read ELF files with libelf themselves too. */
__attribute__((constructor)) static void init_libelf(void)
{
	(void)elf_version(EV_CURRENT);
}

/* Builds one fixture in the work directory; returns its path in path. */
static const char *build(enum fixture fx, char *path, size_t size)
{
	write_file("fx.c", fixture_source, strlen(fixture_source));
	path_in_workdir(path, size, fixture_file[fx]);

	switch (fx) {
	case FX_O2:
		run((char *const[]){ "cc", "-O2", "-fomit-frame-pointer", "-o", "fx-o2", "fx.c",
				     NULL });
		break;
	case FX_O0:
		run((char *const[]){ "cc", "-O0", "-fno-omit-frame-pointer", "-o", "fx-o0", "fx.c",
				     NULL });
		break;
	case FX_SHARED:
		run((char *const[]){ "cc", "-O2", "-fPIC", "-shared", "-DFX_LIB", "-o", "libfx.so",
				     "fx.c", NULL });
		break;
	case FX_DEBUG_FRAME:
		run((char *const[]){ "cc", "-O2", "-g", "-fno-asynchronous-unwind-tables", "-o",
				     "fx-debug-frame", "fx.c", NULL });
		break;
	case FX_DEBUG_FRAME_ZLIB:
		run((char *const[]){ "cc", "-O2", "-g", "-gz=zlib", "-fno-asynchronous-unwind-tables",
				     "-o", "fx-debug-frame-zlib", "fx.c", NULL });
		break;
	case FX_NOCFI:
		write_file("nocfi.c", nocfi_source, strlen(nocfi_source));
		run((char *const[]){ "cc", "-O2", "-nostdlib", "-static",
				     "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
				     "-Wl,-e,fx_start", "-o", "fx-nocfi", "nocfi.c", NULL });
		break;
	case FX_STRIPPED:
		run((char *const[]){ "cc", "-O2", "-o", "fx-o2", "fx.c", NULL });
		run((char *const[]){ "strip", "--remove-section=.eh_frame",
				     "--remove-section=.eh_frame_hdr", "-o", "fx-stripped", "fx-o2",
				     NULL });
		break;
	case FX_FAR:
		write_file("far.c", far_source, strlen(far_source));
		run((char *const[]){ "cc", "-O2", "-g", "-fno-asynchronous-unwind-tables",
				     "-mcmodel=large", "-no-pie", "-fno-pie",
				     "-Wl,--section-start=farcode=0x140000000", "-o", "fx-far",
				     "far.c", NULL });
		break;
	case FX_DEBUG_ONLY:
		/* a separate debug-info file: .eh_frame is NOBITS there */
		run((char *const[]){ "cc", "-O2", "-g", "-fno-asynchronous-unwind-tables", "-o",
				     "fx-debug-frame", "fx.c", NULL });
		run((char *const[]){ "objcopy", "--only-keep-debug", "fx-debug-frame", "fx.debug",
				     NULL });
		break;
	default:
		cr_assert_fail("bad fixture");
	}
	return path;
}

/* --- building tables ------------------------------------------------------- */

static int build_path(const char *path, struct unwind_table **ret)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int r;

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	r = unwind_table_build(fd, NULL, ret);
	(void)close(fd);
	return r;
}

static const char *type_name(unsigned type)
{
	static const char *const names[] = { "END", "RSP", "RBP", "PLT", "SIGNAL", "UNSUPPORTED",
					     "NO_CFI" };

	return type < ELEMENTSOF(names) ? names[type] : "?";
}

/* What every table must satisfy, whatever the file. */
static void check_invariants(const char *what, const struct unwind_table *t)
{
	size_t unsupported = 0;

	cr_assert_gt(t->n_rows, 0, "%s: no rows", what);
	cr_expect_gt(t->fdes, 0, "%s: no FDEs counted", what);
	cr_expect_gt(t->cfi_bytes, 0, "%s: no CFI bytes counted", what);
	for (size_t i = 0; i < t->n_rows; i++) {
		const struct perfd_unwind_row *r = &t->rows[i], *p = i ? &t->rows[i - 1] : NULL;

		cr_assert_leq(r->cfa_type, PERFD_CFA_NO_CFI, "%s: row %zu type %u", what, i,
			      r->cfa_type);
		unsupported += r->cfa_type == PERFD_CFA_UNSUPPORTED;
		if (!p)
			continue;
		cr_assert_gt(r->pc, p->pc, "%s: rows %zu and %zu out of order", what, i - 1, i);
		cr_assert(r->cfa_type != p->cfa_type || r->cfa_offset != p->cfa_offset ||
				  r->rbp_offset8 != p->rbp_offset8,
			  "%s: rows %zu and %zu (pc %#x, %#x) not merged", what, i - 1, i, p->pc, r->pc);
	}
	cr_expect_eq(t->rows[t->n_rows - 1].cfa_type, PERFD_CFA_NO_CFI, "%s: last row is %s", what,
		     type_name(t->rows[t->n_rows - 1].cfa_type));
	cr_expect_eq(unsupported, t->rows_unsupported, "%s: %zu unsupported rows, reported %zu",
		     what, unsupported, t->rows_unsupported);
}

static struct unwind_table *build_ok(const char *path)
{
	struct unwind_table *t = NULL;
	int r = build_path(path, &t);

	cr_assert_eq(r, 0, "unwind_table_build(%s): %s", path, strerror(-r));
	cr_assert_not_null(t);
	check_invariants(path, t);
	return t;
}

static void expect_row(const struct unwind_table *t, uint64_t vaddr, unsigned type,
		       int cfa_offset, int rbp_offset8, const char *what)
{
	const struct perfd_unwind_row *r = unwind_table_find(t, vaddr);

	cr_assert_not_null(r, "%s: no row at %#" PRIx64, what, vaddr);
	cr_expect(r->cfa_type == type && r->cfa_offset == cfa_offset &&
			  r->rbp_offset8 == rbp_offset8,
		  "%s: at %#" PRIx64 " got %s %d rbp %d, want %s %d rbp %d", what, vaddr,
		  type_name(r->cfa_type), r->cfa_offset, r->rbp_offset8, type_name(type),
		  cfa_offset, rbp_offset8);
}

static unsigned find_type(const struct unwind_table *t, uint64_t vaddr)
{
	const struct perfd_unwind_row *r = unwind_table_find(t, vaddr);

	cr_assert_not_null(r, "no row at %#" PRIx64, vaddr);
	return r->cfa_type;
}

/* --- ELF helpers (libelf; the code under test is not its own oracle) ----- */

struct elf_file {
	int fd;
	Elf *elf;
};

static void elf_file_open(const char *path, struct elf_file *f)
{
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(f->fd, 0, "%s: %s", path, strerror(errno));
	f->elf = elf_begin(f->fd, ELF_C_READ, NULL);
	cr_assert_not_null(f->elf, "%s: %s", path, elf_errmsg(-1));
}

static void elf_file_close(struct elf_file *f)
{
	(void)elf_end(f->elf);
	(void)close(f->fd);
}

/* The address of the symbol name in .symtab or .dynsym; asserts it exists. */
static uint64_t symbol_vaddr(const char *path, const char *name)
{
	struct elf_file f;
	uint64_t found = 0;

	elf_file_open(path, &f);
	for (Elf_Scn *scn = elf_nextscn(f.elf, NULL); scn && !found; scn = elf_nextscn(f.elf, scn)) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    sh.sh_entsize == 0 || !(data = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 1; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *n;

			if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			n = elf_strptr(f.elf, sh.sh_link, sym.st_name);
			if (n && strcmp(n, name) == 0) {
				found = sym.st_value;
				break;
			}
		}
	}
	elf_file_close(&f);
	cr_assert_neq(found, 0, "%s: no symbol %s", path, name);
	return found;
}

/* [start, end) of the section name, or false. */
static bool section_range(const char *path, const char *name, uint64_t *start, uint64_t *end)
{
	struct elf_file f;
	size_t shstrndx;
	bool found = false;

	elf_file_open(path, &f);
	cr_assert_eq(elf_getshdrstrndx(f.elf, &shstrndx), 0);
	for (Elf_Scn *scn = elf_nextscn(f.elf, NULL); scn; scn = elf_nextscn(f.elf, scn)) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh))
			continue;
		n = elf_strptr(f.elf, shstrndx, sh.sh_name);
		if (n && strcmp(n, name) == 0) {
			*start = sh.sh_addr;
			*end = sh.sh_addr + sh.sh_size;
			found = true;
			break;
		}
	}
	elf_file_close(&f);
	return found;
}

/* --- the readelf oracle ----------------------------------------------------- */

struct oracle_row {
	uint64_t loc;
	char cfa[32], rbp[32], ra[32];
};

struct oracle_fde {
	uint64_t start, end;
	bool debug_frame, signal;
	size_t first, n;
};

struct oracle {
	struct oracle_fde *fdes;
	size_t n_fdes;
	struct oracle_row *rows;
	size_t n_rows;
	/* the code .eh_frame covers, sorted, for the .debug_frame rows */
	struct oracle_fde *eh;
	size_t n_eh;
	/* .plt and the N of its CFA expression (rip & 15 >= N), or -1 */
	uint64_t plt_start, plt_end;
	int plt_lit;
};

static void oracle_free(struct oracle *o)
{
	free(o->fdes);
	free(o->rows);
	free(o->eh);
}

static bool is_hex_prefix(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Splits a readelf table line into columns; "r10 (r10)" is one column. */
static size_t split_columns(char *line, char **cols, size_t max)
{
	size_t n = 0;

	for (char *save = NULL, *tok = strtok_r(line, " \t\n", &save); tok;
	     tok = strtok_r(NULL, " \t\n", &save)) {
		if (tok[0] == '(' && n > 0)
			continue;
		if (n < max)
			cols[n++] = tok;
	}
	return n;
}

static void copy_column(char *dst, size_t size, char **cols, size_t n, int index)
{
	snprintf(dst, size, "%s", index >= 0 && (size_t)index + 1 < n ? cols[index + 1] : "");
}

static int fde_start_cmp(const void *x, const void *y)
{
	const struct oracle_fde *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

static struct oracle_row *oracle_new_row(struct oracle *o, size_t *cap)
{
	if (o->n_rows == *cap) {
		*cap = *cap ? 2 * *cap : 256;
		o->rows = reallocarray(o->rows, *cap, sizeof(*o->rows));
		cr_assert_not_null(o->rows);
	}
	return &o->rows[o->n_rows++];
}

struct oracle_cie {
	uint64_t offset;
	bool debug_frame, signal, has_initial;
	struct oracle_row initial; /* the CIE's own row */
};

/* readelf prints no row for an FDE without instructions: the CIE's
 * initial rules then hold for the whole FDE. */
static void oracle_finish_fde(struct oracle *o, const struct oracle_cie *cie, size_t *cap)
{
	struct oracle_fde *f = o->n_fdes ? &o->fdes[o->n_fdes - 1] : NULL;
	struct oracle_row *r;

	if (!f || f->n > 0 || !cie || !cie->has_initial)
		return;
	r = oracle_new_row(o, cap);
	*r = cie->initial;
	r->loc = f->start;
	f->n = 1;
}

/* Runs readelf on path and keeps every FDE row. */
static void oracle_load(const char *path, struct oracle *o)
{
	struct oracle_cie cies[256], *cie = NULL, *fde_cie = NULL;
	size_t n_cies = 0, cap_fdes = 0, cap_rows = 0;
	int cfa_col = -1, rbp_col = -1, ra_col = -1;
	bool debug_frame = false, in_fde = false;
	char cmd[PATH_MAX + 64], line[4096];
	int status;
	FILE *p;

	*o = (struct oracle){ .plt_lit = -1 };
	snprintf(cmd, sizeof(cmd), "readelf -wN --debug-dump=frames-interp '%s' 2>/dev/null", path);
	p = popen(cmd, "re");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *s, *cols[64];
		size_t n;

		if (strncmp(line, "Contents of the ", 16) == 0) {
			if (in_fde)
				oracle_finish_fde(o, fde_cie, &cap_rows);
			debug_frame = strstr(line, ".debug_frame") != NULL;
			in_fde = false;
			cie = NULL;
		} else if ((s = strstr(line, " CIE \""))) {
			char *aug = s + 6, *q = strchr(aug, '"');

			if (in_fde)
				oracle_finish_fde(o, fde_cie, &cap_rows);
			cr_assert_lt(n_cies, ELEMENTSOF(cies));
			cie = &cies[n_cies++];
			*cie = (struct oracle_cie){
				.offset = strtoull(line, NULL, 16),
				.debug_frame = debug_frame,
				.signal = q && memchr(aug, 'S', (size_t)(q - aug)),
			};
			in_fde = false;
		} else if ((s = strstr(line, " FDE cie="))) {
			uint64_t cie_offset = strtoull(s + 9, NULL, 16), start, end;
			struct oracle_fde *f;

			if (in_fde)
				oracle_finish_fde(o, fde_cie, &cap_rows);
			s = strstr(line, "pc=");
			cr_assert(s && sscanf(s, "pc=%" SCNx64 "..%" SCNx64, &start, &end) == 2,
				  "readelf: %s", line);
			if (o->n_fdes == cap_fdes) {
				cap_fdes = cap_fdes ? 2 * cap_fdes : 64;
				o->fdes = reallocarray(o->fdes, cap_fdes, sizeof(*o->fdes));
				cr_assert_not_null(o->fdes);
			}
			f = &o->fdes[o->n_fdes++];
			*f = (struct oracle_fde){ .start = start, .end = end,
						  .debug_frame = debug_frame, .first = o->n_rows };
			fde_cie = NULL;
			for (size_t i = 0; i < n_cies; i++)
				if (cies[i].offset == cie_offset && cies[i].debug_frame == debug_frame)
					fde_cie = &cies[i];
			f->signal = fde_cie && fde_cie->signal;
			in_fde = true;
			cie = NULL;
		} else if ((s = strstr(line, "   LOC "))) {
			cfa_col = rbp_col = ra_col = -1;
			n = split_columns(s, cols, ELEMENTSOF(cols));
			for (size_t i = 1; i < n; i++) {
				if (strcmp(cols[i], "CFA") == 0)
					cfa_col = (int)i - 1;
				else if (strcmp(cols[i], "rbp") == 0)
					rbp_col = (int)i - 1;
				else if (strcmp(cols[i], "ra") == 0)
					ra_col = (int)i - 1;
			}
		} else if ((in_fde || (cie && !cie->has_initial)) && is_hex_prefix(line, 16) &&
			   line[16] == ' ') {
			struct oracle_row *r;

			if (in_fde) {
				r = oracle_new_row(o, &cap_rows);
				o->fdes[o->n_fdes - 1].n++;
			} else {
				r = &cie->initial;
				cie->has_initial = true;
			}
			n = split_columns(line, cols, ELEMENTSOF(cols));
			r->loc = strtoull(cols[0], NULL, 16);
			copy_column(r->cfa, sizeof(r->cfa), cols, n, cfa_col);
			copy_column(r->rbp, sizeof(r->rbp), cols, n, rbp_col);
			copy_column(r->ra, sizeof(r->ra), cols, n, ra_col);
		}
	}
	if (in_fde)
		oracle_finish_fde(o, fde_cie, &cap_rows);
	/* readelf exits 1 after complaining about other parts of a file (a
	 * debug-info file has no program interpreter); the FDEs must be there. */
	status = pclose(p);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) <= 1, "readelf %s failed", path);
	cr_assert_gt(o->n_fdes, 0, "readelf found no FDE in %s", path);

	o->eh = calloc(o->n_fdes, sizeof(*o->eh));
	cr_assert_not_null(o->eh);
	for (size_t i = 0; i < o->n_fdes; i++)
		if (!o->fdes[i].debug_frame)
			o->eh[o->n_eh++] = o->fdes[i];
	qsort(o->eh, o->n_eh, sizeof(*o->eh), fde_start_cmp);

	/* binutils' .plt expression, as readelf prints it raw */
	if (section_range(path, ".plt", &o->plt_start, &o->plt_end)) {
		snprintf(cmd, sizeof(cmd), "readelf -wN --debug-dump=frames '%s' 2>/dev/null", path);
		p = popen(cmd, "re");
		cr_assert_not_null(p);
		while (fgets(line, sizeof(line), p)) {
			static const char shape[] = "DW_OP_breg7 (rsp): 8; DW_OP_breg16 (rip): 0; "
						    "DW_OP_lit15; DW_OP_and; DW_OP_lit";
			char *s = strstr(line, shape);

			if (s)
				o->plt_lit = atoi(s + strlen(shape));
		}
		status = pclose(p);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) <= 1);
	}
}

/* Whether .eh_frame describes vaddr (then .debug_frame does not count). */
static bool eh_covers(const struct oracle *o, uint64_t vaddr)
{
	size_t lo = 0, hi = o->n_eh;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->eh[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && vaddr < o->eh[lo - 1].end;
}

static bool any_fde_covers(const struct oracle *o, uint64_t vaddr)
{
	if (eh_covers(o, vaddr))
		return true;
	for (size_t i = 0; i < o->n_fdes; i++)
		if (o->fdes[i].debug_frame && vaddr >= o->fdes[i].start && vaddr < o->fdes[i].end)
			return true;
	return false;
}

/* Parses "rsp+16" / "rbp-8" style CFA columns. */
static bool parse_reg_offset(const char *s, const char *reg, long *ret)
{
	char *end;

	if (strncmp(s, reg, 3) != 0 || (s[3] != '+' && s[3] != '-'))
		return false;
	*ret = strtol(s + 3, &end, 10);
	return *end == '\0';
}

/* The row unwind.h wants for one readelf row at vaddr. */
static struct perfd_unwind_row expected_row(const struct oracle *o, const struct oracle_fde *f,
					    const struct oracle_row *r, uint64_t vaddr)
{
	struct perfd_unwind_row want = { .cfa_type = PERFD_CFA_UNSUPPORTED };
	long off;

	if (f->signal) {
		want.cfa_type = PERFD_CFA_SIGNAL;
		return want;
	}
	if (strcmp(r->ra, "u") == 0) {
		want.cfa_type = PERFD_CFA_END;
		return want;
	}
	if (strcmp(r->ra, "c-8") != 0)
		return want;
	if (parse_reg_offset(r->cfa, "rsp", &off) || parse_reg_offset(r->cfa, "rbp", &off)) {
		if (off < INT16_MIN || off > INT16_MAX)
			return want;
		want.cfa_type = r->cfa[1] == 's' ? PERFD_CFA_RSP : PERFD_CFA_RBP;
		want.cfa_offset = (int16_t)off;
	} else if (strcmp(r->cfa, "exp") == 0 && vaddr >= o->plt_start && vaddr < o->plt_end) {
		cr_assert_geq(o->plt_lit, 0, "no PLT expression found by readelf");
		want.cfa_type = PERFD_CFA_PLT;
		want.cfa_offset = (int16_t)o->plt_lit;
	} else {
		return want;
	}

	/* readelf: "u" (not mentioned yet) and "s" (same value) both mean the
	 * caller's rbp is still in rbp; "c-16" means saved at CFA - 16. */
	if (r->rbp[0] == '\0' || strcmp(r->rbp, "u") == 0 || strcmp(r->rbp, "s") == 0) {
		want.rbp_offset8 = 0;
	} else if (r->rbp[0] == 'c' && (off = strtol(r->rbp + 1, NULL, 10)) != 0 && off % 8 == 0 &&
		   off / 8 >= -127 && off / 8 <= 127) {
		want.rbp_offset8 = (int8_t)(off / 8);
	} else {
		want.rbp_offset8 = PERFD_RBP_LOST;
	}
	return want;
}

/* Checks every row readelf prints at its first, second and last byte,
 * and an END row at the end of every FDE that no other FDE continues.
 * Returns the number of addresses checked. */
static size_t check_against_readelf(const char *what, const struct unwind_table *t,
				    const struct oracle *o)
{
	size_t checked = 0;

	for (size_t i = 0; i < o->n_fdes; i++) {
		const struct oracle_fde *f = &o->fdes[i];

		if (f->start >= f->end || f->start < t->base_vaddr)
			continue;
		for (size_t j = 0; j < f->n; j++) {
			const struct oracle_row *r = &o->rows[f->first + j];
			uint64_t next = j + 1 < f->n ? o->rows[f->first + j + 1].loc : f->end;
			uint64_t probes[3] = { r->loc, r->loc + 1, next - 1 };

			for (size_t k = 0; k < ELEMENTSOF(probes); k++) {
				uint64_t a = probes[k];
				const struct perfd_unwind_row *got;
				struct perfd_unwind_row want;

				if (a < r->loc || a >= next || (f->debug_frame && eh_covers(o, a)))
					continue;
				want = expected_row(o, f, r, a);
				got = unwind_table_find(t, a);
				checked++;
				cr_assert_not_null(got, "%s: no row at %#" PRIx64, what, a);
				cr_expect(got->cfa_type == want.cfa_type &&
						  got->cfa_offset == want.cfa_offset &&
						  got->rbp_offset8 == want.rbp_offset8,
					  "%s: at %#" PRIx64 " (%s FDE %#" PRIx64 "..%#" PRIx64
					  ": CFA %s rbp %s ra %s) got %s %d rbp %d, want %s %d rbp %d",
					  what, a, f->debug_frame ? ".debug_frame" : ".eh_frame",
					  f->start, f->end, r->cfa, r->rbp[0] ? r->rbp : "-", r->ra,
					  type_name(got->cfa_type), got->cfa_offset, got->rbp_offset8,
					  type_name(want.cfa_type), want.cfa_offset, want.rbp_offset8);
			}
		}
		if (!any_fde_covers(o, f->end)) {
			checked++;
			cr_expect_eq(find_type(t, f->end), PERFD_CFA_NO_CFI,
				     "%s: after the FDE %#" PRIx64 "..%#" PRIx64 ": %s, want NO_CFI",
				     what, f->start, f->end, type_name(find_type(t, f->end)));
		}
	}
	return checked;
}

static void check_file_against_readelf(const char *path, struct unwind_table **ret)
{
	struct unwind_table *t = build_ok(path);
	struct oracle o;
	size_t checked;

	oracle_load(path, &o);
	checked = check_against_readelf(path, t, &o);
	cr_expect_gt(checked, 2 * o.n_fdes, "%s: only %zu addresses checked", path, checked);
	oracle_free(&o);
	if (ret)
		*ret = t;
	else
		unwind_table_free(t);
}

/* --- readelf-checked tests ---------------------------------------------- */

Test(unwind_table, o2_without_frame_pointer_matches_readelf)
{
	char path[PATH_MAX];
	struct unwind_table *t;
	uint64_t bigframe, alloca_fn;
	bool unsupported = false, rbp_based = false;

	check_file_against_readelf(build(FX_O2, path, sizeof(path)), &t);
	/* fx_bigframe's CFA is rsp + 40016 after its prologue */
	bigframe = symbol_vaddr(path, "fx_bigframe");
	for (uint64_t a = bigframe; a < bigframe + 64; a++)
		unsupported |= find_type(t, a) == PERFD_CFA_UNSUPPORTED;
	cr_expect(unsupported, "no UNSUPPORTED row in fx_bigframe");
	cr_expect_geq(t->rows_unsupported, 1);
	/* alloca needs rbp even without frame pointers */
	alloca_fn = symbol_vaddr(path, "fx_alloca");
	for (uint64_t a = alloca_fn; a < alloca_fn + 64; a++)
		rbp_based |= find_type(t, a) == PERFD_CFA_RBP;
	cr_expect(rbp_based, "no RBP row in fx_alloca");
	expect_row(t, symbol_vaddr(path, "fx_leaf"), PERFD_CFA_RSP, 8, 0, "fx_leaf");
	unwind_table_free(t);
}

Test(unwind_table, o0_with_frame_pointer_matches_readelf)
{
	char path[PATH_MAX];
	struct unwind_table *t;
	uint64_t f;

	check_file_against_readelf(build(FX_O0, path, sizeof(path)), &t);
	/* push %rbp; mov %rsp,%rbp: then CFA = rbp + 16, rbp saved at CFA - 16 */
	f = symbol_vaddr(path, "fx_saves");
	expect_row(t, f, PERFD_CFA_RSP, 8, 0, "fx_saves entry");
	expect_row(t, f + 1, PERFD_CFA_RSP, 16, -2, "fx_saves after push %rbp");
	expect_row(t, f + 4, PERFD_CFA_RBP, 16, -2, "fx_saves body");
	unwind_table_free(t);
}

/* Whether vaddr is in t's frame-pointer code (unwind_table_fp_range()). */
static bool in_fp_range(const struct unwind_table *t, uint64_t vaddr)
{
	return vaddr >= t->base_vaddr + t->fp_first && vaddr < t->base_vaddr + t->fp_end;
}

/* Code built with frame pointers is walked by them: every function of the
 * fixture that calls another, from main on, is in the one range.  Built
 * without, a function that keeps values in callee-saved registers across
 * its calls (fx_saves: push %rbx, and a caller's rbp is not its own) or
 * moves rsp (fx_bigframe) would be walked wrong by frame pointer, so the
 * range leaves them out. */
Test(unwind_table, frame_pointer_code_is_proven_from_the_rows)
{
	static const char *const callers[] = { "fx_saves", "fx_alloca", "fx_bigframe", "fx_calls",
					       "main" };
	char path[PATH_MAX];
	struct unwind_table *t = build_ok(build(FX_O0, path, sizeof(path)));

	cr_assert_lt(t->fp_first, t->fp_end, "-O0 -fno-omit-frame-pointer: no frame-pointer code");
	for (size_t i = 0; i < ELEMENTSOF(callers); i++) {
		uint64_t f = symbol_vaddr(path, callers[i]);

		/* a return address is after the prologue: 8 bytes in */
		cr_expect(in_fp_range(t, f + 8), "-O0: %s (%#" PRIx64 ") is not in [%#" PRIx64
			  ", %#" PRIx64 ")", callers[i], f, t->base_vaddr + t->fp_first,
			  t->base_vaddr + t->fp_end);
	}
	unwind_table_free(t);

	t = build_ok(build(FX_O2, path, sizeof(path)));
	cr_expect(!in_fp_range(t, symbol_vaddr(path, "fx_saves") + 16),
		  "-O2: fx_saves is frame-pointer code");
	cr_expect(!in_fp_range(t, symbol_vaddr(path, "fx_bigframe") + 16),
		  "-O2: fx_bigframe is frame-pointer code");
	unwind_table_free(t);
}

/* The rules one at a time, on rows made up for it. */
Test(unwind_table, frame_pointer_range_takes_the_longest_safe_run)
{
#define ROW(pc_, type, off, rbp) { .pc = (pc_), .cfa_type = (type), .cfa_offset = (off), .rbp_offset8 = (rbp) }
	const struct perfd_unwind_row rows[] = {
		ROW(0x000, PERFD_CFA_RSP, 8, 0),    /* f: entry */
		ROW(0x001, PERFD_CFA_RSP, 16, -2),  /* push %rbp */
		ROW(0x004, PERFD_CFA_RBP, 16, -2),  /* body */
		ROW(0x040, PERFD_CFA_RSP, 8, -2),   /* ret */
		ROW(0x041, PERFD_CFA_NO_CFI, 0, 0), /* padding */
		ROW(0x050, PERFD_CFA_RSP, 16, 0),   /* g: push %rbx: ends the run */
		ROW(0x060, PERFD_CFA_RSP, 8, 0),    /* h: a leaf, or one that calls
						     * misaligned: ends the run */
		ROW(0x070, PERFD_CFA_RSP, 16, -2),  /* i: push %rbp, kept: ends the run */
		ROW(0x078, PERFD_CFA_RSP, 8, 0),
		ROW(0x079, PERFD_CFA_RSP, 16, -2),  /* push %rbp before a standard frame */
		ROW(0x07c, PERFD_CFA_RBP, 16, -2),  /* j */
		ROW(0x100, PERFD_CFA_NO_CFI, 0, 0), /* 16 bytes without CFI: ends the run */
		ROW(0x110, PERFD_CFA_RBP, 16, -2),  /* k */
		ROW(0x200, PERFD_CFA_NO_CFI, 0, 0), /* after the last FDE */
	};
#undef ROW
	uint32_t first, end;

	unwind_table_fp_range(rows, ELEMENTSOF(rows), &first, &end);
	cr_expect_eq(first, 0x110);
	cr_expect_eq(end, 0x200);
	/* without k: j's run, closed by the last row, beats f's (0x50 bytes) */
	unwind_table_fp_range(rows, 12, &first, &end);
	cr_expect_eq(first, 0x78);
	cr_expect_eq(end, 0x100);
	unwind_table_fp_range(rows, 5, &first, &end);
	cr_expect_eq(first, 0);
	cr_expect_eq(end, 0x41);
	unwind_table_fp_range(rows, 1, &first, &end);
	cr_expect_eq(end - first, 0);
	unwind_table_fp_range(rows, 0, &first, &end);
	cr_expect_eq(end - first, 0);
}

Test(unwind_table, shared_library_plt_matches_readelf)
{
	char path[PATH_MAX];
	struct unwind_table *t;
	uint64_t plt_start, plt_end;
	struct oracle o;

	build(FX_SHARED, path, sizeof(path));
	check_file_against_readelf(path, &t);
	oracle_load(path, &o);
	cr_assert(section_range(path, ".plt", &plt_start, &plt_end), "no .plt");
	cr_assert_gt(plt_end - plt_start, 32, "no PLT entry");
	cr_assert_geq(o.plt_lit, 1, "no PLT expression");
	/* each 16-byte entry after PLT0, at every byte */
	for (uint64_t a = plt_start + 16; a < plt_end; a++)
		expect_row(t, a, PERFD_CFA_PLT, o.plt_lit, 0, "PLT entry");
	/* PLT0 pushes once, then jumps: plain rsp rules */
	expect_row(t, plt_start, PERFD_CFA_RSP, 16, 0, "PLT0");
	oracle_free(&o);
	unwind_table_free(t);
}

Test(unwind_table, debug_frame_fills_code_without_eh_frame)
{
	char path[PATH_MAX], zpath[PATH_MAX];
	struct unwind_table *t, *z;
	uint64_t s, e;

	build(FX_DEBUG_FRAME, path, sizeof(path));
	cr_assert(section_range(path, ".debug_frame", &s, &e), "fixture has no .debug_frame");
	check_file_against_readelf(path, &t);
	/* only .debug_frame describes the fixture's own functions */
	expect_row(t, symbol_vaddr(path, "fx_leaf"), PERFD_CFA_RSP, 8, 0, "fx_leaf");
	expect_row(t, symbol_vaddr(path, "fx_calls"), PERFD_CFA_RSP, 8, 0, "fx_calls");
	/* while crt1.o's .eh_frame still describes _start */
	expect_row(t, symbol_vaddr(path, "_start"), PERFD_CFA_END, 0, 0, "_start");

	/* compressed (SHF_COMPRESSED) .debug_frame: the same code, the same rows */
	build(FX_DEBUG_FRAME_ZLIB, zpath, sizeof(zpath));
	check_file_against_readelf(zpath, &z);
	cr_assert_eq(z->n_rows, t->n_rows);
	cr_expect_eq(memcmp(z->rows, t->rows, t->n_rows * sizeof(*t->rows)), 0);
	cr_expect_eq(z->fdes, t->fdes);
	unwind_table_free(z);
	unwind_table_free(t);
}

Test(unwind_table, debug_info_file_has_only_debug_frame)
{
	char path[PATH_MAX];
	struct unwind_table *t;

	check_file_against_readelf(build(FX_DEBUG_ONLY, path, sizeof(path)), &t);
	expect_row(t, symbol_vaddr(path, "fx_leaf"), PERFD_CFA_RSP, 8, 0, "fx_leaf");
	unwind_table_free(t);
}

/* The weight the builder's lanes go by (unwind_table_cfi_bytes): what a
 * build reads, .eh_frame and .debug_frame, decompressed; not the rest of
 * the file. */
static uint64_t cfi_bytes_of(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t bytes;

	cr_assert_geq(fd, 0, "open %s", path);
	bytes = unwind_table_cfi_bytes(fd);
	close(fd);
	return bytes;
}

Test(unwind_table, cfi_bytes_are_what_a_build_reads)
{
	char path[PATH_MAX], zpath[PATH_MAX], text[PATH_MAX];
	struct unwind_table *t;
	uint64_t s, e;

	/* both sections read, all of each */
	t = build_ok(build(FX_DEBUG_FRAME, path, sizeof(path)));
	cr_assert(section_range(path, ".debug_frame", &s, &e));
	cr_assert_eq(cfi_bytes_of(path), t->cfi_bytes, "%" PRIu64 " against %zu",
		     cfi_bytes_of(path), t->cfi_bytes);
	cr_assert_gt(t->cfi_bytes, e - s, "the .eh_frame was not counted");
	/* compressed: weighed as it is read */
	build(FX_DEBUG_FRAME_ZLIB, zpath, sizeof(zpath));
	cr_assert_eq(cfi_bytes_of(zpath), t->cfi_bytes);
	unwind_table_free(t);

	write_file("fx-not-elf", "not an ELF file\n", 16);
	path_in_workdir(text, sizeof(text), "fx-not-elf");
	cr_assert_eq(cfi_bytes_of(text), 0);
}

/* The file at path with its section headers dropped, as sstrip leaves it,
 * written as name. */
static const char *drop_section_headers(const char *path, const char *name, char *out,
					size_t size)
{
	struct stat st;
	Elf64_Ehdr *eh;
	char *data;
	FILE *f = fopen(path, "re");

	cr_assert_not_null(f);
	cr_assert_eq(fstat(fileno(f), &st), 0);
	data = malloc((size_t)st.st_size);
	cr_assert_not_null(data);
	cr_assert_eq(fread(data, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	(void)fclose(f);
	eh = (Elf64_Ehdr *)data;
	eh->e_shoff = 0;
	eh->e_shnum = 0;
	eh->e_shstrndx = SHN_UNDEF;
	write_file(name, data, (size_t)st.st_size);
	free(data);
	path_in_workdir(out, size, name);
	return out;
}

/* sstrip's result: the same file without section headers. */
Test(unwind_table, no_section_headers_uses_pt_gnu_eh_frame)
{
	char path[PATH_MAX], bare_path[PATH_MAX];
	struct unwind_table *t, *bare;

	t = build_ok(build(FX_O2, path, sizeof(path)));
	bare = build_ok(drop_section_headers(path, "fx-no-shdrs", bare_path, sizeof(bare_path)));
	cr_assert_eq(bare->n_rows, t->n_rows);
	cr_expect_eq(memcmp(bare->rows, t->rows, t->n_rows * sizeof(*t->rows)), 0);
	cr_expect_eq(bare->fdes, t->fdes);
	cr_expect_eq(bare->base_vaddr, t->base_vaddr);
	unwind_table_free(bare);
	unwind_table_free(t);
}

Test(unwind_table, libc_matches_readelf)
{
	char path[PATH_MAX];
	FILE *maps = fopen("/proc/self/maps", "re");
	char line[PATH_MAX + 128];
	bool found = false;

	cr_assert_not_null(maps);
	while (!found && fgets(line, sizeof(line), maps)) {
		char *p = strchr(line, '/');

		if (p && strstr(p, "/libc.so")) {
			p[strcspn(p, "\n")] = '\0';
			snprintf(path, sizeof(path), "%s", p);
			found = true;
		}
	}
	(void)fclose(maps);
	cr_assert(found, "libc not in /proc/self/maps");
	check_file_against_readelf(path, NULL);
}

/* --- register numbers libdw would allocate for ------------------------ */

/* One function whose FDE saves DWARF register FX_REG: 125 is x86_64's k7,
 * 134000000 makes libdw allocate and zero 2 GiB for every row (found by
 * fuzz-unwind); with FX_DEBUG_FRAME its CFI is in .debug_frame only. */
static const char regno_source[] =
	"#ifdef FX_DEBUG_FRAME\n"
	"	.cfi_sections .debug_frame\n"
	"#endif\n"
	"	.text\n"
	"	.globl fx_start\n"
	"	.type fx_start, @function\n"
	"fx_start:\n"
	"	.cfi_startproc\n"
	"	pushq %rbp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset FX_REG, -16\n"
	"	movq %rsp, %rbp\n"
	"	.cfi_def_cfa_register %rbp\n"
	"1:	pause\n"
	"	jmp 1b\n"
	"	.cfi_endproc\n"
	"	.size fx_start, .-fx_start\n"
	"	.section .note.GNU-stack,\"\",@progbits\n";

/* Builds regno_source with -DFX_REG=reg (and -DFX_DEBUG_FRAME) into name. */
static const char *build_regno(const char *name, const char *reg, bool debug_frame, char *path,
			       size_t size)
{
	char def[64];

	write_file("regno.S", regno_source, strlen(regno_source));
	snprintf(def, sizeof(def), "-DFX_REG=%s", reg);
	run((char *const[]){ "cc", def, debug_frame ? "-DFX_DEBUG_FRAME" : "-DFX_EH_FRAME",
			     "-nostdlib", "-Wl,-e,fx_start", "-o", (char *)name, "regno.S", NULL });
	path_in_workdir(path, size, name);
	return path;
}

/* A register number past x86_64's refuses the file before libdw runs its
 * CFI, found through the section, through PT_GNU_EH_FRAME alone, or in
 * .debug_frame; a real register (k7) is read as any other. */
Test(unwind_table, register_number_past_x86_64_is_refused)
{
	char path[PATH_MAX], bare[PATH_MAX];
	struct unwind_table *t = NULL;
	const struct perfd_unwind_row *row;

	t = build_ok(build_regno("fx-reg-k7", "125", false, path, sizeof(path)));
	row = unwind_table_find(t, t->base_vaddr + 5);
	cr_assert_not_null(row);
	cr_expect_eq(row->cfa_type, PERFD_CFA_RBP, "the k7 function's body is an RBP row");
	unwind_table_free(t);
	t = NULL;

	build_regno("fx-reg-huge", "134000000", false, path, sizeof(path));
	cr_expect_eq(build_path(path, &t), -EBADMSG, ".eh_frame");
	cr_expect_null(t);
	drop_section_headers(path, "fx-reg-huge-bare", bare, sizeof(bare));
	cr_expect_eq(build_path(bare, &t), -EBADMSG, "PT_GNU_EH_FRAME");
	cr_expect_null(t);
	build_regno("fx-reg-huge-df", "134000000", true, path, sizeof(path));
	cr_expect_eq(build_path(path, &t), -EBADMSG, ".debug_frame");
	cr_expect_null(t);
}

/* --- specific rules --------------------------------------------------- */

Test(unwind_table, start_has_undefined_return_address)
{
	char path[PATH_MAX];
	struct unwind_table *t = build_ok(build(FX_O2, path, sizeof(path)));
	uint64_t start = symbol_vaddr(path, "_start");

	expect_row(t, start, PERFD_CFA_END, 0, 0, "_start");
	expect_row(t, start + 4, PERFD_CFA_END, 0, 0, "_start+4");
	unwind_table_free(t);
}

Test(unwind_table, gap_between_fdes_is_end)
{
	char path[PATH_MAX];
	struct unwind_table *t = build_ok(build(FX_O2, path, sizeof(path)));
	uint64_t f = symbol_vaddr(path, "fx_nocfi");
	bool before = false, after = false;
	struct oracle o;

	/* fx_nocfi has no FDE, and there are FDEs on both sides */
	oracle_load(path, &o);
	cr_assert(!any_fde_covers(&o, f));
	for (size_t i = 0; i < o.n_fdes; i++) {
		before |= o.fdes[i].end <= f;
		after |= o.fdes[i].start > f;
	}
	cr_assert(before && after, "fx_nocfi is not between FDEs");
	for (uint64_t a = f; a < f + 4; a++)
		expect_row(t, a, PERFD_CFA_NO_CFI, 0, 0, "fx_nocfi");
	oracle_free(&o);
	unwind_table_free(t);
}

Test(unwind_table, errors)
{
	static const char text[] = "#!/bin/sh\necho not an ELF file\n";
	char path[PATH_MAX];
	struct unwind_table *t = NULL;
	const Elf64_Ehdr *vdso = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
	int r;

	write_file("text", text, strlen(text));
	path_in_workdir(path, sizeof(path), "text");
	cr_expect_eq(build_path(path, &t), -ENOEXEC);
	write_file("empty", "", 0);
	path_in_workdir(path, sizeof(path), "empty");
	cr_expect_eq(build_path(path, &t), -ENOEXEC);
	cr_expect_eq(unwind_table_build(-1, NULL, &t), -EBADF);

	/* an ELF file for another machine */
	if (vdso) {
		char copy[4096];

		memcpy(copy, vdso, sizeof(copy));
		((Elf64_Ehdr *)copy)->e_machine = EM_AARCH64;
		write_file("aarch64", copy, sizeof(copy));
		path_in_workdir(path, sizeof(path), "aarch64");
		cr_expect_eq(build_path(path, &t), -ENOEXEC);
	}

	/* no CFI at all, and CFI stripped */
	cr_expect_eq(build_path(build(FX_NOCFI, path, sizeof(path)), &t), -ENODATA);
	cr_expect_eq(build_path(build(FX_STRIPPED, path, sizeof(path)), &t), -ENODATA);

	/* code more than 4 GiB above the lowest executable address */
	r = build_path(build(FX_FAR, path, sizeof(path)), &t);
	cr_expect_eq(r, -EFBIG, "far: %s", strerror(-r));
	cr_expect_null(t, "ret written on failure");
}

Test(unwind_table, find_edges)
{
	char path[PATH_MAX];
	struct unwind_table *t = build_ok(build(FX_O2, path, sizeof(path)));
	uint64_t first = t->base_vaddr + t->rows[0].pc;
	uint64_t last = t->base_vaddr + t->rows[t->n_rows - 1].pc;

	cr_expect_null(unwind_table_find(NULL, first));
	cr_expect_null(unwind_table_find(t, 0));
	cr_expect_null(unwind_table_find(t, first - 1));
	cr_expect_eq(unwind_table_find(t, first), &t->rows[0]);
	cr_expect_eq(unwind_table_find(t, last), &t->rows[t->n_rows - 1]);
	/* past the last row: the END closing the last FDE */
	cr_expect_eq(unwind_table_find(t, last + 1000), &t->rows[t->n_rows - 1]);
	cr_expect_null(unwind_table_find(t, t->base_vaddr + (1ull << 32)));
	cr_expect_null(unwind_table_free(t));
	cr_expect_null(unwind_table_free(NULL));
}

/* The vDSO as the daemon reads it: its image, up to its section headers,
 * copied into a file (a memfd there), checked against readelf. */
Test(unwind_table, vdso_image_as_a_file)
{
	const Elf64_Ehdr *vdso = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
	struct unwind_table *file;
	char path[PATH_MAX];

	cr_assert_not_null(vdso, "no vDSO");
	write_file("vdso.so", vdso, vdso->e_shoff + (size_t)vdso->e_shnum * vdso->e_shentsize);
	path_in_workdir(path, sizeof(path), "vdso.so");
	check_file_against_readelf(path, &file);
	check_invariants("vdso", file);
	cr_assert_gt(file->n_rows, 0);
	unwind_table_free(file);
}

/* --- unwinding real code ---------------------------------------------- */

/* One ELF file mapped in this process, with its table. */
struct module {
	char path[PATH_MAX];
	struct unwind_table *table;
	GElf_Phdr loads[16];
	size_t n_loads;
};

static struct module modules[64];
static size_t n_modules;

static void modules_free(void)
{
	for (size_t i = 0; i < n_modules; i++)
		unwind_table_free(modules[i].table);
	n_modules = 0;
}

/* Loads (once) the module mapped from path, or the vDSO at image. */
static struct module *module_get(const char *path, const void *image, char *err, size_t errsize)
{
	struct module *m;
	int r;

	for (size_t i = 0; i < n_modules; i++)
		if (strcmp(modules[i].path, path) == 0)
			return &modules[i];
	if (n_modules == ELEMENTSOF(modules)) {
		snprintf(err, errsize, "too many modules");
		return NULL;
	}
	m = &modules[n_modules];
	*m = (struct module){};
	snprintf(m->path, sizeof(m->path), "%s", path);

	if (image) {
		const Elf64_Ehdr *eh = image;
		const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)image + eh->e_phoff);

		for (size_t i = 0; i < eh->e_phnum && m->n_loads < ELEMENTSOF(m->loads); i++)
			if (ph[i].p_type == PT_LOAD)
				m->loads[m->n_loads++] = (GElf_Phdr){ .p_type = PT_LOAD,
								      .p_offset = ph[i].p_offset,
								      .p_vaddr = ph[i].p_vaddr,
								      .p_filesz = ph[i].p_filesz };
		char file[PATH_MAX];

		write_file("vdso-module.so", image, eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize);
		path_in_workdir(file, sizeof(file), "vdso-module.so");
		r = build_path(file, &m->table);
	} else {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		Elf *elf;
		size_t n = 0;

		if (fd < 0) {
			snprintf(err, errsize, "%s: %s", path, strerror(errno));
			return NULL;
		}
		elf = elf_begin(fd, ELF_C_READ, NULL);
		if (elf && elf_getphdrnum(elf, &n) == 0)
			for (size_t i = 0; i < n && m->n_loads < ELEMENTSOF(m->loads); i++)
				if (gelf_getphdr(elf, (int)i, &m->loads[m->n_loads]) &&
				    m->loads[m->n_loads].p_type == PT_LOAD)
					m->n_loads++;
		(void)elf_end(elf);
		r = unwind_table_build(fd, NULL, &m->table);
		(void)close(fd);
	}
	if (r < 0) {
		snprintf(err, errsize, "%s: %s", path, strerror(-r));
		return NULL;
	}
	n_modules++;
	return m;
}

/* The module pc is in and pc's ELF vaddr there, the way the daemon finds
 * them: the mapping in /proc/self/maps gives a file offset, the PT_LOAD
 * holding that offset gives the vaddr. */
static struct module *module_for_pc(uint64_t pc, uint64_t *vaddr, char *err, size_t errsize)
{
	FILE *maps = fopen("/proc/self/maps", "re");
	char line[PATH_MAX + 128];
	struct module *m = NULL;

	snprintf(err, errsize, "%#" PRIx64 " is in no file mapping", pc);
	if (!maps)
		return NULL;
	while (fgets(line, sizeof(line), maps)) {
		unsigned long start, end, offset;
		char *path = strchr(line, '/');
		uint64_t off;

		if (sscanf(line, "%lx-%lx %*s %lx", &start, &end, &offset) != 3 || pc < start ||
		    pc >= end)
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (strstr(line, "[vdso]"))
			m = module_get("[vdso]", (const void *)start, err, errsize);
		else if (path)
			m = module_get(path, NULL, err, errsize);
		if (!m)
			break;
		off = pc - start + offset;
		for (size_t i = 0; i < m->n_loads; i++) {
			if (off >= m->loads[i].p_offset &&
			    off < m->loads[i].p_offset + m->loads[i].p_filesz) {
				*vaddr = off - m->loads[i].p_offset + m->loads[i].p_vaddr;
				(void)fclose(maps);
				return m;
			}
		}
		snprintf(err, errsize, "%#" PRIx64 ": offset %#" PRIx64 " not in a PT_LOAD of %s",
			 pc, off, m->path);
		m = NULL;
		break;
	}
	(void)fclose(maps);
	return NULL;
}

struct regs {
	uint64_t rip, rsp, rbp;
};

struct unwind_result {
	uint64_t pcs[128];
	size_t n;
	bool reached_end;
	uint64_t restorer; /* the pc whose row was SIGNAL, or 0 */
	char error[PATH_MAX + 256];
};

static uintptr_t stack_lo, stack_hi;

static void stack_bounds(void)
{
	pthread_attr_t attr;
	void *addr;
	size_t size;

	cr_assert_eq(pthread_getattr_np(pthread_self(), &attr), 0);
	cr_assert_eq(pthread_attr_getstack(&attr, &addr, &size), 0);
	(void)pthread_attr_destroy(&attr);
	stack_lo = (uintptr_t)addr;
	stack_hi = stack_lo + size;
}

/* Reads the stack like bpf_probe_read_user: no sanitizer involved, and
 * never outside this thread's stack. */
__attribute__((no_sanitize_address)) static bool read_stack(uint64_t addr, void *buf, size_t n)
{
	if (addr < stack_lo || addr > stack_hi || n > stack_hi - addr || addr % 8 || n % 8)
		return false;
	for (size_t i = 0; i < n / 8; i++)
		((uint64_t *)buf)[i] = ((const volatile uint64_t *)(uintptr_t)addr)[i];
	return true;
}

/* Index of general register r in a ucontext_t read as 64-bit words. */
#define UC_GREG(r) ((offsetof(ucontext_t, uc_mcontext.gregs) + 8 * (r)) / 8)

/* Walks the stack from regs with the rows, as the BPF program does:
 * records each frame's pc (frame 0's exact, then return addresses) until
 * an END row; stops with an error on anything else.  No assertions, so
 * it can run inside a signal handler. */
static void unwind(struct regs regs, struct unwind_result *res)
{
	bool exact = true, rbp_known = true;

	res->n = 0;
	res->reached_end = false;
	res->restorer = 0;
	res->error[0] = '\0';
	while (res->n < ELEMENTSOF(res->pcs)) {
		const struct perfd_unwind_row *row;
		struct module *m;
		uint64_t vaddr, cfa, ra, uc[UC_GREG(REG_RIP) + 1];

		res->pcs[res->n++] = regs.rip;
		m = module_for_pc(regs.rip, &vaddr, res->error, sizeof(res->error));
		if (!m)
			return;
		/* A return address may follow a call ending the function. */
		row = unwind_table_find(m->table, exact ? vaddr : vaddr - 1);
		if (!row) {
			snprintf(res->error, sizeof(res->error), "no row for %#" PRIx64 " in %s", vaddr,
				 m->path);
			return;
		}
		switch (row->cfa_type) {
		case PERFD_CFA_END:
			res->reached_end = true;
			return;
		case PERFD_CFA_RSP:
			cfa = regs.rsp + row->cfa_offset;
			break;
		case PERFD_CFA_RBP:
			if (!rbp_known) {
				snprintf(res->error, sizeof(res->error), "rbp lost before %#" PRIx64
					 " in %s", vaddr, m->path);
				return;
			}
			cfa = regs.rbp + row->cfa_offset;
			break;
		case PERFD_CFA_PLT:
			cfa = regs.rsp + 8 + ((regs.rip & 15) >= (uint64_t)row->cfa_offset ? 8 : 0);
			break;
		case PERFD_CFA_SIGNAL:
			/* the kernel's ucontext, up to the general registers */
			if (!read_stack(regs.rsp, uc, sizeof(uc))) {
				snprintf(res->error, sizeof(res->error), "no ucontext at %#" PRIx64,
					 regs.rsp);
				return;
			}
			res->restorer = regs.rip;
			regs.rip = uc[UC_GREG(REG_RIP)];
			regs.rsp = uc[UC_GREG(REG_RSP)];
			regs.rbp = uc[UC_GREG(REG_RBP)];
			exact = rbp_known = true;
			continue;
		default:
			snprintf(res->error, sizeof(res->error), "%s row for %#" PRIx64 " in %s",
				 type_name(row->cfa_type), vaddr, m->path);
			return;
		}
		if (cfa <= regs.rsp || !read_stack(cfa - 8, &ra, sizeof(ra))) {
			snprintf(res->error, sizeof(res->error),
				 "bad CFA %#" PRIx64 " (rsp %#" PRIx64 ") at %#" PRIx64 " in %s", cfa,
				 regs.rsp, vaddr, m->path);
			return;
		}
		if (row->rbp_offset8 == PERFD_RBP_LOST) {
			rbp_known = false;
		} else if (row->rbp_offset8 != 0) {
			if (!read_stack(cfa + 8 * (int64_t)row->rbp_offset8, &regs.rbp, 8)) {
				snprintf(res->error, sizeof(res->error), "bad rbp slot at %#" PRIx64,
					 vaddr);
				return;
			}
			rbp_known = true;
		}
		regs.rsp = cfa;
		regs.rip = ra;
		exact = false;
	}
	snprintf(res->error, sizeof(res->error), "more than %zu frames", res->n);
}

struct capture {
	struct regs regs;
	void *ret_addr;
	void *bt[128];
	size_t n_bt;
	struct unwind_result unwound;
};

/* Takes this frame's registers, and the same stack through backtrace();
 * then unwinds from the registers while all those frames are still live. */
__attribute__((noinline)) static void capture_and_unwind(struct capture *c)
{
	int n;

	/* rbp first: the compiler may pick rbp as an output register. */
	__asm__ volatile("mov %%rbp, %2\n\t"
			 "mov %%rsp, %1\n\t"
			 "lea 0(%%rip), %0"
			 : "=r"(c->regs.rip), "=r"(c->regs.rsp), "=r"(c->regs.rbp));
	c->ret_addr = __builtin_return_address(0);
	n = backtrace(c->bt, (int)ELEMENTSOF(c->bt));
	c->n_bt = n > 0 ? (size_t)n : 0;
	unwind(c->regs, &c->unwound);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

/* The unwound return addresses must be backtrace()'s, one for one, from
 * the return address out of capture_and_unwind to the one into _start.
 * backtrace()'s first entries are its own return address, and under ASan
 * also its interceptor's: the chains are aligned on the first common one,
 * __builtin_return_address(0). */
static void expect_same_chain(const struct capture *c)
{
	const struct unwind_result *u = &c->unwound;
	size_t skip = 0;

	cr_assert(u->reached_end, "unwinding stopped after %zu frames: %s", u->n, u->error);
	cr_assert_geq(u->n, 4);
	cr_expect_eq(u->pcs[1], (uint64_t)(uintptr_t)c->ret_addr,
		     "first return address %#" PRIx64 ", __builtin_return_address %p", u->pcs[1],
		     c->ret_addr);
	while (skip < c->n_bt && c->bt[skip] != c->ret_addr)
		skip++;
	cr_assert(skip >= 1 && skip <= 3, "backtrace() does not hold %p", c->ret_addr);
	skip--;
	cr_expect_eq(u->n, c->n_bt - skip, "%zu frames unwound, backtrace() has %zu", u->n,
		     c->n_bt - skip);
	for (size_t i = 1; i < MIN(u->n, c->n_bt - skip); i++)
		cr_expect_eq(u->pcs[i], (uint64_t)(uintptr_t)c->bt[i + skip],
			     "frame %zu: %#" PRIx64 ", backtrace() says %p", i, u->pcs[i],
			     c->bt[i + skip]);
}

__attribute__((noinline)) static int deeper(struct capture *c, int depth)
{
	int r;

	if (depth > 0) {
		r = deeper(c, depth - 1) + 1;
	} else {
		capture_and_unwind(c);
		r = 0;
	}
	__asm__ volatile("" ::: "memory");
	return r;
}

Test(unwind_table, unwinds_own_stack_like_backtrace)
{
	static struct capture c;

	stack_bounds();
	cr_assert_eq(deeper(&c, 3), 3);
	expect_same_chain(&c);
	modules_free();
}

static struct capture sig_capture;

static void on_sigusr1(int sig)
{
	capture_and_unwind(&sig_capture);
	__asm__ volatile("" ::: "memory"); /* keep this frame */
}

__attribute__((noinline)) static int raise_here(void)
{
	int r = raise(SIGUSR1);

	__asm__ volatile("" ::: "memory");
	return r;
}

Test(unwind_table, unwinds_through_signal_trampoline)
{
	struct sigaction sa = { .sa_handler = on_sigusr1 }, old;
	struct unwind_table *libc;
	struct module *m;
	uint64_t vaddr;
	char err[PATH_MAX + 64];

	stack_bounds();
	cr_assert_eq(sigemptyset(&sa.sa_mask), 0);
	cr_assert_eq(sigaction(SIGUSR1, &sa, &old), 0);
	cr_assert_eq(raise_here(), 0);
	/* glibc reports the restorer it installed */
	cr_assert_eq(sigaction(SIGUSR1, &old, &sa), 0);
	cr_assert_not_null(sa.sa_restorer);

	expect_same_chain(&sig_capture);
	/* the handler returned to libc's __restore_rt, whose row is SIGNAL */
	cr_assert_neq(sig_capture.unwound.restorer, 0, "no SIGNAL row on the way");
	cr_expect_eq(sig_capture.unwound.restorer, (uint64_t)(uintptr_t)sa.sa_restorer);
	m = module_for_pc(sig_capture.unwound.restorer, &vaddr, err, sizeof(err));
	cr_assert_not_null(m, "%s", err);
	cr_expect_not_null(strstr(m->path, "/libc.so"), "restorer in %s", m->path);
	libc = m->table;
	/* its FDE starts one byte early, so return address - 1 finds it too */
	expect_row(libc, vaddr, PERFD_CFA_SIGNAL, 0, 0, "__restore_rt");
	expect_row(libc, vaddr - 1, PERFD_CFA_SIGNAL, 0, 0, "__restore_rt - 1");
	modules_free();
}

/* The builder's bounds: this program's CFI (tens of KiB) is past a cap of
 * one byte, refused before a row is read; a CPU budget of 1 ns, or a
 * cancel flag set, ends the build at the first check (every 64 rows),
 * with no table. */
Test(unwind_table, limits_refuse_and_abandon)
{
	struct unwind_table *t = NULL;
	struct unwind_table_limits small = { .max_cfi_bytes = 1 };
	struct unwind_table_limits late = { .cpu_ns = 1 };
	atomic_bool stop = true;
	struct unwind_table_limits cancelled = { .cancel = &stop };
	_cleanup_close_ int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_gt(unwind_table_cfi_bytes(fd), 1);
	cr_expect_eq(unwind_table_build(fd, &small, &t), -E2BIG);
	cr_expect_null(t);
	cr_expect_eq(unwind_table_build(fd, &late, &t), -ETIMEDOUT);
	cr_expect_null(t);
	cr_expect_eq(unwind_table_build(fd, &cancelled, &t), -ECANCELED);
	cr_expect_null(t);
	small.max_cfi_bytes = unwind_table_cfi_bytes(fd);
	cr_expect_eq(unwind_table_build(fd, &small, &t), 0, "a cap of exactly its CFI is enough");
	unwind_table_free(t);
}
