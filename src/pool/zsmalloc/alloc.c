/*
 * zsmalloc malloc and free.
 *
 * malloc: under the class lock, take the fullest partly used zspage (its
 * free chain first, then its never-used tail), else make a new zspage
 * (still under the class lock: the pages layer's lock nests inside it).  A
 * handle slot from the class's free list records where the object is.  A
 * class with no zspage at all sends its objects to a mixed zspage
 * instead (below), without taking its own lock.
 *
 * free: find the zspage from the handle, take its class lock, check again
 * that the handle is live (a racing double free loses here), chain the
 * object into the zspage's free chain, release the slot, and if the
 * zspage is now empty, give its pages back.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "pool/zsmalloc/zsmalloc.h"

/* The fullest zspage that is not full: the highest non-empty group below
 * the full one, by the group bitmap. */
static inline struct zspage *pick(struct zs_class *c)
{
	unsigned m = c->gmask & ((1u << (ZS_GROUPS - 1)) - 1);

	return m ? c->group[31 - __builtin_clz(m)] : NULL;
}

/* Take a free object of zs (lock held, zs not full): from the free chain,
 * else from the bump, populating the pages under it.  ZS_NONE when a page
 * could not be had.  The chain runs through the back references of the
 * free objects, in the record: neither end touches the object's memory. */
unsigned zs_take_obj(struct zs_pool *zp, struct zs_class *c, struct zspage *zs)
{
	unsigned obj = zs->free_head;

	if (obj != ZS_NONE) {
		zs->free_head = (uint16_t)zs_backref(zs, c)[obj];
	} else {
		obj = zs->bump;
		if (zmi_unlikely(zs_populate(zp, c, zs, obj)))
			return ZS_NONE;
		zs->bump++;
	}
	zs->inuse++;
	return obj;
}

void zs_put_obj(struct zs_pool *zp, struct zspage *zs, unsigned obj)
{
	zs_poison_obj(zp, zs, obj);
	zs->data[obj] = zs->free_head;
	zs->free_head = (uint16_t)obj;
	zs->inuse--;
}

/*
 * Borrowing.  When an object's own class has no zspage with room, a slot
 * in one of the next ZS borrow classes up that is free *without taking a
 * new page* is used instead: a few bytes of internal waste (at most
 * borrow * spacing) instead of opening a new page.  It fills the
 * partly used last pages that every class otherwise keeps (see
 * docs/zsmalloc.md for the measurement).  Each class lock is taken alone.
 */
static zm_handle_t borrow(struct zs_pool *zp, struct zs_class *c, size_t size);

static zm_handle_t fail(struct zs_pool *zp)
{
	__atomic_fetch_add(&zp->malloc_fail, 1, __ATOMIC_RELAXED);
	errno = ENOMEM;
	return 0;
}

/* Allocate in zs of class c; lock held, zs has room; drops the lock. */
static zm_handle_t alloc_in(struct zs_pool *zp, struct zs_class *c, struct zspage *zs)
{
	unsigned obj;
	uint32_t idx;
	uint64_t tag;

	idx = zs_slot_alloc(zp, c);
	if (zmi_unlikely(!idx)) {
		zmi_unlock(&c->lock);
		return fail(zp);
	}
	obj = zs_take_obj(zp, c, zs);
	if (zmi_unlikely(obj == ZS_NONE)) {
		zs_slot_free(zp, c, idx);
		zmi_unlock(&c->lock);
		return fail(zp);
	}
	zs_backref(zs, c)[obj] = idx;
	tag = (zs_load_slot(zp, idx) & ZS_TAG_MASK) | 1;
	zs_store_slot(zp, idx, zs_slot_live(zs->id, obj, tag));
	zs_count(&c->used, 1);
	zs_group_set(c, zs);
	zmi_unlock(&c->lock);
	return ((zm_handle_t)idx << ZS_TAG_BITS) | tag;
}

static zm_handle_t borrow(struct zs_pool *zp, struct zs_class *c, size_t size)
{
	/* the classes above in the same shard, not the huge one */
	unsigned k = c->idx & ((1u << zp->cshift) - 1), sh = c->idx >> zp->cshift;

	for (unsigned up = k + 1; up < zp->nclasses - 1 && up <= k + zp->borrow; up++) {
		struct zs_class *b = zs_class_at(zp, sh << zp->cshift | up);
		struct zspage *zs;

		if (!b)
			continue;  /* never made: nothing to borrow */
		zmi_lock(&b->lock);
		zs = zs_room_in(zp, b);
		if (zs)
			return alloc_in(zp, b, zs);
		zmi_unlock(&b->lock);
	}
	return 0;
}

/* Class c (number k, or the mixed class) of this thread's shard sh was
 * locked when an allocation came to it: the class to lock instead and
 * wait for (NULL if it cannot be made).  Another thread allocating in c
 * (c->alloc_by): move for good, from shard 0 to a shard of this thread's
 * own (its number picks it), from there back to 0, so that two threads
 * allocating side by side part instead of moving together.  Anyone else,
 * a compactor's step (c->compacting) or a thread freeing an object of c:
 * stay, and wait.  Moving away from those undid the parting: with two
 * shards it sent the thread into the other thread's shard, where the
 * two shared classes, and the frees of each other's objects made more
 * such collisions (docs/results/2026-12-04-shards.md). */
static inline struct zs_class *collided(struct zs_pool *zp, struct zs_class *c, unsigned sh,
					unsigned k)
{
	unsigned n = zp->nshards, me = zmi_pool_thread_number();
	uint32_t by = __atomic_load_n(&c->alloc_by, __ATOMIC_RELAXED);

	if (n == 1 || by == 0 || by == me || __atomic_load_n(&c->compacting, __ATOMIC_RELAXED))
		return c;
	sh = sh == 0 ? 1 + me % (n - 1) : 0;
	zmi_pool_self.shard = sh;
	return zs_class_get(zp, sh, k);
}

/*
 * Mixed zspages (zsmalloc/zsmalloc.h).  An object whose class has no zspage
 * (zs_mixed_for, zsmalloc.h) goes to a hole that a free left in one of its
 * shard's mixed zspages (hole_find), else to the tail of the one of its
 * shard's open mixed zspages with the least room that holds it; when none
 * has room, a new one opens in place of the one with the least room,
 * which closes.
 * Under the mixed class's lock alone: no class lock is held meanwhile
 * (lock order: mixed lock -> class lock, the compactor's).
 */
static zm_handle_t mixed_alloc(struct zs_pool *zp, unsigned sh, size_t size)
{
	struct zs_class *m = zs_class_get(zp, sh, zp->nclasses);
	struct zspage *zs, *dead;
	uint32_t idx;
	uint64_t tag;
	unsigned g;

	if (zmi_unlikely(!m))
		return 0;
	if (zmi_unlikely(!zmi_trylock(&m->lock))) {
		/* as zs_malloc with a class's lock; but a settled shard takes
		 * no new mixed object (zs_mixed_settle): this one waits where
		 * it was, the thread's next ones go to the new shard's classes */
		struct zs_class *to = collided(zp, m, sh, zp->nclasses);

		if (to && !zs_mixed_settled(zp, to->idx >> zp->cshift))
			m = to;
		zmi_lock(&m->lock);
	}
	__atomic_store_n(&m->alloc_by, zmi_pool_thread_number(), __ATOMIC_RELAXED);
	idx = zs_slot_alloc(zp, m);
	if (zmi_unlikely(!idx))
		goto out;
	g = zs_mixed_place(zp, m, size, idx, ZS_PLACE_ANY, &zs, &dead);
	if (zmi_unlikely(g == ZS_NONE)) {
		zs_slot_free(zp, m, idx);
		zmi_unlock(&m->lock);
		if (dead)
			zs_zspage_free(zp, m, dead);
		return 0;
	}
	tag = (zs_load_slot(zp, idx) & ZS_TAG_MASK) | 1;
	zs_store_slot(zp, idx, zs_slot_live(zs->id, g, tag));
	/* the next object's header, in a page of the zspage already: fetched
	 * for writing while the caller works (a write to a line not in the
	 * cache, waited for by the next lock's exchange, was most of an
	 * allocation's time in allocbench, which never touches objects) */
	if ((((size_t)zs->bump * ZS_GRANULE) >> zp->shift) < zs->npop)
		__builtin_prefetch(zs_mhdr(zp, zs, zs->bump), 1);
	zmi_unlock(&m->lock);
	return ((zm_handle_t)idx << ZS_TAG_BITS) | tag;
out:
	zmi_unlock(&m->lock);
	return 0;
}

/* Put the hole at granule g of mixed zspage zs of m (its header there,
 * with its length), e granules to the next header, on the list of its
 * extent, and name zs as that list's latest (m's lock held). */
static void hole_put(struct zs_pool *zp, struct zs_class *m, struct zspage *zs, unsigned g,
		     unsigned e)
{
	struct zs_mholes *mh = zs_mrec_of(zs)->ix;
	unsigned b = zs_mhole_bin(e);

	if (zmi_unlikely(!mh)) {
		/* the zspage's first hole: its index (without one, the hole
		 * waits for the compactor, as all did before) */
		mh = malloc(sizeof(*mh));
		if (!mh)
			return;
		mh->mask = 0;
		zs_mrec_of(zs)->ix = mh;
		__atomic_fetch_add(&zp->mholes_bytes, zs_malloc_cost(sizeof(*mh)),
				   __ATOMIC_RELAXED);
	}

	zs_mhdr(zp, zs, g)->ref = mh->mask >> b & 1 ? mh->head[b] : ZS_NONE;
	mh->head[b] = (uint16_t)g;
	mh->mask |= 1u << b;
	{
		struct zs_mhint **hp = &zp->mhint[m->idx >> zp->cshift];

		if (zmi_unlikely(!*hp)) {
			/* the shard's first hole (without them, the fullest
			 * zspages alone are looked at) */
			*hp = calloc(1, sizeof(**hp));
			if (!*hp)
				return;
			__atomic_fetch_add(&zp->mholes_bytes, zs_malloc_cost(sizeof(**hp)),
					   __ATOMIC_RELAXED);
		}
		(*hp)->zs[b] = zs;
	}
}

/* The end of the hole or object at granule g of zs (header hd): the next
 * header's granule, or the bump if that is sooner (the granule a page's
 * end skips after the last object is not the zspage's). */
static inline unsigned hole_end(const struct zs_pool *zp, const struct zspage *zs, unsigned g,
				const struct zs_mhdr *hd)
{
	unsigned end = zs_mnext(zp, g, hd->len);

	return end < zs->bump ? end : zs->bump;
}

/* Does a hole at granule g, to `end`, hold an object of need granules:
 * its rest none, or two granules at least (room for a header)?  *rest:
 * where the rest starts. */
static inline bool hole_fits(const struct zs_pool *zp, unsigned g, unsigned end, unsigned need,
			     unsigned *rest)
{
	unsigned r;

	if (g + need > end)
		return false;
	r = zs_mfirst(zp, g + need);
	*rest = r;
	return r >= end || end - r >= 2;
}

/* The granules from rest to end of mixed zspage zs of m, what an object
 * placed in a larger extent left (two granules at least, hole_fits): a
 * hole with a header of its own, a length that steps to the next header
 * (m's lock held). */
static void hole_rest(struct zs_pool *zp, struct zs_class *m, struct zspage *zs, unsigned rest,
		      unsigned end)
{
	struct zs_mhdr *rh = zs_mhdr(zp, zs, rest);

	rh->len = (uint16_t)((end - rest) * ZS_GRANULE - ZS_MHDR_BYTES);
	zs_poison_obj(zp, zs, rest);
	hole_put(zp, m, zs, rest, end - rest);
	zs->placed++;
	zs_count(&m->mplaced, 1);
}

/* Take a hole of mixed zspage zs of m for an object of need granules
 * (m's lock held): the head of the list of need's extent, if it fits,
 * else the head of the first list whose every hole fits (their smallest
 * extent need + 3: the rest two granules, and one a page's end may
 * skip).  The rest, if any, goes back as a hole of its own.  Returns the
 * granule for the object's header, or ZS_NONE. */
static unsigned hole_take(struct zs_pool *zp, struct zs_class *m, struct zspage *zs,
			  unsigned need)
{
	struct zs_mholes *mh = zs_mrec_of(zs)->ix;
	unsigned b = zs_mhole_bin(need), g = ZS_NONE, end = 0, rest = 0;
	uint32_t above;
	struct zs_mhdr *hd;

	if (!mh || !mh->mask)
		return ZS_NONE;
	if (mh->mask >> b & 1) {
		g = mh->head[b];
		hd = zs_mhdr(zp, zs, g);
		end = hole_end(zp, zs, g, hd);
		if (!hole_fits(zp, g, end, need, &rest))
			g = ZS_NONE;
	}
	if (g == ZS_NONE) {
		above = mh->mask & ~((2u << zs_mhole_bin(need + 2)) - 1);
		if (!above)
			return ZS_NONE;
		b = (unsigned)__builtin_ctz(above);
		g = mh->head[b];
		hd = zs_mhdr(zp, zs, g);
		end = hole_end(zp, zs, g, hd);
		if (zmi_unlikely(!hole_fits(zp, g, end, need, &rest)))
			return ZS_NONE;   /* not reached: the list's holes all fit */
	}
	mh->head[b] = (uint16_t)hd->ref;
	if (mh->head[b] == ZS_NONE)
		mh->mask &= ~(1u << b);
	if (rest < end)
		hole_rest(zp, m, zs, rest, end);
	return g;
}

/* Zspages of m whose hole indexes an allocation looks at, fullest first,
 * when the one it took holes from last has none that fits; beyond them
 * the object goes to a tail.  And the records it reads at most for them
 * (zspages with no hole are passed over: the fill's closed ones sit at
 * the top), so that its cost stays bounded whatever the zspages hold. */
#define ZS_MHOLE_LOOK 16
#define ZS_MHOLE_VISIT 64
/* The fullness groups looked at before the lists' latest zspages
 * (zs_pool.mhint): those of zspages 70% live or more, which the
 * compactor keeps (it evacuates those below 3/4), filled up first; the
 * emptier ones after the hints.  After a mass free none is that full,
 * and the hints find a hole at once where a walk down the groups read
 * up to ZS_MHOLE_VISIT records for each allocation. */
#define ZS_MHOLE_FULL 7
/* The lists above need's whose latest zspages an allocation looks at, at
 * most: each costs a record's line and its index's. */
#define ZS_MHINT_LOOK 4

/* May an allocation look at zs's holes: not the zspage just tried, one
 * with a hole, not being evacuated (m's lock held)? */
static inline bool may_take(const struct zs_class *m, struct zspage *zs)
{
	return zs != m->hole && zs_mrec_of(zs)->ix && zs_mrec_of(zs)->ix->mask &&
	       !__atomic_load_n(&zs->migrating, __ATOMIC_RELAXED);
}

/* Take a hole for need granules in zs of m (may_take): the granule, and
 * m's zspage to take holes from first becomes zs; or ZS_NONE. */
static inline unsigned take_in(struct zs_pool *zp, struct zs_class *m, struct zspage *zs,
			       unsigned need, struct zspage **where)
{
	unsigned g = hole_take(zp, m, zs, need);

	if (g != ZS_NONE) {
		m->hole = zs;
		*where = zs;
	}
	return g;
}

/* Walk m's fullness groups from hi down to lo for a hole of need
 * granules, within the budgets *look and *visit. */
static unsigned scan_groups(struct zs_pool *zp, struct zs_class *m, unsigned need, unsigned hi,
			    unsigned lo, unsigned *look, unsigned *visit, struct zspage **where)
{
	unsigned g;

	for (unsigned gr = hi; gr >= lo && *look < ZS_MHOLE_LOOK; gr--)
		for (struct zspage *zs = m->group[gr];
		     zs && *look < ZS_MHOLE_LOOK && (*visit)++ < ZS_MHOLE_VISIT; zs = zs->next) {
			if (!may_take(m, zs))
				continue;
			++*look;
			if ((g = take_in(zp, m, zs, need, where)) != ZS_NONE)
				return g;
		}
	return ZS_NONE;
}

/* A hole of m for an object of need granules: in the zspage it took
 * holes from last; else in one of the fullest (not one being evacuated:
 * the compactor takes the emptiest); else in the latest zspage of need's
 * own list, then of the lists above whose every hole fits (hole_take's
 * rule), nearest first; else in the emptier zspages, fullest first.  Its
 * granule and *where, or ZS_NONE.  Only when some object of m was freed
 * (fewer live than placed), so that a fill never looks. */
static unsigned hole_find(struct zs_pool *zp, struct zs_class *m, unsigned need,
			  struct zspage **where)
{
	const struct zs_mhint *mh = zp->mhint[m->idx >> zp->cshift];
	unsigned look = 0, visit = 0, g, b, tries = 0;

	if (m->used >= m->mplaced)
		return ZS_NONE;
	if (m->hole) {
		g = hole_take(zp, m, m->hole, need);
		if (g != ZS_NONE) {
			*where = m->hole;
			return g;
		}
	}
	g = scan_groups(zp, m, need, ZS_GROUPS - 1, ZS_MHOLE_FULL, &look, &visit, where);
	if (g != ZS_NONE)
		return g;
	b = zs_mhole_bin(need);
	if (mh && mh->zs[b] && may_take(m, mh->zs[b]) &&
	    (g = take_in(zp, m, mh->zs[b], need, where)) != ZS_NONE)
		return g;
	for (b = zs_mhole_bin(need + 2) + 1; mh && b < ZS_MHOLE_BINS && tries < ZS_MHINT_LOOK; b++) {
		if (!mh->zs[b])
			continue;
		tries++;
		if (may_take(m, mh->zs[b]) && (g = take_in(zp, m, mh->zs[b], need, where)) != ZS_NONE)
			return g;
	}
	return scan_groups(zp, m, need, ZS_MHOLE_FULL - 1, 1, &look, &visit, where);
}

unsigned zs_mixed_place(struct zs_pool *zp, struct zs_class *m, size_t size, uint32_t ref,
			enum zs_place how, struct zspage **where, struct zspage **dead)
{
	unsigned need = zs_mgran(size), g;
	struct zspage *zs = NULL;
	struct zs_mhdr *hd;

	*dead = NULL;
	/* a hole first: no page taken, and the zspage fuller */
	g = how == ZS_PLACE_ANY ? hole_find(zp, m, need, &zs) : ZS_NONE;
	if (g != ZS_NONE) {
		hd = zs_mhdr(zp, zs, g);
		hd->ref = ref;
		hd->len = (uint16_t)size;
		zs_mrec_of(zs)->live += need;
		zs->inuse++;
		zs_count(&m->used, 1);
		zs_mixed_group_set(m, zs);
		*where = zs;
		return g;
	}
	/* the open zspage with the least room that holds it (its tail
	 * filled by the objects small enough, not left unused) */
	for (unsigned i = 0, best = UINT32_MAX; i < ZS_MIXED_OPEN; i++) {
		struct zspage *f = m->front[i];
		unsigned room = f ? m->objs - zs_mfirst(zp, f->bump) : 0;

		if (f && room >= need && room < best) {
			zs = f;
			best = room;
		}
	}
	if (!zs) {
		/* a new one, in place of the one with the least room */
		unsigned k = 0;

		zs = zs_zspage_new(zp, m);
		if (!zs)
			return ZS_NONE;
		zs->placed = 0;
		zs_mrec_of(zs)->live = 0;
		zs_mrec_of(zs)->ix = NULL;
		m->zspages++;
		for (unsigned i = 0; i < ZS_MIXED_OPEN; i++)
			if (!m->front[i] || (m->front[k] && m->front[i]->bump > m->front[k]->bump))
				k = i;
		m->front[k] = zs;
	}
	g = zs_mfirst(zp, zs->bump);
	ZM_ASSERT(size <= UINT16_MAX && g + need <= m->objs);
	if (zmi_unlikely(zs_populate(zp, m, zs, g + need - 1))) {
		if (!zs->inuse) {
			/* the zspage just made: it goes again */
			zs_mixed_close(m, zs);
			m->zspages--;
			zs_zspage_retire(zp, m, zs);
			*dead = zs;
		}
		return ZS_NONE;
	}
	hd = zs_mhdr(zp, zs, g);
	hd->ref = ref;
	hd->len = (uint16_t)size;
	/* the granules below the bump: a granule skipped at a page's end too */
	zs_count(&m->mgran, (int32_t)(g + need - zs->bump));
	zs->bump = (uint16_t)(g + need);
	zs_mrec_of(zs)->live += need;
	zs->inuse++;
	zs->placed++;
	zs_count(&m->used, 1);
	zs_count(&m->mplaced, 1);
	zs_mixed_group_set(m, zs);
	*where = zs;
	return g;
}

/* Threads that ever allocated, numbering them: the n-th starts in shard
 * n - 1 (mod the pool's shards).  A lone thread keeps everything in shard
 * 0; two threads allocating side by side part from the start instead of
 * sharing zspages until their locks collide (docs/zsmalloc.md). */
static inline unsigned my_shard(void)
{
	if (zmi_unlikely(!zmi_pool_self.shard_set)) {
		zmi_pool_self.shard = zmi_pool_thread_number() - 1;
		zmi_pool_self.shard_set = true;
	}
	return zmi_pool_self.shard;
}

zm_handle_t zs_malloc(struct zm_pool *pool, size_t size)
{
	struct zs_pool *zp = zs_of(pool);
	unsigned k = zs_class_for(zp, size);
	unsigned sh = my_shard() & (zp->nshards - 1);
	struct zs_class *c = zs_class_get(zp, sh, k);
	struct zspage *zs;
	zm_handle_t h;

	if (zmi_unlikely(!c))
		return fail(zp);
	/* a class with no zspage: its objects go to a mixed zspage (without
	 * taking the class's lock: a class that gets a zspage meanwhile
	 * only means this object went to a mixed one) */
	if (zmi_unlikely(!__atomic_load_n(&c->npages, __ATOMIC_RELAXED)) && zs_mixed_for(zp, c, size) &&
	    !zs_mixed_settled(zp, sh)) {
		h = mixed_alloc(zp, sh, size);
		return h ? h : fail(zp);
	}
	if (zmi_unlikely(!zmi_trylock(&c->lock))) {
		c = collided(zp, c, sh, k);
		if (zmi_unlikely(!c))
			return fail(zp);
		zmi_lock(&c->lock);
	}
	__atomic_store_n(&c->alloc_by, zmi_pool_thread_number(), __ATOMIC_RELAXED);
	if (zmi_unlikely(c->huge)) {
		h = zs_huge_alloc(zp, c);
		return h ? h : fail(zp);
	}
	zs = pick(c);
	if (zmi_likely(zs))
		return alloc_in(zp, c, zs);
	if (zp->borrow) {
		zmi_unlock(&c->lock);
		h = borrow(zp, c, size);
		if (h)
			return h;
		zmi_lock(&c->lock);
		zs = pick(c);
		if (zs)
			return alloc_in(zp, c, zs);
	}
	zs = zs_zspage_new(zp, c);
	if (!zs) {
		zmi_unlock(&c->lock);
		return fail(zp);
	}
	zs_group_set(c, zs);
	c->zspages++;
	return alloc_in(zp, c, zs);
}

/* Find the (not huge) object of h, a slot's handle or (key) an owner
 * key's, and lock its class with the object pinned: its zspage not being
 * migrated, and its slot, read under the lock, still naming it.  Returns
 * the class, locked, and sets *zsp and *obj; NULL for a bad handle. */
static inline __attribute__((always_inline)) struct zs_class *
lock_obj(struct zs_pool *zp, zm_handle_t h, bool key, struct zspage **zsp, unsigned *obj)
{
	const uint64_t check = key ? 1 : ZS_TAG_MASK;
	uint32_t ref = zs_handle_ref(h);
	struct zs_class *c;
	struct zspage *zs;
	uint64_t v;

	for (;;) {
		/* the hazard keeps zs alive (and unmoved) while we read its
		 * class and take the lock; the lookup inline, as the caller
		 * says which kind of handle h is */
		zs = zs_lookup_as(zp, h, key, obj, ZM_HAZARD_RW);
		if (zmi_unlikely(!zs)) {
			zmi_bad_input("zsmalloc: bad handle %#llx (stale, foreign or freed)",
				     (unsigned long long)h);
			return NULL;
		}
		c = zs_class_of(zp, zs->cls);
		zmi_lock(&c->lock);
		/* A compactor may have taken zs into its batch while we waited
		 * for the lock: then leave it alone (it must not be emptied
		 * and retired under the compactor), keep the hazard so that
		 * the compactor skips it or finishes, and look again. */
		if (zmi_unlikely(__atomic_load_n(&zs->migrating, __ATOMIC_ACQUIRE))) {
			zmi_unlock(&c->lock);
			sched_yield();
			zmi_pool_hazard_clear(ZM_HAZARD_RW);
			continue;
		}
		zmi_pool_hazard_clear(ZM_HAZARD_RW);
		/* still there?  (a racing free or a move changes the slot) */
		v = key ? zs_load_ref(zp, ref) : zs_load_slot(zp, ref);
		if (zmi_likely(!((v ^ h) & check) && !(v & ZS_TAG_HUGE) &&
			      zs_slot_id(v) == zs->id && zs_slot_obj(v) == *obj)) {
			*zsp = zs;
			return c;
		}
		zmi_unlock(&c->lock);
	}
}

/* Free object obj of mixed zspage zs of m (m's lock held, dropped): its
 * slot (or owner word) no longer names it, which makes it free; its
 * granules go on the zspage's hole index for the next objects (its
 * header read for its length, its bytes untouched: in debug builds,
 * poisoned); the zspage goes with its last object, open or not. */
static __attribute__((noinline)) int mixed_free(struct zs_pool *zp, struct zs_class *m,
						struct zspage *zs, unsigned obj, zm_handle_t h,
						bool key)
{
	bool moved;

	if (key)
		zs_store_ref(zp, zs_handle_ref(h), 0);
	else
		zs_slot_free(zp, m, zs_handle_idx(h));
	zs_count(&m->used, -1);
	if (zs->inuse == 1) {
		zs->inuse = 0;
		zs_count(&m->mgran, -(int32_t)zs->bump);
		zs_count(&m->mplaced, -(int32_t)zs->placed);
		zs_mixed_close(m, zs);
		zs_group_del(m, zs);
		m->zspages--;
		zs_zspage_retire(zp, m, zs);
		zmi_unlock(&m->lock);
		zs_zspage_free(zp, m, zs);
		zs_mixed_unsettle(zp, m->idx >> zp->cshift);
		return 0;
	}
	{
		/* its granules: a hole for the next objects */
		const struct zs_mhdr *hd = zs_mhdr(zp, zs, obj);

		zs_mrec_of(zs)->live -= zs_mgran(hd->len);
		hole_put(zp, m, zs, obj, hole_end(zp, zs, obj, hd) - obj);
	}
	zs_poison_obj(zp, zs, obj);
	zs->inuse--;
	moved = zs_mixed_group_set(m, zs);
	{
		uint8_t pol = __atomic_load_n(&zp->auto_pol, __ATOMIC_RELAXED);

		/* RATIO: the worker looks every period by itself (a child
		 * after fork gets one when a zspage grows sparse);
		 * WATERMARK: wake it when the class crosses the line */
		if (pol == ZM_COMPACT_RATIO) {
			if (moved && zs->group <= ZS_AUTO_GROUP)
				zmi_worker_ensure();
		} else if (pol == ZM_COMPACT_WATERMARK) {
			zs_auto_note_free(zp, m);
		}
	}
	zmi_unlock(&m->lock);
	return 0;
}

/* Free the (not huge) object of h, a slot's handle or (key) a key's. */
static inline __attribute__((always_inline)) int free_obj(struct zs_pool *zp, zm_handle_t h,
							  bool key)
{
	struct zs_class *c;
	struct zspage *zs;
	unsigned obj;
	bool moved;

	c = lock_obj(zp, h, key, &zs, &obj);
	if (zmi_unlikely(!c)) {
		zmi_bad_input("zsmalloc: free of bad handle %#llx (stale, foreign "
			     "or already free)", (unsigned long long)h);
		return -EINVAL;
	}
	if (zmi_unlikely(c->mixed))
		return mixed_free(zp, c, zs, obj, h, key);
	if (key)
		zs_store_ref(zp, zs_handle_ref(h), 0);
	else
		zs_slot_free(zp, c, zs_handle_idx(h));
	zs_count(&c->used, -1);
	if (zs->inuse == 1) {
		/* the last object: the zspage goes, so its free chain does
		 * not matter, and the object's page is not touched (a page
		 * never written would fault in just for the link) */
		bool last;

		zs->inuse = 0;
		zs_group_del(c, zs);
		last = !--c->zspages;
		zs_zspage_retire(zp, c, zs);
		zmi_unlock(&c->lock);
		zs_zspage_free(zp, c, zs);
		if (zmi_unlikely(last))
			zs_mixed_unsettle(zp, c->idx >> zp->cshift);
		return 0;
	}
	zs_put_obj(zp, zs, obj);
	moved = zs_group_set(c, zs);
	zs_auto_freed(zp, c, zs->group, moved);
	zmi_unlock(&c->lock);
	return 0;
}

/* An owner key's object: its word says whether it is huge (a live
 * object never changes class). */
static __attribute__((noinline)) int free_key_obj(struct zs_pool *zp, zm_handle_t h)
{
	uint64_t key = (h & ~ZS_H_OWNER) >> ZS_TAG_BITS;

	if (key < zp->nowner && (zs_load_ref(zp, (uint32_t)key | ZS_REF_OWNER) & 3) == 3)
		return zs_huge_free(zp, h);
	return free_obj(zp, h, true);
}

int zs_free(struct zm_pool *pool, zm_handle_t h)
{
	struct zs_pool *zp = zs_of(pool);

	if (zmi_unlikely(h & ZS_H_OWNER))
		return free_key_obj(zp, h);
	if (zmi_unlikely(h & ZS_TAG_HUGE))
		return zs_huge_free(zp, h);
	return free_obj(zp, h, false);
}

/* ---- owner words (pool.h) ------------------------------------------ */

/* Give object obj of zs (handle h's, class c locked) to the owner word
 * kref, and the handle slot back; unlocks c.  The word first, then the
 * back reference: a compactor reads both only under c's lock. */
static inline void bind_locked(struct zs_pool *zp, struct zs_class *c, struct zspage *zs,
			       unsigned obj, zm_handle_t h, uint32_t kref)
{
	zs_store_ref(zp, kref, zs_slot_live(zs->id, obj, 1));
	if (c->mixed)
		zs_mhdr(zp, zs, obj)->ref = kref;
	else
		zs_backref(zs, c)[obj] = kref;
	zs_slot_free(zp, c, zs_handle_idx(h));
	zmi_unlock(&c->lock);
}

int zs_bind(struct zm_pool *pool, zm_handle_t h, uint64_t key)
{
	struct zs_pool *zp = zs_of(pool);
	uint32_t kref = (uint32_t)key | ZS_REF_OWNER;
	struct zs_class *c;
	struct zspage *zs;
	unsigned obj;

	if (zmi_unlikely(h & ZS_H_OWNER)) {
		zmi_bad_input("zsmalloc: bind of %#llx, a key's handle", (unsigned long long)h);
		return -EINVAL;
	}
	if (zmi_unlikely(zs_load_ref(zp, kref) & 1)) {
		zmi_bad_input("zsmalloc: bind to key %llu, which holds an object",
			     (unsigned long long)key);
		return -EINVAL;
	}
	if (h & ZS_TAG_HUGE)
		return zs_huge_bind(zp, h, kref);
	c = lock_obj(zp, h, false, &zs, &obj);
	if (zmi_unlikely(!c)) {
		zmi_bad_input("zsmalloc: bind of bad handle %#llx", (unsigned long long)h);
		return -EINVAL;
	}
	bind_locked(zp, c, zs, obj, h, kref);
	return 0;
}

zm_handle_t zs_key_handle_of(struct zm_pool *pool, uint64_t key)
{
	struct zs_pool *zp = zs_of(pool);

	return zs_load_ref(zp, (uint32_t)key | ZS_REF_OWNER) & 1 ? zs_key_handle(zp, key) : 0;
}

int zs_free_key(struct zm_pool *pool, uint64_t key)
{
	zm_handle_t h = zs_key_handle_of(pool, key);

	if (zmi_unlikely(!h)) {
		zmi_bad_input("zsmalloc: free of key %llu, which holds nothing",
			     (unsigned long long)key);
		return -EINVAL;
	}
	return zs_free(pool, h);
}

/* Copy size bytes of buf into object obj of zs (class c locked). */
static inline void copy_in(struct zs_pool *zp, struct zspage *zs, unsigned obj, const void *buf,
			   size_t size)
{
	char *seg[2];
	size_t l[2];

	if (zs_obj_segs(zp, zs, obj, seg, l) == 1 || size <= l[0]) {
		memcpy(seg[0], buf, size);
	} else {
		memcpy(seg[0], buf, l[0]);
		memcpy(seg[1], (const char *)buf + l[0], size - l[0]);
	}
}

/* Copy buf into h's object (a slot's, not huge, just allocated) and give
 * it to the owner word kref (which holds nothing), with one lookup for
 * both: under the class lock, where the object cannot move.  0, or
 * -EINVAL for a bad handle. */
static int write_bind(struct zs_pool *zp, zm_handle_t h, uint32_t kref, const void *buf,
		      size_t size)
{
	struct zs_class *c;
	struct zspage *zs;
	unsigned obj;

	c = lock_obj(zp, h, false, &zs, &obj);
	if (zmi_unlikely(!c))
		return -EINVAL;
	copy_in(zp, zs, obj, buf, size);
	bind_locked(zp, c, zs, obj, h, kref);
	return 0;
}

/* A put over key's object (not huge) where the new one fits it: in a
 * class's zspage, when the new size is of the same class; in a mixed
 * zspage, when it takes the same granules, or fewer with a rest a hole
 * can have (hole_fits).  The bytes are rewritten in place under the
 * class lock, where nothing else reads or moves them (the store's slot
 * lock keeps its own gets out): no allocation, no free, no hole, and the
 * object's memory, which the free and the allocation would both have
 * touched, touched once.  0 when done; 1 when it does not fit (nothing
 * changed); -EINVAL for a key whose object is gone. */
static int rewrite(struct zs_pool *zp, uint64_t key, const void *buf, size_t size)
{
	struct zs_class *c;
	struct zspage *zs;
	unsigned obj;

	c = lock_obj(zp, zs_key_handle(zp, key), true, &zs, &obj);
	if (zmi_unlikely(!c))
		return -EINVAL;
	if (c->mixed) {
		struct zs_mhdr *hd = zs_mhdr(zp, zs, obj);
		unsigned had = zs_mgran(hd->len), need = zs_mgran(size), end, rest;

		if (need > had)
			goto no;
		if (need < had) {
			end = hole_end(zp, zs, obj, hd);
			if (!hole_fits(zp, obj, end, need, &rest))
				goto no;
			if (rest < end)
				hole_rest(zp, c, zs, rest, end);
			zs_mrec_of(zs)->live -= had - need;
			zs_mixed_group_set(c, zs);
		}
		hd->len = (uint16_t)size;
	} else if ((c->idx & ((1u << zp->cshift) - 1)) != zs_class_for(zp, size)) {
		goto no;
	}
	copy_in(zp, zs, obj, buf, size);
	zmi_unlock(&c->lock);
	return 0;
no:
	zmi_unlock(&c->lock);
	return 1;
}

/* zm_pool_put_key (pool.h): the new object is allocated as zs_malloc
 * allocates (a handle slot names it while it has no key, so that the
 * compactor may move it as any other), the key's old object freed only
 * then (a failed allocation leaves it), and the new one written and
 * bound under one class lock. */
int zs_put_key(struct zm_pool *pool, uint64_t key, const void *buf, size_t size)
{
	struct zs_pool *zp = zs_of(pool);
	uint32_t kref = (uint32_t)key | ZS_REF_OWNER;
	uint64_t word = zs_load_ref(zp, kref);
	zm_handle_t h;
	int rc = 0;

	if ((word & 3) == 1) {
		rc = rewrite(zp, key, buf, size);
		if (rc <= 0)
			return rc ? -EIO : 0;
		rc = 0;
	}
	h = zs_malloc(pool, size);
	if (zmi_unlikely(!h))
		return -ENOMEM;
	if (zs_load_ref(zp, kref) & 1)
		rc = free_key_obj(zp, zs_key_handle(zp, key));
	if (zmi_likely(!rc)) {
		if (zmi_unlikely(h & ZS_TAG_HUGE)) {
			rc = zs_write(pool, h, buf, size);
			if (!rc)
				rc = zs_huge_bind(zp, h, kref);
		} else {
			rc = write_bind(zp, h, kref, buf, size);
		}
	}
	if (zmi_unlikely(rc)) {
		zs_free(pool, h);
		return -EIO;
	}
	return 0;
}

/* ---- units (pool.h: zm_pool_unit) ------------------------------------ */

/* The live objects of h's zspage: every object below the bump that is not
 * on the free chain.  Their handles are rebuilt from the back references
 * (a slot index and the slot's tag, or an owner key), under the class
 * lock, so each is exact at that moment. */
long zs_unit(struct zm_pool *pool, zm_handle_t h, zm_handle_t *out, size_t max,
	     size_t *pages)
{
	struct zs_pool *zp = zs_of(pool);
	uint64_t freed[ZS_MAX_PAGES * 4096 / ZS_MIN_SIZE / 64];
	struct zs_class *c;
	struct zspage *zs;
	unsigned obj;
	size_t n = 0;
	bool key = (h & ZS_H_OWNER) != 0;

	if (key) {
		/* an owner key's word says whether its object is huge (as
		 * free_key_obj reads it) */
		uint64_t k = (h & ~ZS_H_OWNER) >> ZS_TAG_BITS;

		if ((h & ZS_TAG_MASK) != zp->key_tag || k >= zp->nowner)
			return -EINVAL;
		if ((zs_load_ref(zp, (uint32_t)k | ZS_REF_OWNER) & 3) == 3) {
			if (max)
				out[0] = h;
			*pages = 1;
			return 1;
		}
	} else if (h & ZS_TAG_HUGE) {
		/* a page of its own: the unit is the object */
		uint64_t v = h < ((uint64_t)ZS_MAX_HANDLES << ZS_TAG_BITS) && (h >> ZS_TAG_BITS)
			     ? zs_load_slot(zp, zs_handle_idx(h)) : 0;

		if ((v ^ h) & ZS_TAG_MASK)
			return -EINVAL;
		if (max)
			out[0] = h;
		*pages = 1;
		return 1;
	}
	c = lock_obj(zp, h, key, &zs, &obj);
	if (!c)
		return -EINVAL;
	if (c->mixed) {
		/* a mixed zspage: the objects whose words name them */
		for (unsigned g = 0, at; g < zs->bump;) {
			const struct zs_mhdr *hd = zs_mhdr(zp, zs, g);
			uint32_t ref = hd->ref;
			zm_handle_t x;

			at = g;
			g = zs_mnext(zp, g, hd->len);
			if (!zs_mhdr_live(zp, zs, hd, at))
				continue;
			if (ref & ZS_REF_OWNER)
				x = zs_key_handle(zp, ref & ~ZS_REF_OWNER);
			else
				x = (zm_handle_t)ref << ZS_TAG_BITS |
				    (zs_load_slot(zp, ref) & ZS_TAG_MASK);
			if (n < max)
				out[n] = x;
			n++;
		}
		*pages = zs->npop;
		zmi_unlock(&c->lock);
		return (long)n;
	}
	_Static_assert(sizeof(freed) * 8 >= ZS_MAX_PAGES * 4096 / ZS_MIN_SIZE,
		       "a bit for every object of the largest zspage");
	if ((size_t)c->objs > sizeof(freed) * 8) {
		/* larger pages than the bitmap covers: only h itself */
		zmi_unlock(&c->lock);
		if (max)
			out[0] = h;
		*pages = 0;
		return 1;
	}
	memset(freed, 0, ((size_t)zs->bump + 63) / 64 * 8);
	for (unsigned o = zs->free_head; o != ZS_NONE; o = zs_backref(zs, c)[o])
		freed[o / 64] |= 1ull << (o % 64);
	for (unsigned o = 0; o < zs->bump; o++) {
		uint32_t ref;
		zm_handle_t x;

		if (freed[o / 64] & (1ull << (o % 64)))
			continue;
		ref = zs_backref(zs, c)[o];
		if (ref & ZS_REF_OWNER)
			x = zs_key_handle(zp, ref & ~ZS_REF_OWNER);
		else
			x = (zm_handle_t)ref << ZS_TAG_BITS | (zs_load_slot(zp, ref) & ZS_TAG_MASK);
		if (n < max)
			out[n] = x;
		n++;
	}
	*pages = zs->npop;
	zmi_unlock(&c->lock);
	return (long)n;
}
