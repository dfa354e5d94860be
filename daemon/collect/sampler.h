/* SPDX-License-Identifier: MIT */
/*
 * sampler.h - loads bpf/perfd.bpf.c, attaches it to a cpu-clock perf event
 * on every online CPU and to the process exit/exec tracepoints, and hands
 * each ring-buffer record to a callback when drained.
 */
#ifndef PERFD_SAMPLER_H
#define PERFD_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/tiers.h"
#include "perfd/sample.h"

struct sampler_opts {
	unsigned frequency_hz;
	/* Every tick of a timer at 1/frequency samples, instead of one tick
	 * at a random instant of each period (bpf/perfd.bpf.c). */
	bool fixed_period;
	size_t ringbuf_bytes; /* power of two, >= page size; 0: the default */
	/* Capacities of the unwind maps; rows 0 turns table unwinding off. */
	uint32_t unwind_rows, unwind_mappings, unwind_processes;
	/* Capacity of the map of CPython processes; 0 turns Python frames off. */
	uint32_t python_processes;
	/* Mean bytes of resident-memory growth between two memory samples;
	 * 0 turns memory profiling off. */
	uint64_t memory_sample_bytes;
	/* Off-CPU stacks each CPU takes a second, about (bpf/offcpu.bpf.h);
	 * 0 turns off-CPU time off. */
	uint64_t offcpu_rate;
	/* Where the kernel's symbols are read (NULL: /proc/kallsyms), to tell
	 * whether the perf hrtimer's function can be told apart. */
	const char *kallsyms_path;
	/* Test-only: PERFD_REFUSE_* bits (perfd/tiers.h), the features whose
	 * programs the verifier is made to refuse (perfd --test-refuse). */
	uint32_t test_refuse;
	/* Called for every record; the record is valid only during the call. */
	int (*on_record)(void *ctx, void *data, size_t size);
	void *ctx;
};

struct sampler;

/* Opens and loads the BPF programs, in the best tier the kernel's verifier
 * accepts (collect/tiers.h), without attaching anything.  Returns 0 or
 * -errno; either way *ret_report describes the load: the tier, what was
 * lost and why, every program (on failure, error says why no tier
 * loaded). */
int sampler_load(const struct sampler_opts *opts, struct sampler **ret,
		 struct sampler_load_report *ret_report);
/* Attaches a loaded sampler: the tracepoints, a cpu-clock event on every
 * online CPU, the ring buffer's reader (opts->on_record, which must be
 * set).  Returns 0 or -errno with *ret_what (may be NULL) naming the step
 * that failed; the caller then frees s. */
int sampler_start(struct sampler *s, const struct sampler_opts *opts, const char **ret_what);
/* Both: opens, loads and attaches everything.  Returns 0 or -errno; on
 * failure nothing stays attached.  *ret_what (may be NULL) names the step
 * that failed, for the caller's message. */
int sampler_new(const struct sampler_opts *opts, struct sampler **ret,
		const char **ret_what);
/* The description of the load (valid as long as s). */
const struct sampler_load_report *sampler_load_report(const struct sampler *s);
struct sampler *sampler_free(struct sampler *s);

/* The default ring buffer size for a frequency and a count of CPUs: a
 * power of two from 1 to 64 MiB. */
size_t sampler_default_ringbuf_bytes(unsigned frequency_hz, unsigned cpus);
size_t sampler_ringbuf_bytes(const struct sampler *s);

/* The fd to poll for "records are waiting" (the ring buffer's epoll fd). */
int sampler_fd(const struct sampler *s);
/* Hands every waiting record to on_record.  Returns the count or -errno. */
int sampler_drain(struct sampler *s);
/* Sums the per-CPU counters of the BPF side, indexed by enum perfd_counter. */
int sampler_read_counters(const struct sampler *s, uint64_t ret[PERFD_CNT_MAX]);
unsigned sampler_cpus(const struct sampler *s);
/* Whether user stacks are unwound with tables (the loaded tier has them),
 * and the fds of the maps that hold them. */
bool sampler_has_unwind_tables(const struct sampler *s);
void sampler_unwind_map_fds(const struct sampler *s, int *ret_rows, int *ret_mappings,
			    int *ret_processes);
/* The mean period a CPU sample stands for (samples x this estimates CPU
 * time), the period of the timer behind it (the same with a fixed period)
 * and whether the period is fixed. */
uint64_t sampler_period_ns(const struct sampler *s);
/* Samples at frequency_hz from now on (a reload): the timers' periods and
 * the BPF program's block length; --fixed-period as at start.  The ring
 * buffer keeps its size.  Samples already taken keep the period they were
 * taken at: the caller drains them first and rescales what it holds.
 * Returns 0, or -errno with the old frequency still running. */
int sampler_set_frequency(struct sampler *s, unsigned frequency_hz);
uint64_t sampler_timer_period_ns(const struct sampler *s);
bool sampler_fixed_period(const struct sampler *s);
/* Whether a tick that fell due before a context switch is charged to the
 * task switched out (bpf/perfd.bpf.c, "Whose tick it is"); false on a
 * kernel without the sched_switch and hrtimer_expire_entry tracepoints
 * with BTF, or whose kallsyms has no perf_swevent_hrtimer with an
 * address, or whose verifier refused their programs, where it goes to the
 * task switched in. */
bool sampler_switch_aware(const struct sampler *s);
/* The mean bytes a memory sample stands for; 0 when memory profiling is
 * off (asked, the kernel has no rss_stat tracepoint with BTF, or its
 * verifier refused on_rss_stat). */
uint64_t sampler_memory_sample_bytes(const struct sampler *s);
/* Off-CPU stacks each CPU takes a second, about; 0 when the loaded tier
 * records no off-CPU time. */
uint64_t sampler_offcpu_rate(const struct sampler *s);
/* The fd of the python_processes map, -ENOTSUP when the loaded tier does
 * not walk Python frames (not asked for, not supported, or refused). */
int sampler_python_map_fd(const struct sampler *s);

/* Follows pid's forks and execs from now on (bpf/perfd.bpf.c's
 * `followed`: a fork record for each new process it or its descendants
 * start, an exec record for each exec, with a wake-up), whichever
 * incarnation of pid it is.  Returns 0 or -errno (-E2BIG: the map is
 * full). */
int sampler_follow(struct sampler *s, uint32_t pid);
/* Follows pid no more (its descendants stay followed until they exit). */
void sampler_unfollow(struct sampler *s, uint32_t pid);

/* The highest sampling frequency the kernel allows
 * (/proc/sys/kernel/perf_event_max_sample_rate), or -errno. */
long sampler_max_frequency(void);

#endif
