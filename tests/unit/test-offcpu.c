/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/profile/offcpu.c, an off-CPU block's stack joined
 * with its end into one sample worth its estimated nanoseconds, and for
 * daemon/profile/waitclass.c, why it waited: fed with records built from
 * include/perfd/sample.h, kernel frames named by a table of the test's.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "perfd/macro.h"
#include "profile/aggregate.h"
#include "profile/aggregate_internal.h"
#include "profile/frame.h"
#include "profile/stacktab.h"
#include "profile/waitclass.h"
#include "symbols/symbolize.h"

#define PID 999999991u /* no such process: nothing of it is read */
#define START 7u
#define SEC 1000000000ULL

/* kernel addresses and the functions the test's namer gives them */
#define K_SCHEDULE 0xffffffff81000100ULL
#define K_NANOSLEEP 0xffffffff81000200ULL
#define K_PIPE_READ 0xffffffff81000300ULL
#define K_FAULT 0xffffffff81000400ULL
#define K_FOLIO_WAIT 0xffffffff81000500ULL
#define K_PROG 0xffffffff81000600ULL /* the BPF program and its caller */

static struct symbolizer *sym;
static struct aggregator *agg;

static const char *test_kernel_function(void *userdata, uint64_t frame, char *buf, size_t size)
{
	static const struct {
		uint64_t addr;
		const char *name;
	} table[] = {
		{ K_SCHEDULE, "schedule" },    { K_NANOSLEEP, "do_nanosleep" },
		{ K_PIPE_READ, "pipe_read" },   { K_FAULT, "exc_page_fault" },
		{ K_FOLIO_WAIT, "folio_wait_bit_common" },
	};
	uint64_t addr = frame_kernel_address(frame);

	(void)userdata;
	for (size_t i = 0; i < ELEMENTSOF(table); i++)
		if (addr >= table[i].addr && addr < table[i].addr + 0x100) {
			snprintf(buf, size, "%s", table[i].name);
			return buf;
		}
	return NULL;
}

static void setup(void)
{
	struct module_registry modules;

	cr_assert_eq(symbolizer_new(&(struct symbolizer_opts){ 0 }, &sym, NULL), 0);
	modules = symbolizer_modules(sym);
	cr_assert_eq(aggregator_new(&(struct aggregator_limits){ .max_processes = 16,
								 .max_stacks = 1000,
								 .max_frames = 100000 },
				    &modules, &agg),
		     0);
	aggregator_set_hooks(agg, &(struct aggregator_hooks){ .kernel_function = test_kernel_function });
}

static void teardown(void)
{
	aggregator_free(agg);
	symbolizer_free(sym);
}

TestSuite(offcpu, .init = setup, .fini = teardown);

static void header(struct perfd_event_header *h, uint32_t kind, uint32_t tid, uint64_t ts)
{
	h->kind = kind;
	h->tgid = PID;
	h->tid = tid;
	h->timestamp_ns = ts;
	h->start_time_ns = START;
}

/* The stack thread tid left its CPU at, at out_ns: the program's three
 * frames (kernel_skip), then schedule's return, then kips (leaf first). */
static void send_stack_flags(uint32_t tid, uint64_t out_ns, const uint64_t *kips, int n,
			     uint32_t flags)
{
	size_t size = sizeof(struct perfd_sample) + (size_t)(n + 4) * sizeof(uint64_t);
	struct perfd_sample *s = calloc(1, size);

	cr_assert_not_null(s);
	header(&s->hdr, PERFD_EVENT_SAMPLE, tid, out_ns);
	snprintf(s->comm, sizeof(s->comm), "waiter");
	s->page_size = 4096;
	s->value_kind = PERFD_VALUE_OFFCPU;
	s->ips[0] = K_PROG;
	s->ips[1] = K_PROG + 8;
	s->ips[2] = K_PROG + 16;
	s->ips[3] = K_SCHEDULE + 0x10;
	for (int i = 0; i < n; i++)
		s->ips[4 + i] = kips[i];
	s->kernel_depth = n + 4;
	s->flags = flags;
	cr_assert_eq(aggregator_ingest(agg, s, size), 0);
	free(s);
}

static void send_stack(uint32_t tid, uint64_t out_ns, const uint64_t *kips, int n)
{
	send_stack_flags(tid, out_ns, kips, n, 0);
}

/* odds: 1 in one_in */
static void send_end(uint32_t tid, uint64_t out_ns, uint64_t in_ns, uint32_t one_in, uint32_t state)
{
	struct perfd_offcpu_end e = { .out_ns = out_ns, .odds = PERFD_OFFCPU_ODDS_ONE / one_in,
				      .state = state };

	header(&e.hdr, PERFD_EVENT_OFFCPU_END, tid, in_ns);
	cr_assert_eq(aggregator_ingest(agg, &e, sizeof(e)), 0);
}

/* The sum of keep(kind, stack, ud) ? value : 0 over the process's
 * history. */
static uint64_t sum_where(bool (*keep)(enum profile_kind, const struct stack *, const void *),
			  const void *ud)
{
	struct process *p = agg_lookup(agg, PID, START);
	struct history_iter it;
	struct history_window w;
	uint64_t n = 0;

	if (!p)
		return 0;
	history_iter_init(&it, &p->history);
	while (history_iter_next(&it, &w)) {
		struct profile_values one;

		profile_init(&one);
		cr_assert_eq(history_window_merge(&w, aggregator_stacks(agg), &one), 0);
		U64MAP_FOREACH(slot, &one.values) {
			const struct stack *s = stacktab_get(aggregator_stacks(agg),
							     profile_key_stack(slot->key));

			if (s && keep(profile_key_kind(slot->key), s, ud))
				n += slot->value;
		}
		profile_release(&one, aggregator_stacks(agg));
	}
	return n;
}

struct waited_filter {
	int c;
	uint64_t root;
};

static bool waited_keep(enum profile_kind kind, const struct stack *s, const void *ud)
{
	const struct waited_filter *f = ud;

	if (kind != PROFILE_KIND_OFFCPU || s->depth < 2)
		return false;
	cr_assert_eq(frame_module(s->frames[0]), FRAME_MODULE_SPECIAL);
	cr_assert_eq(frame_kernel_address(s->frames[1]), K_SCHEDULE + 0x10,
		     "the program's own frames were left in");
	if (f->root && s->frames[s->depth - 1] != frame_make(FRAME_MODULE_SPECIAL, f->root))
		return false;
	return f->c < 0 || frame_address(s->frames[0]) == FRAME_SPECIAL_WAIT + (uint64_t)f->c;
}

/* Off-CPU nanoseconds of the process whose stacks' leaf is the wait class
 * c (-1: any), and whose next frame is schedule's; with root not 0, only
 * of the stacks whose root frame is that special one. */
static uint64_t waited_under(int c, uint64_t root)
{
	return sum_where(waited_keep, &(struct waited_filter){ c, root });
}

static uint64_t waited(int c)
{
	return waited_under(c, 0);
}

Test(offcpu, a_block_is_its_length_times_its_odds_under_why_it_waited)
{
	const uint64_t sleep[] = { K_NANOSLEEP + 0x20 };
	struct aggregator_stats st;

	send_stack(PID, 10 * SEC, sleep, 1);
	cr_assert_eq(waited(-1), 0, "a stack went in before its end");
	send_end(PID, 10 * SEC, 10 * SEC + 300000000, 4, 1 /* TASK_INTERRUPTIBLE */);
	cr_assert_eq(waited(WAIT_SLEEP), 1200000000);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.offcpu_joined, 1);
	cr_assert_eq(st.offcpu_ns, 1200000000);
	cr_assert_eq(st.offcpu_waiting, 0);
}

Test(offcpu, the_class_comes_from_the_state_and_the_kernel_frames)
{
	const uint64_t pipe[] = { K_PIPE_READ + 4 }, fault[] = { K_FOLIO_WAIT + 4, K_FAULT + 4 };
	const uint64_t sleep[] = { K_NANOSLEEP + 4 };

	send_stack(PID, 1 * SEC, pipe, 1);
	send_end(PID, 1 * SEC, 1 * SEC + 1000, 1, 1);
	/* the disk wait of a page fault is the fault's */
	send_stack(PID + 1, 1 * SEC, fault, 2);
	send_end(PID + 1, 1 * SEC, 1 * SEC + 2000, 1, 2 /* TASK_UNINTERRUPTIBLE */);
	/* runnable when it left: preempted, whatever its stack */
	send_stack(PID + 2, 1 * SEC, sleep, 1);
	send_end(PID + 2, 1 * SEC, 1 * SEC + 4000, 1, PERFD_OFFCPU_RUNNABLE);
	/* nothing known on the stack */
	send_stack(PID + 3, 1 * SEC, NULL, 0);
	send_end(PID + 3, 1 * SEC, 1 * SEC + 8000, 1, 1);
	cr_assert_eq(waited(WAIT_PIPE), 1000);
	cr_assert_eq(waited(WAIT_PAGE_FAULT), 2000);
	cr_assert_eq(waited(WAIT_CPU), 4000);
	cr_assert_eq(waited(WAIT_OTHER), 8000);
}

Test(offcpu, a_python_threads_gil_wait_is_its_class_and_its_gil_state_its_root)
{
	const uint64_t sleep[] = { K_NANOSLEEP + 4 };
	const uint32_t waiting = PERFD_SAMPLE_F_GIL_KNOWN | PERFD_SAMPLE_F_GIL_WAIT;

	/* blocked in the GIL's futex: the GIL's wait, whatever the kernel says */
	send_stack_flags(PID, 1 * SEC, NULL, 0, waiting);
	send_end(PID, 1 * SEC, 1 * SEC + 1000, 1, 1);
	/* preempted on its way into it: a wait for a CPU */
	send_stack_flags(PID + 1, 1 * SEC, NULL, 0, waiting);
	send_end(PID + 1, 1 * SEC, 1 * SEC + 2000, 1, PERFD_OFFCPU_RUNNABLE);
	/* asleep without it, and asleep holding it */
	send_stack_flags(PID + 2, 1 * SEC, sleep, 1, PERFD_SAMPLE_F_GIL_KNOWN);
	send_end(PID + 2, 1 * SEC, 1 * SEC + 4000, 1, 1);
	send_stack_flags(PID + 3, 1 * SEC, sleep, 1,
			 PERFD_SAMPLE_F_GIL_KNOWN | PERFD_SAMPLE_F_GIL_HELD);
	send_end(PID + 3, 1 * SEC, 1 * SEC + 8000, 1, 1);
	/* not Python: no GIL root */
	send_stack(PID + 4, 1 * SEC, sleep, 1);
	send_end(PID + 4, 1 * SEC, 1 * SEC + 16000, 1, 1);

	cr_assert_eq(waited_under(WAIT_GIL, FRAME_SPECIAL_GIL_WAITING), 1000);
	cr_assert_eq(waited_under(WAIT_CPU, FRAME_SPECIAL_GIL_WAITING), 2000);
	cr_assert_eq(waited_under(WAIT_SLEEP, FRAME_SPECIAL_GIL_RELEASED), 4000);
	cr_assert_eq(waited_under(WAIT_SLEEP, FRAME_SPECIAL_GIL_HELD), 8000);
	cr_assert_eq(waited(WAIT_SLEEP), 4000 + 8000 + 16000);
	cr_assert_eq(waited(-1), 31000);
}

Test(offcpu, an_end_without_its_stack_and_a_stack_without_its_end_are_counted)
{
	const uint64_t sleep[] = { K_NANOSLEEP + 4 };
	struct aggregator_stats st;

	/* the end of a block whose stack was lost */
	send_end(PID, 5 * SEC, 6 * SEC, 1, 1);
	/* a stack whose end was lost, then the thread's next block */
	send_stack(PID, 7 * SEC, sleep, 1);
	send_stack(PID, 8 * SEC, sleep, 1);
	send_end(PID, 8 * SEC, 8 * SEC + 500, 1, 1);
	/* an end older than the stack waiting: that stack waits on */
	send_stack(PID, 9 * SEC, sleep, 1);
	send_end(PID, 8 * SEC + 700, 9 * SEC, 1, 1);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.offcpu_ends_unmatched, 2);
	cr_assert_eq(st.offcpu_unmatched_ns, 1 * SEC + (1 * SEC - 700));
	cr_assert_eq(st.offcpu_stacks_replaced, 1);
	cr_assert_eq(st.offcpu_waiting, 1);
	cr_assert_eq(waited(WAIT_SLEEP), 500);
	send_end(PID, 9 * SEC, 9 * SEC + 100, 1, 1);
	cr_assert_eq(waited(WAIT_SLEEP), 600);
}

/* A tick charged to thread tid, switched out (no stack), of value periods,
 * fallen due at ts. */
static void send_switched_tick(uint32_t tid, uint64_t ts, uint64_t value)
{
	struct perfd_sample s = { .value_kind = PERFD_VALUE_CPU, .value = value,
				  .flags = PERFD_SAMPLE_F_SWITCHED, .page_size = 4096 };

	header(&s.hdr, PERFD_EVENT_SAMPLE, tid, ts);
	snprintf(s.comm, sizeof(s.comm), "waiter");
	cr_assert_eq(aggregator_ingest(agg, &s, sizeof(s)), 0);
}

struct exact_stack {
	const uint64_t *frames;
	uint16_t depth;
};

static bool cpu_keep(enum profile_kind kind, const struct stack *s, const void *ud)
{
	const struct exact_stack *e = ud;

	return kind == PROFILE_KIND_CPU && s->depth == e->depth &&
	       memcmp(s->frames, e->frames, e->depth * sizeof(*e->frames)) == 0;
}

/* The CPU periods of the process whose stack is exactly frames (leaf
 * first). */
static uint64_t cpu_at(const uint64_t *frames, uint16_t depth)
{
	return sum_where(cpu_keep, &(struct exact_stack){ frames, depth });
}

/* A tick that fell due just before its thread left the CPU is that
 * thread's CPU time, at the stack it left at (without the program's
 * frames, schedule's return as the off-CPU profile has it), when that stack
 * was sent; otherwise "[context switch]", counted either way; the block
 * itself is joined as ever. */
Test(offcpu, a_tick_due_at_a_switch_takes_the_stack_its_thread_left_at)
{
	const uint64_t sleep[] = { K_NANOSLEEP + 0x20 };
	const uint64_t at_switch[] = { frame_make(FRAME_MODULE_KERNEL, K_SCHEDULE + 0x10),
				       frame_make(FRAME_MODULE_KERNEL, K_NANOSLEEP + 0x20 - 1) };
	const uint64_t bare[] = { frame_make(FRAME_MODULE_SPECIAL, FRAME_SPECIAL_CONTEXT_SWITCH) };
	struct aggregator_stats st;

	send_stack(PID, 10 * SEC, sleep, 1);
	send_switched_tick(PID, 10 * SEC - 20000, 3);
	cr_assert_eq(cpu_at(at_switch, 2), 3, "the tick did not take the stack at the switch");
	cr_assert_eq(cpu_at(bare, 1), 0);
	/* no stack of that thread waits; one waits that began 2 ms after the
	 * tick, or before it: another switch's */
	send_switched_tick(PID + 1, 10 * SEC, 1);
	send_stack(PID + 2, 12 * SEC, sleep, 1);
	send_switched_tick(PID + 2, 12 * SEC - 2000000, 1);
	send_switched_tick(PID + 2, 12 * SEC + 1, 1);
	cr_assert_eq(cpu_at(bare, 1), 3);
	cr_assert_eq(cpu_at(at_switch, 2), 3);
	aggregator_get_stats(agg, &st);
	cr_assert_eq(st.switched_stacked, 3);
	cr_assert_eq(st.switched_bare, 3);
	cr_assert_eq(st.samples, 6);
	/* the block's stack still waits for its end, and goes in with it */
	send_end(PID, 10 * SEC, 10 * SEC + 1000, 1, 1);
	cr_assert_eq(waited(WAIT_SLEEP), 1000);
}

Test(offcpu, waiting_stacks_count_in_the_store_and_are_freed_with_it)
{
	const uint64_t sleep[] = { K_NANOSLEEP + 4 };
	struct aggregator_stats before, after;

	aggregator_get_stats(agg, &before);
	for (uint32_t t = 0; t < 100; t++)
		send_stack(PID + 100 + t, 1 * SEC, sleep, 1);
	aggregator_get_stats(agg, &after);
	cr_assert_eq(after.offcpu_waiting, 100);
	cr_assert_geq(after.memory_bytes - before.memory_bytes,
		      100 * sizeof(struct perfd_sample));
	/* teardown frees them: LSan says whether it did */
}

Test(waitclass, kernel_functions_say_why)
{
	cr_assert_eq(wait_class_of_function("do_nanosleep"), WAIT_SLEEP);
	cr_assert_eq(wait_class_of_function("futex_wait_queue"), WAIT_LOCK);
	cr_assert_eq(wait_class_of_function("sk_wait_data"), WAIT_NETWORK);
	cr_assert_eq(wait_class_of_function("do_epoll_wait"), WAIT_POLL);
	cr_assert_eq(wait_class_of_function("pipe_read"), WAIT_PIPE);
	cr_assert_eq(wait_class_of_function("anon_pipe_read"), WAIT_PIPE);
	cr_assert_eq(wait_class_of_function("io_schedule"), WAIT_DISK);
	cr_assert_eq(wait_class_of_function("do_wait"), WAIT_CHILD);
	cr_assert_eq(wait_class_of_function("schedule"), -1);
	cr_assert_eq(wait_class_of_function("do_nanosleepy"), -1);
	cr_assert_str_eq(wait_frame_name(WAIT_NETWORK), "[wait: network]");
	cr_assert_str_eq(wait_class_name(WAIT_PAGE_FAULT), "page fault");
}
