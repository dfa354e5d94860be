/* SPDX-License-Identifier: MIT */
/*
 * owners.h - what each owner holds of the store, and whose turn it is to
 * lose something when the store is full: the fair eviction policy of
 * the store (proctab.c).
 *
 * perfd serves every local user, and any of them can make it store more
 * (spawn processes, run code with ever new stacks).  Evicting the oldest
 * data of all, as a plain cache does, would let one user's churn push out
 * everybody's history.  So the store charges each process (its history,
 * its record) to its owner, the newest owner_uid of the process (api/auth.h;
 * root's and PERFD_OWNER_NONE's are owners like any other), and when it
 * must evict it takes from:
 *
 *  - the owner whose data is being admitted, when that owner holds more
 *    than a fair share (the mean of the owners holding something): a user
 *    past its share pays with its own history;
 *  - else the owner holding the most.
 *
 * So an owner holding less than the mean loses nothing while another holds
 * more; within the owner chosen, the oldest window goes first, then the
 * coldest process (proctab.c).  Memory and process slots are counted
 * apart (OWNER_BYTES, OWNER_PROCESSES): a new process takes a slot from the
 * owner with the most processes.  Stacks are shared between processes and
 * not charged to anyone: dropping an owner's windows is what frees the
 * stacks only it used.
 *
 * Cost: one pass over the processes per eviction step, into a map of
 * owners (the oldest-window search is such a pass already).
 */
#ifndef PERFD_OWNERS_H
#define PERFD_OWNERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"

enum owner_measure { OWNER_BYTES, OWNER_PROCESSES, OWNER_MEASURES };

struct owner_use {
	uint32_t owner;
	size_t held[OWNER_MEASURES];
	bool exhausted; /* nothing of it may go (pinned): not chosen again */
};

struct owner_tally {
	struct owner_use *use;
	size_t n, cap;
	struct u64map index; /* owner -> index in use */
};

void owner_tally_init(struct owner_tally *t);
void owner_tally_done(struct owner_tally *t);
/* Forgets every owner, keeping the memory for the next count. */
void owner_tally_reset(struct owner_tally *t);
/* Charges bytes and one process to owner.  Returns 0 or -ENOMEM. */
int owner_tally_add(struct owner_tally *t, uint32_t owner, size_t bytes);
/* owner's row, NULL when it holds nothing. */
struct owner_use *owner_tally_get(struct owner_tally *t, uint32_t owner);

/* The owner to take from for want of m, by the policy above: *admitter
 * (NULL: nobody in particular) when it holds more of m than the mean of
 * the owners, else the one holding the most (ties: the lowest uid).  Owners
 * marked exhausted are passed over, and do not count in the mean.  Returns
 * the row, or NULL when none is left; *ret_own tells whether it is the
 * admitter's. */
struct owner_use *owner_tally_victim(struct owner_tally *t, enum owner_measure m,
				     const uint32_t *admitter, bool *ret_own);

#endif
