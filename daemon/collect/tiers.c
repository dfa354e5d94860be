/* SPDX-License-Identifier: MIT */
/* tiers.c - see tiers.h: the ladder, the names, the verifier's reason. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "collect/tiers.h"
#include "perfd/macro.h"
#include "perfd/tiers.h"

const unsigned tier_features[TIER_N_FEATURES] = { TIER_TABLES, TIER_PYTHON, TIER_MEMORY, TIER_SWITCHES,
								 TIER_OFFCPU };

static const struct {
	const char *name, *loss;
} features[TIER_N_FEATURES] = {
	{ "tables", "stacks through code without frame pointers are cut" },
	{ "python", "Python processes show their native frames only" },
	{ "memory", "memory growth is not sampled" },
	{ "context-switches", "a tick that falls due before a context switch is charged to the task switched in" },
	{ "offcpu", "off-CPU time is not recorded" },
};

static int feature_index(unsigned feature)
{
	for (int i = 0; i < TIER_N_FEATURES; i++)
		if (tier_features[i] == feature)
			return i;
	return -1;
}

const char *tier_feature_name(unsigned feature)
{
	int i = feature_index(feature);

	return i < 0 ? "?" : features[i].name;
}

const char *tier_feature_loss(unsigned feature)
{
	int i = feature_index(feature);

	return i < 0 ? "?" : features[i].loss;
}

char *tier_name(unsigned tier, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", tier & TIER_TABLES ? "tables" : "frame-pointers",
		 tier & TIER_PYTHON ? "+python" : "", tier & TIER_MEMORY ? "+memory" : "");
	return buf;
}

/* The programs a tier chooses among; every other one is always loaded. */
static const struct {
	const char *name;
	unsigned features; /* the program is loaded when the tier has one of them */
} optional_programs[] = {
	{ "on_cpu_clock", TIER_UNWINDING },
	{ "on_rss_stat", TIER_MEMORY },
	{ "on_sched_switch", TIER_SWITCHES },
	{ "on_hrtimer_expire", TIER_SWITCHES },
	{ "on_switch_offcpu", TIER_OFFCPU },
};

unsigned tier_program_features(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(optional_programs); i++)
		if (!strcmp(optional_programs[i].name, name))
			return optional_programs[i].features;
	return 0;
}

bool tier_uses_program(unsigned tier, const char *name)
{
	unsigned f = tier_program_features(name);

	if (!strcmp(name, "on_cpu_clock_fp")) /* the tick program without either */
		return !(tier & TIER_UNWINDING);
	return f == 0 || (tier & f);
}

/* How user stacks are walked, best first. */
static const unsigned unwinding_ladder[] = {
	TIER_TABLES | TIER_PYTHON, TIER_TABLES, TIER_PYTHON, 0,
};

int tier_next(unsigned tier, unsigned allowed, const char *failed, unsigned *ret)
{
	unsigned f = tier_program_features(failed);
	size_t i;

	if (f == TIER_MEMORY || f == TIER_SWITCHES || f == TIER_OFFCPU) {
		if (!(tier & f))
			return -ENOENT;
		*ret = tier & ~f;
		return 0;
	}
	if (strcmp(failed, "on_cpu_clock") && strcmp(failed, "on_cpu_clock_fp"))
		return -ENOENT;
	for (i = 0; i < ELEMENTSOF(unwinding_ladder); i++)
		if (unwinding_ladder[i] == (tier & TIER_UNWINDING))
			break;
	for (i++; i < ELEMENTSOF(unwinding_ladder); i++)
		if ((unwinding_ladder[i] & allowed) == unwinding_ladder[i]) {
			*ret = (tier & ~TIER_UNWINDING) | unwinding_ladder[i];
			return 0;
		}
	return -ENOENT;
}

static bool starts_with(const char *s, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);

	return n >= k && !memcmp(s, prefix, k);
}

/* The lines the kernel writes into every log at BPF_LOG_STATS, and its
 * note that a global function is verified on its own: none says why a
 * program was refused. */
static bool line_is_noise(const char *s, size_t n)
{
	static const char global[] = "is global and assumed valid.";

	if (starts_with(s, n, "processed ") || starts_with(s, n, "verification time") ||
	    starts_with(s, n, "stack depth"))
		return true;
	return starts_with(s, n, "Func#") && n >= sizeof(global) - 1 &&
	       !memcmp(s + n - (sizeof(global) - 1), global, sizeof(global) - 1);
}

size_t verifier_reason(const char *log, char *buf, size_t len)
{
	const char *end = log + strlen(log);

	while (end > log) {
		const char *start = end, *stop = end;

		while (stop > log && (stop[-1] == '\n' || stop[-1] == ' ' || stop[-1] == '\t'))
			stop--;
		start = stop;
		while (start > log && start[-1] != '\n')
			start--;
		if (stop > start && !line_is_noise(start, (size_t)(stop - start))) {
			size_t n = (size_t)(stop - start);

			if (len)
				snprintf(buf, len, "%.*s", (int)n, start);
			return MIN(n, len ? len - 1 : 0);
		}
		end = start;
	}
	if (len)
		buf[0] = '\0';
	return 0;
}

int tier_parse_refuse(const char *list, uint32_t *ret)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} names[] = {
		{ "tables", PERFD_REFUSE_TABLES },
		{ "python", PERFD_REFUSE_PYTHON },
		{ "memory", PERFD_REFUSE_MEMORY },
		{ "frame-pointers", PERFD_REFUSE_FRAME_POINTERS },
		{ "offcpu", PERFD_REFUSE_OFFCPU },
	};
	uint32_t bits = 0;
	const char *p = list;

	if (!*list)
		return -EINVAL;
	for (;;) {
		size_t n = strcspn(p, ",");
		size_t i;

		for (i = 0; i < ELEMENTSOF(names); i++)
			if (strlen(names[i].name) == n && !strncmp(names[i].name, p, n))
				break;
		if (i == ELEMENTSOF(names))
			return -EINVAL;
		bits |= names[i].bit;
		if (!p[n])
			break;
		p += n + 1;
	}
	*ret = bits;
	return 0;
}

/* --- the description of a load ------------------------------------------ */

unsigned load_report_lost(const struct sampler_load_report *r)
{
	return r->loaded ? r->asked & ~r->tier : r->asked;
}

const char *load_report_why(const struct sampler_load_report *r, unsigned feature)
{
	int i = feature_index(feature);

	return i < 0 || (r->loaded && (r->tier & feature)) ? "" : r->why[i];
}

char *load_report_describe_loss(const struct sampler_load_report *r, unsigned feature, char *buf,
				size_t len)
{
	char name[TIER_NAME_MAX];

	snprintf(buf, len, "%s; running with %s: %s", load_report_why(r, feature),
		 tier_name(r->tier, name, sizeof(name)), tier_feature_loss(feature));
	return buf;
}
