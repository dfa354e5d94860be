/* SPDX-License-Identifier: MIT */
/*
 * loopstep.h - long work done on the loop a slice a turn, behind the
 * loop's clients but never starved by them.
 *
 * Work that must stay on the loop and takes longer than a turn should
 * (a model built in slices: api/model_slices.h; an export interval:
 * export/exporter.h) runs a slice each time its step fires, and arms the
 * step again while there is more.  The step is a defer source one
 * priority below the loop's other sources (all at
 * SD_EVENT_PRIORITY_NORMAL), so that a client that became ready during a
 * slice is served before the next one.  Below them alone, a step would run
 * only when none of them is pending, and on a loop that is never idle (a
 * client pipelining requests without end, a flood of samples) that is
 * never: a snapshot's model was never built while a nobody client
 * pipelined status.  So each arm also sets a timer LOOP_STEP_STARVED_NS
 * ahead, one priority above the others, and whichever fires first runs
 * the slice and disarms the other: on a never-idle loop each step still
 * gets a slice every LOOP_STEP_STARVED_NS, plus the one dispatch that was
 * running when it came due.  Above them, not beside them: at the others'
 * priority a due timer waited its turn behind a whole round of ready
 * sources, and one nobody client's 16 connections pipelining ps (a line
 * each a turn, ~8 ms each under ASan) made that round 130 ms, so a root
 * snapshot's 35 ms build took a second here and over 4 s on a slower host.
 * Above them, the steps must not take the loop from the clients in turn:
 * with N steps armed, each one's timer is set N x LOOP_STEP_STARVED_NS
 * ahead, so that all of them together run a slice (5 ms, MODEL_SLICE_NS)
 * per LOOP_STEP_STARVED_NS, timed from the turn that armed it: at most
 * about a quarter of a never-idle loop however many clients start builds,
 * and a client waits about a slice for them.
 *
 * Cost: a timer per step, moved at each arm (sd-event re-sets its timerfd
 * only when the earliest deadline changes).
 */
#ifndef PERFD_LOOPSTEP_H
#define PERFD_LOOPSTEP_H

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#define LOOP_STEP_STARVED_NS (20 * 1000 * 1000ULL)

/* One slice of the owner's work, from the loop. */
typedef void (*loop_step_run_t)(void *userdata);

struct loop_step {
	sd_event_source *defer, *timer;
	loop_step_run_t run;
	void *userdata;
	uint64_t starved; /* slices the timer ran: nothing else left a turn */
	bool armed;       /* its slice to come: counted in loopstep.c's armed steps */
};

/* Makes st's sources on e, disarmed.  Returns 0 or -errno (sd-event's);
 * loop_step_done frees what was made either way. */
int loop_step_init(struct loop_step *st, sd_event *e, const char *description,
		   loop_step_run_t run, void *userdata);
/* Runs one slice at a later turn.  Returns 0 or -errno (sd-event's). */
int loop_step_arm(struct loop_step *st);
void loop_step_disarm(struct loop_step *st);
bool loop_step_armed(const struct loop_step *st);
/* Frees st's sources.  Accepts a zeroed st. */
void loop_step_done(struct loop_step *st);

#endif
