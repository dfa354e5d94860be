/* SPDX-License-Identifier: MIT */
/*
 * check.c - see check.h.  The lines, one fact each, for people and for
 * grep alike:
 *
 *   tier: tables+python+memory
 *   feature tables: available
 *   feature python: unavailable: on_cpu_clock with tables+python was refused ...: "..."
 *   program on_cpu_clock: verified in 160237 instructions (limit 1000000)
 *   program on_cpu_clock_fp: not loaded: not needed in this tier
 */
#include <stdio.h>

#include "check.h"
#include "collect/sampler.h"
#include "collect/tiers.h"
#include "config.h"
#include "manager.h"

/* The verifier's limit on the instructions it walks for one program
 * (BPF_COMPLEXITY_LIMIT_INSNS, the same on every kernel since 5.2). */
#define VERIFIER_INSN_LIMIT 1000000

int check_run(const struct config *cfg, FILE *out)
{
	struct sampler_load_report r;
	struct sampler_opts so;
	struct sampler *s = NULL;
	char name[TIER_NAME_MAX];
	unsigned lost;

	manager_sampler_opts(cfg, &so);
	(void)sampler_load(&so, &s, &r);
	s = sampler_free(s);
	lost = load_report_lost(&r);
	if (r.loaded)
		fprintf(out, "tier: %s\n", tier_name(r.tier, name, sizeof(name)));
	else
		fprintf(out, "tier: none: %s\n", r.error);
	for (int i = 0; i < TIER_N_FEATURES; i++) {
		unsigned f = tier_features[i];

		if (r.loaded && (r.tier & f))
			fprintf(out, "feature %s: available\n", tier_feature_name(f));
		else if (!(r.asked & f))
			fprintf(out, "feature %s: off: %s\n", tier_feature_name(f), load_report_why(&r, f));
		else
			fprintf(out, "feature %s: unavailable: %s\n", tier_feature_name(f),
				r.why[i][0] ? r.why[i] : r.error);
	}
	for (size_t i = 0; i < r.n_programs; i++) {
		const struct load_program *p = &r.programs[i];

		if (p->loaded)
			fprintf(out, "program %s: verified in %u instructions (limit %u)\n", p->name,
				p->verified_insns, VERIFIER_INSN_LIMIT);
		else
			fprintf(out, "program %s: not loaded: %s\n", p->name, p->error);
	}
	return r.loaded && !lost ? 0 : 1;
}
