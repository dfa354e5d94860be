/* SPDX-License-Identifier: MIT */
/* loopstep.c - see loopstep.h. */
#include "base/clock.h"
#include "base/loopstep.h"

/* The steps armed now.  perfd runs one loop, so one count: a starved
 * step's timer is set LOOP_STEP_STARVED_NS times this many ahead, and all
 * the steps of a never-idle loop together take a slice per
 * LOOP_STEP_STARVED_NS, however many there are (loopstep.h). */
static unsigned armed_steps;

static void fire(struct loop_step *st)
{
	loop_step_disarm(st);
	st->run(st->userdata); /* may arm st again, or free it */
}

static int on_defer(sd_event_source *s, void *userdata)
{
	(void)s;
	fire(userdata);
	return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct loop_step *st = userdata;

	(void)s;
	(void)usec;
	st->starved++;
	fire(st);
	return 0;
}

int loop_step_init(struct loop_step *st, sd_event *e, const char *description,
		   loop_step_run_t run, void *userdata)
{
	int r;

	*st = (struct loop_step){ .run = run, .userdata = userdata };
	r = sd_event_add_defer(e, &st->defer, on_defer, st);
	if (r >= 0)
		r = sd_event_source_set_priority(st->defer, SD_EVENT_PRIORITY_NORMAL + 1);
	if (r >= 0)
		r = sd_event_add_time_relative(e, &st->timer, CLOCK_MONOTONIC,
					       LOOP_STEP_STARVED_NS / NSEC_PER_USEC, 0, on_timer, st);
	if (r >= 0)
		r = sd_event_source_set_priority(st->timer, SD_EVENT_PRIORITY_NORMAL - 1);
	if (r >= 0 && description)
		r = sd_event_source_set_description(st->defer, description);
	if (r >= 0 && description)
		r = sd_event_source_set_description(st->timer, description);
	if (r >= 0)
		loop_step_disarm(st);
	return r;
}

int loop_step_arm(struct loop_step *st)
{
	/* the defer armed again, so that it queues behind what became
	 * pending meanwhile rather than ahead of it */
	int r = sd_event_source_set_enabled(st->defer, SD_EVENT_ONESHOT);

	if (r >= 0 && !st->armed) {
		st->armed = true;
		armed_steps++;
	}
	if (r >= 0)
		r = sd_event_source_set_time_relative(st->timer, LOOP_STEP_STARVED_NS * armed_steps /
									 NSEC_PER_USEC);
	if (r >= 0)
		r = sd_event_source_set_enabled(st->timer, SD_EVENT_ONESHOT);
	if (r < 0)
		loop_step_disarm(st);
	return r;
}

void loop_step_disarm(struct loop_step *st)
{
	if (st->armed) {
		st->armed = false;
		armed_steps--;
	}
	if (st->defer)
		(void)sd_event_source_set_enabled(st->defer, SD_EVENT_OFF);
	if (st->timer)
		(void)sd_event_source_set_enabled(st->timer, SD_EVENT_OFF);
}

bool loop_step_armed(const struct loop_step *st)
{
	return st->armed;
}

void loop_step_done(struct loop_step *st)
{
	loop_step_disarm(st);
	st->defer = sd_event_source_disable_unref(st->defer);
	st->timer = sd_event_source_disable_unref(st->timer);
}
