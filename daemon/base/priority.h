/* SPDX-License-Identifier: MIT */
/*
 * priority.h - the nice values of perfd's threads: the loop and the
 * threads it waits for above the profiled workloads, the lanes that do
 * slow work on a process's behalf at the workloads' own.
 *
 * The loop answers status and takes every sample off the drain; a loop
 * that waits for a time slice behind the workloads answers late and, at
 * worst, loses samples.  Its own work is small and bounded (the CPU cost
 * of sampling), so it runs at PRIORITY_LOOP_NICE, and so do the threads
 * created from it that it waits for and whose work is as bounded (the
 * drain, the heap's lane, the state writer), which inherit it.
 *
 * The pools whose work a process's owner or a client chooses (symbols,
 * unwind tables, maps of many mappings, answers and exports being
 * encoded: any local user can ask for big snapshots) run at
 * PRIORITY_BACKGROUND_NICE (offload_opts.background): below the loop, so
 * that the loop still gets most of a CPU it shares with one of them, but
 * not below the workloads.  They share perfd's address space, and whatever maps or
 * unmaps memory (malloc growing an arena: mprotect, brk, mmap; a big
 * block freed: munmap) holds its lock: a lane starved while holding it
 * starves the loop's next malloc with it.  At nice 10 beside 24 nice-0
 * hogs on two CPUs, lanes held it 260-413 ms (mprotect, munmap) and the
 * loop waited in brk() 155-320 ms: status answers late, seen in CI.  At
 * nice 0 a held lock is given back within a time slice of the workloads'
 * (the longest hold in twelve such runs: 100 ms).
 *
 * Without CAP_SYS_NICE the loop cannot go below 0: every thread then runs
 * at the workloads' nice, which is only slower to answer under load.  A
 * perfd started above nice 0 (`nice -n 19 perfd`) was asked to stay below
 * the workloads: its threads are left as started.
 */
#ifndef PERFD_PRIORITY_H
#define PERFD_PRIORITY_H

#define PRIORITY_LOOP_NICE (-5)
#define PRIORITY_BACKGROUND_NICE 0

/* Sets the calling thread (the loop, before it starts any other) to
 * PRIORITY_LOOP_NICE, unless it started above PRIORITY_BACKGROUND_NICE.
 * 0, 1 when left as started, or -errno (without CAP_SYS_NICE: -EACCES). */
int priority_raise_loop(void);

/* Sets the calling thread (a lane) to PRIORITY_BACKGROUND_NICE, when
 * priority_raise_loop() set the loop's. */
void priority_lower_lane(void);

#endif
