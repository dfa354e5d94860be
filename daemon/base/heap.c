/* SPDX-License-Identifier: MIT */
/*
 * heap.c - glibc malloc's arenas, one per thread; freed memory given back
 * and malloc's figures taken once a second, both on a lane of their own;
 * the figures published for status to read without a lock.
 *
 * Why not on the loop: mallinfo2() and malloc_trim() lock each of the
 * arenas in turn (one per thread: the lanes', the drain's), so the loop
 * that calls one sleeps whenever a lane holding its own arena's lock was
 * preempted; a nice-10 lane on a saturated host is preempted for tens of
 * milliseconds.  status took mallinfo2() and the maintenance pass
 * trimmed: with three nice-0 hogs on the 2 CPUs and the lanes busy
 * (tests/bench/loop-waits.py, 40 s at load 10-12), one such call on the
 * loop took up to 420 ms, and the loop slept 0.7-1.5 s of the 40 inside them.
 *
 * So one job on an offload lane (base/offload.h, one ordered lane) takes
 * the figures, trims when enough is free, publishes, and sleeps a period
 * with offload_sleep, for as long as perfd runs.  The loop submits nothing
 * (it is submitted once at start; a submit takes the lanes' mutex) and
 * only copies the published figures.  The lane runs at the loop's
 * priority (base/priority.h), not at a pool's, below it: while it walks
 * the loop's own arena it holds that arena's lock, and the loop's malloc
 * then waits for it; preempted below the loop it would make that wait
 * the inversion this file removes.  It allocates nothing, so it has no arena of its own.
 *
 * Publishing: two slots and a generation counter.  The lane fills the slot
 * readers are not sent to, then moves the generation to it (release).  A
 * reader copies the slot of the generation it read and keeps the copy if
 * the generation has not moved meanwhile: it never waits for the lane, and
 * copies again only when a publish fell inside its copy.  Every field is
 * a relaxed atomic, so a copy discarded that way was no data race.
 *
 * Cost: a thread and one wake-up a second; figures up to a period old
 * (status shows their age); a trim given back up to a period after the
 * pass that freed the memory.
 */
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "base/clock.h"
#include "base/heap.h"
#include "base/offload.h"
#include "perfd/macro.h"

/* An arena for each of perfd's threads (the loop, the drain, the lanes:
 * 10 today, of which the heap lane allocates nothing), with room: a
 * thread that has to share an arena shares its lock, and the loop waited
 * up to 117 ms in free() on the main arena
 * while a lane at nice 10 that held it was preempted on a busy host.
 * glibc's own limit is 8 per CPU, which a one-CPU guest would be under. */
#define HEAP_ARENAS 32
/* Blocks this big or bigger (the drain's 1 MiB chunks, symbol tables being
 * built, the unwinder's row arrays) are mmapped one each and unmapped when
 * freed.  Setting it also stops glibc from raising it to the size of the
 * biggest block freed so far (up to 32 MiB), after which such blocks
 * would be carved from the arenas and leave holes there when freed. */
#define HEAP_MMAP_THRESHOLD (256 << 10)

#define HEAP_FIGURES (sizeof(struct heap_stats) / sizeof(uint64_t))
_Static_assert(sizeof(struct heap_stats) == HEAP_FIGURES * sizeof(uint64_t),
	       "struct heap_stats is copied as an array of uint64_t");

struct slot {
	_Atomic uint64_t v[HEAP_FIGURES];
};

/* The published figures: slots[generation & 1]. */
static struct slot slots[2];
static _Atomic uint64_t generation;

/* The lane's job and what only the lane touches once it runs. */
static struct heap_job {
	struct offload_job job;
	unsigned period_ms;
	uint64_t trim_min_free_bytes;
	struct heap_stats last; /* counters carried from reading to reading */
} heap_job;
static struct offload *lane;

int heap_configure(void)
{
	/* mallopt returns 1 on success, 0 on error */
	if (mallopt(M_ARENA_MAX, HEAP_ARENAS) != 1 || mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD) != 1)
		return -EINVAL;
	return 0;
}

static void publish(const struct heap_stats *st)
{
	uint64_t g = atomic_load_explicit(&generation, memory_order_relaxed); /* one writer */
	struct slot *s = &slots[(g + 1) & 1];
	uint64_t v[HEAP_FIGURES];

	memcpy(v, st, sizeof(v));
	/* a reader that reads a value stored below sees generation g, not
	 * g - 1, when it checks again (it pairs with the reader's fence) */
	atomic_thread_fence(memory_order_release);
	for (size_t i = 0; i < HEAP_FIGURES; i++)
		atomic_store_explicit(&s->v[i], v[i], memory_order_relaxed);
	atomic_store_explicit(&generation, g + 1, memory_order_release);
}

void heap_get_stats(struct heap_stats *ret)
{
	uint64_t v[HEAP_FIGURES], g;

	do {
		g = atomic_load_explicit(&generation, memory_order_acquire);
		for (size_t i = 0; i < HEAP_FIGURES; i++)
			v[i] = atomic_load_explicit(&slots[g & 1].v[i], memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
	} while (atomic_load_explicit(&generation, memory_order_relaxed) != g);
	memcpy(ret, v, sizeof(v));
}

/* One pass: the figures, then, if trim, a trim when enough is free.  The
 * figures are those before the trim (one walk of the arenas, not two); the
 * counters include it. */
static void take(struct heap_job *h, bool trim)
{
	struct heap_stats *st = &h->last;
	struct mallinfo2 mi = mallinfo2();
	uint64_t start = now_monotonic_ns();

	st->in_use_bytes = mi.uordblks + mi.hblkhd;
	st->free_bytes = mi.fordblks;
	st->arena_bytes = mi.arena;
	st->mmapped_bytes = mi.hblkhd;
	st->readings++;
	st->as_of_ns = start;
	if (trim && mi.fordblks >= h->trim_min_free_bytes) {
		st->trims++;
		if (malloc_trim(0))
			st->trimmed++;
		if (now_monotonic_ns() - start > st->longest_trim_ns)
			st->longest_trim_ns = now_monotonic_ns() - start;
	}
	publish(st);
}

static void heap_run(struct offload_job *j)
{
	struct heap_job *h = container_of(j, struct heap_job, job);

	/* heap_start took the first figures */
	while (offload_sleep(j, h->period_ms))
		take(h, true);
}

/* The job is static: nothing to free when the lane stops. */
static void heap_job_free(struct offload_job *j)
{
}

int heap_start(unsigned period_ms, uint64_t trim_min_free_bytes)
{
	struct offload_opts opts = { .lanes = 1, .ordered = true, .name = "perfd-heap" };
	int r;

	heap_job = (struct heap_job){
		.job = { .run = heap_run, .free = heap_job_free },
		.period_ms = period_ms,
		.trim_min_free_bytes = trim_min_free_bytes,
	};
	/* the figures only: trims are the lane's */
	take(&heap_job, false);
	r = offload_new(&opts, &lane);
	if (r < 0)
		return r;
	r = offload_submit(lane, &heap_job.job);
	if (r < 0)
		lane = offload_free(lane);
	return r;
}

void heap_stop(void)
{
	lane = offload_free(lane);
}
