/* SPDX-License-Identifier: MIT */
/* protoschema.c - see protoschema.h: the kinds and labels of pprof and OTLP. */
#include "encode/protoschema.h"
#include "base/kindtab.h"

/* A PERIODS kind lists the count of samples, then their value (the count
 * times the period); the others their value alone.  Either way the period
 * type is the kind's own. */
#define PROTO_KIND_PERIODS(type, unit)                                                   \
	{ 2, { { KIND_PPROF_COUNT_TYPE, KIND_PPROF_COUNT_UNIT }, { type, unit } }, { false, true }, \
	  { type, unit } }
#define PROTO_KIND_BYTES(type, unit) { 1, { { type, unit } }, { false }, { type, unit } }
#define PROTO_KIND_NONE(type, unit) PROTO_KIND_BYTES(type, unit)
#define PROTO_KIND_ROW(id, value, name, unit, title, kernel, period, counts, kskip, ptype, punit) \
	[value] = PROTO_KIND_##period(ptype, punit),
const struct proto_kind proto_kinds[PROFILE_KINDS] = { PERFD_KINDS(PROTO_KIND_ROW) };

const char *const proto_label_keys[PROTO_LABEL_KEYS] = {
	[PROTO_LABEL_PID] = "pid",	   [PROTO_LABEL_TID] = "tid",
	[PROTO_LABEL_COMM] = "comm",	   [PROTO_LABEL_CGROUP] = "cgroup",
	[PROTO_LABEL_UNIT] = "unit",
};

int64_t proto_period(enum profile_kind kind, const struct encode_opts *o)
{
	switch (kind_infos[kind].period) {
	case PERFD_KIND_PERIOD_PERIODS:
		return (int64_t)o->period_ns;
	case PERFD_KIND_PERIOD_BYTES:
		return (int64_t)o->memory_sample_bytes;
	case PERFD_KIND_PERIOD_NONE:
		break;
	}
	return 0;
}

size_t proto_process_labels(const struct model_process *pr,
			    struct proto_label ret[PROTO_MAX_PROCESS_LABELS])
{
	size_t n = 0;

	ret[n++] = (struct proto_label){ .key = PROTO_LABEL_PID, .is_num = true, .num = pr->pid };
	ret[n++] = (struct proto_label){ .key = PROTO_LABEL_COMM, .str = pr->comm };
	if (pr->cgroup)
		ret[n++] = (struct proto_label){ .key = PROTO_LABEL_CGROUP, .str = pr->cgroup };
	if (pr->unit)
		ret[n++] = (struct proto_label){ .key = PROTO_LABEL_UNIT, .str = pr->unit };
	return n;
}
