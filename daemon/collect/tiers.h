/* SPDX-License-Identifier: MIT */
/*
 * tiers.h - what a load of the BPF programs can do, the ladder the loader
 * goes down when the kernel's verifier refuses a program, and the
 * description of the load that `status`, the log and `perfd --check` show.
 *
 * A tier is a set of features.  Two of them decide how the tick program
 * walks user stacks (tables, python: on_cpu_clock with with_tables and
 * with_python set to match, or on_cpu_clock_fp, the kernel's frame-pointer
 * walk alone, when neither is on); the others each add programs
 * (memory: on_rss_stat; context-switches: on_sched_switch and
 * on_hrtimer_expire; offcpu: on_switch_offcpu).  When a program is refused the loader drops what
 * that program does and nothing else: a refused on_rss_stat costs memory
 * growth (a refused on_switch_offcpu, off-CPU time) and keeps the unwinding tier, a refused tick program goes one
 * step down the unwinding ladder (tables + Python, tables, frame pointers
 * + Python, frame pointers) and keeps memory.  The cost is one more load of
 * the whole object per step: libbpf cannot load a program again once the
 * object's load failed.
 *
 * Pure: no libbpf, so the ladder and the reading of the verifier's log
 * are unit-tested (tests/unit/test-tiers.c); sampler.c does the loading.
 */
#ifndef PERFD_COLLECT_TIERS_H
#define PERFD_COLLECT_TIERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tier_feature {
	TIER_TABLES = 1 << 0,   /* user stacks walked with the daemon's unwind tables */
	TIER_PYTHON = 1 << 1,   /* Python frames */
	TIER_MEMORY = 1 << 2,   /* memory growth (on_rss_stat) */
	TIER_SWITCHES = 1 << 3, /* a tick due before a context switch goes to the task switched out */
	TIER_OFFCPU = 1 << 4,   /* off-CPU time by stack (on_switch_offcpu) */
};
#define TIER_N_FEATURES 5
#define TIER_UNWINDING (TIER_TABLES | TIER_PYTHON)
#define TIER_ALL (TIER_TABLES | TIER_PYTHON | TIER_MEMORY | TIER_SWITCHES | TIER_OFFCPU)

/* Each feature's bit, in the order they are shown. */
extern const unsigned tier_features[TIER_N_FEATURES];

/* "tables", "python", "memory", "context-switches", "offcpu". */
const char *tier_feature_name(unsigned feature);
/* What running without feature means to a user, e.g. "Python processes
 * show their native frames only". */
const char *tier_feature_loss(unsigned feature);

/* The tier's name: its stack walk ("tables", or "frame-pointers" when the
 * tier has no tables) and its other features but context switches, joined
 * by '+': "tables+python+memory", "frame-pointers+python".  Returns buf. */
char *tier_name(unsigned tier, char *buf, size_t len);
#define TIER_NAME_MAX 48

/* Whether a load of tier loads the program called name (every program not
 * named here is always loaded), and the features that need it (0: none,
 * it is loaded in every tier). */
bool tier_uses_program(unsigned tier, const char *name);
unsigned tier_program_features(const char *name);

/* The tier to try after program failed was refused in a load of tier:
 * tier without the failed program's feature (memory, context switches),
 * or, for the tick program, the next step down the unwinding ladder whose
 * features are all in allowed, with the other features kept.  Returns 0
 * and the tier in *ret, or -ENOENT when there is none (the bottom was
 * refused, or a program every tier needs). */
int tier_next(unsigned tier, unsigned allowed, const char *failed, unsigned *ret);

/* The verifier's own reason in log, a program's verifier log: its last
 * line that is not one of the statistics every log ends with ("processed N
 * insns", "verification time", "stack depth") nor a note on a global
 * function, e.g. "invalid read from stack R10 off=8 size=8".  Copies it
 * (truncated to len) into buf; returns its length, 0 when there is none. */
size_t verifier_reason(const char *log, char *buf, size_t len);

/* Parses perfd --test-refuse's list, "tables,python,memory,frame-pointers"
 * (any of them, comma-separated), into PERFD_REFUSE_* bits.  Returns 0, or
 * -EINVAL for an unknown name or an empty list. */
int tier_parse_refuse(const char *list, uint32_t *ret);

/* --- the description of a load ------------------------------------------ */

#define LOAD_REASON_MAX 384
#define LOAD_MAX_PROGRAMS 16

struct load_program {
	char name[64];
	bool loaded;
	uint32_t verified_insns; /* the verifier's count, when loaded */
	char error[LOAD_REASON_MAX]; /* why not loaded */
};

struct sampler_load_report {
	unsigned asked;     /* the features the configuration asks for */
	unsigned supported; /* ... those this kernel has what they need for */
	bool loaded;        /* a tier loaded; else error says why none did */
	unsigned tier;      /* the features of the tier loaded */
	/* Per feature (indexed as tier_features), why it is not in tier:
	 * not asked for, not supported, or the verifier's refusal. */
	char why[TIER_N_FEATURES][LOAD_REASON_MAX];
	struct load_program programs[LOAD_MAX_PROGRAMS]; /* every program of the object */
	size_t n_programs;
	char error[LOAD_REASON_MAX];
};

/* Features asked for and not loaded: what was lost, each with its why. */
unsigned load_report_lost(const struct sampler_load_report *r);
/* Why feature is not in the tier ("" when it is). */
const char *load_report_why(const struct sampler_load_report *r, unsigned feature);
/* One sentence for the log on a lost feature: its why, the tier perfd runs
 * with and what that costs ("...; running with frame-pointers+python:
 * stacks through code without frame pointers are cut").  Returns buf. */
char *load_report_describe_loss(const struct sampler_load_report *r, unsigned feature, char *buf,
				size_t len);

#endif
