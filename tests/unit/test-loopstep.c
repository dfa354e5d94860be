/* SPDX-License-Identifier: MIT */
/*
 * test-loopstep.c - daemon/base/loopstep.c: a step runs behind the loop's
 * other sources when the loop has time, and is not starved when it never
 * has: a real sd-event loop with CLIENTS sources that are always ready
 * (a nobody client's connections pipelining requests, a line each a turn)
 * still runs a slice every few of their dispatches (at their priority,
 * behind them, it never ran), and several steps armed at once take no
 * more of it together than one.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "base/clock.h"
#include "base/loopstep.h"

#define CLIENTS 16
/* A client's turn: long enough that a round of all of them (128 ms) is
 * several LOOP_STEP_STARVED_NS. */
#define TURN_NS (8 * 1000 * 1000L)
#define SLICES 20

struct run {
	sd_event *e;
	struct loop_step step;
	unsigned slices, turns;
	unsigned turns_at_first_slice;
};

static void slice(void *userdata)
{
	struct run *r = userdata;

	r->slices++;
	if (r->slices < SLICES)
		cr_assert_geq(loop_step_arm(&r->step), 0);
}

static int client_turn(sd_event_source *s, void *userdata)
{
	struct run *r = userdata;

	(void)s;
	nanosleep(&(struct timespec){ .tv_nsec = TURN_NS }, NULL);
	r->turns++;
	return 0;
}

static void run_until_sliced(struct run *r)
{
	while (r->slices < SLICES && r->turns < 20 * SLICES)
		cr_assert_geq(sd_event_run(r->e, UINT64_MAX), 0);
}

Test(loopstep, an_idle_loop_runs_the_step_behind_nothing)
{
	struct run r = { 0 };

	cr_assert_geq(sd_event_new(&r.e), 0);
	cr_assert_geq(loop_step_init(&r.step, r.e, "step", slice, &r), 0);
	cr_assert_geq(loop_step_arm(&r.step), 0);
	run_until_sliced(&r);
	cr_expect_eq(r.slices, SLICES);
	/* the timer may win a turn the test's thread was not run in time */
	cr_expect_lt(r.step.starved, SLICES, "an idle loop ran every slice from the timer");
	loop_step_done(&r.step);
	sd_event_unref(r.e);
}

Test(loopstep, clients_always_ready_leave_the_step_a_slice_every_few_turns)
{
	struct run r = { 0 };
	sd_event_source *clients[CLIENTS];

	cr_assert_geq(sd_event_new(&r.e), 0);
	for (size_t i = 0; i < CLIENTS; i++) {
		cr_assert_geq(sd_event_add_defer(r.e, &clients[i], client_turn, &r), 0);
		cr_assert_geq(sd_event_source_set_enabled(clients[i], SD_EVENT_ON), 0);
	}
	cr_assert_geq(loop_step_init(&r.step, r.e, "step", slice, &r), 0);
	cr_assert_geq(loop_step_arm(&r.step), 0);
	run_until_sliced(&r);
	cr_assert_eq(r.slices, SLICES, "the step ran %u slices in %u client turns", r.slices,
		     r.turns);
	cr_expect_eq(r.step.starved, SLICES, "the step's defer ran beside clients always ready");
	/* A slice comes due every LOOP_STEP_STARVED_NS: after the
	 * 20 ms / 8 ms = 2.5 turns, so 3 (more if a turn sleeps longer, which
	 * only makes the step due sooner in turns).  At the clients' priority
	 * the timer never ran: 0 slices in 2000 turns. */
	cr_expect_leq(r.turns, (unsigned)(SLICES * (LOOP_STEP_STARVED_NS / TURN_NS + 2)),
		      "%u client turns for %u slices: the step waited for rounds", r.turns,
		      r.slices);
	for (size_t i = 0; i < CLIENTS; i++)
		sd_event_source_disable_unref(clients[i]);
	loop_step_done(&r.step);
	sd_event_unref(r.e);
}

#define STEPS 4

struct several {
	unsigned slices; /* of all the steps */
};

static struct several *several_now;

static void several_slice(void *userdata)
{
	struct run *r = userdata;

	r->slices++;
	several_now->slices++;
	cr_assert_geq(loop_step_arm(&r->step), 0); /* each always has more */
}

Test(loopstep, several_steps_take_no_more_of_a_busy_loop_than_one)
{
	struct run runs[STEPS] = { 0 }, *clients_run = &runs[0];
	struct several sv = { 0 };
	sd_event_source *clients[CLIENTS];
	sd_event *e;
	uint64_t t0, elapsed;

	several_now = &sv;
	cr_assert_geq(sd_event_new(&e), 0);
	for (size_t i = 0; i < CLIENTS; i++) {
		cr_assert_geq(sd_event_add_defer(e, &clients[i], client_turn, clients_run), 0);
		cr_assert_geq(sd_event_source_set_enabled(clients[i], SD_EVENT_ON), 0);
	}
	for (size_t i = 0; i < STEPS; i++) {
		cr_assert_geq(loop_step_init(&runs[i].step, e, "step", several_slice, &runs[i]), 0);
		cr_assert_geq(loop_step_arm(&runs[i].step), 0);
	}
	t0 = now_monotonic_ns();
	while (sv.slices < SLICES && clients_run->turns < 20 * SLICES)
		cr_assert_geq(sd_event_run(e, UINT64_MAX), 0);
	cr_assert_eq(sv.slices, SLICES, "the steps ran %u slices in %u client turns", sv.slices,
		     clients_run->turns);
	for (size_t i = 0; i < STEPS; i++)
		cr_expect_gt(runs[i].slices, 0, "step %zu never ran", i);
	/* One slice of any step per LOOP_STEP_STARVED_NS of the loop's time
	 * (half as many again for the slack of a timer set from the turn's
	 * time), plus the first of each.  A busier host makes the turns and
	 * the time longer, never the steps' share: with a timer per step
	 * every LOOP_STEP_STARVED_NS, four steps ran 20 slices in 122 ms, where
	 * this allows 13. */
	elapsed = now_monotonic_ns() - t0;
	cr_expect_leq(sv.slices, STEPS + 3 * elapsed / LOOP_STEP_STARVED_NS / 2,
		      "%u slices of %d steps in %.0f ms (%u client turns): the steps took the loop",
		      sv.slices, STEPS, elapsed / 1e6, clients_run->turns);
	for (size_t i = 0; i < CLIENTS; i++)
		sd_event_source_disable_unref(clients[i]);
	for (size_t i = 0; i < STEPS; i++)
		loop_step_done(&runs[i].step);
	sd_event_unref(e);
}
