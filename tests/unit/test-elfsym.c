/* SPDX-License-Identifier: MIT */
/*
 * test-elfsym.c - unit tests for daemon/elfsym.c.
 *
 * The fixtures are built at run time with the system compiler, so the
 * expected addresses never come from nm or readelf: the fixture itself
 * reports, for each of its functions, the ELF virtual address (run-time
 * address minus its object's load bias from dladdr1) and the file offset
 * (through its own /proc/self/maps, the way the daemon computes it).  The
 * shared-library variant is dlopen'ed into the test and reports the same.
 * Hand-written assembly in the fixture gives nested symbols and a symbol
 * without a size, with a layout known byte by byte.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "symbols/elfsym.h"
#include "fixture.h"
#include "perfd/macro.h"

extern char **environ;

static const char fixture_source[] =
	"#define _GNU_SOURCE\n"
	"#include <dlfcn.h>\n"
	"#include <link.h>\n"
	"#include <stdint.h>\n"
	"#include <stdio.h>\n"
	"\n"
	"__attribute__((noinline)) int fx_alpha(int x) { return x * 3 + 1; }\n"
	"__attribute__((noinline)) int fx_beta(int x) { return fx_alpha(x) - 2; }\n"
	"static __attribute__((noinline, used)) int fx_local(int x) { return x ^ 5; }\n"
	"extern int fx_weak_alias(int x) __attribute__((weak, alias(\"fx_alpha\")));\n"
	"static int fx_local_alias(int x) __attribute__((alias(\"fx_beta\"), used));\n"
	"\n"
	/* fx_outer: 12 bytes with fx_inner nested at +4..+8, then padding to
	 * 16; fx_nosize: 8 bytes without .size, then fx_after. */
	"__asm__(\".pushsection .text\\n\"\n"
	"        \".p2align 4\\n\"\n"
	"        \".globl fx_outer\\n.type fx_outer, @function\\nfx_outer:\\n\"\n"
	"        \"nop\\nnop\\nnop\\nnop\\n\"\n"
	"        \".globl fx_inner\\n.type fx_inner, @function\\nfx_inner:\\n\"\n"
	"        \"nop\\nnop\\nnop\\nnop\\n\"\n"
	"        \".size fx_inner, .-fx_inner\\n\"\n"
	"        \"nop\\nnop\\nnop\\nret\\n\"\n"
	"        \".size fx_outer, .-fx_outer\\n\"\n"
	"        \".p2align 4\\n\"\n"
	"        \".globl fx_nosize\\n.type fx_nosize, @function\\nfx_nosize:\\n\"\n"
	"        \"nop\\nnop\\nnop\\nnop\\nnop\\nnop\\nnop\\nret\\n\"\n"
	"        \".globl fx_after\\n.type fx_after, @function\\nfx_after:\\n\"\n"
	"        \"ret\\n.size fx_after, .-fx_after\\n\"\n"
	"        \".popsection\\n\");\n"
	"void fx_outer(void); void fx_inner(void); void fx_nosize(void); void fx_after(void);\n"
	"\n"
	"static void report(FILE *out, const char *name, void *p)\n"
	"{\n"
	"	uintptr_t a = (uintptr_t)p;\n"
	"	struct link_map *lm = NULL;\n"
	"	unsigned long start, end, off;\n"
	"	char line[4096];\n"
	"	Dl_info info;\n"
	"	FILE *f;\n"
	"\n"
	"	if (!dladdr1(p, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)\n"
	"		return;\n"
	"	f = fopen(\"/proc/self/maps\", \"r\");\n"
	"	if (!f)\n"
	"		return;\n"
	"	while (fgets(line, sizeof(line), f))\n"
	"		if (sscanf(line, \"%lx-%lx %*s %lx\", &start, &end, &off) == 3 &&\n"
	"		    a >= start && a < end)\n"
	"			fprintf(out, \"%s %lx %lx\\n\", name, (unsigned long)(a - lm->l_addr),\n"
	"				(unsigned long)(a - start + off));\n"
	"	fclose(f);\n"
	"}\n"
	"\n"
	"void fx_report(FILE *out)\n"
	"{\n"
	"	report(out, \"fx_alpha\", (void *)fx_alpha);\n"
	"	report(out, \"fx_beta\", (void *)fx_beta);\n"
	"	report(out, \"fx_local\", (void *)fx_local);\n"
	"	report(out, \"fx_outer\", (void *)fx_outer);\n"
	"	report(out, \"fx_inner\", (void *)fx_inner);\n"
	"	report(out, \"fx_nosize\", (void *)fx_nosize);\n"
	"	report(out, \"fx_after\", (void *)fx_after);\n"
	"	report(out, \"fx_report\", (void *)fx_report);\n"
	"}\n"
	"\n"
	"#ifndef FX_LIB\n"
	"int main(void)\n"
	"{\n"
	"	fx_report(stdout);\n"
	"	return fx_local(0) + fx_beta(0) + 1 - 5;\n"
	"}\n"
	"#endif\n";

enum variant {
	VARIANT_PIE,
	VARIANT_NOPIE,
	VARIANT_SHARED,
	VARIANT_STRIPPED,
	_VARIANT_MAX,
};

static const char *const variant_file[_VARIANT_MAX] = {
	[VARIANT_PIE] = "fx-pie",
	[VARIANT_NOPIE] = "fx-nopie",
	[VARIANT_SHARED] = "libfx.so",
	[VARIANT_STRIPPED] = "libfx-stripped.so",
};

#define PIE_BUILD_ID "0123456789abcdef"

struct fx_func {
	char name[32];
	uint64_t vaddr, fileoff;
};

struct fx_report {
	struct fx_func funcs[16];
	size_t n;
};

FIXTURE_SUITE(elfsym, 120);

/* Builds one variant of the fixture in the work directory; returns its path. */
static const char *build(enum variant v, char *path, size_t size)
{
	write_file("fx.c", fixture_source, strlen(fixture_source));
	path_in_workdir(path, size, variant_file[v]);

	switch (v) {
	case VARIANT_PIE:
		run((char *const[]){ "cc", "-O0", "-g", "-fPIE", "-pie",
				     "-Wl,--build-id=0x" PIE_BUILD_ID, "-o", "fx-pie", "fx.c",
				     "-ldl", NULL });
		break;
	case VARIANT_NOPIE:
		run((char *const[]){ "cc", "-O0", "-g", "-fno-pie", "-no-pie",
				     "-Wl,--build-id=none", "-o", "fx-nopie", "fx.c", "-ldl",
				     NULL });
		break;
	case VARIANT_SHARED:
		run((char *const[]){ "cc", "-O0", "-g", "-fPIC", "-shared", "-DFX_LIB",
				     "-Wl,--build-id=sha1", "-o", "libfx.so", "fx.c", "-ldl",
				     NULL });
		break;
	case VARIANT_STRIPPED:
		path_in_workdir(path, size, variant_file[VARIANT_SHARED]);
		if (access(path, F_OK) < 0)
			build(VARIANT_SHARED, path, size);
		path_in_workdir(path, size, variant_file[v]);
		run((char *const[]){ "strip", "--strip-all", "-o", "libfx-stripped.so",
				     "libfx.so", NULL });
		break;
	default:
		cr_assert_fail("bad variant");
	}
	return path;
}

static void parse_report(FILE *f, struct fx_report *ret)
{
	char name[32];
	unsigned long long vaddr, fileoff;

	*ret = (struct fx_report){};
	while (fscanf(f, "%31s %llx %llx", name, &vaddr, &fileoff) == 3) {
		cr_assert_lt(ret->n, ELEMENTSOF(ret->funcs));
		snprintf(ret->funcs[ret->n].name, sizeof(ret->funcs[ret->n].name), "%s", name);
		ret->funcs[ret->n].vaddr = vaddr;
		ret->funcs[ret->n].fileoff = fileoff;
		ret->n++;
	}
	cr_assert_eq(ret->n, 8, "fixture reported %zu functions", ret->n);
}

/* Runs an executable variant and reads what it reports. */
static void run_report(const char *path, struct fx_report *ret)
{
	FILE *p = popen(path, "re");

	cr_assert_not_null(p);
	parse_report(p, ret);
	cr_assert_eq(pclose(p), 0);
}

/* Loads a shared variant into this process and has it report itself.
 * Returns the dlopen handle, to be dlclose'd by the caller. */
static void *dlopen_report(const char *path, struct fx_report *ret)
{
	void (*report)(FILE *);
	char *buf = NULL;
	size_t len = 0;
	FILE *mem;
	void *h;

	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(h, "dlopen: %s", dlerror());
	*(void **)&report = dlsym(h, "fx_report");
	cr_assert_not_null(report);

	mem = open_memstream(&buf, &len);
	cr_assert_not_null(mem);
	report(mem);
	cr_assert_eq(fclose(mem), 0);
	mem = fmemopen(buf, len, "r");
	cr_assert_not_null(mem);
	parse_report(mem, ret);
	(void)fclose(mem);
	free(buf);
	return h;
}

static const struct fx_func *func(const struct fx_report *rep, const char *name)
{
	for (size_t i = 0; i < rep->n; i++)
		if (strcmp(rep->funcs[i].name, name) == 0)
			return &rep->funcs[i];
	cr_assert_fail("fixture did not report %s", name);
	return NULL;
}

static struct elf_symtab *load_ok(const char *path)
{
	struct elf_symtab *t = NULL;
	int r = elf_symtab_load(path, &t);

	cr_assert_eq(r, 0, "elf_symtab_load(%s): %s", path, strerror(-r));
	cr_assert_not_null(t);
	return t;
}

static void expect_symbol(const struct elf_symtab *t, uint64_t vaddr, const char *name,
			  uint64_t offset)
{
	uint64_t got_offset = UINT64_MAX;
	const char *got = elf_symtab_lookup(t, vaddr, &got_offset);

	cr_assert_not_null(got, "nothing at %#" PRIx64 ", expected %s+%" PRIu64, vaddr, name,
			   offset);
	cr_expect_str_eq(got, name, "at %#" PRIx64 ": got %s, expected %s", vaddr, got, name);
	cr_expect_eq(got_offset, offset, "%s: offset %" PRIu64 ", expected %" PRIu64, name,
		     got_offset, offset);
}

static void expect_none(const struct elf_symtab *t, uint64_t vaddr)
{
	uint64_t off = 12345;
	const char *got = elf_symtab_lookup(t, vaddr, &off);

	cr_expect_null(got, "%#" PRIx64 " gave %s+%" PRIu64, vaddr, got, off);
	cr_expect_eq(off, 12345, "offset written on a miss");
}

/* What every variant must get right: each C function by address, inside
 * it, and through the file offset as the daemon would compute it. */
static void check_c_functions(const struct elf_symtab *t, const struct fx_report *rep)
{
	static const char *const names[] = { "fx_alpha", "fx_beta", "fx_local", "fx_report" };

	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		const struct fx_func *f = func(rep, names[i]);
		uint64_t vaddr = 0;

		expect_symbol(t, f->vaddr, names[i], 0);
		expect_symbol(t, f->vaddr + 3, names[i], 3);
		cr_expect_eq(elf_symtab_offset_to_vaddr(t, f->fileoff, &vaddr), 0);
		cr_expect_eq(vaddr, f->vaddr, "%s: offset %#" PRIx64 " -> %#" PRIx64
			     ", expected %#" PRIx64, names[i], f->fileoff, vaddr, f->vaddr);
		cr_expect_eq(elf_symtab_offset_to_vaddr(t, f->fileoff + 3, &vaddr), 0);
		expect_symbol(t, vaddr, names[i], 3);
	}
}

Test(elfsym, pie_executable)
{
	char path[PATH_MAX];
	struct fx_report rep;
	struct elf_symtab *t;

	run_report(build(VARIANT_PIE, path, sizeof(path)), &rep);
	t = load_ok(path);
	check_c_functions(t, &rep);
	/* PIE code is linked at small addresses, not at 0x400000 */
	cr_expect_lt(func(&rep, "fx_alpha")->vaddr, 0x400000);
	cr_expect_gt(elf_symtab_count(t), 8);
	cr_expect_gt(elf_symtab_memory(t), elf_symtab_count(t) * 8);
	elf_symtab_free(t);
}

Test(elfsym, non_pie_executable)
{
	char path[PATH_MAX];
	struct fx_report rep;
	struct elf_symtab *t;

	run_report(build(VARIANT_NOPIE, path, sizeof(path)), &rep);
	t = load_ok(path);
	check_c_functions(t, &rep);
	/* here the file offset and the address really differ */
	cr_expect_geq(func(&rep, "fx_alpha")->vaddr, 0x400000);
	cr_expect_neq(func(&rep, "fx_alpha")->vaddr, func(&rep, "fx_alpha")->fileoff);
	elf_symtab_free(t);
}

Test(elfsym, aliases_prefer_global_name)
{
	char path[PATH_MAX];
	struct fx_report rep;
	struct elf_symtab *t;

	run_report(build(VARIANT_PIE, path, sizeof(path)), &rep);
	t = load_ok(path);
	/* fx_weak_alias (weak) and fx_local_alias (local) share addresses
	 * with the global names */
	expect_symbol(t, func(&rep, "fx_alpha")->vaddr, "fx_alpha", 0);
	expect_symbol(t, func(&rep, "fx_beta")->vaddr, "fx_beta", 0);
	elf_symtab_free(t);
}

Test(elfsym, nested_and_sizeless_symbols)
{
	char path[PATH_MAX];
	struct fx_report rep;
	struct elf_symtab *t;
	uint64_t outer, nosize;

	run_report(build(VARIANT_PIE, path, sizeof(path)), &rep);
	t = load_ok(path);
	outer = func(&rep, "fx_outer")->vaddr;
	nosize = func(&rep, "fx_nosize")->vaddr;
	cr_assert_eq(func(&rep, "fx_inner")->vaddr, outer + 4);
	cr_assert_eq(outer % 16, 0);
	cr_assert_eq(nosize, outer + 16);
	cr_assert_eq(func(&rep, "fx_after")->vaddr, nosize + 8);

	expect_symbol(t, outer, "fx_outer", 0);
	expect_symbol(t, outer + 3, "fx_outer", 3);
	expect_symbol(t, outer + 4, "fx_inner", 0);
	expect_symbol(t, outer + 7, "fx_inner", 3);
	/* the enclosing function resumes after the nested one */
	expect_symbol(t, outer + 8, "fx_outer", 8);
	expect_symbol(t, outer + 11, "fx_outer", 11);
	/* alignment padding after a sized symbol belongs to nobody */
	expect_none(t, outer + 12);
	expect_none(t, outer + 15);

	/* a symbol of size 0 covers up to the next one */
	expect_symbol(t, nosize, "fx_nosize", 0);
	expect_symbol(t, nosize + 7, "fx_nosize", 7);
	expect_symbol(t, nosize + 8, "fx_after", 0);
	elf_symtab_free(t);
}

Test(elfsym, misses_before_and_after)
{
	char path[PATH_MAX];
	struct fx_report rep;
	struct elf_symtab *t;

	run_report(build(VARIANT_NOPIE, path, sizeof(path)), &rep);
	t = load_ok(path);
	expect_none(t, 0);
	expect_none(t, 1);
	/* the ELF header at the link base is before any function */
	expect_none(t, 0x400000);
	expect_none(t, UINT64_MAX);
	/* a NULL offset pointer is allowed */
	cr_expect_str_eq(elf_symtab_lookup(t, func(&rep, "fx_beta")->vaddr + 1, NULL), "fx_beta");
	elf_symtab_free(t);
}

Test(elfsym, offset_outside_any_segment)
{
	char path[PATH_MAX];
	struct elf_symtab *t;
	uint64_t vaddr = 42;
	struct stat st;

	build(VARIANT_NOPIE, path, sizeof(path));
	t = load_ok(path);
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_eq(elf_symtab_offset_to_vaddr(t, (uint64_t)st.st_size + 0x100000, &vaddr),
		     -ENOENT);
	cr_expect_eq(elf_symtab_offset_to_vaddr(t, UINT64_MAX, &vaddr), -ENOENT);
	cr_expect_eq(vaddr, 42, "output written on failure");
	/* offset 0 is the ELF header, inside the first PT_LOAD of a non-PIE */
	cr_expect_eq(elf_symtab_offset_to_vaddr(t, 0, &vaddr), 0);
	cr_expect_eq(vaddr, 0x400000);
	elf_symtab_free(t);
}

Test(elfsym, build_id)
{
	char path[PATH_MAX];
	struct elf_symtab *t;
	const char *id;

	t = load_ok(build(VARIANT_PIE, path, sizeof(path)));
	cr_expect_str_eq(elf_symtab_build_id(t), PIE_BUILD_ID);
	elf_symtab_free(t);

	t = load_ok(build(VARIANT_NOPIE, path, sizeof(path)));
	cr_expect_str_eq(elf_symtab_build_id(t), "");
	elf_symtab_free(t);

	t = load_ok(build(VARIANT_SHARED, path, sizeof(path)));
	id = elf_symtab_build_id(t);
	cr_expect_eq(strlen(id), 40, "sha1 build-id: %s", id);
	cr_expect_eq(strspn(id, "0123456789abcdef"), strlen(id), "not lowercase hex: %s", id);
	elf_symtab_free(t);
}

Test(elfsym, shared_library_in_process)
{
	char path[PATH_MAX];
	struct fx_report rep;
	struct elf_symtab *t;
	void *h;

	h = dlopen_report(build(VARIANT_SHARED, path, sizeof(path)), &rep);
	t = load_ok(path);
	check_c_functions(t, &rep);
	expect_symbol(t, func(&rep, "fx_inner")->vaddr + 1, "fx_inner", 1);
	elf_symtab_free(t);
	dlclose(h);
}

Test(elfsym, stripped_library_keeps_dynsym)
{
	char path[PATH_MAX], stripped[PATH_MAX];
	struct elf_symtab *full, *t;
	struct fx_report rep;
	uint64_t off;
	const char *name;
	void *h;

	h = dlopen_report(build(VARIANT_SHARED, path, sizeof(path)), &rep);
	build(VARIANT_STRIPPED, stripped, sizeof(stripped));
	full = load_ok(path);
	t = load_ok(stripped);

	/* strip keeps the layout, so the unstripped report still applies */
	expect_symbol(t, func(&rep, "fx_alpha")->vaddr, "fx_alpha", 0);
	expect_symbol(t, func(&rep, "fx_beta")->vaddr + 3, "fx_beta", 3);
	expect_symbol(t, func(&rep, "fx_report")->vaddr, "fx_report", 0);
	expect_symbol(t, func(&rep, "fx_outer")->vaddr + 8, "fx_outer", 8);
	/* a static function lived only in .symtab */
	name = elf_symtab_lookup(t, func(&rep, "fx_local")->vaddr, &off);
	cr_expect(!name || strcmp(name, "fx_local") != 0);
	expect_symbol(full, func(&rep, "fx_local")->vaddr, "fx_local", 0);

	cr_expect_lt(elf_symtab_count(t), elf_symtab_count(full));
	/* 8 exported functions, fx_weak_alias merged into fx_alpha */
	cr_expect_eq(elf_symtab_count(t), 7);
	cr_expect_str_eq(elf_symtab_build_id(t), elf_symtab_build_id(full));
	elf_symtab_free(full);
	elf_symtab_free(t);
	dlclose(h);
}

Test(elfsym, not_elf)
{
	static const char text[] = "#!/bin/sh\necho this is not ELF\n";
	static const char truncated_header[] = "\177ELF\002\001\001";
	char path[PATH_MAX];
	struct elf_symtab *t = NULL;

	write_file("script", text, sizeof(text) - 1);
	path_in_workdir(path, sizeof(path), "script");
	cr_expect_eq(elf_symtab_load(path, &t), -ENOEXEC);

	write_file("empty", "", 0);
	path_in_workdir(path, sizeof(path), "empty");
	cr_expect_eq(elf_symtab_load(path, &t), -ENOEXEC);

	write_file("short", "\177EL", 3);
	path_in_workdir(path, sizeof(path), "short");
	cr_expect_eq(elf_symtab_load(path, &t), -ENOEXEC);

	write_file("truncated", truncated_header, sizeof(truncated_header) - 1);
	path_in_workdir(path, sizeof(path), "truncated");
	cr_expect_eq(elf_symtab_load(path, &t), -ENOEXEC);

	path_in_workdir(path, sizeof(path), "does-not-exist");
	cr_expect_eq(elf_symtab_load(path, &t), -ENOENT);

	cr_expect_eq(elf_symtab_load(workdir, &t), -EISDIR);
	cr_expect_null(t, "output written on failure");
}

Test(elfsym, load_fd_leaves_fd_alone)
{
	char path[PATH_MAX];
	struct elf_symtab *t = NULL;
	int fd;

	build(VARIANT_PIE, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	/* the position does not matter: everything is read with pread */
	cr_assert_gt(lseek(fd, 0, SEEK_END), 0);
	cr_assert_eq(elf_symtab_load_fd(fd, &t), 0);
	cr_expect_eq(lseek(fd, 0, SEEK_CUR), lseek(fd, 0, SEEK_END), "fd position moved");
	cr_expect_geq(fcntl(fd, F_GETFD), 0, "fd was closed");
	cr_expect_gt(elf_symtab_count(t), 0);
	elf_symtab_free(t);
	(void)close(fd);
}

Test(elfsym, system_libc_round_trip)
{
	static const char *const funcs[] = { "malloc", "free", "qsort", "getpid", "printf",
					     "strtoull", "fopen" };
	struct elf_symtab *t;
	struct link_map *lm = NULL;
	Dl_info info;
	void *h, *addr;

	/* A handle on libc itself resolves to libc's definitions even when a
	 * sanitizer interposes malloc. */
	h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	cr_assert_not_null(h, "dlopen libc: %s", dlerror());
	addr = dlsym(h, "qsort");
	cr_assert_not_null(addr);
	cr_assert(dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm);
	cr_assert_not_null(info.dli_fname);

	t = load_ok(info.dli_fname);
	cr_expect_gt(elf_symtab_count(t), 1000);
	cr_expect_eq(strlen(elf_symtab_build_id(t)) % 2, 0);
	cr_expect_gt(strlen(elf_symtab_build_id(t)), 0);

	for (size_t i = 0; i < ELEMENTSOF(funcs); i++) {
		uint64_t vaddr, off = 1;
		const char *name;

		addr = dlsym(h, funcs[i]);
		cr_assert_not_null(addr, "%s", funcs[i]);
		vaddr = (uint64_t)(uintptr_t)addr - lm->l_addr;
		name = elf_symtab_lookup(t, vaddr, &off);
		cr_assert_not_null(name, "%s not found at %#" PRIx64, funcs[i], vaddr);
		cr_expect_eq(off, 0, "%s found as %s+%" PRIu64, funcs[i], name, off);
		/* the chosen name may be an alias; it must be the same code */
		cr_expect_eq(dlsym(h, name), addr, "%s found as %s", funcs[i], name);
		name = elf_symtab_lookup(t, vaddr + 1, &off);
		cr_expect_not_null(name);
		cr_expect_eq(off, 1);
	}
	elf_symtab_free(t);
	dlclose(h);
}

/* glibc-style symbol versions: free_like shares its code with a hidden
 * compat symbol that sorts first, and vers exists only as vers@@VER_2. */
static const char versioned_source[] =
	"int free_like(int x) { return x + 1; }\n"
	"extern int compat_impl(int x) __attribute__((alias(\"free_like\")));\n"
	"__asm__(\".symver compat_impl, aaa_compat@VER_1\");\n"
	"int newer(int x) { return x + 2; }\n"
	"__asm__(\".symver newer, vers@@VER_2\");\n";
static const char versioned_map[] =
	"VER_1 { global: free_like; aaa_compat; local: *; };\n"
	"VER_2 { global: vers; } VER_1;\n";

Test(elfsym, symbol_versions)
{
	static const char *const files[] = { "libv.so", "libv-stripped.so" };
	struct link_map *lm = NULL;
	uint64_t free_like, vers;
	char path[PATH_MAX];
	Dl_info info;
	void *h, *p;

	write_file("v.c", versioned_source, strlen(versioned_source));
	write_file("v.map", versioned_map, strlen(versioned_map));
	run((char *const[]){ "cc", "-O0", "-fPIC", "-shared", "-Wl,--version-script=v.map",
			     "-o", "libv.so", "v.c", NULL });
	run((char *const[]){ "strip", "--strip-all", "-o", "libv-stripped.so", "libv.so", NULL });

	path_in_workdir(path, sizeof(path), "libv.so");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(h, "dlopen: %s", dlerror());
	p = dlsym(h, "free_like");
	cr_assert_not_null(p);
	cr_assert(dladdr1(p, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm);
	free_like = (uint64_t)(uintptr_t)p - lm->l_addr;
	p = dlsym(h, "vers");
	cr_assert_not_null(p);
	vers = (uint64_t)(uintptr_t)p - lm->l_addr;

	/* .symtab path (names with @/@@) and .dynsym path (.gnu.version) */
	for (size_t i = 0; i < ELEMENTSOF(files); i++) {
		struct elf_symtab *t;

		path_in_workdir(path, sizeof(path), files[i]);
		t = load_ok(path);
		expect_symbol(t, free_like, "free_like", 0);
		expect_symbol(t, vers + 1, "vers", 1);
		elf_symtab_free(t);
	}
	dlclose(h);
}

static double monotonic_seconds(void)
{
	struct timespec ts;

	cr_assert_eq(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define MANY 100000

/* Writes many.s: MANY functions of 16 bytes each (3 bytes of code, then
 * padding), one after the other, named many_0, many_1, ...; with
 * hide_odd, the odd ones are hidden, so only .symtab has them. */
static void write_many_source(bool hide_odd)
{
	_cleanup_free_ char *src = NULL;
	size_t len = 0;
	FILE *f;

	f = open_memstream(&src, &len);
	cr_assert_not_null(f);
	fprintf(f, ".section .note.GNU-stack, \"\", @progbits\n.text\n.p2align 4\n");
	for (int i = 0; i < MANY; i++) {
		if (hide_odd && i % 2)
			fprintf(f, ".hidden many_%d\n", i);
		fprintf(f, ".globl many_%d\n.type many_%d, @function\nmany_%d:\n"
			   "xor %%eax, %%eax\nret\n.size many_%d, .-many_%d\n.p2align 4\n",
			i, i, i, i, i);
	}
	cr_assert_eq(fclose(f), 0);
	write_file("many.s", src, len);
}

/* Every one of MANY functions many_<i> of 3 bytes, loaded at 16-byte steps
 * from base: its name at base + 16 i + 2, nothing in the padding after it. */
static void expect_many_names(const struct elf_symtab *t, uint64_t base)
{
	char name[32];

	for (int i = 0; i < MANY; i++) {
		uint64_t vaddr = base + (uint64_t)i * 16, off = UINT64_MAX;
		const char *got;

		snprintf(name, sizeof(name), "many_%d", i);
		got = elf_symtab_lookup(t, vaddr + 2, &off);
		if (!got || strcmp(got, name) != 0 || off != 2)
			cr_assert_fail("%#" PRIx64 ": got %s+%" PRIu64 ", expected %s+2", vaddr,
				       got ? got : "(null)", off, name);
		if (elf_symtab_lookup(t, vaddr + 3, &off))
			cr_assert_fail("padding after %s is attributed", name);
	}
}

/* A library of MANY functions of 16 bytes each, one after the other, in
 * both .symtab and .dynsym: the loader must merge 200k entries, and every
 * lookup is checked. */
Test(elfsym, hundred_thousand_symbols)
{
	char path[PATH_MAX];
	struct elf_symtab *t = NULL;
	uint64_t base;
	struct link_map *lm = NULL;
	Dl_info info;
	double t0, elapsed;
	void *h, *first, *last;

	write_many_source(false);
	run((char *const[]){ "cc", "-shared", "-o", "libmany.so", "many.s", NULL });
	path_in_workdir(path, sizeof(path), "libmany.so");

	t0 = monotonic_seconds();
	cr_assert_eq(elf_symtab_load(path, &t), 0);
	elapsed = monotonic_seconds() - t0;
	cr_log_info("loaded %zu symbols in %.3f s, %zu bytes", elf_symtab_count(t), elapsed,
		    elf_symtab_memory(t));
	cr_expect_lt(elapsed, 3.0, "loading took %.3f s", elapsed);
	/* .symtab and .dynsym duplicates are merged */
	cr_expect_geq(elf_symtab_count(t), MANY);
	cr_expect_lt(elf_symtab_count(t), MANY + 50);
	cr_expect_lt(elf_symtab_memory(t), (size_t)MANY * 64);

	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(h, "dlopen: %s", dlerror());
	first = dlsym(h, "many_0");
	last = dlsym(h, "many_99999");
	cr_assert(first && last);
	cr_assert(dladdr1(first, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm);
	base = (uint64_t)(uintptr_t)first - lm->l_addr;
	cr_assert_eq((uintptr_t)last - (uintptr_t)first, (uintptr_t)16 * (MANY - 1));

	t0 = monotonic_seconds();
	expect_many_names(t, base);
	elapsed = monotonic_seconds() - t0;
	cr_expect_lt(elapsed, 2.0, "%d lookups took %.3f s", 2 * MANY, elapsed);

	elf_symtab_free(t);
	dlclose(h);
}

Test(elfsym, big_system_library_if_present)
{
	static const char *const candidates[] = {
		"/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1",
		"/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1",
		"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	};
	struct elf_symtab *t = NULL;
	double t0, elapsed;

	for (size_t i = 0; i < ELEMENTSOF(candidates); i++) {
		if (access(candidates[i], R_OK) < 0)
			continue;
		t0 = monotonic_seconds();
		cr_assert_eq(elf_symtab_load(candidates[i], &t), 0, "%s", candidates[i]);
		elapsed = monotonic_seconds() - t0;
		cr_log_info("%s: %zu symbols in %.3f s", candidates[i], elf_symtab_count(t),
			    elapsed);
		cr_expect_gt(elf_symtab_count(t), 1000);
		cr_expect_lt(elapsed, 3.0, "%s took %.3f s", candidates[i], elapsed);
		t = elf_symtab_free(t);
		return;
	}
	cr_skip_test("no large system library on this machine");
}

/* Splits libfx.so's debug file off (libfx.debug) and strips it
 * (libfx-stripped.so), as distributions ship it; the fixture reports
 * itself through the unstripped library, whose layout strip keeps.
 * Returns the dlopen handle. */
static void *build_split_library(char *full, char *stripped, size_t size, struct fx_report *rep)
{
	void *h = dlopen_report(build(VARIANT_SHARED, full, size), rep);

	build(VARIANT_STRIPPED, stripped, size);
	run((char *const[]){ "objcopy", "--only-keep-debug", "libfx.so", "libfx.debug", NULL });
	return h;
}

/* a and b name every byte around the fixture's functions alike. */
static void expect_same_names(const struct elf_symtab *a, const struct elf_symtab *b,
			      const struct fx_report *rep)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	for (size_t i = 0; i < rep->n; i++) {
		lo = MIN(lo, rep->funcs[i].vaddr);
		hi = MAX(hi, rep->funcs[i].vaddr);
	}
	/* and the compiler's static helpers (frame_dummy, ...) around them */
	lo = lo > 512 ? lo - 512 : 0;
	hi += 512;
	for (uint64_t v = lo; v < hi; v++) {
		uint64_t oa = 0, ob = 0;
		const char *na = elf_symtab_lookup(a, v, &oa);
		const char *nb = elf_symtab_lookup(b, v, &ob);

		if (!na && !nb)
			continue;
		if (!na || !nb || strcmp(na, nb) != 0 || oa != ob)
			cr_assert_fail("%#" PRIx64 ": %s+%" PRIu64 " vs %s+%" PRIu64, v,
				       na ? na : "(none)", oa, nb ? nb : "(none)", ob);
	}
}

Test(elfsym, stripped_library_plus_debug_file)
{
	char path[PATH_MAX], stripped[PATH_MAX], debug[PATH_MAX];
	struct elf_symtab *full, *t;
	struct fx_report rep;
	size_t before;
	void *h;
	int fd, r;

	h = build_split_library(path, stripped, sizeof(path), &rep);
	full = load_ok(path);
	t = load_ok(stripped);
	cr_expect(elf_symtab_has_symtab(full));
	cr_expect_not(elf_symtab_has_symtab(t));

	/* alone, the stripped library names only what .dynsym has */
	expect_symbol(t, func(&rep, "fx_alpha")->vaddr + 3, "fx_alpha", 3);
	cr_expect_neq(strcmp(elf_symtab_lookup(t, func(&rep, "fx_local")->vaddr, NULL) ?: "",
			     "fx_local"),
		      0);
	before = elf_symtab_count(t);

	path_in_workdir(debug, sizeof(debug), "libfx.debug");
	fd = open(debug, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	r = elf_symtab_add_from_fd(t, fd);
	cr_assert_gt(r, 0, "add_from_fd: %d", r);
	cr_expect_eq(elf_symtab_count(t), before + (size_t)r);
	cr_expect(elf_symtab_has_symtab(t));

	/* the static function, at its address and inside it */
	expect_symbol(t, func(&rep, "fx_local")->vaddr, "fx_local", 0);
	expect_symbol(t, func(&rep, "fx_local")->vaddr + 3, "fx_local", 3);
	/* offsets still go through the library's own segments */
	check_c_functions(t, &rep);
	/* aliases rank as in the unstripped file: fx_beta over its local
	 * alias, fx_alpha over its weak one; nesting and sizes as well */
	expect_symbol(t, func(&rep, "fx_beta")->vaddr, "fx_beta", 0);
	expect_symbol(t, func(&rep, "fx_alpha")->vaddr, "fx_alpha", 0);
	expect_symbol(t, func(&rep, "fx_outer")->vaddr + 8, "fx_outer", 8);
	expect_symbol(t, func(&rep, "fx_nosize")->vaddr + 7, "fx_nosize", 7);
	cr_expect_eq(elf_symtab_count(t), elf_symtab_count(full));
	expect_same_names(full, t, &rep);

	/* merging the same file again adds nothing and changes nothing */
	cr_expect_eq(elf_symtab_add_from_fd(t, fd), 0);
	cr_expect_eq(elf_symtab_count(t), elf_symtab_count(full));
	expect_same_names(full, t, &rep);
	cr_expect_geq(fcntl(fd, F_GETFD), 0, "fd was closed");

	(void)close(fd);
	elf_symtab_free(full);
	elf_symtab_free(t);
	dlclose(h);
}

/* Reads a whole file into a malloc'd buffer. */
static void *read_whole(const char *name, size_t *ret_size)
{
	char path[PATH_MAX];
	struct stat st;
	void *buf;
	int fd;

	path_in_workdir(path, sizeof(path), name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	cr_assert_not_null(buf);
	cr_assert_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	(void)close(fd);
	*ret_size = (size_t)st.st_size;
	return buf;
}

/* Fedora's MiniDebugInfo, before xz, into "mini", for the stripped file $1
 * and its debug file $2: the function symbols that .dynsym lacks, without
 * the DWARF. */
static void make_minidebuginfo(const char *stripped, const char *debug)
{
	static const char script[] =
		"set -e\n"
		"nm -D \"$1\" --format=posix --defined-only | awk '{ print $1 }' | sort > dynsyms\n"
		"nm \"$2\" --format=sysv --defined-only |"
		" awk -F '|' '$4 ~ /FUNC/ { gsub(/ /, \"\", $1); print $1 }' | sort > funcsyms\n"
		"comm -13 dynsyms funcsyms > keep\n"
		"objcopy -S --remove-section .comment --keep-symbols=keep \"$2\" mini\n";

	write_file("mini.sh", script, sizeof(script) - 1);
	run((char *const[]){ "sh", "mini.sh", (char *)stripped, (char *)debug, NULL });
}

Test(elfsym, stripped_library_plus_minidebuginfo)
{
	char path[PATH_MAX], stripped[PATH_MAX];
	struct elf_symtab *full, *t;
	struct fx_report rep;
	void *image;
	size_t size;
	void *h;
	int r;

	h = build_split_library(path, stripped, sizeof(path), &rep);
	make_minidebuginfo("libfx-stripped.so", "libfx.debug");
	full = load_ok(path);
	t = load_ok(stripped);

	image = read_whole("mini", &size);
	r = elf_symtab_add_from_memory(t, image, size);
	/* the table keeps nothing of the image */
	memset(image, 0, size);
	free(image);
	cr_assert_gt(r, 0, "add_from_memory: %d", r);
	cr_expect(elf_symtab_has_symtab(t));

	expect_symbol(t, func(&rep, "fx_local")->vaddr, "fx_local", 0);
	expect_symbol(t, func(&rep, "fx_local")->vaddr + 3, "fx_local", 3);
	check_c_functions(t, &rep);
	cr_expect_eq(elf_symtab_count(t), elf_symtab_count(full));
	expect_same_names(full, t, &rep);

	elf_symtab_free(full);
	elf_symtab_free(t);
	dlclose(h);
}

/* In an executable, a global function can be exported (.dynsym) while a
 * global alias of it is not; both are in .symtab, where the name sorting
 * first wins.  MiniDebugInfo holds only the alias, and the merge must
 * still choose as the unstripped file does. */
Test(elfsym, minidebuginfo_ranks_aliases_like_unstripped)
{
	static const char source[] =
		"#define _GNU_SOURCE\n"
		"#include <dlfcn.h>\n"
		"#include <link.h>\n"
		"#include <stdint.h>\n"
		"#include <stdio.h>\n"
		"int aaa_exported(int x) { return x + 1; }\n"
		"extern int zzz_alias(int x) __attribute__((alias(\"aaa_exported\")));\n"
		"int main(void)\n"
		"{\n"
		"	struct link_map *lm = NULL;\n"
		"	Dl_info info;\n"
		"\n"
		"	if (!dladdr1((void *)zzz_alias, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)\n"
		"		return 1;\n"
		"	printf(\"%lx\\n\", (unsigned long)((uintptr_t)zzz_alias - lm->l_addr));\n"
		"	return 0;\n"
		"}\n";
	char path[PATH_MAX];
	struct elf_symtab *full, *t;
	unsigned long long vaddr;
	size_t size;
	void *image;
	FILE *p;

	write_file("alias.c", source, sizeof(source) - 1);
	run((char *const[]){ "cc", "-O0", "-g", "-Wl,--export-dynamic-symbol=aaa_exported",
			     "-o", "alias", "alias.c", NULL });
	run((char *const[]){ "objcopy", "--only-keep-debug", "alias", "alias.debug", NULL });
	run((char *const[]){ "strip", "--strip-all", "-o", "alias-stripped", "alias", NULL });
	make_minidebuginfo("alias-stripped", "alias.debug");

	path_in_workdir(path, sizeof(path), "alias");
	p = popen(path, "re");
	cr_assert_not_null(p);
	cr_assert_eq(fscanf(p, "%llx", &vaddr), 1);
	cr_assert_eq(pclose(p), 0);

	full = load_ok(path);
	expect_symbol(full, vaddr + 1, "aaa_exported", 1);
	path_in_workdir(path, sizeof(path), "alias-stripped");
	t = load_ok(path);
	expect_symbol(t, vaddr + 1, "aaa_exported", 1);

	image = read_whole("mini", &size);
	cr_assert_gt(elf_symtab_add_from_memory(t, image, size), 0);
	free(image);
	expect_symbol(t, vaddr + 1, "aaa_exported", 1);
	cr_expect_eq(elf_symtab_count(t), elf_symtab_count(full));
	elf_symtab_free(full);
	elf_symtab_free(t);
}

Test(elfsym, add_refuses_foreign_or_broken_input)
{
	static const char junk[] = "\177ELF but not really an ELF file at all";
	char path[PATH_MAX], stripped[PATH_MAX], other[PATH_MAX];
	struct elf_symtab *t;
	struct fx_report rep;
	size_t before;
	void *h;
	int fd;

	h = build_split_library(path, stripped, sizeof(path), &rep);
	t = load_ok(stripped);
	before = elf_symtab_count(t);

	/* the debug file of another build (the PIE fixture's) */
	build(VARIANT_PIE, other, sizeof(other));
	run((char *const[]){ "objcopy", "--only-keep-debug", "fx-pie", "fx-pie.debug", NULL });
	path_in_workdir(other, sizeof(other), "fx-pie.debug");
	fd = open(other, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_expect_eq(elf_symtab_add_from_fd(t, fd), -ESTALE);
	(void)close(fd);

	path_in_workdir(other, sizeof(other), "fx.c");
	fd = open(other, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_expect_eq(elf_symtab_add_from_fd(t, fd), -ENOEXEC);
	(void)close(fd);
	cr_expect_eq(elf_symtab_add_from_fd(t, -1), -EBADF);

	cr_expect_eq(elf_symtab_add_from_memory(t, "text", 4), -ENOEXEC);
	cr_expect_eq(elf_symtab_add_from_memory(t, junk, sizeof(junk)), -ENOEXEC);
	cr_expect_eq(elf_symtab_add_from_memory(t, NULL, 0), -ENOEXEC);
	cr_expect_eq(elf_symtab_add_from_memory(NULL, junk, sizeof(junk)), -EINVAL);

	/* t is as it was */
	cr_expect_eq(elf_symtab_count(t), before);
	cr_expect_not(elf_symtab_has_symtab(t));
	expect_symbol(t, func(&rep, "fx_alpha")->vaddr + 3, "fx_alpha", 3);
	elf_symtab_free(t);
	dlclose(h);
}

/* MANY functions, the odd half hidden, so that the stripped library's
 * .dynsym names 50k and its debug file all 100k: the merge must stay fast
 * and name every one. */
Test(elfsym, hundred_thousand_symbols_from_debug_file)
{
	char path[PATH_MAX];
	struct elf_symtab *t = NULL;
	struct link_map *lm = NULL;
	uint64_t base;
	double t0, load_s, add_s;
	void *h, *first, *last;
	Dl_info info;
	int fd, r;

	write_many_source(true);
	run((char *const[]){ "cc", "-shared", "-Wl,--build-id", "-o", "libmany.so", "many.s",
			     NULL });
	run((char *const[]){ "objcopy", "--only-keep-debug", "libmany.so", "libmany.debug",
			     NULL });
	run((char *const[]){ "strip", "--strip-all", "-o", "libmany-stripped.so", "libmany.so",
			     NULL });

	path_in_workdir(path, sizeof(path), "libmany-stripped.so");
	t0 = monotonic_seconds();
	cr_assert_eq(elf_symtab_load(path, &t), 0);
	load_s = monotonic_seconds() - t0;
	cr_expect_geq(elf_symtab_count(t), MANY / 2);
	cr_expect_lt(elf_symtab_count(t), MANY / 2 + 50);

	path_in_workdir(path, sizeof(path), "libmany.debug");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	t0 = monotonic_seconds();
	r = elf_symtab_add_from_fd(t, fd);
	add_s = monotonic_seconds() - t0;
	(void)close(fd);
	cr_assert_geq(r, MANY / 2, "add_from_fd: %d", r);
	cr_log_info("stripped: %.3f s; debug file merged, %d new, %zu symbols in %.3f s, %zu bytes",
		    load_s, r, elf_symtab_count(t), add_s, elf_symtab_memory(t));
	cr_expect_lt(add_s, 3.0, "merging took %.3f s", add_s);
	cr_expect_geq(elf_symtab_count(t), MANY);
	cr_expect_lt(elf_symtab_count(t), MANY + 50);
	cr_expect_lt(elf_symtab_memory(t), (size_t)MANY * 64);

	path_in_workdir(path, sizeof(path), "libmany.so");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(h, "dlopen: %s", dlerror());
	first = dlsym(h, "many_0");
	last = dlsym(h, "many_99998");
	cr_assert(first && last);
	cr_assert_null(dlsym(h, "many_1"), "odd functions should be hidden");
	cr_assert(dladdr1(first, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm);
	base = (uint64_t)(uintptr_t)first - lm->l_addr;
	cr_assert_eq((uintptr_t)last - (uintptr_t)first, (uintptr_t)16 * (MANY - 2));

	expect_many_names(t, base);
	elf_symtab_free(t);
	dlclose(h);
}

Test(elfsym, null_object_is_harmless)
{
	uint64_t v;

	cr_expect_not(elf_symtab_has_symtab(NULL));
	cr_expect_eq(elf_symtab_add_from_fd(NULL, 0), -EINVAL);

	cr_expect_null(elf_symtab_free(NULL));
	cr_expect_null(elf_symtab_lookup(NULL, 0x1000, NULL));
	cr_expect_eq(elf_symtab_offset_to_vaddr(NULL, 0, &v), -ENOENT);
	cr_expect_eq(elf_symtab_count(NULL), 0);
	cr_expect_eq(elf_symtab_memory(NULL), 0);
	cr_expect_str_eq(elf_symtab_build_id(NULL), "");
}

/* A symbol table (or the string table it links to) whose header says it is
 * past ELFSYM_MAX_TABLE_BYTES is refused before it is read, whatever the
 * file holds: this program with its .symtab's, then its .strtab's, size
 * raised in its section header. */
Test(elfsym, table_past_the_cap_is_refused_unread)
{
	for (int which = 0; which < 2; which++) {
		_cleanup_free_ uint8_t *image = NULL;
		struct elf_symtab *t = NULL;
		_cleanup_close_ int fd = -1;
		char path[PATH_MAX];
		Elf64_Ehdr *eh;
		Elf64_Shdr *sh;
		struct stat st;
		FILE *f = fopen("/proc/self/exe", "rb");
		bool patched = false;

		cr_assert_not_null(f);
		cr_assert_eq(fstat(fileno(f), &st), 0);
		image = malloc((size_t)st.st_size);
		cr_assert_eq(fread(image, 1, (size_t)st.st_size, f), (size_t)st.st_size);
		fclose(f);
		eh = (Elf64_Ehdr *)image;
		sh = (Elf64_Shdr *)(image + eh->e_shoff);
		for (size_t i = 0; i < eh->e_shnum && !patched; i++) {
			if (sh[i].sh_type != SHT_SYMTAB)
				continue;
			if (which == 0)
				sh[i].sh_size = ELFSYM_MAX_TABLE_BYTES + 24;
			else
				sh[sh[i].sh_link].sh_size = ELFSYM_MAX_TABLE_BYTES + 1;
			patched = true;
		}
		cr_assert(patched, "this test program has no .symtab");
		write_file("bigtable", image, (size_t)st.st_size);
		path_in_workdir(path, sizeof(path), "bigtable");
		fd = open(path, O_RDONLY | O_CLOEXEC);
		cr_assert_geq(fd, 0);
		cr_expect_eq(elf_symtab_load_fd(fd, &t), -EFBIG, "table %d", which);
		cr_expect_null(t);
	}
}
