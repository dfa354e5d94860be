/* SPDX-License-Identifier: MIT */
/* rates.c - see rates.h. */
#include "base/clock.h"
#include "rates.h"

void rates_note(struct rates *r, const struct rates_reading *reading)
{
	r->ring[r->next] = *reading;
	r->next = (r->next + 1) % RATES_SECONDS;
	if (r->n < RATES_SECONDS)
		r->n++;
}

bool rates_over(const struct rates *r, const struct rates_reading *now, double seconds,
		struct rates_reading *ret)
{
	uint64_t span = seconds > 0 ? (uint64_t)(seconds * NSEC_PER_SEC) : 0;
	const struct rates_reading *base = NULL;

	/* newest first: the first one old enough, else the oldest older than now */
	for (size_t i = 1; i <= r->n; i++) {
		const struct rates_reading *x = &r->ring[(r->next + RATES_SECONDS - i) % RATES_SECONDS];

		if (x->ns >= now->ns)
			continue;
		base = x;
		if (now->ns - x->ns >= span)
			break;
	}
	if (!base)
		return false;
	*ret = (struct rates_reading){
		.ns = now->ns - base->ns,
		.cpu_ns = now->cpu_ns - base->cpu_ns,
		.samples = now->samples - base->samples,
		.lost = now->lost - base->lost,
	};
	return true;
}
