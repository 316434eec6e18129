/*
 * xcfmalloc statistics, the per-size table and the whole-structure
 * checker.
 *
 * Memory accounting, all-in:
 *   pool_bytes  every page the pool holds, the reserve of whole free pages
 *               included (block headers and free blocks are in there)
 *   meta_bytes  descriptor table entries handed out (20 bytes each, unused
 *               ones included: the table does not shrink), the pages
 *               layer's record of every page held, the list heads and
 *               counters, and the pool record
 *   descriptors live descriptors: one per block, free or used (the 2011
 *               xcfmalloc's count)
 *
 * The per-size table has one row per free list (size = blocks x 64):
 * obj_used counts used blocks of that size, obj_allocated used + free
 * ones, pages_used the page-equivalents they cover, and the last row's
 * freeable the whole free pages of the reserve.  There are no zspages, so
 * the fullness columns stay 0.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/xcfmalloc/xcfmalloc.h"

void xcf_stats(struct zm_pool *pool, struct zm_pool_stats *st)
{
	struct xcf_pool *x = xcf_of(pool);

	zmi_lock(&x->lock);
	st->objects = x->objects;
	st->slot_bytes = x->slot_bytes;
	st->pool_pages = x->npages;
	st->pool_bytes = x->npages * x->page_size;
	st->pages_max = x->pages_max;
	st->descriptors = x->live_desc;
	st->malloc_fail = x->malloc_fail;
	st->record_bytes = (uint64_t)(x->top - 1) * sizeof(struct xcf_desc);
	st->pages_meta_bytes = ZM_PAGES_META_BYTES(x->npages);
	st->meta_bytes = st->record_bytes + st->pages_meta_bytes + sizeof(*x) +
			 x->maxblk * (sizeof(uint32_t) + 2 * sizeof(uint64_t)) +
			 x->nwords * sizeof(uint64_t);
	zmi_unlock(&x->lock);
}

unsigned xcf_nr_classes(struct zm_pool *pool)
{
	return xcf_of(pool)->maxblk;
}

int xcf_class_stats(struct zm_pool *pool, unsigned idx, struct zm_pool_class_stats *cs)
{
	struct xcf_pool *x = xcf_of(pool);
	uint64_t blocks;

	zmi_lock(&x->lock);
	cs->size = (idx + 1) << XCF_BLOCK_SHIFT;
	cs->pages_per_zspage = 1;
	cs->objs_per_zspage = x->maxblk / (idx + 1);
	cs->obj_used = x->nused[idx];
	cs->obj_allocated = x->nused[idx] + x->nfree[idx];
	blocks = cs->obj_allocated * (idx + 1);
	cs->pages_used = (blocks + x->maxblk - 1) / x->maxblk;
	cs->freeable = idx == x->maxblk - 1 ? x->nfree[idx] : 0;
	zmi_unlock(&x->lock);
	return 0;
}


enum { SEEN = 1, REF = 2, REF2 = 4 };

/* Walk one page's blocks from offset 0; counts blocks, marks them seen. */
static int check_page(struct xcf_pool *x, uint32_t pfn, uint8_t *mark, uint64_t *blocks)
{
	unsigned off = 0, prev = XCF_NO_PREV;
	bool prev_free = false;
	int bad = 0;

	while (off < x->maxblk && !bad) {
		struct xcf_hdr *h = xcf_hdr_at(x, pfn, off);
		struct xcf_desc *d;

		if (h->sentinel != XCF_SENTINEL || h->desc == 0 || h->desc >= x->top) {
			ZM_CHECK_FAIL("check: page %u offset %u: bad header (desc %u, sentinel %#x)",
			     pfn, off, h->desc, h->sentinel);
			break;
		}
		d = xcf_desc(x, h->desc);
		if (d->pfn != pfn || xcf_off(d) != off || h->prev != prev ||
		    !(d->off_flags & (XCF_FREE | XCF_USED)) || (mark[h->desc] & SEEN)) {
			ZM_CHECK_FAIL("check: page %u offset %u: descriptor %u says page %u offset %u "
			     "flags %#x, header prev %u (want %u)%s", pfn, off, h->desc, d->pfn,
			     xcf_off(d), d->off_flags, h->prev, prev,
			     mark[h->desc] & SEEN ? ", seen twice" : "");
			break;
		}
		if (prev_free && (d->off_flags & XCF_FREE))
			ZM_CHECK_FAIL("check: page %u offset %u: two free neighbours not merged",
			     pfn, off);
		mark[h->desc] |= SEEN;
		prev_free = d->off_flags & XCF_FREE;
		prev = off;
		off += d->nblk;
		(*blocks)++;
	}
	if (!bad && off != x->maxblk)
		ZM_CHECK_FAIL("check: page %u: blocks end at %u, not %u", pfn, off, x->maxblk);
	return bad;
}

static int check_lists(struct xcf_pool *x, uint64_t live)
{
	int bad = 0;

	for (unsigned l = 0; l < x->maxblk; l++) {
		uint64_t n = 0;
		uint32_t prev = 0;
		bool bit = x->bitmap[l / 64] >> (l % 64) & 1;

		for (uint32_t i = x->head[l]; i && !bad; i = xcf_desc(x, i)->next) {
			struct xcf_desc *d;

			if (i >= x->top) {
				ZM_CHECK_FAIL("check: free list %u: entry %u out of range", l, i);
				break;
			}
			d = xcf_desc(x, i);
			if (!(d->off_flags & XCF_FREE) || d->nblk != l + 1 ||
			    d->prev != prev || ++n > live)
				ZM_CHECK_FAIL("check: free list %u: entry %u (flags %#x, %u blocks, "
				     "prev %u) does not belong", l, i, d->off_flags, d->nblk,
				     d->prev);
			prev = i;
		}
		if (n != x->nfree[l] || bit != !!x->head[l])
			ZM_CHECK_FAIL("check: free list %u: %llu entries, counter %llu, bitmap %d",
			     l, (unsigned long long)n, (unsigned long long)x->nfree[l], bit);
	}
	if (x->nfree[x->maxblk - 1] > (x->objects ? XCF_RESERVE_PAGES : 0))
		ZM_CHECK_FAIL("check: %llu whole free pages kept with %llu objects",
		     (unsigned long long)x->nfree[x->maxblk - 1],
		     (unsigned long long)x->objects);
	return bad;
}

/* Descriptors: states, object links, per-size and pool counters. */
static int check_descs(struct xcf_pool *x, uint8_t *mark, uint64_t *live)
{
	uint64_t heads = 0, span = 0, bytes = 0, nfree = 0;
	uint64_t *used = calloc(x->maxblk, sizeof(uint64_t));
	int bad = 0;

	if (!used)
		return -ENOMEM;
	for (uint32_t i = 1; i < x->top; i++) {
		struct xcf_desc *d = xcf_desc(x, i);
		unsigned f = d->off_flags & ~XCF_OFF_MASK;

		if (!f)
			continue;
		(*live)++;
		if (d->nblk == 0 || xcf_off(d) + d->nblk > x->maxblk ||
		    (f != XCF_FREE && f != XCF_USED && f != (XCF_USED | XCF_HEAD))) {
			ZM_CHECK_FAIL("check: descriptor %u: flags %#x offset %u size %u", i, f,
			     xcf_off(d), d->nblk);
			continue;
		}
		if (f == XCF_FREE) {
			nfree++;
			continue;
		}
		used[d->nblk - 1]++;
		bytes += (uint64_t)d->nblk << XCF_BLOCK_SHIFT;
		if (!(f & XCF_HEAD))
			continue;
		heads++;
		if (d->next) {
			span++;
			if (d->next >= x->top || (mark[d->next] & REF) ||
			    (xcf_desc(x, d->next)->off_flags & ~XCF_OFF_MASK) != XCF_USED)
				ZM_CHECK_FAIL("check: object at descriptor %u: bad second block %u", i,
				     d->next);
			else
				mark[d->next] |= REF;
		}
	}
	for (uint32_t i = 1; i < x->top; i++) {
		struct xcf_desc *d = xcf_desc(x, i);

		if ((d->off_flags & ~XCF_OFF_MASK) == XCF_USED && !(mark[i] & REF))
			ZM_CHECK_FAIL("check: used block %u belongs to no object", i);
	}
	for (unsigned l = 0; l < x->maxblk; l++)
		if (used[l] != x->nused[l])
			ZM_CHECK_FAIL("check: %llu used blocks of %u, counter %llu",
			     (unsigned long long)used[l], l + 1,
			     (unsigned long long)x->nused[l]);
	if (heads != x->objects || span != x->spanning || bytes != x->slot_bytes ||
	    *live != x->live_desc)
		ZM_CHECK_FAIL("check: %llu objects (%llu spanning, %llu bytes), %llu descriptors; "
		     "counters %llu (%llu, %llu), %llu", (unsigned long long)heads,
		     (unsigned long long)span, (unsigned long long)bytes,
		     (unsigned long long)*live, (unsigned long long)x->objects,
		     (unsigned long long)x->spanning, (unsigned long long)x->slot_bytes,
		     (unsigned long long)x->live_desc);
	free(used);
	return bad;
}

static int check_unused(struct xcf_pool *x, uint64_t live)
{
	uint32_t i = x->unused;
	int bad = 0;

	if (live + x->nunused != (uint64_t)x->top - 1)
		ZM_CHECK_FAIL("check: %llu live + %u unused descriptors != %u handed out",
		     (unsigned long long)live, x->nunused, x->top - 1);
	for (uint32_t k = 0; k < x->nunused && !bad; k++) {
		if (i == 0 || i >= x->top || xcf_desc(x, i)->off_flags) {
			ZM_CHECK_FAIL("check: unused descriptor chain broken at %u", i);
			break;
		}
		i = xcf_desc(x, i)->next;
	}
	return bad;
}

int xcf_check(struct zm_pool *pool)
{
	struct xcf_pool *x = xcf_of(pool);
	uint64_t live = 0, blocks = 0, pages = 0;
	uint8_t *mark;
	int bad = 0, rc;

	zmi_lock(&x->lock);
	mark = calloc(x->top, 1);
	if (!mark) {
		zmi_unlock(&x->lock);
		return -ENOMEM;
	}
	rc = check_descs(x, mark, &live);
	if (rc < 0) {
		free(mark);
		zmi_unlock(&x->lock);
		return rc;
	}
	bad |= rc;
	for (uint32_t i = 1; i < x->top; i++) {
		struct xcf_desc *d = xcf_desc(x, i);

		if ((d->off_flags & (XCF_FREE | XCF_USED)) && xcf_off(d) == 0 &&
		    !(mark[i] & SEEN)) {
			pages++;
			bad |= check_page(x, d->pfn, mark, &blocks);
		}
	}
	if (pages != x->npages || blocks != live)
		ZM_CHECK_FAIL("check: %llu pages holding %llu blocks; counters %llu pages, "
		     "%llu descriptors", (unsigned long long)pages,
		     (unsigned long long)blocks, (unsigned long long)x->npages,
		     (unsigned long long)live);
	bad |= check_lists(x, live);
	bad |= check_unused(x, live);
	free(mark);
	zmi_unlock(&x->lock);
	return bad ? -EUCLEAN : 0;
}
