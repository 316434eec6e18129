/*
 * Internals of the workload layer:
 *
 *   generate.c  the generator: kinds, the tuning loop, stats
 *   text.c      one page of English-like text for a given mix
 *   vocab.c     the built-in vocabulary and its Zipf-like sampler
 *   capture.c   copying the memory of a live process
 *
 * No locks: a generator belongs to one thread; capture keeps its state on
 * the stack.
 */
#ifndef ZM_WORKLOAD_INTERNAL_H
#define ZM_WORKLOAD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/debug.h"
#include "base/rand.h"
#include "workload/workload.h"

/* splitmix64: seeds streams from (seed, page, stream) without correlation */
static inline uint64_t workload_mix(uint64_t x)
{
	return zmi_mix64(x + 0x9E3779B97F4A7C15ull);
}

/* xorshift64*: one stream of random numbers */
struct workload_rng {
	uint64_t s;
};

static inline void workload_rng_seed(struct workload_rng *r, uint64_t seed)
{
	r->s = workload_mix(seed) | 1;
}

static inline uint64_t workload_rng_next(struct workload_rng *r)
{
	return zmi_rand(&r->s);
}

/* uniform in [0, n), by multiplication (no division) */
static inline uint32_t workload_rng_below(struct workload_rng *r, uint32_t n)
{
	return (uint32_t)((workload_rng_next(r) >> 32) * n >> 32);
}

/* uniform in [0, 1) */
static inline double workload_rng_unit(struct workload_rng *r)
{
	return (double)(workload_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* The text mix knob, from most to least compressible:
 *   0..1  a fraction 1-k of sentences repeat an earlier one of the page
 *   1..2  a fraction k-1 of words are random letters and digits
 *   2..3  as 2, with a fraction k-2 of their characters drawn from all of
 *         printable ASCII */
#define WORKLOAD_TEXT_KNOB_MAX 3.0

/* Fill buf[0..len) with text for this mix; the same seed and knob give the
 * same bytes, and nearby knobs give mostly the same words. */
void text_page(uint64_t seed, double knob, char *buf, size_t len);

/* The vocabulary: a word drawn with probability ~ 1/(rank + 2.7). */
const char *vocab_word(struct workload_rng *r, size_t *len);

#endif
