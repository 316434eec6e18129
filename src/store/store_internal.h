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
 *   scan.c    finding the stored pages (zm_store_next_used)
 *   idle.c    idle tracking: the marks and pages' ages
 *   recompress.c  re-encoding pages with the secondary codec
 *   backing.c the backing file's I/O
 *   backing_nbd.c  the backing store on an NBD export (libnbd)
 *   clean.c   the packed file's cleaner: pages moved out of sparse blocks
 *   writeback.c   pages to and from the backing file; reclaim at the limit
 *   tier.c    automatic tiering on the process's worker
 *   unit.c    multi-page units: put_range, a page's get from its unit,
 *             pages leaving units, splits
 *
 * Lock order (outer first):
 *
 *     wb_lock -> mark_lock -> slot lock -> pool locks (inside zm_pool_*)
 *     recomp_lock -> slot lock
 *     recomp_lock -> wb_lock -> mark_lock (the checker takes them all; a
 *                                          recompression in a full pool
 *                                          takes wb_lock to write back)
 *
 * A slot lock is one bit of the slot's word, and its waiters spin: it is
 * never held across a system call that can block.  It protects the slot's
 * info and which object its key holds; it is held to read the slot and
 * decompress from the pool (get), or to swap in a new content (put,
 * discard: the old object is freed and the new one bound to the key under
 * it).  A get of a page on the backing file marks the slot BUSY and drops
 * the lock for the read; a get, put or discard that finds the slot BUSY
 * waits, asleep, on busy_cond until the read is over
 * (zmi_store_slot_lock_ready), and no one else changes a FILE slot.  The pool never calls back into the store, so any pool call may be
 * made under a slot lock (a get's decoding callback makes none); the
 * compression before a put is not, to keep the lock short.  No thread ever holds two slot locks (a unit's lock is
 * not a slot lock: it is taken under its page's).  Counters
 * are atomics and need no lock.
 */
#ifndef ZM_STORE_INTERNAL_H
#define ZM_STORE_INTERNAL_H

#define ZMEM_ADVANCED  /* the advanced tier of the headers */
#include <pthread.h>
#include <sys/types.h>
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
 *   bit  0       the slot lock
 *   bit  1       idle: marked by zm_store_mark_idle, cleared by any access
 *   bit  2       POOL: a compressed object in the pool; then
 *     bit  3       encoded with the secondary codec (recompressed)
 *     bits 4..19   the object's length, 1 .. 65535 (a compressed page is
 *                  shorter than huge_size <= page_size <= 65536)
 *   bit  2 clear: bits 3..4 say what else the slot holds:
 *     0 EMPTY      nothing (the whole info is 0); with bit 5 set, UNIT:
 *                  one page of a unit, whose record (struct zmi_store_unit)
 *                  same_val[] points to (unit.c)
 *     1 SAME       same-filled; bit 5 set when the fill word is in
 *                  same_val[] (clear: a zero page)
 *     2 HUGE       a raw page in the pool; bit 5: incompressible (the
 *                  secondary codec could not shrink it either)
 *     3 FILE       written back; same_val[] holds where and how (FILE_*);
 *                  bit 5 (SLOT_BUSY): a get is reading it from the file
 *
 * The pool rewrites its bits whenever it moves the object (compaction),
 * with a compare-and-swap; we change ours only with atomic
 * read-modify-writes (fetch_or to lock, fetch_xor to unlock and set), so
 * neither loses the other's update.  The object's handle is
 * zm_pool_key_handle(pool, index).  A FILE slot has no object: its pool
 * bits are those of an empty key.
 *
 * The idle bit costs the hot paths nothing: a put writes a new info
 * without it, a get clears it in the xor that unlocks.
 *
 * 8 bytes a slot, all-in: zram's table entry (handle + flags) takes 16
 * and its handle another 8 in zsmalloc.  On process memory (2 KiB a page
 * compressed) each 4 bytes a page is 0.2% of the memory used.
 */
#define SLOT_INFO_SHIFT 2
#define SLOT_LOCK       1u
#define SLOT_IDLE       (1u << 1)
#define SLOT_POOL       (1u << 2)
#define SLOT_SEC        (1u << 3)   /* POOL: the secondary codec's */
#define SLOT_LEN_SHIFT  4
#define SLOT_LEN_MASK   0xFFFFu
#define SLOT_SUB_SHIFT  3
#define SLOT_SUB_MASK   (3u << SLOT_SUB_SHIFT)
#define SLOT_FLAG       (1u << 5)   /* SAME: word in same_val; HUGE: incompressible */
#define SLOT_BUSY       SLOT_FLAG   /* FILE: a get is reading it */
#define SLOT_INFO_UNIT  SLOT_FLAG   /* EMPTY's sub-kind with the flag */

enum { SUB_EMPTY, SUB_SAME, SUB_HUGE, SUB_FILE };

_Static_assert(((uint64_t)(SLOT_LEN_MASK << SLOT_LEN_SHIFT | SLOT_SEC | SLOT_POOL | SLOT_IDLE |
			   SLOT_LOCK) << SLOT_INFO_SHIFT) == ZM_POOL_OWNER_MASK,
	       "the info fills the owner bits");

/* A FILE slot's same_val[] word: the page is FILE_LEN bytes at offset
 * FILE_OFF in the backing file (backing.c), compressed (with the
 * secondary codec if FILE_SEC) or raw (FILE_RAW, page_size bytes). */
#define FILE_LEN_MASK   0x1FFFFull
#define FILE_SEC        (1ull << 17)
#define FILE_RAW        (1ull << 18)
#define FILE_OFF_SHIFT  19          /* 45 bits: 32 TiB */

static inline uint64_t file_off(uint64_t rec)
{
	return rec >> FILE_OFF_SHIFT;
}

/* The slot array is a lazy array (base/lazy.h): reserved address space,
 * touched only where written, with a bitmap of its pages ever written so
 * that walks (discard, destroy, the checker) skip the rest and never page
 * it in.  Non-zero fill words of same-filled pages live beside the slots,
 * in a lazy array as long, touched only where such a page is stored. */

/* The public kind (ZM_STORE_SLOT_*) of an info. */
static inline unsigned slot_kind(uint32_t info)
{
	static const unsigned sub_kind[4] = { ZM_STORE_SLOT_EMPTY, ZM_STORE_SLOT_SAME,
					      ZM_STORE_SLOT_HUGE, ZM_STORE_SLOT_FILE };

	if (info & SLOT_POOL)
		return ZM_STORE_SLOT_POOL;
	if ((info & (SLOT_SUB_MASK | SLOT_FLAG)) == SLOT_INFO_UNIT)
		return ZM_STORE_SLOT_UNIT;
	return sub_kind[(info & SLOT_SUB_MASK) >> SLOT_SUB_SHIFT];
}

/* The length of a POOL slot's object. */
static inline uint32_t slot_pool_len(uint32_t info)
{
	return (info >> SLOT_LEN_SHIFT) & SLOT_LEN_MASK;
}

static inline uint32_t slot_info_pool(uint32_t len, bool secondary)
{
	return SLOT_POOL | (secondary ? SLOT_SEC : 0) | (len << SLOT_LEN_SHIFT);
}

static inline uint32_t slot_info_sub(unsigned sub, bool flag)
{
	return ((uint32_t)sub << SLOT_SUB_SHIFT) | (flag ? SLOT_FLAG : 0);
}

/* Is the slot one page of a unit? */
static inline bool slot_is_unit(uint32_t info)
{
	return !(info & SLOT_POOL) && (info & (SLOT_SUB_MASK | SLOT_FLAG)) == SLOT_INFO_UNIT;
}

/* Does the slot hold an object in the pool (POOL or HUGE)? */
static inline bool slot_in_pool(uint32_t info)
{
	return (info & SLOT_POOL) ||
	       (info & SLOT_SUB_MASK) == ((uint32_t)SUB_HUGE << SLOT_SUB_SHIFT);
}

/* Is the slot one the cold-data work looks at: an object in the pool or
 * a page of a unit (in memory or on file: zmi_store_pick tells)? */
static inline bool slot_cold(uint32_t info)
{
	return slot_in_pool(info) || slot_is_unit(info);
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
	C_SECONDARY,    /* POOL pages of the secondary codec */
	C_INCOMPRESSIBLE,
	C_RECOMP,       /* pages re-encoded smaller, ever */
	C_RECOMP_SAVED, /* bytes that saved */
	C_RECOMP_TRIED,
	C_FILE,         /* pages on the backing file (bd_count) */
	C_FILE_BYTES,
	C_BD_READS,
	C_BD_WRITES,
	C_WB_FAILS,
	C_POOL_ERRORS,  /* zm_pool_bind or zm_pool_free_key failed */
	C_UNITS,        /* units in memory */
	C_UNIT_PAGES,   /* pages in them */
	C_UNIT_BYTES,   /* their compressed bytes (also in C_COMPR) */
	C_UNIT_SAVED,
	C_UNIT_META,    /* bytes of their records (malloc) */
	C_UNITS_FORMED,
	C_UNITS_DECLINED,
	C_UNIT_SPLITS,
	C_CLEAN_RUNS,   /* cleaner runs that moved something */
	C_CLEAN_BYTES,  /* bytes they moved */
	C_WB_WAITS,     /* puts at the limit that waited for the writer */
	C_WB_WAIT_NS,   /* the time they waited */
	C_WB_WAKEUPS,   /* the writer's rounds (writeback.c) */
	C_RECLAIM_POOL, /* puts that found the pool's pages full (zmi_store_reclaim) */
	C_RECLAIM_SYNC, /* reclaims a put ran itself (reclaim_sync) */
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
	unsigned unit_pages;       /* 1: no units (unit.c) */
	unsigned unit_min_saving;  /* percent */
	size_t limit_max;          /* the limit at create (0: none): the most
				      zm_store_set_limit may set */
	size_t limit_bytes;        /* atomic: the limit now; 0 = none */
	/* atomics */
	uint64_t used_max;         /* sampled high-water mark of pool_bytes */
	struct zmi_store_stripe stripe[ZM_STORE_STRIPES];

	/* units (unit.c): what a unit saved over its pages alone, learnt
	 * from units measured both ways, by how well the unit compressed
	 * (UNIT_EST_BUCKETS of len / bytes in): atomics */
	uint64_t unit_est[16][2];  /* [bucket][0: unit bytes, 1: alone bytes] */
	unsigned unit_count;       /* atomic: units tried (which to measure) */
	unsigned unit_declines;    /* atomic: units in a row that did not pay */
	unsigned unit_skip;        /* atomic: groups to store page by page
				      before the next try */

	/* cold data (idle.c, recompress.c, backing.c, writeback.c, tier.c) */
	struct zm_codec *codec2;   /* the secondary codec; NULL = none */
	uint8_t *age;              /* per slot: the mark that first found an
				      idle page idle (age_arr's elements;
				      valid while the slot's idle bit is set,
				      written under its lock) */
	struct zmi_lazy age_arr;
	pthread_mutex_t mark_lock; /* one mark at a time */
	unsigned epoch;            /* atomic: the last mark's number (mod 256) */
	uint64_t mark_ns[256];     /* atomics: when mark e was made */
	uint64_t idle_cutoff_ns;   /* atomic: PICK_IDLE takes pages idle since
				      a mark made at or before this */
	uint64_t idle_count;       /* atomic: pages idle at the last mark */

	int bfd;                   /* backing file; -1 = none */
	pid_t bfd_pid;             /* the process that opened it: in a forked
				      child the store is detached from it
				      (zmi_store_has_file) */
	struct zmi_store_file_space *space; /* where pages go in it (backing.c) */
	struct zmi_store_nbd *nbd; /* the backing store is an NBD export
				      instead of a file (backing_nbd.c);
				      NULL = none */
	bool bfd_own;              /* opened by the store (closed at destroy) */
	bool readback;
	bool destroying;           /* destroy: leave the file's holes be */
	uint64_t wb_left;          /* atomic: pages writeback_limit allows;
				      UINT64_MAX = no limit */
	pthread_mutex_t wb_lock;   /* one writeback at a time: wb_hand, wb_buf */
	uint64_t wb_hand;          /* the reclaim's clock hand */
	uint64_t clean_hand;       /* the cleaner's (clean.c), under wb_lock */
	char *wb_buf;              /* ZMI_WB_BATCH_BYTES, at least page_size:
				      a writeback's batch (writeback.c) */
	int bcache;                /* ZM_STORE_CACHE_*: how the file's pages
				      leave the page cache (backing.c) */
	uint64_t wb_lo, wb_hi;     /* the range written since the last drop
				      (wb_lock); wb_lo == wb_hi: none */
	struct zmi_store_writer *writer; /* the background writer (writeback.c);
					    NULL: none (no file, or writeback_sync) */

	pthread_mutex_t recomp_lock; /* one recompression at a time: rc_buf */
	char *rc_buf;              /* 3 * page_size: object, page, result */
	uint64_t recomp_holes;     /* bytes runs saved since the last
				      compaction for them (recomp_lock) */

	struct zmi_store_tier *tier; /* automatic tiering; NULL = off */
	struct zmi_store_cleaner *cleaner; /* automatic file cleaning (clean.c);
					      NULL = off */

	pthread_mutex_t busy_lock; /* with busy_cond: waiting for a BUSY slot */
	pthread_cond_t busy_cond;  /* broadcast when a slot stops being BUSY */
};

/* slot.c */
int zmi_store_slots_alloc(struct zm_store *s);
void zmi_store_slots_free(struct zm_store *s);
void zmi_store_slot_lock_slow(uint64_t *w);
/* The first index in [i, end) whose slot page was ever written, or end. */
static inline uint64_t zmi_store_slot_next_touched(const struct zm_store *s, uint64_t i,
						   uint64_t end)
{
	return zmi_lazy_next(&s->slot_arr, i, end);
}

/* Lock slot index; returns its info (without the lock bit). */
static inline uint32_t zmi_store_slot_lock(struct zm_store *s, uint64_t index)
{
	uint64_t *w = &s->slots[index];
	uint64_t old = __atomic_fetch_or(w, (uint64_t)SLOT_LOCK << SLOT_INFO_SHIFT,
					 __ATOMIC_ACQUIRE);

	if (zmi_unlikely(word_info(old) & SLOT_LOCK)) {
		zmi_store_slot_lock_slow(w);
		old = __atomic_load_n(w, __ATOMIC_RELAXED);
	}
	return word_info(old) & ~SLOT_LOCK;
}

/* Lock slot index if no one holds it: true and its info in *info, or
 * false (the word unchanged: the lock bit was set already). */
static inline bool zmi_store_slot_trylock(struct zm_store *s, uint64_t index, uint32_t *info)
{
	uint64_t old = __atomic_fetch_or(&s->slots[index], (uint64_t)SLOT_LOCK << SLOT_INFO_SHIFT,
					 __ATOMIC_ACQUIRE);

	*info = word_info(old) & ~SLOT_LOCK;
	return !(word_info(old) & SLOT_LOCK);
}

/* Is a slot of this info BUSY: a page on file being read by a get? */
static inline bool slot_busy(uint32_t info)
{
	const uint32_t file = (uint32_t)SUB_FILE << SLOT_SUB_SHIFT;

	return (info & (SLOT_POOL | SLOT_SUB_MASK | SLOT_BUSY)) == (file | SLOT_BUSY);
}

/* Sleep until slot index is not BUSY (no slot lock held). */
void zmi_store_slot_wait(struct zm_store *s, uint64_t index);
/* Wake the threads waiting for a slot that stopped being BUSY. */
void zmi_store_slot_wake(struct zm_store *s);

/* Unlock, changing the info from `held` (what zmi_store_slot_lock returned, the
 * slot unchanged since) to `info` (without the lock bit): one xor, which
 * leaves the pool's bits alone. */
static inline void zmi_store_slot_unlock(struct zm_store *s, uint64_t index, uint32_t held,
					 uint32_t info)
{
	__atomic_fetch_xor(&s->slots[index],
			   (uint64_t)((held | SLOT_LOCK) ^ info) << SLOT_INFO_SHIFT,
			   __ATOMIC_RELEASE);
}

/* Lock slot index once it is not BUSY (a get, put or discard, which
 * would read or free the page on file being read); returns its info. */
bool zmi_store_has_file(const struct zm_store *s); /* backing.c */
static inline uint32_t zmi_store_slot_lock_ready(struct zm_store *s, uint64_t index)
{
	for (;;) {
		uint32_t info = zmi_store_slot_lock(s, index);

		/* BUSY in a forked child: its parent's reader is not there
		 * to end it, and the child is detached from the file: the
		 * slot is a FILE slot to it (a get of it answers -EIO) */
		if (zmi_likely(!slot_busy(info)) || !zmi_store_has_file(s))
			return info;
		zmi_store_slot_unlock(s, index, info, info);
		zmi_store_slot_wait(s, index);
	}
}

/* The pool handle of a slot holding a POOL or HUGE page. */
static inline zm_handle_t zmi_store_slot_handle(struct zm_store *s, uint64_t index)
{
	return zm_pool_key_handle(s->pool, index);
}

/* The fill word of a locked SAME slot. */
static inline uint64_t zmi_store_slot_same_word(const struct zm_store *s, uint64_t index,
						uint32_t info)
{
	return (info & SLOT_FLAG) ? s->same_val[index] : 0;
}

/* The codec that encoded a POOL slot's object. */
static inline struct zm_codec *zmi_store_slot_codec(const struct zm_store *s, uint32_t info)
{
	return (info & SLOT_SEC) ? s->codec2 : s->codec;
}

/* The bytes a locked slot's content takes where it is: its object's
 * length (page_size when raw), its length on file, 0 for EMPTY/SAME. */
uint32_t zmi_store_slot_len(const struct zm_store *s, uint64_t index, uint32_t info);

/* Free the pool object or the file space of a locked slot whose info is
 * `info`, if it has one (the slot's info is the caller's to change).
 * 0, or -EIO when the pool refused to free the key's object (counted in
 * pool_errors): the slot must then be left as it is. */
int zmi_store_slot_free_object(struct zm_store *s, uint64_t index, uint32_t info);

/* Give object h to locked slot index's key (which holds nothing).  0, or
 * -EIO when the pool refused (counted in pool_errors): h is still the
 * caller's to free. */
int zmi_store_slot_bind(struct zm_store *s, zm_handle_t h, uint64_t index);

/* Locked slot index, whose info is old (its content old_len bytes),
 * gives up its object for h (0: none; a SAME or EMPTY content is the
 * caller's to set).  0: the old object freed and h bound, the slot still
 * locked.  -EIO (counted in pool_errors): the slot unlocked, as it was
 * when the pool kept the old object, EMPTY when it did not take h; h is
 * still the caller's to free. */
int zmi_store_slot_swap(struct zm_store *s, uint64_t index, uint32_t old, uint32_t old_len,
			zm_handle_t h);

/* Locked slot index, whose info is old (its content old_len bytes),
 * takes size bytes of buf as its new object in one pool call
 * (zm_pool_put_key), its old object freed in it, or its old content
 * (a unit's page, a page on file) after it.  0: the slot still locked,
 * its info the caller's to set.  -ENOMEM: no room, nothing changed, the
 * slot still locked.  -EIO (counted in pool_errors): the slot unlocked,
 * as it was when the pool kept the old object, EMPTY when it did not. */
int zmi_store_slot_put(struct zm_store *s, uint64_t index, uint32_t old, uint32_t old_len,
		       const void *buf, size_t size);

/* Test seam: when set, zmi_store_slot_bind ('b') and the pool free of
 * zmi_store_slot_free_object ('f') first call it with the page index; a
 * negative errno it returns is the pool call's result (it is not made). */
extern int (*zmi_store_pool_fault)(int op, uint64_t index);

/* Does locked slot index, whose info is now `now`, still hold the object
 * that was copied out as (info, copy, len) when it was locked before?
 * The same info but for the idle bit, and the same bytes: a put of an
 * object as long in between is told apart by them.  For the work that
 * drops the slot lock while it compresses or writes (recompress.c,
 * writeback.c). */
bool zmi_store_slot_unchanged(struct zm_store *s, uint64_t index, uint32_t now, uint32_t info,
			      const void *copy, uint32_t len);

/* A clock walk over the slots holding an object in the pool or a page
 * of a unit (slot_cold, peeked without their locks), for recompression and writeback: from *cursor
 * on, going round at nr_pages, stretches never written skipped; *visited
 * counts the slots passed.  Sets *index to the next such slot and moves
 * *cursor past it, or returns false once nr_pages or max_visit slots
 * were passed. */
bool zmi_store_slot_walk(struct zm_store *s, uint64_t *cursor, uint64_t *visited,
			 uint64_t max_visit, uint64_t *index);

/* Empty slot index (lock, free, unlock, count): discard and destroy.
 * 0, or -EIO if the pool would not free its object (the slot keeps it). */
int zmi_store_slot_clear(struct zm_store *s, uint64_t index);

/* Set a locked slot's fill word (a SAME page); returns whether it went
 * into same_val[] (the info's SLOT_FLAG). */
bool zmi_store_slot_set_same(struct zm_store *s, uint64_t index, uint64_t word);

/* Count out what a slot held (already emptied): info and zmi_store_slot_len. */
void zmi_store_slot_release(struct zm_store *s, uint32_t info, uint32_t len);

/* unit.c: a unit's record; a UNIT slot's same_val[] points to it.
 * Its fields but live, refs and splitting never change while it lives;
 * those three are under its lock, taken under a page's slot lock. */
struct zmi_store_unit {
	uint64_t gen;        /* unique in the process: the thread caches' key */
	uint64_t base;       /* the index of its first page */
	uint32_t lock;       /* atomic: 1 = held (spins, as a slot lock) */
	uint32_t len;        /* compressed bytes, in its chunks one after another */
	uint32_t saved;      /* bytes saved over its pages alone, at formation */
	uint16_t live;       /* bit k: page base + k is still in it */
	uint16_t refs;       /* live pages and pins: freed at 0 */
	uint8_t span;        /* pages it decodes to (base .. base + span - 1) */
	uint8_t members;     /* pages it held when formed */
	uint8_t nchunks;     /* pool objects holding its bytes */
	bool sec;            /* encoded with the secondary codec */
	bool splitting;      /* a split was asked for (once in its life) */
	/* cold data (writeback.c, recompress.c): under its lock */
	bool file;           /* on the backing file: chunk[] are offsets */
	bool moving;         /* a writeback or recompression works on it,
				or its pages are still joining it */
	uint8_t nalloc;      /* chunk[] entries allocated */
	uint16_t readers;    /* gets and splits reading it from the file:
				its file space stays while any does */
	zm_handle_t chunk[]; /* nchunks handles, not bound to keys; on file,
				the chunks' offsets in it (backing.c) */
};

/* A unit's lock (a spin bit, as a slot lock). */
void zmi_store_unit_lock(struct zmi_store_unit *u);
void zmi_store_unit_unlock(struct zmi_store_unit *u);
/* Chunk c's length: len cut into n pieces as equal as they go. */
static inline uint32_t zmi_store_unit_chunk_len(uint32_t len, unsigned n, unsigned c)
{
	return len / n + (c < len % n);
}
/* Drop a reference (a page's or a pin); frees the unit at the last. */
void zmi_store_unit_put_ref(struct zm_store *s, struct zmi_store_unit *u);
/* A new unit of zlen bytes (buf) over span pages from base, members
 * mask, encoded with the secondary codec if sec: its chunks allocated
 * and written, counted, with a reference per member and one more for
 * the caller (each member's slot is the caller's to point at it, or
 * to give its reference back), and moving (forming: taken by no
 * writeback or recompression) until the caller's zmi_store_unit_give, once
 * its members have joined.  NULL: no room (-ENOMEM or the limit). */
struct zmi_store_unit *zmi_store_unit_make(struct zm_store *s, uint64_t base,
					   unsigned span, uint32_t mask, const char *buf,
					   size_t zlen, uint64_t saved, bool sec);
/* Test seam: when set, called after each member's slot joins a unit
 * being formed (by a put of a range or a recompression), with no lock
 * held, with the page joined. */
extern void (*zmi_store_unit_join_hook)(struct zm_store *s, uint64_t index);
static inline void zmi_store_unit_joined(struct zm_store *s, uint64_t index)
{
	void (*f)(struct zm_store *, uint64_t) =
		__atomic_load_n(&zmi_store_unit_join_hook, __ATOMIC_RELAXED);

	if (zmi_unlikely(f != NULL))
		f(s, index);
}
/* Copy unit u's bytes into buf (at least span pages' room) and its
 * length and codec into *len and *sec.  The caller holds a page's slot
 * lock (a unit in memory) or a reference (in memory or on file: a unit
 * on file is read with no lock held).  0, -EIO. */
int zmi_store_unit_fetch(struct zm_store *s, struct zmi_store_unit *u, char *buf, uint32_t *len,
			 bool *sec);

/* Page index (locked, UNIT) leaves its unit, which is freed when it was
 * the last; may ask for a split, which zmi_store_unit_flush runs.  0. */
int zmi_store_unit_leave(struct zm_store *s, uint64_t index);
/* A put or discard that may make pages leave units begins with
 * zmi_store_unit_begin and ends with zmi_store_unit_flush, which runs the
 * splits its leaves asked for (with no lock held).  Leaves outside such a call
 * (destroy, the cold path) ask for none. */
void zmi_store_unit_begin(struct zm_store *s);
void zmi_store_unit_flush(struct zm_store *s);
/* Get page index, locked with info (UNIT), into buf; returns with the
 * slot unlocked.  0, -EIO, -ENOMEM, or -EAGAIN (buffers were grown with
 * the slot unlocked: call again). */
int zmi_store_unit_get(struct zm_store *s, uint64_t index, uint32_t info, void *buf);
/* The unit of a locked UNIT slot. */
static inline struct zmi_store_unit *zmi_store_slot_unit(const struct zm_store *s, uint64_t index)
{
	return (struct zmi_store_unit *)(uintptr_t)s->same_val[index];
}
/* Test seam: the chunks' handles of the unit page index is in (up to
 * max of them); returns how many it has, or -ENOENT. */
int zmi_store_unit_chunks(struct zm_store *s, uint64_t index, zm_handle_t *h, unsigned max);

/* io.c: get page index into buf, its slot locked (zmi_store_slot_lock_ready)
 * with info `info`; returns with it unlocked: 0, a negative errno as
 * zm_store_get's (counted in failed_reads), or -EAGAIN (a unit's page
 * that moved: lock it again and retry). */
int zmi_store_get_locked(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
			 uint32_t info, void *buf);
/* io.c: put page at index (st: the caller's stripe); only (not NULL):
 * only if the slot is still a page of that unit (a split), else the
 * new object is dropped and 0 returned. */
int zmi_store_put_page(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
		       const void *page, const struct zmi_store_unit *only);

/* same.c */
bool zmi_store_page_same_filled(const void *page, size_t len, uint64_t *word);
void zmi_store_page_fill(void *page, size_t len, uint64_t word);

/* policy.c: what to do with a page compressed to zlen bytes (0 when it did
 * not fit below the cap given to the codec, zmi_store_policy_cap()) */
enum zmi_store_placement { ZM_PLACE_POOL, ZM_PLACE_HUGE, ZM_PLACE_REJECT_ZSIZE,
		    ZM_PLACE_REJECT_MEAN };
size_t zmi_store_policy_cap(const struct zm_store *s);
enum zmi_store_placement zmi_store_policy_place(struct zm_store *s, size_t zlen);
/* Would an object of size bytes fit the limit?  0 or -ENOSPC. */
int zmi_store_limit_check(struct zm_store *s, size_t size);

/* stats.c */
struct zmi_store_stripe *zmi_store_thread_stripe(struct zm_store *s);

static inline void zmi_store_count(struct zmi_store_stripe *st, enum zmi_store_counter c,
				   int64_t v)
{
	__atomic_fetch_add(&st->c[c], (uint64_t)v, __ATOMIC_RELAXED);
}

static inline unsigned zmi_store_hist_bucket(const struct zm_store *s, uint32_t len)
{
	return (unsigned)(((uint64_t)(len - 1) * ZM_STORE_HIST_BUCKETS) >> s->page_shift);
}

/* Account a content (info, zmi_store_slot_len) entering (sign 1) or leaving
 * (-1) a slot. */
void zmi_store_account(struct zm_store *s, struct zmi_store_stripe *st, uint32_t info, uint32_t len,
		       int sign);
uint64_t zmi_store_counter_sum(const struct zm_store *s, enum zmi_store_counter c);
/* Sample the pool's memory into used_max. */
void zmi_store_sample_used(struct zm_store *s);


/* idle.c */
int zmi_store_idle_init(struct zm_store *s);
void zmi_store_idle_fini(struct zm_store *s);
/* A mark: every page in the pool gets its idle bit (and, if it had none,
 * this mark's number as its age).  Sets idle_count and *idle (if not
 * NULL) to the pages idle for min_age_ms or more, and returns the cutoff
 * that takes them (zmi_store_pick's cutoff_ns: now - min_age_ms). */
uint64_t zmi_store_idle_sweep(struct zm_store *s, unsigned min_age_ms, uint64_t *idle);
/* Is locked slot index (info) one that `which` (ZM_STORE_PICK_*) takes,
 * idle meaning idle since a mark made at or before cutoff_ns? */
bool zmi_store_pick(const struct zm_store *s, uint64_t index, uint32_t info, unsigned which,
		    uint64_t cutoff_ns);

/* recompress.c */
int zmi_store_recomp_init(struct zm_store *s, const char *codec, int level);
void zmi_store_recomp_fini(struct zm_store *s);
/* Recompress pages from *cursor on (wrapping at nr_pages, at most one
 * round), up to max_pages re-encoded or max_visit slots looked at;
 * advances *cursor; sets *full (if not NULL) when it stopped because the
 * pool had no room even after compacting; ends before the next page once
 * *stop (if not NULL) reads nonzero.  Returns pages re-encoded, or -EIO
 * when none was and the pool refused a call (pool_errors). */
long zmi_store_recompress_run(struct zm_store *s, unsigned which, uint64_t cutoff_ns,
			      uint64_t max_pages, uint64_t max_visit, uint64_t *cursor, bool *full,
			      const int *stop);

/* backing.c: is the file laid out packed (4 KiB pages: any page's bytes
 * anywhere)?  Units are written back only then. */
static inline bool zmi_store_backing_packed(const struct zm_store *s)
{
	return s->page_size == 4096;
}
/* Does the store have a backing store (file or NBD export), whatever the
 * process (see zmi_store_has_file)? */
static inline bool zmi_store_backing_any(const struct zm_store *s)
{
	return s->bfd >= 0 || s->nbd;
}
/* backing.c: the backing file.  Each I/O is one page's (index, for the
 * seam below) at offset off; each returns 0 or a negative errno. */
int zmi_store_backing_open(struct zm_store *s, const char *path, int fd, uint64_t limit);
/* Does the store have a backing file it may use?  Not in a forked child:
 * the file, its lock and its blocks are the parent's, which still uses
 * them, so the child's store is detached from it: its pages on file read
 * as -EIO, it writes nothing back (as a store without a file), and
 * freeing those pages or destroying the store leaves the file alone. */
bool zmi_store_has_file(const struct zm_store *s);
void zmi_store_backing_close(struct zm_store *s);
/* Room for len bytes of page index: its offset in *off.  wb_lock held.
 * 0 or -ENOSPC. */
int zmi_store_backing_alloc(struct zm_store *s, uint64_t index, size_t len, uint64_t *off);
/* Give back what zmi_store_backing_alloc gave (punching the blocks no page
 * uses any more).  Any thread, under the page's slot lock or wb_lock. */
void zmi_store_backing_free(struct zm_store *s, uint64_t index, uint64_t off, size_t len);
int zmi_store_backing_write(struct zm_store *s, uint64_t index, uint64_t off, const void *buf,
			    size_t len);
int zmi_store_backing_read(struct zm_store *s, uint64_t index, uint64_t off, void *buf, size_t len);
/* For the cleaner: the whole blocks [off, off + len) (block-aligned, buf
 * too) in one read, holding the records of pages index[0..n) (the seam's
 * say for each first, 'r').  0, -EIO, or the seam's errno. */
int zmi_store_backing_read_span(struct zm_store *s, const uint64_t *index, unsigned n, uint64_t off,
				void *buf, size_t len);
/* zmi_store_backing_read_span in two, for reads of many pages at once: the
 * seam's say for page index ('r'), then the read of the whole blocks
 * [off, off + len) (block-aligned, buf too), which may hold several
 * pages' records and other bytes.  Any thread, no lock.  0 or -EIO. */
int zmi_store_backing_read_fault(uint64_t index);
int zmi_store_backing_read_run(struct zm_store *s, uint64_t off, void *buf, size_t len);
/* A writeback's batch, in bytes (wb_buf's size, at least a page): the
 * pages it copies out of the pool before writing them, each run of them
 * lying end to end in the file with one write. */
#define ZMI_WB_BATCH_BYTES (256u << 10)
/* zmi_store_backing_write in two: the seam's say for page index ('w'), then
 * the write of len bytes at off, which may be several pages' (a run of
 * them end to end in the file, written once).  wb_lock held. */
int zmi_store_backing_write_fault(uint64_t index);
int zmi_store_backing_write_run(struct zm_store *s, uint64_t off, const void *buf, size_t len);
/* Flush what zmi_store_backing_write wrote since the last call and drop it from
 * the page cache (ZM_STORE_CACHE_DROP; nothing otherwise).  wb_lock held:
 * each writeback calls it before letting go. */
void zmi_store_backing_flush(struct zm_store *s);
/* The packed file's blocks in use, in bytes (*held), and the live bytes
 * of the pages and units' chunks in them (*live); 0 and 0 for the other
 * layout. */
void zmi_store_backing_usage(struct zm_store *s, uint64_t *held, uint64_t *live);
/* For the cleaner: the live bytes below which a block is worth emptying
 * so that the blocks in use come to target_pct percent of the live
 * bytes (0: they are there already, or the layout is not packed). */
uint32_t zmi_store_backing_clean_threshold(struct zm_store *s, unsigned target_pct);
/* Is the record of len bytes at off in a block with fewer than max_live
 * live bytes, not the block being filled? */
bool zmi_store_backing_sparse(struct zm_store *s, uint64_t off, size_t len, uint32_t max_live);
/* Test seam: when set, each backing-file I/O first calls it with the
 * operation ('r' read, 'w' write, 'p' punch a hole) and the page index;
 * a negative errno it returns is that I/O's result (nothing is done). */
extern int (*zmi_store_backing_fault)(int op, uint64_t index);
/* Test seam: nonzero, zmi_store_backing_open finds O_DIRECT and the
 * flush-and-drop mode failing, as on a file that cannot, and uses the
 * file through the page cache (ZM_STORE_CACHE_NONE). */
extern int zmi_store_backing_cache_fail;
/* Test seam: nonzero, zmi_store_backing_open finds O_DIRECT unavailable (as on
 * a file system that refuses it) and picks the next mode. */
extern int zmi_store_backing_direct_fail;
/* For tests: the write system calls made to backing files (atomic). */
extern uint64_t zmi_store_backing_pwrites;
/* For tests: the read system calls made to backing files, an NBD read a
 * call (atomic). */
extern uint64_t zmi_store_backing_preads;
/* Open the NBD export at uri (a libnbd URI) as the backing store, laid
 * out as the file is.  0, or -EOPNOTSUPP (built without libnbd), -EIO
 * (no connection), -ENOSPC (the export too small), -ENOMEM. */
int zmi_store_backing_open_uri(struct zm_store *s, const char *uri);

/* backing_nbd.c: the NBD export's I/O, for backing.c's dispatch.  The
 * offsets are the packed layout's; each returns 0 or a negative errno. */
/* Connect to uri; the room for pages in *room.  need: the least room
 * the store accepts. */
int zmi_store_nbd_open(struct zm_store *s, const char *uri, uint64_t need, uint64_t *room);
void zmi_store_nbd_close(struct zm_store *s);
/* Is the export connected, reconnecting if it is time to try again?
 * 0 with its connection's epoch in *epoch (pages written under an older
 * one are lost), or -ENOSPC: no writeback now.  wb_lock held. */
int zmi_store_nbd_ready(struct zm_store *s, uint64_t *epoch);
/* wb_lock held (the trims queued so far go first). */
int zmi_store_nbd_write(struct zm_store *s, uint64_t off, const void *buf, size_t len);
/* Any thread: -EIO when the bytes were lost or the export is away. */
int zmi_store_nbd_read(struct zm_store *s, uint64_t off, void *buf, size_t len);
/* Any thread, any lock: queues a trim, sent by the next write or flush. */
void zmi_store_nbd_trim(struct zm_store *s, uint64_t off, uint64_t len);
/* A page's record at off is freed (under its slot lock or wb_lock). */
void zmi_store_nbd_forget(struct zm_store *s, uint64_t off);
/* Send the queued trims.  wb_lock held. */
void zmi_store_nbd_flush(struct zm_store *s);
/* Pages the export lost (restarted without them), ever. */
uint64_t zmi_store_nbd_lost(const struct zm_store *s);
/* Test seam: nonzero, the reconnection is tried at every call, not at
 * most once a second. */
extern int zmi_store_nbd_retry_now;
/* For tests: O_DIRECT writes that read their first block back (it was not
 * the block the last write ended in; atomic). */
extern uint64_t zmi_store_backing_head_reads;

/* writeback.c */
/* Read FILE slot index, locked (not BUSY) with info `info`, into buf,
 * with the slot BUSY and unlocked during the read; may bring it back
 * into the pool (readback).  Returns with the slot unlocked: 0, -EIO,
 * -ENOMEM. */
int zmi_store_file_get(struct zm_store *s, struct zmi_store_stripe *st, uint64_t index,
		       uint32_t info, void *buf);
/* A put found no room for size bytes (pool_full: the pool refused the
 * allocation): write pages back until it may have.  0 (try again) or
 * -ENOSPC (no backing file, or it is full or its limit spent). */
int zmi_store_reclaim(struct zm_store *s, size_t size, bool pool_full);
long zmi_store_writeback_pick(struct zm_store *s, unsigned which, uint64_t cutoff_ns, uint64_t n);
/* The background writer of a store with a backing file (writeback.c):
 * it writes back from ZMI_WRITER_HIGH(limit) down to ZMI_WRITER_LOW,
 * and a put that finds no room waits for it in zmi_store_reclaim.  init at
 * create (the thread starts on first need; 0 or -ENOMEM), stop at
 * destroy (joins it; a forked child's store has none to join), kick when
 * the objects pass the high watermark (one relaxed load when it was
 * kicked already; any lock but a slot lock may be held). */
#define ZMI_WRITER_HIGH(limit) ((limit) - (limit) / 16)
#define ZMI_WRITER_LOW(limit) ((limit) - (limit) / 8)
int zmi_store_writer_init(struct zm_store *s, bool sync);
void zmi_store_writer_stop(struct zm_store *s);
void zmi_store_writer_kick(struct zm_store *s);
/* Wait until the writer has no round running or asked for (for tests:
 * what it wrote is then dropped from the page cache). */
void zmi_store_writer_quiesce(struct zm_store *s);

/* The unit of page index, taken for a writeback or recompression (its
 * moving flag set, a reference held), unless another has it, it is to
 * be split, or it is on file.  NULL: none taken.  writeback.c */
struct zmi_store_unit *zmi_store_unit_take(struct zm_store *s, uint64_t index);
/* Does `which` take every page still in unit u (taken)?  writeback.c */
bool zmi_store_unit_picked(struct zm_store *s, struct zmi_store_unit *u, unsigned which,
			   uint64_t cutoff_ns);
/* Give back what zmi_store_unit_take took. */
void zmi_store_unit_give(struct zm_store *s, struct zmi_store_unit *u);

/* clean.c: the packed file's automatic cleaner on the process's worker,
 * at rate bytes a second (0, no file, or not packed: none).  0 or
 * -ENOMEM. */
int zmi_store_clean_start(struct zm_store *s, uint64_t rate);
void zmi_store_clean_stop(struct zm_store *s);

/* tier.c: automatic tiering on the process's worker */
int zmi_store_tier_start(struct zm_store *s, unsigned idle_after_ms, unsigned rate);
void zmi_store_tier_stop(struct zm_store *s);

#endif
