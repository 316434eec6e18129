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
 * A slot lock is one bit of the slot's word.  It protects the slot's
 * info and which object its key holds; it is held to read the slot and
 * decompress from the pool (get), or to swap in a new content (put,
 * discard: the old object is freed and the new one bound to the key under
 * it).  The pool never calls back into the store, so any pool call may be
 * made under a slot lock; zm_pool_alloc (and the compression before it) is not,
 * to keep the lock short.  No thread ever holds two slot locks.  Counters
 * are atomics and need no lock.
 */
#ifndef ZM_STORE_INTERNAL_H
#define ZM_STORE_INTERNAL_H

#define ZMEM_ADVANCED  /* the advanced tier of the headers */
#include <stdbool.h>
#include <stdint.h>

#include "base/abi.h"
#include "base/debug.h"
#include "base/lazy.h"
#include <zmem/codec.h>
#include <zmem/pool.h>
#include <zmem/store.h>

/* The published layouts' ends (base/abi.h): never change these when a
 * field is added; a struct as small as these is still accepted. */
#define ZMI_STORE_CONFIG_MIN zmi_size_upto(struct zm_store_config, max_mean_zsize)
#define ZMI_STORE_STATS_MIN zmi_size_upto(struct zm_store_stats, hist)

/*
 * A slot: one 64-bit word, shared with the pool as its owner word
 * (pool.h): where the page's object is, in the pool's bits, and the
 * slot's own 20 bits (ZM_POOL_OWNER_MASK, bits 2..21), here called its
 * info and kept shifted down to bit 0:
 *
 *   info    bit   0      the slot lock
 *           bits  1..2   kind: ZM_STORE_SLOT_EMPTY/SAME/POOL/HUGE
 *           bits  3..19  POOL, HUGE: object length in the pool (1 .. 65536);
 *                        SAME: 1 when the fill word is in same_val[], 0
 *                        for a zero page
 *
 * The pool rewrites its bits whenever it moves the object (compaction),
 * with a compare-and-swap; we change ours only with atomic
 * read-modify-writes (fetch_or to lock, fetch_xor to unlock and set), so
 * neither loses the other's update.  The object's handle is
 * zm_pool_key_handle(pool, index).
 *
 * 8 bytes a slot, all-in: zram's table entry (handle + flags) takes 16
 * and its handle another 8 in zsmalloc; before owner words this was a
 * 12-byte slot and the pool's 8-byte handle slot.  On process memory
 * (2 KiB a page compressed) each 4 bytes a page is 0.2% of the memory
 * used.
 */
#define SLOT_INFO_SHIFT 2
#define SLOT_LOCK       1u
#define SLOT_KIND_SHIFT 1
#define SLOT_KIND_MASK  (3u << SLOT_KIND_SHIFT)
#define SLOT_LEN_SHIFT  3
#define SLOT_LEN_MASK   0x1FFFFu

_Static_assert(((uint64_t)(SLOT_LEN_MASK << SLOT_LEN_SHIFT | SLOT_KIND_MASK | SLOT_LOCK)
		<< SLOT_INFO_SHIFT) == ZM_POOL_OWNER_MASK, "the info fills the owner bits");

/* The slot array is a lazy array (base/lazy.h): reserved address space,
 * touched only where written, with a bitmap of its pages ever written so
 * that walks (discard, destroy, the checker) skip the rest and never page
 * it in.  Non-zero fill words of same-filled pages live beside the slots,
 * in a lazy array as long, touched only where such a page is stored. */

static inline unsigned slot_kind(uint32_t info)
{
	return (info & SLOT_KIND_MASK) >> SLOT_KIND_SHIFT;
}

static inline uint32_t slot_len(uint32_t info)
{
	return (info >> SLOT_LEN_SHIFT) & SLOT_LEN_MASK;
}

static inline uint32_t slot_info(unsigned kind, uint32_t len)
{
	return (kind << SLOT_KIND_SHIFT) | (len << SLOT_LEN_SHIFT);
}

static inline uint32_t word_info(uint64_t w)
{
	return (uint32_t)((w & ZM_POOL_OWNER_MASK) >> SLOT_INFO_SHIFT);
}

/*
 * Counters, striped: each thread adds to the stripe it was given at its
 * first call (round robin), so two threads on a 2-core machine never share
 * a cache line.  Sums over stripes are the totals; a stripe may go
 * "negative" (an object freed by another thread than its writer), which
 * unsigned wrap-around makes harmless.
 */
#define ZM_STORE_STRIPES 16

enum zmi_store_counter {
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

struct zmi_store_stripe {
	uint64_t c[C_NR];                       /* atomic */
	uint64_t hist[ZM_STORE_HIST_BUCKETS];   /* atomic */
} __attribute__((aligned(64)));

struct zm_store {
	/* immutable after create */
	uint64_t *slots;           /* the slot words, also the pool's owner words
				      (slot_arr's elements) */
	uint64_t *same_val;        /* fill words of same-filled pages (len 1;
				      same_arr's elements) */
	struct zmi_lazy slot_arr, same_arr;
	uint64_t nr_pages;
	size_t page_size;
	unsigned page_shift;
	struct zm_codec *codec;
	struct zm_pool *pool;
	bool same_filled;
	size_t huge_size;
	size_t max_zsize;
	size_t max_mean_zsize;
	size_t limit_max;          /* the limit at create (0: none): the most
				      zm_store_set_limit may set */
	size_t limit_bytes;        /* atomic: the limit now; 0 = none */
	/* atomics */
	uint64_t used_max;         /* sampled high-water mark of pool_bytes */
	struct zmi_store_stripe stripe[ZM_STORE_STRIPES];
};

/* slot.c */
int zmi_slots_alloc(struct zm_store *s);
void zmi_slots_free(struct zm_store *s);
void zmi_slot_lock_slow(uint64_t *w);
/* The first index in [i, end) whose slot page was ever written, or end. */
static inline uint64_t zmi_slot_next_touched(const struct zm_store *s, uint64_t i,
					    uint64_t end)
{
	return zmi_lazy_next(&s->slot_arr, i, end);
}

/* Lock slot index; returns its info (without the lock bit). */
static inline uint32_t zmi_slot_lock(struct zm_store *s, uint64_t index)
{
	uint64_t *w = &s->slots[index];
	uint64_t old = __atomic_fetch_or(w, (uint64_t)SLOT_LOCK << SLOT_INFO_SHIFT,
					 __ATOMIC_ACQUIRE);

	if (zmi_unlikely(word_info(old) & SLOT_LOCK)) {
		zmi_slot_lock_slow(w);
		old = __atomic_load_n(w, __ATOMIC_RELAXED);
	}
	return word_info(old) & ~SLOT_LOCK;
}

/* Unlock, changing the info from `held` (what zmi_slot_lock returned, the
 * slot unchanged since) to `info` (without the lock bit): one xor, which
 * leaves the pool's bits alone. */
static inline void zmi_slot_unlock(struct zm_store *s, uint64_t index, uint32_t held,
				  uint32_t info)
{
	__atomic_fetch_xor(&s->slots[index],
			   (uint64_t)((held | SLOT_LOCK) ^ info) << SLOT_INFO_SHIFT,
			   __ATOMIC_RELEASE);
}

/* The pool handle of a slot holding a POOL or HUGE page. */
static inline zm_handle_t zmi_slot_handle(struct zm_store *s, uint64_t index)
{
	return zm_pool_key_handle(s->pool, index);
}

/* The fill word of a locked SAME slot. */
static inline uint64_t zmi_slot_same_word(const struct zm_store *s, uint64_t index,
					 uint32_t info)
{
	return slot_len(info) ? s->same_val[index] : 0;
}

/* Free the pool object of a locked slot whose info is `info`, if it has
 * one (the slot's info is the caller's to change). */
void zmi_slot_free_object(struct zm_store *s, uint64_t index, uint32_t info);

/* Empty slot index (lock, free, unlock, count): discard and destroy. */
void zmi_slot_clear(struct zm_store *s, uint64_t index);

/* Set a locked slot's fill word (a SAME page); returns the info's length
 * field for it (0 or 1). */
uint32_t zmi_slot_set_same(struct zm_store *s, uint64_t index, uint64_t word);

/* Count out what a slot held (already emptied). */
void zmi_slot_release(struct zm_store *s, uint32_t info);

/* same.c */
bool zmi_page_same_filled(const void *page, size_t len, uint64_t *word);
void zmi_page_fill(void *page, size_t len, uint64_t word);

/* policy.c: what to do with a page compressed to zlen bytes (0 when it did
 * not fit below the cap given to the codec, zmi_policy_cap()) */
enum zmi_placement { ZM_PLACE_POOL, ZM_PLACE_HUGE, ZM_PLACE_REJECT_ZSIZE,
		    ZM_PLACE_REJECT_MEAN };
size_t zmi_policy_cap(const struct zm_store *s);
enum zmi_placement zmi_policy_place(struct zm_store *s, size_t zlen);
/* Would an object of size bytes fit the limit?  0 or -ENOSPC. */
int zmi_limit_check(struct zm_store *s, size_t size);

/* stats.c */
struct zmi_store_stripe *zmi_stripe(struct zm_store *s);

static inline void zmi_count(struct zmi_store_stripe *st, enum zmi_store_counter c,
			    int64_t v)
{
	__atomic_fetch_add(&st->c[c], (uint64_t)v, __ATOMIC_RELAXED);
}

static inline unsigned zmi_hist_bucket(const struct zm_store *s, uint32_t len)
{
	return (unsigned)(((uint64_t)(len - 1) * ZM_STORE_HIST_BUCKETS) >> s->page_shift);
}

/* Account a content entering (sign 1) or leaving (-1) a slot. */
void zmi_account(struct zm_store *s, struct zmi_store_stripe *st, uint32_t info, int sign);
uint64_t zmi_counter_sum(const struct zm_store *s, enum zmi_store_counter c);
/* Sample the pool's memory into used_max. */
void zmi_sample_used(struct zm_store *s);

#endif
