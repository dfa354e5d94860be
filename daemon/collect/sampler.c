/* SPDX-License-Identifier: MIT */
/*
 * sampler.c - see sampler.h.  One perf event and one BPF link per online
 * CPU; a software cpu-clock event (hrtimer based) because these machines may
 * have no hardware PMU, with a period in ns rather than the kernel's
 * frequency mode: for a timer event the period *is* the frequency.  By
 * default the timer runs JITTER_TICKS_PER_SAMPLE times faster than
 * --frequency and the BPF program samples one tick at a random instant of
 * each mean period 1e9/HZ (bpf/perfd.bpf.c, "Which ticks sample"), so a
 * workload that repeats at that period is not sampled at one phase; with
 * --fixed-period every tick of a 1e9/HZ timer samples.  Either way samples
 * x 1e9/HZ is an unbiased estimate of CPU time.  The cost of the faster
 * timer is measured in docs/notes/performance-history.md ("Jittered sampling").
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "base/clock.h"
#include "collect/cpus.h"
#include "collect/tiers.h"
#include "perfd.skel.h"
#include "perfd/macro.h"
#include "collect/sampler.h"


struct sampler {
	struct perfd_bpf *skel;
	struct ring_buffer *ring;
	int *event_fds; /* per CPU: its event, to set its period at a reload */
	struct bpf_link **links;
	unsigned n_cpus_possible;
	unsigned n_attached;
	struct periods {
		uint64_t period_ns;       /* mean period of a sample */
		uint64_t timer_period_ns; /* of the perf event */
		bool fixed;
	} periods;
	bool fixed_asked; /* --fixed-period */
	unsigned tier; /* the features loaded (collect/tiers.h) */
	uint64_t memory_sample_bytes; /* asked; the tier says whether it is on */
	uint64_t offcpu_rate;         /* likewise */
	size_t ringbuf_bytes;
	struct sampler_load_report report;
};

/* The default ring holds a second of samples at 1 KiB each (a 127-frame
 * kernel plus a 127-frame user stack is 2 KiB; most are far shorter), which
 * the drain thread, waking every second or at a quarter full, never lets
 * fill.  Its pages are mapped twice (the kernel maps the data area twice
 * in a row so a record never wraps), so it counts twice in perfd's RSS:
 * 1 MiB at 99 Hz on a few CPUs costs 2 MiB of RSS, where a fixed 8 MiB
 * cost 16. */
#define RINGBUF_BYTES_PER_SAMPLE 1024u
#define RINGBUF_MIN_BYTES (1u << 20)
#define RINGBUF_MAX_BYTES (64u << 20)

/* Timer ticks per mean period when jittered.  More ticks place samples
 * more finely but each costs an interrupt (on a VM, an exit to re-arm the
 * timer) and a run of the program's early exit, and the hrtimer program's
 * run: 2.382 rather than 4.382 is 46% fewer of them per sample (measured
 * only together with the stack window: docs/notes/performance-history.md, "Kernel cost
 * per sample, where the time goes").  The fraction, 2 minus the
 * golden ratio, keeps the ticks off every short multiple of the mean
 * period: a workload whose rounds last exactly one period sees ticks at
 * phases j x 0.382 of its round, evenly spread, where a whole number would
 * give it that number of phases only; the shift from one period to the
 * next is the same 0.382 of a tick for any whole part.  Fewer when
 * the kernel's sample-rate limit or its 10 us floor for a cpu-clock period
 * would be crossed; below JITTER_MIN_TICKS the period is fixed. */
#define JITTER_TICKS_PER_SAMPLE 2.382
#define JITTER_MIN_TICKS 1.5
#define CPU_CLOCK_MIN_PERIOD_NS 10000

/* The periods for frequency_hz: of a sample, of the timer, and whether the
 * period is fixed (asked, or too few ticks per period fit: see above). */
static struct periods plan_periods(unsigned frequency_hz, bool fixed_asked)
{
	struct periods p = { .period_ns = NSEC_PER_SEC / frequency_hz, .fixed = fixed_asked };

	if (!p.fixed) {
		long max_rate = sampler_max_frequency();
		double ticks = JITTER_TICKS_PER_SAMPLE;

		if (max_rate > 0 && ticks * frequency_hz > (double)max_rate)
			ticks = (double)max_rate / frequency_hz;
		if ((double)p.period_ns / ticks < CPU_CLOCK_MIN_PERIOD_NS)
			ticks = (double)p.period_ns / CPU_CLOCK_MIN_PERIOD_NS;
		p.fixed = ticks < JITTER_MIN_TICKS;
		p.timer_period_ns = (uint64_t)((double)p.period_ns / ticks + 0.5);
	}
	if (p.fixed)
		p.timer_period_ns = p.period_ns;
	return p;
}

/* The sampler's periods, and the BPF program's copy of them (before load:
 * its initial image; after: the mapped .bss, which ticks read as they run;
 * period_gen last, so a tick that sees it sees the periods). */
static void set_periods(struct sampler *s, struct periods p)
{
	s->periods = p;
	s->skel->bss->jitter_period_ns = p.fixed ? 0 : p.period_ns;
	s->skel->bss->timer_period_ns = p.timer_period_ns;
	s->skel->bss->period_gen++; /* x86 keeps stores in order */
}

/* Whether the running kernel's BTF has a type of that name (a tracepoint
 * a tp_btf program can attach to has its btf_trace_NAME typedef). */
static bool btf_type_exists(const char *name)
{
	struct btf *btf = btf__load_vmlinux_btf();
	bool found;

	if (!btf)
		return false;
	found = btf__find_by_name(btf, name) > 0;
	btf__free(btf);
	return found;
}

/* Whether kallsyms (a file in the /proc/kallsyms format, "ADDR TYPE NAME
 * [MODULE]") names a kernel symbol `name` at a nonzero address: what
 * libbpf resolves a __ksym against.  A __weak ksym that is missing, or
 * whose address kptr_restrict hides, resolves to 0.  ksyms.c maps
 * addresses to names; this is the one lookup by name, done once at
 * start. */
static bool kallsyms_has(const char *path, const char *name)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	size_t len = strlen(name);
	char line[512];

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *type = strchr(line, ' '), *sym;

		if (!type || type[1] == '\0' || type[2] != ' ')
			continue;
		sym = type + 3;
		if (strncmp(sym, name, len) == 0 && strchr(" \t\n", sym[len])) /* or the NUL */
			return strtoull(line, NULL, 16) != 0;
	}
	return false;
}

long sampler_max_frequency(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "re");
	long v;

	if (!f)
		return negative_errno();
	if (fscanf(f, "%ld", &v) != 1 || v <= 0)
		return -EIO;
	return v;
}

struct sampler *sampler_free(struct sampler *s)
{
	if (!s)
		return NULL;
	ring_buffer__free(s->ring);
	for (unsigned i = 0; i < s->n_cpus_possible; i++) {
		if (s->links)
			bpf_link__destroy(s->links[i]);
		if (s->event_fds)
			closep(&s->event_fds[i]);
	}
	free(s->links);
	free(s->event_fds);
	perfd_bpf__destroy(s->skel);
	free(s);
	return NULL;
}

static int open_cpu_clock(unsigned cpu, uint64_t period_ns)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = period_ns,
	};
	int fd = syscall(__NR_perf_event_open, &attr, -1, (int)cpu, -1,
			 PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? negative_errno() : fd;
}

static int attach_cpus(struct sampler *s, const char **what)
{
	_cleanup_free_ bool *online = NULL;
	int r;

	online = calloc(s->n_cpus_possible, sizeof(*online));
	s->event_fds = malloc(s->n_cpus_possible * sizeof(*s->event_fds));
	s->links = calloc(s->n_cpus_possible, sizeof(*s->links));
	if (!online || !s->event_fds || !s->links)
		return -ENOMEM;
	for (unsigned i = 0; i < s->n_cpus_possible; i++)
		s->event_fds[i] = -1;

	*what = "read the online CPUs";
	r = cpus_read_online(online, s->n_cpus_possible);
	if (r < 0)
		return r;
	for (unsigned cpu = 0; cpu < s->n_cpus_possible; cpu++) {
		if (!online[cpu])
			continue;
		*what = "open a cpu-clock perf event";
		r = open_cpu_clock(cpu, s->periods.timer_period_ns);
		if (r == -ENODEV)
			continue; /* went offline meanwhile */
		if (r < 0)
			return r;
		/* The link owns the event (bpf_link__destroy() closes it); a
		 * copy of the fd stays here to change its period. */
		*what = "attach the BPF program to a perf event";
		s->links[cpu] = bpf_program__attach_perf_event(
			s->tier & TIER_UNWINDING ? s->skel->progs.on_cpu_clock : s->skel->progs.on_cpu_clock_fp, r);
		if (!s->links[cpu]) {
			int e = negative_errno();

			close(r);
			return e;
		}
		s->event_fds[cpu] = fcntl(r, F_DUPFD_CLOEXEC, 3);
		if (s->event_fds[cpu] < 0)
			return negative_errno();
		s->n_attached++;
	}
	return s->n_attached > 0 ? 0 : -ENODEV;
}

size_t sampler_default_ringbuf_bytes(unsigned frequency_hz, unsigned cpus)
{
	uint64_t want = (uint64_t)frequency_hz * MAX(cpus, 1u) * RINGBUF_BYTES_PER_SAMPLE;
	size_t bytes = RINGBUF_MIN_BYTES;

	while (bytes < want && bytes < RINGBUF_MAX_BYTES)
		bytes <<= 1;
	return bytes;
}

size_t sampler_ringbuf_bytes(const struct sampler *s)
{
	return s->ringbuf_bytes;
}

/* The size of a map only a program of the tier's feature reads. */
static uint32_t feature_map_size(unsigned tier, unsigned feature, uint32_t wanted)
{
	return tier & feature ? MAX(wanted, 1u) : 1u;
}

/* The features opts asks for, and those of them this kernel has what
 * they need for (ret_supported), with why not in r->why. */
static void probe_features(const struct sampler_opts *opts, struct sampler_load_report *r)
{
	static const char no_loop[] = "this kernel lacks bpf_loop(), bpf_task_pt_regs() or "
				      "bpf_get_current_task_btf()";
	bool walks;

	r->asked = TIER_SWITCHES | (opts->unwind_rows > 0 ? TIER_TABLES : 0) |
		   (opts->python_processes > 0 ? TIER_PYTHON : 0) |
		   (opts->memory_sample_bytes > 0 ? TIER_MEMORY : 0) |
		   (opts->offcpu_rate > 0 ? TIER_OFFCPU : 0);
	snprintf(r->why[0], sizeof(r->why[0]), "turned off (--unwind-mib 0)");
	snprintf(r->why[1], sizeof(r->why[1]), "turned off (--no-python)");
	snprintf(r->why[2], sizeof(r->why[2]), "turned off (--no-memory)");
	snprintf(r->why[4], sizeof(r->why[4]), "turned off (--no-offcpu)");
	r->supported = 0;
	/* Walking tables and Python frames needs bpf_loop() (5.17),
	 * bpf_task_pt_regs() (5.15) and bpf_get_current_task_btf() (5.11):
	 * probe for them rather than trust a kernel version. */
	walks = libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) > 0 &&
		libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL) > 0 &&
		libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_get_current_task_btf, NULL) > 0;
	if (walks)
		r->supported |= TIER_UNWINDING;
	for (int i = 0; i < 2; i++)
		if (!walks && (r->asked & tier_features[i]))
			snprintf(r->why[i], sizeof(r->why[i]), "%s", no_loop);
	/* Memory growth: the rss_stat tracepoint (a raw one, with BTF: 5.5+),
	 * its stacks walked as the cpu-clock program walks them. */
	if (btf_type_exists("btf_trace_rss_stat"))
		r->supported |= TIER_MEMORY;
	else if (r->asked & TIER_MEMORY)
		snprintf(r->why[2], sizeof(r->why[2]), "this kernel has no rss_stat tracepoint with BTF");
	/* Whose tick it is at a context switch (bpf/perfd.bpf.c): both
	 * tracepoints, with BTF (5.5+), and the perf hrtimer's function,
	 * which tells its expiry from the others' (a __weak __ksym: without
	 * it no expiry is ever noted, and both programs would run for
	 * nothing), or none of it. */
	if (btf_type_exists("btf_trace_sched_switch") && btf_type_exists("btf_trace_hrtimer_expire_entry") &&
	    kallsyms_has(opts->kallsyms_path ? opts->kallsyms_path : "/proc/kallsyms", "perf_swevent_hrtimer"))
		r->supported |= TIER_SWITCHES;
	else
		snprintf(r->why[3], sizeof(r->why[3]),
			 "this kernel has no sched_switch or hrtimer_expire_entry tracepoint with BTF, "
			 "or no perf_swevent_hrtimer in its kallsyms");
	/* Off-CPU time: the sched_switch tracepoint with BTF, and task local
	 * storage for the note of each block (5.11+), its stack taken as
	 * the cpu-clock program takes one (bpf/offcpu.bpf.h). */
	if (btf_type_exists("btf_trace_sched_switch") &&
	    libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) > 0)
		r->supported |= TIER_OFFCPU;
	else if (r->asked & TIER_OFFCPU)
		snprintf(r->why[4], sizeof(r->why[4]),
			 "this kernel has no sched_switch tracepoint with BTF or no task local storage");
}

#define KERNEL_BTF_PATH "/sys/kernel/btf/vmlinux"

/* Opens the object and configures it for tier: the programs it loads,
 * what they walk, the maps' sizes.
 *
 * CO-RE relocates against the kernel's own BTF, named as a custom path:
 * libbpf then does not also search the kernel modules' BTF, whose listing
 * (BPF_BTF_GET_NEXT_ID) takes CAP_SYS_ADMIN, which perfd's unit does not
 * grant.  The programs use vmlinux types only, but a flavor that this
 * kernel lacks (a ___pre62 struct on 6.2+) sends libbpf 1.1 to the modules
 * and fails the load with EPERM without CAP_SYS_ADMIN.  A kernel whose BTF
 * is not in sysfs is left to libbpf's own search. */
static int open_tier(struct sampler *s, const struct sampler_opts *opts, unsigned tier)
{
	LIBBPF_OPTS(bpf_object_open_opts, open_opts,
		    .btf_custom_path = access(KERNEL_BTF_PATH, R_OK) == 0 ? KERNEL_BTF_PATH : NULL);
	struct perfd_bpf *skel = perfd_bpf__open_opts(&open_opts);
	struct bpf_program *p;
	int r;

	if (!skel)
		return negative_errno();
	s->skel = skel;
	skel->rodata->ringbuf_wakeup_bytes = s->ringbuf_bytes / 4;
	skel->rodata->page_size = sysconf(_SC_PAGESIZE);
	skel->rodata->memory_sample_bytes = opts->memory_sample_bytes ? opts->memory_sample_bytes : 1;
	skel->rodata->offcpu_blocks_per_s = opts->offcpu_rate ? opts->offcpu_rate : 1;
	skel->rodata->offcpu_self_tgid = (__u32)getpid();
	skel->rodata->with_tables = tier & TIER_TABLES;
	skel->rodata->with_python = tier & TIER_PYTHON;
	skel->rodata->test_refuse = opts->test_refuse;
	set_periods(s, s->periods);
	bpf_object__for_each_program(p, skel->obj)
		bpf_program__set_autoload(p, tier_uses_program(tier, bpf_program__name(p)));
	r = bpf_map__set_max_entries(skel->maps.events, s->ringbuf_bytes);
	/* Array maps take all their memory at creation: without the program
	 * that reads them they stay at one entry. */
	if (r >= 0)
		r = bpf_map__set_max_entries(skel->maps.unwind_rows, feature_map_size(tier, TIER_TABLES, opts->unwind_rows));
	if (r >= 0)
		r = bpf_map__set_max_entries(skel->maps.unwind_mappings,
					     feature_map_size(tier, TIER_TABLES, opts->unwind_mappings));
	if (r >= 0)
		r = bpf_map__set_max_entries(skel->maps.unwind_processes,
					     feature_map_size(tier, TIER_TABLES, opts->unwind_processes));
	if (r >= 0)
		r = bpf_map__set_max_entries(skel->maps.python_processes,
					     feature_map_size(tier, TIER_PYTHON, opts->python_processes));
	return r;
}

/* Each program's verifier log, one buffer each.  At BPF_LOG_STATS the
 * kernel writes its statistics and, on a refusal, why: nothing per
 * instruction, so verifying costs what it costs without a log (level 1
 * tripled on_cpu_clock's 0.8 s), and libbpf, which retries a failed load
 * at level 1 when none was asked, does not verify a refused program a
 * second time (another 20 s for one too large). */
#define VERIFIER_LOG_STATS 4 /* BPF_LOG_STATS, kernel/bpf/verifier.c */
#define VERIFIER_LOG_BYTES (64u << 10)

static void set_logs(struct perfd_bpf *skel, char *logs)
{
	struct bpf_program *p;
	size_t i = 0;

	bpf_object__for_each_program(p, skel->obj) {
		if (i == LOAD_MAX_PROGRAMS)
			break;
		logs[i * VERIFIER_LOG_BYTES] = '\0';
		(void)bpf_program__set_log_buf(p, logs + i * VERIFIER_LOG_BYTES, VERIFIER_LOG_BYTES);
		(void)bpf_program__set_log_level(p, VERIFIER_LOG_STATS);
		i++;
	}
}

/* After a failed load: the program the verifier refused and its reason.
 * libbpf loads the programs in the object's order and stops at the first
 * that fails, so it is the last with a log; a log without a reason in it
 * means the failure was not the verifier's (no permission, no memory).
 * Returns the program or NULL. */
static struct bpf_program *refused_program(struct perfd_bpf *skel, const char *logs, char *reason,
					   size_t len)
{
	struct bpf_program *p, *last = NULL;
	size_t i = 0, last_i = 0;

	bpf_object__for_each_program(p, skel->obj) {
		if (i == LOAD_MAX_PROGRAMS)
			break;
		if (logs[i * VERIFIER_LOG_BYTES]) {
			last = p;
			last_i = i;
		}
		i++;
	}
	if (!last || verifier_reason(logs + last_i * VERIFIER_LOG_BYTES, reason, len) == 0)
		return NULL;
	return last;
}

static struct load_program *report_program(struct sampler_load_report *r, const char *name)
{
	for (size_t i = 0; i < r->n_programs; i++)
		if (!strcmp(r->programs[i].name, name))
			return &r->programs[i];
	if (r->n_programs == LOAD_MAX_PROGRAMS)
		return NULL;
	snprintf(r->programs[r->n_programs].name, sizeof(r->programs[0].name), "%s", name);
	return &r->programs[r->n_programs++];
}

/* Every program of the object in r: loaded with the verifier's count, or
 * why not (after a failed load: none is). */
static void report_programs(struct perfd_bpf *skel, struct sampler_load_report *r)
{
	struct bpf_program *p;

	bpf_object__for_each_program(p, skel->obj) {
		struct load_program *lp = report_program(r, bpf_program__name(p));
		unsigned f = tier_program_features(bpf_program__name(p));
		struct bpf_prog_info info = {};
		uint32_t len = sizeof(info);

		if (!lp)
			break;
		lp->loaded = bpf_program__fd(p) >= 0;
		if (lp->loaded) {
			lp->error[0] = '\0';
			if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) == 0)
				lp->verified_insns = info.verified_insns;
		} else if (lp->error[0]) {
			/* refused in a tier above */
		} else if (!r->loaded) {
			snprintf(lp->error, sizeof(lp->error), "no tier loads");
		} else if (f && !(r->supported & f)) {
			snprintf(lp->error, sizeof(lp->error), "not supported by this kernel");
		} else if (f && !(r->asked & f)) {
			snprintf(lp->error, sizeof(lp->error), "not asked for");
		} else {
			snprintf(lp->error, sizeof(lp->error), "not needed in this tier");
		}
	}
}

/* Notes in r that the verifier refused program in a load of tier, for
 * reason, and that the ladder goes on with next: the features lost by it
 * and the program say why. */
static void record_refusal(struct sampler_load_report *r, const char *program, unsigned tier,
			   unsigned next, const char *reason)
{
	struct load_program *lp = report_program(r, program);
	char name[TIER_NAME_MAX];

	tier_name(tier & TIER_UNWINDING, name, sizeof(name));
	for (int i = 0; i < TIER_N_FEATURES; i++)
		if (tier & ~next & tier_features[i])
			snprintf(r->why[i], sizeof(r->why[i]),
				 "%s with %s was refused by this kernel's verifier: \"%s\"", program, name, reason);
	if (lp)
		snprintf(lp->error, sizeof(lp->error), "refused by this kernel's verifier with %s: \"%s\"", name,
			 reason);
}

/* What stopped the ladder before it found a tier, for the log. */
static void report_failure(struct sampler_load_report *r, int err, const char *refused, const char *reason)
{
	struct btf *btf = btf__load_vmlinux_btf();

	if (refused)
		snprintf(r->error, sizeof(r->error),
			 "no tier loads: %s was refused by this kernel's verifier: \"%s\"", refused, reason);
	else if (!btf)
		snprintf(r->error, sizeof(r->error),
			 "this kernel has no BTF (" KERNEL_BTF_PATH "), which perfd's programs need");
	else if (err == -EPERM)
		snprintf(r->error, sizeof(r->error),
			 "%s: perfd needs root, or CAP_BPF and CAP_PERFMON", strerror(-err));
	else
		snprintf(r->error, sizeof(r->error), "%s", strerror(-err));
	btf__free(btf);
}

/* libbpf's warnings during one load of the ladder, held until its end
 * tells whether they matter: a refusal the ladder goes past is said once
 * by the caller, in the verifier's words, and libbpf's own lines about it
 * ("failed to load object") only with --verbose; anything else comes out
 * as libbpf said it.  Static, as libbpf's print hook is: perfd loads its
 * programs once, from one thread, at start. */
static libbpf_print_fn_t outer_print;
static char held[4096];
static size_t held_len;

static int hold_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	int n;

	if (level == LIBBPF_DEBUG)
		return outer_print ? outer_print(level, fmt, ap) : 0;
	n = vsnprintf(held + held_len, sizeof(held) - held_len, fmt, ap);
	if (n > 0)
		held_len = MIN(held_len + (size_t)n, sizeof(held) - 1);
	return n;
}

static int print_to(libbpf_print_fn_t fn, enum libbpf_print_level level, const char *fmt, ...) _printf_(3, 4);
static int print_to(libbpf_print_fn_t fn, enum libbpf_print_level level, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fn(level, fmt, ap);
	va_end(ap);
	return r;
}

static void hold_libbpf(void)
{
	held_len = 0;
	held[0] = '\0';
	outer_print = libbpf_set_print(hold_print);
}

/* Gives libbpf its printer back, with what it held, as warnings or (passed:
 * a refusal the ladder goes past) as debug messages. */
static void release_libbpf(bool passed)
{
	(void)libbpf_set_print(outer_print);
	if (outer_print && held_len)
		(void)print_to(outer_print, passed ? LIBBPF_DEBUG : LIBBPF_WARN, "%s", held);
	held_len = 0;
}

/* Opens and loads the object in the best tier this kernel's verifier
 * accepts, from what opts asks for and the kernel supports down the
 * ladder (tiers.h), describing it all in r. */
static int load_tiers(struct sampler *s, const struct sampler_opts *opts, struct sampler_load_report *r)
{
	_cleanup_free_ char *logs = calloc(LOAD_MAX_PROGRAMS, VERIFIER_LOG_BYTES);
	unsigned tier = r->asked & r->supported;
	int err;

	if (!logs)
		return -ENOMEM;
	for (;;) {
		char reason[LOAD_REASON_MAX - 128] = "";
		struct bpf_program *refused = NULL;
		unsigned next = 0;

		err = open_tier(s, opts, tier);
		if (err >= 0) {
			struct bpf_program *p;

			bpf_object__for_each_program(p, s->skel->obj) /* in the object's order */
				(void)report_program(r, bpf_program__name(p));
			set_logs(s->skel, logs);
			hold_libbpf();
			err = perfd_bpf__load(s->skel);
			if (err < 0)
				refused = refused_program(s->skel, logs, reason, sizeof(reason));
			release_libbpf(refused && tier_next(tier, r->asked & r->supported,
							    bpf_program__name(refused), &next) == 0);
		}
		if (err >= 0)
			break;
		if (!refused || tier_next(tier, r->asked & r->supported, bpf_program__name(refused), &next) < 0) {
			/* not the verifier's doing, the bottom, or a program every tier needs */
			report_failure(r, err, refused ? bpf_program__name(refused) : NULL, reason);
			if (refused)
				record_refusal(r, bpf_program__name(refused), tier, tier, reason);
			if (s->skel)
				report_programs(s->skel, r);
			return err;
		}
		record_refusal(r, bpf_program__name(refused), tier, next, reason);
		perfd_bpf__destroy(s->skel);
		s->skel = NULL;
		tier = next;
	}
	s->tier = r->tier = tier;
	r->loaded = true;
	report_programs(s->skel, r);
	return 0;
}

int sampler_load(const struct sampler_opts *opts, struct sampler **ret, struct sampler_load_report *ret_report)
{
	struct sampler_load_report *r = ret_report;
	struct sampler *s;
	int err;

	memset(r, 0, sizeof(*r));
	if (opts->frequency_hz == 0) {
		snprintf(r->error, sizeof(r->error), "%s", strerror(EINVAL));
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(r->error, sizeof(r->error), "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	s->fixed_asked = opts->fixed_period;
	s->periods = plan_periods(opts->frequency_hz, s->fixed_asked);
	s->memory_sample_bytes = opts->memory_sample_bytes;
	s->offcpu_rate = opts->offcpu_rate;
	s->ringbuf_bytes = opts->ringbuf_bytes ? opts->ringbuf_bytes :
			   sampler_default_ringbuf_bytes(opts->frequency_hz, (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
	err = libbpf_num_possible_cpus();
	if (err < 0) {
		snprintf(r->error, sizeof(r->error), "cannot count the possible CPUs: %s", strerror(-err));
		sampler_free(s);
		return err;
	}
	s->n_cpus_possible = err;
	probe_features(opts, r);
	err = load_tiers(s, opts, r);
	if (err < 0) {
		sampler_free(s);
		return err;
	}
	s->report = *r;
	*ret = s;
	return 0;
}

int sampler_start(struct sampler *s, const struct sampler_opts *opts, const char **ret_what)
{
	const char *what = "attach to the tracepoints (process exit/exec, memory, context switches)";
	int r;

	if (!opts->on_record)
		return -EINVAL;
	r = perfd_bpf__attach(s->skel);
	if (r >= 0)
		r = attach_cpus(s, &what);
	if (r >= 0) {
		what = "create the ring buffer reader";
		s->ring = ring_buffer__new(bpf_map__fd(s->skel->maps.events), opts->on_record, opts->ctx, NULL);
		if (!s->ring)
			r = negative_errno();
	}
	if (r < 0 && ret_what)
		*ret_what = what;
	return r;
}

int sampler_new(const struct sampler_opts *opts, struct sampler **ret, const char **ret_what)
{
	struct sampler_load_report report;
	struct sampler *s = NULL;
	int r;

	if (!opts->on_record)
		return -EINVAL;
	r = sampler_load(opts, &s, &report);
	if (r < 0) {
		if (ret_what)
			*ret_what = "load the BPF programs";
		return r;
	}
	r = sampler_start(s, opts, ret_what);
	if (r < 0) {
		sampler_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

const struct sampler_load_report *sampler_load_report(const struct sampler *s)
{
	return &s->report;
}

bool sampler_switch_aware(const struct sampler *s)
{
	return s->tier & TIER_SWITCHES;
}

uint64_t sampler_memory_sample_bytes(const struct sampler *s)
{
	return s->tier & TIER_MEMORY ? s->memory_sample_bytes : 0;
}

uint64_t sampler_offcpu_rate(const struct sampler *s)
{
	return s->tier & TIER_OFFCPU ? s->offcpu_rate : 0;
}

int sampler_fd(const struct sampler *s)
{
	return ring_buffer__epoll_fd(s->ring);
}

int sampler_drain(struct sampler *s)
{
	return ring_buffer__consume(s->ring);
}

/* Adds the tick counters the CPUs' states keep (ticks that sampled
 * nothing, ticks that read the clock), summed over the CPUs, to ret. */
static int add_tick_counters(const struct sampler *s, uint64_t ret[PERFD_CNT_MAX])
{
	_cleanup_free_ struct perfd_cpu_state *states = calloc(s->n_cpus_possible, sizeof(*states));
	uint32_t zero = 0;

	if (!states)
		return -ENOMEM;
	if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.cpu_states), &zero, states) < 0)
		return negative_errno();
	for (unsigned c = 0; c < s->n_cpus_possible; c++) {
		ret[PERFD_CNT_THINNED] += states[c].thinned;
		ret[PERFD_CNT_TICKS_CLOCKED] += states[c].clocked;
	}
	return 0;
}

/* Every counter from the counters map, wherever it sits in the enum, then
 * the ones the map does not hold (their slots there stay zero). */
int sampler_read_counters(const struct sampler *s, uint64_t ret[PERFD_CNT_MAX])
{
	_cleanup_free_ uint64_t *values = calloc(s->n_cpus_possible, sizeof(uint64_t));
	int fd = bpf_map__fd(s->skel->maps.counters);

	if (!values)
		return -ENOMEM;
	for (uint32_t key = 0; key < PERFD_CNT_MAX; key++) {
		if (bpf_map_lookup_elem(fd, &key, values) < 0)
			return negative_errno();
		ret[key] = 0;
		for (unsigned c = 0; c < s->n_cpus_possible; c++)
			ret[key] += values[c];
	}
	return add_tick_counters(s, ret);
}

unsigned sampler_cpus(const struct sampler *s)
{
	return s->n_attached;
}

bool sampler_has_unwind_tables(const struct sampler *s)
{
	return s->tier & TIER_TABLES;
}

void sampler_unwind_map_fds(const struct sampler *s, int *ret_rows, int *ret_mappings,
			    int *ret_processes)
{
	*ret_rows = bpf_map__fd(s->skel->maps.unwind_rows);
	*ret_mappings = bpf_map__fd(s->skel->maps.unwind_mappings);
	*ret_processes = bpf_map__fd(s->skel->maps.unwind_processes);
}

int sampler_python_map_fd(const struct sampler *s)
{
	return s->tier & TIER_PYTHON ? bpf_map__fd(s->skel->maps.python_processes) : -ENOTSUP;
}

int sampler_follow(struct sampler *s, uint32_t pid)
{
	uint64_t any = 0;

	return bpf_map_update_elem(bpf_map__fd(s->skel->maps.followed), &pid, &any, BPF_ANY) < 0 ?
		       negative_errno() : 0;
}

void sampler_unfollow(struct sampler *s, uint32_t pid)
{
	(void)bpf_map_delete_elem(bpf_map__fd(s->skel->maps.followed), &pid);
}

/* Sets the timer's period of every CPU's event (the kernel restarts its
 * hrtimer with it); on failure puts back the old one on those already
 * changed. */
static int set_timer_periods(struct sampler *s, uint64_t period_ns, uint64_t old_ns)
{
	for (unsigned cpu = 0; cpu < s->n_cpus_possible; cpu++) {
		if (s->event_fds[cpu] < 0 || ioctl(s->event_fds[cpu], PERF_EVENT_IOC_PERIOD, &period_ns) == 0)
			continue;
		int r = negative_errno();

		while (cpu-- > 0)
			if (s->event_fds[cpu] >= 0)
				(void)ioctl(s->event_fds[cpu], PERF_EVENT_IOC_PERIOD, &old_ns);
		return r;
	}
	return 0;
}

int sampler_set_frequency(struct sampler *s, unsigned frequency_hz)
{
	struct periods p;
	int r;

	if (frequency_hz == 0)
		return -EINVAL;
	p = plan_periods(frequency_hz, s->fixed_asked);
	r = set_timer_periods(s, p.timer_period_ns, s->periods.timer_period_ns);
	if (r < 0)
		return r;
	set_periods(s, p);
	return 0;
}

uint64_t sampler_period_ns(const struct sampler *s)
{
	return s->periods.period_ns;
}

uint64_t sampler_timer_period_ns(const struct sampler *s)
{
	return s->periods.timer_period_ns;
}

bool sampler_fixed_period(const struct sampler *s)
{
	return s->periods.fixed;
}
