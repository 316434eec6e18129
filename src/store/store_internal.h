/*
 * The store layer's internals, shared by its files:
 *
 *   store.c   create/destroy, accessors, compact
 *   slot.c    the slot array, per-slot locks, emptying slots, discard
 *   io.c      put and get; the per-thread compression buffer
 *   same.c    same-filled pages: detection and filling
 *   policy.c  where a compressed page goes: pool, raw (huge) or rejected;
 *             the memory limit
 *   stats.c   counters (striped per thread), zm_store_stats, the printed
 *             mm_stat and table, the checker
 *
 * Lock order (outer first):
 *
 *     slot lock  ->  pool locks (inside zm_pool_map / zm_pool_read)
 *
 * A slot lock is one bit of the slot's info word.  It protects the slot's
 * handle and the rest of its info word; it is held only to read the slot
 * and decompress from the pool (get), or to swap in a new content (put,
 * discard).  zm_malloc and zm_free are never called with a slot lock held,
 * and no thread ever holds two slot locks.  Counters are atomics and need
 * no lock.
 */
#ifndef ZM_STORE_INTERNAL_H
#define ZM_STORE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/debug.h"
#include <zmem/codec.h>
#include <zmem/pool.h>
#include <zmem/store.h>

/*
 * A slot: 12 bytes (zram's table entry, handle + flags, takes 16).
 *
 *   info    bits  0..16  object length in the pool (1 .. 65536)
 *           bits 24..25  kind: ZM_STORE_SLOT_EMPTY/SAME/POOL/HUGE
 *           bit  31      the slot lock
 *   h[2]    the pool handle (POOL, HUGE), or the repeated 8-byte word
 *           (SAME), as two 32-bit halves so that the array packs without
 *           padding; 0 when empty.  Read and written only under the slot
 *           lock, so it needs no atomicity of its own.
 *
 * Every byte counts: the slot array is metadata on every page stored, and
 * on well compressing data (2 KiB a page) 4 bytes a slot is 0.2% of the
 * memory used.
 */
struct zm_slot {
	uint32_t info;     /* atomic; the rest of it under the slot lock */
	uint32_t h[2];     /* slot lock */
};

static inline uint64_t slot_handle(const struct zm_slot *slot)
{
	return (uint64_t)slot->h[1] << 32 | slot->h[0];
}

static inline void slot_set_handle(struct zm_slot *slot, uint64_t h)
{
	slot->h[0] = (uint32_t)h;
	slot->h[1] = (uint32_t)(h >> 32);
}

/* The slot array is reserved address space, touched only where written;
 * a bitmap with one bit per chunk of 256 slots (3 KiB of the array) says
 * which chunks were ever written, so that walks (discard, destroy,
 * the checker) skip the rest and never page it in. */
#define ZM_SLOT_CHUNK 256u

#define SLOT_LEN_MASK   0x1FFFFu
#define SLOT_KIND_SHIFT 24
#define SLOT_KIND_MASK  (3u << SLOT_KIND_SHIFT)
#define SLOT_LOCK       (1u << 31)

static inline unsigned slot_kind(uint32_t info)
{
	return (info & SLOT_KIND_MASK) >> SLOT_KIND_SHIFT;
}

static inline uint32_t slot_len(uint32_t info)
{
	return info & SLOT_LEN_MASK;
}

static inline uint32_t slot_info(unsigned kind, uint32_t len)
{
	return (kind << SLOT_KIND_SHIFT) | len;
}

/*
 * Counters, striped: each thread adds to the stripe it was given at its
 * first call (round robin), so two threads on a 2-core machine never share
 * a cache line.  Sums over stripes are the totals; a stripe may go
 * "negative" (an object freed by another thread than its writer), which
 * unsigned wrap-around makes harmless.
 */
#define ZM_STORE_STRIPES 16

enum zm_store_counter {
	C_PAGES,        /* slots holding a page */
	C_COMPR,        /* bytes of objects in the pool */
	C_OBJECTS,      /* objects in the pool */
	C_SAME,
	C_HUGE,
	C_HUGE_SINCE,
	C_FAILED_READS,
	C_FAILED_WRITES,
	C_REJECT_ZSIZE,
	C_REJECT_MEAN,
	C_LIMIT_FAILS,
	C_PUTS,
	C_GETS,
	C_DISCARDS,
	C_NR
};

struct zm_store_stripe {
	uint64_t c[C_NR];                       /* atomic */
	uint64_t hist[ZM_STORE_HIST_BUCKETS];   /* atomic */
} __attribute__((aligned(64)));

struct zm_store {
	/* immutable after create */
	struct zm_slot *slots;
	size_t slots_bytes;        /* reserved for the slot array */
	uint64_t *touched;         /* atomic bits: chunks ever written */
	size_t touched_bytes;      /* reserved for the bitmap */
	uint64_t nr_pages;
	size_t page_size;
	unsigned page_shift;
	struct zm_codec *codec;
	struct zm_pool *pool;
	bool same_filled;
	size_t huge_size;
	size_t max_zsize;
	size_t max_mean_zsize;
	size_t limit_bytes;
	/* atomics */
	uint64_t obj_bytes;        /* sum of object sizes, kept only with a
				      limit (limit_bytes != 0) */
	uint64_t used_max;         /* sampled high-water mark of pool_bytes */
	uint64_t touched_chunks;   /* bits set in touched */
	struct zm_store_stripe stripe[ZM_STORE_STRIPES];
};

/* slot.c */
int zm_slots_alloc(struct zm_store *s);
void zm_slots_free(struct zm_store *s);
void zm_slot_lock_slow(struct zm_slot *slot);
/* The first index in [i, end) whose chunk was ever written, or end. */
uint64_t zm_slot_next_touched(const struct zm_store *s, uint64_t i, uint64_t end);

/* Mark the chunk of index as written (before the slot is). */
static inline void zm_slot_touch(struct zm_store *s, uint64_t index)
{
	uint64_t chunk = index / ZM_SLOT_CHUNK, bit = 1ull << (chunk % 64);
	uint64_t *w = &s->touched[chunk / 64];

	if (zm_likely(__atomic_load_n(w, __ATOMIC_RELAXED) & bit))
		return;
	if (!(__atomic_fetch_or(w, bit, __ATOMIC_RELAXED) & bit))
		__atomic_fetch_add(&s->touched_chunks, 1, __ATOMIC_RELAXED);
}

/* Lock a slot; returns its info word (without the lock bit). */
static inline uint32_t zm_slot_lock(struct zm_slot *slot)
{
	uint32_t old = __atomic_fetch_or(&slot->info, SLOT_LOCK, __ATOMIC_ACQUIRE);

	if (zm_unlikely(old & SLOT_LOCK)) {
		zm_slot_lock_slow(slot);
		old = __atomic_load_n(&slot->info, __ATOMIC_RELAXED) & ~SLOT_LOCK;
	}
	return old;
}

/* Unlock, setting the info word to info (which must not have the lock
 * bit): one release store, since only the holder changes the word. */
static inline void zm_slot_unlock(struct zm_slot *slot, uint32_t info)
{
	__atomic_store_n(&slot->info, info, __ATOMIC_RELEASE);
}

/* Release what a slot held (its content is already unlinked from it): free
 * the object and adjust the counters.  Called without the slot lock. */
void zm_slot_release(struct zm_store *s, uint64_t handle, uint32_t info);

/* same.c */
bool zm_page_same_filled(const void *page, size_t len, uint64_t *word);
void zm_page_fill(void *page, size_t len, uint64_t word);

/* policy.c: what to do with a page compressed to zlen bytes (0 when it did
 * not fit below the cap given to the codec, zm_policy_cap()) */
enum zm_placement { ZM_PLACE_POOL, ZM_PLACE_HUGE, ZM_PLACE_REJECT_ZSIZE,
		    ZM_PLACE_REJECT_MEAN };
size_t zm_policy_cap(const struct zm_store *s);
enum zm_placement zm_policy_place(struct zm_store *s, size_t zlen);
/* Reserve size bytes against the limit; 0 or -ENOSPC. */
int zm_limit_charge(struct zm_store *s, size_t size);
void zm_limit_uncharge(struct zm_store *s, size_t size);

/* stats.c */
struct zm_store_stripe *zm_stripe(struct zm_store *s);

static inline void zm_count(struct zm_store_stripe *st, enum zm_store_counter c,
			    int64_t v)
{
	__atomic_fetch_add(&st->c[c], (uint64_t)v, __ATOMIC_RELAXED);
}

static inline unsigned zm_hist_bucket(const struct zm_store *s, uint32_t len)
{
	return (unsigned)(((uint64_t)(len - 1) * ZM_STORE_HIST_BUCKETS) >> s->page_shift);
}

/* Account a content entering (sign 1) or leaving (-1) a slot. */
void zm_account(struct zm_store *s, struct zm_store_stripe *st, uint32_t info, int sign);
uint64_t zm_counter_sum(const struct zm_store *s, enum zm_store_counter c);
/* Sample the pool's memory into used_max. */
void zm_sample_used(struct zm_store *s);

#endif
