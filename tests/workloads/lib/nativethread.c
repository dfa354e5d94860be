/*
 * nativethread.c - a native thread for a Python process to start through
 * ctypes (tests/workloads/python/native_thread.py): a raw pthread that
 * spins in C and never touches the interpreter, so it has no
 * PyThreadState.  Its kernel thread id is left in native_thread_tid.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "../workload.h"

volatile int native_thread_tid;

__attribute__((noinline)) uint64_t native_spin_work(uint64_t seed)
{
	return WORK_UNITS(seed, 10);
}

static void *spin(void *arg)
{
	volatile uint64_t sink = 0;

	(void)arg;
	native_thread_tid = gettid();
	for (;;)
		sink += native_spin_work(sink);
	return NULL;
}

/* Starts the thread; returns 0 or an errno. */
int start_native_thread(void)
{
	pthread_t t;

	return pthread_create(&t, NULL, spin, NULL);
}
