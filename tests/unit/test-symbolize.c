/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/symbolize.c: file modules from the test's own
 * mappings, the vDSO, JIT perf maps (and those refused unread), demangling
 * on and off, the bounded cache of parsed symbol tables (evicted, then
 * parsed again correctly; a table past half of it refused), descriptors
 * bounded and opened again (a debug file's found again on the lane), the
 * line a function starts at (this suite's own DWARF), and the kernel's
 * module with its build-id.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "profile/frame.h"
#include "perfd/macro.h"
#include "process/procfs.h"
#include "process/procmaps.h"
#include "symbols/perfmap.h"
#include "symbols/symbolize.h"
#include "noread.h"

__attribute__((noinline)) int symbolize_test_function(void);
__attribute__((noinline)) int symbolize_test_function(void)
{
	return 7;
}

/* Where start_line_function's definition starts: its decl line. */
static const unsigned start_line_function_line = __LINE__ + 1;
__attribute__((noinline)) static int start_line_function(volatile int *x)
{
	return *x * 3 + 1;
}

/* The frame of a code address of this process, through its maps. */
static uint64_t frame_of(struct symbolizer *s, uint64_t addr)
{
	struct procmaps *maps = NULL;
	const struct procmap *m;
	int id;
	uint64_t frame;

	cr_assert_eq(procmaps_read_pid(getpid(), true, &maps), 0);
	m = procmaps_find(maps, addr);
	cr_assert_not_null(m, "%#llx in no executable mapping", (unsigned long long)addr);
	id = strcmp(m->path, "[vdso]") == 0 ? symbolizer_vdso_module(s)
					     : symbolizer_module_for_mapping(s, getpid(), geteuid(), m);
	cr_assert_gt(id, 0);
	frame = frame_make(id, addr - m->start + m->pgoff);
	procmaps_free(maps);
	return frame;
}

static struct symbolizer *make(size_t cache_bytes, bool demangle)
{
	struct symbolizer_opts o = { .cache_bytes = cache_bytes, .demangle = demangle };
	struct symbolizer *s;

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	return s;
}

/* This process's start time in ns, as BPF would give it: what its JIT
 * module is registered under. */
static uint64_t own_start_ns(void)
{
	_cleanup_close_ int dirfd = -1;
	uint64_t ticks;

	cr_assert_eq(procfs_open_pid(getpid(), PROCFS_START_ANY, &dirfd), 0);
	cr_assert_eq(procfs_start_ticks(dirfd, &ticks), 0);
	return ticks * (1000000000ULL / (uint64_t)sysconf(_SC_CLK_TCK));
}

/* Has the lane build what frame's names need (symbol table, line tables),
 * and takes it back. */
static void settle_frame(struct symbolizer *s, uint64_t frame, bool lines)
{
	for (int i = 0; i < 4 && symbolizer_frame_pending(s, frame, lines); i++)
		cr_assert_eq(symbolizer_settle(s, 30000), 0, "the symbolizer's lane did not settle");
	cr_assert_not(symbolizer_frame_pending(s, frame, lines));
}

/* The name of a frame once the lane has built what names it: the first
 * ask starts the build (symbol table, JIT map) and names nothing new, the
 * lane's answers are taken back, then the frame is named again. */
static const char *settled_name(struct symbolizer *s, uint64_t frame, char *buf, size_t size)
{
	(void)symbolizer_frame_name(s, frame, buf, size);
	cr_assert_eq(symbolizer_settle(s, 30000), 0, "the symbolizer's lane did not settle");
	settle_frame(s, frame, false);
	return symbolizer_frame_name(s, frame, buf, size);
}

/* symbolizer_resolve, once the lane has built what it needs. */
static size_t settled_resolve(struct symbolizer *s, uint64_t frame, bool lines,
			      struct frame_record *out, size_t cap, char *scratch, size_t size)
{
	settle_frame(s, frame, lines);
	return symbolizer_resolve(s, frame, lines, out, cap, scratch, size);
}

Test(symbolize, own_function_and_libc)
{
	struct symbolizer *s = make(0, true);
	char buf[256];

	cr_assert_str_eq(settled_name(s, frame_of(s, (uintptr_t)&symbolize_test_function + 2),
					       buf, sizeof(buf)),
			 "symbolize_test_function");
	/* getpid or its alias __getpid, as libc's debug file ranks them */
	cr_assert(strstr(settled_name(s, frame_of(s, (uintptr_t)&getpid + 1), buf,
					       sizeof(buf)), "getpid"), "libc frame named %s", buf);
	symbolizer_free(s);
}

Test(symbolize, vdso_functions_are_named)
{
	struct symbolizer *s = make(0, true);
	void *vdso = dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *fn = vdso ? dlsym(vdso, "__vdso_clock_gettime") : NULL;
	char buf[256];

	cr_assert_not_null(fn, "no __vdso_clock_gettime in this process");
	cr_assert_gt(symbolizer_vdso_module(s), 0);
	cr_assert_str_eq(settled_name(s, frame_of(s, (uintptr_t)fn + 4), buf, sizeof(buf)),
			 "__vdso_clock_gettime");
	symbolizer_free(s);
}

/* The JIT module of this process named from the perf map f at path,
 * written "JS:*first" first, which the module names. */
static int jit_module_named_first(struct symbolizer *s, const char *path, FILE *f)
{
	char buf[256];
	int id;

	cr_assert_not_null(f);
	fprintf(f, "7f0000001000 100 JS:*first\n");
	fflush(f);
	id = symbolizer_jit_module(s, getpid(), own_start_ns(), path, geteuid());
	cr_assert_gt(id, 0);
	cr_assert_str_eq(settled_name(s, frame_make(id, 0x7f0000001010), buf, sizeof(buf)),
			 "JS:*first");
	return id;
}

Test(symbolize, jit_names_from_a_perf_map_that_grows)
{
	struct symbolizer *s = make(0, true);
	char path[] = "/tmp/perfd-test-perfmap-XXXXXX", buf[256];
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	int id = jit_module_named_first(s, path, f);

	fprintf(f, "7f0000002000 100 JS:*second\n");
	fflush(f);
	unlink(path); /* read through the descriptor, like after the process exits */
	cr_assert_str_eq(settled_name(s, frame_make(id, 0x7f0000002010), buf, sizeof(buf)),
			 "JS:*second");
	cr_assert(strncmp(settled_name(s, frame_make(id, 0x7f0000009000), buf, sizeof(buf)),
			  "[jit]+0x", 8) == 0);
	fclose(f);
	symbolizer_free(s);
}

/* The symbolizer's answer for a JIT map at path: the module id or -errno,
 * and how many maps it counted as refused. */
static int try_jit_map(const char *path, uint32_t owner_uid, size_t *ret_refused)
{
	struct symbolizer *s = make(0, true);
	struct symbolizer_stats st;
	int id = symbolizer_jit_module(s, getpid(), own_start_ns(), path, owner_uid);

	symbolizer_get_stats(s, &st);
	*ret_refused = st.jit_maps_refused;
	symbolizer_free(s);
	return id;
}

Test(symbolize, jit_maps_that_are_not_plain_files_of_the_owner_are_refused)
{
	char dir[] = "/tmp/perfd-test-jit-XXXXXX", path[128], target[128];
	const char line[] = "7f0000001000 100 JS:*fn\n";
	uid_t other = geteuid() == 0 ? 65534 : geteuid() + 1;
	size_t refused;
	int fd;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(target, sizeof(target), "%s/real.map", dir);
	fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	close(fd);
	cr_expect_gt(try_jit_map(target, geteuid(), &refused), 0);
	cr_expect_eq(refused, 0);

	snprintf(path, sizeof(path), "%s/fifo.map", dir);
	cr_assert_eq(mkfifo(path, 0644), 0);
	cr_expect_eq(try_jit_map(path, geteuid(), &refused), -EPERM);
	cr_expect_eq(refused, 1);
	unlink(path);

	snprintf(path, sizeof(path), "%s/link.map", dir);
	cr_assert_eq(symlink(target, path), 0);
	cr_expect_eq(try_jit_map(path, geteuid(), &refused), -ELOOP);
	cr_expect_eq(refused, 1);
	unlink(path);

	/* a stranger's map; a root-owned one anybody's process may use */
	cr_expect_eq(try_jit_map(target, other, &refused), geteuid() == 0 ? 1 : -EPERM);
	if (geteuid() == 0) {
		cr_assert_eq(chown(target, other, other), 0);
		cr_expect_eq(try_jit_map(target, 0, &refused), -EPERM);
		cr_expect_eq(refused, 1);
		cr_expect_gt(try_jit_map(target, other, &refused), 0);
		cr_assert_eq(chown(target, 0, 0), 0);
	}

	/* a hard link to the file: whose data is it? */
	snprintf(path, sizeof(path), "%s/hardlink.map", dir);
	cr_assert_eq(link(target, path), 0);
	cr_expect_eq(try_jit_map(path, geteuid(), &refused), -EPERM);
	cr_expect_eq(refused, 1);
	unlink(path);

	/* over the cap: refused by its size, unread (it is sparse) */
	cr_assert_eq(truncate(target, (off_t)PERFMAP_MAX_BYTES + 1), 0);
	cr_expect_eq(try_jit_map(target, geteuid(), &refused), -EFBIG);
	cr_expect_eq(refused, 1);

	/* absent is not refused */
	snprintf(path, sizeof(path), "%s/none.map", dir);
	cr_expect_eq(try_jit_map(path, geteuid(), &refused), -ENOENT);
	cr_expect_eq(refused, 0);
	unlink(target);
	rmdir(dir);
}

Test(symbolize, jit_map_of_another_incarnation_is_not_opened)
{
	struct symbolizer *s = make(0, true);
	char path[] = "/tmp/perfd-test-perfmap-XXXXXX";
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	/* the pid is ours, the start time is not */
	cr_expect_eq(symbolizer_jit_module(s, getpid(), own_start_ns() + 1000000000ULL, path,
					   geteuid()),
		     -ESRCH);
	close(fd);
	unlink(path);
	symbolizer_free(s);
}

Test(symbolize, jit_map_grown_past_the_cap_is_not_reread)
{
	struct symbolizer *s = make(0, true);
	char path[] = "/tmp/perfd-test-perfmap-XXXXXX", buf[256];
	struct symbolizer_stats st;
	int fd = mkstemp(path), id;
	FILE *f = fdopen(fd, "w");

	fprintf(f, "7f0000001000 100 JS:*first\n");
	fflush(f);
	id = symbolizer_jit_module(s, getpid(), own_start_ns(), path, geteuid());
	cr_assert_gt(id, 0);
	cr_assert_str_eq(settled_name(s, frame_make(id, 0x7f0000001010), buf, sizeof(buf)),
			 "JS:*first");
	cr_assert_eq(ftruncate(fd, (off_t)PERFMAP_MAX_BYTES + 4096), 0);
	/* a miss would re-read the grown map: refused, the old names stay */
	for (int i = 0; i < 3; i++)
		cr_assert(strncmp(settled_name(s, frame_make(id, 0x7f0000009000), buf,
							sizeof(buf)), "[jit]+0x", 8) == 0);
	cr_assert_str_eq(settled_name(s, frame_make(id, 0x7f0000001010), buf, sizeof(buf)),
			 "JS:*first");
	symbolizer_get_stats(s, &st);
	cr_expect_eq(st.jit_maps_refused, 1, "refused %zu", st.jit_maps_refused);
	cr_expect_eq(st.jit_maps, 1);
	fclose(f);
	unlink(path);
	symbolizer_free(s);
}

/* With lines, a native frame's record carries its function's decl line
 * (srcline's, this suite is built with -g); without, none. */
Test(symbolize, records_carry_the_start_line)
{
	struct symbolizer *s = make(0, true);
	struct frame_record rec[FRAME_MAX_INLINE];
	volatile int x = 2;
	char scratch[256];
	uint64_t frame;
	size_t n;

	cr_assert_eq(start_line_function(&x), 7);
	frame = frame_of(s, (uintptr_t)&start_line_function + 1);
	n = settled_resolve(s, frame, true, rec, ELEMENTSOF(rec), scratch, sizeof(scratch));
	cr_assert_geq(n, 1);
	cr_assert_str_eq(rec[0].function, "start_line_function");
	cr_assert(rec[0].file && strstr(rec[0].file, "test-symbolize.c"), "file %s", rec[0].file);
	cr_assert_eq(rec[0].start_line, start_line_function_line);
	n = settled_resolve(s, frame, false, rec, ELEMENTSOF(rec), scratch, sizeof(scratch));
	cr_assert_eq(n, 1);
	cr_assert_eq(rec[0].start_line, 0);
	symbolizer_free(s);
}

/* Kernel frames are in the kernel's module, which describes itself as
 * [kernel.kallsyms] with the build-id of the notes it was given (none
 * when it was given none, or notes without one). */
Test(symbolize, the_kernel_is_a_module_with_its_build_id)
{
	static const unsigned char notes[] = {
		0x04, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
		'G', 'N', 'U', 0, 0xca, 0xfe, 0x00, 0x42,
	};
	char path[] = "/tmp/perfd-notes.XXXXXX", scratch[64];
	struct symbolizer_opts o = { .kernel_notes_path = path };
	const char *kpath = NULL, *build_id = NULL;
	struct frame_record rec;
	struct symbolizer *s;
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, notes, sizeof(notes)), (ssize_t)sizeof(notes));
	close(fd);
	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	unlink(path);
	cr_assert(symbolizer_describe_module(s, FRAME_MODULE_KERNEL, &kpath, &build_id));
	cr_assert_str_eq(kpath, "[kernel.kallsyms]");
	cr_assert_str_eq(build_id, "cafe0042");
	cr_assert_eq(settled_resolve(s, frame_make(FRAME_MODULE_KERNEL, 0x81000000), true, &rec,
					1, scratch, sizeof(scratch)),
		     1);
	cr_assert_eq(rec.kind, FRAME_KIND_KERNEL);
	cr_assert_eq(rec.module, FRAME_MODULE_KERNEL);
	cr_assert_eq(rec.start_line, 0);
	symbolizer_free(s);

	s = make(0, true);
	cr_assert(symbolizer_describe_module(s, FRAME_MODULE_KERNEL, &kpath, &build_id));
	cr_assert_str_eq(kpath, "[kernel.kallsyms]");
	cr_assert_str_eq(build_id, "");
	symbolizer_free(s);
}

Test(symbolize, unknown_and_special_frames)
{
	struct symbolizer *s = make(0, true);
	char buf[64];

	cr_assert_str_eq(settled_name(s, frame_make(FRAME_MODULE_NONE, 0x1234), buf,
					       sizeof(buf)),
			 "[unknown]");
	cr_assert_str_eq(settled_name(s, frame_make(FRAME_MODULE_SPECIAL,
							     FRAME_SPECIAL_STACK_LIMIT),
					       buf, sizeof(buf)),
			 "[dropped: stack table full]");
	cr_assert_str_eq(settled_name(s, frame_make(500, 0x10), buf, sizeof(buf)),
			 "[unknown]");
	symbolizer_free(s);
}

/* A copy of the file at src at path, with every "symbolize_test_function"
 * in it replaced by poison (as long), if given: the same build-id, other
 * symbols. */
static void write_copy_of(const char *src, const char *path, const char *poison)
{
	static const char name[] = "symbolize_test_function";
	_cleanup_free_ char *image = NULL;
	_cleanup_fclose_ FILE *in = fopen(src, "re");
	FILE *out;
	size_t size = 0, cap = 0, n;

	cr_assert_not_null(in);
	do {
		char *grown;

		if (size == cap) {
			cap = cap ? cap * 2 : 1 << 20;
			grown = realloc(image, cap);
			cr_assert_not_null(grown);
			image = grown;
		}
		n = fread(image + size, 1, cap - size, in);
		size += n;
	} while (n > 0);
	if (poison) {
		cr_assert_eq(strlen(poison), strlen(name));
		for (char *p = image; (p = memmem(p, size - (size_t)(p - image), name,
						  strlen(name))); p += strlen(name))
			memcpy(p, poison, strlen(name));
	}
	(void)unlink(path);
	out = fopen(path, "we");
	cr_assert_not_null(out);
	cr_assert_eq(fwrite(image, 1, size, out), size);
	cr_assert_eq(fclose(out), 0);
}

/* A copy of this test binary; see write_copy_of. */
static void write_copy(const char *path, const char *poison)
{
	write_copy_of("/proc/self/exe", path, poison);
}

/* A mapping of the file at path like own (this test's code), in a range
 * nothing maps: the symbolizer opens it by path, under /proc/PID/root. */
static struct procmap mapping_of(const struct procmap *own, const char *path, unsigned k)
{
	struct procmap alias = *own;
	struct stat st;

	cr_assert_eq(stat(path, &st), 0);
	alias.dev_major = major(st.st_dev);
	alias.dev_minor = minor(st.st_dev);
	alias.inode = st.st_ino;
	alias.path = (char *)path;
	alias.start = 0x10000 + (uint64_t)k * 0x10000000;
	alias.end = alias.start + (own->end - own->start);
	return alias;
}

static uint64_t own_offset(const struct procmap *own)
{
	return (uintptr_t)&symbolize_test_function + 2 - own->start + own->pgoff;
}

static size_t open_fds(void)
{
	struct procmaps *unused = NULL;
	size_t n = 0;
	char p[64];

	(void)unused;
	for (int fd = 0; fd < 4096; fd++) {
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		n += access(p, F_OK) == 0;
	}
	return n;
}

/* The mapping of this process holding addr (in *maps, to free). */
static const struct procmap *own_mapping(uintptr_t addr, struct procmaps **maps)
{
	const struct procmap *m;

	cr_assert_eq(procmaps_read_pid(getpid(), true, maps), 0);
	m = procmaps_find(*maps, addr);
	cr_assert_not_null(m, "%#llx in no executable mapping", (unsigned long long)addr);
	return m;
}

/* What the table naming addr of this process takes in the cache: what a
 * symbolizer with room for it (and debug files under debug_dir) holds
 * once it has built it alone. */
static size_t table_bytes(uintptr_t addr, const char *debug_dir)
{
	struct symbolizer_opts o = { .debug_dir = debug_dir, .demangle = true };
	struct symbolizer *s;
	struct symbolizer_stats st;
	char buf[256];

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	(void)settled_name(s, frame_of(s, addr), buf, sizeof(buf));
	symbolizer_get_stats(s, &st);
	symbolizer_free(s);
	cr_assert_gt(st.cache_bytes, 0);
	return st.cache_bytes;
}

enum { LIBC_COPIES = 2 };

/* Modules of libc in s: its own mapping (ids[0]) and LIBC_COPIES copies
 * of its file in dir, mapped like it; their offset of getpid in *offset. */
static void libc_modules(struct symbolizer *s, const char *dir, struct procmaps **maps,
			 int ids[LIBC_COPIES + 1], uint64_t *offset)
{
	const struct procmap *libc = own_mapping((uintptr_t)&getpid, maps);
	char path[64];

	*offset = (uintptr_t)&getpid + 1 - libc->start + libc->pgoff;
	ids[0] = symbolizer_module_for_mapping(s, getpid(), geteuid(), libc);
	for (int i = 1; i <= LIBC_COPIES; i++) {
		struct procmap alias;

		snprintf(path, sizeof(path), "%s/libc%d", dir, i);
		write_copy_of(libc->path, path, NULL);
		alias = mapping_of(libc, path, (unsigned)i);
		ids[i] = symbolizer_module_for_mapping(s, getpid(), geteuid(), &alias);
	}
	for (int i = 0; i <= LIBC_COPIES; i++)
		cr_assert_gt(ids[i], 0);
}

/* Names getpid in each module of libc_modules, three times in turn. */
static void name_libc_modules_in_turn(struct symbolizer *s, const int ids[LIBC_COPIES + 1],
				      uint64_t offset)
{
	char buf[256];

	for (int round = 0; round < 3; round++)
		for (int i = 0; i <= LIBC_COPIES; i++)
			cr_assert(strstr(settled_name(s, frame_make(ids[i], offset), buf, sizeof(buf)),
					 "getpid"), "libc %d named %s", i, buf);
}

/* Removes the copies of libc_modules and dir. */
static void remove_libc_copies(const char *dir)
{
	char path[64];

	for (int i = 1; i <= LIBC_COPIES; i++) {
		snprintf(path, sizeof(path), "%s/libc%d", dir, i);
		(void)unlink(path);
	}
	(void)rmdir(dir);
}

/* A cache of two and a half of libc's tables, and three modules of libc
 * (its own mapping and two copies) asked for in turn: each load evicts the
 * least recently used table, parsed again at its turn, and named the same.
 * Each module's debug file is looked up once, and opened again from its
 * descriptor. */
Test(symbolize, a_small_cache_evicts_and_reparses)
{
	struct symbolizer *s = make(table_bytes((uintptr_t)&getpid, NULL) * 5 / 2, true);
	char dir[] = "/tmp/perfd-test-evict-XXXXXX";
	struct procmaps *maps = NULL;
	struct symbolizer_stats st;
	int ids[LIBC_COPIES + 1];
	uint64_t offset;

	cr_assert_not_null(mkdtemp(dir));
	libc_modules(s, dir, &maps, ids, &offset);
	name_libc_modules_in_turn(s, ids, offset);
	symbolizer_get_stats(s, &st);
	cr_assert_geq(st.cache_evictions, 6, "evictions: %llu", (unsigned long long)st.cache_evictions);
	cr_assert_geq(st.cache_misses, 9);
	cr_assert_leq(st.cache_bytes, st.cache_limit);
	cr_assert_eq(st.tables_refused, 0);
	cr_assert_eq(st.debug_files, LIBC_COPIES + 1, "debug files: %zu", st.debug_files);
	remove_libc_copies(dir);
	procmaps_free(maps);
	symbolizer_free(s);
}

/* A table past half the cache is refused, counted once, and not kept: a
 * table past the cache, kept alone, was evicted by the next one loaded and
 * loaded again at the next lookup, the two taking turns. */
Test(symbolize, a_table_past_half_the_cache_is_refused_not_kept)
{
	size_t own = table_bytes((uintptr_t)&symbolize_test_function, NULL);
	struct symbolizer *s = make(own * 3 / 2, true);
	uint64_t frame = frame_of(s, (uintptr_t)&symbolize_test_function + 2);
	struct symbolizer_stats st;
	char buf[256];

	for (int i = 0; i < 3; i++)
		cr_assert_str_neq(settled_name(s, frame, buf, sizeof(buf)),
				  "symbolize_test_function");
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.tables_refused, 1, "refused: %zu", st.tables_refused);
	cr_assert_eq(st.modules_loaded, 0);
	cr_assert_eq(st.cache_bytes, 0);
	symbolizer_free(s);
}

/* libc is stripped: its .dynsym fits in half the cache, merged with its
 * debug file's symbols it would not.  The merge is refused and counted,
 * and libc keeps the names of its .dynsym. */
Test(symbolize, a_debug_merge_past_half_the_cache_keeps_the_dynsym)
{
	char nowhere[] = "/tmp/perfd-test-nodebug-XXXXXX";
	size_t dynsym, merged;
	struct symbolizer *s;
	struct symbolizer_stats st;
	char buf[256];

	cr_assert_not_null(mkdtemp(nowhere));
	dynsym = table_bytes((uintptr_t)&getpid, nowhere);
	merged = table_bytes((uintptr_t)&getpid, NULL);
	(void)rmdir(nowhere);
	s = make(dynsym * 2 + 64, true);
	cr_assert_gt(merged, dynsym + 32, "libc's debug file adds %zu bytes to %zu",
		     merged - dynsym, dynsym);
	cr_assert(strstr(settled_name(s, frame_of(s, (uintptr_t)&getpid + 1), buf, sizeof(buf)),
			 "getpid"), "libc named %s", buf);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.tables_refused, 1, "refused: %zu", st.tables_refused);
	cr_assert_eq(st.debug_files, 0);
	cr_assert_leq(st.cache_bytes, st.cache_limit / 2);
	symbolizer_free(s);
}

/* Three modules of libc in a cache of two and a half of its .dynsym
 * tables: each one's merge of its debug file's symbols is past its room,
 * refused once; its reloads after eviction read the binary alone (a merge
 * refused again at every reload took the lane seconds for a big one, and
 * held queries waiting for names meanwhile). */
Test(symbolize, a_refused_merge_is_not_tried_again_at_reloads)
{
	char nowhere[] = "/tmp/perfd-test-nodebug-XXXXXX", dir[] = "/tmp/perfd-test-merge-XXXXXX";
	struct procmaps *maps = NULL;
	struct symbolizer_stats st;
	struct symbolizer *s;
	int ids[LIBC_COPIES + 1];
	uint64_t offset;
	size_t dynsym;

	cr_assert_not_null(mkdtemp(nowhere));
	dynsym = table_bytes((uintptr_t)&getpid, nowhere);
	(void)rmdir(nowhere);
	cr_assert_gt(table_bytes((uintptr_t)&getpid, NULL), dynsym * 5 / 4,
		     "libc's merged table fits in the room: the test tests nothing");
	s = make(dynsym * 5 / 2, true);
	cr_assert_not_null(mkdtemp(dir));
	libc_modules(s, dir, &maps, ids, &offset);
	name_libc_modules_in_turn(s, ids, offset);
	symbolizer_get_stats(s, &st);
	cr_assert_geq(st.cache_evictions, 6, "evictions: %llu", (unsigned long long)st.cache_evictions);
	cr_assert_eq(st.tables_refused, LIBC_COPIES + 1, "refused: %zu", st.tables_refused);
	remove_libc_copies(dir);
	procmaps_free(maps);
	symbolizer_free(s);
}

/* Has the LRU close every descriptor of module keep in s (of max_fds):
 * max_fds copies of this binary mapped under dir (named by round), then
 * every module but keep given back, their descriptors with them. */
static void close_fds_but_keep_module(struct symbolizer *s, int keep, int max_fds,
				      const char *dir, int round)
{
	_cleanup_free_ struct module_set *used = calloc(1, sizeof(*used));
	struct procmaps *maps = NULL;
	const struct procmap *own = own_mapping((uintptr_t)&symbolize_test_function, &maps);
	struct symbolizer_stats st;
	char path[96];

	cr_assert_not_null(used);
	for (int i = 0; i < max_fds; i++) {
		struct procmap alias;

		snprintf(path, sizeof(path), "%s/own%d.%d", dir, round, i);
		write_copy(path, NULL);
		alias = mapping_of(own, path, (unsigned)i);
		cr_assert_gt(symbolizer_module_for_mapping(s, getpid(), geteuid(), &alias), 0);
		(void)unlink(path);
	}
	module_set_add(used, (uint16_t)keep);
	(void)symbolizer_release_unused(s, used, NULL, NULL);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_open, 0, "%zu descriptors left open", st.fds_open);
	procmaps_free(maps);
}

/* Opens keep's binary again (on the lane), and nothing else. */
static void reopen_binary(struct symbolizer *s, int keep)
{
	struct symbolizer_stats st;

	for (int i = 0; i < 4 && symbolizer_module_fd(s, (uint16_t)keep) == -EAGAIN; i++)
		cr_assert_eq(symbolizer_settle(s, 30000), 0);
	cr_assert_geq(symbolizer_module_fd(s, (uint16_t)keep), 0);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_open, 1);
}

struct release_call {
	struct symbolizer *s;
	struct module_set *used;
	size_t released;
};

static void release_unused(void *arg)
{
	struct release_call *c = arg;

	c->released = symbolizer_release_unused(c->s, c->used, NULL, NULL);
}

/* A module's descriptor is closed on the lane, never by the caller (the
 * loop): FUSE asks its server at every close, and it may not answer.
 * Counted in fds_closing until the lane has closed it. */
Test(symbolize, descriptors_are_closed_on_the_lane)
{
	struct release_call c = { .s = make(0, true) };
	struct procmaps *maps = NULL;
	const struct procmap *own = own_mapping((uintptr_t)&symbolize_test_function, &maps);
	struct symbolizer_stats st;
	size_t fds_before = open_fds();

	c.used = calloc(1, sizeof(*c.used));
	cr_assert_not_null(c.used);
	cr_assert_gt(symbolizer_module_for_mapping(c.s, getpid(), geteuid(), own), 0);
	cr_assert_eq(open_fds(), fds_before + 1);
	cr_assert_eq(call_closing_no_file(release_unused, &c), 0,
		     "the caller closed the module's descriptor");
	cr_assert_eq(c.released, 1);
	cr_assert_eq(symbolizer_settle(c.s, 30000), 0);
	symbolizer_get_stats(c.s, &st);
	cr_assert_eq(st.fds_open, 0);
	cr_assert_eq(st.fds_closing, 0);
	cr_assert_eq(open_fds(), fds_before, "the lane did not close it");
	free(c.used);
	procmaps_free(maps);
	symbolizer_free(c.s);
}

struct jit_note {
	struct symbolizer *s;
	uint64_t frame;
};

static void note_jit(void *arg)
{
	struct jit_note *n = arg;

	symbolizer_note_jit_frame(n->s, n->frame);
}

/* The name of n's frame once the lane has done all it was given (a
 * reopen, and then the look it waited for). */
static const char *jit_name_settled(struct jit_note *n, char *buf, size_t size)
{
	for (int i = 0; i < 4; i++)
		cr_assert_eq(symbolizer_settle(n->s, 30000), 0, "the lane did not settle");
	return symbolizer_frame_name(n->s, n->frame, buf, size);
}

/* A JIT map is looked at again on the lane only: whether it grew (an
 * fstat, which its file system answers when it likes) and, once the LRU
 * closed its descriptor, the open in its process's root. */
Test(symbolize, a_jit_map_is_looked_at_again_on_the_lane_only)
{
	enum { MAX_FDS = 4 };
	struct symbolizer_opts o = { .max_fds = MAX_FDS };
	char dir[] = "/tmp/perfd-test-jitlook-XXXXXX", path[96], buf[256];
	struct symbolizer_stats st;
	struct symbolizer *s;
	struct jit_note n;
	FILE *f;
	int id;

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/perf.map", dir);
	f = fopen(path, "we");
	id = jit_module_named_first(s, path, f);
	/* grown */
	fprintf(f, "7f0000002000 100 JS:*second\n");
	fflush(f);
	n = (struct jit_note){ .s = s, .frame = frame_make(id, 0x7f0000002010) };
	usleep(SYMBOLIZER_JIT_CHECK_NS / 1000 + 1000);
	cr_assert_eq(call_reading_no_file(note_jit, &n), 0, "the caller looked at the map");
	cr_assert_str_eq(jit_name_settled(&n, buf, sizeof(buf)), "JS:*second");
	/* closed by the LRU, and grown again */
	close_fds_but_keep_module(s, id, MAX_FDS, dir, 0);
	fprintf(f, "7f0000003000 100 JS:*third\n");
	fflush(f);
	n.frame = frame_make(id, 0x7f0000003010);
	usleep(SYMBOLIZER_JIT_CHECK_NS / 1000 + 1000);
	cr_assert_eq(call_reading_no_file(note_jit, &n), 0, "the caller opened the map again");
	cr_assert_str_eq(jit_name_settled(&n, buf, sizeof(buf)), "JS:*third");
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_reopened, 1);
	fclose(f);
	unlink(path);
	rmdir(dir);
	symbolizer_free(s);
}

/* libc's debug file, once found, is found again when the LRU has closed
 * its descriptor, by the lane: a reload of libc's symbol table does not
 * open it on the caller's thread (an open is a file system's to answer,
 * and perfd's loop must not wait for one), and gets it back.  A debug
 * file counts once. */
Test(symbolize, a_closed_debug_file_is_found_again_on_the_lane_for_symbols)
{
	enum { MAX_FDS = 4 };
	/* room for two and a half of libc's merged tables */
	struct symbolizer_opts o = {
		.cache_bytes = table_bytes((uintptr_t)&getpid, NULL) * 5 / 2,
		.max_fds = MAX_FDS,
		.demangle = true,
	};
	char dir[] = "/tmp/perfd-test-refind-XXXXXX", buf[256];
	struct procmaps *maps = NULL;
	struct symbolizer_stats st;
	struct symbolizer *s;
	int ids[LIBC_COPIES + 1];
	uint64_t offset;

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	cr_assert_not_null(mkdtemp(dir));
	/* libc, then its copies, named: libc's own table is evicted */
	libc_modules(s, dir, &maps, ids, &offset);
	for (int i = 0; i <= LIBC_COPIES; i++)
		cr_assert(strstr(settled_name(s, frame_make(ids[i], offset), buf, sizeof(buf)),
				 "getpid"));
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.debug_files, LIBC_COPIES + 1,
		     "libc's debug file not found: is libc6-dbg installed?");
	cr_assert_geq(st.cache_evictions, 1);

	close_fds_but_keep_module(s, ids[0], MAX_FDS, dir, 0);
	reopen_binary(s, ids[0]);
	(void)symbolizer_frame_name(s, frame_make(ids[0], offset), buf, sizeof(buf));
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.symtab_loads_pending, 1);
	cr_assert_eq(st.fds_open, 1, "the debug file was opened by the lookup itself");
	cr_assert(strstr(settled_name(s, frame_make(ids[0], offset), buf, sizeof(buf)), "getpid"));
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_open, 2, "the lane's debug file was not taken");
	cr_assert_eq(st.debug_files, LIBC_COPIES + 1, "debug files: %zu", st.debug_files);

	remove_libc_copies(dir);
	procmaps_free(maps);
	symbolizer_free(s);
}

/* The same for the first load of libc's line tables (the binary has none:
 * they are its debug file's). */
Test(symbolize, a_closed_debug_file_is_found_again_on_the_lane_for_lines)
{
	enum { MAX_FDS = 4 };
	struct symbolizer_opts o = { .max_fds = MAX_FDS, .demangle = true };
	char dir[] = "/tmp/perfd-test-refind-XXXXXX", buf[256], scratch[256];
	struct frame_record rec[FRAME_MAX_INLINE];
	struct symbolizer_stats st;
	struct symbolizer *s;
	uint64_t frame;
	size_t n;

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	cr_assert_not_null(mkdtemp(dir));
	frame = frame_of(s, (uintptr_t)&getpid + 1);
	cr_assert(strstr(settled_name(s, frame, buf, sizeof(buf)), "getpid"));
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.debug_files, 1, "libc's debug file not found: is libc6-dbg installed?");

	close_fds_but_keep_module(s, frame_module(frame), MAX_FDS, dir, 0);
	reopen_binary(s, frame_module(frame));
	cr_assert(symbolizer_frame_pending(s, frame, true));
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.line_loads_pending, 1);
	cr_assert_eq(st.fds_open, 1, "the debug file was opened by the lookup itself");
	n = settled_resolve(s, frame, true, rec, ELEMENTSOF(rec), scratch, sizeof(scratch));
	cr_assert_geq(n, 1);
	cr_assert(rec[n - 1].file && strstr(rec[n - 1].file, "syscall-template"),
		  "getpid's line from libc's debug file: %s", rec[n - 1].file);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_open, 2, "the lane's debug file was not taken");
	cr_assert_eq(st.debug_files, 1, "debug files: %zu", st.debug_files);

	(void)rmdir(dir);
	symbolizer_free(s);
}

/* A build-id is what a file says of itself: a modified copy with this
 * binary's build-id, mapped first, is a module of its own, and lends its
 * names to no one (issue 27: a user could otherwise poison everyone's
 * symbols and unwind tables). */
Test(symbolize, copies_with_one_build_id_are_separate_modules)
{
	struct symbolizer *s = make(0, true);
	char copy[] = "/tmp/perfd-test-copy-XXXXXX", buf[256];
	struct procmaps *maps = NULL;
	const struct procmap *own;
	struct procmap alias;
	const char *path, *own_build_id, *copy_build_id;
	int fd = mkstemp(copy), id_own, id_copy;

	cr_assert_geq(fd, 0);
	close(fd);
	write_copy(copy, "poisoned_test_function_");
	cr_assert_eq(procmaps_read_pid(getpid(), true, &maps), 0);
	own = procmaps_find(maps, (uintptr_t)&symbolize_test_function);
	cr_assert_not_null(own);
	alias = mapping_of(own, copy, 0);

	id_copy = symbolizer_module_for_mapping(s, getpid(), geteuid(), &alias);
	id_own = symbolizer_module_for_mapping(s, getpid(), geteuid(), own);
	cr_assert_gt(id_copy, 0);
	cr_assert_gt(id_own, 0);
	cr_assert_neq(id_copy, id_own, "a copy with the same build-id shares module %d", id_own);
	cr_assert(symbolizer_describe_module(s, (uint16_t)id_own, &path, &own_build_id));
	cr_assert(symbolizer_describe_module(s, (uint16_t)id_copy, &path, &copy_build_id));
	cr_assert_str_eq(own_build_id, copy_build_id, "the copy should claim the same build-id");
	cr_assert_str_eq(settled_name(s, frame_make(id_copy, own_offset(own)), buf,
					       sizeof(buf)),
			 "poisoned_test_function_");
	cr_assert_str_eq(settled_name(s, frame_make(id_own, own_offset(own)), buf,
					       sizeof(buf)),
			 "symbolize_test_function");
	/* and each is found again as itself */
	cr_assert_eq(symbolizer_module_for_mapping(s, getpid(), geteuid(), own), id_own);
	cr_assert_eq(symbolizer_module_for_mapping(s, getpid(), geteuid(), &alias), id_copy);
	procmaps_free(maps);
	unlink(copy);
	symbolizer_free(s);
}

/* At most max_fds descriptors are open; the others are opened again when
 * their symbols are needed, and only if the file at the path is still
 * the one the module was read from. */
Test(symbolize, descriptors_are_bounded_and_reopened)
{
	enum { COPIES = 12, MAX_FDS = 4 };
	/* room for two tables: each copy is parsed anew at its turn */
	struct symbolizer_opts o = {
		.cache_bytes = table_bytes((uintptr_t)&symbolize_test_function, NULL) * 5 / 2,
		.max_fds = MAX_FDS,
	};
	struct symbolizer *s;
	char dir[] = "/tmp/perfd-test-fds-XXXXXX", paths[COPIES][64], buf[256];
	struct procmap alias[COPIES];
	struct symbolizer_stats st;
	struct procmaps *maps = NULL;
	const struct procmap *own;
	int ids[COPIES];
	size_t fds_before;

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(procmaps_read_pid(getpid(), true, &maps), 0);
	own = procmaps_find(maps, (uintptr_t)&symbolize_test_function);
	cr_assert_not_null(own);
	fds_before = open_fds();
	for (int i = 0; i < COPIES; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/copy%d", dir, i);
		write_copy(paths[i], NULL);
		alias[i] = mapping_of(own, paths[i], (unsigned)i);
		ids[i] = symbolizer_module_for_mapping(s, getpid(), geteuid(), &alias[i]);
		cr_assert_gt(ids[i], 0);
		for (int j = 0; j < i; j++)
			cr_assert_neq(ids[i], ids[j]);
	}
	cr_assert_leq(open_fds(), fds_before + MAX_FDS);
	symbolizer_get_stats(s, &st);
	cr_assert_leq(st.fds_open, MAX_FDS);
	cr_assert_eq(st.fds_limit, MAX_FDS);
	cr_assert_geq(st.fds_evicted, COPIES - MAX_FDS);

	/* the reopen is the lane's (a file system may not answer): the
	 * lookup only starts it, and the frame waits for it */
	(void)symbolizer_frame_name(s, frame_make(ids[0], own_offset(own)), buf, sizeof(buf));
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_reopening, 1);
	cr_assert(symbolizer_frame_pending(s, frame_make(ids[0], own_offset(own)), false));

	/* every copy named, its descriptor opened again (the cache of two
	 * tables parses each one anew) */
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < COPIES; i++)
			cr_assert_str_eq(settled_name(s, frame_make(ids[i], own_offset(own)),
							       buf, sizeof(buf)),
					 "symbolize_test_function", "copy %d named %s", i, buf);
	symbolizer_get_stats(s, &st);
	cr_assert_geq(st.fds_reopened, COPIES - MAX_FDS);
	cr_assert_leq(st.fds_open, MAX_FDS);
	cr_assert_leq(open_fds(), fds_before + MAX_FDS);

	/* copy 0's file replaced at its path: not opened as copy 0 */
	write_copy(paths[0], "poisoned_test_function_");
	for (int i = 1; i <= MAX_FDS; i++) /* copy 0's descriptor closed */
		(void)settled_name(s, frame_make(ids[i], own_offset(own)), buf, sizeof(buf));
	cr_assert_str_neq(settled_name(s, frame_make(ids[0], own_offset(own)), buf,
						sizeof(buf)),
			  "poisoned_test_function_");
	cr_assert_str_neq(buf, "symbolize_test_function"); /* its file is gone */
	symbolizer_get_stats(s, &st);
	cr_assert_geq(st.fds_reopen_failed, 1);
	/* the new file at that path is a module of its own */
	alias[0] = mapping_of(own, paths[0], 0);
	cr_assert_neq(symbolizer_module_for_mapping(s, getpid(), geteuid(), &alias[0]), ids[0]);

	for (int i = 0; i < COPIES; i++)
		unlink(paths[i]);
	rmdir(dir);
	procmaps_free(maps);
	symbolizer_free(s);
}

/* One owner holds at most three quarters of the table: past it its new
 * files are refused and counted, while another owner's still get ids. */
Test(symbolize, one_owner_holds_at_most_its_share)
{
	enum { MAX = 16, SHARE = MAX - MAX / 4 };
	struct symbolizer_opts o = { .max_modules = MAX, .max_fds = 8 };
	struct symbolizer *s;
	char dir[] = "/tmp/perfd-test-share-XXXXXX", path[64];
	struct symbolizer_stats st;
	struct procmaps *maps = NULL;
	const struct procmap *own;
	struct procmap alias;
	int id;

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(procmaps_read_pid(getpid(), true, &maps), 0);
	own = procmaps_find(maps, (uintptr_t)&symbolize_test_function);
	for (int i = 1; i <= SHARE + 1; i++) {
		snprintf(path, sizeof(path), "%s/copy%d", dir, i);
		write_copy(path, NULL);
		alias = mapping_of(own, path, (unsigned)i);
		id = symbolizer_module_for_mapping(s, getpid(), 65534, &alias);
		if (i <= SHARE)
			cr_assert_gt(id, 0);
		else
			cr_assert_eq(id, -ENOSPC);
	}
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.modules, SHARE);
	cr_assert_eq(st.modules_refused, 1);
	cr_assert_eq(st.modules_refused_share, 1);
	/* another user's binary, and the refused file mapped by it, get ids */
	cr_assert_gt(symbolizer_module_for_mapping(s, getpid(), 0, own), 0);
	cr_assert_gt(symbolizer_module_for_mapping(s, getpid(), 0, &alias), 0);
	for (int i = 1; i <= SHARE + 1; i++) {
		snprintf(path, sizeof(path), "%s/copy%d", dir, i);
		(void)unlink(path);
	}
	(void)rmdir(dir);
	procmaps_free(maps);
	symbolizer_free(s);
}

/* The table holds max_modules at once: past it a new file is refused and
 * counted, and the ids nobody refers to any more are given back and given
 * again, to files named from their own symbols. */
Test(symbolize, module_ids_are_bounded_and_given_back)
{
	enum { MAX = 16 };
	struct symbolizer_opts o = { .max_modules = MAX, .max_fds = 8 };
	struct symbolizer *s;
	char dir[] = "/tmp/perfd-test-ids-XXXXXX", path[64], buf[256];
	struct module_set *used = calloc(1, sizeof(*used));
	struct symbolizer_stats st;
	struct procmaps *maps = NULL;
	const struct procmap *own;
	struct procmap alias;
	const char *p, *b;
	int own_id, id;

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	cr_assert_not_null(used);
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(procmaps_read_pid(getpid(), true, &maps), 0);
	own = procmaps_find(maps, (uintptr_t)&symbolize_test_function);
	own_id = symbolizer_module_for_mapping(s, getpid(), geteuid(), own);
	cr_assert_gt(own_id, 0);
	cr_assert(!symbolizer_wants_collection(s));
	for (int i = 1; i <= MAX; i++) {
		snprintf(path, sizeof(path), "%s/copy%d", dir, i);
		write_copy(path, i % 2 ? "poisoned_test_function_" : NULL);
		alias = mapping_of(own, path, (unsigned)i);
		/* two owners, neither past its share: the table is what fills */
		id = symbolizer_module_for_mapping(s, getpid(), 1000 + i % 2, &alias);
		if (i < MAX)
			cr_assert_gt(id, 0);
		else
			cr_assert_eq(id, -ENOSPC);
	}
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.modules, MAX);
	cr_assert_eq(st.modules_refused, 1);
	cr_assert(symbolizer_wants_collection(s));

	module_set_add(used, (uint16_t)own_id);
	cr_assert_eq(symbolizer_release_unused(s, used, NULL, NULL), MAX - 1);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.modules, 1);
	cr_assert_eq(st.modules_released, MAX - 1);
	cr_assert(!symbolizer_wants_collection(s));
	cr_assert_str_eq(settled_name(s, frame_make(own_id, own_offset(own)), buf,
					       sizeof(buf)),
			 "symbolize_test_function");

	/* the refused file gets a released id, and its own names */
	id = symbolizer_module_for_mapping(s, getpid(), geteuid(), &alias);
	cr_assert_gt(id, 0);
	cr_assert_neq(id, own_id);
	cr_assert(symbolizer_describe_module(s, (uint16_t)id, &p, &b));
	cr_assert_str_eq(p, path);
	cr_assert_str_eq(settled_name(s, frame_make(id, own_offset(own)), buf,
					       sizeof(buf)),
			 "symbolize_test_function");
	for (int i = 1; i <= MAX; i++) {
		snprintf(path, sizeof(path), "%s/copy%d", dir, i);
		unlink(path);
	}
	rmdir(dir);
	free(used);
	procmaps_free(maps);
	symbolizer_free(s);
}

static void *probe_thread(void *arg)
{
	module_probe_run(arg);
	return NULL;
}

/* Identifying a mapped file in three steps (profile/procread.c), its system calls
 * on another thread, gives what symbolizer_module_for_mapping gives: the
 * same module, its descriptor and build-id, the table touched on this
 * thread only. */
Test(symbolize, a_file_probed_on_another_thread_is_the_module_for_its_mapping)
{
	struct symbolizer_opts o = { 0 };
	struct symbolizer *s;
	struct procmaps *maps = NULL;
	const struct procmap *libc = own_mapping((uintptr_t)&getpid, &maps);
	struct symbolizer_stats st;
	struct module_probe p;
	const char *path, *build_id;
	pthread_t t;
	int id;

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	cr_assert_eq(symbolizer_plan_probe(s, getpid(), libc, false, &p), 0);
	cr_assert(p.want_open, "a file the table does not know is opened");
	cr_assert_eq(pthread_create(&t, NULL, probe_thread, &p), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(p.error, 0);
	cr_assert_geq(p.fd, 0);
	id = symbolizer_module_for_probe(s, geteuid(), &p);
	cr_assert_gt(id, 0);
	cr_assert_eq(p.fd, -1, "the table took the descriptor");
	cr_assert(symbolizer_describe_module(s, (uint16_t)id, &path, &build_id));
	cr_assert_str_eq(path, libc->path);
	cr_assert_str_eq(build_id, p.build_id);
	symbolizer_probe_done(s, &p);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_open, 1);
	/* a file the table knows is only stat'ed, and is the same module */
	cr_assert_eq(symbolizer_plan_probe(s, getpid(), libc, false, &p), 0);
	cr_assert_not(p.want_open);
	module_probe_run(&p);
	cr_assert_eq(p.fd, -1);
	cr_assert_eq(symbolizer_module_for_probe(s, geteuid(), &p), id);
	symbolizer_probe_done(s, &p);
	cr_assert_eq(symbolizer_module_for_mapping(s, getpid(), geteuid(), libc), id);
	procmaps_free(maps);
	symbolizer_free(s);
}

/* A probe's descriptor counts against max_fds from the plan on (the LRU
 * closes another to make room), and one never applied (its process freed
 * meanwhile) is closed by done: nothing leaks. */
Test(symbolize, a_probe_holds_a_descriptor_slot_and_done_closes_what_it_opened)
{
	struct symbolizer_opts o = { .max_fds = 1 };
	struct symbolizer *s;
	char dir[] = "/tmp/perfd-test-probe-XXXXXX", path[64];
	struct procmaps *maps = NULL;
	const struct procmap *own;
	struct symbolizer_stats st;
	struct module_probe p;
	struct procmap alias;
	size_t fds_before;

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	cr_assert_not_null(mkdtemp(dir));
	own = own_mapping((uintptr_t)&symbolize_test_function, &maps);
	cr_assert_gt(symbolizer_module_for_mapping(s, getpid(), geteuid(), own), 0);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_open, 1);
	snprintf(path, sizeof(path), "%s/copy", dir);
	write_copy(path, NULL);
	alias = mapping_of(own, path, 1);
	fds_before = open_fds();
	cr_assert_eq(symbolizer_plan_probe(s, getpid(), &alias, false, &p), 0);
	cr_assert(p.want_open);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_open, 0, "the slot was made at the plan");
	module_probe_run(&p);
	cr_assert_geq(p.fd, 0);
	symbolizer_probe_done(s, &p);
	cr_assert_eq(p.fd, -1);
	cr_assert_leq(open_fds(), fds_before - 1, "the probe's descriptor and the one evicted are closed");
	/* the slot is free again: the file is opened at once */
	cr_assert_gt(symbolizer_module_for_mapping(s, getpid(), geteuid(), &alias), 0);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_open, 1);
	(void)unlink(path);
	(void)rmdir(dir);
	procmaps_free(maps);
	symbolizer_free(s);
}

/* Probes out hold at most a quarter of max_fds: past it a probe opens
 * the file, reads its build-id and closes it (on its lane), rather than
 * have the plan close every descriptor the modules being symbolized hold;
 * the module is then reopened when it is wanted, on the lane and on a
 * slot of the same quarter, which it waits for. */
Test(symbolize, probes_reserve_at_most_a_quarter_of_the_descriptors)
{
	struct symbolizer_opts o = { .max_fds = 8 };
	struct symbolizer *s;
	struct procmaps *maps = NULL, *own_maps = NULL;
	const struct procmap *libc = own_mapping((uintptr_t)&getpid, &maps);
	const struct procmap *own = own_mapping((uintptr_t)&symbolize_test_function, &own_maps);
	struct symbolizer_stats st;
	struct module_probe p[3];
	const char *path, *build_id;
	int id;

	cr_assert_eq(symbolizer_new(&o, &s, NULL), 0);
	cr_assert_eq(symbolizer_plan_probe(s, getpid(), libc, true, &p[0]), 0);
	cr_assert(p[0].reserved);
	cr_assert_eq(symbolizer_plan_probe(s, getpid(), own, true, &p[1]), 0);
	cr_assert(p[1].reserved);
	cr_assert_eq(symbolizer_plan_probe(s, getpid(), libc, true, &p[2]), 0);
	cr_assert_not(p[2].reserved, "two slots of eight out already");
	module_probe_run(&p[2]);
	cr_assert_eq(p[2].error, 0);
	cr_assert_eq(p[2].fd, -1, "closed on the probe's thread");
	id = symbolizer_module_for_probe(s, geteuid(), &p[2]);
	cr_assert_gt(id, 0);
	cr_assert(symbolizer_describe_module(s, (uint16_t)id, &path, &build_id));
	cr_assert_str_eq(build_id, p[2].build_id);
	cr_assert_neq(build_id[0], 0, "its build-id was read before it was closed");
	symbolizer_probe_done(s, &p[2]);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_open, 0);

	/* reopened when wanted, on the lane, on a slot of the same quarter:
	 * both are the probes', so it waits its turn */
	cr_assert_eq(symbolizer_module_fd(s, (uint16_t)id), -EAGAIN);
	usleep(100 * 1000);
	symbolizer_complete(s);
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_reopening, 1);
	cr_assert_eq(st.fds_reopened, 0, "a reopen past the quarter ran");
	cr_assert_eq(symbolizer_settle(s, 30000), -ETIMEDOUT,
		     "settle waited for what only the probes' taking back frees");
	/* a probe taken back (its slot given back at apply, before done):
	 * the reopen goes */
	module_probe_run(&p[1]);
	cr_assert_gt(symbolizer_module_for_probe(s, geteuid(), &p[1]), 0);
	symbolizer_probe_done(s, &p[1]);
	cr_assert_eq(symbolizer_settle(s, 30000), 0);
	cr_assert_geq(symbolizer_module_fd(s, (uint16_t)id), 0, "reopened when wanted");
	symbolizer_get_stats(s, &st);
	cr_assert_eq(st.fds_reopening, 0);
	cr_assert_eq(st.fds_reopened, 1);
	cr_assert_eq(symbolizer_plan_probe(s, getpid(), own, true, &p[1]), 0);
	cr_assert(p[1].reserved, "a slot given back is there again");
	symbolizer_probe_done(s, &p[0]);
	symbolizer_probe_done(s, &p[1]);
	procmaps_free(maps);
	procmaps_free(own_maps);
	symbolizer_free(s);
}
