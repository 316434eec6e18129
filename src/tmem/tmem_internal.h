/*
 * tmem: zcache's pools of compressed pages (include/zmem/tmem.h).
 *
 *   tmem.c    instances and pools: create, destroy, the pool table
 *   index.c   a pool's index: shards of objects, each a hash of its pages
 *   io.c      put, get and the flushes
 *   evict.c   the list of ephemeral pages and eviction by units
 *   stats.c   statistics and the checker
 *
 * Layout.  An instance owns one zm_pages limited to its budget and two
 * pools (pool.h) on it: every ephemeral page's object lives in `eph`,
 * every persistent one in `pers`.  So everything in `eph` may be evicted,
 * and evicting a whole unit of `eph` (zm_pool_unit) never drops a
 * persistent page.  An ephemeral object starts with its key (struct
 * zmi_tmem_hdr), from which eviction finds the record of each object of a unit.
 *
 * A pool's pages are spread over ZM_TMEM_SHARDS shards by (oid, index >>
 * TM_RUN_SHIFT); a shard holds a hash of objects (struct zmi_tmem_obj: one
 * object id's pages that fall in this shard), each a hash of its pages
 * (struct zmi_tmem_page, the record of one stored page).
 *
 * Locks, outer first:
 *
 *     t->pools_lock   the pool table's writers (create, destroy: a pool's
 *                     flush and its counters' move to t->gone), stats
 *     t->evict_lock   one evictor at a time; pool ids are unpublished
 *                     under it, so an evictor never reaches a pool being
 *                     destroyed
 *     shard->lock     the shard's objects, their pages and counters
 *     t->obj_lock     shared: writing or freeing an ephemeral object;
 *                     exclusive: the evictor picking a victim and reading
 *                     its unit's keys (then let go)
 *     t->lru_lock     the list of ephemeral pages (lru_* fields)
 *     the pool's own locks (inside zm_pool calls)
 *
 * A pool object is freed with its shard lock held (shard -> pool); no
 * call holds two shard locks; the evictor lets obj_lock go before it
 * takes a shard lock.
 */
#ifndef ZM_TMEM_INTERNAL_H
#define ZM_TMEM_INTERNAL_H

#define ZMEM_ADVANCED /* zm_pool_unit */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/debug.h"
#include "base/lock.h"
#include <zmem/codec.h>
#include <zmem/pages.h>
#include <zmem/pool.h>
#include <zmem/tmem.h>

/* Indexes of one object that share a shard: 256 pages (1 MiB of 4 KiB
 * pages) stay together, so a file read in order takes one lock per run,
 * while one huge object (a swap device) still spreads over every shard. */
#define TM_RUN_SHIFT 8
#define TM_SLOT_BITS 6   /* pool id = generation << TM_SLOT_BITS | slot */
_Static_assert((1u << TM_SLOT_BITS) == ZM_TMEM_MAX_POOLS, "a slot number per pool");
/* Values this short are stored as they are: a codec's frame costs more
 * than it could save. */
#define TM_RAW_MAX 64
/* Eviction steps a put may take before it gives up: one step frees a
 * unit (usually enough); without units one object, which may free
 * nothing, so a put may need many. */
#define TM_EVICT_STEPS 256
#define TM_PERSISTENT_PCT 75  /* zcache's cap on persistent pages */
#define TM_SHARE_EVERY 32     /* persistent puts between counts of the
				 persistent pool's pages (io.c) */
#define TM_DEFAULT_BUDGET ((size_t)64 << 20)

/* The key at the start of every ephemeral object. */
struct zmi_tmem_hdr {
	uint64_t oid;
	uint32_t index;
	uint32_t pool;   /* the pool's id */
};
#define TM_HDR ((unsigned)sizeof(struct zmi_tmem_hdr))

/* A stored page: 48 bytes. */
struct zmi_tmem_page {
	struct zmi_tmem_page *next;              /* shard lock: the object's chain */
	struct zmi_tmem_page *lru_next, *lru_prev; /* lru_lock: ephemeral pages only */
	zm_handle_t h;                     /* shard lock */
	uint32_t index;
	uint32_t len;                      /* the length put: 1 .. 65536 */
	uint32_t zlen;                     /* bytes in the pool, header aside:
					      up to a whole 64 KiB page */
	uint8_t ref;                       /* atomic: got since eviction passed */
	uint8_t raw;                       /* stored as is, not compressed */
};
_Static_assert(sizeof(struct zmi_tmem_page) == 48, "tmem.h and docs/tmem.md say 48 bytes");

/* An object id's pages in one shard. */
struct zmi_tmem_obj {
	struct zmi_tmem_obj *next;               /* the shard's chain */
	uint64_t oid;
	struct zmi_tmem_page **tab;              /* by index hash */
	uint32_t nbuckets, npages;
};

/* Counters of one shard, under its lock; summed by stats.c. */
enum zmi_tmem_ctr {
	TC_PUTS, TC_STORED, TC_GETS, TC_HITS, TC_FLUSH_PAGES, TC_FLUSHED,
	TC_EVICTED, TC_REF_ZSIZE, TC_REF_MEAN, TC_REF_SHARE, TC_REF_FULL, TC_DROPPED,
	TC_PAGES, TC_ORIG, TC_COMPR, TC_NR
};

struct zmi_tmem_shard {
	zmi_lock_t lock;
	uint32_t nbuckets, nobjs;
	struct zmi_tmem_obj **tab;
	uint64_t ctr[TC_NR];               /* read without the lock by the
					      mean policy (relaxed) */
} __attribute__((aligned(64)));

struct zmi_tmem_pool {
	struct zm_tmem *t;
	int id;
	enum zm_tmem_kind kind;
	bool exclusive;
	size_t page_size, max_zsize, max_mean_zsize;
	struct zm_pool *zp;                /* t->eph or t->pers */
	uint64_t flush_objects;            /* atomic */
	struct zmi_tmem_shard shard[ZM_TMEM_SHARDS];
};

struct zm_tmem {
	struct zm_pages *pages;            /* NULL for the malloc backend */
	struct zm_pool *eph, *pers;
	struct zm_codec *codec;
	size_t page_size, budget;
	uint64_t pers_cap;                 /* bytes persistent pages may hold */
	bool units;                        /* eph has zm_pool_unit */
	const char *evicts;
	uint64_t pers_bytes;               /* atomic: persistent compressed bytes */
	uint64_t pers_pool_bytes;          /* atomic: the persistent pool's
					      pool_bytes, counted now and then */
	uint64_t pers_bytes_counted;       /* atomic: pers_bytes at that count */
	uint64_t pers_tick;                /* atomic: persistent puts */
	uint64_t gone[TC_NR];              /* pools_lock: destroyed pools' counters */
	uint64_t gone_flush_objects;       /* pools_lock */
	uint64_t held;                     /* atomic: malloc backend: bytes held */

	pthread_mutex_t pools_lock;        /* pool table writers */
	struct zmi_tmem_pool *pool[ZM_TMEM_MAX_POOLS]; /* atomic pointers */
	uint32_t gen[ZM_TMEM_MAX_POOLS];   /* atomic, written under pools_lock:
					      the generation of the slot's
					      pool, or of its last one */

	pthread_mutex_t evict_lock;
	zm_handle_t *ubuf;                 /* evict_lock: a unit's handles */
	struct zmi_tmem_hdr *kbuf;               /* evict_lock: and their keys */
	size_t ubuf_cap;                   /* entries of both */
	/* Ephemeral objects are written (put) and freed (zmi_tmem_remove) with it
	 * held shared; the evictor reads their keys with it held exclusively
	 * (writers preferred), so it never reads an object being written. */
	pthread_rwlock_t obj_lock;
	uint64_t evictions, evicted_pages; /* evict_lock; read relaxed */

	zmi_lock_t lru_lock;
	struct zmi_tmem_page lru;                /* lru_lock: sentinel; next = newest */
	uint64_t lru_n;                    /* lru_lock */
};

static inline uint64_t zmi_tmem_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* tmem.c: the pool of an id, or NULL (with a message in debug builds). */
struct zmi_tmem_pool *zmi_tmem_pool_of(struct zm_tmem *t, int id, const char *op);

/* index.c; the shard's lock held */
static inline struct zmi_tmem_shard *zmi_tmem_shard_of(struct zmi_tmem_pool *p, uint64_t oid,
						       uint32_t index)
{
	return &p->shard[zmi_tmem_mix(oid ^ zmi_tmem_mix(index >> TM_RUN_SHIFT)) % ZM_TMEM_SHARDS];
}
struct zmi_tmem_obj *zmi_tmem_obj_find(struct zmi_tmem_shard *sh, uint64_t oid);
struct zmi_tmem_page *zmi_tmem_page_find(struct zmi_tmem_obj *o, uint32_t index);
/* Link a new record (index set) into the object of oid, made if need be;
 * -ENOMEM if that fails. */
int zmi_tmem_page_link(struct zmi_tmem_shard *sh, uint64_t oid, struct zmi_tmem_page *pg);
/* Unlink page pg of object o (freeing o when it empties): the caller
 * frees the record. */
void zmi_tmem_page_unlink(struct zmi_tmem_shard *sh, struct zmi_tmem_obj *o,
			  struct zmi_tmem_page *pg);
void zmi_tmem_shard_free(struct zmi_tmem_shard *sh);

/* io.c: remove a stored page (shard lock held): its pool object freed,
 * counters and the list updated, the record freed.  `ctr` (a TC_*
 * counter or TC_NR for none) counts why. */
void zmi_tmem_remove(struct zmi_tmem_pool *p, struct zmi_tmem_shard *sh, struct zmi_tmem_obj *o,
		     struct zmi_tmem_page *pg, enum zmi_tmem_ctr why);
/* Every page of a pool; returns how many. */
long zmi_tmem_flush_all(struct zmi_tmem_pool *p);

/* evict.c */
void zmi_tmem_lru_add(struct zm_tmem *t, struct zmi_tmem_page *pg);
void zmi_tmem_lru_del(struct zm_tmem *t, struct zmi_tmem_page *pg);
/* Evict ephemeral pages to make room: one step (a unit, or one object).
 * Returns objects evicted, 0 when nothing could be. */
long zmi_tmem_evict(struct zm_tmem *t);

#endif
