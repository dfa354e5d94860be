/* SPDX-License-Identifier: MIT */
/*
 * check.h - `perfd --check`: what this kernel lets perfd do, as `bpftool
 * feature probe` and `perf check` say it for theirs.  It loads the BPF
 * programs through the daemon's own path (collect/sampler.c, down the same
 * ladder of tiers), reads what the load says (collect/tiers.h), unloads
 * them, and prints one line per feature and one per program.  Nothing is
 * attached, nothing sampled; no socket, no other daemon state, and each
 * program is verified once (the counts are the load's own).
 */
#ifndef PERFD_CHECK_H
#define PERFD_CHECK_H

#include <stdio.h>

struct config;

/* Runs the check for cfg, printing to out.  Returns 0 when every feature
 * cfg asks for loads, 1 otherwise (also when nothing loads: the lines say
 * why). */
int check_run(const struct config *cfg, FILE *out);

#endif
