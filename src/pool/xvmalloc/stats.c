/*
 * xvmalloc statistics and the whole-structure checker.
 *
 * Memory accounting, all-in, nothing counted twice:
 *   pool_pages  pages held (block pages and raw pages)
 *   pool_bytes  those pages, minus the 8-byte in-page header of every
 *               block (live or free): the bytes that hold objects or are
 *               free for them
 *   meta_bytes  those headers, the pages layer's record of every page
 *               held, and the pool's own structure (the free-list heads
 *               and bitmaps)
 * so pool_bytes + meta_bytes is what the pool costs.  slot_bytes is the
 * live objects' payloads (sizes rounded up to 8, at least 16; a raw
 * object counts its page).  huge_objects counts raw objects.  There are no
 * size classes: nr_classes is 0 and the class table is empty.
 */
#include <errno.h>

#include "pool/xvmalloc/xvmalloc.h"

void xv_stats(struct zm_pool *pool, struct zm_pool_stats *st)
{
	struct xv_pool *xp = xv_of(pool);

	zmi_lock(&xp->lock);
	st->objects = xp->objects;
	st->slot_bytes = xp->slot_bytes;
	st->pool_pages = xp->pages_held;
	st->pool_bytes = xp->pages_held * xp->page_size - xp->blocks * XV_HDR;
	st->record_bytes = xp->blocks * XV_HDR;
	st->pages_meta_bytes = ZM_PAGES_META_BYTES(xp->pages_held);
	st->meta_bytes = st->record_bytes + st->pages_meta_bytes + sizeof(*xp);
	st->pages_max = xp->pages_max;
	st->huge_objects = xp->raw_pages;
	st->malloc_fail = xp->malloc_fail;
	zmi_unlock(&xp->lock);
}


struct tally {
	uint64_t pages, raw, live, blocks, free, slot_bytes;
};

/* One block page: headers tile it, neighbours agree, no two free blocks
 * touch, and it is not all free. */
static int check_page(struct xv_pool *xp, zm_pfn_t pfn, struct tally *t)
{
	char *page = xv_page(xp, pfn);
	unsigned off = 0, prev = XV_NO_PREV;
	bool prev_free = false;
	int bad = 0;

	while (off < xp->page_size) {
		struct xv_hdr *h = (struct xv_hdr *)(page + off);
		bool is_free = xv_is_free(h);

		if (!xv_magic_ok(h)) {
			ZM_CHECK_FAIL("xvmalloc check: page %u offset %u: no header (word %#x)", pfn,
			     off, h->word);
			return 1;
		}
		if (h->size < XV_MIN_PAYLOAD || h->size % XV_ALIGN ||
		    xv_end(off, h) > xp->page_size) {
			ZM_CHECK_FAIL("xvmalloc check: page %u offset %u: bad size %u", pfn, off, h->size);
			return 1;
		}
		if (h->prev != prev)
			ZM_CHECK_FAIL("xvmalloc check: page %u offset %u: prev %u, the block before is at %u",
			     pfn, off, h->prev, prev);
		if (!!(h->word & XV_PREV_FREE) != prev_free)
			ZM_CHECK_FAIL("xvmalloc check: page %u offset %u: prev-free flag %u, the block "
			     "before is %s", pfn, off, !!(h->word & XV_PREV_FREE),
			     prev_free ? "free" : "live");
		if (is_free && prev_free)
			ZM_CHECK_FAIL("xvmalloc check: page %u offset %u: two free blocks not merged",
			     pfn, off);
		if (is_free != (xv_tag(h) == 0))
			ZM_CHECK_FAIL("xvmalloc check: page %u offset %u: %s block with tag %u", pfn,
			     off, is_free ? "free" : "live", xv_tag(h));
		if (is_free && off == 0 && h->size == xp->page_size - XV_HDR)
			ZM_CHECK_FAIL("xvmalloc check: page %u is all free but kept", pfn);
		t->blocks++;
		if (is_free) {
			t->free++;
		} else {
			t->live++;
			t->slot_bytes += h->size;
		}
		prev = (uint16_t)off;
		prev_free = is_free;
		off = xv_end(off, h);
	}
	return bad;
}

/* The free lists: each block free, in the list of its size, linked both
 * ways; the bitmaps say exactly which lists are not empty. */
static int check_lists(struct zm_pool *pool, uint64_t *listed)
{
	struct xv_pool *xp = xv_of(pool);
	int bad = 0;

	for (unsigned i = 0; i < XV_NLISTS; i++) {
		uint64_t loc = xp->lists.head[i], prev = XV_NIL;
		bool bit = xp->lists.sl_map[i / XV_SL] >> (i % XV_SL) & 1;

		if (bit != (loc != XV_NIL))
			ZM_CHECK_FAIL("xvmalloc check: list %u: bitmap bit %d, head %#llx", i, bit,
			     (unsigned long long)loc);
		for (; loc != XV_NIL; prev = loc, loc = xv_links_of(xv_hdr_at(xp, loc))->next) {
			struct zm_page_meta *m = zm_pages_meta(xp->pages, xv_loc_pfn(loc));
			struct xv_hdr *h;

			if (!m || m->owner != pool || (m->priv[0] & 3) != XV_PAGE_BLOCKS ||
			    xv_loc_off(loc) % XV_ALIGN || xv_loc_off(loc) >= xp->page_size) {
				ZM_CHECK_FAIL("xvmalloc check: list %u: %#llx is not in a page of ours", i,
				     (unsigned long long)loc);
				return 1;
			}
			h = xv_hdr_at(xp, loc);
			if (!xv_magic_ok(h) || !xv_is_free(h) || xv_list_of(h->size) != i) {
				ZM_CHECK_FAIL("xvmalloc check: list %u: block %#llx (size %u, word %#x) "
				     "does not belong", i, (unsigned long long)loc, h->size, h->word);
				return 1;
			}
			if (xv_links_of(h)->prev != prev)
				ZM_CHECK_FAIL("xvmalloc check: list %u: block %#llx links back to %#llx, not "
				     "%#llx", i, (unsigned long long)loc,
				     (unsigned long long)xv_links_of(h)->prev,
				     (unsigned long long)prev);
			if (++*listed > xp->free_blocks) {
				ZM_CHECK_FAIL("xvmalloc check: more blocks in the lists than the %llu free",
				     (unsigned long long)xp->free_blocks);
				return 1;
			}
		}
	}
	for (unsigned f = 0; f < XV_FL; f++)
		if (!!(xp->lists.fl_map >> f & 1) != !!xp->lists.sl_map[f])
			ZM_CHECK_FAIL("xvmalloc check: first level %u: bit %u, second level %#x", f,
			     xp->lists.fl_map >> f & 1, xp->lists.sl_map[f]);
	if (xp->lists.fl_map >> XV_FL)
		ZM_CHECK_FAIL("xvmalloc check: first-level bitmap %#x beyond level %u", xp->lists.fl_map,
		     XV_FL);
	return bad;
}

static int check_locked(struct zm_pool *pool)
{
	struct xv_pool *xp = xv_of(pool);
	struct tally t = { 0 };
	zm_pfn_t pfn = xp->first_page, prev = XV_NO_PFN;
	uint64_t listed = 0;
	int bad = 0;

	while (pfn != XV_NO_PFN) {
		struct zm_page_meta *m = zm_pages_meta(xp->pages, pfn);

		if (!m || m->owner != pool || (zm_pfn_t)m->priv[1] != prev) {
			ZM_CHECK_FAIL("xvmalloc check: page %u (after %u) is not ours or badly linked",
			     pfn, prev);
			return -EUCLEAN;
		}
		if (++t.pages > xp->pages_held) {
			ZM_CHECK_FAIL("xvmalloc check: more than %llu pages in the list",
			     (unsigned long long)xp->pages_held);
			return -EUCLEAN;
		}
		if ((m->priv[0] & 3) == XV_PAGE_RAW) {
			unsigned tag = (unsigned)(m->priv[0] >> 8) & XV_TAG_MASK;
			uint64_t size = (uint64_t)m->priv[0] >> 32;

			if (!tag || size <= xp->page_size - XV_HDR || size > xp->page_size)
				ZM_CHECK_FAIL("xvmalloc check: raw page %u: tag %u size %llu", pfn, tag,
				     (unsigned long long)size);
			t.raw++;
			t.live++;
			t.slot_bytes += xp->page_size;
		} else if ((m->priv[0] & 3) == XV_PAGE_BLOCKS) {
			bad |= check_page(xp, pfn, &t);
		} else {
			ZM_CHECK_FAIL("xvmalloc check: page %u of unknown kind %#llx", pfn,
			     (unsigned long long)m->priv[0]);
		}
		prev = pfn;
		pfn = (zm_pfn_t)(m->priv[1] >> 32);
	}
	bad |= check_lists(pool, &listed);
	if (t.pages != xp->pages_held || t.raw != xp->raw_pages || t.live != xp->objects ||
	    t.blocks != xp->blocks || t.free != xp->free_blocks ||
	    t.slot_bytes != xp->slot_bytes || listed != t.free)
		ZM_CHECK_FAIL("xvmalloc check: found %llu pages (%llu raw), %llu objects, %llu blocks, "
		     "%llu free (%llu listed), %llu slot bytes; counters say %llu (%llu), "
		     "%llu, %llu, %llu, %llu",
		     (unsigned long long)t.pages, (unsigned long long)t.raw,
		     (unsigned long long)t.live, (unsigned long long)t.blocks,
		     (unsigned long long)t.free, (unsigned long long)listed,
		     (unsigned long long)t.slot_bytes, (unsigned long long)xp->pages_held,
		     (unsigned long long)xp->raw_pages, (unsigned long long)xp->objects,
		     (unsigned long long)xp->blocks, (unsigned long long)xp->free_blocks,
		     (unsigned long long)xp->slot_bytes);
	if (xp->pages_max < xp->pages_held)
		ZM_CHECK_FAIL("xvmalloc check: pages_max %llu < %llu pages",
		     (unsigned long long)xp->pages_max, (unsigned long long)xp->pages_held);
	return bad ? -EUCLEAN : 0;
}

int xv_check(struct zm_pool *pool)
{
	struct xv_pool *xp = xv_of(pool);
	int rc;

	zmi_lock(&xp->lock);
	rc = check_locked(pool);
	zmi_unlock(&xp->lock);
	return rc;
}
