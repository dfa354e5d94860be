/* SPDX-License-Identifier: MIT */
/*
 * test-ksyms.c - unit tests for daemon/ksyms.c.
 *
 * Fixtures are kallsyms text through fmemopen, in the kernel's layout
 * (module column after a tab); one test loads the real /proc/kallsyms,
 * which needs root with kptr_restrict permitting it, and checks addresses
 * the test reads from the same file.  The kernel's build-id is parsed from
 * notes laid out byte by byte as the kernel writes .notes (this machine's
 * /sys/kernel/notes among them), from broken ones, and read from files.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/ksyms.h"
#include "perfd/macro.h"

static const char kallsyms_fixture[] =
	"0000000000000000 A fixed_percpu_data\n"
	"ffffffff81000000 T srso_alias_untrain_ret\n"
	"ffffffff81000000 T _stext\n"
	"ffffffff81000000 T _text\n"
	"ffffffff81001000 t __pfx_do_one_initcall\n"
	"ffffffff81001010 T do_one_initcall\n"
	"ffffffff81001200 D some_data\n"
	"ffffffff81001300 R some_rodata\n"
	"ffffffff81001400 b some_bss\n"
	"ffffffff81002000 W weak_global\n"
	"ffffffff81002100 w weak_local\n"
	"ffffffff81003000 t local_func\n"
	"ffffffff81400000 T _etext\n"
	"ffffffffc0a01000 t ext4_helper\t[ext4]\n"
	"ffffffffc0a01100 T ext4_fill_super\t[ext4]\n"
	"ffffffffc0a01200 d ext4_data\t[ext4]\n"
	"ffffffffc0b00000 t nf_hook\t[nf_tables]\n"
	"ffffffffc0b00100 t bpf_prog_6deef7357e7b4530_sd_fw\t[bpf]\n"
	"ffffffff81000500 T out_of_order_func\n";

static struct ksyms *parse_ok(const char *text)
{
	_cleanup_fclose_ FILE *f = NULL;
	struct ksyms *k = NULL;
	int r;

	f = strlen(text) ? fmemopen((void *)text, strlen(text), "r") : fopen("/dev/null", "re");
	cr_assert_not_null(f);
	r = ksyms_parse(f, &k);
	cr_assert_eq(r, 0, "ksyms_parse: %s", strerror(-r));
	cr_assert_not_null(k);
	return k;
}

static int parse_err(const char *text)
{
	_cleanup_fclose_ FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct ksyms *k = NULL;
	int r;

	cr_assert_not_null(f);
	r = ksyms_parse(f, &k);
	cr_expect_null(k, "output written on failure");
	ksyms_free(k);
	return r;
}

static void expect_sym(const struct ksyms *k, uint64_t addr, const char *name,
		       const char *module, uint64_t offset)
{
	const char *got_module = "unset";
	uint64_t got_offset = UINT64_MAX;
	const char *got = ksyms_lookup(k, addr, &got_module, &got_offset);

	cr_assert_not_null(got, "nothing at %#" PRIx64 ", expected %s", addr, name);
	cr_expect_str_eq(got, name, "at %#" PRIx64 ": %s, expected %s", addr, got, name);
	cr_expect_eq(got_offset, offset, "%s: offset %" PRIu64 ", expected %" PRIu64, name,
		     got_offset, offset);
	if (module)
		cr_expect(got_module && strcmp(got_module, module) == 0,
			  "%s: module %s, expected %s", name, got_module ? got_module : "(vmlinux)",
			  module);
	else
		cr_expect_null(got_module, "%s: module %s, expected vmlinux", name, got_module);
}

Test(ksyms, keeps_only_text_symbols)
{
	struct ksyms *k = parse_ok(kallsyms_fixture);

	/* 3 aliases at _text count once; A, D, R, b, d are dropped */
	cr_expect_eq(ksyms_count(k), 12);

	/* data symbols do not shadow the function before them */
	expect_sym(k, 0xffffffff81001200ULL, "do_one_initcall", NULL, 0x1f0);
	expect_sym(k, 0xffffffff81001300ULL, "do_one_initcall", NULL, 0x2f0);
	expect_sym(k, 0xffffffffc0a01200ULL, "ext4_fill_super", "ext4", 0x100);

	/* all four text types */
	expect_sym(k, 0xffffffff81002000ULL, "weak_global", NULL, 0);
	expect_sym(k, 0xffffffff81002100ULL, "weak_local", NULL, 0);
	expect_sym(k, 0xffffffff81003000ULL, "local_func", NULL, 0);
	expect_sym(k, 0xffffffff81001010ULL, "do_one_initcall", NULL, 0);
	ksyms_free(k);
}

Test(ksyms, modules)
{
	struct ksyms *k = parse_ok(kallsyms_fixture);
	const char *module = "unset", *m1 = NULL, *m2 = NULL;

	expect_sym(k, 0xffffffffc0a01000ULL, "ext4_helper", "ext4", 0);
	expect_sym(k, 0xffffffffc0a010ffULL, "ext4_helper", "ext4", 0xff);
	expect_sym(k, 0xffffffffc0a01100ULL, "ext4_fill_super", "ext4", 0);
	expect_sym(k, 0xffffffffc0b00010ULL, "nf_hook", "nf_tables", 0x10);
	expect_sym(k, 0xffffffffc0b00104ULL, "bpf_prog_6deef7357e7b4530_sd_fw", "bpf", 4);
	expect_sym(k, 0xffffffff81003004ULL, "local_func", NULL, 4);

	/* the module string is shared by a module's symbols */
	cr_assert_not_null(ksyms_lookup(k, 0xffffffffc0a01000ULL, &m1, NULL));
	cr_assert_not_null(ksyms_lookup(k, 0xffffffffc0a01100ULL, &m2, NULL));
	cr_expect_eq(m1, m2);

	/* ret_module and ret_offset may be NULL */
	cr_expect_str_eq(ksyms_lookup(k, 0xffffffffc0a01100ULL, NULL, NULL), "ext4_fill_super");
	cr_expect_str_eq(ksyms_lookup(k, 0xffffffff81003000ULL, &module, NULL), "local_func");
	cr_expect_null(module);
	ksyms_free(k);
}

Test(ksyms, sorted_and_aliases_collapse)
{
	struct ksyms *k = parse_ok(kallsyms_fixture);

	/* the last line sorts into vmlinux */
	expect_sym(k, 0xffffffff81000500ULL, "out_of_order_func", NULL, 0);
	expect_sym(k, 0xffffffff810004ffULL, "srso_alias_untrain_ret", NULL, 0x4ff);
	/* of _text, _stext, srso_alias_untrain_ret (all T) the one
	 * without leading underscores is kept */
	expect_sym(k, 0xffffffff81000000ULL, "srso_alias_untrain_ret", NULL, 0);
	ksyms_free(k);

	/* global wins over local at one address, whatever the order */
	k = parse_ok("ffffffff81000000 t __pfx_schedule\n"
		     "ffffffff81000000 t a_local\n"
		     "ffffffff81000000 T schedule\n");
	cr_expect_eq(ksyms_count(k), 1);
	expect_sym(k, 0xffffffff81000000ULL, "schedule", NULL, 0);
	ksyms_free(k);

	k = parse_ok("ffffffff81000000 t a_local\n"
		     "ffffffff81000000 T __schedule\n");
	expect_sym(k, 0xffffffff81000000ULL, "__schedule", NULL, 0);
	ksyms_free(k);
}

Test(ksyms, lookup_boundaries)
{
	struct ksyms *k = parse_ok(kallsyms_fixture);
	const uint64_t last = 0xffffffffc0b00100ULL;

	/* before the first symbol */
	cr_expect_null(ksyms_lookup(k, 0, NULL, NULL));
	cr_expect_null(ksyms_lookup(k, 0xffffffff80ffffffULL, NULL, NULL));
	expect_sym(k, 0xffffffff81000000ULL, "srso_alias_untrain_ret", NULL, 0);

	/* a symbol ends where the next begins */
	expect_sym(k, 0xffffffff8100100fULL, "__pfx_do_one_initcall", NULL, 0xf);
	expect_sym(k, 0xffffffff81001010ULL, "do_one_initcall", NULL, 0);

	/* up to 1 MiB past the last symbol, and not one byte more */
	expect_sym(k, last + (1 << 20), "bpf_prog_6deef7357e7b4530_sd_fw", "bpf", 1 << 20);
	cr_expect_null(ksyms_lookup(k, last + (1 << 20) + 1, NULL, NULL));
	cr_expect_null(ksyms_lookup(k, UINT64_MAX, NULL, NULL));

	/* the same limit holds in a wide gap between vmlinux and modules */
	expect_sym(k, 0xffffffff81400000ULL + (1 << 20), "_etext", NULL, 1 << 20);
	cr_expect_null(ksyms_lookup(k, 0xffffffff81400000ULL + (1 << 20) + 1, NULL, NULL));
	cr_expect_null(ksyms_lookup(k, 0xffffffffc0000000ULL, NULL, NULL));
	ksyms_free(k);
}

Test(ksyms, outputs_untouched_on_miss)
{
	struct ksyms *k = parse_ok(kallsyms_fixture);
	const char *module = "unset";
	uint64_t offset = 42;

	cr_expect_null(ksyms_lookup(k, 1, &module, &offset));
	cr_expect_str_eq(module, "unset");
	cr_expect_eq(offset, 42);
	ksyms_free(k);
}

Test(ksyms, all_zero_addresses_is_eperm)
{
	static const char restricted[] =
		"0000000000000000 A fixed_percpu_data\n"
		"0000000000000000 T _stext\n"
		"0000000000000000 t do_one_initcall\n"
		"0000000000000000 D some_data\n"
		"0000000000000000 t ext4_helper\t[ext4]\n";

	cr_expect_eq(parse_err(restricted), -EPERM);
}

Test(ksyms, zero_address_text_symbols_are_skipped)
{
	struct ksyms *k = parse_ok("0000000000000000 T zero_text\n"
				   "ffffffff81000000 T real\n");

	cr_expect_eq(ksyms_count(k), 1);
	cr_expect_null(ksyms_lookup(k, 0x10, NULL, NULL));
	expect_sym(k, 0xffffffff81000001ULL, "real", NULL, 1);
	ksyms_free(k);
}

Test(ksyms, empty_input)
{
	struct ksyms *k = parse_ok("");

	cr_expect_eq(ksyms_count(k), 0);
	cr_expect_null(ksyms_lookup(k, 0xffffffff81000000ULL, NULL, NULL));
	ksyms_free(k);
}

Test(ksyms, only_data_symbols)
{
	struct ksyms *k = parse_ok("ffffffff82000000 D some_data\n"
				   "ffffffff82000100 B some_bss\n");

	cr_expect_eq(ksyms_count(k), 0);
	cr_expect_null(ksyms_lookup(k, 0xffffffff82000000ULL, NULL, NULL));
	ksyms_free(k);
}

Test(ksyms, last_line_without_newline)
{
	struct ksyms *k = parse_ok("ffffffff81000000 T a\nffffffffc0001000 t b\t[mod]");

	cr_expect_eq(ksyms_count(k), 2);
	expect_sym(k, 0xffffffffc0001001ULL, "b", "mod", 1);
	ksyms_free(k);
}

Test(ksyms, malformed_lines)
{
	static const char *const bad[] = {
		"ffffffff81000000 T a\n\n",                 /* empty line */
		"xyz T foo\n",
		"ffffffff81000000\n",
		"ffffffff81000000 T\n",
		"ffffffff81000000 T \n",
		"ffffffff81000000  T foo\n",
		"ffffffff81000000 TT foo\n",
		"ffffffff81000000 1 foo\n",
		"0xffffffff81000000 T foo\n",
		"-ffffffff81000000 T foo\n",
		" ffffffff81000000 T foo\n",
		"1ffffffff81000000 T foo\n",                /* overflow */
		"ffffffff81000000 T foo\t[ext4\n",
		"ffffffff81000000 T foo\t[]\n",
		"ffffffff81000000 T foo\t[ext4] extra\n",
		"ffffffff81000000 T foo bar\n",
		"ffffffff81000000 D data\t(ext4)\n",       /* checked even when dropped */
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		cr_expect_eq(parse_err(bad[i]), -EINVAL, "fixture %zu: %s", i, bad[i]);
}

Test(ksyms, embedded_nul_is_malformed)
{
	static const char text[] = "ffffffff81000000 T fo\0o\n";
	_cleanup_fclose_ FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");
	struct ksyms *k = NULL;

	cr_assert_not_null(f);
	cr_expect_eq(ksyms_parse(f, &k), -EINVAL);
	cr_expect_null(k);
}

Test(ksyms, load_missing_file)
{
	struct ksyms *k = NULL;

	cr_expect_eq(ksyms_load("/nonexistent/kallsyms", &k), -ENOENT);
	cr_expect_null(k);
	cr_expect_null(ksyms_free(NULL));
	cr_expect_eq(ksyms_count(NULL), 0);
	cr_expect_null(ksyms_lookup(NULL, 1, NULL, NULL));
}

/* Finds NAME's address and module in kallsyms the plain way, for the real
 * load to be checked against. */
static bool scan_kallsyms(const char *want, uint64_t *ret_addr, char *module, size_t size)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/kallsyms", "re");
	char line[512], name[256], mod[256];
	unsigned long long addr;
	char type;

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		int n = sscanf(line, "%llx %c %255s [%255[^]]]", &addr, &type, name, mod);

		if (n < 3 || !strchr("tTwW", type) || addr == 0)
			continue;
		if (want ? strcmp(name, want) != 0 : n != 4)
			continue;
		*ret_addr = addr;
		snprintf(module, size, "%s", n == 4 ? mod : "");
		return true;
	}
	return false;
}

Test(ksyms, real_kallsyms)
{
	static const char *const names[] = { "schedule", "do_syscall_64", "vfs_read" };
	struct ksyms *k = NULL;
	char module[256];
	uint64_t addr;
	int r;

	r = ksyms_load("/proc/kallsyms", &k);
	cr_assert_eq(r, 0, "ksyms_load: %s (needs root and kptr_restrict < 2)", strerror(-r));
	cr_expect_gt(ksyms_count(k), 10000);

	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		cr_assert(scan_kallsyms(names[i], &addr, module, sizeof(module)),
			  "%s not in /proc/kallsyms", names[i]);
		expect_sym(k, addr, names[i], NULL, 0);
		expect_sym(k, addr + 5, names[i], NULL, 5);
	}

	/* a text symbol of some module (ftrace, bpf or a real one), if any */
	if (scan_kallsyms(NULL, &addr, module, sizeof(module))) {
		const char *got_module = NULL;

		cr_expect_not_null(ksyms_lookup(k, addr, &got_module, NULL));
		cr_expect(got_module && strcmp(got_module, module) == 0, "%#" PRIx64 ": %s vs %s",
			  addr, got_module ? got_module : "(vmlinux)", module);
	}
	ksyms_free(k);
}

/* --- the kernel's build-id ------------------------------------------------ */

/* A GNU build-id note (20 bytes of id), then a "Linux" note and two "Xen"
 * ones: a copy of a real /sys/kernel/notes. */
static const unsigned char notes_fixture[] = {
	0x04, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 'G', 'N', 'U', 0,
	0x24, 0xa3, 0x59, 0x8f, 0xd7, 0x00, 0x11, 0x4d, 0x0a, 0x1b, 0x1a, 0x48, 0x71, 0xba, 0xdc,
	0xee, 0x75, 0xd0, 0xac, 0xac,
	0x06, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 'L', 'i', 'n', 'u',
	'x', 0, 0, 0, 0x00, 0x00, 0x00, 0x00,
	0x04, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x13, 0x00, 0x00, 0x00, 'X', 'e', 'n', 0,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0xff, 0xff, 0xff, 0x3f,
};
#define FIXTURE_BUILD_ID "24a3598fd700114d0a1b1a4871badcee75d0acac"

/* Appends a note (name with its NUL, desc) at buf + *n, 4-aligned. */
static void add_note(unsigned char *buf, size_t *n, uint32_t type, const char *name,
		     const void *desc, uint32_t descsz)
{
	uint32_t hdr[3] = { (uint32_t)strlen(name) + 1, descsz, type };

	memcpy(buf + *n, hdr, sizeof(hdr));
	*n += sizeof(hdr);
	memset(buf + *n, 0, (hdr[0] + 3) / 4 * 4 + (descsz + 3) / 4 * 4);
	memcpy(buf + *n, name, hdr[0]);
	*n += (hdr[0] + 3) / 4 * 4;
	memcpy(buf + *n, desc, descsz);
	*n += (descsz + 3) / 4 * 4;
}

static int parse_id(const void *notes, size_t n, char *out, size_t size)
{
	return ksyms_parse_build_id(notes, n, out, size);
}

Test(ksyms, build_id_from_the_kernels_notes)
{
	char id[129] = "untouched";

	cr_assert_eq(parse_id(notes_fixture, sizeof(notes_fixture), id, sizeof(id)), 0);
	cr_assert_str_eq(id, FIXTURE_BUILD_ID);
	/* just the room it needs, and one byte less */
	cr_assert_eq(parse_id(notes_fixture, sizeof(notes_fixture), id, 41), 0);
	cr_assert_str_eq(id, FIXTURE_BUILD_ID);
	strcpy(id, "untouched");
	cr_assert_eq(parse_id(notes_fixture, sizeof(notes_fixture), id, 40), -ENOBUFS);
	cr_assert_eq(parse_id(notes_fixture, sizeof(notes_fixture), id, 0), -ENOBUFS);
	cr_assert_str_eq(id, "untouched");
}

/* Notes before it, with names and descriptors of every padding, are
 * stepped over; a build-id note of another name or type is not it. */
Test(ksyms, build_id_after_other_notes)
{
	static const unsigned char idb[] = { 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03 };
	unsigned char buf[512];
	char id[129];
	size_t n = 0;

	add_note(buf, &n, 1, "Linux", "\x01\x02", 2);
	add_note(buf, &n, 0x12, "Xen", "\x00\x00\x00\x00\x01", 5);
	add_note(buf, &n, 3, "GNUX", idb, sizeof(idb)); /* not GNU's */
	add_note(buf, &n, 4, "GNU", idb, sizeof(idb));  /* not a build-id */
	add_note(buf, &n, 3, "GNU", "", 0);             /* empty */
	cr_assert_eq(parse_id(buf, n, id, sizeof(id)), -ENOENT);
	add_note(buf, &n, 3, "GNU", idb, sizeof(idb));
	add_note(buf, &n, 3, "GNU", "\x11", 1); /* only the first counts */
	cr_assert_eq(parse_id(buf, n, id, sizeof(id)), 0);
	cr_assert_str_eq(id, "deadbeef010203");
}

/* Sizes that run past the end, or would overflow a sum, end the search:
 * nothing past what was read is touched (ASan would say). */
Test(ksyms, broken_notes_are_not_trusted)
{
	unsigned char *buf;
	char id[129];
	size_t n = sizeof(notes_fixture);

	/* every truncation of the fixture, on the heap so overreads show */
	for (size_t cut = 0; cut < n; cut++) {
		buf = malloc(cut ? cut : 1);
		cr_assert_not_null(buf);
		memcpy(buf, notes_fixture, cut);
		cr_assert_eq(parse_id(buf, cut, id, sizeof(id)), cut >= 36 ? 0 : -ENOENT,
			     "cut at %zu", cut);
		free(buf);
	}
	/* a first note whose sizes are huge: not skipped into the void */
	buf = malloc(n);
	cr_assert_not_null(buf);
	memcpy(buf, notes_fixture, n);
	memcpy(buf, (const uint32_t[]){ UINT32_MAX }, 4);
	cr_assert_eq(parse_id(buf, n, id, sizeof(id)), -ENOENT);
	memcpy(buf, notes_fixture, n);
	memcpy(buf + 4, (const uint32_t[]){ UINT32_MAX - 1 }, 4);
	cr_assert_eq(parse_id(buf, n, id, sizeof(id)), -ENOENT);
	/* a build-id longer than any buffer we would give */
	memcpy(buf, notes_fixture, n);
	memcpy(buf + 4, (const uint32_t[]){ 80 }, 4);
	cr_assert_eq(parse_id(buf, n, id, sizeof(id)), -ENOENT, "desc past the end");
	free(buf);
}

Test(ksyms, build_id_read_from_a_file)
{
	char path[] = "/tmp/perfd-notes.XXXXXX", dir[] = "/tmp/perfd-notesdir.XXXXXX", id[129];
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, notes_fixture, sizeof(notes_fixture)), (ssize_t)sizeof(notes_fixture));
	close(fd);
	cr_assert_eq(ksyms_read_build_id(path, id, sizeof(id)), 0);
	cr_assert_str_eq(id, FIXTURE_BUILD_ID);
	unlink(path);
	cr_assert_eq(ksyms_read_build_id(path, id, sizeof(id)), -ENOENT);
	cr_assert_not_null(mkdtemp(dir));
	/* not regular files */
	cr_assert_eq(ksyms_read_build_id(dir, id, sizeof(id)), -EBADFD);
	rmdir(dir);
	cr_assert_eq(ksyms_read_build_id("/dev/null", id, sizeof(id)), -EBADFD);
}

/* This machine's own notes (sysfs, readable by everyone): a build-id of
 * 20 bytes, as the kernel's linker writes it (--build-id=sha1). */
Test(ksyms, real_kernel_notes)
{
	char id[129];
	int r = ksyms_read_build_id("/sys/kernel/notes", id, sizeof(id));

	cr_assert_eq(r, 0, "/sys/kernel/notes: %s", strerror(-r));
	cr_assert_eq(strlen(id), 40, "%s", id);
	cr_assert_eq(strspn(id, "0123456789abcdef"), 40, "%s", id);
}

/* kallsyms_show_value()'s rule, value by value: kptr_restrict 0 shows
 * addresses to all when perf_event_paranoid <= 1, else to CAP_SYSLOG; 1 to
 * CAP_SYSLOG; 2, anything else and an unreadable value to no one. */
Test(ksyms, addresses_shown_as_the_kernel_shows_kallsyms)
{
	cr_assert(ksyms_addresses_shown(0, -1, false));
	cr_assert(ksyms_addresses_shown(0, 1, false));
	cr_assert(!ksyms_addresses_shown(0, 2, false));
	cr_assert(ksyms_addresses_shown(0, 2, true));
	cr_assert(!ksyms_addresses_shown(0, INT_MIN, false), "paranoid unreadable");
	cr_assert(ksyms_addresses_shown(0, INT_MIN, true));
	cr_assert(!ksyms_addresses_shown(1, -1, false));
	cr_assert(ksyms_addresses_shown(1, 2, true));
	cr_assert(!ksyms_addresses_shown(2, -1, true), "2 hides them from root too");
	cr_assert(!ksyms_addresses_shown(3, -1, true));
	cr_assert(!ksyms_addresses_shown(INT_MIN, -1, true), "kptr_restrict unreadable");
}
