/*
 * xcfmalloc blocks: the descriptor table, the free lists, pages, and the
 * three moves of the design (background §1): pick a block for a piece,
 * split the last block of an object, merge a freed block with its free
 * neighbours.  Everything here runs under xcf_pool.lock.
 *
 * Descriptors live in one table reserved up front (address space only,
 * touched as used) and are named by index; unused entries are chained
 * through `next` and keep their generation, so a handle stays refused
 * after its descriptor is recycled.  A new entry's generation is the
 * pool's gen_base, and the pool's end says how far they went from it
 * (pool_internal.h).
 *
 * Free lists are doubly linked through the descriptors, one per size in
 * blocks, LIFO; a bitmap of non-empty lists answers "largest smaller" and
 * "smallest larger" with a bit scan.  A page is always tiled by blocks and
 * no two free blocks are ever neighbours (free merges them), so a block cut
 * off by a split never has a free neighbour to merge with.
 */
#include <errno.h>
#include <string.h>

#include "base/os.h"
#include "pool/xcfmalloc/xcfmalloc.h"

int xcf_blocks_init(struct xcf_pool *x)
{
	struct zm_pages_stats ps;
	uint64_t want;
	size_t bytes;
	char *mem;

	x->maxblk = (unsigned)(x->page_size >> XCF_BLOCK_SHIFT);
	x->nwords = (x->maxblk + 63) / 64;
	/* one allocation for the list heads, the bitmap and two counters */
	mem = calloc(1, x->maxblk * (sizeof(uint32_t) + 2 * sizeof(uint64_t)) +
			x->nwords * sizeof(uint64_t) + sizeof(uint64_t));
	if (!mem)
		return -ENOMEM;
	x->nfree = (uint64_t *)mem;
	x->nused = x->nfree + x->maxblk;
	x->bitmap = x->nused + x->maxblk;
	x->head = (uint32_t *)(x->bitmap + x->nwords);
	/* no more blocks than the pages could ever be cut into */
	zm_pages_stats(x->pages, &ps);
	want = (uint64_t)ps.total_pages * x->maxblk + 1;
	x->cap = want < XCF_MAX_DESC ? (uint32_t)want : XCF_MAX_DESC;
	bytes = (size_t)x->cap * sizeof(struct xcf_desc);
	x->desc = zmi_os_reserve(bytes, zmi_os_page_size());
	if (!x->desc) {
		free(mem);
		return -ENOMEM;
	}
	x->top = 1;  /* entry 0 means "none" */
	return 0;
}

uint64_t xcf_blocks_fini(struct xcf_pool *x)
{
	uint64_t span = 0;

	for (uint32_t i = 1; i < x->top; i++) {
		struct xcf_desc *d = xcf_desc(x, i);
		uint64_t gd = (d->gen - x->gen0) & XCF_GEN_MASK;

		if ((d->off_flags & (XCF_FREE | XCF_USED)) && xcf_off(d) == 0)
			zm_pages_free(x->pages, d->pfn);
		if (gd >= span)
			span = gd + 1;
	}
	zmi_os_release(x->desc, (size_t)x->cap * sizeof(struct xcf_desc));
	free(x->nfree);
	return span;
}

/* ---- descriptors ---- */

static inline uint32_t desc_get(struct xcf_pool *x)
{
	uint32_t i;

	if (x->nunused) {
		i = x->unused;
		x->unused = xcf_desc(x, i)->next;
		x->nunused--;
	} else {
		if (x->top >= x->cap)
			return 0;
		i = x->top++;
		xcf_desc(x, i)->gen = x->gen0;
	}
	x->live_desc++;
	return i;
}

static void desc_put(struct xcf_pool *x, uint32_t i)
{
	struct xcf_desc *d = xcf_desc(x, i);

	d->off_flags = 0;
	d->nblk = 0;
	d->prev = 0;
	d->next = x->unused;
	x->unused = i;
	x->nunused++;
	x->live_desc--;
}

static void hdr_set(struct xcf_pool *x, uint32_t pfn, unsigned off, uint32_t desc,
		    unsigned prev)
{
	struct xcf_hdr *h = xcf_hdr_at(x, pfn, off);

	h->desc = desc;
	h->prev = (uint16_t)prev;
	h->sentinel = XCF_SENTINEL;
}

/* ---- free lists ---- */

static void list_add(struct xcf_pool *x, uint32_t i)
{
	struct xcf_desc *d = xcf_desc(x, i);
	unsigned l = d->nblk - 1u;

	d->off_flags = (uint16_t)(xcf_off(d) | XCF_FREE);
	d->prev = 0;
	d->next = x->head[l];
	if (d->next)
		xcf_desc(x, d->next)->prev = i;
	else
		x->bitmap[l / 64] |= 1ull << (l % 64);
	x->head[l] = i;
	x->nfree[l]++;
}

static void list_del(struct xcf_pool *x, uint32_t i)
{
	struct xcf_desc *d = xcf_desc(x, i);
	unsigned l = d->nblk - 1u;

	ZM_ASSERT(d->off_flags & XCF_FREE);
	if (d->prev)
		xcf_desc(x, d->prev)->next = d->next;
	else
		x->head[l] = d->next;
	if (d->next)
		xcf_desc(x, d->next)->prev = d->prev;
	if (!x->head[l])
		x->bitmap[l / 64] &= ~(1ull << (l % 64));
	x->nfree[l]--;
	d->off_flags = (uint16_t)xcf_off(d);
	d->next = d->prev = 0;
}

static uint32_t take(struct xcf_pool *x, unsigned l)
{
	uint32_t i = x->head[l];

	list_del(x, i);
	return i;
}

/* Highest non-empty list <= hi, or -1. */
static int bm_prev(const struct xcf_pool *x, int hi)
{
	if (hi >= (int)x->maxblk)
		hi = (int)x->maxblk - 1;
	for (int w = hi >> 6; hi >= 0 && w >= 0; w--) {
		uint64_t m = x->bitmap[w];

		if (w == hi >> 6 && (hi & 63) != 63)
			m &= (2ull << (hi & 63)) - 1;
		if (m)
			return w * 64 + 63 - __builtin_clzll(m);
	}
	return -1;
}

/* Lowest non-empty list >= lo, or -1. */
static int bm_next(const struct xcf_pool *x, int lo)
{
	if (lo >= (int)x->maxblk)
		return -1;
	for (unsigned w = (unsigned)lo >> 6; w < x->nwords; w++) {
		uint64_t m = x->bitmap[w];

		if (w == (unsigned)lo >> 6)
			m &= ~0ull << (lo & 63);
		if (m)
			return (int)(w * 64) + __builtin_ctzll(m);
	}
	return -1;
}

/* ---- pages ---- */

/* A fresh page from the pages layer as one detached block, or 0. */
static uint32_t new_page(struct xcf_pool *x)
{
	struct xcf_desc *d;
	zm_pfn_t pfn;
	uint32_t i;

	if (zm_pages_alloc(x->pages, &pfn))
		return 0;
	i = desc_get(x);
	if (!i) {
		zm_pages_free(x->pages, pfn);
		return 0;
	}
	d = xcf_desc(x, i);
	d->pfn = pfn;
	d->off_flags = 0;
	d->nblk = (uint16_t)x->maxblk;
	d->next = d->prev = 0;
	hdr_set(x, pfn, 0, i, XCF_NO_PREV);
	if (++x->npages > x->pages_max)
		x->pages_max = x->npages;
	return i;
}

void xcf_trim(struct xcf_pool *x)
{
	unsigned l = x->maxblk - 1;
	uint64_t keep = x->objects ? XCF_RESERVE_PAGES : 0;

	while (x->nfree[l] > keep) {
		uint32_t i = take(x, l);
		uint32_t pfn = xcf_desc(x, i)->pfn;

		desc_put(x, i);
		zm_pages_free(x->pages, pfn);
		x->npages--;
	}
}

/* ---- the three moves ---- */

/*
 * Block choice for one piece of need blocks (the 2011 xcfmalloc's order): a block of
 * exactly that size; else, unless this is the last piece allowed, the
 * largest smaller block (taken whole: the rest goes to the next piece);
 * else the smallest larger block (whole free pages included); else a new
 * page.  A first piece larger than a page (an object near the page size
 * plus its header) has no exact or larger block, so it takes the largest
 * block there is, or a new page.
 */
uint32_t xcf_pick(struct xcf_pool *x, unsigned need, bool last)
{
	int l;

	if (need <= x->maxblk && x->head[need - 1])
		return take(x, need - 1);
	if (!last && (l = bm_prev(x, (int)need - 2)) >= 0)
		return take(x, (unsigned)l);
	if ((l = bm_next(x, (int)need)) >= 0)
		return take(x, (unsigned)l);
	return new_page(x);
}

void xcf_use(struct xcf_pool *x, uint32_t i)
{
	struct xcf_desc *d = xcf_desc(x, i);

	d->off_flags = (uint16_t)(xcf_off(d) | XCF_USED);
	d->next = d->prev = 0;
	x->nused[d->nblk - 1]++;
}

void xcf_carve(struct xcf_pool *x, uint32_t i, unsigned k)
{
	struct xcf_desc *d = xcf_desc(x, i);
	unsigned off = xcf_off(d), n = d->nblk;
	uint32_t r;

	if (n > k && (r = desc_get(x)) != 0) {
		struct xcf_desc *rd = xcf_desc(x, r);
		unsigned roff = off + k;

		rd->pfn = d->pfn;
		rd->off_flags = (uint16_t)roff;
		rd->nblk = (uint16_t)(n - k);
		hdr_set(x, d->pfn, roff, r, off);
		if (roff + rd->nblk < x->maxblk)
			xcf_hdr_at(x, d->pfn, roff + rd->nblk)->prev = (uint16_t)roff;
		d->nblk = (uint16_t)k;
		list_add(x, r);
	}
	xcf_use(x, i);
}

void xcf_free_block(struct xcf_pool *x, uint32_t i)
{
	struct xcf_desc *d = xcf_desc(x, i);
	uint32_t pfn = d->pfn;
	unsigned off = xcf_off(d), end = off + d->nblk;
	struct xcf_hdr *h = xcf_hdr_at(x, pfn, off);

	ZM_ASSERT((d->off_flags & XCF_USED) && h->desc == i && h->sentinel == XCF_SENTINEL);
	x->nused[d->nblk - 1]--;
	d->off_flags = (uint16_t)off;
	if (end < x->maxblk) {                       /* the next block */
		uint32_t n = xcf_hdr_at(x, pfn, end)->desc;

		ZM_ASSERT(xcf_hdr_at(x, pfn, end)->sentinel == XCF_SENTINEL);
		if (xcf_desc(x, n)->off_flags & XCF_FREE) {
			list_del(x, n);
			d->nblk = (uint16_t)(d->nblk + xcf_desc(x, n)->nblk);
			desc_put(x, n);
			end = off + d->nblk;
		}
	}
	if (h->prev != XCF_NO_PREV) {                /* the previous block */
		uint32_t p = xcf_hdr_at(x, pfn, h->prev)->desc;

		ZM_ASSERT(xcf_hdr_at(x, pfn, h->prev)->sentinel == XCF_SENTINEL);
		if (xcf_desc(x, p)->off_flags & XCF_FREE) {
			list_del(x, p);
			xcf_desc(x, p)->nblk = (uint16_t)(xcf_desc(x, p)->nblk + d->nblk);
			desc_put(x, i);
			i = p;
			d = xcf_desc(x, p);
			off = xcf_off(d);
		}
	}
	if (end < x->maxblk)
		xcf_hdr_at(x, pfn, end)->prev = (uint16_t)off;
#if ZM_DEBUG >= 2
	/* poison the data, and the headers merged away */
	memset(xcf_addr(x, pfn, off) + XCF_HDR, 0x6b, xcf_cap(d));
#endif
	list_add(x, i);
}
