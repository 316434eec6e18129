/*
 * The huge class: objects larger than the largest size class (more than
 * page_size - spacing bytes: pages that did not compress) get a page each
 * and no zspage record.  The handle slot names the page itself:
 *
 *     pfn:32 | shard:10 | gen:20 | huge:1 | live:1       (zsmalloc.h)
 *
 * so such an object costs its page, its 8-byte slot and the pages
 * layer's 12-byte record of the page, nothing more.  A one-page zspage
 * record, its id and malloc's header around it were 64 bytes more, 1.6%
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
#include "pool/zsmalloc.h"

__thread union zs_huge_view zs_hview;

zm_handle_t zs_huge_alloc(struct zs_pool *zp, struct zs_class *c)
{
	unsigned shard = c->idx >> zp->cshift;
	uint32_t idx = zs_slot_alloc(zp, c);
	uint64_t tag;
	zm_pfn_t pfn;

	if (zm_unlikely(!idx)) {
		zm_unlock(&c->lock);
		return 0;
	}
	if (zm_unlikely(zm_pages_alloc(zp->pages, &pfn))) {
		zs_slot_free(zp, c, idx);
		zm_unlock(&c->lock);
		return 0;
	}
	tag = (zs_load_slot(zp, idx) & ZS_GEN_MASK) | ZS_TAG_HUGE | 1;
	zs_store_slot(zp, idx, zs_slot_huge(pfn, shard, tag));
	zs_count(&c->used, 1);
	zs_count(&c->npages, 1);
	c->zspages++;
	zm_unlock(&c->lock);
	return ((zm_handle_t)idx << ZS_TAG_BITS) | tag;
}

int zs_huge_free(struct zs_pool *zp, zm_handle_t h)
{
	uint32_t idx = zs_handle_idx(h);
	struct zs_class *c;
	zm_pfn_t pfn;
	uint64_t v;

	if (zm_unlikely(!(h & 1) || idx == 0 || h >> ZS_TAG_BITS >= ZS_MAX_HANDLES))
		goto bad;
	v = zs_load_slot(zp, idx);
	if (zm_unlikely((v & ZS_TAG_MASK) != (h & ZS_TAG_MASK) ||
			zs_huge_shard(v) >= zp->nshards ||
			!(c = zs_huge_class(zp, zs_huge_shard(v)))))
		goto bad;
	zm_lock(&c->lock);
	if (zm_unlikely(zs_load_slot(zp, idx) != v)) {  /* a racing free won */
		zm_unlock(&c->lock);
		goto bad;
	}
	zs_slot_free(zp, c, idx);
	zs_count(&c->used, -1);
	zs_count(&c->npages, -1);
	c->zspages--;
	zm_unlock(&c->lock);
	pfn = zs_huge_pfn(v);
#if ZM_DEBUG >= 2
	/* poison: a use after free reads 0x6b */
	memset(zp->base + ((size_t)pfn << zp->shift), 0x6b, zp->page_size);
#endif
	zm_pages_free(zp->pages, pfn);
	return 0;
bad:
	zm_bad_input("zsmalloc: free of bad handle %#llx (stale, foreign or already free)",
		     (unsigned long long)h);
	return -EINVAL;
}

/* Each live huge slot of shard `shard` (all shards if shard < 0). */
#define FOR_EACH_HUGE(zp, idx, v, shard)                                       \
	for (uint32_t idx = 1, n_ = __atomic_load_n(&(zp)->slots_used,            \
						    __ATOMIC_RELAXED); idx < n_; idx++) \
		if (((v) = zs_load_slot((zp), idx), ((v) & 3) == 3) &&             \
		    ((shard) < 0 || zs_huge_shard(v) == (unsigned)(shard)))

void zs_huge_release(struct zs_pool *zp)
{
	uint64_t v;

	FOR_EACH_HUGE(zp, idx, v, -1)
		zm_pages_free(zp->pages, zs_huge_pfn(v));
}


int zs_huge_check(struct zs_pool *zp, struct zs_class *c, uint64_t *seen,
		  size_t total_pages)
{
	int shard = (int)(c->idx >> zp->cshift);
	uint64_t n = 0, v;
	int bad = 0;

	if (c->gmask || c->spare)
		ZM_CHECK_FAIL("check: huge class shard %d has zspage records", shard);
	if (c->zspages != c->used || c->npages != c->used)
		ZM_CHECK_FAIL("check: huge class shard %d: %u objects, %u zspages, %u pages",
		     shard, c->used, c->zspages, c->npages);
	FOR_EACH_HUGE(zp, idx, v, shard) {
		zm_pfn_t pfn = zs_huge_pfn(v);

		n++;
		if (pfn >= total_pages) {
			ZM_CHECK_FAIL("check: huge object in slot %u names pfn %u, beyond the "
			     "arena", idx, pfn);
		} else if (seen[pfn / 64] & (1ull << (pfn % 64))) {
			ZM_CHECK_FAIL("check: pfn %u holds two huge objects (slot %u)", pfn, idx);
		} else {
			seen[pfn / 64] |= 1ull << (pfn % 64);
		}
	}
	if (n != c->used)
		ZM_CHECK_FAIL("check: huge class shard %d: %llu live slots, counter %u", shard,
		     (unsigned long long)n, c->used);
	return bad;
}
