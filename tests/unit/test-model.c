/* SPDX-License-Identifier: MIT */
/*
 * test-model.c - the resolved model (daemon/profile/model.c), built from
 * hand-made profile parts through a fake resolver (fakemodel.h): frames
 * that resolve alike are one location and their samples merge; functions
 * are interned by (kind, name, file, start line) and none is nameless;
 * mappings carry the describer's path and build-id; inlined calls are
 * lines, outermost first; samples list their locations root first; totals
 * per process; only the requested kind; threads kept apart only when
 * asked; a model built in slices (one stack a step, the store changing
 * between steps) is the one built in one go.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "fakemodel.h"

FAKE_SUITE(model);

static const char *fn_name(const struct model *m, uint32_t function)
{
	return model_string(m, m->functions[function].name);
}

/* The name of location loc's line i. */
static const char *line_name(const struct model *m, uint32_t loc, uint32_t i)
{
	const struct model_location *l = &m->locations[loc];

	cr_assert_lt(i, l->n_lines);
	return fn_name(m, m->lines[l->first_line + i].function);
}

/* The sample whose leaf location's outermost function is named leaf. */
static const struct model_sample *sample_by_leaf(const struct model *m, const char *leaf)
{
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];

		if (s->depth && strcmp(line_name(m, m->stack_pool[s->first + s->depth - 1], 0), leaf) == 0)
			return s;
	}
	return NULL;
}

static const struct fake_frame alike_frames[] = {
	{ FRAME(1, 0x10), 1, { NATIVE("hot", "hot.c", 3, 1) } },
	{ FRAME(1, 0x20), 1, { NATIVE("hot", "hot.c", 7, 1) } },
	{ FRAME(1, 0x90), 1, { NATIVE("main", "main.c", 1, 1) } },
};

Test(model, frames_resolving_alike_are_one_location_and_merge)
{
	struct model *m;

	SET_FAKE_FRAMES(alike_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 3, FRAME(1, 0x10), FRAME(1, 0x90));
	FAKE_ADD(0, 4, FRAME(1, 0x20), FRAME(1, 0x90));
	m = fake_build(); /* without lines: both addresses read "hot" */
	cr_assert_eq(m->n_locations, 2);
	cr_assert_eq(m->n_functions, 2);
	cr_assert_eq(m->n_samples, 1);
	cr_assert_eq(m->samples[0].value, 7);
	cr_assert_eq(m->samples[0].depth, 2);
	cr_assert_eq(m->total, 7);
	/* each distinct frame word is resolved once */
	cr_assert_eq(fake_resolve_calls, 3);
	model_free(m);
}

Test(model, with_lines_the_same_frames_stay_apart)
{
	struct model *m;

	SET_FAKE_FRAMES(alike_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 3, FRAME(1, 0x10), FRAME(1, 0x90));
	FAKE_ADD(0, 4, FRAME(1, 0x20), FRAME(1, 0x90));
	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .lines = true });
	cr_assert_eq(m->n_locations, 3);
	cr_assert_eq(m->n_functions, 2, "one function \"hot\" at two lines");
	cr_assert_eq(m->n_samples, 2);
	model_free(m);
}

static const struct fake_frame function_frames[] = {
	{ FRAME(1, 0x10), 1, { NATIVE("f", "a.c", 1, 1) } },
	{ FRAME(1, 0x20), 1, { NATIVE("f", "b.c", 1, 1) } },
	{ FRAME(1, 0x30), 1, { NATIVE("f", "a.c", 2, 1) } },
	{ PYFRAME(0x40), 1, { PYTHON("f", "a.c", 1) } },
	{ FRAME(2, 0x50), 1, { NATIVE("f", "a.c", 9, 2) } },
};

/* Which row of function_frames a one-frame sample came from, told by what
 * its location says (samples come in no particular order). */
static size_t function_row(const struct model *m, const struct model_sample *s)
{
	const struct model_location *l = &m->locations[m->stack_pool[s->first]];
	const struct model_line *ln = &m->lines[l->first_line];
	const char *file = model_string(m, m->functions[ln->function].file);

	if (l->kind == FRAME_KIND_PYTHON)
		return 3;
	if (l->mapping && m->mappings[l->mapping - 1].module == 2)
		return 4;
	if (strcmp(file, "b.c") == 0)
		return 1;
	return ln->line == 2 ? 2 : 0;
}

Test(model, functions_are_interned_by_kind_name_and_file)
{
	struct model *m;
	uint32_t f[ELEMENTSOF(function_frames)];
	bool seen[ELEMENTSOF(function_frames)] = { false };

	SET_FAKE_FRAMES(function_frames);
	fake_process(0, 10, "app", NULL);
	for (size_t i = 0; i < ELEMENTSOF(function_frames); i++)
		FAKE_ADD(0, 1, function_frames[i].frame);
	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .lines = true });
	cr_assert_eq(m->n_samples, ELEMENTSOF(function_frames));
	cr_assert_eq(m->n_locations, ELEMENTSOF(function_frames));
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];
		size_t row = function_row(m, s);

		cr_assert_not(seen[row], "row %zu twice", row);
		seen[row] = true;
		f[row] = m->lines[m->locations[m->stack_pool[s->first]].first_line].function;
	}
	/* f in a.c (at lines 1, 2 and in another module), f in b.c, and the
	 * Python f in a.c */
	cr_assert_eq(m->n_functions, 3);
	cr_assert_eq(f[0], f[2], "f (a.c) at two lines is two functions");
	cr_assert_eq(f[0], f[4], "f (a.c) in two modules is two functions");
	cr_assert_neq(f[0], f[1]);
	cr_assert_neq(f[0], f[3], "a Python and a native f are one function");
	cr_assert_eq(m->functions[f[3]].kind, FRAME_KIND_PYTHON);
	cr_assert_eq(m->functions[f[0]].kind, FRAME_KIND_NATIVE);
	cr_assert_str_eq(model_string(m, m->functions[f[1]].file), "b.c");
	cr_assert_str_eq(fn_name(m, f[1]), "f");
	model_free(m);
}

/* Two lambdas of one file are two functions, told apart by their start
 * lines, as pprof tells them apart; one function at two lines is one, and
 * keeps its start line. */
static const struct fake_frame lambda_frames[] = {
	{ PYFRAME(0x1), 1, { PYTHON_FROM("<lambda>", "/srv/app.py", 10, 10) } },
	{ PYFRAME(0x2), 1, { PYTHON_FROM("<lambda>", "/srv/app.py", 20, 20) } },
	{ PYFRAME(0x3), 1, { PYTHON_FROM("<lambda>", "/srv/app.py", 21, 20) } },
};

Test(model, functions_that_start_elsewhere_are_two)
{
	struct model *m;
	uint32_t f[3];

	SET_FAKE_FRAMES(lambda_frames);
	fake_process(0, 10, "app", NULL);
	for (size_t i = 0; i < ELEMENTSOF(lambda_frames); i++)
		FAKE_ADD(0, 1, lambda_frames[i].frame);
	m = fake_build();
	cr_assert_eq(m->n_samples, 3);
	for (size_t i = 0; i < 3; i++) {
		const struct model_sample *s = &m->samples[i];
		const struct model_line *ln =
			&m->lines[m->locations[m->stack_pool[s->first]].first_line];

		f[ln->line == 10 ? 0 : ln->line == 20 ? 1 : 2] = ln->function;
	}
	cr_assert_eq(m->n_functions, 2);
	cr_assert_neq(f[0], f[1]);
	cr_assert_eq(f[1], f[2]);
	cr_assert_eq(m->functions[f[0]].start_line, 10);
	cr_assert_eq(m->functions[f[1]].start_line, 20);
	model_free(m);
}

static const struct fake_frame mapping_frames[] = {
	{ FRAME(1, 0x10), 1, { NATIVE("in_app", NULL, 0, 1) } },
	{ FRAME(1, 0x20), 1, { NATIVE("in_app_too", NULL, 0, 1) } },
	{ FRAME(2, 0x30), 1, { NATIVE("in_libc", NULL, 0, 2) } },
	{ FRAME(3, 0x40), 1, { NATIVE("in_unknown", NULL, 0, 3) } },
	{ KFRAME(0x50), 1, { KERNEL("in_kernel") } },
	{ FRAME(FRAME_MODULE_NONE, 0x60), 1, { NATIVE("anonymous", NULL, 0, 0) } },
};

Test(model, mappings_carry_path_and_build_id_from_the_describer)
{
	struct model *m;

	SET_FAKE_FRAMES(mapping_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 1, FRAME(1, 0x10), FRAME(2, 0x30), FRAME(1, 0x20));
	FAKE_ADD(0, 1, KFRAME(0x50), FRAME(3, 0x40), FRAME(FRAME_MODULE_NONE, 0x60));
	m = fake_build();
	cr_assert_eq(m->n_mappings, 3);
	/* asked once per module, and only for binaries and the kernel (3 is
	 * not one the describer knows) */
	cr_assert_eq(fake_describe_calls, 4, "%u calls", fake_describe_calls);
	for (size_t i = 0; i < m->n_locations; i++) {
		const struct model_location *l = &m->locations[i];
		const char *name = line_name(m, (uint32_t)i, 0);
		const struct model_mapping *mp = l->mapping ? &m->mappings[l->mapping - 1] : NULL;

		if (strncmp(name, "in_app", 6) == 0) {
			cr_assert_not_null(mp, "%s", name);
			cr_assert_eq(mp->module, 1);
			cr_assert_str_eq(model_string(m, mp->path), "/usr/bin/app");
			cr_assert_str_eq(model_string(m, mp->build_id), "0123456789abcdef");
		} else if (strcmp(name, "in_libc") == 0) {
			cr_assert_not_null(mp);
			cr_assert_eq(mp->module, 2);
			cr_assert_str_eq(model_string(m, mp->path), "/usr/lib/libc.so.6");
			cr_assert_str_eq(model_string(m, mp->build_id), "");
		} else if (strcmp(name, "in_kernel") == 0) {
			cr_assert_eq(l->kind, FRAME_KIND_KERNEL);
			cr_assert_not_null(mp);
			cr_assert_eq(mp->module, FRAME_MODULE_KERNEL);
			cr_assert_str_eq(model_string(m, mp->path), "[kernel.kallsyms]");
			cr_assert_str_eq(model_string(m, mp->build_id), FAKE_KERNEL_BUILD_ID);
		} else {
			cr_assert_null(mp, "%s has a mapping", name);
		}
	}
	model_free(m);
}

/* Kernel addresses are the model's to hide, once for every format: by
 * default a kernel location has offset 0 and keeps only its offset from
 * the symbol; asked for, the address too.  Other frames are untouched. */
static const struct fake_frame kaddr_frames[] = {
	{ KFRAME(0x816dbf67), 1, { { .kind = FRAME_KIND_KERNEL, .function = "ksys_write",
				     .module = FRAME_MODULE_KERNEL,
				     .offset = 0xffffffff816dbf67ULL, .symbol_offset = 0x27 } } },
	{ FRAME(1, 0x10), 1, { { .kind = FRAME_KIND_NATIVE, .function = "in_app", .module = 1,
				 .offset = 0x10 } } },
};

Test(model, kernel_addresses_only_when_asked)
{
	SET_FAKE_FRAMES(kaddr_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 1, FRAME(1, 0x10), KFRAME(0x816dbf67));
	for (int shown = 0; shown <= 1; shown++) {
		struct model *m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU,
							 .kernel_addresses = shown });
		cr_assert_eq(m->kernel_addresses, shown);
		cr_assert_eq(m->n_locations, 2);
		for (size_t i = 0; i < m->n_locations; i++) {
			const struct model_location *l = &m->locations[i];

			if (l->kind == FRAME_KIND_KERNEL) {
				cr_assert_eq(l->offset, shown ? 0xffffffff816dbf67ULL : 0);
				cr_assert_eq(l->symbol_offset, 0x27);
			} else {
				cr_assert_eq(l->offset, 0x10);
				cr_assert_eq(l->symbol_offset, 0);
			}
		}
		model_free(m);
	}
}

static const struct fake_frame inline_frames[] = {
	{ FRAME(1, 0x10), 3, { NATIVE("outer", "src/a.c", 10, 1), NATIVE("middle", "src/b.h", 20, 1),
			       NATIVE("inner", "src/c.h", 30, 1) } },
	{ FRAME(1, 0x90), 1, { NATIVE("main", "src/main.c", 5, 1) } },
};

Test(model, inlined_calls_are_lines_outermost_first)
{
	struct model *m;
	const struct model_sample *s;
	const struct model_location *l;

	SET_FAKE_FRAMES(inline_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 2, FRAME(1, 0x10), FRAME(1, 0x90));
	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .lines = true });
	cr_assert_eq(m->n_samples, 1);
	s = &m->samples[0];
	cr_assert_eq(s->depth, 2);
	/* root first */
	cr_assert_str_eq(line_name(m, m->stack_pool[s->first], 0), "main");
	l = &m->locations[m->stack_pool[s->first + 1]];
	cr_assert_eq(l->n_lines, 3);
	cr_assert_str_eq(line_name(m, m->stack_pool[s->first + 1], 0), "outer");
	cr_assert_str_eq(line_name(m, m->stack_pool[s->first + 1], 1), "middle");
	cr_assert_str_eq(line_name(m, m->stack_pool[s->first + 1], 2), "inner");
	cr_assert_eq(m->lines[l->first_line].line, 10);
	cr_assert_eq(m->lines[l->first_line + 2].line, 30);
	cr_assert_str_eq(model_string(m, m->functions[m->lines[l->first_line + 2].function].file),
			 "src/c.h");
	model_free(m);

	/* without lines: the outermost function alone, no line */
	m = fake_build();
	s = &m->samples[0];
	l = &m->locations[m->stack_pool[s->first + 1]];
	cr_assert_eq(l->n_lines, 1);
	cr_assert_str_eq(line_name(m, m->stack_pool[s->first + 1], 0), "outer");
	cr_assert_eq(m->lines[l->first_line].line, 0);
	model_free(m);
}

static const struct fake_frame python_frames[] = {
	{ PYFRAME(0x11), 1, { PYTHON("run", "app.py", 11) } },
	{ PYFRAME(0x12), 1, { PYTHON("run", "app.py", 12) } },
	{ PYFRAME(0x20), 1, { PYTHON("<module>", "app.py", 1) } },
};

Test(model, python_lines_only_when_asked)
{
	struct model *m;

	SET_FAKE_FRAMES(python_frames);
	fake_process(0, 10, "python3", NULL);
	FAKE_ADD(0, 1, PYFRAME(0x11), PYFRAME(0x20));
	FAKE_ADD(0, 2, PYFRAME(0x12), PYFRAME(0x20));
	m = fake_build(); /* python_lines */
	cr_assert_eq(m->n_samples, 2);
	cr_assert_eq(m->n_locations, 3);
	cr_assert_eq(m->n_functions, 2);
	model_free(m);

	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .python_lines = false });
	cr_assert_eq(m->n_samples, 1, "run at two lines did not merge");
	cr_assert_eq(m->samples[0].value, 3);
	cr_assert_eq(m->n_locations, 2);
	for (size_t i = 0; i < m->n_lines; i++)
		cr_assert_eq(m->lines[i].line, 0);
	cr_assert_eq(m->locations[0].kind, FRAME_KIND_PYTHON);
	model_free(m);
}

Test(model, totals_per_process)
{
	struct model *m;

	fake_process(0, 10, "one", NULL);
	fake_process(1, 20, "two", "/system.slice/two.service/sub");
	fake_procs[1].exited = true;
	FAKE_ADD(0, 5, FRAME(1, 0x10), FRAME(1, 0x20));
	FAKE_ADD(0, 6, FRAME(1, 0x11), FRAME(1, 0x20));
	FAKE_ADD(1, 100, FRAME(1, 0x10), FRAME(1, 0x20));
	m = fake_build();
	cr_assert_eq(m->n_processes, 2);
	cr_assert_eq(m->processes[0].pid, 10);
	cr_assert_eq(m->processes[0].total, 11);
	cr_assert_eq(m->processes[1].total, 100);
	cr_assert_eq(m->total, 111);
	cr_assert_str_eq(model_string(m, m->processes[0].comm), "one");
	cr_assert_str_eq(model_string(m, m->processes[0].cgroup), "");
	cr_assert_str_eq(model_string(m, m->processes[0].unit), "");
	cr_assert_str_eq(model_string(m, m->processes[1].comm), "two");
	cr_assert_str_eq(model_string(m, m->processes[1].cgroup), "/system.slice/two.service/sub");
	cr_assert_str_eq(model_string(m, m->processes[1].unit), "two.service");
	cr_assert(m->processes[1].exited);
	cr_assert_not(m->processes[0].exited);
	cr_assert_eq(m->processes[1].start_time_ns, 20000);
	/* the same stack in two processes is two samples, one location each */
	cr_assert_eq(m->n_samples, 3);
	cr_assert_eq(m->n_locations, 3);
	for (size_t i = 0; i < m->n_samples; i++)
		cr_assert_lt(m->samples[i].process, 2);
	model_free(m);
}

Test(model, only_entries_of_the_requested_kind)
{
	const uint64_t a[] = { FRAME(1, 0x10), FRAME(1, 0x90) };
	const uint64_t b[] = { FRAME(1, 0x20), FRAME(1, 0x90) };
	struct model *m;

	fake_process(0, 10, "app", NULL);
	fake_add_kind(0, a, 2, 0, 1, PROFILE_KIND_CPU, 3);
	fake_add_kind(0, b, 2, 0, 1, PROFILE_KIND_MEMORY, 4096);
	fake_add_kind(0, a, 2, 0, 1, PROFILE_KIND_MEMORY, 8192);
	fake_add_kind(0, b, 2, 0, 1, PROFILE_KIND_OFFCPU, 1000000);
	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_MEMORY });
	cr_assert_eq(m->kind, PROFILE_KIND_MEMORY);
	cr_assert_eq(m->n_samples, 2);
	cr_assert_eq(m->total, 4096 + 8192);
	cr_assert_eq(m->processes[0].total, 4096 + 8192);
	cr_assert_not_null(sample_by_leaf(m, "f10"));
	cr_assert_eq(sample_by_leaf(m, "f10")->value, 8192);
	model_free(m);

	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_OFFCPU });
	cr_assert_eq(m->n_samples, 1);
	cr_assert_eq(m->total, 1000000);
	cr_assert_not_null(sample_by_leaf(m, "f20"));
	model_free(m);

	m = fake_build();
	cr_assert_eq(m->n_samples, 1);
	cr_assert_eq(m->total, 3);
	model_free(m);
}

Test(model, samples_list_locations_root_first_kernel_last)
{
	const uint64_t st[] = { KFRAME(0x2), KFRAME(0x1), FRAME(1, 0x30), FRAME(1, 0x20),
				FRAME(1, 0x10) };
	const struct model_sample *s;
	struct model *m;

	fake_process(0, 10, "app", NULL);
	fake_add_kind(0, st, 5, 2, 1, PROFILE_KIND_CPU, 1);
	m = fake_build();
	s = &m->samples[0];
	cr_assert_eq(s->depth, 5);
	cr_assert_str_eq(line_name(m, m->stack_pool[s->first + 0], 0), "f10");
	cr_assert_str_eq(line_name(m, m->stack_pool[s->first + 2], 0), "f30");
	cr_assert_str_eq(line_name(m, m->stack_pool[s->first + 3], 0), "f1");
	cr_assert_str_eq(line_name(m, m->stack_pool[s->first + 4], 0), "f2");
	cr_assert_eq(m->locations[m->stack_pool[s->first + 4]].kind, FRAME_KIND_KERNEL);
	cr_assert_eq(m->locations[m->stack_pool[s->first]].kind, FRAME_KIND_NATIVE);
	model_free(m);
}

Test(model, threads_kept_apart_only_when_asked)
{
	const uint64_t st[] = { FRAME(1, 0x10), FRAME(1, 0x90) };
	struct model *m;

	fake_process(0, 10, "app", NULL);
	fake_thread(0, 10, "app");
	fake_thread(0, 11, "worker-1");
	fake_add_kind(0, st, 2, 0, 10, PROFILE_KIND_CPU, 2);
	fake_add_kind(0, st, 2, 0, 11, PROFILE_KIND_CPU, 3);
	fake_add_kind(0, st, 2, 0, 12, PROFILE_KIND_CPU, 4); /* never named */
	m = fake_build();
	cr_assert_eq(m->n_samples, 1);
	cr_assert_eq(m->samples[0].tid, 0);
	cr_assert_eq(m->samples[0].value, 9);
	model_free(m);

	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .threads = true });
	cr_assert(m->threads);
	cr_assert_eq(m->n_samples, 3);
	cr_assert_eq(m->n_locations, 2, "threads share their locations");
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct model_sample *s = &m->samples[i];
		const char *comm = model_string(m, s->thread_comm);

		switch (s->tid) {
		case 10:
			cr_assert_str_eq(comm, "app");
			cr_assert_eq(s->value, 2);
			break;
		case 11:
			cr_assert_str_eq(comm, "worker-1");
			cr_assert_eq(s->value, 3);
			break;
		case 12:
			cr_assert_str_eq(comm, "");
			cr_assert_eq(s->value, 4);
			break;
		default:
			cr_assert_fail("tid %u", s->tid);
		}
	}
	cr_assert_eq(m->total, 9);
	model_free(m);
}

Test(model, strings_are_interned_once)
{
	struct model *m;
	size_t len;

	SET_FAKE_FRAMES(alike_frames);
	fake_process(0, 10, "hot", NULL); /* a comm that is also a function name */
	FAKE_ADD(0, 1, FRAME(1, 0x10), FRAME(1, 0x90));
	FAKE_ADD(0, 1, FRAME(1, 0x20), FRAME(1, 0x10), FRAME(1, 0x90));
	m = fake_build();
	cr_assert_eq(model_string(m, 0)[0], '\0', "string 0 is not \"\"");
	for (size_t i = 0; i < m->n_functions; i++)
		if (strcmp(fn_name(m, (uint32_t)i), "hot") == 0)
			cr_assert_eq(m->functions[i].name, m->processes[0].comm);
	/* "", "hot", "main", "/usr/bin/app" and the build-id, each once */
	len = 1 + strlen("hot") + 1 + strlen("main") + 1 + strlen("/usr/bin/app") + 1 +
	      strlen("0123456789abcdef") + 1;
	cr_assert_eq(m->strings_len, len, "%zu bytes of strings", m->strings_len);
	model_free(m);
}

static const struct fake_frame nameless_frames[] = {
	{ PYFRAME(0x10), 1, { PYTHON("", "/srv/app.py", 5) } },
	{ FRAME(1, 0x90), 1, { NATIVE("main", "main.c", 1, 1) } },
};

Test(model, a_function_named_empty_is_written_unnamed)
{
	struct model *m;
	const struct model_sample *s;

	SET_FAKE_FRAMES(nameless_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 2, PYFRAME(0x10), FRAME(1, 0x90));
	m = fake_build();
	s = sample_by_leaf(m, MODEL_UNNAMED);
	cr_assert_not_null(s, "no sample's leaf reads " MODEL_UNNAMED);
	cr_assert_eq(s->value, 2);
	for (size_t i = 0; i < m->n_functions; i++)
		cr_assert_neq(fn_name(m, (uint32_t)i)[0], '\0', "function %zu has no name", i);
	model_free(m);
}

Test(model, empty_parts_make_an_empty_model)
{
	struct model *m;

	m = fake_build();
	cr_assert_eq(m->n_processes, 0);
	cr_assert_eq(m->n_samples, 0);
	cr_assert_eq(m->total, 0);
	model_free(m);

	/* a process whose part holds nothing of the kind is still listed */
	fake_process(0, 10, "idle", NULL);
	m = fake_build();
	cr_assert_eq(m->n_processes, 1);
	cr_assert_eq(m->n_samples, 0);
	cr_assert_eq(m->processes[0].total, 0);
	model_free(m);
	cr_assert_null(model_free(NULL));
}

Test(model, leaf_only_resolves_the_leaf_frames_alone)
{
	/* leaf first: f10 and f20 under f90, twice under different callers */
	struct model *m;

	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 5, FRAME(1, 0x10), FRAME(1, 0x90));
	FAKE_ADD(0, 2, FRAME(1, 0x10), FRAME(1, 0x80));
	FAKE_ADD(0, 3, FRAME(1, 0x20), FRAME(1, 0x90));
	fake_resolve_calls = 0;
	m = fake_build_opts((struct model_opts){ .kind = PROFILE_KIND_CPU, .leaf_only = true });
	/* the callers are never resolved, and the stacks of one leaf merge */
	cr_expect_eq(fake_resolve_calls, 2);
	cr_assert_eq(m->n_samples, 2);
	for (size_t i = 0; i < m->n_samples; i++)
		cr_expect_eq(m->samples[i].depth, 1);
	cr_assert_not_null(sample_by_leaf(m, "f10"));
	cr_expect_eq(sample_by_leaf(m, "f10")->value, 7);
	cr_expect_eq(sample_by_leaf(m, "f20")->value, 3);
	cr_expect_eq(m->total, 10);
	model_free(m);
}

/* Every table of a and b, field by field. */
static void assert_models_equal(const struct model *a, const struct model *b)
{
	cr_assert_eq(a->kind, b->kind);
	cr_assert_eq(a->total, b->total);
	cr_assert_eq(a->pending_frames, b->pending_frames);
	cr_assert_eq(a->strings_len, b->strings_len);
	cr_assert_eq(memcmp(a->strings, b->strings, a->strings_len), 0, "strings differ");
	cr_assert_eq(a->n_functions, b->n_functions);
	for (size_t i = 0; i < a->n_functions; i++) {
		const struct model_function *x = &a->functions[i], *y = &b->functions[i];

		cr_assert(x->name == y->name && x->file == y->file && x->kind == y->kind &&
			  x->start_line == y->start_line, "function %zu differs", i);
	}
	cr_assert_eq(a->n_lines, b->n_lines);
	for (size_t i = 0; i < a->n_lines; i++)
		cr_assert(a->lines[i].function == b->lines[i].function &&
			  a->lines[i].line == b->lines[i].line, "line %zu differs", i);
	cr_assert_eq(a->n_locations, b->n_locations);
	for (size_t i = 0; i < a->n_locations; i++) {
		const struct model_location *x = &a->locations[i], *y = &b->locations[i];

		cr_assert(x->first_line == y->first_line && x->n_lines == y->n_lines &&
			  x->mapping == y->mapping && x->offset == y->offset &&
			  x->symbol_offset == y->symbol_offset && x->kind == y->kind,
			  "location %zu differs", i);
	}
	cr_assert_eq(a->n_mappings, b->n_mappings);
	for (size_t i = 0; i < a->n_mappings; i++)
		cr_assert(a->mappings[i].module == b->mappings[i].module &&
			  a->mappings[i].path == b->mappings[i].path &&
			  a->mappings[i].build_id == b->mappings[i].build_id, "mapping %zu differs", i);
	cr_assert_eq(a->n_pool, b->n_pool);
	cr_assert_eq(memcmp(a->stack_pool, b->stack_pool, a->n_pool * sizeof(*a->stack_pool)), 0);
	cr_assert_eq(a->n_samples, b->n_samples);
	for (size_t i = 0; i < a->n_samples; i++) {
		const struct model_sample *x = &a->samples[i], *y = &b->samples[i];

		cr_assert(x->first == y->first && x->depth == y->depth && x->process == y->process &&
			  x->tid == y->tid && x->thread_comm == y->thread_comm && x->value == y->value,
			  "sample %zu differs", i);
	}
	cr_assert_eq(a->n_processes, b->n_processes);
	for (size_t i = 0; i < a->n_processes; i++) {
		const struct model_process *x = &a->processes[i], *y = &b->processes[i];

		cr_assert(x->pid == y->pid && x->comm == y->comm && x->cgroup == y->cgroup &&
			  x->unit == y->unit && x->total == y->total, "process %zu differs", i);
	}
}

/* fake_add_threads' two processes (one with two threads), and a third
 * with native (inlined), kernel and Python frames, a memory sample, and n
 * stacks more, all distinct: 5 + n CPU stacks in all. */
static void add_mixed(uint32_t n)
{
	fake_add_threads();
	fake_process(2, 30, "many", "/system.slice/many.service");
	fake_add_kind(2, (const uint64_t[]){ FRAME(2, 0x5), PYFRAME(0x7), FRAME(1, 0x1) }, 3, 0,
		      30, PROFILE_KIND_CPU, 2);
	fake_add_kind(2, (const uint64_t[]){ KFRAME(0x11), FRAME(1, 0x1) }, 2, 1, 30,
		      PROFILE_KIND_CPU, 1);
	fake_add_kind(2, (const uint64_t[]){ FRAME(2, 0x5) }, 1, 0, 30, PROFILE_KIND_MEMORY, 4);
	for (uint32_t i = 0; i < n; i++)
		fake_add_kind(2, (const uint64_t[]){ FRAME(2, 0x1000 + i), FRAME(2, 0x800 + i % 7),
						     FRAME(1, 0x2), FRAME(1, 0x1) },
			      4, 0, 30, PROFILE_KIND_CPU, 1 + i % 5);
}

static const struct model_opts mixed_opts = {
	.kind = PROFILE_KIND_CPU, .lines = true, .python_lines = true, .threads = true,
	.resolve = fake_resolve, .describe = fake_describe,
};

/* Steps mb one stack at a time (or, with deadline, past its deadline:
 * still one a step) calling between(i) before step i; returns the steps. */
static size_t step_by_one(struct model_builder *mb, bool deadline, void (*between)(size_t))
{
	struct model_budget one = { .max_stacks = 1 }, late = { .deadline_ns = 1 };
	size_t steps = 0;
	int r;

	do {
		if (between)
			between(steps);
		r = model_builder_step(mb, deadline ? &late : &one);
		cr_assert_geq(r, 0);
		steps++;
	} while (r == 0);
	return steps;
}

Test(model, built_one_stack_a_step_it_is_the_model_built_in_one_go)
{
	struct model *whole = NULL, *sliced = NULL;
	struct model_builder *mb = NULL;

	add_mixed(300);
	cr_assert_eq(model_build(&mixed_opts, &fake_parts, fake_stacks, &whole), 0);
	for (int deadline = 0; deadline <= 1; deadline++) {
		size_t steps;

		cr_assert_eq(model_builder_new(&mixed_opts, &fake_parts, fake_stacks, &mb), 0);
		steps = step_by_one(mb, deadline, NULL);
		/* a step per CPU stack (the memory one is left out), and at
		 * least one stack a step even past the deadline */
		cr_assert_geq(steps, 5 + 300, "%zu steps", steps);
		cr_assert_leq(steps, 5 + 300 + 1, "%zu steps", steps);
		cr_assert_eq(model_builder_finish(mb, &sliced), 0);
		mb = model_builder_free(mb);
		assert_models_equal(whole, sliced);
		sliced = model_free(sliced);
	}
	cr_assert_gt(whole->n_samples, 300);
	model_free(whole);
}

/* What the store does meanwhile: the windows that named the parts'
 * stacks expire (their references go), and new stacks come and go, their
 * ids freed and taken again. */
static struct profile_values churn;

static void store_changes(size_t step)
{
	uint32_t id;

	if (step == 1)
		profile_release(&churn, fake_stacks); /* the history's own references */
	for (uint32_t i = 0; i < 8; i++) {
		uint64_t frame = FRAME(2, 0x900000 + step * 8 + i);

		cr_assert_eq(stacktab_intern(fake_stacks, &frame, 1, 0, &id), 0);
		stacktab_unref(fake_stacks, id); /* gone at once: its id free again */
	}
}

Test(model, the_store_may_change_between_steps)
{
	struct model *whole = NULL, *sliced = NULL;
	struct model_builder *mb = NULL;

	add_mixed(200);
	profile_init(&churn);
	for (size_t i = 0; i < fake_parts.n; i++)
		cr_assert_eq(profile_merge(&churn, fake_stacks, &fake_parts.parts[i].prof), 0);
	cr_assert_eq(model_build(&mixed_opts, &fake_parts, fake_stacks, &whole), 0);
	cr_assert_eq(model_builder_new(&mixed_opts, &fake_parts, fake_stacks, &mb), 0);
	step_by_one(mb, false, store_changes);
	cr_assert_eq(model_builder_finish(mb, &sliced), 0);
	model_builder_free(mb);
	assert_models_equal(whole, sliced);
	model_free(whole);
	model_free(sliced);
}

Test(model, a_builder_freed_half_way_frees_what_it_built)
{
	struct model_builder *mb = NULL;

	add_mixed(100);
	cr_assert_eq(model_builder_new(&mixed_opts, &fake_parts, fake_stacks, &mb), 0);
	cr_assert_eq(model_builder_step(mb, &(struct model_budget){ .max_stacks = 50 }), 0);
	model_builder_free(mb); /* LSan, in the sanitized build, tells */
}
