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
 * timer is measured in docs/PERFORMANCE.md ("Jittered sampling").
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
	bool unwind_tables;
	bool switch_aware; /* ticks due before a switch go to the task switched out */
	uint64_t memory_sample_bytes; /* 0: memory profiling off */
	size_t ringbuf_bytes;
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
 * only together with the stack window: docs/PERFORMANCE.md, "Kernel cost
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
			s->unwind_tables ? s->skel->progs.on_cpu_clock : s->skel->progs.on_cpu_clock_fp, r);
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

/* The size of a map only the table-unwinding program reads. */
static uint32_t table_map_size(const struct sampler *s, uint32_t wanted)
{
	return s->unwind_tables ? MAX(wanted, 1u) : 1u;
}

int sampler_new(const struct sampler_opts *opts, struct sampler **ret,
		const char **ret_what)
{
	struct sampler *s = NULL;
	const char *what = "allocate";
	int r;

	if (opts->frequency_hz == 0 || !opts->on_record)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		goto fail_nomem;
	s->fixed_asked = opts->fixed_period;
	s->periods = plan_periods(opts->frequency_hz, s->fixed_asked);

	what = "count the possible CPUs";
	r = libbpf_num_possible_cpus();
	if (r < 0)
		goto fail;
	s->n_cpus_possible = r;

	what = "open the BPF object";
	s->skel = perfd_bpf__open();
	if (!s->skel) {
		r = negative_errno();
		goto fail;
	}
	s->ringbuf_bytes = opts->ringbuf_bytes ? opts->ringbuf_bytes :
			   sampler_default_ringbuf_bytes(opts->frequency_hz, (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
	s->skel->rodata->ringbuf_wakeup_bytes = s->ringbuf_bytes / 4;
	s->skel->rodata->page_size = sysconf(_SC_PAGESIZE);
	set_periods(s, s->periods);
	what = "size the ring buffer";
	r = bpf_map__set_max_entries(s->skel->maps.events, s->ringbuf_bytes);
	if (r < 0)
		goto fail;

	/* Table unwinding needs bpf_loop() (5.17), bpf_task_pt_regs() (5.15)
	 * and bpf_get_current_task_btf() (5.11): probe for them rather than
	 * trust a kernel version. */
	s->unwind_tables = opts->unwind_rows > 0 &&
			   libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) > 0 &&
			   libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL) > 0 &&
			   libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_get_current_task_btf, NULL) > 0;
	bpf_program__set_autoload(s->skel->progs.on_cpu_clock, s->unwind_tables);
	bpf_program__set_autoload(s->skel->progs.on_cpu_clock_fp, !s->unwind_tables);
	/* Memory growth: the rss_stat tracepoint (a raw one, with BTF: 5.5+),
	 * its stacks walked as the cpu-clock program walks them. */
	s->memory_sample_bytes = opts->memory_sample_bytes;
	if (s->memory_sample_bytes && !btf_type_exists("btf_trace_rss_stat"))
		s->memory_sample_bytes = 0;
	bpf_program__set_autoload(s->skel->progs.on_rss_stat, s->memory_sample_bytes > 0);
	/* Whose tick it is at a context switch (bpf/perfd.bpf.c): both
	 * tracepoints, with BTF (5.5+), and the perf hrtimer's function,
	 * which tells its expiry from the others' (a __weak __ksym: without
	 * it no expiry is ever noted, and both programs would run for
	 * nothing), or none of it. */
	s->switch_aware = btf_type_exists("btf_trace_sched_switch") &&
			  btf_type_exists("btf_trace_hrtimer_expire_entry") &&
			  kallsyms_has(opts->kallsyms_path ? opts->kallsyms_path : "/proc/kallsyms",
				       "perf_swevent_hrtimer");
	bpf_program__set_autoload(s->skel->progs.on_sched_switch, s->switch_aware);
	bpf_program__set_autoload(s->skel->progs.on_hrtimer_expire, s->switch_aware);
	s->skel->rodata->memory_sample_bytes = s->memory_sample_bytes ? s->memory_sample_bytes : 1;
	s->skel->rodata->with_tables = s->unwind_tables;
	s->skel->rodata->with_python = s->unwind_tables;
	/* Array maps take all their memory at creation: without the program
	 * that reads them they stay at one entry. */
	what = "size the unwind maps";
	if ((r = bpf_map__set_max_entries(s->skel->maps.unwind_rows, table_map_size(s, opts->unwind_rows))) < 0 ||
	    (r = bpf_map__set_max_entries(s->skel->maps.unwind_mappings, table_map_size(s, opts->unwind_mappings))) < 0 ||
	    (r = bpf_map__set_max_entries(s->skel->maps.unwind_processes, table_map_size(s, opts->unwind_processes))) < 0 ||
	    (r = bpf_map__set_max_entries(s->skel->maps.python_processes, table_map_size(s, opts->python_processes))) < 0)
		goto fail;

	what = "load the BPF programs (is this root, with BTF?)";
	r = perfd_bpf__load(s->skel);
	if (r < 0)
		goto fail;

	what = "attach to the tracepoints (process exit/exec, memory, context switches)";
	r = perfd_bpf__attach(s->skel);
	if (r < 0)
		goto fail;

	r = attach_cpus(s, &what);
	if (r < 0)
		goto fail;

	what = "create the ring buffer reader";
	s->ring = ring_buffer__new(bpf_map__fd(s->skel->maps.events),
				   opts->on_record, opts->ctx, NULL);
	if (!s->ring) {
		r = negative_errno();
		goto fail;
	}
	*ret = s;
	return 0;

fail_nomem:
	r = -ENOMEM;
fail:
	sampler_free(s);
	if (ret_what)
		*ret_what = what;
	return r;
}

bool sampler_switch_aware(const struct sampler *s)
{
	return s->switch_aware;
}

uint64_t sampler_memory_sample_bytes(const struct sampler *s)
{
	return s->memory_sample_bytes;
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
	return s->unwind_tables;
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
	return s->unwind_tables ? bpf_map__fd(s->skel->maps.python_processes) : -ENOTSUP;
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
