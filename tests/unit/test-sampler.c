/* SPDX-License-Identifier: MIT */
/*
 * test-sampler.c - unit tests for daemon/collect/sampler.c: the BPF object
 * is loaded and attached for real (root, as for the daemon), and the
 * descriptors it opens are accounted for.
 *
 * Each online CPU gets one perf event, owned from attachment on by its BPF
 * link (libbpf closes the event when the link is destroyed).  To catch a
 * descriptor closed twice, which would close whatever the number had been
 * given to meanwhile, this program interposes close(): the definition
 * below is the one libbpf and the daemon's modules call, and it counts the
 * calls made on a descriptor that was not open.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "collect/sampler.h"

static int closes_of_closed;

int close(int fd)
{
	long r = syscall(SYS_close, fd);

	if (r < 0 && errno == EBADF)
		closes_of_closed++;
	return (int)r;
}

static int on_record(void *ctx, void *data, size_t size)
{
	return 0;
}

/* The CPU samples of this process, as drained. */
#define MAX_STAMPS 8192
struct stamps {
	uint64_t ns[MAX_STAMPS];
	uint32_t cpu[MAX_STAMPS];
	unsigned n;
};

static int collect_stamps(void *ctx, void *data, size_t size)
{
	const struct perfd_sample *s = data;
	struct stamps *st = ctx;

	if (size < sizeof(*s) || s->hdr.kind != PERFD_EVENT_SAMPLE ||
	    s->value_kind != PERFD_VALUE_CPU || s->hdr.tgid != (uint32_t)getpid() ||
	    st->n == MAX_STAMPS)
		return 0;
	st->ns[st->n] = s->hdr.timestamp_ns;
	st->cpu[st->n] = s->hdr.cpu;
	st->n++;
	return 0;
}

static double thread_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void burn_cpu(double seconds)
{
	double until = thread_cpu_seconds() + seconds;
	volatile uint64_t x = 1;

	while (thread_cpu_seconds() < until)
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005ull + 1;
}

/* How many descriptors of this process are perf events. */
static unsigned perf_event_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	unsigned n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d))) {
		char path[PATH_MAX], target[256];
		ssize_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = '\0';
		n += strcmp(target, "anon_inode:[perf_event]") == 0;
	}
	(void)closedir(d);
	return n;
}

static void check_descriptors(uint32_t unwind_rows)
{
	struct sampler_opts o = {
		.frequency_hz = 49,
		.ringbuf_bytes = 256 * 1024,
		.unwind_rows = unwind_rows,
		.unwind_mappings = unwind_rows ? 64 : 0,
		.unwind_processes = unwind_rows ? 64 : 0,
		.python_processes = unwind_rows ? 64 : 0,
		.on_record = on_record,
	};
	unsigned before = perf_event_fds();
	struct sampler *s = NULL;
	const char *what = NULL;
	int r;

	r = sampler_new(&o, &s, &what);
	cr_assert_eq(r, 0, "sampler_new: %s: %s (this suite needs root and BPF)", what,
		     strerror(-r));
	cr_assert_gt(sampler_cpus(s), 0);
	/* each CPU's event: the link's, and the copy that sets its period */
	cr_assert_eq(perf_event_fds(), before + 2 * sampler_cpus(s));
	/* a reload's new frequency, on those copies */
	cr_assert_eq(sampler_set_frequency(s, 0), -EINVAL);
	cr_assert_eq(sampler_period_ns(s), 1000000000 / 49);
	cr_assert_eq(sampler_set_frequency(s, 499), 0);
	cr_assert_eq(sampler_period_ns(s), 1000000000 / 499);
	cr_assert_lt(sampler_timer_period_ns(s), sampler_period_ns(s));
	cr_assert_not(sampler_fixed_period(s));

	closes_of_closed = 0;
	sampler_free(s);
	cr_assert_eq(closes_of_closed, 0, "%d descriptors closed twice", closes_of_closed);
	cr_assert_eq(perf_event_fds(), before);
}

Test(sampler, frame_pointer_program_closes_each_descriptor_once, .timeout = 60)
{
	check_descriptors(0);
}

Test(sampler, table_program_closes_each_descriptor_once, .timeout = 60)
{
	check_descriptors(1024);
}

/* A tick's sample is stamped with its timer's expiry, not with a clock read
 * later in the program: the perf hrtimer of a CPU is forwarded by whole
 * periods, so consecutive samples on one CPU lie a whole number of timer
 * periods apart (a later reading would put them anywhere).  Jittered, at
 * 999 Hz, the test burning 0.6 s of CPU: about 600 samples.  And the
 * ticks take the expiry the hrtimer program noted without reading the
 * clock themselves, but for each timer's first (bpf/perfd.bpf.c, "Whose
 * tick it is"): a tick that read it would also stamp on the grid. */
Test(sampler, tick_samples_are_stamped_with_the_expiry, .timeout = 60)
{
	static struct stamps st;
	struct sampler_opts o = {
		.frequency_hz = 999,
		.ringbuf_bytes = 4 << 20,
		.on_record = collect_stamps,
		.ctx = &st,
	};
	struct sampler *s = NULL;
	const char *what = NULL;
	unsigned pairs = 0, on_grid = 0;
	uint64_t period, ticks, counters[PERFD_CNT_MAX];
	int r;

	r = sampler_new(&o, &s, &what);
	cr_assert_eq(r, 0, "sampler_new: %s: %s", what, strerror(-r));
	if (!sampler_switch_aware(s)) {
		sampler_free(s);
		cr_skip_test("no hrtimer expiry on this kernel: ticks are stamped when they run");
	}
	period = sampler_timer_period_ns(s);
	burn_cpu(0.6);
	cr_assert_geq(sampler_drain(s), 0);
	r = sampler_read_counters(s, counters);
	sampler_free(s);
	cr_assert_eq(r, 0, "sampler_read_counters: %s", strerror(-r));
	ticks = counters[PERFD_CNT_SAMPLES] + counters[PERFD_CNT_THINNED];
	cr_assert_geq(ticks, 500, "%lu ticks", (unsigned long)ticks);
	/* each CPU's first tick (measured: those alone in 200k ticks) */
	cr_assert_leq(counters[PERFD_CNT_TICKS_CLOCKED] * 100, ticks, "%lu of %lu ticks read the clock",
		      (unsigned long)counters[PERFD_CNT_TICKS_CLOCKED], (unsigned long)ticks);

	for (unsigned i = 0; i < st.n; i++) {
		/* the previous sample on the same CPU */
		for (unsigned j = i; j-- > 0;) {
			if (st.cpu[j] != st.cpu[i])
				continue;
			pairs++;
			on_grid += st.ns[i] > st.ns[j] && (st.ns[i] - st.ns[j]) % period == 0;
			break;
		}
	}
	cr_assert_geq(pairs, 100, "%u samples, %u pairs on one CPU", st.n, pairs);
	/* a restarted timer (throttling) starts a new grid: a few may be off */
	cr_assert_geq(on_grid * 10, pairs * 9, "%u of %u pairs a whole number of %lu ns apart",
		      on_grid, pairs, (unsigned long)period);
}

/* Every counter of enum perfd_counter is read, wherever it sits (one added
 * after PERFD_CNT_THINNED, which the counters map does not hold, too), and
 * the ticks that sampled nothing are counted from the CPUs' states. */
Test(sampler, every_counter_is_read, .timeout = 60)
{
	struct sampler_opts o = {
		.frequency_hz = 999,
		.ringbuf_bytes = 1 << 20,
		.on_record = on_record,
	};
	const uint64_t unset = UINT64_MAX;
	uint64_t counters[PERFD_CNT_MAX];
	struct sampler *s = NULL;
	const char *what = NULL;
	int r;

	r = sampler_new(&o, &s, &what);
	cr_assert_eq(r, 0, "sampler_new: %s: %s", what, strerror(-r));
	cr_assert_not(sampler_fixed_period(s));
	burn_cpu(0.2);
	for (unsigned k = 0; k < PERFD_CNT_MAX; k++)
		counters[k] = unset;
	r = sampler_read_counters(s, counters);
	sampler_free(s);
	cr_assert_eq(r, 0, "sampler_read_counters: %s", strerror(-r));
	for (unsigned k = 0; k < PERFD_CNT_MAX; k++)
		cr_assert_neq(counters[k], unset, "counter %u not read", k);
	/* 0.2 s of this process alone at 999 Hz: ~200 samples, and ~4.4
	 * ticks per sample, most of them thinned */
	cr_assert_gt(counters[PERFD_CNT_SAMPLES], 50);
	cr_assert_gt(counters[PERFD_CNT_THINNED], counters[PERFD_CNT_SAMPLES]);
}

/* A sampler whose kallsyms is text (a file in the /proc/kallsyms format):
 * whether it charges ticks due before a switch to the task switched out. */
static bool switch_aware_with_kallsyms(const char *text)
{
	char path[] = "/tmp/perfd-kallsyms.XXXXXX";
	int fd = mkstemp(path);
	struct sampler_opts o = {
		.frequency_hz = 49,
		.ringbuf_bytes = 256 * 1024,
		.on_record = on_record,
		.kallsyms_path = path,
	};
	struct sampler *s = NULL;
	const char *what = NULL;
	bool aware;
	int r;

	cr_assert_geq(fd, 0, "mkstemp: %s", strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	r = sampler_new(&o, &s, &what);
	unlink(path);
	cr_assert_eq(r, 0, "sampler_new: %s: %s", what, strerror(-r));
	aware = sampler_switch_aware(s);
	sampler_free(s);
	return aware;
}

/* The hrtimer program tells the perf hrtimer by its function, a __weak
 * __ksym: where it does not resolve (absent, or its address hidden) no
 * expiry is ever noted, and switch-awareness is off rather than two
 * programs running on every switch and hrtimer for nothing. */
Test(sampler, switch_awareness_needs_the_perf_hrtimer_symbol, .timeout = 60)
{
	static const char without[] = "ffffffff81000000 T _stext\n"
				      "ffffffff81591670 t perf_swevent_hrtimer_x\n"
				      "ffffffff81591680 t x_perf_swevent_hrtimer\n";
	static const char hidden[] = "0000000000000000 T _stext\n"
				     "0000000000000000 t perf_swevent_hrtimer\n";
	static const char with[] = "ffffffff81000000 T _stext\n"
				   "ffffffff81591670 t perf_swevent_hrtimer\n"
				   "ffffffffc0000000 t other\t[mod]";

	if (!switch_aware_with_kallsyms(with))
		cr_skip_test("no sched_switch or hrtimer_expire_entry tracepoint with BTF");
	cr_assert_not(switch_aware_with_kallsyms(without));
	cr_assert_not(switch_aware_with_kallsyms(hidden));
}
