/* SPDX-License-Identifier: MIT */
/*
 * diagnose.h - the rules `perfctl diagnose` states a bottleneck by, on the
 * analysis model: the thresholds below (printed with every verdict, so a
 * reader can check them), the dominant function by self and by total and
 * whether the latter only coordinates its callees, and whether enough
 * memory growth was sampled to name a site.  Pure computation on
 * functions.h's reports, no I/O: what to ask perfd and how to say it is
 * cli/diagnose.c's.
 */
#ifndef PERFD_ANALYSIS_DIAGNOSE_H
#define PERFD_ANALYSIS_DIAGNOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/functions.h"

#define DIAGNOSE_MIN_SAMPLES 100       /* fewer CPU samples name no hot function */
#define DIAGNOSE_MIN_MEMORY_SAMPLES 10 /* fewer memory samples name no growth site */
#define DIAGNOSE_WAITING_PERCENT 20.0  /* CPU share of one CPU below which it waits */
#define DIAGNOSE_PASS_THROUGH 0.90     /* a callee this much of its caller: go down */
#define DIAGNOSE_COORDINATOR_SELF 0.10 /* self below this of total: a coordinator */
#define DIAGNOSE_MAX_PATH 16           /* wrappers passed through, at most */

/* A function as diagnose speaks of it: a row of a report. */
struct diagnose_finding {
	bool found;
	uint32_t row;
	uint64_t self, total;
	uint32_t line; /* the line with the most self (by self) or the lowest seen */
};

/* What the CPU samples say. */
struct diagnose_cpu {
	struct diagnose_finding by_self, by_total;
	bool coordinator;                 /* by_total's self under COORDINATOR_SELF of it */
	struct report_relatives callees;  /* of by_total */
	uint32_t path[DIAGNOSE_MAX_PATH]; /* the wrappers passed through to by_total */
	size_t n_path;
};

/* The findings of cpu (a report per function) and lined (the same
 * profile, read with lines: the line of by_self): by self, the first row
 * of report_order(); by total, report_dominant() through the callers and
 * callees that carry DIAGNOSE_PASS_THROUGH.  An empty report finds
 * nothing.  Returns 0 and *ret (diagnose_cpu_done() it), or -ENOMEM. */
int diagnose_cpu(const struct report *cpu, const struct profile *lined, struct diagnose_cpu *ret);
void diagnose_cpu_done(struct diagnose_cpu *c);

/* Whether a process on CPU cpu_percent of one CPU over the window was
 * waiting rather than computing. */
bool diagnose_waiting(double cpu_percent);

/* Of a wall profile's time (CPU and off-CPU), waiting for a CPU while
 * runnable this share or more says the CPUs are oversubscribed. */
#define DIAGNOSE_RUNQUEUE_PERCENT 10.0

/* What an off-CPU profile says (leaf frames "[wait: CLASS]", perfd's
 * waitclass.h): all of its time, that of [wait: cpu] and of [wait: GIL]
 * (a Python thread's: only then is the GIL worth a look), the class with the
 * most (its leaf frame), and, in that class's stacks, where the most of it
 * was waited: the innermost frame that is not the kernel's (the call that
 * blocked: recv, nanosleep) and, when that is in a shared library (or
 * its module is not known), the code that made it: the innermost frame
 * above it with a file and line and no module (an interpreter's: a Python
 * line), else the innermost out of that library with a file and line (a
 * native function with debug lines).  Frame ids of the profile; 0: none. */
struct diagnose_waits {
	uint64_t total, cpu, gil;
	uint32_t top_class;
	uint64_t top;
	uint32_t site, code;
	uint64_t site_total, code_total;
};

int diagnose_waits(const struct profile *off, struct diagnose_waits *ret);

/* A Python thread waiting this share of its time or more for the GIL is
 * worth a sentence. */
#define DIAGNOSE_GIL_PERCENT 10.0

/* What a wall profile whose stacks are rooted at "[thread TID COMM]" then
 * the GIL's state says of the GIL: the thread that waits for it the
 * largest share of its time (a "[wait: GIL]" leaf), the other thread that
 * held it the longest, and in that thread's held stacks the innermost
 * frame with a file and line with the most of it (the code that holds
 * it).  Thread and code are frame ids of the profile; 0: none. */
struct diagnose_gil {
	uint32_t waiter;
	uint64_t waiter_total, waiter_waits;
	uint32_t holder;
	uint64_t holder_total, holder_held;
	uint32_t code;
	uint64_t code_held;
};

int diagnose_gil(const struct profile *wall, struct diagnose_gil *ret);

/* Whether bytes of growth, sampled sample_bytes a sample (0: unknown), are
 * too few samples to name where memory grew. */
bool diagnose_too_little_growth(uint64_t bytes, uint64_t sample_bytes);

#endif
