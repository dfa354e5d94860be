/* SPDX-License-Identifier: MIT */
/* protoschema.c - see protoschema.h: the kinds and labels of pprof and OTLP. */
#include "encode/protoschema.h"

const struct proto_kind proto_kinds[PROFILE_KINDS] = {
	[PROFILE_KIND_CPU] = { 2, { { "samples", "count" }, { "cpu", "nanoseconds" } },
			       { false, true }, { "cpu", "nanoseconds" } },
	[PROFILE_KIND_MEMORY] = { 1, { { "space", "bytes" } }, { false }, { "space", "bytes" } },
	[PROFILE_KIND_OFFCPU] = { 1, { { "off_cpu", "nanoseconds" } }, { false },
				  { "off_cpu", "nanoseconds" } },
};

const char *const proto_label_keys[PROTO_LABEL_KEYS] = {
	[PROTO_LABEL_PID] = "pid",	   [PROTO_LABEL_TID] = "tid",
	[PROTO_LABEL_COMM] = "comm",	   [PROTO_LABEL_CGROUP] = "cgroup",
	[PROTO_LABEL_UNIT] = "unit",
};

int64_t proto_period(enum profile_kind kind, const struct encode_opts *o)
{
	switch (kind) {
	case PROFILE_KIND_CPU:
		return (int64_t)o->period_ns;
	case PROFILE_KIND_MEMORY:
		return (int64_t)o->memory_sample_bytes;
	default:
		return 0;
	}
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
