/* SPDX-License-Identifier: MIT */
/* loopturn.c - see loopturn.h. */
#include "base/clock.h"
#include "base/loopturn.h"
#include "perfd/macro.h"

/* sd_event_run's three steps, with the dispatch timed. */
int loop_run(sd_event *e, struct loop_stats *st)
{
	int r, code = 0;

	while (sd_event_get_state(e) != SD_EVENT_FINISHED) {
		uint64_t t0, dt;

		r = sd_event_prepare(e);
		if (r == 0)
			r = sd_event_wait(e, UINT64_MAX);
		if (r < 0)
			return r;
		if (r == 0)
			continue;
		t0 = now_monotonic_ns();
		r = sd_event_dispatch(e);
		dt = now_monotonic_ns() - t0;
		if (r < 0)
			return r;
		st->turns++;
		st->max_turn_ns = MAX(st->max_turn_ns, dt);
		if (dt > LOOP_SLOW_TURN_NS)
			st->slow_turns++;
	}
	r = sd_event_get_exit_code(e, &code);
	return r < 0 ? r : code;
}
