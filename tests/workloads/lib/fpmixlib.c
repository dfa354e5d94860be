/*
 * fpmixlib.c - the library half of the fpmix workload, built without frame
 * pointers: rbp is a general register here, and while fpmix_hop calls back
 * into the executable it points at a decoy frame on this function's stack
 * (a zero saved rbp and a return address into fpmix_decoy), the way
 * optimized code leaves a pointer to a local in a callee-saved register.
 * A frame-pointer walk through this frame ends at fpmix_decoy; the
 * library's table restores the caller's rbp and goes on.
 */
#include <stdint.h>

#include "../workload.h"

uint64_t fpmix_hop(uint64_t seed, uint64_t (*callback)(uint64_t));
uint64_t fpmix_decoy(uint64_t seed);

__attribute__((noinline)) uint64_t fpmix_decoy(uint64_t seed)
{
	return seed * 3 + 1;
}

__attribute__((noinline)) uint64_t fpmix_hop(uint64_t seed, uint64_t (*callback)(uint64_t))
{
	volatile uint64_t decoy[2] = { 0, (uint64_t)(uintptr_t)fpmix_decoy + 4 };
	register volatile uint64_t *frame __asm__("rbp") = decoy;
	uint64_t r;

	/* frame is live in rbp across the call */
	__asm__ volatile("" : "+r"(frame));
	r = callback(seed);
	__asm__ volatile("" : : "r"(frame));
	return r + frame[0] + 1;
}
