/* SPDX-License-Identifier: MIT */
/*
 * test-pyeval.c - unit tests for daemon/interp/python/pyeval.c.
 *
 * GCC's own output first: a function with two unlikely branches, compiled
 * at -O2, has them moved to a part of its own ("f.cold", with an FDE of its
 * own) that it jumps into from two places; the part found from the
 * function's bytes, .eh_frame_hdr and the FDEs must be where .symtab says
 * f.cold is, and f.cold, which jumps back into f twice, must find none (f
 * is a function).  Then made-up tables, FDEs and code for what GCC did not
 * show: tail calls to a function, single jumps, the function's own FDE, a
 * function with more jumps than the part, jumps past a part's code or into
 * the last FDE, FDEs that are not what the table
 * says, and headers that are short, in other encodings or count more than
 * they hold (each copied to a buffer of exactly its size, for ASan).
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interp/python/pyeval.h"
#include "perfd/macro.h"

/* --- GCC's split ------------------------------------------------------- */

static const char split_source[] =
	"__attribute__((cold, noinline)) void fail(int why) { __builtin_printf(\"%d\\n\", why); }\n"
	"int f(const int *a, int n)\n"
	"{\n"
	"	int s = 0;\n"
	"	for (int i = 0; i < n; i++) {\n"
	"		if (a[i] < 0) { fail(1); s -= 7; }\n"
	"		if (a[i] > 1000) { fail(2); s += 9; }\n"
	"		s += a[i];\n"
	"	}\n"
	"	return s;\n"
	"}\n";

struct sym {
	uint64_t vaddr, size;
};

/* The file offset of vaddr, through the PT_LOAD that holds it. */
static uint64_t file_offset(Elf *elf, uint64_t vaddr)
{
	size_t n;

	cr_assert_eq(elf_getphdrnum(elf, &n), 0);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		cr_assert_not_null(gelf_getphdr(elf, (int)i, &ph));
		if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	}
	cr_assert_fail("0x%lx is in no PT_LOAD", (unsigned long)vaddr);
	return 0;
}

static struct sym find_symbol(Elf *elf, const char *want)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 1; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *name;

			if (gelf_getsym(d, (int)i, &s) && (name = elf_strptr(elf, sh.sh_link, s.st_name)) &&
			    strcmp(name, want) == 0)
				return (struct sym){ s.st_value, s.st_size };
		}
	}
	cr_assert_fail("no symbol %s: GCC did not split f", want);
	return (struct sym){ 0, 0 };
}

struct file_ctx {
	int fd;
	Elf *elf;
};

static int read_file(void *ctx, uint64_t vaddr, void *buf, size_t size)
{
	struct file_ctx *c = ctx;

	return pread(c->fd, buf, size, (off_t)file_offset(c->elf, vaddr)) == (ssize_t)size ? 0 :
									      -EIO;
}

Test(pyeval, gccs_cold_part_is_found_where_symtab_puts_it, .timeout = 30)
{
	char dir[] = "/tmp/perfd-pyeval.XXXXXX", src[64], so[64], cmd[256];
	_cleanup_free_ uint8_t *func = NULL, *hdr = NULL;
	uint64_t start = 0, end = 0, hdr_vaddr = 0, hdr_size = 0;
	struct file_ctx ctx;
	struct sym fn, cold;
	size_t nph;
	FILE *out;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/split.c", dir);
	snprintf(so, sizeof(so), "%s/split.so", dir);
	out = fopen(src, "we");
	cr_assert_not_null(out);
	cr_assert_geq(fputs(split_source, out), 0);
	cr_assert_eq(fclose(out), 0);
	snprintf(cmd, sizeof(cmd), "gcc -O2 -shared -fPIC -o %s %s", so, src);
	cr_assert_eq(system(cmd), 0, "%s", cmd);

	elf_version(EV_CURRENT);
	ctx.fd = open(so, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(ctx.fd, 0);
	ctx.elf = elf_begin(ctx.fd, ELF_C_READ, NULL);
	cr_assert_not_null(ctx.elf);
	fn = find_symbol(ctx.elf, "f");
	cold = find_symbol(ctx.elf, "f.cold");
	cr_assert_eq(elf_getphdrnum(ctx.elf, &nph), 0);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		cr_assert_not_null(gelf_getphdr(ctx.elf, (int)i, &ph));
		if (ph.p_type == PT_GNU_EH_FRAME) {
			hdr_vaddr = ph.p_vaddr;
			hdr_size = ph.p_filesz;
		}
	}
	cr_assert_gt(hdr_size, 0, "no PT_GNU_EH_FRAME");
	func = malloc(fn.size);
	hdr = malloc(hdr_size);
	cr_assert(func && hdr);
	cr_assert_eq(read_file(&ctx, fn.vaddr, func, fn.size), 0);
	cr_assert_eq(read_file(&ctx, hdr_vaddr, hdr, hdr_size), 0);

	cr_assert_eq(pyeval_split_part(func, fn.size, fn.vaddr, hdr, hdr_size, hdr_vaddr, read_file,
				       &ctx, &start, &end), 0, "f.cold at 0x%lx not found",
		     (unsigned long)cold.vaddr);
	cr_expect_eq(start, cold.vaddr, "found 0x%lx, f.cold at 0x%lx", (unsigned long)start,
		     (unsigned long)cold.vaddr);
	cr_expect_geq(end, cold.vaddr + cold.size);
	cr_expect_lt(end, cold.vaddr + cold.size + 16, "f.cold ends at 0x%lx, found 0x%lx",
		     (unsigned long)(cold.vaddr + cold.size), (unsigned long)end);
	/* f.cold jumps back into f twice: f begins a frame of its own, no part */
	free(func);
	func = malloc(cold.size);
	cr_assert_not_null(func);
	cr_assert_eq(read_file(&ctx, cold.vaddr, func, cold.size), 0);
	cr_assert_eq(pyeval_split_part(func, cold.size, cold.vaddr, hdr, hdr_size, hdr_vaddr,
				       read_file, &ctx, &start, &end), -ENOENT);
	elf_end(ctx.elf);
	close(ctx.fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* --- made-up tables ---------------------------------------------------- */

#define HDR_VADDR 0x100000u
#define EH_VADDR (HDR_VADDR + 0x200u) /* the FDEs, FDE_SIZE bytes apart */
#define FDE_SIZE 32u
#define FUNC_VADDR 0x3000u
#define FUNC_SIZE 64u
#define PART_SIZE 0x800u

/* FDEs starting at 0x1000, 0x2000, ..., 0x6000; the function's is 0x3000.
 * Those marked part begin in another's frame, the others with a frame of
 * their own. */
static const uint64_t fde_starts[] = { 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000 };

struct image {
	uint8_t eh[ELEMENTSOF(fde_starts) * FDE_SIZE];
	size_t readable; /* bytes of eh the reader gives */
};

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static size_t make_hdr(uint8_t *h, uint8_t table_enc)
{
	size_t n = ELEMENTSOF(fde_starts), at = 12;

	memset(h, 0, 12);
	h[0] = 1;
	h[1] = 0x1b;
	h[2] = 0x03;
	h[3] = table_enc;
	h[8] = (uint8_t)n;
	for (size_t i = 0; i < n; i++) {
		put32(h + at, (uint32_t)(fde_starts[i] - HDR_VADDR));
		put32(h + at + 4, (uint32_t)(EH_VADDR + FDE_SIZE * i - HDR_VADDR));
		at += 8;
	}
	return at;
}

/* The FDEs, the ones in part (a bit each) beginning in another's frame. */
static void make_image(struct image *im, unsigned part)
{
	memset(im, 0, sizeof(*im));
	im->readable = sizeof(im->eh);
	for (size_t i = 0; i < ELEMENTSOF(fde_starts); i++) {
		uint8_t *f = im->eh + FDE_SIZE * i;
		uint64_t at = EH_VADDR + FDE_SIZE * i;

		put32(f, FDE_SIZE - 4);
		put32(f + 4, (uint32_t)(at + 4 - 0x100)); /* a CIE before */
		put32(f + 8, (uint32_t)(fde_starts[i] - (at + 8)));
		put32(f + 12, PART_SIZE);
		f[16] = 0; /* no augmentation data */
		if (part & (1u << i)) {
			f[17] = 0x0e; /* DW_CFA_def_cfa_offset 32 */
			f[18] = 32;
		} else {
			f[17] = 0x41; /* DW_CFA_advance_loc 1 */
			f[18] = 0x0e;
			f[19] = 16;
		}
	}
}

static int read_image(void *ctx, uint64_t vaddr, void *buf, size_t size)
{
	const struct image *im = ctx;

	if (vaddr < EH_VADDR || vaddr - EH_VADDR > im->readable ||
	    size > im->readable - (vaddr - EH_VADDR))
		return -EFAULT;
	memcpy(buf, im->eh + (vaddr - EH_VADDR), size);
	return 0;
}

/* Puts a jmp rel32 (or jcc rel32 when jcc) at func[at] to target. */
static void put_jump(uint8_t *func, size_t at, uint64_t target, bool jcc)
{
	size_t len = jcc ? 6 : 5;

	if (jcc) {
		func[at] = 0x0f;
		func[at + 1] = 0x85;
	} else {
		func[at] = 0xe9;
	}
	put32(func + at + len - 4, (uint32_t)(target - (FUNC_VADDR + at + len)));
}

/* pyeval_split_part over exact-size copies of func and the header. */
static int split(const uint8_t *func, size_t size, const uint8_t *h, size_t hsize,
		 struct image *im, uint64_t *start, uint64_t *end)
{
	_cleanup_free_ uint8_t *f = malloc(size ? size : 1), *hc = malloc(hsize ? hsize : 1);

	cr_assert(f && hc);
	memcpy(f, func, size);
	memcpy(hc, h, hsize);
	return pyeval_split_part(f, size, FUNC_VADDR, hc, hsize, HDR_VADDR, read_image, im, start,
				 end);
}

Test(pyeval, two_jumps_into_a_part_find_it)
{
	uint8_t func[FUNC_SIZE] = { 0 }, h[128];
	size_t hn = make_hdr(h, 0x3b);
	uint64_t start = 0, end = 0;
	struct image im;

	make_image(&im, 1u << 0);
	put_jump(func, 0, 0x1000, false); /* at its first byte, as GCC's first jump */
	put_jump(func, 10, 0x1234, true);
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), 0);
	cr_assert_eq(start, 0x1000);
	cr_assert_eq(end, 0x1000 + PART_SIZE);
}

Test(pyeval, functions_single_jumps_and_its_own_fde_find_nothing)
{
	uint8_t func[FUNC_SIZE] = { 0 }, h[128];
	size_t hn = make_hdr(h, 0x3b);
	uint64_t start, end;
	struct image im;

	make_image(&im, 1u << 3 | 1u << 2);
	/* tail calls to a function, three of them */
	put_jump(func, 0, 0x2000, false);
	put_jump(func, 5, 0x2000, false);
	put_jump(func, 10, 0x2100, true);
	/* one jump into a part, and two into the function's own FDE */
	put_jump(func, 20, 0x4010, false);
	put_jump(func, 30, 0x3100, false);
	put_jump(func, 40, 0x3200, true);
	/* below the first FDE */
	put_jump(func, 50, 0x0100, false);
	put_jump(func, 55, 0x0200, false);
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOENT);
}

Test(pyeval, jumps_past_an_fdes_code_or_into_the_last_fde_find_nothing)
{
	uint8_t func[FUNC_SIZE] = { 0 }, h[128];
	size_t hn = make_hdr(h, 0x3b);
	uint64_t start, end;
	struct image im;

	/* into a part, and past its code (PART_SIZE) before the next FDE */
	make_image(&im, 1u << 0 | 1u << 5);
	put_jump(func, 0, 0x1100, false);
	put_jump(func, 5, 0x1000 + PART_SIZE + 0x10, false);
	/* into the last FDE, a part too: its end is not known from the table */
	put_jump(func, 10, 0x6100, false);
	put_jump(func, 15, 0x6200, false);
	put_jump(func, 20, 0x6300, false);
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOENT);
	/* the same jump inside the part's code: found */
	put_jump(func, 5, 0x1000 + PART_SIZE - 0x10, false);
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), 0);
	cr_assert_eq(start, 0x1000);
}

Test(pyeval, a_function_with_more_jumps_gives_way_to_a_part)
{
	uint8_t func[FUNC_SIZE] = { 0 }, h[128];
	size_t hn = make_hdr(h, 0x3b);
	uint64_t start = 0, end = 0;
	struct image im;

	make_image(&im, 1u << 4);
	put_jump(func, 0, 0x1100, false);
	put_jump(func, 5, 0x1200, false);
	put_jump(func, 10, 0x1300, false);
	put_jump(func, 15, 0x5100, true);
	put_jump(func, 21, 0x5300, false);
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), 0);
	cr_assert_eq(start, 0x5000);
	cr_assert_eq(end, 0x5000 + PART_SIZE);
	/* its FDE ends the readable bytes: read again, shorter */
	im.readable = FDE_SIZE * 4 + 24;
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), 0);
	cr_assert_eq(start, 0x5000);
	/* opcodes in the last bytes, their displacements past the end */
	func[FUNC_SIZE - 3] = 0xe9;
	func[FUNC_SIZE - 2] = 0x0f;
	func[FUNC_SIZE - 1] = 0x85;
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), 0);
	cr_assert_eq(split(func, 0, h, hn, &im, &start, &end), -ENOENT);
}

Test(pyeval, fdes_that_are_not_what_the_table_says_are_no_part)
{
	uint8_t func[FUNC_SIZE] = { 0 }, h[128];
	size_t hn = make_hdr(h, 0x3b);
	uint64_t start, end;
	struct image im;

	put_jump(func, 0, 0x1100, false);
	put_jump(func, 5, 0x1200, false);
	make_image(&im, 1u << 0);
	put32(im.eh + 8, 0x1234); /* pc_begin elsewhere */
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOENT);
	make_image(&im, 1u << 0);
	put32(im.eh + 4, 0); /* a CIE */
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOENT);
	make_image(&im, 1u << 0);
	put32(im.eh, 0xffffffff); /* 64-bit */
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOENT);
	make_image(&im, 1u << 0);
	put32(im.eh + 12, 0); /* no code */
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOENT);
	make_image(&im, 1u << 0);
	im.eh[16] = 0xff; /* augmentation data past the FDE */
	im.eh[17] = 0x7f;
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOENT);
	make_image(&im, 1u << 0);
	im.readable = 0; /* unreadable */
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOENT);
	make_image(&im, 1u << 0);
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), 0);
}

Test(pyeval, headers_short_miscounted_or_in_other_encodings_are_refused)
{
	uint8_t func[FUNC_SIZE] = { 0 }, h[128];
	size_t hn = make_hdr(h, 0x3b);
	uint64_t start, end;
	struct image im;

	make_image(&im, 1u << 0);
	put_jump(func, 0, 0x1100, false);
	put_jump(func, 5, 0x1200, false);
	for (size_t n = 0; n < 12; n++)
		cr_assert_eq(split(func, sizeof(func), h, n, &im, &start, &end), -EINVAL, "%zu bytes", n);
	/* a count of more entries than the bytes hold */
	for (size_t n = 12; n < hn; n++)
		cr_assert_eq(split(func, sizeof(func), h, n, &im, &start, &end), -EINVAL, "%zu bytes", n);
	h[8] = 0xff;
	h[11] = 0x7f;
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -EINVAL);
	hn = make_hdr(h, 0x1b); /* pc-relative table */
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOTSUP);
	hn = make_hdr(h, 0x3b);
	h[0] = 2;
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOTSUP);
	h[0] = 1;
	h[2] = 0xff; /* no table */
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOTSUP);
	h[2] = 0x03;
	h[1] = 0x1c; /* an 8-byte eh_frame_ptr */
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), -ENOTSUP);
	h[1] = 0x1b;
	cr_assert_eq(split(func, sizeof(func), h, hn, &im, &start, &end), 0);
	cr_assert_eq(pyeval_split_part(NULL, 0, 0, h, hn, 0, read_image, &im, &start, &end), -EINVAL);
}
