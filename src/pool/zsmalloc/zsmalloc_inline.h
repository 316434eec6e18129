/*
 * zsmalloc's inline accessors: over the types and under the lock rules of
 * zsmalloc.h (read that first; it includes this header at its end).  Each
 * says which lock its caller holds where one is needed.
 */
#ifndef ZM_ZSMALLOC_INLINE_H
#define ZM_ZSMALLOC_INLINE_H

#include <sched.h>

#include "pool/zsmalloc/zsmalloc.h"

/* Granules an object of len bytes takes, its header included. */
static inline unsigned zs_mgran(size_t len)
{
	return (unsigned)((ZS_MHDR_BYTES + len + ZS_GRANULE - 1) / ZS_GRANULE);
}

/* The list of a hole of e granules (2 <= e < 2^16). */
static inline unsigned zs_mhole_bin(unsigned e)
{
	unsigned k;

	if (e < 16)
		return e >> 1;
	k = 31u - (unsigned)__builtin_clz(e);
	return 8 + 2 * (k - 4) + ((e >> (k - 1)) & 1);
}

/* The smallest extent of list b. */
static inline unsigned zs_mhole_min(unsigned b)
{
	unsigned k = (b - 8) / 2 + 4;

	return b < 8 ? 2 * b : (1u << k) | (((b - 8) & 1u) << (k - 1));
}

static inline void zs_set_magic(struct zspage *zs, uint32_t v)
{
#if ZM_DEBUG >= 1
	zs->magic = v;
#else
	(void)zs, (void)v;
#endif
}

/* Page i of zs (i < npop). */
static inline zm_pfn_t zs_pfn(const struct zspage *zs, unsigned i)
{
	const zm_pfn_t *x = __atomic_load_n(&zs->pfnx, __ATOMIC_ACQUIRE);

	return zmi_likely(!x) ? zs->first + i : x[i];
}

static inline void zs_compact_unlock(struct zs_class *c)
{
	__atomic_store_n(&c->compacting, 0, __ATOMIC_RELAXED);
	zmi_unlock(&c->lock);
}

/* Add to a counter that is written under the class lock but read without
 * it: a relaxed atomic store, a plain move on x86. */
static inline void zs_count(uint32_t *ctr, int32_t d)
{
	__atomic_store_n(ctr, *ctr + (uint32_t)d, __ATOMIC_RELAXED);
}

/* What a caller of zm_pool_compact or zm_pool_shrink is told it freed,
 * and what pages_compacted adds.  The runs count pages net: those the
 * destinations populated (in classes or in mixed zspages) against those
 * the sources gave back, and a source an allocation lands in while it is
 * evacuated in steps (it stays valid for them), or whose next destination
 * page cannot be had, is not emptied; a run that moved little can then
 * have taken more pages than it gave back.  A negative count would read
 * as an error, and take from the counter: nothing was freed. */
static inline long zs_net_freed(long freed)
{
	return freed > 0 ? freed : 0;
}

/* Add to a compaction counter (compact_lock held: one writer) that
 * zm_pool_stats reads without the lock, so that stats never wait for a
 * running compaction episode. */
static inline void zs_stat_add(uint64_t *ctr, uint64_t d)
{
	__atomic_store_n(ctr, *ctr + d, __ATOMIC_RELAXED);
}

/* Bytes of one zspage record of class c. */
static inline size_t zs_record_size(const struct zs_class *c)
{
	return sizeof(struct zspage) + (c->mixed ? sizeof(struct zs_mrec) :
					(size_t)c->objs * sizeof(uint32_t));
}

/* A record takes whole cache lines of its own: records of two shards'
 * classes sharing a line make two threads pass it back and forth on every
 * malloc and free. */
static inline size_t zs_record_alloc_size(const struct zs_class *c)
{
	return (zs_record_size(c) + 63) & ~(size_t)63;
}

/* What malloc spends on n bytes: glibc's chunk, the bytes and an 8-byte
 * header rounded up to 16 bytes, 32 at least. */
static inline size_t zs_malloc_cost(size_t n)
{
	n = (n + 8 + 15) & ~(size_t)15;
	return n < 32 ? 32 : n;
}

static inline struct zs_pool *zs_of(struct zm_pool *pool) { return pool->priv; }

/* The class of index idx (shard << cshift | class), or NULL if it was
 * never made or idx names no class (0 <= idx < total). */
static inline struct zs_class *zs_class_at(const struct zs_pool *zp, unsigned idx)
{
	struct zs_class **s = __atomic_load_n(&zp->shard[idx >> zp->cshift], __ATOMIC_ACQUIRE);
	unsigned k = idx & ((1u << zp->cshift) - 1);

	return s && k < zp->nclasses ? __atomic_load_n(&s[k], __ATOMIC_ACQUIRE) : NULL;
}

/* The class of index idx (c->idx, zspage->cls), which exists. */
static inline struct zs_class *zs_class_of(const struct zs_pool *zp, unsigned idx)
{
	return __atomic_load_n(&zp->shard[idx >> zp->cshift][idx & ((1u << zp->cshift) - 1)],
			       __ATOMIC_ACQUIRE);
}

static inline struct zs_class *zs_class_get(struct zs_pool *zp, unsigned sh, unsigned k)
{
	struct zs_class **s = __atomic_load_n(&zp->shard[sh], __ATOMIC_ACQUIRE);
	struct zs_class *c = s ? __atomic_load_n(&s[k], __ATOMIC_ACQUIRE) : NULL;

	return zmi_likely(c) ? c : zs_class_make(zp, sh, k);
}

/* The huge class of shard sh, or NULL. */
static inline struct zs_class *zs_huge_class(const struct zs_pool *zp, unsigned sh)
{
	return zs_class_at(zp, (sh << zp->cshift) + zp->nclasses - 1);
}

/* The mixed class of shard sh, if the pool has them and it was made. */
static inline struct zs_class *zs_mixed_at(const struct zs_pool *zp, unsigned sh)
{
	struct zs_class **s = __atomic_load_n(&zp->shard[sh], __ATOMIC_ACQUIRE);

	return s && zp->mixed ? __atomic_load_n(&s[zp->nclasses], __ATOMIC_ACQUIRE) : NULL;
}

/* Entries of a table in pages given back (stats: not metadata). */
static inline uint64_t zs_tfree_entries(const struct zs_tfree *tf)
{
	return (uint64_t)__atomic_load_n(&tf->n, __ATOMIC_RELAXED) * ZS_SPAN;
}

static inline uint64_t zs_slot_live(uint32_t id, unsigned obj, uint64_t tag)
{
	return ((uint64_t)id << 38) | ((uint64_t)obj << ZS_TAG_BITS) | tag;
}

static inline uint32_t zs_slot_id(uint64_t v) { return (uint32_t)(v >> 38); }

static inline unsigned zs_slot_obj(uint64_t v) { return (unsigned)(v >> ZS_TAG_BITS) & 0xFFFF; }

static inline uint64_t zs_slot_huge(zm_pfn_t pfn, unsigned shard, uint64_t tag)
{
	return ((uint64_t)pfn << 32) | ((uint64_t)shard << ZS_TAG_BITS) | tag;
}

static inline zm_pfn_t zs_huge_pfn(uint64_t v) { return (zm_pfn_t)(v >> 32); }

static inline unsigned zs_huge_shard(uint64_t v) { return (unsigned)(v >> ZS_TAG_BITS) & 0x3FF; }

static inline uint32_t zs_handle_idx(zm_handle_t h) { return (uint32_t)(h >> ZS_TAG_BITS); }

static inline uint64_t zs_load_slot(struct zs_pool *zp, uint32_t idx)
{
	return __atomic_load_n(&zp->slot[idx], __ATOMIC_ACQUIRE);
}

static inline void zs_store_slot(struct zs_pool *zp, uint32_t idx, uint64_t v)
{
	__atomic_store_n(&zp->slot[idx], v, __ATOMIC_RELEASE);
}

static inline zm_handle_t zs_key_handle(const struct zs_pool *zp, uint64_t key)
{
	return ZS_H_OWNER | key << ZS_TAG_BITS | zp->key_tag;
}

/* How far a slot's generation (in word v) is from the pool's first. */
static inline uint64_t zs_gen_delta(const struct zs_pool *zp, uint64_t v)
{
	return ((v & ZS_GEN_MASK) - zp->slot_free.gen0) & ZS_GEN_MASK;
}

/* The back reference a handle names (validity is the caller's check). */
static inline uint32_t zs_handle_ref(zm_handle_t h)
{
	return h & ZS_H_OWNER ? (uint32_t)((h & ~ZS_H_OWNER) >> ZS_TAG_BITS) | ZS_REF_OWNER
			      : zs_handle_idx(h);
}

static inline uint64_t *zs_ref_word(struct zs_pool *zp, uint32_t ref)
{
	return ref & ZS_REF_OWNER ? &zp->owner[ref & ~ZS_REF_OWNER] : &zp->slot[ref];
}

/* The pool's part of the word a back reference names. */
static inline uint64_t zs_load_ref(struct zs_pool *zp, uint32_t ref)
{
	uint64_t v = __atomic_load_n(zs_ref_word(zp, ref), __ATOMIC_ACQUIRE);

	return ref & ZS_REF_OWNER ? v & ~ZM_POOL_OWNER_MASK : v;
}

/* Set the pool's part of that word; an owner word's other bits are kept
 * (its owner changes them with atomics of its own, pool.h). */
static inline void zs_store_ref(struct zs_pool *zp, uint32_t ref, uint64_t v)
{
	uint64_t *w, old;

	if (!(ref & ZS_REF_OWNER)) {
		zs_store_slot(zp, ref, v);
		return;
	}
	w = zs_ref_word(zp, ref);
	old = __atomic_load_n(w, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(w, &old, (old & ZM_POOL_OWNER_MASK) |
					    (v & ~ZM_POOL_OWNER_MASK), true,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

/* The slot or owner word of a freed object: empty again.  Class lock held. */
static inline void zs_ref_release(struct zs_pool *zp, struct zs_class *c, uint32_t ref)
{
	if (ref & ZS_REF_OWNER)
		zs_store_ref(zp, ref, 0);
	else
		zs_slot_free(zp, c, ref);
}

/* Are c's records malloc'd (too large for record pages)? */
static inline bool zs_record_big(const struct zs_pool *zp, const struct zs_class *c)
{
	return zs_record_alloc_size(c) > zp->rec.max;
}

/* The pages objects 0..n-1 of class c lie on (0 for none). */
static inline unsigned zs_pages_for(const struct zs_pool *zp, const struct zs_class *c,
				    size_t n)
{
	return n ? (unsigned)((n * c->size - 1) >> zp->shift) + 1 : 0;
}

static inline int zs_populate(struct zs_pool *zp, struct zs_class *c, struct zspage *zs,
			      unsigned obj)
{
	return zmi_likely(zs_pages_for(zp, c, (size_t)obj + 1) <= zs->npop) ? 0 :
	       zs_populate_slow(zp, c, zs, obj);
}

static inline uint32_t *zs_backref(struct zspage *zs, const struct zs_class *c)
{
	return zs->data;
}

/* Granule g, or the next if a header at g would straddle a page. */
static inline unsigned zs_mfirst(const struct zs_pool *zp, unsigned g)
{
	return (((size_t)g * ZS_GRANULE) & (zp->page_size - 1)) + ZS_MHDR_BYTES <= zp->page_size
		       ? g : g + 1;
}

/* Where the header after that at g (of an object of len bytes) is. */
static inline unsigned zs_mnext(const struct zs_pool *zp, unsigned g, size_t len)
{
	return zs_mfirst(zp, g + zs_mgran(len));
}

/* The header at granule g of mixed zspage zs (a header never straddles
 * a page). */
static inline struct zs_mhdr *zs_mhdr(const struct zs_pool *zp, const struct zspage *zs,
				      unsigned g)
{
	size_t off = (size_t)g * ZS_GRANULE;

	return (struct zs_mhdr *)(zp->base + ((size_t)zs_pfn(zs, (unsigned)(off >> zp->shift))
					      << zp->shift) + (off & (zp->page_size - 1)));
}

/* The one or two pieces of memory holding object obj; returns how many.
 * An object crossing into the next page is one piece if that page is the
 * next one in memory and the pool uses the CONTIG method. */
static inline int zs_obj_segs(const struct zs_pool *zp, const struct zspage *zs,
			      unsigned obj, char *seg[2], size_t len[2])
{
	size_t size = zs->size, off = (size_t)obj * size, in;
	const zm_pfn_t *x = __atomic_load_n(&zs->pfnx, __ATOMIC_ACQUIRE);
	unsigned pg;
	zm_pfn_t p0, p1;

	/* a mixed zspage's object: its length from its header at granule
	 * obj, its data right after the header */
	if (zmi_unlikely(size == ZS_GRANULE)) {
		size = zs_mixed_len(zp, zs, obj);
		off += ZS_MHDR_BYTES;
	}
	in = off & (zp->page_size - 1);
	pg = (unsigned)(off >> zp->shift);
	p0 = zmi_likely(!x) ? zs->first + pg : x[pg];
	seg[0] = zp->base + ((size_t)p0 << zp->shift) + in;
	/* one piece if it stays in its page, or crosses into the next page
	 * in memory (CONTIG); pfnx has no entry beyond the zspage's pages */
	if (zmi_likely(in + size <= zp->page_size)) {
		len[0] = size;
		return 1;
	}
	p1 = zmi_likely(!x) ? p0 + 1 : x[pg + 1];
	if (zp->span == ZM_SPAN_CONTIG && p1 == p0 + 1) {
		len[0] = size;
		return 1;
	}
	len[0] = zp->page_size - in;
	seg[1] = zp->base + ((size_t)p1 << zp->shift);
	len[1] = size - len[0];
	return 2;
}

/* A freed object's bytes hold 0x6b in debug builds (ZM_DEBUG >= 2), so
 * that a use after free reads poison and zm_pool_check finds a write
 * after free (zsmalloc/stats.c); nothing in other builds. */
static inline void zs_poison_obj(const struct zs_pool *zp, const struct zspage *zs,
				 unsigned obj)
{
#if ZM_DEBUG >= 2
	char *seg[2];
	size_t len[2];
	int n = zs_obj_segs(zp, zs, obj, seg, len);

	memset(seg[0], 0x6b, len[0]);
	if (n == 2)
		memset(seg[1], 0x6b, len[1]);
#else
	(void)zp, (void)zs, (void)obj;
#endif
}

/* Fullness group of a zspage with inuse of c->objs objects: 0 empty, 10
 * full, else 1 + 9 * inuse / objs by a multiplication (no division on the
 * allocation path). */
static inline unsigned zs_group_of(const struct zs_class *c, unsigned inuse)
{
	unsigned g;

	if (inuse == 0)
		return 0;
	if (inuse >= c->objs)
		return ZS_GROUPS - 1;
	g = 1 + (unsigned)(((uint64_t)inuse * c->gmul) >> 20);
	return g < ZS_GROUPS - 1 ? g : ZS_GROUPS - 2;
}

static inline bool zs_group_set(struct zs_class *c, struct zspage *zs)
{
	unsigned g = zs_group_of(c, zs->inuse);

	if (zmi_likely(g == zs->group))
		return false;
	zs_group_move(c, zs, g);
	return true;
}

/* A mixed zspage's fullness group: by its live objects' granules, of
 * all it has (a hole's granules count as free: the next objects take
 * them). */
static inline unsigned zs_mixed_group_of(const struct zs_class *m, const struct zspage *zs)
{
	return zs->inuse ? zs_group_of(m, ((const struct zs_mrec *)(const void *)zs->data)->live)
			 : 0;
}

static inline bool zs_mixed_group_set(struct zs_class *m, struct zspage *zs)
{
	unsigned g = zs_mixed_group_of(m, zs);

	if (g == zs->group)
		return false;
	zs_group_move(m, zs, g);
	return true;
}

static inline struct zspage *zs_by_id(struct zs_pool *zp, uint32_t id)
{
	return (struct zspage *)__atomic_load_n(&zp->ztab[id], __ATOMIC_ACQUIRE);
}

/* Can zs give an object without taking a new page?  (lock held) */
static inline bool zs_fits_in_place(const struct zs_pool *zp, const struct zs_class *c,
				    const struct zspage *zs)
{
	if (zs->free_head != ZS_NONE)
		return true;
	return zs->bump < c->objs && zs_pages_for(zp, c, (size_t)zs->bump + 1) <= zs->npop;
}

/* Mixed zspage zs is no longer open for allocation, if it was, at its
 * tail nor in its holes (lock held). */
static inline void zs_mixed_close(struct zs_class *m, const struct zspage *zs)
{
	for (unsigned i = 0; i < ZS_MIXED_OPEN; i++)
		if (m->front[i] == zs)
			m->front[i] = NULL;
	if (m->hole == zs)
		m->hole = NULL;
}

/* What the record of mixed zspage zs has after the 48 bytes. */
static inline struct zs_mrec *zs_mrec_of(struct zspage *zs)
{
	return (struct zs_mrec *)(void *)zs->data;
}

static inline bool zs_mixed_sparse(const struct zspage *zs)
{
	return (uint64_t)((const struct zs_mrec *)(const void *)zs->data)->live *
	       ZS_MIXED_KEEP_DEN <
	       (uint64_t)zs->bump * ZS_MIXED_KEEP_NUM;
}

/* Does an object of class c (which has no zspage) go to a mixed zspage?
 * Their holes come back only by compaction: with no background
 * compactor, only if the caller said it compacts.  A class with
 * zspages of its own keeps its objects (the compactor moved some there:
 * frees then make room that allocations take, not holes).  A small
 * object whose slot costs less than a header and its granules (up to 64
 * bytes: zero pages, 26 bytes) goes to its class. */
static inline bool zs_mixed_for(const struct zs_pool *zp, const struct zs_class *c, size_t size)
{
	return zp->mixed && !c->huge &&
	       (zp->mixed_always || __atomic_load_n(&zp->auto_pol, __ATOMIC_RELAXED)) &&
	       !(c->size <= ZS_MIXED_SMALL && zs_mgran(size) * ZS_GRANULE >= c->size + 4);
}

/* Shard sh's new objects go to their classes once the compactor packed
 * a mass free's objects into its mixed zspages (zs_mixed_settle, before
 * such a pass), until the shard holds no page at all
 * (zs_mixed_unsettle, where a class's or the mixed class's last zspage
 * went, and in each compaction; its counters read without the locks).
 * Churn after the pass then frees and allocates in classes, where
 * allocations take the room frees make, and the packed zspages only
 * drain: new objects in them would leave holes that only moves take
 * back (600 ms of churn over the 4,886 objects of test_policy's
 * test_ratio_churn_quiet moved 12,990 with them, against none).  Not
 * back to mixed zspages when only the packed ones are gone: under fast
 * churn the new mixed zspages thin out like a mass free, are packed in
 * turn, and allocations go back and forth (allocbench --latency:
 * docs/results/2026-12-04-repack.md).  An emptied pool fills mixed
 * zspages again. */
static inline void zs_mixed_settle(struct zs_pool *zp, unsigned sh)
{
	__atomic_fetch_or(&zp->mixed_settled, 1u << sh, __ATOMIC_RELAXED);
}

static inline bool zs_mixed_settled(const struct zs_pool *zp, unsigned sh)
{
	return __atomic_load_n(&zp->mixed_settled, __ATOMIC_RELAXED) >> sh & 1;
}

static inline void zs_mixed_unsettle(struct zs_pool *zp, unsigned sh)
{
	struct zs_class **s;

	if (zmi_likely(!zs_mixed_settled(zp, sh)))
		return;
	s = __atomic_load_n(&zp->shard[sh], __ATOMIC_ACQUIRE);
	/* the classes, the huge one and the mixed one (k == nclasses) */
	for (unsigned k = 0; s && k <= zp->nclasses; k++) {
		struct zs_class *c = __atomic_load_n(&s[k], __ATOMIC_ACQUIRE);

		if (c && __atomic_load_n(&c->npages, __ATOMIC_RELAXED))
			return;
	}
	__atomic_fetch_and(&zp->mixed_settled, ~(1u << sh), __ATOMIC_RELAXED);
}

/* Is the object whose header hd is at granule g of mixed zspage zs live:
 * does the word its back reference names name it? */
static inline bool zs_mhdr_live(struct zs_pool *zp, const struct zspage *zs,
				const struct zs_mhdr *hd, unsigned g)
{
	uint64_t v = zs_load_ref(zp, hd->ref);

	return (v & 1) && !(v & ZS_TAG_HUGE) && zs_slot_id(v) == zs->id &&
	       zs_slot_obj(v) == g;
}

/* The live granules of mixed class m: those below the bumps, in the part
 * of the objects placed there that live (counters read without the
 * lock: an estimate; exact in a pool nothing was freed from). */
static inline uint64_t zs_mixed_live(const struct zs_class *m)
{
	uint64_t placed = __atomic_load_n(&m->mplaced, __ATOMIC_RELAXED);

	return placed ? (uint64_t)__atomic_load_n(&m->mgran, __ATOMIC_RELAXED) *
			__atomic_load_n(&m->used, __ATOMIC_RELAXED) / placed : 0;
}

/* Pages of slack in c (populated bytes not holding objects). lock held */
static inline uint64_t zs_slack_pages(const struct zs_pool *zp, const struct zs_class *c)
{
	uint64_t have = (uint64_t)c->npages << zp->shift;
	uint64_t used = c->mixed ? zs_mixed_live(c) * ZS_GRANULE : (uint64_t)c->used * c->size;

	return have > used ? (have - used) >> zp->shift : 0;
}

static inline void zs_auto_freed(struct zs_pool *zp, struct zs_class *c, unsigned g,
				 bool moved)
{
	uint8_t pol = __atomic_load_n(&zp->auto_pol, __ATOMIC_RELAXED);

	if (zmi_likely(pol == ZM_COMPACT_RATIO)) {
		uint32_t *hint;

		if (zmi_likely(!moved || g > ZS_AUTO_GROUP))
			return;
		/* a child after fork has no worker thread until it is needed */
		zmi_worker_ensure();
		hint = &zp->hint[c->idx >> zp->cshift].idx;
		if (__atomic_load_n(hint, __ATOMIC_RELAXED) != c->idx &&
		    zs_slack_pages(zp, c) >= ZS_AUTO_MIN_CLASS_SLACK)
			__atomic_store_n(hint, c->idx, __ATOMIC_RELAXED);
	} else if (pol == ZM_COMPACT_WATERMARK) {
		zs_auto_note_free(zp, c);
	}
}

static inline struct zspage *zs_huge_view(const struct zs_pool *zp, uint64_t v)
{
	struct zspage *zs = &zs_hview;

	zs->first = zs_huge_pfn(v);
	zs->pfnx = NULL;
	zs->size = (uint32_t)zp->page_size;
	return zs;
}

/* The lookup loop (zsmalloc/access.c tells how it works) for handle h,
 * whose word is ref: a slot (key false) or an owner word (key true);
 * `check` the tag bits the word must match.  Here, inline, so that the
 * paths that know which kind of handle they hold (a put's, a get's) make
 * no calls to reach the object: with key and ref's owner bit known where
 * it is inlined, the branches on them go. */
static inline __attribute__((always_inline)) struct zspage *
zs_lookup_at(struct zs_pool *zp, zm_handle_t h, uint32_t ref, bool key, unsigned *obj,
	     unsigned hz)
{
	const uint64_t check = key ? 1 : ZS_TAG_MASK;

	for (;;) {
		uint64_t v = key ? zs_load_ref(zp, ref) : zs_load_slot(zp, ref);
		struct zspage *zs;

		if (zmi_unlikely((v ^ h) & check))
			return NULL;
		if (zmi_unlikely(v & ZS_TAG_HUGE)) {  /* never moves: no hazard */
			*obj = 0;
			return zs_huge_view(zp, v);
		}
		zs = zs_by_id(zp, zs_slot_id(v));
		zmi_pool_hazard_set(hz, zs);
		if (zmi_likely((key ? zs_load_ref(zp, ref) : zs_load_slot(zp, ref)) == v &&
			       zs_by_id(zp, zs_slot_id(v)) == zs)) {
			/* the slot still names zs, and the zspage table zs
			 * (a record that moved, zsmalloc/record.c, is found again),
			 * so zs is alive */
			if (zmi_likely(!__atomic_load_n(&zs->migrating, __ATOMIC_ACQUIRE) &&
				      (key ? zs_load_ref(zp, ref) : zs_load_slot(zp, ref)) == v)) {
				ZM_ASSERT(zs->magic == ZS_MAGIC);
				*obj = zs_slot_obj(v);
				return zs;
			}
			zmi_pool_hazard_clear(hz);
			sched_yield();
			continue;
		}
		zmi_pool_hazard_clear(hz);
	}
}

/* zs_lookup for a handle the caller knows to be an owner key's (key) or
 * a slot's (not key): its form checked, then the loop, all inline.  NULL,
 * with nothing reported, for a bad handle. */
static inline __attribute__((always_inline)) struct zspage *
zs_lookup_as(struct zs_pool *zp, zm_handle_t h, bool key, unsigned *obj, unsigned hz)
{
	uint64_t idx = h >> ZS_TAG_BITS;

	if (key) {
		/* only "live" to match (zsmalloc.h) */
		if (zmi_unlikely((h & ZS_TAG_MASK) != zp->key_tag ||
				(h & ~ZS_H_OWNER) >> ZS_TAG_BITS >= zp->nowner))
			return NULL;
		return zs_lookup_at(zp, h, zs_handle_ref(h), true, obj, hz);
	}
	if (zmi_unlikely(!(h & 1) || idx == 0 || idx >= ZS_MAX_HANDLES))
		return NULL;
	return zs_lookup_at(zp, h, (uint32_t)idx, false, obj, hz);
}

#endif
