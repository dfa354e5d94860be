/* SPDX-License-Identifier: MIT */
/*
 * protoschema.h - what a sample of a protobuf profile says, written once
 * for the two formats that have one: pprof (pprof.c) and OTLP (otlp.c).
 *
 * Per kind of profile: the value types with their units (pprof lists them
 * all; OTLP v1.8.0 has one sample type per profile and takes the first),
 * the period type and the period; and the labels every sample of a
 * process carries (pid, comm, cgroup and unit where known).  The kinds'
 * types are generated from perfd/kinds.h's rows; a new label is a row
 * here; both formats state them alike.  The texts are literals: the
 * encoders' string tables point at them.
 */
#ifndef PERFD_ENCODE_PROTOSCHEMA_H
#define PERFD_ENCODE_PROTOSCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "encode/encode.h"
#include "profile/model.h"

#define PROTO_MAX_VALUES 2

struct proto_value_type {
	const char *type, *unit;
};

struct proto_kind {
	size_t n_values;
	struct proto_value_type values[PROTO_MAX_VALUES];
	/* value i of a sample is the model's value, times the period where
	 * times_period[i] (CPU time is samples x period) */
	bool times_period[PROTO_MAX_VALUES];
	struct proto_value_type period;
};

extern const struct proto_kind proto_kinds[PROFILE_KINDS];

/* The kind of m's samples (CPU for a kind this table does not know). */
static inline enum profile_kind proto_kind_of(const struct model *m)
{
	return m->kind < PROFILE_KINDS ? m->kind : PROFILE_KIND_CPU;
}

/* What one sample of kind stands for, in its period type's unit: the
 * sampling period, the mean bytes of a memory sample, 0 (no period) for
 * off-CPU time. */
int64_t proto_period(enum profile_kind kind, const struct encode_opts *o);

/* Value i of a sample of kind k whose model value is value, period being
 * proto_period's. */
static inline int64_t proto_value(const struct proto_kind *k, size_t i, uint64_t value,
				  int64_t period)
{
	return (int64_t)(k->times_period[i] ? value * (uint64_t)period : value);
}

/* The label keys.  tid is pprof's alone, on each sample when threads are
 * kept apart (an OTLP request's sample attributes are one list). */
enum proto_label_key {
	PROTO_LABEL_PID,
	PROTO_LABEL_TID,
	PROTO_LABEL_COMM,
	PROTO_LABEL_CGROUP,
	PROTO_LABEL_UNIT,
	PROTO_LABEL_KEYS,
};

extern const char *const proto_label_keys[PROTO_LABEL_KEYS];

/* One label of a process: a number, or a model string id. */
struct proto_label {
	enum proto_label_key key;
	bool is_num;
	int64_t num;
	uint32_t str;
};

#define PROTO_MAX_PROCESS_LABELS 4 /* pid, comm, cgroup, unit */

/* The labels every sample of pr carries, in the order the formats write
 * them: pid, comm, then cgroup and unit where known.  Fills ret and
 * returns how many (at most PROTO_MAX_PROCESS_LABELS). */
size_t proto_process_labels(const struct model_process *pr,
			    struct proto_label ret[PROTO_MAX_PROCESS_LABELS]);

#endif
