/* SPDX-License-Identifier: MIT */
/*
 * test-analysis.c - the analysis module (daemon/analysis/) that perfctl's
 * report, diff and diagnose and perfd's top share: known answers for self
 * and total with recursion, callers and callees whose shares add up to
 * the function's total, the trees top cuts to a budget, a diff of shares,
 * the diagnosis rules on the dominant path, and one check
 * that top's path (the daemon's model through api/model_profile.h) and
 * report's path (the same model written as a folded snapshot and read
 * back by profile_read) give the same rows for the same stacks; and the
 * GIL's waiter and holder from a wall profile by thread.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <json-c/json.h>

#include "analysis/diagnose.h"
#include "analysis/diff.h"
#include "analysis/functions.h"
#include "api/model_profile.h"
#include "fakemodel.h"
#include "output.h" /* json_object_putp */
#include "profile_read.h"

FAKE_SUITE(analysis);

static struct profile *folded(const char *text)
{
	char err[PROFILE_ERROR_MAX] = "";
	struct profile *p = NULL;

	cr_assert_eq(profile_read(text, strlen(text), NULL, &p, err), 0, "%s", err);
	return p;
}

static struct report *build(const struct profile *p, bool by_name)
{
	struct report_opts o = { .by_name = by_name };
	struct report *r = NULL;

	cr_assert_eq(report_build(p, &o, &r), 0);
	return r;
}

/* The row of the user function name; it must be there. */
static const struct report_row *row_of(const struct report *r, const char *name)
{
	for (size_t i = 0; i < r->n_rows; i++)
		if (!r->rows[i].kernel && strcmp(profile_string(r->p, r->rows[i].function), name) == 0)
			return &r->rows[i];
	cr_assert_fail("no row %s", name);
	return NULL;
}

static const char *row_name(const struct report *r, uint32_t row)
{
	return row == REPORT_ROOT ? "(root)" : profile_string(r->p, r->rows[row].function);
}

/* f recurses in the first stack and is called by g in the last. */
static const char recursive[] = "app;main;f;f;g 10\n"
				"app;main;f 5\n"
				"app;main;g;f 3\n";

Test(analysis, self_and_total_count_a_recursive_function_once_per_stack)
{
	_cleanup_(profile_freep) struct profile *p = folded(recursive);
	_cleanup_(report_freep) struct report *r = build(p, false);
	uint64_t selves = 0;

	cr_assert_eq(r->total, 18);
	cr_assert_eq(r->n_rows, 3);
	cr_assert_eq(row_of(r, "main")->self, 0);
	cr_assert_eq(row_of(r, "main")->total, 18);
	cr_assert_eq(row_of(r, "f")->self, 8);
	cr_assert_eq(row_of(r, "f")->total, 18, "f twice in a stack counts once");
	cr_assert_eq(row_of(r, "g")->self, 10);
	cr_assert_eq(row_of(r, "g")->total, 13);
	for (size_t i = 0; i < r->n_rows; i++)
		selves += r->rows[i].self;
	cr_assert_eq(selves, r->total, "every stack has one leaf");
}

Test(analysis, callers_and_callees_add_up_to_the_total)
{
	_cleanup_(profile_freep) struct profile *p = folded(recursive);
	_cleanup_(report_freep) struct report *r = build(p, false);
	struct report_relatives up = { 0 }, down = { 0 };
	uint64_t sum = 0;

	cr_assert_eq(report_callers(r, "f", &up), 0);
	cr_assert_eq(up.total, 18);
	cr_assert_eq(up.n_edges, 2);
	/* the outermost call's caller: main in the first two stacks */
	cr_assert_str_eq(row_name(r, up.edges[0].row), "main");
	cr_assert_eq(up.edges[0].value, 15);
	cr_assert_str_eq(row_name(r, up.edges[1].row), "g");
	cr_assert_eq(up.edges[1].value, 3);
	for (size_t i = 0; i < up.n_edges; i++)
		sum += up.edges[i].value;
	cr_assert_eq(sum, up.total, "callers' shares are 100%%");

	cr_assert_eq(report_callees(r, "f", &down), 0);
	cr_assert_eq(down.total, 18);
	cr_assert_eq(down.self, 8, "the innermost call is the leaf in two stacks");
	cr_assert_eq(down.n_edges, 1);
	cr_assert_str_eq(row_name(r, down.edges[0].row), "g");
	cr_assert_eq(down.edges[0].value + down.self, down.total, "callees' and self's shares are 100%%");
	cr_assert_eq(report_callers(r, "nothing", &(struct report_relatives){ 0 }), -ENOENT);
	free(up.edges);
	free(down.edges);
}

Test(analysis, a_tree_goes_to_the_root_and_is_cut_level_by_level)
{
	_cleanup_(profile_freep) struct profile *p = folded(recursive);
	_cleanup_(report_freep) struct report *r = build(p, false);
	_cleanup_(report_tree_done) struct report_tree t = { 0 };
	_cleanup_free_ bool *match = calloc(r->n_rows, sizeof(*match));
	const struct report_node *f, *main_;
	size_t first, n;

	cr_assert_eq(report_match(r, "g", match), 1);
	cr_assert_eq(report_tree_build(r, match, true, 3, &t), 0);
	cr_assert_eq(t.total, 13);
	report_tree_children(&t, REPORT_TOP, &first, &n);
	cr_assert_eq(n, 2);
	f = &t.nodes[t.order[first]];
	main_ = &t.nodes[t.order[first + 1]];
	cr_assert_str_eq(row_name(r, f->row), "f");
	cr_assert_eq(f->value, 10);
	cr_assert_str_eq(row_name(r, main_->row), "main");
	cr_assert_eq(main_->value, 3);
	/* main called g from the root; f;f;main above g, 3 levels deep */
	report_tree_children(&t, t.order[first + 1], &first, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(t.nodes[t.order[first]].row, REPORT_ROOT);
	cr_assert_eq(t.nodes[t.order[first]].value, 3);

	/* a budget of 2 takes both callers before any of theirs */
	cr_assert_eq(report_tree_choose(&t, 2), 0);
	for (size_t i = 0; i < t.n; i++)
		cr_assert_eq(t.sent[i], t.nodes[i].parent == REPORT_TOP, "node %zu", i);
}

Test(analysis, a_diff_compares_shares_largest_change_first)
{
	/* before: f 30%, g 70%; after, twice as long: f 60%, h 40%, and a
	 * kernel leaf that skip_kernel leaves out */
	_cleanup_(profile_freep) struct profile *before = folded("app;main;f 30\napp;main;g 70\n");
	_cleanup_(profile_freep) struct profile *after =
		folded("app;main;f 110\napp;main;h 80\napp;main;f;clear_page_[k] 10\n");
	_cleanup_(diff_freep) struct diff *d = NULL;
	static const struct {
		const char *function;
		uint64_t before_self, after_self, after_total;
		double self_delta, total_delta;
	} want[] = {
		{ "g", 70, 0, 0, -70, -70 },
		{ "h", 0, 80, 80, 40, 40 },
		{ "f", 30, 120, 120, 30, 30 },
		{ "main", 0, 0, 200, 0, 0 },
	};

	cr_assert_eq(diff_build(before, after, true, &d), 0);
	cr_assert_eq(d->before_total, 100);
	cr_assert_eq(d->after_total, 200);
	cr_assert_eq(d->n_rows, ELEMENTSOF(want));
	for (size_t i = 0; i < ELEMENTSOF(want); i++) {
		const struct diff_row *row = &d->rows[i];

		cr_assert_str_eq(row->function, want[i].function, "row %zu", i);
		cr_assert_not(row->kernel);
		cr_assert_eq(row->before.self, want[i].before_self, "%s", row->function);
		cr_assert_eq(row->after.self, want[i].after_self, "%s", row->function);
		cr_assert_eq(row->after.total, want[i].after_total, "%s", row->function);
		cr_assert_float_eq(row->self_delta, want[i].self_delta, 1e-9, "%s", row->function);
		cr_assert_float_eq(row->total_delta, want[i].total_delta, 1e-9, "%s", row->function);
	}
}

Test(analysis, diagnose_follows_the_wrappers_down_to_a_coordinator)
{
	/* _start, main and run only pass the time on; coord divides it */
	_cleanup_(profile_freep) struct profile *p = folded("app;_start;main;run;coord;a 50\n"
							    "app;_start;main;run;coord;b 45\n"
							    "app;_start;main;run;coord 5\n");
	_cleanup_(report_freep) struct report *r = build(p, false);
	_cleanup_(diagnose_cpu_done) struct diagnose_cpu c = { 0 };

	cr_assert_eq(diagnose_cpu(r, p, &c), 0);
	cr_assert(c.by_self.found && c.by_total.found);
	cr_assert_str_eq(row_name(r, c.by_self.row), "a");
	cr_assert_eq(c.by_self.self, 50);
	cr_assert_str_eq(row_name(r, c.by_total.row), "coord");
	cr_assert_eq(c.by_total.total, 100);
	cr_assert_eq(c.n_path, 3);
	cr_assert_str_eq(row_name(r, c.path[0]), "_start");
	cr_assert_str_eq(row_name(r, c.path[2]), "run");
	cr_assert(c.coordinator, "5%% self of its total is under the coordinator's 10%%");
	cr_assert_eq(c.callees.self, 5);
	cr_assert_eq(c.callees.n_edges, 2);
	cr_assert_eq(c.callees.edges[0].value + c.callees.edges[1].value + c.callees.self, 100);
}

Test(analysis, diagnose_names_a_worker_and_its_thresholds)
{
	_cleanup_(profile_freep) struct profile *p = folded("app;main;work 95\napp;main;other 5\n");
	_cleanup_(report_freep) struct report *r = build(p, false);
	_cleanup_(diagnose_cpu_done) struct diagnose_cpu c = { 0 };
	_cleanup_(profile_freep) struct profile *empty = folded("");
	_cleanup_(report_freep) struct report *none = build(empty, false);
	uint32_t row;

	cr_assert_eq(diagnose_cpu(r, p, &c), 0);
	cr_assert_str_eq(row_name(r, c.by_total.row), "work");
	cr_assert_eq(c.by_total.row, c.by_self.row, "the time is spent in its own code");
	cr_assert_not(c.coordinator);
	diagnose_cpu_done(&c);
	cr_assert_eq(diagnose_cpu(none, empty, &c), 0);
	cr_assert_not(c.by_self.found || c.by_total.found);

	cr_assert(diagnose_waiting(19.9));
	cr_assert_not(diagnose_waiting(20.0));
	cr_assert(diagnose_too_little_growth(9 * 4096, 4096));
	cr_assert_not(diagnose_too_little_growth(10 * 4096, 4096));
	cr_assert_not(diagnose_too_little_growth(4096, 0), "an unknown sample size names a site");
	cr_assert_eq(report_first(r, REPORT_SORT_SELF, &row), 0);
	cr_assert_str_eq(row_name(r, row), "work");
	cr_assert_eq(report_first(none, REPORT_SORT_SELF, &row), -ENOENT);
}

/* main;f;f;g 10, main;f 5 and main;g;f 3 (f recursive), main;f;clear_page
 * 2 with a kernel leaf, and a Python frame under f: main;f;work 4, in one
 * process; main;g 6 in another. */
static const struct fake_frame same_frames[] = {
	{ FRAME(1, 0x1), 1, { NATIVE("main", NULL, 0, 1) } },
	{ FRAME(1, 0x2), 1, { NATIVE("f", NULL, 0, 1) } },
	{ FRAME(1, 0x3), 1, { NATIVE("g", NULL, 0, 1) } },
	{ KFRAME(0x11), 1, { KERNEL("clear_page") } },
	{ PYFRAME(0x7), 1, { PYTHON_FROM("work", "/srv/app.py", 42, 40) } },
};

/* The rows of r with a total, as "name[k] self total" lines sorted by
 * report_order(): two reports of the same stacks print the same. */
static char *rows_text(const struct report *r)
{
	_cleanup_free_ uint32_t *order = calloc(r->n_rows + 1, sizeof(*order));
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert(order && f);
	report_order(r, REPORT_SORT_TOTAL, order);
	for (size_t i = 0; i < r->n_rows; i++) {
		const struct report_row *w = &r->rows[order[i]];

		if (w->total)
			fprintf(f, "%s%s %lu %lu\n", profile_string(r->p, w->function),
				w->kernel ? "_[k]" : "", (unsigned long)w->self, (unsigned long)w->total);
	}
	cr_assert_eq(fclose(f), 0);
	return text;
}

Test(analysis, top_and_report_give_the_same_rows_for_the_same_stacks)
{
	_cleanup_(profile_freep) struct profile *live = NULL, *file = NULL;
	_cleanup_free_ struct model_frame_origin *origins = NULL;
	_cleanup_free_ char *folded_text = NULL, *top_rows = NULL, *report_rows = NULL;
	_cleanup_(report_freep) struct report *top = NULL, *report = NULL;
	struct encode_opts eo = { .period_ns = 10000000 };
	struct model *m;

	SET_FAKE_FRAMES(same_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 10, FRAME(1, 0x3), FRAME(1, 0x2), FRAME(1, 0x2), FRAME(1, 0x1));
	FAKE_ADD(0, 5, FRAME(1, 0x2), FRAME(1, 0x1));
	FAKE_ADD(0, 3, FRAME(1, 0x2), FRAME(1, 0x3), FRAME(1, 0x1));
	FAKE_ADD(0, 4, PYFRAME(0x7), FRAME(1, 0x2), FRAME(1, 0x1));
	fake_add_kind(0, (const uint64_t[]){ KFRAME(0x11), FRAME(1, 0x2), FRAME(1, 0x1) }, 3, 1, 1,
		      PROFILE_KIND_CPU, 2);
	fake_process(1, 20, "other", NULL);
	FAKE_ADD(1, 6, FRAME(1, 0x3), FRAME(1, 0x1));
	m = fake_build();

	/* top: in perfd, from the model */
	cr_assert_eq(model_profile_new(m, &live, &origins), 0);
	cr_assert_eq(live->total, m->total);
	top = build(live, true);
	/* report: in perfctl, from the snapshot perfd wrote */
	folded_text = fake_encode_text(folded_encode, m, &eo);
	file = folded(folded_text);
	report = build(file, true);
	model_free(m);

	top_rows = rows_text(top);
	report_rows = rows_text(report);
	cr_assert_str_eq(top_rows, report_rows, "top:\n%s\nreport of\n%s:\n%s", top_rows, folded_text,
			 report_rows);
	cr_assert_str_eq(top_rows, "main 0 30\n"
				   "f 8 24\n"
				   "g 16 19\n"
				   "work 4 4\n"
				   "clear_page_[k] 2 2\n");
}

/* A script's main() under the interpreter's own C main: one name, two
 * kinds of code.  perfd knows the kinds, and top keeps them two rows
 * (keyed by name and kind, whatever the file); a folded file does not, and
 * report has them apart by their files. */
static const struct fake_frame main_frames[] = {
	{ FRAME(1, 0x1), 1, { NATIVE("main", NULL, 0, 1) } },
	{ PYFRAME(0x7), 1, { PYTHON_FROM("main", "/srv/app.py", 3, 1) } },
	{ PYFRAME(0x8), 1, { PYTHON_FROM("work", "/srv/app.py", 9, 8) } },
};

Test(analysis, top_tells_a_python_function_from_a_native_one_of_its_name)
{
	_cleanup_(profile_freep) struct profile *live = NULL;
	_cleanup_free_ struct model_frame_origin *origins = NULL;
	_cleanup_(report_freep) struct report *top = NULL;
	size_t mains = 0;
	struct model *m;

	SET_FAKE_FRAMES(main_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 7, PYFRAME(0x8), PYFRAME(0x7), FRAME(1, 0x1));
	FAKE_ADD(0, 3, FRAME(1, 0x1));
	m = fake_build();
	cr_assert_eq(model_profile_new(m, &live, &origins), 0);
	model_free(m);
	top = build(live, true);
	for (size_t i = 0; i < top->n_rows; i++) {
		const struct report_row *w = &top->rows[i];

		if (strcmp(profile_string(live, w->function), "main") != 0 || !w->total)
			continue;
		mains++;
		if (w->kind == FRAME_KIND_PYTHON) {
			cr_expect_eq(w->total, 7);
			cr_expect_eq(w->self, 0);
		} else {
			cr_expect_eq(w->kind, FRAME_KIND_NATIVE);
			cr_expect_eq(w->total, 10);
			cr_expect_eq(w->self, 3);
		}
	}
	cr_expect_eq(mains, 2, "a Python main and a native main are not two rows");
}

/* Two functions of one name without a file or a line, a native one and a
 * JIT's: only their kind tells them apart, and top keeps them two rows. */
static const struct fake_frame jit_frames[] = {
	{ FRAME(1, 0x1), 1, { NATIVE("main", NULL, 0, 1) } },
	{ FRAME(1, 0x2), 1, { NATIVE("run", NULL, 0, 1) } },
	{ FRAME(2, 0x3), 1, { { .kind = FRAME_KIND_JIT, .function = "run", .module = 2 } } },
};

Test(analysis, top_tells_a_jit_function_from_a_native_one_of_its_name)
{
	_cleanup_(profile_freep) struct profile *live = NULL;
	_cleanup_free_ struct model_frame_origin *origins = NULL;
	_cleanup_(report_freep) struct report *top = NULL;
	size_t runs = 0;
	struct model *m;

	SET_FAKE_FRAMES(jit_frames);
	fake_process(0, 10, "app", NULL);
	FAKE_ADD(0, 6, FRAME(2, 0x3), FRAME(1, 0x1));
	FAKE_ADD(0, 4, FRAME(1, 0x2), FRAME(1, 0x1));
	m = fake_build();
	cr_assert_eq(model_profile_new(m, &live, &origins), 0);
	model_free(m);
	top = build(live, true);
	for (size_t i = 0; i < top->n_rows; i++) {
		const struct report_row *w = &top->rows[i];

		if (strcmp(profile_string(live, w->function), "run") != 0 || !w->total)
			continue;
		runs++;
		cr_expect_eq(w->self, w->kind == FRAME_KIND_JIT ? 6 : 4, "kind %u", w->kind);
	}
	cr_expect_eq(runs, 2, "a JIT run and a native run are not two rows");
}

/* A file cannot make a reader hold stacks without end: frameless stacks
 * (a folded line of a comm alone) count too. */
Test(analysis, a_file_holds_at_most_the_stack_cap)
{
	_cleanup_(profile_freep) struct profile *p = NULL;
	char err[PROFILE_ERROR_MAX] = "";
	int r = 0;

	cr_assert_eq(profile_new(PROFILE_FORMAT_FOLDED, &p), 0);
	for (size_t i = 0; i <= PROFILE_MAX_STACKS && r == 0; i++) {
		profile_stack_begin(p);
		r = profile_stack_end(p, 1, err);
	}
	cr_expect_eq(r, -E2BIG);
	cr_expect_eq(p->n_stacks, PROFILE_MAX_STACKS);
	cr_expect(strstr(err, "stacks"), "%s", err);
}

/* A wall profile as perfd's json snapshot --threads writes it: py-a (101)
 * waits for the GIL 60 of its 100, py-b (102) 30 of its 110 and holds it
 * 80, 70 of them under spin_b (b.py:9) (20 in a native callee without a
 * line), main (103) 5 of its 105 and holds it never. */
static const char gil_wall[] =
	"{\"kind\": \"wall\", \"unit\": \"nanoseconds\", \"frames\": ["
	"{\"function\": \"[GIL: held]\"}, {\"function\": \"[GIL: waiting]\"},"
	"{\"function\": \"[GIL: released]\"}, {\"function\": \"run\"},"
	"{\"function\": \"spin_a\", \"file\": \"a.py\", \"line\": 5},"
	"{\"function\": \"spin_b\", \"file\": \"b.py\", \"line\": 9},"
	"{\"function\": \"native_leaf\"}, {\"function\": \"[wait: GIL]\"},"
	"{\"function\": \"other\", \"file\": \"b.py\", \"line\": 20},"
	"{\"function\": \"[wait: sleep]\"}],"
	"\"processes\": [{\"pid\": 100, \"tree\": {\"self\": 0, \"children\": ["
	" {\"thread\": {\"tid\": 101, \"comm\": \"py-a\"}, \"self\": 0, \"children\": ["
	"  {\"frame\": 0, \"self\": 0, \"children\": [{\"frame\": 3, \"self\": 0, \"children\": ["
	"   {\"frame\": 4, \"self\": 40}]}]},"
	"  {\"frame\": 1, \"self\": 0, \"children\": [{\"frame\": 3, \"self\": 0, \"children\": ["
	"   {\"frame\": 4, \"self\": 0, \"children\": [{\"frame\": 7, \"self\": 60}]}]}]}]},"
	" {\"thread\": {\"tid\": 102, \"comm\": \"py-b\"}, \"self\": 0, \"children\": ["
	"  {\"frame\": 0, \"self\": 0, \"children\": [{\"frame\": 3, \"self\": 0, \"children\": ["
	"   {\"frame\": 5, \"self\": 50, \"children\": [{\"frame\": 6, \"self\": 20}]},"
	"   {\"frame\": 8, \"self\": 10}]}]},"
	"  {\"frame\": 1, \"self\": 0, \"children\": [{\"frame\": 3, \"self\": 0, \"children\": ["
	"   {\"frame\": 5, \"self\": 0, \"children\": [{\"frame\": 7, \"self\": 30}]}]}]}]},"
	" {\"thread\": {\"tid\": 103, \"comm\": \"main\"}, \"self\": 0, \"children\": ["
	"  {\"frame\": 2, \"self\": 0, \"children\": [{\"frame\": 9, \"self\": 100}]},"
	"  {\"frame\": 1, \"self\": 0, \"children\": [{\"frame\": 7, \"self\": 5}]}]}"
	"]}}]}";

static const char *frame_name(const struct profile *p, uint32_t frame)
{
	return profile_string(p, p->frames[frame].function);
}

Test(analysis, diagnose_names_the_thread_waiting_for_the_gil_and_who_holds_it_where)
{
	_cleanup_(json_object_putp) struct json_object *doc = json_tokener_parse(gil_wall);
	_cleanup_(profile_freep) struct profile *threads = NULL, *plain = NULL;
	char err[PROFILE_ERROR_MAX] = "";
	struct diagnose_waits w;
	struct diagnose_gil g;

	cr_assert_not_null(doc);
	cr_assert_eq(profile_read_json(doc, "wall", true, &threads, err), 0, "%s", err);
	cr_assert_eq(diagnose_gil(threads, &g), 0);
	cr_assert_str_eq(frame_name(threads, g.waiter), "[thread 101 py-a]");
	cr_assert_eq(g.waiter_waits, 60);
	cr_assert_eq(g.waiter_total, 100);
	cr_assert_str_eq(frame_name(threads, g.holder), "[thread 102 py-b]");
	cr_assert_eq(g.holder_held, 80);
	cr_assert_eq(g.holder_total, 110);
	cr_assert_str_eq(frame_name(threads, g.code), "spin_b");
	cr_assert_eq(threads->frames[g.code].line, 9);
	cr_assert_eq(g.code_held, 70, "the native leaf without a line is its Python caller's");

	/* without threads there is no thread to name; its waits say there is
	 * GIL time to look at (what makes diagnose ask for the threads) */
	cr_assert_eq(profile_read_json(doc, "wall", false, &plain, err), 0, "%s", err);
	cr_assert_eq(diagnose_waits(plain, &w), 0);
	cr_assert_eq(w.gil, 60 + 30 + 5);
	cr_assert_eq(w.cpu, 0);
	cr_assert_eq(w.total, 60 + 30 + 5 + 100);
	cr_assert_eq(plain->total, threads->total);
	cr_assert_eq(diagnose_gil(plain, &g), 0);
	cr_assert_eq(g.waiter, 0);
	cr_assert_eq(g.holder, 0);
}
