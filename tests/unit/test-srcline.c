/* SPDX-License-Identifier: MIT */
/*
 * test-srcline.c - unit tests for daemon/srcline.c.
 *
 * The fixture is compiled at run time in a temporary directory: a hot loop
 * in a static always_inline helper (itself inlining a second one) that
 * lives in a header under a relative include directory, called from the
 * noinline outer_fn, and a plain function in a second compile unit.  The
 * expected chains come from two independent addr2line implementations, run
 * once over every byte of the fixture's functions: elfutils' eu-addr2line
 * -i (install the elfutils package) and binutils' addr2line -i.  The line
 * numbers the acceptance test looks for come from markers in the fixture's
 * own source, so nothing a compiler may move is written down here; so do
 * the lines the functions start at (DW_AT_decl_line), each frame's own,
 * an inlined function's from its abstract origin.
 * Variants: DWARF 5 and 4 from gcc; clang, which writes no .debug_aranges
 * (checked against the same file built with them); a gcc unit linked with
 * a clang one; no -g; stripped, with the debug file split off.  The last
 * test measures lookups per second on libc's debug file (libc6-dbg).
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <gelf.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perfd/macro.h"
#include "fixture.h"
#if defined(__SANITIZE_ADDRESS__)
/* ASan's own (gcc ships no sanitizer/allocator_interface.h) */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif
#include "symbols/srcline.h"

extern char **environ;

static const char fixture_helper[] =
	"/* inlined into outer_fn, two levels deep */\n"
	"static inline __attribute__((always_inline)) unsigned fx_mix(unsigned a, unsigned b)\n"
	"{\n"
	"	return (a ^ (b >> 3)) * 2654435761u; /* MIX_LINE */\n"
	"}\n"
	"\n"
	"static inline __attribute__((always_inline)) unsigned long hot_helper(const unsigned *v, int n)\n"
	"{\n"
	"	unsigned long acc = 0;\n"
	"\n"
	"	for (int i = 0; i < n; i++)\n"
	"		acc = acc * 31 + fx_mix(v[i], (unsigned)acc); /* HOT_LINE */\n"
	"	return acc;\n"
	"}\n";

/* outer_fn's arguments are not constants, so that gcc makes no clone. */
static const char fixture_main[] =
	"#include <stdio.h>\n"
	"#include \"fx-helper.h\"\n"
	"\n"
	"int plain_fn(int x);\n"
	"\n"
	"__attribute__((noinline)) unsigned long outer_fn(const unsigned *v, int n)\n"
	"{\n"
	"	unsigned long r = hot_helper(v, n); /* CALL_LINE */\n"
	"\n"
	"	return r ^ 0x5a5a;\n"
	"}\n"
	"\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	unsigned v[64];\n"
	"\n"
	"	for (int i = 0; i < 64; i++)\n"
	"		v[i] = (unsigned)(i * argc);\n"
	"	printf(\"%lu %d\\n\", outer_fn(v, 60 + argc), plain_fn(argc));\n"
	"	return 0;\n"
	"}\n";

static const char fixture_plain[] =
	"__attribute__((noinline)) int plain_fn(int x)\n"
	"{\n"
	"	return x * 7 + 3; /* PLAIN_LINE */\n"
	"}\n";

/* The fixture's own functions: DWARF describes every byte of them. */
static const char *const fixture_functions[] = { "outer_fn", "plain_fn", "main" };

#define MAX_FRAMES 8

static char realdir[PATH_MAX]; /* the work directory as the compiler records it */

static void suite_setup(void)
{
	fixture_setup();
	cr_assert_not_null(realpath(workdir, realdir));
	cr_assert_eq(elf_version(EV_CURRENT) != EV_NONE, true);
}

TestSuite(srcline, .init = suite_setup, .fini = fixture_teardown, .timeout = 240);

/* --- fixtures ------------------------------------------------------------ */

static const char *wpath(char *buf, size_t size, const char *name)
{
	int n = snprintf(buf, size, "%s/%s", workdir, name);

	cr_assert(n > 0 && (size_t)n < size);
	return buf;
}

static void write_text(const char *name, const char *text)
{
	write_file(name, text, strlen(text));
}

static void write_sources(void)
{
	char path[PATH_MAX];

	if (mkdir(wpath(path, sizeof(path), "inc"), 0755) < 0)
		cr_assert_eq(errno, EEXIST);
	write_text("inc/fx-helper.h", fixture_helper);
	write_text("fx.c", fixture_main);
	write_text("fx2.c", fixture_plain);
}

enum variant {
	GCC_DWARF5, /* gcc -O2 -g */
	GCC_DWARF4,
	GCC_NODEBUG,
	CLANG,         /* no .debug_aranges */
	CLANG_ARANGES, /* the same with them */
	MIXED,         /* fx.c by gcc, fx2.c by clang: aranges for one unit only */
	_VARIANT_MAX,
};

static const char *const variant_file[_VARIANT_MAX] = {
	[GCC_DWARF5] = "fx",       [GCC_DWARF4] = "fx-dwarf4",
	[GCC_NODEBUG] = "fx-nog",  [CLANG] = "fx-clang",
	[CLANG_ARANGES] = "fx-clang-aranges", [MIXED] = "fx-mixed",
};

/* Builds a variant of the fixture in the work directory; returns its path. */
static const char *build(enum variant v, char *path, size_t size)
{
	char *out = (char *)variant_file[v];

	write_sources();
	switch (v) {
	case GCC_DWARF5:
		run((char *const[]){ "gcc", "-O2", "-g", "-Iinc", "-o", out, "fx.c", "fx2.c", NULL });
		break;
	case GCC_DWARF4:
		run((char *const[]){ "gcc", "-O2", "-gdwarf-4", "-Iinc", "-o", out, "fx.c", "fx2.c",
				     NULL });
		break;
	case GCC_NODEBUG:
		run((char *const[]){ "gcc", "-O2", "-Iinc", "-o", out, "fx.c", "fx2.c", NULL });
		break;
	case CLANG:
		run((char *const[]){ "clang", "-O2", "-g", "-Iinc", "-o", out, "fx.c", "fx2.c", NULL });
		break;
	case CLANG_ARANGES:
		run((char *const[]){ "clang", "-O2", "-g", "-gdwarf-aranges", "-Iinc", "-o", out,
				     "fx.c", "fx2.c", NULL });
		break;
	case MIXED:
		run((char *const[]){ "gcc", "-O2", "-g", "-Iinc", "-c", "-o", "fx-gcc.o", "fx.c",
				     NULL });
		run((char *const[]){ "clang", "-O2", "-g", "-c", "-o", "fx2-clang.o", "fx2.c", NULL });
		run((char *const[]){ "gcc", "-o", out, "fx-gcc.o", "fx2-clang.o", NULL });
		break;
	default:
		cr_assert_fail("bad variant");
	}
	return wpath(path, size, out);
}

/* The line of the fixture text containing marker (1-based). */
static unsigned marker_line(const char *text, const char *marker)
{
	const char *at = strstr(text, marker);
	unsigned line = 1;

	cr_assert_not_null(at, "no %s", marker);
	for (const char *p = text; p < at; p++)
		line += *p == '\n';
	return line;
}

/* --- reading the fixture's ELF --------------------------------------------- */

DEFINE_TRIVIAL_CLEANUP_FUNC(Elf, elf_end);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct srcline, srcline_free);

/* The ELF file at path, open for reading.  *ret_fd is the descriptor it
 * reads: the caller closes it after elf_end(), which declaring the fd before
 * the Elf, both with cleanup attributes, does. */
static Elf *open_elf(const char *path, int *ret_fd)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf;

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	elf = elf_begin(fd, ELF_C_READ, NULL);
	cr_assert_not_null(elf, "%s: %s", path, elf_errmsg(-1));
	*ret_fd = fd;
	return elf;
}

/* [*ret_lo, *ret_hi) of symbol name in the .symtab of path. */
static bool find_symbol(const char *path, const char *name, uint64_t *ret_lo, uint64_t *ret_hi)
{
	_cleanup_close_ int fd = -1;
	_cleanup_(elf_endp) Elf *elf = open_elf(path, &fd);
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		Elf_Data *data = elf_getdata(scn, NULL);
		GElf_Shdr sh;

		cr_assert_not_null(gelf_getshdr(scn, &sh));
		if (sh.sh_type != SHT_SYMTAB || !data || sh.sh_entsize == 0)
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			const char *n;
			GElf_Sym sym;

			cr_assert_not_null(gelf_getsym(data, (int)i, &sym));
			n = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (n && strcmp(n, name) == 0 && sym.st_size > 0) {
				*ret_lo = sym.st_value;
				*ret_hi = sym.st_value + sym.st_size;
				return true;
			}
		}
	}
	return false;
}

static void symbol_range(const char *path, const char *name, uint64_t *ret_lo, uint64_t *ret_hi)
{
	cr_assert(find_symbol(path, name, ret_lo, ret_hi), "%s: no symbol %s", path, name);
}

/* Address of the section called name. */
static uint64_t section_addr(const char *path, const char *name)
{
	_cleanup_close_ int fd = -1;
	_cleanup_(elf_endp) Elf *elf = open_elf(path, &fd);
	size_t shstrndx;

	cr_assert_eq(elf_getshdrstrndx(elf, &shstrndx), 0);
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		const char *n;
		GElf_Shdr sh;

		cr_assert_not_null(gelf_getshdr(scn, &sh));
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && strcmp(n, name) == 0)
			return sh.sh_addr;
	}
	cr_assert_fail("%s: no section %s", path, name);
	return 0;
}

/* Every byte address of the fixture's functions in path. */
static size_t fixture_addresses(const char *path, uint64_t **ret)
{
	uint64_t *addrs = NULL;
	size_t n = 0;

	for (size_t f = 0; f < ELEMENTSOF(fixture_functions); f++) {
		uint64_t lo, hi;

		symbol_range(path, fixture_functions[f], &lo, &hi);
		cr_assert_lt(hi - lo, 4096);
		addrs = realloc(addrs, (n + (hi - lo)) * sizeof(*addrs));
		cr_assert_not_null(addrs);
		for (uint64_t a = lo; a < hi; a++)
			addrs[n++] = a;
	}
	*ret = addrs;
	return n;
}

/* --- chains ------------------------------------------------------------- */

struct text_frame {
	char function[128]; /* "" when unknown */
	char file[256];     /* "" when unknown */
	unsigned line;
};

struct chain {
	size_t n;
	struct text_frame f[MAX_FRAMES];
};

static void copy_text(char *dst, size_t size, const char *src)
{
	if (!src)
		src = "";
	cr_assert_lt(strlen(src), size, "name too long: %s", src);
	strcpy(dst, src);
}

static struct chain lookup_chain(struct srcline *s, uint64_t vaddr)
{
	struct srcline_frame f[MAX_FRAMES];
	struct chain c = {};
	int n = srcline_lookup(s, vaddr, f, MAX_FRAMES);

	cr_assert_geq(n, 0, "lookup %#" PRIx64 ": %s", vaddr, strerror(-n));
	cr_assert_leq(n, MAX_FRAMES);
	c.n = (size_t)n;
	for (int i = 0; i < n; i++) {
		copy_text(c.f[i].function, sizeof(c.f[i].function), f[i].function);
		copy_text(c.f[i].file, sizeof(c.f[i].file), f[i].file);
		c.f[i].line = f[i].line;
	}
	return c;
}

static void chain_string(const struct chain *c, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	if (c->n == 0)
		snprintf(buf, size, "(nothing)");
	for (size_t i = 0; i < c->n && used < size; i++)
		used += (size_t)snprintf(buf + used, size - used, "%s%s@%s:%u", i ? " <- " : "",
					  c->f[i].function[0] ? c->f[i].function : "??",
					  c->f[i].file[0] ? c->f[i].file : "??", c->f[i].line);
}

static bool chain_eq(const struct chain *a, const struct chain *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->f[i].function, b->f[i].function) != 0 ||
		    strcmp(a->f[i].file, b->f[i].file) != 0 || a->f[i].line != b->f[i].line)
			return false;
	return true;
}

/* Parses one addr2line location: "file:line", eu-addr2line's
 * "file:line:column", binutils' "file:line (discriminator n)"; "??:0" and
 * binutils' "??:?" are unknown. */
static void parse_location(char *text, struct text_frame *f)
{
	char *p = strstr(text, " (discriminator");
	char *colon;

	if (p)
		*p = '\0';
	colon = strrchr(text, ':');
	cr_assert_not_null(colon, "location %s", text);
	*colon = '\0';
	f->line = (unsigned)strtoul(colon + 1, NULL, 10);
	/* eu-addr2line adds the column when there is one */
	p = strrchr(text, ':');
	if (p && p[1] && strspn(p + 1, "0123456789") == strlen(p + 1)) {
		*p = '\0';
		f->line = (unsigned)strtoul(p + 1, NULL, 10);
	}
	copy_text(f->file, sizeof(f->file), strcmp(text, "??") == 0 ? "" : text);
}

/* Runs tool (an addr2line with -a -i -f) on binary for addrs, one process
 * for all, and parses one chain per address.  A chain of unknowns (no
 * DWARF there) becomes empty; binutils names such code from the symbol
 * table, eu-addr2line too when no unit covers it. */
static void oracle(const char *tool, const char *binary, const uint64_t *addrs, size_t n,
		   struct chain *ret)
{
	char list[PATH_MAX], cmd[3 * PATH_MAX], line[1024];
	size_t k = SIZE_MAX;
	bool want_function = true;
	FILE *f, *p;

	f = fopen(wpath(list, sizeof(list), "addresses"), "we");
	cr_assert_not_null(f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%#" PRIx64 "\n", addrs[i]);
	cr_assert_eq(fclose(f), 0);

	snprintf(cmd, sizeof(cmd), "%s -a -i -f -e '%s' < '%s'", tool, binary, list);
	p = popen(cmd, "re");
	cr_assert_not_null(p);
	memset(ret, 0, n * sizeof(*ret));
	while (fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "0x", 2) == 0 && strlen(line) == 18) {
			k = k == SIZE_MAX ? 0 : k + 1;
			cr_assert_lt(k, n);
			cr_assert_eq(strtoull(line, NULL, 16), addrs[k], "%s: out of order", tool);
			want_function = true;
			continue;
		}
		cr_assert_lt(k, n, "%s printed %s first", tool, line);
		if (want_function) {
			char *inl = strstr(line, " inlined at ");
			struct chain *c = &ret[k];

			cr_assert_lt(c->n, MAX_FRAMES);
			if (inl)
				*inl = '\0';
			copy_text(c->f[c->n].function, sizeof(c->f[c->n].function),
				  strcmp(line, "??") == 0 ? "" : line);
		} else {
			parse_location(line, &ret[k].f[ret[k].n]);
			ret[k].n++;
		}
		want_function = !want_function;
	}
	(void)pclose(p); /* eu-addr2line exits 1 when an address is unknown */
	cr_assert_eq(k + 1, n, "%s answered %zu of %zu addresses (is it installed?"
		     " eu-addr2line is in the elfutils package)", tool, k + 1, n);

	for (size_t i = 0; i < n; i++) {
		bool known = false;

		for (size_t j = 0; j < ret[i].n; j++)
			known |= ret[i].f[j].file[0] != '\0';
		if (!known)
			ret[i].n = 0;
	}
}

static struct srcline *open_ok(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct srcline *s = NULL;
	int r;

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	r = srcline_open(fd, &s);
	cr_assert_eq(r, 0, "srcline_open(%s): %s", path, strerror(-r));
	cr_assert_not_null(s);
	/* closed on return: srcline must not need it any more */
	return s;
}

/* Compares srcline's chain with tool's at every byte of the fixture's
 * functions; all must match, and there must be inlined chains among them. */
static void check_against(const char *tool, const char *path)
{
	_cleanup_(srcline_freep) struct srcline *s = open_ok(path);
	_cleanup_free_ struct chain *want = NULL;
	_cleanup_free_ uint64_t *addrs = NULL;
	size_t n = fixture_addresses(path, &addrs), bad = 0, inlined = 0;

	want = calloc(n, sizeof(*want));
	cr_assert_not_null(want);
	oracle(tool, path, addrs, n, want);
	for (size_t i = 0; i < n; i++) {
		struct chain got = lookup_chain(s, addrs[i]);
		char g[2048], w[2048];

		inlined += got.n > 1;
		if (chain_eq(&got, &want[i]))
			continue;
		if (bad++ < 5) {
			chain_string(&got, g, sizeof(g));
			chain_string(&want[i], w, sizeof(w));
			cr_log_error("%s at %#" PRIx64 ":\n  srcline: %s\n  %s: %s", path, addrs[i],
				     g, tool, w);
		}
	}
	cr_assert_eq(bad, 0, "%s: %zu of %zu addresses differ from %s", path, bad, n, tool);
	cr_assert_gt(inlined, 10, "only %zu inlined chains", inlined);
}

/* --- tests -------------------------------------------------------------- */

Test(srcline, gcc_dwarf5_matches_eu_addr2line)
{
	char path[PATH_MAX];

	check_against("eu-addr2line -A", build(GCC_DWARF5, path, sizeof(path)));
}

Test(srcline, gcc_dwarf5_matches_binutils_addr2line)
{
	char path[PATH_MAX];

	check_against("addr2line", build(GCC_DWARF5, path, sizeof(path)));
}

Test(srcline, gcc_dwarf4_matches_both_addr2lines)
{
	char path[PATH_MAX];

	build(GCC_DWARF4, path, sizeof(path));
	check_against("eu-addr2line -A", path);
	check_against("addr2line", path);
}

/* Looks up vaddr, which belongs to fn: there is at least one frame, and the
 * outermost is fn. */
static struct chain lookup_in(struct srcline *s, uint64_t vaddr, const char *fn)
{
	struct chain c = lookup_chain(s, vaddr);

	cr_assert_geq(c.n, 1, "nothing at %#" PRIx64, vaddr);
	cr_expect_str_eq(c.f[c.n - 1].function, fn);
	return c;
}

/* plain_fn, in the binary at path, inlines nothing: every byte address is one
 * frame of plain_fn in fx2.c, and some are at its known line. */
static void expect_plain_fn(struct srcline *s, const char *path)
{
	char plain_c[PATH_MAX + 32];
	unsigned plain = marker_line(fixture_plain, "PLAIN_LINE");
	size_t plain_hits = 0;
	uint64_t lo, hi;

	snprintf(plain_c, sizeof(plain_c), "%s/fx2.c", realdir);
	symbol_range(path, "plain_fn", &lo, &hi);
	for (uint64_t a = lo; a < hi; a++) {
		struct chain c = lookup_chain(s, a);

		cr_assert_eq(c.n, 1, "%zu frames at %#" PRIx64, c.n, a);
		cr_expect_str_eq(c.f[0].function, "plain_fn");
		cr_expect_str_eq(c.f[0].file, plain_c);
		plain_hits += c.f[0].line == plain;
	}
	cr_expect_gt(plain_hits, 0, "plain_fn never at %s:%u", plain_c, plain);
}

/* Both handles give the same chain at each of the n addresses, and not an
 * empty one; name_x and name_y say which is which in a failure. */
static void expect_same_chains(struct srcline *x, const char *name_x, struct srcline *y,
			       const char *name_y, const uint64_t *addrs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct chain a = lookup_chain(x, addrs[i]), b = lookup_chain(y, addrs[i]);
		char sa[2048], sb[2048];

		chain_string(&a, sa, sizeof(sa));
		chain_string(&b, sb, sizeof(sb));
		cr_assert_gt(a.n, 0, "nothing at %#" PRIx64, addrs[i]);
		cr_assert(chain_eq(&a, &b), "at %#" PRIx64 ": %s %s, %s %s", addrs[i], name_x, sa,
			  name_y, sb);
	}
}

/* The acceptance test: the hot loop's line in the inlined helper, with the
 * helper as its own frame called from outer_fn's line; the known line of a
 * plain function. */
Test(srcline, hot_line_and_inlined_frames)
{
	_cleanup_free_ uint64_t *addrs = NULL;
	char path[PATH_MAX], helper[PATH_MAX + 32], main_c[PATH_MAX + 32];
	unsigned mix = marker_line(fixture_helper, "MIX_LINE");
	unsigned hot = marker_line(fixture_helper, "HOT_LINE");
	unsigned call = marker_line(fixture_main, "CALL_LINE");
	size_t hot_hits = 0, mix_hits = 0;
	uint64_t lo, hi;
	struct srcline *s;

	snprintf(helper, sizeof(helper), "%s/inc/fx-helper.h", realdir);
	snprintf(main_c, sizeof(main_c), "%s/fx.c", realdir);
	s = open_ok(build(GCC_DWARF5, path, sizeof(path)));

	symbol_range(path, "outer_fn", &lo, &hi);
	for (uint64_t a = lo; a < hi; a++) {
		struct chain c = lookup_in(s, a, "outer_fn");

		if (c.n == 2 && strcmp(c.f[0].function, "hot_helper") == 0 &&
		    strcmp(c.f[0].file, helper) == 0 && c.f[0].line == hot &&
		    strcmp(c.f[1].file, main_c) == 0 && c.f[1].line == call)
			hot_hits++;
		if (c.n == 3 && strcmp(c.f[0].function, "fx_mix") == 0 &&
		    strcmp(c.f[0].file, helper) == 0 && c.f[0].line == mix &&
		    strcmp(c.f[1].function, "hot_helper") == 0 &&
		    strcmp(c.f[1].file, helper) == 0 && c.f[1].line == hot &&
		    strcmp(c.f[2].file, main_c) == 0 && c.f[2].line == call)
			mix_hits++;
	}
	cr_expect_gt(hot_hits, 0, "no hot_helper@%s:%u <- outer_fn@%s:%u", helper, hot, main_c,
		     call);
	cr_expect_gt(mix_hits, 0, "no fx_mix@:%u <- hot_helper@:%u <- outer_fn@:%u", mix, hot,
		     call);

	expect_plain_fn(s, path);
	srcline_free(s);
}

/* The line each function's definition names it on, from the fixture's
 * source: what DW_AT_decl_line says. */
static unsigned fixture_decl_line(const char *function)
{
	if (strcmp(function, "outer_fn") == 0)
		return marker_line(fixture_main, "unsigned long outer_fn(");
	if (strcmp(function, "hot_helper") == 0)
		return marker_line(fixture_helper, "unsigned long hot_helper(");
	if (strcmp(function, "fx_mix") == 0)
		return marker_line(fixture_helper, "unsigned fx_mix(");
	if (strcmp(function, "plain_fn") == 0)
		return marker_line(fixture_plain, "int plain_fn(");
	cr_assert_fail("no decl line known for %s", function);
	return 0;
}

/* Every frame at every byte of outer_fn and plain_fn in the binary at
 * path starts where its function's definition does: outer_fn's own, and
 * the inlined hot_helper's and fx_mix's (abstract origins in a header),
 * looked up twice (the second time from the cache). */
static void expect_decl_lines(const char *path)
{
	_cleanup_(srcline_freep) struct srcline *s = open_ok(path);
	static const char *const functions[] = { "outer_fn", "plain_fn" };
	size_t frames = 0, inlined = 0;

	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < ELEMENTSOF(functions); k++) {
			uint64_t lo, hi;

			symbol_range(path, functions[k], &lo, &hi);
			for (uint64_t a = lo; a < hi; a++) {
				struct srcline_frame f[MAX_FRAMES];
				int n = srcline_lookup(s, a, f, MAX_FRAMES);

				cr_assert_geq(n, 1, "%s: nothing at %#" PRIx64, path, a);
				for (int i = 0; i < n; i++) {
					cr_assert_not_null(f[i].function, "%#" PRIx64, a);
					cr_assert_eq(f[i].decl_line, fixture_decl_line(f[i].function),
						     "%s at %#" PRIx64 ": %s starts at %u", path, a,
						     f[i].function, f[i].decl_line);
				}
				frames += (size_t)n;
				inlined += n == 3;
			}
		}
	cr_assert_gt(inlined, 0, "%s: never fx_mix <- hot_helper <- outer_fn", path);
	cr_assert_gt(frames, 0);
}

Test(srcline, functions_start_at_their_decl_line)
{
	char path[PATH_MAX];

	expect_decl_lines(build(GCC_DWARF5, path, sizeof(path)));
	expect_decl_lines(build(GCC_DWARF4, path, sizeof(path)));
	expect_decl_lines(build(CLANG, path, sizeof(path)));
}

/* clang writes no .debug_aranges: the units' own ranges must give the same
 * answers as aranges do, and those the same as eu-addr2line (which relies
 * on aranges, so only checks the variant that has them). */
Test(srcline, clang_without_aranges)
{
	_cleanup_(srcline_freep) struct srcline *with = NULL, *without = NULL;
	_cleanup_free_ uint64_t *addrs = NULL;
	char p_with[PATH_MAX], p_without[PATH_MAX];
	struct srcline_stats st;
	size_t n;

	build(CLANG_ARANGES, p_with, sizeof(p_with));
	build(CLANG, p_without, sizeof(p_without));
	check_against("eu-addr2line -A", p_with);

	with = open_ok(p_with);
	without = open_ok(p_without);
	n = fixture_addresses(p_with, &addrs);
	expect_same_chains(with, "with aranges", without, "without", addrs, n);
	srcline_get_stats(without, &st);
	cr_expect_geq(st.units, 2);
	cr_expect_eq(st.units_loaded, 2);
}

/* A unit with aranges linked with one without: both found. */
Test(srcline, aranges_for_some_units_only)
{
	_cleanup_(srcline_freep) struct srcline *s = NULL;
	char path[PATH_MAX];
	uint64_t lo, hi;

	s = open_ok(build(MIXED, path, sizeof(path)));
	expect_plain_fn(s, path);

	symbol_range(path, "outer_fn", &lo, &hi);
	for (uint64_t a = lo; a < hi; a++)
		(void)lookup_in(s, a, "outer_fn");
}

Test(srcline, outside_any_unit)
{
	_cleanup_(srcline_freep) struct srcline *s = NULL;
	struct srcline_frame f[MAX_FRAMES] = { { "untouched", "untouched", 7, 7 } };
	char path[PATH_MAX];
	uint64_t plt;

	s = open_ok(build(GCC_DWARF5, path, sizeof(path)));
	plt = section_addr(path, ".plt");
	cr_assert_neq(plt, 0);
	cr_expect_eq(srcline_lookup(s, plt, f, MAX_FRAMES), 0);
	cr_expect_eq(srcline_lookup(s, plt + 1, f, MAX_FRAMES), 0);
	cr_expect_eq(srcline_lookup(s, 0, f, MAX_FRAMES), 0);
	cr_expect_eq(srcline_lookup(s, UINT64_MAX, f, MAX_FRAMES), 0);
	cr_expect_str_eq(f[0].function, "untouched");
	cr_expect_eq(srcline_lookup(s, plt, f, 0), -EINVAL);
	/* and again, now from the cache */
	cr_expect_eq(srcline_lookup(s, plt, f, MAX_FRAMES), 0);
}

/* What the daemon's loop does (srcline_lookup_indexed) never indexes: a
 * unit not indexed is -EAGAIN and marked wanted, and an indexer on another
 * thread indexes it while lookups into a unit already indexed go on; after
 * that, the loop's answers are the same as a lookup that indexes. */
struct indexer {
	struct srcline *s;
	int r;
};

static void *run_indexer(void *arg)
{
	struct indexer *x = arg;

	x->r = srcline_index_wanted(x->s, NULL);
	return NULL;
}

Test(srcline, indexed_lookups_leave_indexing_to_another_thread)
{
	_cleanup_(srcline_freep) struct srcline *s = NULL, *ref = NULL;
	struct srcline_frame f[MAX_FRAMES];
	struct indexer x = {};
	struct srcline_stats st;
	char path[PATH_MAX];
	uint64_t lo, hi, plo, phi;
	pthread_t t;
	size_t answered = 0;

	build(GCC_DWARF5, path, sizeof(path));
	s = open_ok(path);
	ref = open_ok(path);
	symbol_range(path, "outer_fn", &lo, &hi);
	symbol_range(path, "plain_fn", &plo, &phi);

	/* plain_fn's unit first, on this thread */
	cr_assert_eq(srcline_lookup_indexed(s, plo, f, MAX_FRAMES), -EAGAIN);
	cr_assert(srcline_wants(s));
	cr_assert_eq(srcline_index_wanted(s, NULL), 0);
	cr_assert_not(srcline_wants(s));
	cr_assert_eq(srcline_want(s, plo), 0);
	srcline_get_stats(s, &st);
	cr_assert_eq(st.units_loaded, 1, "only the unit asked for is indexed");

	/* outer_fn's unit on another thread, while plain_fn's is looked up */
	cr_assert_eq(srcline_want(s, lo), -EAGAIN);
	cr_assert_eq(srcline_lookup_indexed(s, lo, f, MAX_FRAMES), -EAGAIN);
	x.s = s;
	cr_assert_eq(pthread_create(&t, NULL, run_indexer, &x), 0);
	for (int round = 0; round < 200; round++)
		for (uint64_t a = plo; a < phi; a++) {
			int n = srcline_lookup_indexed(s, a, f, MAX_FRAMES);

			cr_assert_eq(n, 1, "plain_fn at %#" PRIx64 ": %d", a, n);
			cr_assert_str_eq(f[0].function, "plain_fn");
			answered++;
		}
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(x.r, 0);
	cr_assert_gt(answered, 0);

	for (uint64_t a = lo; a < hi; a++) {
		struct srcline_frame g[MAX_FRAMES];
		int n = srcline_lookup_indexed(s, a, f, MAX_FRAMES);
		int m = srcline_lookup(ref, a, g, MAX_FRAMES);

		cr_assert_eq(n, m, "at %#" PRIx64 ": %d frames, %d indexing on lookup", a, n, m);
		for (int i = 0; i < n; i++) {
			cr_assert_str_eq(f[i].function ?: "", g[i].function ?: "");
			cr_assert_str_eq(f[i].file ?: "", g[i].file ?: "");
			cr_assert_eq(f[i].line, g[i].line);
		}
	}
	cr_assert_not(srcline_wants(s));
	srcline_get_stats(s, &st);
	cr_assert_eq(st.units_loaded, 2);
	cr_assert_eq(st.units_refused, 0);
}

/* A unit whose indexing takes more CPU time than allowed is refused,
 * counted, and not tried again; the other units still answer. */
Test(srcline, unit_past_its_time_is_refused)
{
	_cleanup_(srcline_freep) struct srcline *s = NULL;
	struct srcline_frame f[MAX_FRAMES];
	struct srcline_stats st;
	char path[PATH_MAX];
	uint64_t lo, hi, plo, phi;

	s = open_ok(build(GCC_DWARF5, path, sizeof(path)));
	symbol_range(path, "outer_fn", &lo, &hi);
	symbol_range(path, "plain_fn", &plo, &phi);
	srcline_set_unit_limits(s, 0, SRCLINE_UNIT_MAX_LINE_BYTES);
	cr_assert_eq(srcline_lookup_indexed(s, lo, f, MAX_FRAMES), -EAGAIN);
	cr_assert_eq(srcline_index_wanted(s, NULL), 1);
	cr_assert_eq(srcline_lookup_indexed(s, lo, f, MAX_FRAMES), -ETIME);
	cr_assert_eq(srcline_want(s, lo), 0, "a refused unit is not asked for again");
	cr_assert_not(srcline_wants(s));
	srcline_get_stats(s, &st);
	cr_assert_eq(st.units_refused, 1);
	cr_assert_eq(st.units_loaded, 0);

	srcline_set_unit_limits(s, SRCLINE_UNIT_MAX_NS, SRCLINE_UNIT_MAX_LINE_BYTES);
	expect_plain_fn(s, path);
}

/* A unit whose line program is longer than allowed is refused before
 * libdw decodes it, counted; the limit is the program's own length. */
Test(srcline, unit_past_its_line_bytes_is_refused)
{
	_cleanup_(srcline_freep) struct srcline *s = NULL, *big = NULL;
	struct srcline_frame f[MAX_FRAMES];
	struct srcline_stats st;
	char path[PATH_MAX];
	uint64_t lo, hi;

	s = open_ok(build(GCC_DWARF5, path, sizeof(path)));
	symbol_range(path, "outer_fn", &lo, &hi);
	srcline_set_unit_limits(s, SRCLINE_UNIT_MAX_NS, 16);
	cr_assert_eq(srcline_lookup_indexed(s, lo, f, MAX_FRAMES), -EAGAIN);
	cr_assert_eq(srcline_index_wanted(s, NULL), 1);
	cr_assert_eq(srcline_lookup_indexed(s, lo, f, MAX_FRAMES), -EFBIG);
	cr_assert_eq(srcline_lookup(s, lo, f, MAX_FRAMES), -EFBIG, "not tried again");
	srcline_get_stats(s, &st);
	cr_assert_eq(st.units_refused, 1);
	cr_assert_eq(st.units_loaded, 0);

	/* a program of a few hundred bytes passes a limit of 64 KiB */
	big = open_ok(path);
	srcline_set_unit_limits(big, SRCLINE_UNIT_MAX_NS, 64 << 10);
	cr_assert_geq(srcline_lookup(big, lo, f, MAX_FRAMES), 1);
	srcline_get_stats(big, &st);
	cr_assert_eq(st.units_refused, 0);
}

/* Nops in the fixture of ROWS_FX_ROWS lines of assembler, one row each. */
#define ROWS_FX_ROWS 100000

/* A binary whose _start is one unit of ROWS_FX_ROWS line rows (gcc -g on
 * assembler); returns its path. */
static const char *build_rows(char *path, size_t size)
{
	const char head[] = "\t.text\n\t.globl _start\n\t.type _start, @function\n_start:\n";
	const char nop[] = "\tnop\n";
	const char tail[] = "\tret\n\t.size _start, .-_start\n"
			    "\t.section .note.GNU-stack,\"\",@progbits\n";
	size_t len = sizeof(head) - 1 + ROWS_FX_ROWS * (sizeof(nop) - 1) + sizeof(tail);
	_cleanup_free_ char *text = malloc(len);
	char *p = text;

	cr_assert_not_null(text);
	p = stpcpy(p, head);
	for (int i = 0; i < ROWS_FX_ROWS; i++)
		p = stpcpy(p, nop);
	stpcpy(p, tail);
	write_text("rows.s", text);
	run((char *const[]){ "gcc", "-g", "-nostdlib", "-o", "fx-rows", "rows.s", NULL });
	return wpath(path, size, "fx-rows");
}

/* The rows libdw decodes stay until srcline_free: they count in
 * memory_bytes (which the symbol cache charges) the moment they are
 * decoded, and a file whose line tables could pass its memory limit with
 * a unit's rows (one per byte of its program at most) refuses that unit
 * before libdw decodes it, counted as for its length. */
Test(srcline, decoded_rows_are_counted_and_bounded_by_the_memory_limit)
{
	_cleanup_(srcline_freep) struct srcline *s = NULL, *small = NULL, *enough = NULL;
	struct srcline_frame f[MAX_FRAMES];
	struct srcline_stats before, st;
	char path[PATH_MAX];
	size_t rows_bytes = (size_t)ROWS_FX_ROWS * SRCLINE_ROW_BYTES;
	uint64_t lo, hi;

	s = open_ok(build_rows(path, sizeof(path)));
	symbol_range(path, "_start", &lo, &hi);
	srcline_get_stats(s, &before);
	cr_assert_eq(srcline_lookup(s, lo + 7, f, MAX_FRAMES), 1);
	cr_assert_eq(f[0].line, 12, "the 8th nop is rows.s:12: %s:%u", f[0].file, f[0].line);
	srcline_get_stats(s, &st);
	cr_assert_geq(st.memory_bytes - before.memory_bytes, rows_bytes,
		      "%d rows decoded, memory grew by %zu bytes only", ROWS_FX_ROWS,
		      st.memory_bytes - before.memory_bytes);

	/* room for fewer rows than the program may hold: refused unread */
	small = open_ok(path);
	srcline_set_memory_limit(small, before.memory_bytes + rows_bytes / 2);
	cr_assert_eq(srcline_lookup_indexed(small, lo, f, MAX_FRAMES), -EAGAIN);
	cr_assert_eq(srcline_index_wanted(small, NULL), 1);
	cr_assert_eq(srcline_lookup_indexed(small, lo, f, MAX_FRAMES), -EFBIG);
	srcline_get_stats(small, &st);
	cr_assert_eq(st.units_refused, 1);
	cr_assert_eq(st.units_loaded, 0);
	cr_assert_lt(st.memory_bytes, before.memory_bytes + rows_bytes / 2,
		     "nothing decoded: %zu bytes", st.memory_bytes);

	/* room for a row per byte of the program (a nop and its row take one
	 * byte each, the header a few hundred): decoded, within the limit */
	enough = open_ok(path);
	srcline_set_memory_limit(enough, before.memory_bytes + 2 * rows_bytes);
	cr_assert_eq(srcline_index_all(enough), 0);
	cr_assert_eq(srcline_lookup_indexed(enough, lo + 7, f, MAX_FRAMES), 1);
	srcline_get_stats(enough, &st);
	cr_assert_eq(st.units_refused, 0);
	cr_assert_leq(st.memory_bytes, before.memory_bytes + 2 * rows_bytes);
}

Test(srcline, no_debug_info)
{
	char path[PATH_MAX], text[PATH_MAX];
	_cleanup_close_ int fd = -1, tfd = -1;
	struct srcline *s = NULL;

	fd = open(build(GCC_NODEBUG, path, sizeof(path)), O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_expect_eq(srcline_open(fd, &s), -ENODATA);
	cr_expect_null(s);

	write_text("not-elf", "#!/bin/sh\nexit 0\n");
	tfd = open(wpath(text, sizeof(text), "not-elf"), O_RDONLY | O_CLOEXEC);
	cr_assert_geq(tfd, 0);
	cr_expect_eq(srcline_open(tfd, &s), -ENOEXEC);
	cr_expect_eq(srcline_open(-1, &s), -EINVAL);
	cr_expect_null(s);
}

/* The stripped binary has no DWARF; its debug file, opened the same way,
 * answers for the stripped binary's addresses as the -g binary did. */
Test(srcline, separate_debug_file)
{
	_cleanup_(srcline_freep) struct srcline *full = NULL, *split = NULL;
	_cleanup_free_ uint64_t *addrs = NULL;
	char path[PATH_MAX], stripped[PATH_MAX], debug[PATH_MAX];
	_cleanup_close_ int fd = -1;
	struct srcline *s = NULL;
	size_t n;

	build(GCC_DWARF5, path, sizeof(path));
	run((char *const[]){ "objcopy", "--only-keep-debug", "fx", "fx.debug", NULL });
	run((char *const[]){ "strip", "--strip-all", "-o", "fx-stripped", "fx", NULL });
	wpath(stripped, sizeof(stripped), "fx-stripped");
	wpath(debug, sizeof(debug), "fx.debug");

	fd = open(stripped, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_expect_eq(srcline_open(fd, &s), -ENODATA);

	full = open_ok(path);
	split = open_ok(debug);
	/* the stripped file has no symbols: the addresses are the same */
	n = fixture_addresses(path, &addrs);
	expect_same_chains(full, "binary", split, "debug file", addrs, n);
}

/* A chain longer than max keeps the innermost frames and the outermost;
 * a cut chain is not what a later caller with more room gets. */
static bool frame_is(const struct srcline_frame *f, const struct text_frame *want)
{
	return f->function && strcmp(f->function, want->function) == 0 && f->file &&
	       strcmp(f->file, want->file) == 0 && f->line == want->line;
}

Test(srcline, chain_longer_than_max)
{
	_cleanup_(srcline_freep) struct srcline *s = NULL;
	struct srcline_frame g[MAX_FRAMES];
	char path[PATH_MAX];
	uint64_t lo, hi, deep = 0;
	struct chain c = {};

	s = open_ok(build(GCC_DWARF5, path, sizeof(path)));
	symbol_range(path, "outer_fn", &lo, &hi);
	for (uint64_t a = lo; a < hi && !deep; a++)
		if (srcline_lookup(s, a, g, MAX_FRAMES) == 3)
			deep = a;
	cr_assert_neq(deep, 0, "no address with three frames in outer_fn");
	c = lookup_chain(s, deep);
	cr_assert_eq(c.n, 3);
	cr_assert_str_eq(c.f[0].function, "fx_mix");
	cr_assert_str_eq(c.f[1].function, "hot_helper");
	cr_assert_str_eq(c.f[2].function, "outer_fn");

	/* the whole answer for deep is in the cache now */
	cr_assert_eq(srcline_lookup(s, deep, g, 2), 2);
	cr_expect(frame_is(&g[0], &c.f[0]) && frame_is(&g[1], &c.f[2]));
	cr_assert_eq(srcline_lookup(s, deep, g, 1), 1);
	cr_expect(frame_is(&g[0], &c.f[2]));
	cr_assert_eq(srcline_lookup(s, deep, g, 3), 3);
	cr_expect(frame_is(&g[0], &c.f[0]) && frame_is(&g[1], &c.f[1]) &&
		  frame_is(&g[2], &c.f[2]));

	/* a fresh handle: the first answer is cut, the next one whole */
	srcline_free(TAKE_PTR(s));
	s = open_ok(path);
	cr_assert_eq(srcline_lookup(s, deep, g, 2), 2);
	cr_expect(frame_is(&g[0], &c.f[0]) && frame_is(&g[1], &c.f[2]));
	cr_assert_eq(srcline_lookup(s, deep, g, MAX_FRAMES), 3);
	cr_expect(frame_is(&g[0], &c.f[0]) && frame_is(&g[1], &c.f[1]) &&
		  frame_is(&g[2], &c.f[2]));
}

/* --- rate on a real binary ----------------------------------------------- */

static double now(void)
{
	struct timespec ts;

	cr_assert_eq(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* /usr/lib/debug/.build-id/xx/yyyy.debug for the ELF file at path. */
static bool build_id_debug_path(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = -1;
	_cleanup_(elf_endp) Elf *elf = open_elf(path, &fd);

	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		Elf_Data *data = elf_getdata(scn, NULL);
		size_t off = 0, name_off, desc_off;
		GElf_Shdr sh;
		GElf_Nhdr nh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || !data)
			continue;
		while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			const unsigned char *id = (const unsigned char *)data->d_buf + desc_off;
			size_t used;

			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)data->d_buf + name_off, "GNU", 4) != 0 ||
			    nh.n_descsz < 2)
				continue;
			used = (size_t)snprintf(buf, size, "/usr/lib/debug/.build-id/%02x/", id[0]);
			for (size_t i = 1; i < nh.n_descsz && used + 3 < size; i++)
				used += (size_t)snprintf(buf + used, size - used, "%02x", id[i]);
			snprintf(buf + used, size - used, ".debug");
			return true;
		}
	}
	return false;
}

/* The path of the debug file of the libc this test runs on, in buf. */
static void libc_debug_file(char *buf, size_t size)
{
	Dl_info info;

	/* a libc function no sanitizer intercepts */
	cr_assert(dladdr((void *)gnu_get_libc_version, &info) && info.dli_fname);
	cr_assert(build_id_debug_path(info.dli_fname, buf, size), "%s has no build-id",
		  info.dli_fname);
	cr_assert_eq(access(buf, R_OK), 0, "no debug file %s for %s: install libc6-dbg", buf,
		     info.dli_fname);
}

/* Lookups per second on libc's debug file (Debian's libc6-dbg, which
 * packaging/install-deps.sh test is to install): ~2000 units, 1.4 MiB of
 * code.  Addresses are spread over every function; "cold" includes
 * indexing each unit on first use, "warm" defeats the recent-lookup cache,
 * "profile" sends 90% of lookups to 64 hot addresses, as a profile does. */
Test(srcline, rate_on_libc)
{
	_cleanup_(srcline_freep) struct srcline *s = NULL;
	_cleanup_free_ uint64_t *addrs = NULL;
	struct srcline_frame f[MAX_FRAMES];
	char debug[PATH_MAX];
	size_t n = 0, cap = 0, found = 0, frames = 0, inlined = 0;
	double t0, t1, t2, t3, t4;
	struct srcline_stats st;
	unsigned seed = 1;

	libc_debug_file(debug, sizeof(debug));
	t0 = now();
	s = open_ok(debug);
	t1 = now();

	/* up to 16 addresses in each function of .symtab */
	{
		_cleanup_close_ int fd = -1;
		_cleanup_(elf_endp) Elf *elf = open_elf(debug, &fd);

		for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
			Elf_Data *data = elf_getdata(scn, NULL);
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !data ||
			    sh.sh_entsize == 0)
				continue;
			for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym sym;
				size_t k;

				if (!gelf_getsym(data, (int)i, &sym) ||
				    GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0)
					continue;
				k = MIN(sym.st_size, (GElf_Xword)16);
				if (n + k > cap) {
					cap = MAX(2 * cap, n + k + 1024);
					addrs = realloc(addrs, cap * sizeof(*addrs));
					cr_assert_not_null(addrs);
				}
				for (size_t j = 0; j < k; j++)
					addrs[n++] = sym.st_value + j * sym.st_size / k;
			}
		}
	}
	cr_assert_gt(n, 10000, "only %zu addresses in %s", n, debug);
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)rand_r(&seed) % (i + 1);
		uint64_t t = addrs[i];

		addrs[i] = addrs[j];
		addrs[j] = t;
	}

	for (size_t i = 0; i < n; i++) {
		int r = srcline_lookup(s, addrs[i], f, MAX_FRAMES);

		cr_assert_geq(r, 0, "%#" PRIx64 ": %s", addrs[i], strerror(-r));
		found += r > 0;
		frames += (size_t)r;
		inlined += r > 1;
	}
	t2 = now();
	for (size_t i = 0; i < 100000; i++)
		(void)srcline_lookup(s, addrs[(i * 7919) % n], f, MAX_FRAMES);
	t3 = now();
	for (size_t i = 0; i < 100000; i++) {
		unsigned r = (unsigned)rand_r(&seed);

		(void)srcline_lookup(s, r % 10 ? addrs[r % 64] : addrs[r % n], f, MAX_FRAMES);
	}
	t4 = now();

	srcline_get_stats(s, &st);
	cr_log_info("libc: open %.1f ms; %zu addresses, %.0f%% found, %.2f frames each, "
		    "%.0f%% inlined; lookups/s: cold %.0f, warm %.0f, profile %.0f; "
		    "%zu of %zu units indexed, %.1f MiB",
		    (t1 - t0) * 1e3, n, 100.0 * (double)found / (double)n,
		    (double)frames / (double)found, 100.0 * (double)inlined / (double)n,
		    (double)n / (t2 - t1), 1e5 / (t3 - t2), 1e5 / (t4 - t3), st.units_loaded,
		    st.units, (double)st.memory_bytes / 1048576.0);
	cr_expect_gt(found, n * 9 / 10, "found %zu of %zu", found, n);
	cr_expect_gt(inlined, n / 20, "only %zu inlined chains", inlined);
	/* Floors far below what a loaded 2-core machine does unsanitized
	 * (~0.5M cold, ~1.5M warm): they catch an accidental O(n) lookup. */
	cr_expect_gt((double)n / (t2 - t1), 20000.0);
	cr_expect_gt(1e5 / (t3 - t2), 100000.0);
	cr_expect_gt(st.cache_hits, 50000);
}

/* The heap in use (ASan's allocator's count in the sanitized build,
 * where mallinfo2 does not see it). */
static size_t heap_in_use(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return __sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
#endif
}

/* What the symbol cache is charged for a debug file (memory_bytes) covers
 * what it holds, measured as the heap's growth: over srcline_open at least
 * nine tenths (the sections, libdw's unit list), over indexing every unit
 * all of it (line rows, libdw's abbreviation tables, srcline's scopes),
 * and in all at most twice the growth. */
static void assert_charge_covers_growth(const char *path)
{
	_cleanup_(srcline_freep) struct srcline *s = NULL;
	struct srcline_stats opened, indexed;
	size_t before, open_growth, index_growth;

	malloc_trim(0);
	before = heap_in_use();
	s = open_ok(path);
	open_growth = heap_in_use() - before;
	srcline_get_stats(s, &opened);
	cr_assert_eq(srcline_index_all(s), 0);
	index_growth = heap_in_use() - before - open_growth;
	srcline_get_stats(s, &indexed);
	cr_assert_eq(indexed.units_loaded, indexed.units);
	cr_log_info("%s: %zu units; open: grew %zu, counted %zu; index: grew %zu, counted %zu",
		    path, indexed.units, open_growth, opened.memory_bytes, index_growth,
		    indexed.memory_bytes - opened.memory_bytes);
	cr_assert_geq(opened.memory_bytes, open_growth / 10 * 9,
		      "%s: open counted %zu of %zu bytes held", path, opened.memory_bytes,
		      open_growth);
	cr_assert_geq(indexed.memory_bytes - opened.memory_bytes, index_growth,
		      "%s: indexing counted %zu of %zu bytes held", path,
		      indexed.memory_bytes - opened.memory_bytes, index_growth);
	cr_assert_leq(indexed.memory_bytes, 2 * (open_growth + index_growth),
		      "%s: counted %zu for %zu bytes held", path, indexed.memory_bytes,
		      open_growth + index_growth);
}

/* libc's debug file (Debian's libc6-dbg): compressed sections, which libdw
 * holds decompressed (counted at their size in the file, the open was
 * charged 4.4 MB for 12.9 held; tests/bench/dwmem.c), and 2,063 units. */
Test(srcline, what_libdw_holds_for_libc_is_counted)
{
	char debug[PATH_MAX];

	libc_debug_file(debug, sizeof(debug));
	assert_charge_covers_growth(debug);
}

/* 60 units of many struct, union, enum and typedef shapes and one small
 * function each: abbreviation tables that libdw keeps (3.8 bytes held per
 * byte of them) next to few line rows.  Without their charge, indexing
 * was counted 26 KB for 100 KB held. */
Test(srcline, what_libdw_holds_for_abbreviations_is_counted)
{
	char *argv[64 + 8] = { "gcc", "-shared", "-fPIC", "-g", "-O0",
			       "-fno-eliminate-unused-debug-types", "-o", "types.so" };
	char names[60][16], text[64], path[PATH_MAX];
	size_t used = 0, argc = 8;
	char *header = NULL;
	FILE *h = open_memstream(&header, &used);

	cr_assert_not_null(h);
	fputs("#include <stdalign.h>\n#include <stdint.h>\n", h);
	for (int i = 0; i < 40; i++)
		fprintf(h,
			"struct s%d { int a : %d; unsigned b : 3; long c[%d]; "
			"const volatile char *d; double (*fp)(int, ...); "
			"union { float f; uint64_t u; } un; alignas(%d) short al; "
			"struct { int x, y; } anon; _Bool flag; "
			"enum e%d { E%d_a = -%d, E%d_b = %d } e; };\n"
			"typedef struct s%d t%d;\n"
			"typedef int (*cb%d)(t%d *restrict, const t%d *, void *);\n",
			i, i % 7 + 1, i + 1, 2 << (i % 4), i, i, i + 1, i, i * 1000 + 70000, i, i,
			i, i, i);
	fputs("#define CAT(a, b) a##b\n#define NAME(a, b) CAT(a, b)\n"
	      "int NAME(fn_, U)(void) { return (int)sizeof(struct s0); }\n", h);
	cr_assert_eq(fclose(h), 0);
	write_text("types.h", header);
	free(header);
	for (int u = 0; u < 60; u++) {
		snprintf(names[u], sizeof(names[u]), "u%d.c", u);
		snprintf(text, sizeof(text), "#define U %d\n#include \"types.h\"\n", u);
		write_text(names[u], text);
		argv[argc++] = names[u];
	}
	argv[argc] = NULL;
	run(argv);
	assert_charge_covers_growth(wpath(path, sizeof(path), "types.so"));
}

/* A file naming a dwz alternate file (.gnu_debugaltlink: here a FIFO, which
 * libdw's own open() would block on) is read without it: libdw is told
 * there is none, and the file's own chains are what they were.  (gcc
 * writes no DW_FORM_GNU_*_alt without dwz, so this checks the file is
 * still read whole, not that a reference into the alternate file is
 * refused.) */
Test(srcline, alternate_file_is_never_opened)
{
	_cleanup_(srcline_freep) struct srcline *plain = NULL, *linked = NULL;
	_cleanup_free_ uint64_t *addrs = NULL;
	char path[PATH_MAX], alt[PATH_MAX], fifo[PATH_MAX];
	/* "fifo\0" then a 20-byte build-id, as dwz writes it */
	static const char link[] = "fifo\0" "0123456789abcdefghij";
	size_t n;

	build(GCC_DWARF5, path, sizeof(path));
	wpath(fifo, sizeof(fifo), "fifo");
	(void)unlink(fifo);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	write_file("altlink.bin", link, sizeof(link) - 1);
	run((char *const[]){ "objcopy", "--add-section", ".gnu_debugaltlink=altlink.bin", "fx",
			     "fx-alt", NULL });
	wpath(alt, sizeof(alt), "fx-alt");

	plain = open_ok(path);
	linked = open_ok(alt);
	n = fixture_addresses(path, &addrs);
	expect_same_chains(plain, "binary", linked, "binary with an altlink", addrs, n);
}
