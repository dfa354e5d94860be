/* SPDX-License-Identifier: MIT */
/*
 * loopturn.h - the sd-event loop, run one turn at a time and timed.
 *
 * A turn is one dispatch: the one event source sd-event picked runs to its
 * end.  Nothing else runs meanwhile, so the longest turn bounds how long a
 * client that became ready during it waits to be read.  Every handler is
 * meant to stay well under LOOP_SLOW_TURN_NS (the ingest in slices,
 * collect/drain.h; the work that scales with files on lanes); the turns
 * that do not are counted, with the longest, for status to show.  Cost:
 * two clock reads a turn.
 */
#ifndef PERFD_LOOPTURN_H
#define PERFD_LOOPTURN_H

#include <stdint.h>
#include <systemd/sd-event.h>

/* A turn longer than this is slow: half of the 100 ms in which status
 * must answer. */
#define LOOP_SLOW_TURN_NS (50 * 1000 * 1000ULL)

struct loop_stats {
	uint64_t turns;
	uint64_t slow_turns;  /* over LOOP_SLOW_TURN_NS */
	uint64_t max_turn_ns;
};

/* Runs e until sd_event_exit, as sd_event_loop does, counting into st.
 * Returns the exit code, or a negative errno when the loop failed. */
int loop_run(sd_event *e, struct loop_stats *st);

#endif
