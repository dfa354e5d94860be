/* SPDX-License-Identifier: MIT */
/*
 * tiers.h - what the BPF programs can be loaded to do, shared by
 * bpf/perfd.bpf.c and the daemon's loader (daemon/collect/sampler.c).
 *
 * The daemon loads the programs in tiers, each one less than the last
 * (tables, Python frames, memory growth; frame pointers at the bottom), and
 * settles on the first the kernel's verifier accepts.  The BPF side reads
 * which features a load has from read-only data set between open and load,
 * so the verifier never sees the code of a feature that is off.
 *
 * The refuse bits are a test-only knob (perfd --test-refuse): a program
 * loaded with a refused feature on carries an instruction the verifier
 * rejects, so that every step down the ladder can be made to happen on any
 * kernel, through the same path a real rejection takes.
 */
#ifndef PERFD_TIERS_H
#define PERFD_TIERS_H

enum perfd_refuse {
	PERFD_REFUSE_TABLES = 1 << 0,         /* user stacks walked with the unwind tables */
	PERFD_REFUSE_PYTHON = 1 << 1,         /* Python frames */
	PERFD_REFUSE_MEMORY = 1 << 2,         /* memory growth (on_rss_stat) */
	PERFD_REFUSE_FRAME_POINTERS = 1 << 3, /* the frame-pointer walk, the last tier */
	PERFD_REFUSE_OFFCPU = 1 << 4,         /* off-CPU time (on_switch_offcpu) */
};

#endif
