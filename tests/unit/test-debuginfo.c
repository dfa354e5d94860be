/* SPDX-License-Identifier: MIT */
/*
 * test-debuginfo.c - unit tests for daemon/debuginfo.c.
 *
 * The fixtures are made at run time the way distributions make them: a C
 * program built with -g, its debug file split off with objcopy
 * --only-keep-debug, the binary stripped, and then linked to its debug
 * file by build-id (a .build-id tree), by .gnu_debuglink (objcopy
 * --add-gnu-debuglink) or by MiniDebugInfo (Fedora's recipe: the function
 * symbols .dynsym lacks, xz-compressed into .gnu_debugdata).  The fixture
 * reports the addresses of its own static functions, so names found
 * through the debug information are checked against the running code,
 * not against nm.  The last test uses Debian's libc6-dbg for real.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "symbols/debuginfo.h"
#include "fixture.h"
#include "symbols/elfsym.h"
#include "perfd/macro.h"

extern char **environ;

/* FX_SALT changes the code, hence the build-id, for a "wrong" debug file. */
static const char fixture_source[] =
	"#define _GNU_SOURCE\n"
	"#include <dlfcn.h>\n"
	"#include <link.h>\n"
	"#include <stdint.h>\n"
	"#include <stdio.h>\n"
	"#ifndef FX_SALT\n"
	"#define FX_SALT 1\n"
	"#endif\n"
	"static __attribute__((noinline, used)) int dbg_static_one(int x) { return x * 7 + FX_SALT; }\n"
	"static __attribute__((noinline, used)) int dbg_static_two(int x) { return dbg_static_one(x) ^ 3; }\n"
	"__attribute__((noinline)) int dbg_exported(int x) { return dbg_static_two(x) + 1; }\n"
	"\n"
	"static void report(const char *name, void *p)\n"
	"{\n"
	"	struct link_map *lm = NULL;\n"
	"	Dl_info info;\n"
	"\n"
	"	if (dladdr1(p, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm)\n"
	"		printf(\"%s %lx\\n\", name, (unsigned long)((uintptr_t)p - lm->l_addr));\n"
	"}\n"
	"\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	report(\"dbg_static_one\", (void *)dbg_static_one);\n"
	"	report(\"dbg_static_two\", (void *)dbg_static_two);\n"
	"	report(\"dbg_exported\", (void *)dbg_exported);\n"
	"	return dbg_exported(argc) == 12345;\n"
	"}\n";

/* Reports, as addresses in libc.so.6's ELF file, where main returns to
 * (__libc_start_call_main since glibc 2.34) and where a thread's function
 * returns to (start_thread): two static functions libc does not export. */
static const char libc_fixture_source[] =
	"#define _GNU_SOURCE\n"
	"#include <dlfcn.h>\n"
	"#include <link.h>\n"
	"#include <pthread.h>\n"
	"#include <stdint.h>\n"
	"#include <stdio.h>\n"
	"\n"
	"static void *thread_ret;\n"
	"\n"
	"static __attribute__((noinline)) void *thread_fn(void *arg)\n"
	"{\n"
	"	thread_ret = __builtin_return_address(0);\n"
	"	return arg;\n"
	"}\n"
	"\n"
	"static int vaddr(void *p, const char **file, unsigned long *ret)\n"
	"{\n"
	"	struct link_map *lm = NULL;\n"
	"	Dl_info info;\n"
	"\n"
	"	if (!dladdr1(p, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !info.dli_fname)\n"
	"		return -1;\n"
	"	*file = info.dli_fname;\n"
	"	*ret = (unsigned long)((uintptr_t)p - lm->l_addr);\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"int main(void)\n"
	"{\n"
	"	void *main_ret = __builtin_return_address(0);\n"
	"	const char *f1, *f2;\n"
	"	unsigned long a1, a2;\n"
	"	pthread_t t;\n"
	"\n"
	"	if (pthread_create(&t, NULL, thread_fn, NULL) || pthread_join(t, NULL))\n"
	"		return 1;\n"
	"	if (vaddr(main_ret, &f1, &a1) || vaddr(thread_ret, &f2, &a2))\n"
	"		return 2;\n"
	"	printf(\"%s %lx %s %lx\\n\", f1, a1, f2, a2);\n"
	"	return 0;\n"
	"}\n";

/* Fedora's find-debuginfo recipe for MiniDebugInfo, on $1 (stripped) and
 * $2 (its debug file): keep the function symbols that .dynsym lacks, drop
 * the DWARF, compress, and add the result as .gnu_debugdata. */
static const char minidebuginfo_script[] =
	"set -e\n"
	"nm -D \"$1\" --format=posix --defined-only | awk '{ print $1 }' | sort > dynsyms\n"
	"nm \"$2\" --format=sysv --defined-only |"
	" awk -F '|' '$4 ~ /FUNC/ { gsub(/ /, \"\", $1); print $1 }' | sort > funcsyms\n"
	"comm -13 dynsyms funcsyms > keep_symbols\n"
	"rm -f mini mini.xz\n"
	"objcopy -S --remove-section .gdb_index --remove-section .comment"
	" --keep-symbols=keep_symbols \"$2\" mini\n"
	"xz -k mini\n"
	"objcopy --add-section .gnu_debugdata=mini.xz \"$1\"\n";

FIXTURE_SUITE(debuginfo, 120);

/* workdir/name, into a static buffer of the given slot (a few may be alive
 * at once). */
static const char *wpath(int slot, const char *name)
{
	static char bufs[4][PATH_MAX];
	int n;

	cr_assert(slot >= 0 && slot < 4);
	n = snprintf(bufs[slot], sizeof(bufs[slot]), "%s/%s", workdir, name);
	cr_assert(n > 0 && (size_t)n < sizeof(bufs[slot]));
	return bufs[slot];
}

/* Writes a file at any path (fixture.h's write_file is relative to workdir). */
static void write_path(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "we");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

static void mkdirs(const char *path)
{
	run((char *const[]){ "mkdir", "-p", (char *)path, NULL });
}

static void copy_file(const char *from, const char *to)
{
	run((char *const[]){ "cp", (char *)from, (char *)to, NULL });
}

static int open_ro(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	return fd;
}

/* Builds "name" (stripped) and "name.debug" from the fixture, with the
 * given build-id option and FX_SALT; "name.full" stays unstripped.  Leaves
 * the wpath() slots alone. */
static void build_pair(const char *name, const char *build_id_opt, int salt)
{
	char full[64], debug[64], salt_def[32], src[PATH_MAX];

	snprintf(full, sizeof(full), "%s.full", name);
	snprintf(debug, sizeof(debug), "%s.debug", name);
	snprintf(salt_def, sizeof(salt_def), "-DFX_SALT=%d", salt);
	snprintf(src, sizeof(src), "%s/fx.c", workdir);
	write_path(src, fixture_source, sizeof(fixture_source) - 1);
	run((char *const[]){ "cc", "-O1", "-g", "-fPIE", "-pie", "-rdynamic", salt_def,
			     (char *)build_id_opt, "-o", full, "fx.c", NULL });
	run((char *const[]){ "objcopy", "--only-keep-debug", full, debug, NULL });
	run((char *const[]){ "strip", "--strip-all", "-o", (char *)name, full, NULL });
}

/* The build-id of an ELF file as lowercase hex, through elfsym. */
static void build_id_of(const char *path, char *buf, size_t size)
{
	struct elf_symtab *t = NULL;

	cr_assert_eq(elf_symtab_load(path, &t), 0, "%s", path);
	cr_assert_lt(strlen(elf_symtab_build_id(t)), size);
	strcpy(buf, elf_symtab_build_id(t));
	elf_symtab_free(t);
}

/* Where DIR/.build-id/ puts the debug file of the binary at path. */
static void build_id_path(const char *dir, const char *binary, char *buf, size_t size)
{
	char id[129];
	int n;

	build_id_of(binary, id, sizeof(id));
	cr_assert_geq(strlen(id), 4, "no build-id in %s", binary);
	n = snprintf(buf, size, "%s/.build-id/%.2s/%s.debug", dir, id, id + 2);
	cr_assert(n > 0 && (size_t)n < size);
}

static void expect_same_file(int fd, const char *path)
{
	struct stat a, b;

	cr_assert_eq(fstat(fd, &a), 0);
	cr_assert_eq(stat(path, &b), 0, "%s: %s", path, strerror(errno));
	cr_expect(a.st_dev == b.st_dev && a.st_ino == b.st_ino, "fd is not %s", path);
}

static void expect_cloexec(int fd)
{
	int flags = fcntl(fd, F_GETFD);

	cr_expect(flags >= 0 && (flags & FD_CLOEXEC), "fd %d is not close-on-exec", fd);
	flags = fcntl(fd, F_GETFL);
	cr_expect(flags >= 0 && !(flags & O_NONBLOCK), "fd %d is left non-blocking", fd);
}

/* Finds the debug file of binary (opened from binary_path, seen by the
 * process at seen_path) and expects it at expected_path, whose path as
 * shown is expected_shown (NULL: expected_path). */
static void expect_found(const char *binary_path, const char *seen_path, const char *root,
			 const char *debug_dir, const char *expected_path, const char *expected_shown)
{
	_cleanup_close_ int fd = open_ro(binary_path);
	_cleanup_free_ char *shown = NULL;
	_cleanup_close_ int dfd = -1;

	dfd = debuginfo_find(fd, seen_path, root, debug_dir, DEBUGINFO_ALL, &shown, NULL);
	cr_assert_geq(dfd, 0, "no debug file for %s: %s", seen_path, strerror(-dfd));
	expect_same_file(dfd, expected_path);
	expect_cloexec(dfd);
	cr_assert_not_null(shown);
	cr_expect_str_eq(shown, expected_shown ? expected_shown : expected_path);
}

static void expect_not_found(const char *binary_path, const char *seen_path, const char *root,
			     const char *debug_dir)
{
	_cleanup_close_ int fd = open_ro(binary_path);
	char *shown = (char *)"untouched";
	int r;

	r = debuginfo_find(fd, seen_path, root, debug_dir, DEBUGINFO_ALL, &shown, NULL);
	if (r >= 0)
		(void)close(r);
	cr_expect_eq(r, -ENOENT, "%s: got %d", seen_path, r);
	cr_expect_str_eq(shown, "untouched", "ret_path written on failure");
}

struct fx_addrs {
	uint64_t one, two, exported;
};

static void run_fixture(const char *path, struct fx_addrs *ret)
{
	char name[64];
	unsigned long long a;
	int seen = 0;
	FILE *p = popen(path, "re");

	cr_assert_not_null(p);
	while (fscanf(p, "%63s %llx", name, &a) == 2) {
		if (strcmp(name, "dbg_static_one") == 0)
			ret->one = a, seen |= 1;
		else if (strcmp(name, "dbg_static_two") == 0)
			ret->two = a, seen |= 2;
		else if (strcmp(name, "dbg_exported") == 0)
			ret->exported = a, seen |= 4;
	}
	cr_assert_eq(pclose(p), 0);
	cr_assert_eq(seen, 7, "fixture reported %#x", seen);
}

static void expect_named(const struct elf_symtab *t, uint64_t vaddr, const char *name,
			 uint64_t offset)
{
	uint64_t got_off = UINT64_MAX;
	const char *got = elf_symtab_lookup(t, vaddr + offset, &got_off);

	cr_assert_not_null(got, "nothing at %#" PRIx64 ", expected %s", vaddr + offset, name);
	cr_expect_str_eq(got, name);
	cr_expect_eq(got_off, offset, "%s+%" PRIu64 ", expected +%" PRIu64, got, got_off, offset);
}

static void expect_not_named(const struct elf_symtab *t, uint64_t vaddr, const char *name)
{
	const char *got = elf_symtab_lookup(t, vaddr, NULL);

	cr_expect(!got || strcmp(got, name) != 0, "%s named without its debug info", name);
}

Test(debuginfo, found_by_build_id)
{
	char dest[PATH_MAX];
	const char *dbgdir = wpath(1, "debug");

	build_pair("bin", "-Wl,--build-id=sha1", 1);
	build_id_path(dbgdir, wpath(0, "bin"), dest, sizeof(dest));
	run((char *const[]){ "install", "-D", "-m", "644", "bin.debug", dest, NULL });

	expect_found(wpath(0, "bin"), wpath(2, "bin"), "", dbgdir, dest, NULL);
	/* the process's path is not needed for the build-id */
	expect_found(wpath(0, "bin"), NULL, NULL, dbgdir, dest, NULL);
	/* a debug directory given with a trailing slash */
	{
		char with_slash[PATH_MAX], shown[PATH_MAX + 16];

		snprintf(with_slash, sizeof(with_slash), "%s/", dbgdir);
		build_id_path(with_slash, wpath(0, "bin"), shown, sizeof(shown));
		expect_found(wpath(0, "bin"), NULL, "", with_slash, dest, shown);
	}
	/* Fedora's .build-id entries are symlinks to the real file */
	run((char *const[]){ "mv", dest, "bin.debug.real", NULL });
	run((char *const[]){ "ln", "-s", (char *)wpath(0, "bin.debug.real"), dest, NULL });
	expect_found(wpath(0, "bin"), NULL, "", dbgdir, wpath(3, "bin.debug.real"), dest);
	/* another debug directory has nothing */
	expect_not_found(wpath(0, "bin"), wpath(2, "bin"), "", wpath(3, "nowhere"));
}

Test(debuginfo, build_id_mismatch_rejected)
{
	char dest[PATH_MAX];
	const char *dbgdir = wpath(1, "debug");
	const char *binary = wpath(0, "bin");

	build_pair("bin", "-Wl,--build-id=sha1", 1);
	build_pair("other", "-Wl,--build-id=sha1", 2);
	build_id_path(dbgdir, binary, dest, sizeof(dest));
	run((char *const[]){ "install", "-D", "-m", "644", "other.debug", dest, NULL });
	expect_not_found(binary, binary, "", dbgdir);

	/* not ELF, a directory, a FIFO (must not block the open) */
	write_path(dest, "not an ELF file\n", 16);
	expect_not_found(binary, binary, "", dbgdir);
	cr_assert_eq(unlink(dest), 0);
	cr_assert_eq(mkdir(dest, 0755), 0);
	expect_not_found(binary, binary, "", dbgdir);
	cr_assert_eq(rmdir(dest), 0);
	cr_assert_eq(mkfifo(dest, 0644), 0);
	expect_not_found(binary, binary, "", dbgdir);
	cr_assert_eq(unlink(dest), 0);

	/* the unstripped binary has the same build-id, but is not itself */
	copy_file("bin.debug", dest);
	expect_found(binary, binary, "", dbgdir, dest, NULL);
	{
		char full_dest[PATH_MAX];

		build_id_path(dbgdir, wpath(2, "bin.full"), full_dest, sizeof(full_dest));
		cr_assert_str_eq(full_dest, dest);
		cr_assert_eq(unlink(dest), 0);
		cr_assert_eq(symlink(wpath(2, "bin.full"), dest), 0);
		expect_not_found(wpath(2, "bin.full"), wpath(2, "bin.full"), "", dbgdir);
	}
}

/* A binary without a build-id, linked to lbin.debug by .gnu_debuglink, in
 * workdir/app/.  Returns the binary's path (slot 0). */
static const char *build_linked(void)
{
	build_pair("lbin", "-Wl,--build-id=none", 1);
	run((char *const[]){ "objcopy", "--add-gnu-debuglink=lbin.debug", "lbin", NULL });
	mkdirs(wpath(0, "app/.debug"));
	copy_file("lbin", "app/lbin");
	return wpath(0, "app/lbin");
}

Test(debuginfo, debuglink_next_to_binary)
{
	const char *binary = build_linked();

	copy_file("lbin.debug", "app/lbin.debug");
	expect_found(binary, binary, "", wpath(1, "debug"), wpath(2, "app/lbin.debug"), NULL);
}

Test(debuginfo, debuglink_in_dot_debug)
{
	const char *binary = build_linked();

	copy_file("lbin.debug", "app/.debug/lbin.debug");
	expect_found(binary, binary, "", wpath(1, "debug"), wpath(2, "app/.debug/lbin.debug"),
		     NULL);
}

Test(debuginfo, debuglink_under_debug_dir)
{
	char dest[PATH_MAX];
	const char *binary = build_linked();

	/* DEBUG_DIR + the binary's directory, as an absolute path */
	snprintf(dest, sizeof(dest), "%s/debug%s/app/lbin.debug", workdir, workdir);
	run((char *const[]){ "install", "-D", "-m", "644", "lbin.debug", dest, NULL });
	expect_found(binary, binary, "", wpath(1, "debug"), dest, NULL);
	/* without the process's path there is no directory to look in */
	expect_not_found(binary, NULL, "", wpath(1, "debug"));
}

Test(debuginfo, debuglink_crc_mismatch_rejected)
{
	const char *binary = build_linked();
	struct stat st;
	unsigned char byte;
	int fd;

	/* a debug file differing in one byte, where the name matches */
	copy_file("lbin.debug", "app/lbin.debug");
	fd = open(wpath(1, "app/lbin.debug"), O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(pread(fd, &byte, 1, st.st_size / 2), 1);
	byte ^= 0x40;
	cr_assert_eq(pwrite(fd, &byte, 1, st.st_size / 2), 1);
	cr_assert_eq(close(fd), 0);
	expect_not_found(binary, binary, "", wpath(1, "debug"));

	/* the search goes on past it to the right one */
	copy_file("lbin.debug", "app/.debug/lbin.debug");
	expect_found(binary, binary, "", wpath(1, "debug"), wpath(2, "app/.debug/lbin.debug"),
		     NULL);
}

Test(debuginfo, build_id_before_debuglink)
{
	char dest[PATH_MAX];
	const char *dbgdir = wpath(1, "debug");

	/* Debian's way: both a build-id and a debuglink */
	build_pair("bin", "-Wl,--build-id=sha1", 1);
	run((char *const[]){ "objcopy", "--add-gnu-debuglink=bin.debug", "bin", NULL });
	expect_found(wpath(0, "bin"), wpath(2, "bin"), "", dbgdir, wpath(3, "bin.debug"), NULL);

	build_id_path(dbgdir, wpath(0, "bin"), dest, sizeof(dest));
	run((char *const[]){ "install", "-D", "-m", "644", "bin.debug", dest, NULL });
	expect_found(wpath(0, "bin"), wpath(2, "bin"), "", dbgdir, dest, NULL);
}

Test(debuginfo, inside_a_process_root)
{
	char dest[PATH_MAX], shown[PATH_MAX * 2], host_dest[PATH_MAX];
	const char *root = wpath(1, "root");

	(void)build_linked();
	mkdirs(wpath(0, "root/opt/app/.debug"));
	mkdirs(wpath(0, "root/store"));
	copy_file("lbin", "root/opt/app/lbin");
	copy_file("lbin.debug", "root/store/lbin.debug");
	/* a symlink in the binary's own directory is its owner's: refused */
	cr_assert_eq(symlink("/store/lbin.debug", wpath(0, "root/opt/app/.debug/lbin.debug")), 0);
	expect_not_found(wpath(0, "root/opt/app/lbin"), "/opt/app/lbin", root, "/usr/lib/debug");
	/* in the debug directory, an absolute symlink means the root's /store,
	 * not the host's */
	mkdirs(wpath(0, "root/usr/lib/debug/opt/app"));
	cr_assert_eq(symlink("/store/lbin.debug", wpath(0, "root/usr/lib/debug/opt/app/lbin.debug")),
		     0);
	snprintf(shown, sizeof(shown), "%s/usr/lib/debug/opt/app/lbin.debug", root);
	expect_found(wpath(0, "root/opt/app/lbin"), "/opt/app/lbin", root, "/usr/lib/debug",
		     wpath(2, "root/store/lbin.debug"), shown);
	/* the host's /opt/app is not looked at */
	expect_not_found(wpath(0, "root/opt/app/lbin"), "/opt/app/lbin", "", "/usr/lib/debug");

	/* build-id: the root's /usr/lib/debug first, then the host's
	 * debug directory */
	build_pair("bin", "-Wl,--build-id=sha1", 1);
	copy_file("bin", "root/opt/app/bin");
	build_id_path("/usr/lib/debug", wpath(0, "bin"), dest, sizeof(dest));
	snprintf(shown, sizeof(shown), "%s%s", root, dest);
	expect_not_found(wpath(0, "root/opt/app/bin"), "/opt/app/bin", root, "/usr/lib/debug");
	build_id_path(wpath(2, "debug"), wpath(0, "bin"), host_dest, sizeof(host_dest));
	run((char *const[]){ "install", "-D", "-m", "644", "bin.debug", host_dest, NULL });
	expect_found(wpath(0, "root/opt/app/bin"), "/opt/app/bin", root, wpath(2, "debug"),
		     host_dest, NULL);
	run((char *const[]){ "install", "-D", "-m", "644", "bin.debug", shown, NULL });
	expect_found(wpath(0, "root/opt/app/bin"), "/opt/app/bin", root, "/usr/lib/debug", shown,
		     NULL);

	/* a root that is the host's own is the host */
	expect_found(wpath(0, "bin"), wpath(1, "bin"), "/proc/self/root", wpath(2, "debug"),
		     host_dest, NULL);

	/* a root that is gone (the process exited): the host's debug
	 * directory is still searched, the binary's directories are not */
	expect_found(wpath(0, "bin"), "/opt/app/bin", wpath(1, "gone"), wpath(2, "debug"),
		     host_dest, NULL);
	expect_not_found(wpath(0, "root/opt/app/lbin"), "/opt/app/lbin", wpath(1, "gone"),
			 "/usr/lib/debug");
	{
		char linked[PATH_MAX];

		snprintf(linked, sizeof(linked), "%s/debug/opt/app/lbin.debug", workdir);
		run((char *const[]){ "install", "-D", "-m", "644", "lbin.debug", linked, NULL });
		expect_found(wpath(0, "root/opt/app/lbin"), "/opt/app/lbin", wpath(1, "gone"),
			     wpath(2, "debug"), linked, NULL);
	}
}

Test(debuginfo, nothing_to_find)
{
	_cleanup_close_ int fd = -1, fd2 = -1;
	const char *binary = wpath(0, "plain");

	build_pair("plain", "-Wl,--build-id=none", 1);
	expect_not_found(binary, binary, "", wpath(1, "debug"));

	write_path(wpath(1, "text"), "#!/bin/sh\n", 10);
	fd = open_ro(wpath(1, "text"));
	cr_expect_eq(debuginfo_find(fd, wpath(1, "text"), "", NULL, DEBUGINFO_ALL, NULL, NULL),
		     -ENOEXEC);
	cr_expect_eq(debuginfo_find(-1, "/x", "", NULL, DEBUGINFO_ALL, NULL, NULL), -EBADF);
	fd2 = open_ro(binary);
	cr_expect_eq(debuginfo_find(fd2, binary, wpath(1, "no-such-root"), NULL, DEBUGINFO_ALL,
				    NULL, NULL),
		     -ENOENT);
}

Test(debuginfo, minidebuginfo)
{
	_cleanup_free_ void *image = NULL;
	_cleanup_close_ int fd = -1;
	struct elf_symtab *t = NULL;
	struct fx_addrs a = {};
	size_t size = 0;
	int r;

	build_pair("bin", "-Wl,--build-id=sha1", 1);
	write_path(wpath(0, "mini.sh"), minidebuginfo_script, sizeof(minidebuginfo_script) - 1);
	run((char *const[]){ "sh", "mini.sh", "bin", "bin.debug", NULL });
	run_fixture(wpath(0, "bin.full"), &a);

	fd = open_ro(wpath(0, "bin"));
	r = debuginfo_minidebuginfo(fd, &image, &size);
	cr_assert_eq(r, 0, "%s", strerror(-r));
	cr_assert_gt(size, 64);
	cr_expect_eq(memcmp(image, "\177ELF", 4), 0);

	cr_assert_eq(elf_symtab_load_fd(fd, &t), 0);
	cr_expect_not(elf_symtab_has_symtab(t));
	expect_named(t, a.exported, "dbg_exported", 0);
	expect_not_named(t, a.one, "dbg_static_one");
	expect_not_named(t, a.two, "dbg_static_two");

	r = elf_symtab_add_from_memory(t, image, size);
	cr_assert_geq(r, 2, "add_from_memory: %d", r);
	expect_named(t, a.one, "dbg_static_one", 0);
	expect_named(t, a.one, "dbg_static_one", 2);
	expect_named(t, a.two, "dbg_static_two", 1);
	expect_named(t, a.exported, "dbg_exported", 0);
	cr_expect(elf_symtab_has_symtab(t));
	elf_symtab_free(t);
}

Test(debuginfo, minidebuginfo_absent_or_corrupt)
{
	_cleanup_close_ int fd = -1, fd2 = -1;
	void *image = (void *)0x1;
	size_t size = 7;

	build_pair("bin", "-Wl,--build-id=sha1", 1);
	fd = open_ro(wpath(0, "bin"));
	cr_expect_eq(debuginfo_minidebuginfo(fd, &image, &size), -ENOENT);

	write_path(wpath(0, "junk.xz"), "\3757zXZ\0garbage garbage garbage", 29);
	run((char *const[]){ "objcopy", "--add-section", ".gnu_debugdata=junk.xz", "bin", "bad",
			     NULL });
	fd2 = open_ro(wpath(0, "bad"));
	cr_expect_eq(debuginfo_minidebuginfo(fd2, &image, &size), -EBADMSG);

	/* a valid xz stream of something that is not ELF */
	write_path(wpath(0, "text"), "hello\n", 6);
	run((char *const[]){ "xz", "-k", "text", NULL });
	run((char *const[]){ "objcopy", "--add-section", ".gnu_debugdata=text.xz", "bin", "bad2",
			     NULL });
	closep(&fd2);
	fd2 = open_ro(wpath(0, "bad2"));
	cr_expect_eq(debuginfo_minidebuginfo(fd2, &image, &size), -EBADMSG);
	cr_expect_eq(image, (void *)0x1, "output written on failure");
	cr_expect_eq(size, 7);
}

static double monotonic_seconds(void)
{
	struct timespec ts;

	cr_assert_eq(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Debian's libc6-dbg puts libc's debug file under /usr/lib/debug/.build-id;
 * with it, libc's static functions get their names.  A hard requirement:
 * packaging/install-deps.sh test installs libc6-dbg. */
Test(debuginfo, debian_libc6_dbg)
{
	_cleanup_free_ char *shown = NULL;
	_cleanup_close_ int fd = -1, dfd = -1;
	char libc_main[PATH_MAX], libc_thread[PATH_MAX];
	unsigned long long main_ret, thread_ret;
	struct elf_symtab *t = NULL;
	double t0, find_s, add_s;
	FILE *p;
	int r;

	write_path(wpath(0, "libcfx.c"), libc_fixture_source, sizeof(libc_fixture_source) - 1);
	run((char *const[]){ "cc", "-O1", "-pthread", "-o", "libcfx", "libcfx.c", NULL });
	p = popen(wpath(0, "libcfx"), "re");
	cr_assert_not_null(p);
	cr_assert_eq(fscanf(p, "%4095s %llx %4095s %llx", libc_main, &main_ret, libc_thread,
			    &thread_ret),
		     4);
	cr_assert_eq(pclose(p), 0);
	cr_assert_str_eq(libc_main, libc_thread);
	cr_assert_not_null(strstr(libc_main, "libc.so.6"), "main returns into %s", libc_main);

	fd = open_ro(libc_main);
	cr_assert_eq(elf_symtab_load_fd(fd, &t), 0);
	cr_expect_not(elf_symtab_has_symtab(t), "Debian's libc.so.6 is stripped");
	/* return addresses: the call is the byte before */
	expect_not_named(t, main_ret - 1, "__libc_start_call_main");
	expect_not_named(t, thread_ret - 1, "start_thread");

	t0 = monotonic_seconds();
	dfd = debuginfo_find(fd, libc_main, "", NULL, DEBUGINFO_ALL, &shown, NULL);
	find_s = monotonic_seconds() - t0;
	cr_assert_geq(dfd, 0,
		      "no debug file for %s (%s): install libc6-dbg "
		      "(packaging/install-deps.sh test)",
		      libc_main, strerror(-dfd));
	cr_expect_eq(strncmp(shown, "/usr/lib/debug/.build-id/", 25), 0, "found at %s", shown);

	t0 = monotonic_seconds();
	r = elf_symtab_add_from_fd(t, dfd);
	add_s = monotonic_seconds() - t0;
	cr_assert_gt(r, 100, "add_from_fd: %d", r);
	cr_log_info("%s: debug file %s found in %.3f ms, %d symbols added in %.3f ms", libc_main,
		    shown, find_s * 1e3, r, add_s * 1e3);
	cr_expect(elf_symtab_has_symtab(t));
	cr_expect_str_eq(elf_symtab_lookup(t, main_ret - 1, NULL), "__libc_start_call_main");
	cr_expect_str_eq(elf_symtab_lookup(t, thread_ret - 1, NULL), "start_thread");
	cr_expect_lt(find_s, 0.5);
	cr_expect_lt(add_s, 1.0);
	elf_symtab_free(t);
}
