/* SPDX-License-Identifier: MIT */
/*
 * kinds.h - the kinds of value perfd profiles, one row each.  Every table
 * and switch that knows the kinds is generated from these rows or asks the
 * table made from them (daemon/base/kindtab.h): the BPF ABI's
 * enum perfd_value_kind, the daemon's enum profile_kind, the protocol's
 * names and units, pprof's and speedscope's types, the CLI's readers and
 * the usage texts.  Adding a kind is one row here, its producer (BPF, or
 * the daemon) and its tests.  Pure macros: BPF C includes it (sample.h).
 *
 * The columns of X(ID, value, name, unit, title, kernel, period, counts,
 * kskip, pprof_type, pprof_unit):
 *   ID          PERFD_VALUE_ID, PROFILE_KIND_ID
 *   value       the kind's number: struct perfd_sample's value_kind (what
 *               BPF writes), the kind bits of a profile key, a state file's
 *               kind.  Row i has value i; rows are appended, never moved.
 *   name, unit  as the protocol, the formats and perfctl say them; unit is
 *               the stored value's
 *   title       a flame graph's heading
 *   kernel      1: kernel frames are shown; 0: left out (memory growth is
 *               user code's; its kernel path is the fault handler's)
 *   period      what one stored value stands for: PERIODS (a count of
 *               sampling periods: times period_ns it is time), BYTES (one
 *               sample is the mean sample bytes; the value is bytes
 *               already), NONE (the value is all there is)
 *   counts      the aggregator's counters a sample adds to: CPU (samples,
 *               rates, a process's CPU), MEMORY (memory samples and
 *               bytes), WAIT (off-CPU blocks and nanoseconds), TIME
 *               (nothing of its own: a profile of it is the sum of the
 *               kinds that are time, CPU periods times the period and
 *               WAIT's nanoseconds, made at the query: wall clock, a
 *               thread's whole time; its samples are refused), NONE
 *               (nothing produces the kind yet: its samples are refused,
 *               and top does not offer it)
 *   kskip       leaf kernel frames the producer leaves that are its own,
 *               dropped at ingest: a memory sample's two are the BPF
 *               program and bpf_trace_run2(), an off-CPU one's three
 *               the program, bpf_trace_run4() and
 *               __traceiter_sched_switch() (bpf_get_stack()'s skip count
 *               does not reach them from a raw tracepoint, and a loop
 *               moving the frames makes the program too big to verify)
 *   pprof_type, pprof_unit  the type of its weighted value (the stored
 *               value, times the period for a PERIODS kind): pprof's and
 *               OTLP's value and period type (a PERIODS kind lists the count
 *               of samples before it), speedscope's unit of weights
 */
#ifndef PERFD_KINDS_H
#define PERFD_KINDS_H

#include "perfd/pp.h"

/* clang-format off */
#define PERFD_KINDS(X) \
	X(CPU,    0, "cpu",    "samples",     "CPU",           1, PERIODS, CPU,    0, "cpu",     "nanoseconds") \
	X(MEMORY, 1, "memory", "bytes",       "Memory growth", 0, BYTES,   MEMORY, 2, "space",   "bytes") \
	X(OFFCPU, 2, "offcpu", "nanoseconds", "Off-CPU",       1, NONE,    WAIT,   3, "off_cpu", "nanoseconds") \
	X(WALL,   3, "wall",   "nanoseconds", "Wall clock",    1, NONE,    TIME,   0, "wall",    "nanoseconds")
/* clang-format on */

/* What a sample's value counts (the daemon's enum profile_kind has the
 * same numbers): for CPU, value mean periods: 1, or up to
 * PERFD_CPU_VALUE_MAX for a jittered tick that passed several targets
 * (bpf/perfd.bpf.c); for MEMORY, bytes of resident memory growth. */
#define PERFD_KIND_VALUE_ROW_(id, value, ...) PERFD_VALUE_##id = value,
enum perfd_value_kind {
	PERFD_KINDS(PERFD_KIND_VALUE_ROW_)
	PERFD_VALUE_KINDS, /* rows are dense: one more than the last value */
};

enum perfd_kind_period {
	PERFD_KIND_PERIOD_NONE,
	PERFD_KIND_PERIOD_PERIODS,
	PERFD_KIND_PERIOD_BYTES,
};

enum perfd_kind_counts {
	PERFD_KIND_COUNTS_NONE,
	PERFD_KIND_COUNTS_CPU,
	PERFD_KIND_COUNTS_MEMORY,
	PERFD_KIND_COUNTS_WAIT,
	PERFD_KIND_COUNTS_TIME,
};

/* The kinds' names as one string literal, in row order, sep between them
 * and last before the last: PERFD_KIND_NAMES("|", "|") is
 * "cpu|memory|offcpu|wall", PERFD_KIND_NAMES(", ", " or ") "cpu, memory, offcpu or wall". */
#define PERFD_KIND_NAME_ARG_(id, value, name, ...) , name
#define PERFD_KIND_NAMES(sep, last) PERFD_PP_CALL(PERFD_PP_JOIN, sep, last PERFD_KINDS(PERFD_KIND_NAME_ARG_))

#endif
