/*
 * The huge class: objects larger than the largest size class (more than
 * page_size - spacing bytes: pages that did not compress) get a page each
 * and no zspage record.  The handle slot names the page itself:
 *
 *     pfn:32 | shard:10 | gen:20 | huge:1 | live:1       (zsmalloc/zsmalloc.h)
 *
 * so such an object costs its page, its 8-byte slot and the pages
 * layer's 8-byte record of the page, nothing more.  A one-page zspage
 * record, its id and malloc's header around it would be 64 bytes more, 1.6%
 * of every incompressible page: the largest metadata item on data where
 * many pages do not compress (system files: 40% of pages).  Huge objects
 * never move (one per page, nothing to compact), so readers reach them
 * without a hazard pointer, and free takes only the class lock of the
 * shard the object was allocated in (recorded in the slot), for the
 * handle slot free list and the counters.
 *
 * The class's counters keep their meaning: zspages = objects = pages.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "pool/zsmalloc/zsmalloc.h"

__thread struct zspage zs_hview;

zm_handle_t zs_huge_alloc(struct zs_pool *zp, struct zs_class *c)
{
	unsigned shard = c->idx >> zp->cshift;
	uint32_t idx = zs_slot_alloc(zp, c);
	uint64_t tag;
	zm_pfn_t pfn;

	if (zmi_unlikely(!idx)) {
		zmi_unlock(&c->lock);
		return 0;
	}
	if (zmi_unlikely(zm_pages_alloc(zp->pages, &pfn))) {
		zs_slot_free(zp, c, idx);
		zmi_unlock(&c->lock);
		return 0;
	}
	tag = (zs_load_slot(zp, idx) & ZS_GEN_MASK) | ZS_TAG_HUGE | 1;
	zs_store_slot(zp, idx, zs_slot_huge(pfn, shard, tag));
	zs_count(&c->used, 1);
	zs_count(&c->npages, 1);
	c->zspages++;
	zmi_unlock(&c->lock);
	return ((zm_handle_t)idx << ZS_TAG_BITS) | tag;
}

/* The live huge object of h and its class, locked; NULL for a bad handle.
 * *v gets the pool's part of its slot or word. */
static struct zs_class *lock_huge(struct zs_pool *zp, zm_handle_t h, uint64_t *v)
{
	uint64_t check = h & ZS_H_OWNER ? 3 : ZS_TAG_MASK;
	uint32_t ref = zs_handle_ref(h);
	struct zs_class *c;

	if (h & ZS_H_OWNER) {
		if (zmi_unlikely((h & ZS_TAG_MASK) != zp->key_tag ||
				(h & ~ZS_H_OWNER) >> ZS_TAG_BITS >= zp->nowner))
			return NULL;
		h |= ZS_TAG_HUGE;  /* what its word must say */
	} else if (zmi_unlikely(!(h & 1) || ref == 0 || h >> ZS_TAG_BITS >= ZS_MAX_HANDLES)) {
		return NULL;
	}
	*v = zs_load_ref(zp, ref);
	if (zmi_unlikely(((*v ^ h) & check) || !(*v & ZS_TAG_HUGE) ||
			zs_huge_shard(*v) >= zp->nshards ||
			!(c = zs_huge_class(zp, zs_huge_shard(*v)))))
		return NULL;
	zmi_lock(&c->lock);
	if (zmi_unlikely(zs_load_ref(zp, ref) != *v)) {  /* a racing free won */
		zmi_unlock(&c->lock);
		return NULL;
	}
	return c;
}

int zs_huge_free(struct zs_pool *zp, zm_handle_t h)
{
	struct zs_class *c;
	zm_pfn_t pfn;
	uint64_t v;
	bool last;

	c = lock_huge(zp, h, &v);
	if (zmi_unlikely(!c)) {
		zmi_bad_input("zsmalloc: free of bad handle %#llx (stale, foreign or already "
			     "free)", (unsigned long long)h);
		return -EINVAL;
	}
	zs_ref_release(zp, c, zs_handle_ref(h));
	zs_count(&c->used, -1);
	zs_count(&c->npages, -1);
	last = !--c->zspages;
	zmi_unlock(&c->lock);
	pfn = zs_huge_pfn(v);
#if ZM_DEBUG >= 2
	/* poison: a use after free reads 0x6b */
	memset(zp->base + ((size_t)pfn << zp->shift), 0x6b, zp->page_size);
#endif
	zm_pages_free(zp->pages, pfn);
	/* a huge page counts as the shard's as any other: its last may be
	 * the shard's last page (zs_mixed_unsettle) */
	if (zmi_unlikely(last))
		zs_mixed_unsettle(zp, c->idx >> zp->cshift);
	return 0;
}

int zs_huge_bind(struct zs_pool *zp, zm_handle_t h, uint32_t kref)
{
	struct zs_class *c;
	uint64_t v;

	c = lock_huge(zp, h, &v);
	if (zmi_unlikely(!c)) {
		zmi_bad_input("zsmalloc: bind of bad handle %#llx", (unsigned long long)h);
		return -EINVAL;
	}
	zs_store_ref(zp, kref, v & ~ZS_GEN_MASK);
	zs_slot_free(zp, c, zs_handle_idx(h));
	zmi_unlock(&c->lock);
	return 0;
}

/* A walk over the live huge objects: handle slots 1.. first, then owner
 * words.  It stops after `left` objects, the count the classes keep, so
 * that a store's owner words (as many as its pages, most never written)
 * are not all read when the last huge object is found early, or at once
 * when there is none (at destroy, after the store freed its pages).  A
 * stray live word beyond the count is therefore not seen; the counts are
 * checked against what the walk finds. */
struct huge_walk {
	uint64_t pos, nslots, left;
};

static void walk_init(struct zs_pool *zp, struct huge_walk *w, uint64_t left)
{
	w->pos = 0;
	w->nslots = __atomic_load_n(&zp->slots_used, __ATOMIC_RELAXED);
	w->left = left;
}

/* The next one of shard `shard` (any if < 0): sets *v and returns true;
 * false at the end. */
static bool next_huge(struct zs_pool *zp, struct huge_walk *w, int shard, uint64_t *v)
{
	for (; w->left && w->pos < w->nslots + zp->nowner; w->pos++) {
		uint32_t ref = w->pos < w->nslots ? (uint32_t)w->pos
			       : (uint32_t)(w->pos - w->nslots) | ZS_REF_OWNER;

		if (ref == 0)
			continue;
		*v = zs_load_ref(zp, ref);
		if ((*v & 3) == 3 && (shard < 0 || zs_huge_shard(*v) == (unsigned)shard)) {
			w->pos++;
			w->left--;
			return true;
		}
	}
	return false;
}

void zs_huge_release(struct zs_pool *zp)
{
	struct huge_walk w;
	uint64_t n = 0, v;

	ZS_FOR_EACH_CLASS(zp, c)
		if (c->huge)
			n += c->used;
	walk_init(zp, &w, n);
	while (next_huge(zp, &w, -1, &v))
		zm_pages_free(zp->pages, zs_huge_pfn(v));
}

int zs_huge_check(struct zs_pool *zp, struct zs_class *c, uint64_t *seen,
		  size_t total_pages)
{
	int shard = (int)(c->idx >> zp->cshift);
	struct huge_walk w;
	uint64_t n = 0, v;
	int bad = 0;

	if (c->gmask || c->spare)
		ZM_CHECK_FAIL("check: huge class shard %d has zspage records", shard);
	if (c->zspages != c->used || c->npages != c->used)
		ZM_CHECK_FAIL("check: huge class shard %d: %u objects, %u zspages, %u pages",
		     shard, c->used, c->zspages, c->npages);
	walk_init(zp, &w, c->used);
	while (next_huge(zp, &w, shard, &v)) {
		zm_pfn_t pfn = zs_huge_pfn(v);

		n++;
		if (pfn >= total_pages) {
			ZM_CHECK_FAIL("check: huge object at %llu names pfn %u, beyond the "
			     "arena", (unsigned long long)w.pos - 1, pfn);
		} else if (seen[pfn / 64] & (1ull << (pfn % 64))) {
			ZM_CHECK_FAIL("check: pfn %u holds two huge objects (at %llu)", pfn,
				      (unsigned long long)w.pos - 1);
		} else {
			seen[pfn / 64] |= 1ull << (pfn % 64);
		}
	}
	if (n != c->used)
		ZM_CHECK_FAIL("check: huge class shard %d: %llu live slots, counter %u", shard,
		     (unsigned long long)n, c->used);
	return bad;
}
