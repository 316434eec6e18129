/*
 * The whole-structure checker of the pages layer (ZM_DEBUG level 2 tools;
 * always compiled, called by tests after every step).
 *
 * It verifies, zone by zone: every free list is a well-formed doubly
 * linked list of block heads of the right order (order 0: the bitsets
 * hold exactly the free single pages), aligned and inside its zone; no free
 * block has a free buddy of the same order (they would have merged); the
 * pages inside free blocks are free tails; the per-page dirty flags add up
 * to nr_dirty_free; every page is accounted for exactly once: free, in a
 * run handed out (head + tails), in a per-thread cache, or isolated.
 */
#include <errno.h>
#include <stdlib.h>

#include "pages/pages_internal.h"

static int check_lists(struct zm_pages *p, struct zmi_pages_zone *z, size_t *free_pages,
		       size_t *dirty, size_t *heads)
{
	int bad = 0;

	for (unsigned k = 0; k <= ZM_PAGES_MAX_ORDER; k++) {
		for (int d = 0; d < 2; d++) {
			struct zmi_pages_free_list *l = &z->area[k][d];
			uint32_t n = 0, prev = ZM_PFN_NIL;

			for (uint32_t pfn = zmi_pages_buddy_first(z, k, d); pfn != ZM_PFN_NIL;) {
				struct zmi_pages_pg *pg;
				uint32_t buddy = pfn ^ (1u << k);

				if (pfn < z->start || pfn >= z->end || n > p->npages) {
					ZM_CHECK_FAIL("check: list %u/%d: bad link %u", k, d, pfn);
					return 1;
				}
				pg = zmi_pages_pg_of(p, pfn);
				if (pg->state != PG_FREE_HEAD || pg->order != k)
					ZM_CHECK_FAIL("check: pfn %u on list %u is state %u order %u",
					     pfn, k, pg->state, pg->order);
				if (k && zmi_pages_buddy_prev(p, pfn) != prev)
					ZM_CHECK_FAIL("check: pfn %u: prev %u, expected %u", pfn,
					     zmi_pages_buddy_prev(p, pfn), prev);
				if (!!(pg->flags & PG_BLK_DIRTY) != d)
					ZM_CHECK_FAIL("check: pfn %u: dirty hint does not match list", pfn);
				if ((pfn & ((1u << k) - 1)) || pfn + (1u << k) > z->end)
					ZM_CHECK_FAIL("check: block %u order %u misaligned or outside",
					     pfn, k);
				if (k < ZM_PAGES_MAX_ORDER && buddy < p->npages &&
				    zmi_pages_pg_of(p, buddy)->state == PG_FREE_HEAD &&
				    zmi_pages_pg_of(p, buddy)->order == k)
					ZM_CHECK_FAIL("check: blocks %u and %u (order %u) not merged",
					     pfn, buddy, k);
				for (uint32_t i = 0; i < (1u << k) && pfn + i < p->npages; i++) {
					struct zmi_pages_pg *t = zmi_pages_pg_of(p, pfn + i);

					if (i && t->state != PG_FREE_TAIL)
						ZM_CHECK_FAIL("check: pfn %u inside free block %u is state %u",
						     pfn + i, pfn, t->state);
					if (t->flags & PG_DIRTY) {
						(*dirty)++;
						if (!d)
							ZM_CHECK_FAIL("check: dirty pfn %u in clean block %u",
							     pfn + i, pfn);
					}
				}
				*free_pages += 1u << k;
				(*heads)++;
				n++;
				prev = pfn;
				pfn = k ? zmi_pages_buddy_next(p, pfn) :
					  zmi_pages_zone_next_single(z, d, pfn);
			}
			if (n != l->count)
				ZM_CHECK_FAIL("check: list %u/%d counts %u, holds %u", k, d,
				     l->count, n);
		}
	}
	/* beyond the frontier: free, on no list */
	if (z->grow < z->start || z->grow > z->end)
		ZM_CHECK_FAIL("check: zone [%u, %u) has its frontier at %u", z->start, z->end,
			      z->grow);
	else
		*free_pages += z->end - z->grow;
	/* bare blocks: free, on no list, below the frontier, records zero */
	{
		uint32_t n = 0, nb = (uint32_t)(((size_t)z->end - z->start) >> ZM_PAGES_MAX_ORDER);

		for (uint32_t i = 0; i < nb; i++) {
			zm_pfn_t pfn = z->start + (i << ZM_PAGES_MAX_ORDER);

			if (!(z->bare[i / 64] >> (i % 64) & 1))
				continue;
			n++;
			if (pfn + (1u << ZM_PAGES_MAX_ORDER) > z->grow)
				ZM_CHECK_FAIL("check: bare block %u beyond the frontier %u", pfn,
					      z->grow);
			if (zmi_pages_pg_of(p, pfn)->word)
				ZM_CHECK_FAIL("check: bare block %u has a record (state %u)", pfn,
					      zmi_pages_pg_of(p, pfn)->state);
		}
		if (n != z->nbare)
			ZM_CHECK_FAIL("check: zone [%u, %u): %u bare blocks, counter %u", z->start,
				      z->end, n, z->nbare);
		*free_pages += (size_t)n << ZM_PAGES_MAX_ORDER;
	}
	return bad;
}

static int check_pages(struct zm_pages *p, size_t heads, size_t *out, size_t *cached)
{
	size_t nheads = 0;
	int bad = 0;

	*out = *cached = 0;
	for (uint32_t pfn = 0; pfn < p->npages; pfn++) {
		struct zmi_pages_pg *pg = zmi_pages_pg_of(p, pfn);

		switch (pg->state) {
		case PG_FREE_HEAD:
			nheads++;
			break;
		case PG_FREE_TAIL:
			break;
		case PG_ALLOC:
			if (pg->order > ZM_PAGES_MAX_ORDER ||
			    pfn + (1u << pg->order) > p->npages) {
				ZM_CHECK_FAIL("check: run at %u has bad order %u", pfn, pg->order);
				break;
			}
			for (uint32_t i = 1; i < (1u << pg->order); i++)
				if (zmi_pages_pg_of(p, pfn + i)->state != PG_ALLOC_TAIL)
					ZM_CHECK_FAIL("check: pfn %u in run %u is not a tail",
					     pfn + i, pfn);
			*out += 1u << pg->order;
			pfn += (1u << pg->order) - 1;
			break;
		case PG_CACHED:
			(*cached)++;
			break;
		case PG_ISOLATED:
			*out += 0;
			break;
		default:
			ZM_CHECK_FAIL("check: pfn %u has state %u", pfn, pg->state);
		}
		if (pg->state != PG_FREE_HEAD && pg->state != PG_FREE_TAIL &&
		    (pg->flags & PG_DIRTY))
			ZM_CHECK_FAIL("check: pfn %u is not free but flagged dirty", pfn);
	}
	if (nheads != heads)
		ZM_CHECK_FAIL("check: %zu free heads in the page array, %zu on lists",
		     nheads, heads);
	return bad;
}

int zm_pages_check(struct zm_pages *p)
{
	size_t heads = 0, out, cached, tc_cached, nr_free = 0, nr_isolated = 0, nr_out;
	int bad = 0;

	if (!p)
		return -EINVAL;

	bad |= zmi_pages_tcache_check(p, &tc_cached) != 0;
	zmi_pages_zones_lock(p);
	for (unsigned i = 0; i < p->nzones; i++) {
		struct zmi_pages_zone *z = &p->zone[i];
		size_t zfree = 0, zdirty = 0;

		if (z->start != (zm_pfn_t)((size_t)i << p->zone_shift) || z->end <= z->start ||
		    (i + 1 < p->nzones && z->end != z[1].start) ||
		    (i + 1 == p->nzones && z->end != p->npages))
			ZM_CHECK_FAIL("check: zone %u covers [%u, %u)", i, z->start, z->end);
		bad |= check_lists(p, z, &zfree, &zdirty, &heads);
		if (z->nr_free + z->out + z->nr_isolated != z->end - z->start)
			ZM_CHECK_FAIL("check: zone %u: free %zu + out %zu + isolated %zu != %u pages",
				      i, z->nr_free, z->out, z->nr_isolated, z->end - z->start);
		if (zfree != z->nr_free)
			ZM_CHECK_FAIL("check: zone %u: %zu pages on free lists, counter says %zu",
				      i, zfree, z->nr_free);
		if (zdirty != z->nr_dirty_free)
			ZM_CHECK_FAIL("check: zone %u: %zu dirty free pages, counter says %zu",
				      i, zdirty, z->nr_dirty_free);
		nr_free += z->nr_free;
		nr_isolated += z->nr_isolated;
	}
	bad |= check_pages(p, heads, &out, &cached);
	nr_out = zmi_pages_nr_out_locked(p);
	if (p->limited && nr_out != __atomic_load_n(&p->nr_out, __ATOMIC_RELAXED))
		ZM_CHECK_FAIL("check: zones count %zu pages out, the limit's count %zu", nr_out,
			      __atomic_load_n(&p->nr_out, __ATOMIC_RELAXED));
	if (cached != tc_cached)
		ZM_CHECK_FAIL("check: %zu pages in state cached, caches hold %zu", cached,
		     tc_cached);
	if (out + cached != nr_out)
		ZM_CHECK_FAIL("check: %zu pages out (%zu runs + %zu cached), counter says %zu",
		     out + cached, out, cached, nr_out);
	if (nr_free + nr_out + nr_isolated != p->npages)
		ZM_CHECK_FAIL("check: free %zu + out %zu + isolated %zu != %u pages",
		     nr_free, nr_out, nr_isolated, p->npages);
	if (nr_out > p->limit)
		ZM_CHECK_FAIL("check: %zu pages out exceed the limit %zu", nr_out, p->limit);
	zmi_pages_zones_unlock(p);
	return bad ? -EUCLEAN : 0;
}
