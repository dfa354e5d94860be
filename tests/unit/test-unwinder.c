/* SPDX-License-Identifier: MIT */
/*
 * test-unwinder.c - unit tests for daemon/unwind/unwinder.c against real
 * BPF maps: the three maps bpf/unwind.bpf.h declares, created here with
 * bpf_map_create() at the sizes each test needs (root, as for the daemon).
 *
 * The tables are those of this test's own binaries (libc, the test
 * program, everything in /proc/self/maps), whose modules a real symbolizer
 * registers the way the aggregator does.  Process ids given to the
 * unwinder are only keys, so one process can stand for several.
 *
 * Checked: a table that builds is uploaded row for row, and the process's
 * mapping points at it with the load bias dl_iterate_phdr() reports; a
 * process updated twice (or replaced by a new one with its pid) holds one
 * range and builds nothing again; a process forgotten leaves its tables
 * idle for the next one, and an idle table makes room when rows run
 * short; a table bigger than the rows map is refused, retried, and leaves
 * nothing behind; modules that cannot be read (no descriptor, not ELF) run
 * on frame pointers; full mapping or process maps refuse the process and
 * give back what it had taken; builds run on the builder's thread while
 * the process runs on frame pointers, a process gone before its tables
 * are built leaves them idle and unreferenced, and an unwinder freed with
 * builds pending loses nothing.  Templated code (CPython's perf trampoline
 * arenas, given by address: nothing is read there) gets a mapping of its
 * own per region, with the rows trampoline.c builds, one table per stride
 * shared by every region and process; a template that does not decode or
 * a region outside its mapping leaves frame pointers.
 *
 * Leaks on those paths (a refused table's segments, once) fail the test in
 * the sanitized build: each test ends with a LeakSanitizer check once
 * everything is freed.  The updates run on a thread of their own, so what
 * they allocate is recorded with a stack that does not pass through
 * Criterion's runner: tests/unit/lsan.supp suppresses every leak whose
 * stack does, which is every allocation made from a test body.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "fixture.h"
#include "perfd/macro.h"
#include "perfd/unwind.h"
#include "process/procmaps.h"
#include "profile/frame.h"
#include "symbols/symbolize.h"
#include "unwind/trampoline.h"
#include "unwind/unwind_table.h"
#include "unwind/unwinder.h"

#define PID_A 4000001u /* above any real pid: the unwinder only keys on it */
#define PID_B 4000002u
#define START_A 1111
#define START_B 2222
#define BIG_ROWS (1u << 21) /* every table of this process, sanitizer runtimes included */

FIXTURE_SUITE(unwinder, 30);

/* One unwinder with its maps and the symbolizer its modules come from,
 * and this process's executable mappings with their module ids. */
struct env {
	int rows_fd, mappings_fd, processes_fd;
	uint32_t rows, mappings;
	struct symbolizer *sym;
	struct unwinder *u;
	struct procmaps *maps;
	uint16_t *ids;
};

static int map_create(enum bpf_map_type type, const char *name, size_t value_size,
		      uint32_t entries)
{
	int fd = bpf_map_create(type, name, sizeof(uint32_t), value_size, entries, NULL);

	cr_assert_geq(fd, 0, "bpf_map_create(%s): %s (this suite needs root and BPF)", name,
		      strerror(-fd));
	return fd;
}

/* Tables up to this many rows are uploaded by the caller, not the builder:
 * 0 (every upload through the builder) unless a test says otherwise. */
static uint32_t loop_upload_max_rows;

/* The symbolizer's bound on descriptors: 0 (its default) unless a test
 * says otherwise. */
static size_t sym_max_fds;

/* The maps, the symbolizer and the unwinder, with no module registered. */
static void env_open_bare(struct env *e, uint32_t rows, uint32_t mappings, uint32_t processes)
{
	struct symbolizer_opts so = { .max_fds = sym_max_fds };
	struct unwinder_opts uo;

	*e = (struct env){ .rows = rows, .mappings = mappings };
	e->rows_fd = map_create(BPF_MAP_TYPE_ARRAY, "unwind_rows", sizeof(struct perfd_unwind_row),
				rows);
	e->mappings_fd = map_create(BPF_MAP_TYPE_ARRAY, "unwind_mappings",
				    sizeof(struct perfd_unwind_mapping), mappings);
	e->processes_fd = map_create(BPF_MAP_TYPE_HASH, "unwind_processes",
				     sizeof(struct perfd_unwind_process), processes);
	cr_assert_eq(symbolizer_new(&so, &e->sym, NULL), 0);
	uo = (struct unwinder_opts){
		.rows_fd = e->rows_fd,
		.mappings_fd = e->mappings_fd,
		.processes_fd = e->processes_fd,
		.rows_capacity = rows,
		.mappings_capacity = mappings,
		.loop_upload_max_rows = loop_upload_max_rows,
		.symbolizer = e->sym,
	};
	cr_assert_eq(unwinder_new(&uo, &e->u), 0);
}

/* This process's executable mappings, their modules registered as the
 * aggregator registers them. */
static void env_add_self(struct env *e)
{
	cr_assert_eq(procmaps_read_pid(getpid(), true, &e->maps), 0);
	cr_assert_gt(e->maps->n, 1);
	e->ids = calloc(e->maps->n, sizeof(*e->ids));
	cr_assert_not_null(e->ids);
	for (size_t i = 0; i < e->maps->n; i++) {
		const struct procmap *m = &e->maps->maps[i];
		int id = strcmp(m->path, "[vdso]") == 0 ? symbolizer_vdso_module(e->sym) :
			 m->path[0] == '/' ? symbolizer_module_for_mapping(e->sym, getpid(), geteuid(), m) :
					     0;

		e->ids[i] = id > 0 ? (uint16_t)id : 0;
	}
}

static void env_open(struct env *e, uint32_t rows, uint32_t mappings, uint32_t processes)
{
	env_open_bare(e, rows, mappings, processes);
	env_add_self(e);
}

static void env_close(struct env *e)
{
	e->u = unwinder_free(e->u);
	e->sym = symbolizer_free(e->sym);
	e->maps = procmaps_free(e->maps);
	free(e->ids);
	e->ids = NULL;
	closep(&e->rows_fd);
	closep(&e->mappings_fd);
	closep(&e->processes_fd);
}

/* Fails the test when memory was lost so far (sanitized build only).
 * Called with everything freed, so what is left allocated and unreachable
 * was leaked. */
static void check_no_leaks(void)
{
#if defined(__SANITIZE_ADDRESS__)
	cr_assert_eq(__lsan_do_recoverable_leak_check(), 0,
		     "LeakSanitizer found leaks (report above)");
#endif
}

/* The index of the first executable mapping whose file name starts with
 * prefix ("libc.so"), or of the test program itself for NULL. */
static size_t find_map(const struct env *e, const char *prefix)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	cr_assert_gt(n, 0);
	exe[n] = '\0';
	for (size_t i = 0; i < e->maps->n; i++) {
		const char *path = e->maps->maps[i].path;
		const char *base = strrchr(path, '/');

		if (!e->ids[i] || !base)
			continue;
		if (prefix ? strncmp(base + 1, prefix, strlen(prefix)) == 0 : strcmp(path, exe) == 0)
			return i;
	}
	cr_assert_fail("no executable mapping of %s", prefix ? prefix : exe);
	return 0;
}

/* A one-mapping view of e's maps (sharing its storage). */
static struct procmaps one_map(const struct env *e, size_t i)
{
	return (struct procmaps){ .maps = &e->maps->maps[i], .n = 1 };
}

/* The table the unwinder builds for module id, built here the same way. */
static struct unwind_table *table_of(const struct env *e, uint16_t id)
{
	struct unwind_table *t = NULL;
	int fd = symbolizer_module_fd(e->sym, id);

	cr_assert_geq(fd, 0);
	cr_assert_eq(unwind_table_build(fd, NULL, &t), 0);
	return t;
}

struct update_call {
	struct unwinder *u;
	uint32_t pid;
	uint64_t start_time_ns;
	const struct procmaps *maps;
	const uint16_t *ids;
	bool settle;
	int r;
	const struct unwind_copies *copies;
};

/* Takes in every build the unwinder has handed to its builder, as the
 * daemon's loop does when the builder's fd is readable. */
static void settle_builds(struct unwinder *u)
{
	for (;;) {
		struct unwinder_stats st;
		struct pollfd pfd = { .fd = unwinder_fd(u), .events = POLLIN };

		unwinder_get_stats(u, &st);
		if (st.tables_building == 0)
			return;
		cr_assert_eq(poll(&pfd, 1, 60000), 1, "a table took a minute to build");
		unwinder_complete(u);
	}
}

static void *update_thread(void *arg)
{
	struct update_call *c = arg;

	c->r = unwinder_update_process(c->u, c->pid, c->start_time_ns, c->maps, c->ids,
				       c->copies);
	if (c->settle)
		settle_builds(c->u);
	return NULL;
}

/* unwinder_update_process() on a thread of its own (see the top), and the
 * builds it started taken in. */
static int update_copies(struct env *e, uint32_t pid, uint64_t start_time_ns,
			 const struct procmaps *maps, const uint16_t *ids,
			 const struct unwind_copies *copies)
{
	struct update_call c = { e->u, pid, start_time_ns, maps, ids, true, 0, copies };
	pthread_t thread;

	cr_assert_eq(pthread_create(&thread, NULL, update_thread, &c), 0);
	cr_assert_eq(pthread_join(thread, NULL), 0);
	return c.r;
}

static int update(struct env *e, uint32_t pid, uint64_t start_time_ns,
		  const struct procmaps *maps, const uint16_t *ids)
{
	return update_copies(e, pid, start_time_ns, maps, ids, NULL);
}

static struct unwinder_stats stats(const struct env *e)
{
	struct unwinder_stats st;

	unwinder_get_stats(e->u, &st);
	return st;
}

/* The BPF entry of pid; false when it has none. */
static bool bpf_process(const struct env *e, uint32_t pid, struct perfd_unwind_process *ret)
{
	if (bpf_map_lookup_elem(e->processes_fd, &pid, ret) == 0)
		return true;
	cr_assert_eq(errno, ENOENT);
	return false;
}

static struct perfd_unwind_mapping bpf_mapping(const struct env *e, uint32_t index)
{
	struct perfd_unwind_mapping m;

	cr_assert_eq(bpf_map_lookup_elem(e->mappings_fd, &index, &m), 0);
	return m;
}

/* Every step-th row BPF reads through mapping m is t's. */
static void check_rows(const struct env *e, const struct perfd_unwind_mapping *m,
		       const struct unwind_table *t, uint32_t step)
{
	for (uint32_t i = 0; i < t->n_rows; i += step) {
		struct perfd_unwind_row row;
		uint32_t key = m->rows_first + i;

		cr_assert_eq(bpf_map_lookup_elem(e->rows_fd, &key, &row), 0);
		cr_assert(memcmp(&row, &t->rows[i], sizeof(row)) == 0, "row %u differs", i);
	}
}

struct find_bias {
	const char *path;
	uint64_t bias;
	bool found;
};

static int find_bias_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_bias *f = data;
	struct stat a, b;

	if (!info->dlpi_name || !info->dlpi_name[0] || stat(info->dlpi_name, &a) < 0 ||
	    stat(f->path, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return 0;
	f->bias = info->dlpi_addr;
	f->found = true;
	return 1;
}

/* --- tables that build -------------------------------------------------- */

Test(unwinder, table_builds_and_is_uploaded)
{
	struct env e;
	env_open(&e, BIG_ROWS, 256, 16);
	size_t libc = find_map(&e, "libc.so");
	struct procmaps view = one_map(&e, libc);
	struct unwind_table *t = table_of(&e, e.ids[libc]);
	struct find_bias fb = { .path = e.maps->maps[libc].path };
	struct perfd_unwind_process proc;
	struct perfd_unwind_mapping m;
	struct unwinder_stats st;

	cr_assert_eq(update(&e, PID_A, START_A, &view, &e.ids[libc]), 0);
	st = stats(&e);
	cr_assert_eq(st.tables, 1);
	cr_assert_eq(st.tables_built, 1);
	cr_assert_eq(st.tables_refused, 0);
	cr_assert_eq(st.tables_failed, 0);
	cr_assert_eq(st.rows_used, t->n_rows);
	cr_assert_eq(st.mappings_used, 1);
	cr_assert_eq(st.processes, 1);

	cr_assert(bpf_process(&e, PID_A, &proc));
	cr_assert_eq(proc.mappings_count, 1);
	m = bpf_mapping(&e, proc.mappings_first);
	cr_assert_eq(m.start, e.maps->maps[libc].start);
	cr_assert_eq(m.end, e.maps->maps[libc].end);
	cr_assert_eq(m.rows_count, t->n_rows);
	cr_assert_leq((uint64_t)m.rows_first + m.rows_count, BIG_ROWS);
	/* row pc = address - pc_adjust = vaddr - base */
	(void)dl_iterate_phdr(find_bias_cb, &fb);
	cr_assert(fb.found, "libc not in dl_iterate_phdr");
	cr_assert_eq(m.pc_adjust, fb.bias + t->base_vaddr, "pc_adjust %#llx, expected %#llx",
		     (unsigned long long)m.pc_adjust, (unsigned long long)(fb.bias + t->base_vaddr));

	check_rows(&e, &m, t, 1);
	unwind_table_free(t);
	env_close(&e);
	check_no_leaks();
}

Test(unwinder, process_updated_twice)
{
	struct env e;
	struct perfd_unwind_process proc;
	struct unwinder_stats first, st;

	env_open(&e, BIG_ROWS, 256, 16);
	cr_assert_eq(update(&e, PID_A, START_A, e.maps, e.ids), 0);
	first = stats(&e);
	cr_assert_gt(first.tables, 1);
	cr_assert_eq(first.mappings_used, e.maps->n);

	/* maps read again: the same tables, one range of mappings */
	cr_assert_eq(update(&e, PID_A, START_A, e.maps, e.ids), 0);
	st = stats(&e);
	cr_assert_eq(st.tables_built, first.tables_built);
	cr_assert_eq(st.tables, first.tables);
	cr_assert_eq(st.tables_idle, 0);
	cr_assert_eq(st.rows_used, first.rows_used);
	cr_assert_eq(st.mappings_used, e.maps->n);
	cr_assert_eq(st.processes, 1);
	cr_assert(bpf_process(&e, PID_A, &proc));
	cr_assert_eq(proc.mappings_count, e.maps->n);
	for (size_t i = 0; i < e.maps->n; i++)
		cr_assert_eq(bpf_mapping(&e, proc.mappings_first + i).start, e.maps->maps[i].start);

	/* the pid reused by a new process: it replaces the old one */
	cr_assert_eq(update(&e, PID_A, START_B, e.maps, e.ids), 0);
	st = stats(&e);
	cr_assert_eq(st.mappings_used, e.maps->n);
	cr_assert_eq(st.processes, 1);
	unwinder_forget_process(e.u, PID_A, START_A); /* not that one any more */
	cr_assert_eq(stats(&e).processes, 1);
	unwinder_forget_process(e.u, PID_A, START_B);
	st = stats(&e);
	cr_assert_eq(st.processes, 0);
	cr_assert_eq(st.mappings_used, 0);
	cr_assert_eq(st.tables_idle, st.tables);
	env_close(&e);
	check_no_leaks();
}

Test(unwinder, forget_keeps_tables_for_the_next_process)
{
	struct env e;
	struct perfd_unwind_process proc;
	struct unwinder_stats before, st;

	env_open(&e, BIG_ROWS, 256, 16);
	cr_assert_eq(update(&e, PID_A, START_A, e.maps, e.ids), 0);
	before = stats(&e);
	unwinder_forget_process(e.u, PID_A, START_B); /* another incarnation: ignored */
	cr_assert(bpf_process(&e, PID_A, &proc));
	cr_assert_eq(stats(&e).processes, 1);
	unwinder_forget_process(e.u, PID_B, START_A); /* unknown: ignored */

	unwinder_forget_process(e.u, PID_A, START_A);
	cr_assert_not(bpf_process(&e, PID_A, &proc));
	st = stats(&e);
	cr_assert_eq(st.processes, 0);
	cr_assert_eq(st.mappings_used, 0);
	cr_assert_eq(st.tables, before.tables);
	cr_assert_eq(st.tables_idle, before.tables);
	cr_assert_eq(st.rows_used, before.rows_used);

	/* the next process mapping the same binaries builds nothing */
	cr_assert_eq(update(&e, PID_B, START_B, e.maps, e.ids), 0);
	st = stats(&e);
	cr_assert_eq(st.tables_built, before.tables_built);
	cr_assert_eq(st.tables_idle, 0);
	cr_assert(bpf_process(&e, PID_B, &proc));
	env_close(&e);
	check_no_leaks();
}

/* --- builds off the caller's thread -------------------------------------- */

/* unwinder_update_process() on a thread, without taking the builds in. */
static int update_pending(struct env *e, uint32_t pid, uint64_t start_time_ns,
			  const struct procmaps *maps, const uint16_t *ids)
{
	struct update_call c = { e->u, pid, start_time_ns, maps, ids, false, 0, NULL };
	pthread_t thread;

	cr_assert_eq(pthread_create(&thread, NULL, update_thread, &c), 0);
	cr_assert_eq(pthread_join(thread, NULL), 0);
	return c.r;
}

static void *settle_thread(void *arg)
{
	settle_builds(arg);
	return NULL;
}

static void settle(struct env *e)
{
	pthread_t thread;

	cr_assert_eq(pthread_create(&thread, NULL, settle_thread, e->u), 0);
	cr_assert_eq(pthread_join(thread, NULL), 0);
}

/* The caller never waits for a build: the process is described at once,
 * its new binary on frame pointers (rows_count 0), and once the builder is
 * done unwinder_complete uploads the rows and describes the process again,
 * in a new range (the old one given back). */
Test(unwinder, builds_run_on_the_builder_and_frame_pointers_serve_meanwhile)
{
	struct env e;
	env_open(&e, BIG_ROWS, 256, 16);
	size_t libc = find_map(&e, "libc.so");
	struct procmaps view = one_map(&e, libc);
	struct unwind_table *t = table_of(&e, e.ids[libc]);
	struct perfd_unwind_process proc;
	struct perfd_unwind_mapping m;
	struct unwinder_stats st;

	cr_assert_eq(update_pending(&e, PID_A, START_A, &view, &e.ids[libc]), 0);
	st = stats(&e);
	cr_assert_eq(st.tables_building, 1);
	cr_assert_eq(st.tables, 0);
	cr_assert_eq(st.rows_used, 0);
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(st.mappings_used, 1);
	cr_assert(bpf_process(&e, PID_A, &proc));
	m = bpf_mapping(&e, proc.mappings_first);
	cr_assert_eq(m.start, e.maps->maps[libc].start);
	cr_assert_eq(m.end, e.maps->maps[libc].end);
	cr_assert_eq(m.rows_count, 0, "a mapping points at rows before they are uploaded");
	cr_assert_eq(m.rows_first, PERFD_UNWIND_ROWS_PENDING,
		     "a mapping whose table is being built must say so, for BPF to flag its stacks");

	settle(&e);
	st = stats(&e);
	cr_assert_eq(st.tables_building, 0);
	cr_assert_eq(st.tables, 1);
	cr_assert_eq(st.tables_built, 1);
	cr_assert_eq(st.rows_used, t->n_rows);
	cr_assert_eq(st.mappings_used, 1, "the first description's range was not given back");
	cr_assert(bpf_process(&e, PID_A, &proc));
	m = bpf_mapping(&e, proc.mappings_first);
	cr_assert_eq(m.rows_count, t->n_rows);
	cr_assert_leq((uint64_t)m.rows_first + m.rows_count, BIG_ROWS);
	unwind_table_free(t);
	env_close(&e);
	check_no_leaks();
}

/* A module whose descriptor the symbolizer's LRU closed: its file is
 * opened again on the symbolizer's lane (a file system may not answer),
 * the table waits for it as for a build (the mapping pending for BPF),
 * and unwinder_retry_opens hands it to the builder once it is open. */
Test(unwinder, a_table_waits_for_its_file_to_be_opened_again)
{
	struct perfd_unwind_process proc;
	struct perfd_unwind_mapping m;
	struct unwind_table *t = NULL;
	struct symbolizer_stats ss;
	struct unwinder_stats st;
	struct procmaps view;
	struct env e;
	size_t libc;
	int fd;

	sym_max_fds = 1; /* the last module registered keeps the one descriptor */
	env_open(&e, BIG_ROWS, 256, 16);
	sym_max_fds = 0;
	libc = find_map(&e, "libc.so");
	view = one_map(&e, libc);
	fd = open(e.maps->maps[libc].path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(unwind_table_build(fd, NULL, &t), 0);
	close(fd);
	symbolizer_get_stats(e.sym, &ss);
	cr_assert_leq(ss.fds_open, 1);

	cr_assert_eq(update_pending(&e, PID_A, START_A, &view, &e.ids[libc]), 0);
	symbolizer_get_stats(e.sym, &ss);
	cr_assert_eq(ss.fds_reopening, 1, "libc's file was not handed to the lane to open");
	st = stats(&e);
	cr_assert_eq(st.tables_building, 1);
	cr_assert_eq(st.tables_refused, 0);
	cr_assert(bpf_process(&e, PID_A, &proc));
	m = bpf_mapping(&e, proc.mappings_first);
	cr_assert_eq(m.rows_first, PERFD_UNWIND_ROWS_PENDING);

	unwinder_retry_opens(e.u); /* not open yet, or not taken back: waits */
	cr_assert_eq(symbolizer_settle(e.sym, 30000), 0);
	symbolizer_get_stats(e.sym, &ss);
	cr_assert_eq(ss.fds_reopening, 0);
	cr_assert_eq(ss.fds_reopened, 1);
	unwinder_retry_opens(e.u);
	settle(&e);
	st = stats(&e);
	cr_assert_eq(st.tables_building, 0);
	cr_assert_eq(st.tables_built, 1);
	cr_assert_eq(st.tables_refused, 0);
	cr_assert(bpf_process(&e, PID_A, &proc));
	m = bpf_mapping(&e, proc.mappings_first);
	cr_assert_eq(m.rows_count, t->n_rows);
	check_rows(&e, &m, t, 1);
	unwind_table_free(t);
	env_close(&e);
	check_no_leaks();
}

/* A small table uploaded by the caller (no second trip through the
 * builder) ends the same: rows for row, the mapping pointing at them. */
Test(unwinder, small_tables_are_uploaded_by_the_caller)
{
	struct env e;
	size_t libc;
	struct procmaps view;
	struct unwind_table *t;
	struct perfd_unwind_process proc;
	struct perfd_unwind_mapping m;

	loop_upload_max_rows = UINT32_MAX;
	env_open(&e, BIG_ROWS, 256, 16);
	libc = find_map(&e, "libc.so");
	view = one_map(&e, libc);
	t = table_of(&e, e.ids[libc]);
	cr_assert_eq(update(&e, PID_A, START_A, &view, &e.ids[libc]), 0);
	cr_assert_eq(stats(&e).tables_built, 1);
	cr_assert(bpf_process(&e, PID_A, &proc));
	m = bpf_mapping(&e, proc.mappings_first);
	cr_assert_eq(m.rows_count, t->n_rows);
	check_rows(&e, &m, t, 97);
	unwind_table_free(t);
	env_close(&e);
	check_no_leaks();
}

/* A process updated twice, then gone, before its tables are built: each
 * table is built once, ends idle with no reference left over, and serves
 * the next process without a build. */
Test(unwinder, process_gone_before_its_tables_are_built)
{
	struct env e;
	struct perfd_unwind_process proc;
	struct unwinder_stats st, built;

	env_open(&e, BIG_ROWS, 256, 16);
	cr_assert_eq(update_pending(&e, PID_A, START_A, e.maps, e.ids), 0);
	cr_assert_eq(update_pending(&e, PID_A, START_A, e.maps, e.ids), 0);
	st = stats(&e);
	cr_assert_gt(st.tables_building, 1);
	cr_assert_eq(st.mappings_used, e.maps->n, "the second update kept the first range");
	unwinder_forget_process(e.u, PID_A, START_A);
	cr_assert_not(bpf_process(&e, PID_A, &proc));
	settle(&e);
	built = stats(&e);
	cr_assert_eq(built.tables_built, st.tables_building, "a table was built twice");
	cr_assert_eq(built.processes, 0);
	cr_assert_eq(built.mappings_used, 0);
	cr_assert_eq(built.tables_idle, built.tables, "a reference outlived its process");

	cr_assert_eq(update(&e, PID_B, START_B, e.maps, e.ids), 0);
	st = stats(&e);
	cr_assert_eq(st.tables_built, built.tables_built);
	cr_assert_eq(st.tables_idle, 0);
	cr_assert(bpf_process(&e, PID_B, &proc));
	env_close(&e);
	check_no_leaks();
}

static void *close_thread(void *arg)
{
	env_close(arg);
	return NULL;
}

/* Freed while the builder still has work: the thread stops after the build
 * it is in, and every job, table and descriptor goes. */
Test(unwinder, freed_with_builds_pending)
{
	struct env e;
	pthread_t thread;

	env_open(&e, BIG_ROWS, 256, 16);
	cr_assert_eq(update_pending(&e, PID_A, START_A, e.maps, e.ids), 0);
	cr_assert_gt(stats(&e).tables_building, 1);
	cr_assert_eq(pthread_create(&thread, NULL, close_thread, &e), 0);
	cr_assert_eq(pthread_join(thread, NULL), 0);
	check_no_leaks();
}

/* --- no room ------------------------------------------------------------- */

/* Rows for either table but not both: the idle one makes room, a busy one
 * does not (the new table is refused, and its process described anyway). */
Test(unwinder, idle_table_evicted_when_rows_run_short)
{
	struct env probe, e;
	size_t libc, self;
	uint32_t n_libc, n_self;
	struct procmaps view_libc, view_self;
	struct perfd_unwind_process proc;
	struct unwinder_stats st;
	struct unwind_table *t;

	env_open(&probe, 1, 1, 1);
	t = table_of(&probe, probe.ids[find_map(&probe, "libc.so")]);
	n_libc = t->n_rows;
	unwind_table_free(t);
	t = table_of(&probe, probe.ids[find_map(&probe, NULL)]);
	n_self = t->n_rows;
	unwind_table_free(t);
	env_close(&probe);

	env_open(&e, MAX(n_libc, n_self), 16, 16);
	libc = find_map(&e, "libc.so");
	self = find_map(&e, NULL);
	view_libc = one_map(&e, libc);
	view_self = one_map(&e, self);

	cr_assert_eq(update(&e, PID_A, START_A, &view_libc, &e.ids[libc]), 0);
	unwinder_forget_process(e.u, PID_A, START_A);
	cr_assert_eq(stats(&e).tables_idle, 1);

	cr_assert_eq(update(&e, PID_B, START_B, &view_self, &e.ids[self]), 0);
	st = stats(&e);
	cr_assert_eq(st.tables_evicted, 1);
	cr_assert_eq(st.tables, 1);
	cr_assert_eq(st.tables_built, 2);
	cr_assert_eq(st.rows_used, n_self);

	/* libc again, while B holds the only table: no room, no idle table */
	cr_assert_eq(update(&e, PID_A, START_A, &view_libc, &e.ids[libc]), 0);
	st = stats(&e);
	cr_assert_eq(st.tables_refused, 1);
	cr_assert_eq(st.tables_evicted, 1);
	cr_assert_eq(st.rows_used, n_self);
	cr_assert_eq(st.processes, 2);
	cr_assert(bpf_process(&e, PID_A, &proc));
	cr_assert_eq(bpf_mapping(&e, proc.mappings_first).rows_count, 0,
		     "a refused table must leave the mapping to frame pointers");
	cr_assert_neq(bpf_mapping(&e, proc.mappings_first).rows_first, PERFD_UNWIND_ROWS_PENDING,
		      "a refused table is not pending: nothing will come");
	env_close(&e);
	check_no_leaks();
}

/* The rows map cannot hold libc's table at all: the range allocator says
 * -ENOSPC and table_build gives the table up, to be tried again by the
 * next process.  This is where a refused table once leaked its segments. */
Test(unwinder, table_bigger_than_rows_map_is_refused)
{
	struct env e;
	size_t libc;
	struct procmaps view;
	struct perfd_unwind_process proc;
	struct unwinder_stats st;

	env_open(&e, 64, 256, 16);
	libc = find_map(&e, "libc.so");
	view = one_map(&e, libc);

	cr_assert_eq(update(&e, PID_A, START_A, &view, &e.ids[libc]), 0);
	st = stats(&e);
	cr_assert_eq(st.tables_refused, 1);
	cr_assert_eq(st.tables, 0);
	cr_assert_eq(st.tables_failed, 0);
	cr_assert_eq(st.rows_used, 0);
	cr_assert_eq(st.processes, 1);
	cr_assert(bpf_process(&e, PID_A, &proc));
	cr_assert_eq(bpf_mapping(&e, proc.mappings_first).rows_count, 0);

	/* refused is not remembered: the next look tries again */
	cr_assert_eq(update(&e, PID_B, START_B, &view, &e.ids[libc]), 0);
	st = stats(&e);
	cr_assert_eq(st.tables_refused, 2);
	cr_assert_eq(st.tables, 0);
	cr_assert_eq(st.processes, 2);

	/* every table of this process, in a map with room for few of them */
	cr_assert_eq(update(&e, PID_A, START_A, e.maps, e.ids), 0);
	cr_assert_gt(stats(&e).tables_refused, 2);
	env_close(&e);
	check_no_leaks();
}

/* A map of mappings too small for the process: refused as a whole, and
 * the tables it had taken references on go idle. */
Test(unwinder, mappings_map_full_refuses_the_process)
{
	struct env e;
	struct perfd_unwind_process proc;
	struct unwinder_stats st;
	size_t libc;
	struct procmaps view;

	env_open(&e, BIG_ROWS, 1, 16);
	cr_assert_eq(update(&e, PID_A, START_A, e.maps, e.ids), -ENOSPC);
	st = stats(&e);
	cr_assert_eq(st.processes, 0);
	cr_assert_eq(st.processes_refused, 1);
	cr_assert_eq(st.mappings_used, 0);
	cr_assert_gt(st.tables, 0);
	cr_assert_eq(st.tables_idle, st.tables);
	cr_assert_not(bpf_process(&e, PID_A, &proc));

	/* one mapping fits, and takes an idle table back */
	libc = find_map(&e, "libc.so");
	view = one_map(&e, libc);
	cr_assert_eq(update(&e, PID_A, START_A, &view, &e.ids[libc]), 0);
	st = stats(&e);
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(st.mappings_used, 1);
	cr_assert_eq(st.tables_idle, st.tables - 1);
	cr_assert(bpf_process(&e, PID_A, &proc));

	/* an update that does not fit leaves the process as it was */
	cr_assert_eq(update(&e, PID_A, START_A, e.maps, e.ids), -ENOSPC);
	st = stats(&e);
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(st.mappings_used, 1);
	cr_assert_eq(st.tables_idle, st.tables - 1);
	cr_assert(bpf_process(&e, PID_A, &proc));
	cr_assert_eq(proc.mappings_count, 1);
	env_close(&e);
	check_no_leaks();
}

/* The BPF hash of processes is full: the upload of the process's entry
 * fails, and the mappings uploaded for it are given back. */
Test(unwinder, processes_map_full_refuses_the_process)
{
	struct env e;
	struct perfd_unwind_process proc;
	struct unwinder_stats st;

	env_open(&e, BIG_ROWS, 256, 1);
	cr_assert_eq(update(&e, PID_A, START_A, e.maps, e.ids), 0);
	cr_assert_lt(update(&e, PID_B, START_B, e.maps, e.ids), 0);
	st = stats(&e);
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(st.processes_refused, 1);
	cr_assert_eq(st.mappings_used, e.maps->n);
	cr_assert_eq(st.tables_idle, 0);
	cr_assert_not(bpf_process(&e, PID_B, &proc));

	unwinder_forget_process(e.u, PID_A, START_A);
	cr_assert_eq(update(&e, PID_B, START_B, e.maps, e.ids), 0);
	cr_assert_eq(stats(&e).processes, 1);
	env_close(&e);
	check_no_leaks();
}

/* --- modules that give no table ----------------------------------------- */

/* A procmap of a file that is not mapped here (as the aggregator would
 * have it for another process), for path with its real device and inode. */
static struct procmap file_map(char *path, uint64_t inode, dev_t dev)
{
	return (struct procmap){
		.start = 0x10000000000ULL,
		.end = 0x10000001000ULL,
		.dev_major = major(dev),
		.dev_minor = minor(dev),
		.inode = inode,
		.readable = true,
		.executable = true,
		.path = path,
	};
}

Test(unwinder, modules_without_tables_use_frame_pointers)
{
	static const char text[] = "not an ELF file\n";
	char gone_path[] = "/nonexistent/perfd-unwinder-test.so";
	char text_path[PATH_MAX];
	struct procmap maps[2];
	struct procmaps view = { .maps = maps, .n = 2 };
	struct perfd_unwind_process proc;
	struct unwinder_stats st;
	uint16_t ids[2];
	struct stat sb;
	struct env e;
	int id;

	write_file("text.so", text, sizeof(text) - 1);
	path_in_workdir(text_path, sizeof(text_path), "text.so");
	cr_assert_eq(stat(text_path, &sb), 0);
	maps[0] = file_map(gone_path, 4242, makedev(0, 0));
	maps[1] = file_map(text_path, sb.st_ino, sb.st_dev);
	maps[1].start = maps[0].end;
	maps[1].end = maps[1].start + 0x1000;

	env_open(&e, BIG_ROWS, 16, 16);
	id = symbolizer_module_for_mapping(e.sym, getpid(), geteuid(), &maps[0]);
	cr_assert_gt(id, 0);
	cr_assert_eq(symbolizer_module_fd(e.sym, (uint16_t)id), -EBADF);
	ids[0] = (uint16_t)id;
	id = symbolizer_module_for_mapping(e.sym, getpid(), geteuid(), &maps[1]);
	cr_assert_gt(id, 0);
	cr_assert_geq(symbolizer_module_fd(e.sym, (uint16_t)id), 0);
	ids[1] = (uint16_t)id;

	cr_assert_eq(update(&e, PID_A, START_A, &view, ids), 0);
	st = stats(&e);
	cr_assert_eq(st.tables, 0);
	cr_assert_eq(st.rows_used, 0);
	cr_assert_eq(st.processes, 1);
	cr_assert_eq(st.mappings_used, 2);
	cr_assert(bpf_process(&e, PID_A, &proc));
	cr_assert_eq(proc.mappings_count, 2);
	for (uint32_t i = 0; i < 2; i++) {
		cr_assert_eq(bpf_mapping(&e, proc.mappings_first + i).rows_count, 0);
		cr_assert_neq(bpf_mapping(&e, proc.mappings_first + i).rows_first,
			      PERFD_UNWIND_ROWS_PENDING);
	}

	/* A file that is not ELF is looked at once; one without a descriptor
	 * each time, since it may get one (see the next test). */
	cr_assert_eq(update(&e, PID_A, START_A, &view, ids), 0);
	cr_assert_eq(update(&e, PID_B, START_B, &view, ids), 0);
	st = stats(&e);
	cr_assert_eq(st.tables_failed, 1);
	cr_assert_eq(st.tables_refused, 3);
	cr_assert_eq(st.tables, 0);
	cr_assert_eq(st.processes, 2);
	env_close(&e);
	check_no_leaks();
}

/* A process read at its very end (a shell's short-lived child): its maps
 * were read, but it is gone before its files are opened, and map_files is
 * empty once a process has exited.  The module has no descriptor then;
 * the next process that maps the same file gives it one, and with it
 * symbols and an unwind table. */
Test(unwinder, module_first_seen_in_a_process_that_exited)
{
	struct procmaps *child_maps = NULL, child_view;
	struct perfd_unwind_process proc;
	struct unwinder_stats st;
	size_t libc, child_libc = SIZE_MAX;
	struct procmaps view;
	const struct procmap *m;
	char name[256];
	struct env e;
	pid_t child;
	int id, status;

	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		for (;;)
			pause();
	}
	cr_assert_eq(procmaps_read_pid(child, true, &child_maps), 0);
	cr_assert_eq(kill(child, SIGKILL), 0);
	cr_assert_eq(waitpid(child, &status, 0), child);
	for (size_t i = 0; i < child_maps->n && child_libc == SIZE_MAX; i++) {
		const char *base = strrchr(child_maps->maps[i].path, '/');

		if (base && strncmp(base + 1, "libc.so", 7) == 0)
			child_libc = i;
	}
	cr_assert_neq(child_libc, SIZE_MAX, "no libc in the child's maps");

	env_open_bare(&e, BIG_ROWS, 16, 16);
	id = symbolizer_module_for_mapping(e.sym, child, geteuid(), &child_maps->maps[child_libc]);
	cr_assert_gt(id, 0);
	cr_assert_eq(symbolizer_module_fd(e.sym, (uint16_t)id), -EBADF);
	child_view = (struct procmaps){ .maps = &child_maps->maps[child_libc], .n = 1 };
	cr_assert_eq(update(&e, PID_A, START_A, &child_view, &(uint16_t){ (uint16_t)id }), 0);
	st = stats(&e);
	cr_assert_eq(st.tables, 0);
	cr_assert_eq(st.processes, 1);

	/* This process maps the same libc: the same module, now readable. */
	env_add_self(&e);
	libc = find_map(&e, "libc.so");
	cr_assert_eq(e.ids[libc], id);
	cr_assert_geq(symbolizer_module_fd(e.sym, (uint16_t)id), 0,
		      "the module stays without a descriptor");
	m = &e.maps->maps[libc];
	/* the first ask has the lane build the table */
	(void)symbolizer_frame_name(e.sym, frame_make((uint16_t)id, (uintptr_t)&getpid + 1 - m->start + m->pgoff),
				    name, sizeof(name));
	cr_assert_eq(symbolizer_settle(e.sym, 30000), 0);
	cr_assert(strstr(symbolizer_frame_name(e.sym,
					       frame_make((uint16_t)id,
							  (uintptr_t)&getpid + 1 - m->start + m->pgoff),
					       name, sizeof(name)),
			 "getpid"),
		  "libc frame named %s", name);

	view = one_map(&e, libc);
	cr_assert_eq(update(&e, PID_B, START_B, &view, &e.ids[libc]), 0);
	st = stats(&e);
	cr_assert_eq(st.tables, 1, "no table for the module once it has a descriptor");
	cr_assert(bpf_process(&e, PID_B, &proc));
	cr_assert_gt(bpf_mapping(&e, proc.mappings_first).rows_count, 0);
	procmaps_free(child_maps);
	env_close(&e);
	check_no_leaks();
}

/* --- templated code (CPython's perf trampolines) -------------------------- */

/* CPython 3.12's perf trampoline: sub $8,%rsp; call *%rcx; add $8,%rsp; ret */
static const uint8_t trampoline[] = { 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1,
				      0x48, 0x83, 0xc4, 0x08, 0xc3 };
#define ARENA 65536u
#define ANON_START 0x100000000ull /* below libc; addresses only: nothing is read there */

/* One anonymous executable mapping of `arenas` arenas at ANON_START, and a
 * file mapping (this test's own libc) after it, as a process maps them. */
struct anon_view {
	struct procmap maps[2];
	struct procmaps view;
	uint16_t ids[2];
};

static void anon_view(const struct env *e, unsigned arenas, struct anon_view *v)
{
	size_t libc = find_map(e, "libc.so");

	cr_assert_gt(e->maps->maps[libc].start, ANON_START + arenas * ARENA);
	v->maps[0] = (struct procmap){ .start = ANON_START, .end = ANON_START + arenas * ARENA,
				       .readable = true, .executable = true, .path = (char *)"" };
	v->maps[1] = e->maps->maps[libc];
	v->ids[0] = 0;
	v->ids[1] = e->ids[libc];
	v->view = (struct procmaps){ .maps = v->maps, .n = 2 };
}

/* Checks that mapping m holds the table of the template at stride. */
static void check_copies_mapping(const struct env *e, const struct perfd_unwind_mapping *m,
				 uint64_t start, uint32_t stride)
{
	struct trampoline_shape s;
	struct unwind_table t = { 0 };

	cr_assert_eq(m->start, start);
	cr_assert_eq(m->end, start + ARENA);
	cr_assert_eq(m->pc_adjust, start, "row pcs are relative to the arena");
	cr_assert_eq(trampoline_decode(trampoline, sizeof(trampoline), &s), 0);
	cr_assert_eq(trampoline_table(&s, stride, ARENA, &t.rows, &t.n_rows), 0);
	cr_assert_eq(m->rows_count, t.n_rows);
	check_rows(e, m, &t, 1);
	free(t.rows);
}

/* Arenas of copies are described as mappings of their own, with one table
 * per stride shared by every arena and every process; the rest of the
 * anonymous mapping keeps frame pointers, and a region outside it or
 * across its end is ignored. */
Test(unwinder, templated_code_regions_share_one_table)
{
	struct env e;
	struct anon_view v;
	/* arenas 0 and 2 hold copies (stride 11 and 272), arena 1 not; the
	 * third region lies past the mapping's end */
	const uint64_t starts[] = { ANON_START, ANON_START + 2 * ARENA, ANON_START + 3 * ARENA };
	const uint32_t strides[] = { 11, 272, 11 };
	struct unwind_copies copies = { trampoline, sizeof(trampoline), ARENA, starts, strides, 3 };
	struct perfd_unwind_process proc;
	struct perfd_unwind_mapping m;
	struct unwinder_stats st, first;

	loop_upload_max_rows = UINT32_MAX;
	env_open(&e, BIG_ROWS, 256, 16);
	anon_view(&e, 3, &v);
	cr_assert_eq(update_copies(&e, PID_A, START_A, &v.view, v.ids, &copies), 0);
	first = stats(&e);
	cr_assert_eq(first.copy_tables, 2, "%zu tables of templated code", first.copy_tables);
	cr_assert_eq(first.copy_templates_refused, 0);

	/* arena 0, arena 1 (frame pointers), arena 2, libc */
	cr_assert(bpf_process(&e, PID_A, &proc));
	cr_assert_eq(proc.mappings_count, 4);
	m = bpf_mapping(&e, proc.mappings_first);
	check_copies_mapping(&e, &m, ANON_START, 11);
	m = bpf_mapping(&e, proc.mappings_first + 1);
	cr_assert_eq(m.start, ANON_START + ARENA);
	cr_assert_eq(m.end, ANON_START + 2 * ARENA);
	cr_assert_eq(m.rows_count, 0, "the arena without copies walks frame pointers");
	m = bpf_mapping(&e, proc.mappings_first + 2);
	check_copies_mapping(&e, &m, ANON_START + 2 * ARENA, 272);
	m = bpf_mapping(&e, proc.mappings_first + 3);
	cr_assert_eq(m.start, v.maps[1].start);
	cr_assert_gt(m.rows_count, 0);

	/* a second process with arenas elsewhere shares the tables */
	{
		const uint64_t other[] = { ANON_START + ARENA };
		const uint32_t stride[] = { 272 };
		struct unwind_copies oc = { trampoline, sizeof(trampoline), ARENA, other, stride, 1 };

		cr_assert_eq(update_copies(&e, PID_B, START_B, &v.view, v.ids, &oc), 0);
	}
	st = stats(&e);
	cr_assert_eq(st.tables_built, first.tables_built, "a table was built again");
	cr_assert_eq(st.rows_used, first.rows_used);
	cr_assert(bpf_process(&e, PID_B, &proc));
	cr_assert_eq(proc.mappings_count, 4); /* FP, arena 1, FP, libc */
	m = bpf_mapping(&e, proc.mappings_first + 1);
	check_copies_mapping(&e, &m, ANON_START + ARENA, 272);

	/* both gone: the tables stay, idle */
	unwinder_forget_process(e.u, PID_A, START_A);
	unwinder_forget_process(e.u, PID_B, START_B);
	st = stats(&e);
	cr_assert_eq(st.tables_idle, st.tables);
	cr_assert_eq(st.copy_tables, 2);
	env_close(&e);
	loop_upload_max_rows = 0;
	check_no_leaks();
}

/* A template that does not decode gives no table: the arenas walk frame
 * pointers as before, counted; and so does a region that runs past the end
 * of its mapping. */
Test(unwinder, templated_code_that_does_not_decode_walks_frame_pointers)
{
	static const uint8_t jump[] = { 0x48, 0x83, 0xec, 0x08, 0xff, 0xe1 }; /* jmp *%rcx */
	const uint64_t starts[] = { ANON_START };
	const uint32_t strides[] = { 11 };
	struct unwind_copies copies = { jump, sizeof(jump), ARENA, starts, strides, 1 };
	struct env e;
	struct anon_view v;
	struct perfd_unwind_process proc;

	env_open(&e, BIG_ROWS, 256, 16);
	anon_view(&e, 1, &v);
	cr_assert_eq(update_copies(&e, PID_A, START_A, &v.view, v.ids, &copies), 0);
	cr_assert_eq(stats(&e).copy_templates_refused, 1);
	cr_assert_eq(stats(&e).copy_tables, 0);
	cr_assert(bpf_process(&e, PID_A, &proc));
	cr_assert_eq(proc.mappings_count, 2);
	cr_assert_eq(bpf_mapping(&e, proc.mappings_first).rows_count, 0);

	/* a good template, in a region half past the mapping */
	{
		const uint64_t half[] = { ANON_START + ARENA / 2 };
		struct unwind_copies hc = { trampoline, sizeof(trampoline), ARENA, half, strides, 1 };

		cr_assert_eq(update_copies(&e, PID_A, START_A, &v.view, v.ids, &hc), 0);
	}
	cr_assert_eq(stats(&e).copy_tables, 0);
	cr_assert(bpf_process(&e, PID_A, &proc));
	cr_assert_eq(proc.mappings_count, 2);
	cr_assert_eq(bpf_mapping(&e, proc.mappings_first).end, ANON_START + ARENA);
	cr_assert_eq(bpf_mapping(&e, proc.mappings_first).rows_count, 0);
	env_close(&e);
	check_no_leaks();
}
