/*
 * The random numbers of zmem: one generator, xorshift64* (Marsaglia's
 * xorshift with Vigna's multiplier), for the workload's pages, the
 * benchmarks' sequences and the tests' steps; and one mixer, splitmix64's
 * finaliser, for numbers that must follow from an index.
 *
 * The state is the caller's uint64_t, and so is the seeding: each caller
 * turns its seed into a first state its own way (the workload through
 * zmi_mix64, the tests by a multiply, the benchmarks by a constant), and
 * keeps doing so, because fixed seeds must keep giving the same numbers:
 * tests replay with --seed N and compare figures within tolerances, and
 * a workload's bytes are part of what a benchmark measures.  The state
 * must never be 0 (the generator would stay there).
 */
#ifndef ZM_BASE_RAND_H
#define ZM_BASE_RAND_H

#include <stdint.h>

/* the next number of the stream whose state is *s (nonzero) */
static inline uint64_t zmi_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

/* splitmix64's finaliser: a well-mixed 64-bit number from x, the same
 * for the same x */
static inline uint64_t zmi_mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

#endif
