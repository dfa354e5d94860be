/* SPDX-License-Identifier: MIT */
/*
 * diagnose.c - `perfctl diagnose`: a short bottleneck statement about the
 * selected processes over a time range, in which every number comes from
 * perfd's profile: the workload and its window, what its CPU samples say
 * (the dominant function by self and by total, and whether the latter only
 * coordinates callees), what its memory samples say (peak RSS, the top
 * growth site, the trend), what its off-CPU time says (how much of its
 * time it waits, for what, in which call under which code, and whether
 * it waits for a CPU: an oversubscribed host), what the GIL's states at
 * the roots of a Python thread's stacks say (the thread that waits for it
 * most, the one that holds it, where: a wall profile by thread, asked only
 * when the off-CPU one has [wait: GIL] time), and what the evidence cannot show (too
 * few samples, a process that mostly waits, no growth sampled).
 *
 * Design: the rules (which function by self and by total, a coordinator,
 * too few samples, waiting, too little growth: analysis/diagnose.h) are
 * the analysis module's, on the rows report prints; this file asks perfd
 * and says what they found.  It asks for the same json snapshots `report`
 * does (report_fetch()), a cpu one, a memory one and an off-CPU one of the
 * same range (a live --duration becomes the cpu answer's from/to for the
 * others),
 * and runs the rules in perfctl, as report runs on a snapshot.  The RSS
 * figures (now, peak and when, trend) and the growth site's function and
 * line are the daemon's `mem` answer (which names the innermost Python
 * frame of a Python stack, as a memory report alone cannot: its frames
 * carry no kind), the site's bytes the memory snapshot's total of that
 * function.  Cost: two snapshots and one mem request; the passes are the
 * report's, O(frame references) each.
 *
 * The verdicts are thresholds, stated in the output so a reader can check
 * them.  The window is the asked-for range cut to the process's life (its
 * start time, and the end of its data once it exited), so a process that
 * ran for 5 s of a 1 m range is not called idle.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "analysis/diagnose.h"
#include "call.h"
#include "format.h"
#include "output.h"
#include "perfctl.h"
#include "perfd/protocol.h"
#include "report.h"
#include "selection.h"

#define MAX_CMDLINE 4096
#define LABEL_MAX 256          /* " (file.c:12)" */

struct diagnosis {
	/* the workload */
	int64_t pid;           /* 0: several processes */
	char *comm, *cmdline;  /* cmdline NULL: not known */
	bool exited;
	size_t n_processes;
	double from, to;       /* the window, Unix seconds */
	uint64_t samples, period_ns;
	double possible, cpu_percent;

	/* CPU */
	struct report *cpu;
	struct diagnose_cpu c; /* what its samples say */

	/* memory */
	struct report *mem;
	struct json_object *mem_answer; /* NULL: not asked (several processes) */
	uint64_t sample_bytes;          /* mean growth a memory sample stands for; 0: unknown */
	bool too_little_growth;         /* under DIAGNOSE_MIN_MEMORY_SAMPLES of it */
	char *site;                     /* the top growth site's function */
	char *site_file;
	int64_t site_line;
	uint64_t site_bytes;

	/* off-CPU */
	struct profile *off;   /* NULL: off-CPU time is off (status says) */
	struct diagnose_waits w;

	/* the GIL: a wall profile by thread, asked when the off-CPU one
	 * has [wait: GIL] time (NULL: not asked) */
	struct profile *wall;
	struct diagnose_gil gil;
};

static void diagnosis_done(struct diagnosis *d)
{
	free(d->comm);
	free(d->cmdline);
	diagnose_cpu_done(&d->c);
	free(d->site);
	free(d->site_file);
	json_object_put(d->mem_answer);
	report_free(d->cpu);
	report_free(d->mem);
	profile_free(d->off);
	profile_free(d->wall);
}

static double now_realtime(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* perfd's start_time_ns (CLOCK_BOOTTIME, as /proc's starttime) as Unix
 * seconds. */
static double boottime_to_wall(int64_t ns)
{
	struct timespec b;

	(void)clock_gettime(CLOCK_BOOTTIME, &b);
	return now_realtime() - ((double)b.tv_sec + b.tv_nsec / 1e9 - (double)ns / 1e9);
}

/* The command line of pid from /proc, its NULs as spaces, escaped; only when
 * the process there is the one perfd means (its start time agrees within a
 * clock tick), so a reused pid is not described.  Returns 0 and *ret, or
 * -errno (-ESRCH: another process). */
static int read_cmdline(int64_t pid, int64_t start_ns, char **ret)
{
	char path[64], stat[1024], buf[MAX_CMDLINE];
	_cleanup_fclose_ FILE *f = NULL;
	unsigned long long ticks = 0;
	const char *p;
	size_t n;
	long hz = sysconf(_SC_CLK_TCK);

	(void)snprintf(path, sizeof(path), "/proc/%" PRId64 "/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = fread(stat, 1, sizeof(stat) - 1, f);
	stat[n] = '\0';
	p = strrchr(stat, ')');
	/* after "PID (COMM) ": state is field 3, starttime field 22 */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			 &ticks) != 1)
		return -EBADMSG;
	if (hz <= 0 || fabs((double)ticks / (double)hz - (double)start_ns / 1e9) > 2.0 / (double)hz)
		return -ESRCH;
	(void)fclose(TAKE_PTR(f));

	(void)snprintf(path, sizeof(path), "/proc/%" PRId64 "/cmdline", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = fread(buf, 1, sizeof(buf), f);
	if (n == 0)
		return -ENODATA; /* a kernel thread, or a zombie */
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	*ret = ctl_escape(buf, n);
	return *ret ? 0 : -ENOMEM;
}

/* The top growth site: mem's first site (function and line), its bytes the
 * memory profile's total of that function; without a mem answer, or when
 * the profile lacks the name, the memory report's top self row. */
static int find_site(struct diagnosis *d)
{
	struct json_object *site = d->mem_answer ?
		json_object_array_get_idx(ctl_json_path(d->mem_answer, "sites"), 0) : NULL;
	const char *fn = site ? json_object_get_string(ctl_json_path(site, "function")) : NULL;
	struct report_relatives rel = { 0 };
	int k;

	if (d->mem_answer) {
		int64_t v = 0;

		(void)ctl_json_int(d->mem_answer, "sample_bytes", &v);
		d->sample_bytes = v > 0 ? (uint64_t)v : 0;
	}
	if (d->mem->total == 0)
		return 0;
	if (diagnose_too_little_growth(d->mem->total, d->sample_bytes)) {
		d->too_little_growth = true;
		return 0;
	}
	if (fn && strcmp(fn, "[unknown]") != 0) {
		const char *file = json_object_get_string(ctl_json_path(site, "file"));

		k = report_callees(d->mem, fn, &rel);
		if (k < 0 && k != -ENOENT)
			return k;
		free(rel.edges);
		d->site = strdup(fn);
		d->site_file = file ? strdup(file) : NULL;
		if (!d->site || (file && !d->site_file))
			return -ENOMEM;
		(void)ctl_json_int(site, "line", &d->site_line);
		if (k == 0) {
			d->site_bytes = rel.total;
		} else {
			int64_t v = 0;

			(void)ctl_json_int(site, "self_bytes", &v);
			d->site_bytes = v > 0 ? (uint64_t)v : 0;
		}
		return 0;
	}
	{
		const struct report_row *w;
		uint32_t row;

		k = report_first(d->mem, REPORT_SORT_SELF, &row);
		if (k < 0)
			return k == -ENOENT ? 0 : k;
		w = &d->mem->rows[row];
		d->site = strdup(profile_string(d->mem->p, w->function));
		d->site_file = w->file ? strdup(profile_string(d->mem->p, w->file)) : NULL;
		if (!d->site || (w->file && !d->site_file))
			return -ENOMEM;
		d->site_line = w->line;
		d->site_bytes = w->self;
	}
	return 0;
}

/* --- text ------------------------------------------------------------------- */

/* " (file.c:12)", " (file.c)" or "" of a file (an absolute path) and line. */
static void where(const char *file, int64_t line, char *buf, size_t size)
{
	const char *base;

	if (!file || !*file) {
		buf[0] = '\0';
		return;
	}
	base = strrchr(file, '/');
	base = base ? base + 1 : file;
	if (line > 0)
		(void)snprintf(buf, size, " (%s:%" PRId64 ")", base, line);
	else
		(void)snprintf(buf, size, " (%s)", base);
}

static char *finding_label(const struct report *r, const struct diagnose_finding *f)
{
	const struct report_row *w = &r->rows[f->row];
	_cleanup_free_ char *text = NULL;
	char at[LABEL_MAX];
	int n;

	where(profile_string(r->p, w->file), f->line, at, sizeof(at));
	n = asprintf(&text, "%s%s%s", profile_string(r->p, w->function), w->kernel ? "_[k]" : "", at);
	if (n < 0) {
		text = NULL;
		return NULL;
	}
	return ctl_escape(text, (size_t)n);
}

/* The name of off's frame, escaped ("?": out of memory), and where it is:
 * " (file:line)". */
static char *wait_frame_label(const struct profile *off, uint32_t frame, char *at, size_t size)
{
	const struct profile_frame *f = &off->frames[frame];
	const char *name = profile_string(off, f->function);

	where(f->file ? profile_string(off, f->file) : NULL, f->line, at, size);
	return ctl_escape(name, strlen(name));
}

/* What the off-CPU time says: its share of all the time (CPU and off-CPU),
 * for what most, in which call, under which code; and a CPU's wait. */
static void print_waits(const struct diagnosis *d)
{
	const struct diagnose_waits *w = &d->w;
	double cpu_ns = (double)d->samples * (double)d->period_ns, all = cpu_ns + (double)w->total;
	char at[LABEL_MAX], code_at[LABEL_MAX];

	if (!d->off)
		return;
	if (!w->total) {
		printf("Waiting: no off-CPU time was sampled in the window.\n");
		return;
	}
	{
		const char *cls = profile_string(d->off, d->off->frames[w->top_class].function);
		_cleanup_free_ char *site = w->site ? wait_frame_label(d->off, w->site, at, sizeof(at)) : NULL;
		_cleanup_free_ char *code = w->code ? wait_frame_label(d->off, w->code, code_at,
								       sizeof(code_at)) : NULL;

		/* "[wait: network]": network */
		size_t skip = strncmp(cls, "[wait: ", 7) ? 0 : 7, len = strlen(cls + skip);

		printf("Waiting: %.1f%% of its time (CPU and off-CPU) is off the CPU (%.2f s); %.1f%% of "
		       "that for %.*s", 100.0 * (double)w->total / all, (double)w->total / 1e9,
		       report_percent(w->top, w->total), (int)(len && skip ? len - 1 : len), cls + skip);
		if (site)
			printf(", %.1f%% of it in %s%s", report_percent(w->site_total, w->top), site, at);
		if (code)
			printf(", under %s%s", code, code_at);
		printf(".\n");
	}
	if (100.0 * (double)w->cpu / all >= DIAGNOSE_RUNQUEUE_PERCENT)
		printf("It is runnable but waiting for a CPU %.1f%% of its time (at least %.0f%%): "
		       "the CPUs it may run on are oversubscribed.\n", 100.0 * (double)w->cpu / all,
		       DIAGNOSE_RUNQUEUE_PERCENT);
}

/* The TID of the profile's "[thread TID COMM]" frame (0: none), and its
 * COMM: *ret_comm_len bytes at *ret_comm. */
static int64_t thread_of(const struct profile *p, uint32_t frame, const char **ret_comm,
			 size_t *ret_comm_len)
{
	const char *name = profile_string(p, p->frames[frame].function);
	const char *comm = strncmp(name, "[thread ", 8) ? NULL : strchr(name + 8, ' ');
	size_t n = comm ? strlen(comm + 1) : 0;

	*ret_comm = comm && n ? comm + 1 : "";
	*ret_comm_len = comm && n ? n - 1 : 0; /* without the "]" */
	return comm ? strtoll(name + 8, NULL, 10) : 0;
}

/* "thread TID COMM" of the profile's "[thread TID COMM]" frame, escaped
 * (NULL: out of memory). */
static char *thread_label(const struct profile *p, uint32_t frame)
{
	const char *name = profile_string(p, p->frames[frame].function);
	size_t n = strlen(name);

	return n >= 2 ? ctl_escape(name + 1, n - 2) : ctl_escape(name, n);
}

/* Whether a thread waits for the GIL enough to say so. */
static bool gil_said(const struct diagnosis *d)
{
	return d->wall && d->gil.waiter &&
	       report_percent(d->gil.waiter_waits, d->gil.waiter_total) >= DIAGNOSE_GIL_PERCENT;
}

/* Which thread waits for the GIL, which holds it, where. */
static void print_gil(const struct diagnosis *d)
{
	const struct diagnose_gil *g = &d->gil;
	_cleanup_free_ char *waiter = NULL, *holder = NULL, *code = NULL;
	char code_at[LABEL_MAX];

	if (!gil_said(d))
		return;
	waiter = thread_label(d->wall, g->waiter);
	printf("The GIL: %s waits for it %.1f%% of its time (at least %.0f%%)",
	       waiter ? waiter : "?", report_percent(g->waiter_waits, g->waiter_total),
	       DIAGNOSE_GIL_PERCENT);
	if (g->holder) {
		holder = thread_label(d->wall, g->holder);
		code = g->code ? wait_frame_label(d->wall, g->code, code_at, sizeof(code_at)) : NULL;
		printf("; %s holds it %.1f%% of its time", holder ? holder : "?",
		       report_percent(g->holder_held, g->holder_total));
		if (code)
			printf(", %.1f%% of that in %s%s", report_percent(g->code_held, g->holder_held),
			       code, code_at);
	}
	printf(".\n");
}

static void print_text(const struct diagnosis *d)
{
	double seconds = d->to - d->from;
	char a[CTL_CLOCK_MAX], b[CTL_CLOCK_MAX], s1[CTL_SIZE_MAX], s2[CTL_SIZE_MAX];

	/* the workload */
	if (d->pid)
		printf("%s (pid %" PRId64 "%s%s%s)", d->comm ? d->comm : "-", d->pid,
		       d->cmdline ? ", `" : "", d->cmdline ? d->cmdline : "", d->cmdline ? "`" : "");
	else
		printf("%zu processes", d->n_processes);
	printf(" from %s to %s (%.1f s%s): %" PRIu64 " CPU samples at %.0f Hz of a possible %.0f, "
	       "%.1f%% of one CPU.\n", ctl_format_clock(d->from, a), ctl_format_clock(d->to, b), seconds,
	       d->exited ? ", until it exited" : "", d->samples,
	       d->period_ns ? 1e9 / (double)d->period_ns : 0.0, d->possible, d->cpu_percent);

	/* CPU */
	if (diagnose_waiting(d->cpu_percent))
		printf("It is mostly waiting, not computing: on CPU for %.1f%% of the window "
		       "(below %.0f%%).\n", d->cpu_percent, DIAGNOSE_WAITING_PERCENT);
	if (d->samples < DIAGNOSE_MIN_SAMPLES) {
		printf("Too few CPU samples (%" PRIu64 ", fewer than %d) to say which code it runs.\n",
		       d->samples, DIAGNOSE_MIN_SAMPLES);
	} else if (d->c.by_self.found) {
		_cleanup_free_ char *self = finding_label(d->cpu, &d->c.by_self);
		_cleanup_free_ char *total = finding_label(d->cpu, &d->c.by_total);

		printf("CPU: %s has the most self time, %.1f%% of the samples (%.2f s).", self ? self : "?",
		       report_percent(d->c.by_self.self, d->cpu->total),
		       (double)d->c.by_self.self * (double)d->period_ns / 1e9);
		if (d->c.by_total.row == d->c.by_self.row) {
			printf(" It also has the most total time once callers that only pass through "
			       "are set aside (%.1f%%): the time is spent in its own code.\n",
			       report_percent(d->c.by_total.total, d->cpu->total));
		} else if (d->c.coordinator) {
			const struct report_edge *e = &d->c.callees.edges[0];
			_cleanup_free_ char *callee = report_row_label(d->cpu, e->row);

			printf(" %s has the most total time, %.1f%%, but only %.1f%% of it in itself: "
			       "it coordinates its callees, and %s carries %.1f%% of it",
			       total ? total : "?", report_percent(d->c.by_total.total, d->cpu->total),
			       report_percent(d->c.callees.self, d->c.callees.total), callee ? callee : "?",
			       report_percent(e->value, d->c.callees.total));
			if (d->c.callees.n_edges > 1) {
				_cleanup_free_ char *next = report_row_label(d->cpu, d->c.callees.edges[1].row);

				printf(", %s %.1f%%", next ? next : "?",
				       report_percent(d->c.callees.edges[1].value, d->c.callees.total));
			}
			printf(".\n");
		} else {
			printf(" %s has the most total time, %.1f%%, %.1f%% of it in its own code.\n",
			       total ? total : "?", report_percent(d->c.by_total.total, d->cpu->total),
			       report_percent(d->c.callees.self, d->c.callees.total));
		}
	}

	/* memory */
	if (d->mem_answer) {
		double t = 0, rate = 0;
		int64_t peak = 0;
		bool growing = json_object_get_boolean(ctl_json_path(d->mem_answer, "growth.growing"));

		(void)ctl_json_int(d->mem_answer, "peak.bytes", &peak);
		(void)ctl_json_double(d->mem_answer, "growth.bytes_per_second", &rate);
		printf("Memory: peak RSS %s", ctl_format_size((uint64_t)(peak > 0 ? peak : 0), s1));
		/* the kernel's high-water mark alone has no time */
		if (ctl_json_double(d->mem_answer, "peak.time", &t))
			printf(" at %s", ctl_format_clock(t, a));
		printf("; RSS is %s (%s%s/s).", growing ? "growing steadily" : "not growing steadily",
		       rate < 0 ? "-" : "+", ctl_format_size((uint64_t)fabs(rate), s2));
	} else {
		printf("Memory:");
	}
	if (d->site) {
		_cleanup_free_ char *fn = ctl_escape(d->site, strlen(d->site));
		char at[LABEL_MAX];

		where(d->site_file, d->site_line, at, sizeof(at));
		printf(" The top growth site is %s%s, %s of the %s of growth sampled (%.1f%%).\n",
		       fn ? fn : "?", at, ctl_format_size(d->site_bytes, s1),
		       ctl_format_size(d->mem->total, s2), report_percent(d->site_bytes, d->mem->total));
	} else if (d->too_little_growth) {
		printf(" Too little memory growth was sampled (%s, about %" PRIu64 " samples of %s, "
		       "fewer than %d) to name where it grew.\n",
		       ctl_format_size(d->mem->total, s1), d->mem->total / d->sample_bytes,
		       ctl_format_size(d->sample_bytes, s2), DIAGNOSE_MIN_MEMORY_SAMPLES);
	} else {
		printf(" No memory growth was sampled in the window.\n");
	}

	print_waits(d);
	print_gil(d);
}

/* --- JSON ------------------------------------------------------------------- */

static struct json_object *new_percent(double v)
{
	char text[32];

	(void)snprintf(text, sizeof(text), "%.2f", v);
	return json_object_new_double_s(strtod(text, NULL), text);
}

static struct json_object *json_finding(const struct report *r, const struct diagnose_finding *f)
{
	_cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
	const struct report_row *w = &r->rows[f->row];

	if (!o || !ctl_json_put(o, "function", json_object_new_string(profile_string(r->p, w->function))) ||
	    !ctl_json_put(o, "kernel", json_object_new_boolean(w->kernel)) ||
	    (w->file && !ctl_json_put(o, "file", json_object_new_string(profile_string(r->p, w->file)))) ||
	    (f->line && !ctl_json_put(o, "line", json_object_new_int64(f->line))) ||
	    !ctl_json_put(o, "self", json_object_new_uint64(f->self)) ||
	    !ctl_json_put(o, "self_percent", new_percent(report_percent(f->self, r->total))) ||
	    !ctl_json_put(o, "total", json_object_new_uint64(f->total)) ||
	    !ctl_json_put(o, "total_percent", new_percent(report_percent(f->total, r->total))))
		return NULL;
	return TAKE_PTR(o);
}

static struct json_object *json_cpu(const struct diagnosis *d)
{
	_cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
	struct json_object *bt, *callees, *path;
	bool enough = d->samples >= DIAGNOSE_MIN_SAMPLES && d->c.by_self.found;

	if (!o || !ctl_json_put(o, "samples", json_object_new_uint64(d->samples)) ||
	    !ctl_json_put(o, "possible_samples", json_object_new_uint64((uint64_t)llround(d->possible))) ||
	    !ctl_json_put(o, "cpu_percent", new_percent(d->cpu_percent)) ||
	    !ctl_json_put(o, "waiting", json_object_new_boolean(diagnose_waiting(d->cpu_percent))) ||
	    !ctl_json_put(o, "waiting_below_percent", new_percent(DIAGNOSE_WAITING_PERCENT)) ||
	    !ctl_json_put(o, "enough_samples", json_object_new_boolean(enough)) ||
	    !ctl_json_put(o, "min_samples", json_object_new_int(DIAGNOSE_MIN_SAMPLES)))
		return NULL;
	if (!enough)
		return TAKE_PTR(o);
	if (!ctl_json_put(o, "dominant_self", json_finding(d->cpu, &d->c.by_self)) ||
	    !ctl_json_put(o, "dominant_total", bt = json_finding(d->cpu, &d->c.by_total)) ||
	    !ctl_json_put(bt, "role", json_object_new_string(d->c.coordinator ? "coordinator" : "worker")) ||
	    !ctl_json_put(bt, "self_share_percent", new_percent(report_percent(d->c.callees.self, d->c.callees.total))) ||
	    !ctl_json_put(bt, "callees", callees = json_object_new_array()) ||
	    !ctl_json_put(bt, "path", path = json_object_new_array()))
		return NULL;
	for (size_t i = 0; i < d->c.callees.n_edges && i < 5; i++) {
		const struct report_edge *e = &d->c.callees.edges[i];
		struct json_object *c = json_object_new_object();

		if (!c || json_object_array_add(callees, c) < 0) {
			json_object_put(c);
			return NULL;
		}
		if (!ctl_json_put(c, "function", json_object_new_string(
				  profile_string(d->cpu->p, d->cpu->rows[e->row].function))) ||
		    !ctl_json_put(c, "kernel", json_object_new_boolean(d->cpu->rows[e->row].kernel)) ||
		    !ctl_json_put(c, "value", json_object_new_uint64(e->value)) ||
		    !ctl_json_put(c, "percent", new_percent(report_percent(e->value, d->c.callees.total))))
			return NULL;
	}
	for (size_t i = 0; i < d->c.n_path; i++)
		if (json_object_array_add(path, json_object_new_string(
			  profile_string(d->cpu->p, d->cpu->rows[d->c.path[i]].function))) < 0)
			return NULL;
	return TAKE_PTR(o);
}

/* Copies the value at path in m to o's key, when m has it (a process not
 * read since its exec has no peak time): false only when out of memory. */
static bool copy_field(struct json_object *o, const char *key, struct json_object *m,
		       const char *path)
{
	struct json_object *v = ctl_json_path(m, path);

	return !v || ctl_json_put(o, key, json_object_get(v));
}

static struct json_object *json_memory(const struct diagnosis *d)
{
	_cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
	struct json_object *m = d->mem_answer, *site;

	if (!o || !ctl_json_put(o, "sampled_bytes", json_object_new_uint64(d->mem->total)) ||
	    !ctl_json_put(o, "growth_sampled", json_object_new_boolean(d->mem->total > 0)) ||
	    !ctl_json_put(o, "enough_growth", json_object_new_boolean(d->mem->total > 0 &&
								     !d->too_little_growth)) ||
	    !ctl_json_put(o, "min_memory_samples", json_object_new_int(DIAGNOSE_MIN_MEMORY_SAMPLES)) ||
	    (d->sample_bytes && !ctl_json_put(o, "sample_bytes", json_object_new_uint64(d->sample_bytes))))
		return NULL;
	if (m && (!copy_field(o, "rss_bytes", m, "rss.bytes") ||
		  !copy_field(o, "peak_rss_bytes", m, "peak.bytes") ||
		  !copy_field(o, "peak_time", m, "peak.time") ||
		  !copy_field(o, "growing", m, "growth.growing") ||
		  !copy_field(o, "growth_bytes_per_second", m, "growth.bytes_per_second")))
		return NULL;
	if (!d->site)
		return TAKE_PTR(o);
	if (!ctl_json_put(o, "top_site", site = json_object_new_object()) ||
	    !ctl_json_put(site, "function", json_object_new_string(d->site)) ||
	    (d->site_file && !ctl_json_put(site, "file", json_object_new_string(d->site_file))) ||
	    (d->site_line > 0 && !ctl_json_put(site, "line", json_object_new_int64(d->site_line))) ||
	    !ctl_json_put(site, "bytes", json_object_new_uint64(d->site_bytes)) ||
	    !ctl_json_put(site, "percent", new_percent(report_percent(d->site_bytes, d->mem->total))))
		return NULL;
	return TAKE_PTR(o);
}

/* A frame of the off-CPU profile as {function, file, line}. */
static struct json_object *json_wait_frame(const struct profile *off, uint32_t frame, uint64_t value,
					   uint64_t of)
{
	_cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
	const struct profile_frame *f = &off->frames[frame];

	if (!o || !ctl_json_put(o, "function", json_object_new_string(profile_string(off, f->function))) ||
	    (f->file && !ctl_json_put(o, "file", json_object_new_string(profile_string(off, f->file)))) ||
	    (f->line && !ctl_json_put(o, "line", json_object_new_int64(f->line))) ||
	    !ctl_json_put(o, "percent", new_percent(report_percent(value, of))))
		return NULL;
	return TAKE_PTR(o);
}

static struct json_object *json_waits(const struct diagnosis *d)
{
	_cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
	const struct diagnose_waits *w = &d->w;
	double all = (double)d->samples * (double)d->period_ns + (double)w->total;
	double cpu = all > 0 ? 100.0 * (double)w->cpu / all : 0;

	if (!o || !ctl_json_put(o, "offcpu_ns", json_object_new_uint64(w->total)) ||
	    !ctl_json_put(o, "percent", new_percent(all > 0 ? 100.0 * (double)w->total / all : 0)) ||
	    !ctl_json_put(o, "runqueue_percent", new_percent(cpu)) ||
	    !ctl_json_put(o, "oversubscribed", json_object_new_boolean(cpu >= DIAGNOSE_RUNQUEUE_PERCENT)) ||
	    !ctl_json_put(o, "oversubscribed_from_percent", new_percent(DIAGNOSE_RUNQUEUE_PERCENT)))
		return NULL;
	if (w->top && (!ctl_json_put(o, "top_class", json_object_new_string(
						      profile_string(d->off, d->off->frames[w->top_class].function))) ||
		       !ctl_json_put(o, "top_class_percent", new_percent(report_percent(w->top, w->total)))))
		return NULL;
	if (w->site && !ctl_json_put(o, "call", json_wait_frame(d->off, w->site, w->site_total, w->top)))
		return NULL;
	if (w->code && !ctl_json_put(o, "code", json_wait_frame(d->off, w->code, w->code_total, w->top)))
		return NULL;
	return TAKE_PTR(o);
}

static struct json_object *json_thread(const struct profile *p, uint32_t frame, uint64_t value,
				       uint64_t of)
{
	_cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
	const char *comm;
	size_t comm_len;
	int64_t tid = thread_of(p, frame, &comm, &comm_len);

	if (!o || !ctl_json_put(o, "tid", json_object_new_int64(tid)) ||
	    !ctl_json_put(o, "comm", json_object_new_string_len(comm, (int)comm_len)) ||
	    !ctl_json_put(o, "percent", new_percent(report_percent(value, of))))
		return NULL;
	return TAKE_PTR(o);
}

/* "gil" (when gil_said()): who waits for it, who holds it and where. */
static struct json_object *json_gil(const struct diagnosis *d)
{
	_cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
	const struct diagnose_gil *g = &d->gil;
	struct json_object *holder;

	if (!o || !ctl_json_put(o, "from_percent", new_percent(DIAGNOSE_GIL_PERCENT)) ||
	    !ctl_json_put(o, "waiter", json_thread(d->wall, g->waiter, g->waiter_waits, g->waiter_total)))
		return NULL;
	if (g->holder) {
		if (!ctl_json_put(o, "holder", holder = json_thread(d->wall, g->holder, g->holder_held,
								    g->holder_total)) ||
		    (g->code && !ctl_json_put(holder, "code", json_wait_frame(d->wall, g->code, g->code_held,
									      g->holder_held))))
			return NULL;
	}
	return TAKE_PTR(o);
}

static enum perfctl_exit print_json(struct ctl_env *env, const struct diagnosis *d)
{
	_cleanup_(json_object_putp) struct json_object *doc = json_object_new_object();
	struct json_object *w;
	bool ok = doc && ctl_json_put(doc, "version", json_object_new_int(PERFD_PROTOCOL_VERSION)) &&
		  ctl_json_put(doc, "ok", json_object_new_boolean(1)) &&
		  ctl_json_put(doc, "workload", w = json_object_new_object()) &&
		  (!d->pid || ctl_json_put(w, "pid", json_object_new_int64(d->pid))) &&
		  (!d->comm || ctl_json_put(w, "comm", json_object_new_string(d->comm))) &&
		  (!d->cmdline || ctl_json_put(w, "cmdline", json_object_new_string(d->cmdline))) &&
		  ctl_json_put(w, "exited", json_object_new_boolean(d->exited)) &&
		  ctl_json_put(w, "processes", json_object_new_uint64(d->n_processes)) &&
		  ctl_json_put(doc, "from", json_object_new_double(d->from)) &&
		  ctl_json_put(doc, "to", json_object_new_double(d->to)) &&
		  ctl_json_put(doc, "seconds", json_object_new_double(d->to - d->from)) &&
		  ctl_json_put(doc, "period_ns", json_object_new_uint64(d->period_ns)) &&
		  ctl_json_put(doc, "frequency_hz", json_object_new_double(
				       d->period_ns ? 1e9 / (double)d->period_ns : 0)) &&
		  ctl_json_put(doc, "cpu", json_cpu(d)) &&
		  ctl_json_put(doc, "memory", json_memory(d)) &&
		  (!d->off || ctl_json_put(doc, "waiting", json_waits(d))) &&
		  (!gil_said(d) || ctl_json_put(doc, "gil", json_gil(d)));

	if (!ok) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	return ctl_print_answer(env, doc);
}

/* The options, as getopt_long() takes them; also what `perfctl
 * --complete-options diagnose` lists for the shell completion. */
static const struct option diagnose_options[] = {
	CTL_SELECTION_OPTIONS,
	{ "json", no_argument, NULL, 'j' },
	{ "socket", required_argument, NULL, 'S' },
	{}
};
static const char diagnose_shortopts[] = ":p:d:";

/* --- the command ------------------------------------------------------------ */

static int parse_args(struct ctl_env *env, int argc, char **argv, struct ctl_selection *sel)
{
	int c, k;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, diagnose_shortopts, diagnose_options, NULL)) != -1) {
		if ((k = ctl_selection_option(env, "diagnose", c, sel)) != 0) {
			if (k < 0)
				return k;
			continue;
		}
		if (ctl_common_option(env, "diagnose", c, argv) < 0)
			return -EINVAL;
	}
	if (optind < argc) {
		ctl_error(env, CTL_ERR_USAGE, "diagnose: unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return ctl_selection_check(env, "diagnose", sel);
}

/* The daemon's mem answer for pid since from. */
static enum perfctl_exit fetch_mem(struct ctl_env *env, int64_t pid, double from,
				   struct json_object **ret)
{
	_cleanup_(json_object_putp) struct json_object *req = ctl_request_new("mem");
	double since = ceil(now_realtime() - from) + 1;

	if (!req || json_object_object_add(req, "pid", json_object_new_int64(pid)) < 0 ||
	    json_object_object_add(req, "top", json_object_new_int(1)) < 0 ||
	    json_object_object_add(req, "since", json_object_new_double(since > 1 ? since : 1)) < 0) {
		ctl_error(env, CTL_ERR_IO, "out of memory");
		return PERFCTL_EXIT_FAILURE;
	}
	return ctl_call(env, req, CTL_CALL_TIMEOUT_MS, ret);
}

enum perfctl_exit do_diagnose(struct ctl_env *env, int argc, char **argv)
{
	struct ctl_selection sel = { 0 }, msel;
	_cleanup_(diagnosis_done) struct diagnosis d = { 0 };
	_cleanup_(profile_freep) struct profile *cpu = NULL, *mem = NULL;
	_cleanup_(json_object_putp) struct json_object *answer = NULL;
	const struct report_opts cpu_opts = { 0 }, mem_opts = { .skip_kernel = true };
	struct json_object *procs, *proc = NULL;
	double from = 0, to = 0, now;
	int64_t v, start_ns = 0;
	enum perfctl_exit rc;
	int k;

	if (parse_args(env, argc, argv, &sel) < 0)
		return PERFCTL_EXIT_USAGE;
	rc = report_fetch(env, &sel, "cpu", REPORT_FETCH_LINES, &cpu, &answer);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	now = now_realtime();

	/* the range asked for; a live one is what the answer covered */
	msel = sel;
	if (sel.duration) {
		(void)ctl_json_double(answer, "from", &from);
		(void)ctl_json_double(answer, "to", &to);
		msel.duration = 0;
		msel.from = from;
		msel.to = to;
	} else if (sel.since) {
		from = now - sel.since;
		to = now;
	} else {
		from = sel.from;
		to = sel.to ? sel.to : now;
	}

	/* the one process: as the snapshot lists it, else (no window of it in
	 * the range) as mem knows it */
	procs = ctl_json_path(answer, "processes");
	d.n_processes = json_object_is_type(procs, json_type_array) ? json_object_array_length(procs) : 0;
	if (d.n_processes == 1)
		proc = json_object_array_get_idx(procs, 0);
	if (proc)
		(void)ctl_json_int(proc, "pid", &d.pid);
	else if (d.n_processes == 0 && sel.n_pids == 1)
		d.pid = sel.pids[0];
	if (d.pid) {
		rc = fetch_mem(env, d.pid, from, &d.mem_answer);
		if (rc != PERFCTL_EXIT_OK)
			return rc;
		if (!proc)
			proc = d.mem_answer;
		d.n_processes = 1;
	}
	if (proc) {
		const char *comm = json_object_get_string(ctl_json_path(proc, "comm"));
		double end = 0, start;

		(void)ctl_json_int(proc, "start_time_ns", &start_ns);
		d.exited = json_object_get_boolean(ctl_json_path(proc, "exited"));
		d.comm = comm ? ctl_escape(comm, strlen(comm)) : NULL;
		if (comm && !d.comm) {
			ctl_error(env, CTL_ERR_IO, "out of memory");
			return PERFCTL_EXIT_FAILURE;
		}
		start = start_ns > 0 ? boottime_to_wall(start_ns) : 0;
		from = start > from ? start : from;
		/* an exited process's data ends where it ended */
		if (d.exited && ctl_json_double(answer, "to", &end) && end > from && end < to)
			to = end;
		/* the rest (gone, another process, a zombie) just leaves it out */
		if (!d.exited && read_cmdline(d.pid, start_ns, &d.cmdline) == -ENOMEM) {
			ctl_error(env, CTL_ERR_IO, "out of memory");
			return PERFCTL_EXIT_FAILURE;
		}
	}
	d.from = from;
	d.to = to > from ? to : from;
	d.samples = ctl_json_int(answer, "samples", &v) && v > 0 ? (uint64_t)v : cpu->total;
	d.period_ns = cpu->period_ns;
	d.possible = d.period_ns ? (d.to - d.from) * 1e9 / (double)d.period_ns : 0;
	d.cpu_percent = d.possible > 0 ? 100.0 * (double)d.samples / d.possible : 0;

	rc = report_fetch(env, &msel, "memory", 0, &mem, NULL);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	rc = report_fetch(env, &msel, "offcpu", REPORT_FETCH_LINES, &d.off, NULL);
	if (rc != PERFCTL_EXIT_OK)
		return rc;
	k = report_build(cpu, &cpu_opts, &d.cpu);
	if (k >= 0 && d.samples >= DIAGNOSE_MIN_SAMPLES)
		k = diagnose_cpu(d.cpu, cpu, &d.c);
	if (k >= 0)
		k = report_build(mem, &mem_opts, &d.mem);
	if (k >= 0)
		k = find_site(&d);
	if (k >= 0 && d.off)
		k = diagnose_waits(d.off, &d.w);
	/* only a thread that waited for the GIL makes it worth a query */
	if (k >= 0 && d.off && d.w.gil) {
		rc = report_fetch(env, &msel, "wall", REPORT_FETCH_THREADS, &d.wall, NULL);
		if (rc != PERFCTL_EXIT_OK)
			return rc;
		k = diagnose_gil(d.wall, &d.gil);
	}
	if (k < 0) {
		ctl_error(env, CTL_ERR_IO, "diagnose: %s", strerror(-k));
		return PERFCTL_EXIT_FAILURE;
	}

	if (env->json)
		return print_json(env, &d);
	print_text(&d);
	return PERFCTL_EXIT_OK;
}

const struct ctl_command ctl_cmd_diagnose = {
	.name = "diagnose",
	.fn = do_diagnose,
	.options = diagnose_options,
	.shortopts = diagnose_shortopts,
	.summary = "a few sentences on where the time and the memory went",
	.synopsis = "SELECTION WHEN",
	.help = "A few sentences on where the time and the memory of those processes went\n"
		"(SELECTION WHEN: see 'perfctl snapshot --help'): the window and samples,\n"
		"the dominant function by self and by total (and whether it only\n"
		"coordinates callees), the peak RSS, the top growth site and the trend,\n"
		"what it waited for, which Python thread waits for the GIL and which\n"
		"holds it, and what the samples cannot show (too few, mostly waiting).\n",
};
