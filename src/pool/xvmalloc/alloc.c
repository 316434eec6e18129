/*
 * xvmalloc: pages, malloc and free, create/destroy, the ops table.
 *
 * malloc rounds the size up to a payload (a multiple of 8, at least 16),
 * finds a free block that fits (xvmalloc/list.c) or takes a new page, which is
 * one free block, and splits the block: the front becomes the object,
 * the rest (if it can hold a header and a minimal payload) a free block
 * of its own.  free merges the block with a free block after it and a
 * free block before it (found through the prev offset in the header) and
 * returns the page when the merged block covers all of it.  Objects
 * larger than page_size - 8 cannot have an in-page header: each takes a
 * raw page, its size and tag kept in the page's record.
 *
 * Everything runs under the pool lock (xvmalloc/xvmalloc.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/xvmalloc/xvmalloc.h"

/* ---- the pool's page list, linked through the pages' records ---- */

static inline zm_pfn_t link_next(const struct zm_page_meta *m) { return (zm_pfn_t)(m->priv[1] >> 32); }
static inline zm_pfn_t link_prev(const struct zm_page_meta *m) { return (zm_pfn_t)m->priv[1]; }

static inline void set_links(struct zm_page_meta *m, zm_pfn_t next, zm_pfn_t prev)
{
	m->priv[1] = (uintptr_t)next << 32 | prev;
}

static void page_link(struct xv_pool *xp, zm_pfn_t pfn)
{
	struct zm_page_meta *m = zm_pages_meta(xp->pages, pfn);

	set_links(m, xp->first_page, XV_NO_PFN);
	if (xp->first_page != XV_NO_PFN) {
		struct zm_page_meta *n = zm_pages_meta(xp->pages, xp->first_page);

		set_links(n, link_next(n), pfn);
	}
	xp->first_page = pfn;
	if (++xp->pages_held > xp->pages_max)
		xp->pages_max = xp->pages_held;
}

void xv_page_unlink(struct xv_pool *xp, zm_pfn_t pfn)
{
	struct zm_page_meta *m = zm_pages_meta(xp->pages, pfn);
	zm_pfn_t next = link_next(m), prev = link_prev(m);

	if (prev != XV_NO_PFN) {
		struct zm_page_meta *p = zm_pages_meta(xp->pages, prev);

		set_links(p, next, link_prev(p));
	} else {
		xp->first_page = next;
	}
	if (next != XV_NO_PFN) {
		struct zm_page_meta *n = zm_pages_meta(xp->pages, next);

		set_links(n, link_next(n), prev);
	}
	xp->pages_held--;
}

/* A new page for this pool: linked, its record set.  0 or -ENOMEM. */
static int page_get(struct zm_pool *pool, uintptr_t kind, zm_pfn_t *pfn)
{
	struct xv_pool *xp = xv_of(pool);
	struct zm_page_meta *m;

	if (zm_pages_alloc(xp->pages, pfn))
		return -ENOMEM;
	m = zm_pages_meta(xp->pages, *pfn);
	m->owner = pool;
	m->priv[0] = kind;
	page_link(xp, *pfn);
	return 0;
}

static void page_put(struct xv_pool *xp, zm_pfn_t pfn)
{
	struct zm_page_meta *m = zm_pages_meta(xp->pages, pfn);

	xv_page_unlink(xp, pfn);
	m->owner = NULL;      /* so that stale handles to it are refused */
	m->priv[0] = 0;
	if (zm_pages_free(xp->pages, pfn))
		ZM_ASSERT(!"xvmalloc: the pages layer refused a page of ours");
}

static unsigned next_tag(struct xv_pool *xp)
{
	unsigned t = xp->next_tag;

	xp->next_tag = t == XV_TAG_MASK ? 1 : t + 1;
	return t;
}

/* ---- malloc ---- */

static zm_handle_t malloc_raw(struct zm_pool *pool, size_t size)
{
	struct xv_pool *xp = xv_of(pool);
	unsigned tag = next_tag(xp);
	zm_pfn_t pfn;

	if (page_get(pool, XV_PAGE_RAW, &pfn))
		return 0;
	zm_pages_meta(xp->pages, pfn)->priv[0] =
		XV_PAGE_RAW | (uintptr_t)tag << 8 | (uintptr_t)size << 32;
	xp->raw_pages++;
	xp->objects++;
	xp->slot_bytes += xp->page_size;
	return xv_handle(pfn, tag, 0);
}

/* A fresh page as one free block (not in any list). */
static uint64_t new_block_page(struct zm_pool *pool)
{
	struct xv_pool *xp = xv_of(pool);
	struct xv_hdr *h;
	zm_pfn_t pfn;

	if (page_get(pool, XV_PAGE_BLOCKS, &pfn))
		return XV_NIL;
	h = (struct xv_hdr *)xv_page(xp, pfn);
	h->size = (uint16_t)(xp->page_size - XV_HDR);
	h->prev = XV_NO_PREV;
	h->word = xv_word(XV_FREE, 0);
	xp->blocks++;
	xp->free_blocks++;
	return xv_loc(pfn, 0);
}

/* The header after block h at off, or NULL if h ends the page. */
static inline struct xv_hdr *next_hdr(struct xv_pool *xp, char *page, unsigned off,
				      struct xv_hdr *h)
{
	unsigned end = xv_end(off, h);

	return end < xp->page_size ? (struct xv_hdr *)(page + end) : NULL;
}

/* Make the free block at loc (out of the lists) an object of payload
 * need, splitting off the rest when it can stand as a block. */
static void take(struct xv_pool *xp, uint64_t loc, unsigned need, unsigned tag)
{
	char *page = xv_page(xp, xv_loc_pfn(loc));
	unsigned off = xv_loc_off(loc);
	struct xv_hdr *h = (struct xv_hdr *)(page + off), *n;

	ZM_ASSERT(xv_is_free(h) && h->size >= need);
	if (h->size - need >= XV_HDR + XV_MIN_PAYLOAD) {
		unsigned roff = off + XV_HDR + need;
		struct xv_hdr *r = (struct xv_hdr *)(page + roff);

		r->size = (uint16_t)(h->size - need - XV_HDR);
		r->prev = (uint16_t)off;
		r->word = xv_word(XV_FREE, 0);   /* the block before it is live */
		h->size = (uint16_t)need;
		n = next_hdr(xp, page, roff, r);
		if (n)
			n->prev = (uint16_t)roff;  /* still XV_PREV_FREE */
		xv_list_insert(xp, xv_loc(xv_loc_pfn(loc), roff));
		xp->blocks++;
	} else {
		n = next_hdr(xp, page, off, h);
		if (n)
			n->word &= ~XV_PREV_FREE;
		xp->free_blocks--;
	}
	h->word = xv_word(h->word & XV_PREV_FREE, tag);
	xp->objects++;
	xp->slot_bytes += h->size;
}

static zm_handle_t xv_malloc(struct zm_pool *pool, size_t size)
{
	struct xv_pool *xp = xv_of(pool);
	unsigned need, tag;
	zm_handle_t h = 0;
	uint64_t loc;

	zmi_lock(&xp->lock);
	if (size > xp->page_size - XV_HDR) {
		h = malloc_raw(pool, size);
		goto out;
	}
	need = ((unsigned)size + XV_ALIGN - 1) & ~(XV_ALIGN - 1);
	if (need < XV_MIN_PAYLOAD)
		need = XV_MIN_PAYLOAD;
	loc = xv_find(xp, need);
	if (loc != XV_NIL)
		xv_list_remove(xp, loc);
	else if ((loc = new_block_page(pool)) == XV_NIL)
		goto out;
	tag = next_tag(xp);
	take(xp, loc, need, tag);
	h = xv_handle(xv_loc_pfn(loc), tag, xv_loc_off(loc) + XV_HDR);
out:
	if (!h)
		xp->malloc_fail++;
	zmi_unlock(&xp->lock);
	if (!h)
		errno = ENOMEM;
	return h;
}

/* ---- free ---- */

/* Free the block at loc, merge it with free neighbours, and put the
 * result in its list, or return the page if it is now all free. */
static void release(struct xv_pool *xp, uint64_t loc)
{
	zm_pfn_t pfn = xv_loc_pfn(loc);
	char *page = xv_page(xp, pfn);
	unsigned off = xv_loc_off(loc);
	struct xv_hdr *h = (struct xv_hdr *)(page + off);
	struct xv_hdr *n = next_hdr(xp, page, off, h);

	xp->objects--;
	xp->slot_bytes -= h->size;
	xp->free_blocks++;
	h->word = xv_word(XV_FREE | (h->word & XV_PREV_FREE), 0);
	if (n && xv_is_free(n)) {                   /* merge with the next */
		xv_list_remove(xp, xv_loc(pfn, xv_end(off, h)));
		h->size = (uint16_t)(h->size + XV_HDR + n->size);
		n->word = 0;                        /* no longer a header */
		xp->blocks--, xp->free_blocks--;
	}
	if (h->word & XV_PREV_FREE) {               /* merge into the previous */
		struct xv_hdr *p = (struct xv_hdr *)(page + h->prev);

		ZM_ASSERT(h->prev != XV_NO_PREV && xv_is_free(p));
		xv_list_remove(xp, xv_loc(pfn, h->prev));
		p->size = (uint16_t)(p->size + XV_HDR + h->size);
		off = h->prev;
		h->word = 0;
		h = p;
		xp->blocks--, xp->free_blocks--;
	}
	n = next_hdr(xp, page, off, h);
	if (n) {
		n->prev = (uint16_t)off;
		n->word |= XV_PREV_FREE;
	}
	if (off == 0 && h->size == xp->page_size - XV_HDR) {
		h->word = 0;
		xp->blocks--, xp->free_blocks--;
		page_put(xp, pfn);
		return;
	}
#if ZM_DEBUG >= 2
	/* poison what the links do not use, so that a use after free shows */
	memset((char *)(xv_links_of(h) + 1), 0x6b, h->size - sizeof(struct xv_links));
#endif
	xv_list_insert(xp, xv_loc(pfn, off));
}

static int xv_free(struct zm_pool *pool, zm_handle_t h)
{
	struct xv_pool *xp = xv_of(pool);
	uint64_t loc;
	bool raw;
	int rc = 0;

	zmi_lock(&xp->lock);
	if (!xv_lookup(pool, h, "free", &loc, &raw)) {
		rc = -EINVAL;
	} else if (raw) {
		xp->raw_pages--;
		xp->objects--;
		xp->slot_bytes -= xp->page_size;
		page_put(xp, xv_loc_pfn(loc));
	} else {
		release(xp, loc);
	}
	zmi_unlock(&xp->lock);
	return rc;
}

/* ---- create / destroy ---- */

static int xv_create(struct zm_pool *pool, const struct zm_pool_config *cfg)
{
	struct xv_pool *xp;

	if (pool->page_size - XV_HDR > UINT16_MAX || pool->page_size < 4096) {
		zmi_bad_input("xvmalloc: page size %zu is not 4096..65536", pool->page_size);
		return -EINVAL;
	}
	{
		struct zm_pages_stats ps;

		zm_pages_stats(pool->pages, &ps);
		if (ps.total_pages > (1ull << XV_H_PFN_BITS)) {
			zmi_bad_input("xvmalloc: %zu pages is more than handles can name (2^%d)",
				      ps.total_pages, XV_H_PFN_BITS);
			return -EINVAL;
		}
	}
	xp = calloc(1, sizeof(*xp));
	if (!xp)
		return -ENOMEM;
	zmi_lock_init(&xp->lock);
	xp->pages = pool->pages;
	xp->base = zm_pages_addr(pool->pages, 0);
	xp->page_size = (uint32_t)pool->page_size;
	xp->shift = (unsigned)__builtin_ctz(xp->page_size);
	xv_lists_init(&xp->lists);
	xp->first_page = XV_NO_PFN;
	/* tags 1..XV_TAG_MASK in turn, from where the pool's id left off */
	xp->tag0 = (uint32_t)(pool->gen_base % XV_TAG_MASK) + 1;
	xp->next_tag = xp->tag0;
	pool->priv = xp;
	return 0;
}

static void xv_destroy(struct zm_pool *pool)
{
	struct xv_pool *xp = xv_of(pool);

	while (xp->first_page != XV_NO_PFN)
		page_put(xp, xp->first_page);
	/* the tags handed out: tag0 up to next_tag, round the cycle */
	pool->gen_span = (xp->next_tag + XV_TAG_MASK - xp->tag0) % XV_TAG_MASK;
	zmi_lock_destroy(&xp->lock);
	free(xp);
}

/* Objects never move: automatic compaction can only be off. */
static int xv_set_compaction(struct zm_pool *pool, enum zm_compact_policy policy)
{
	return policy == ZM_COMPACT_OFF || policy == ZM_COMPACT_DEFAULT ? 0 : -EOPNOTSUPP;
}

const struct zmi_pool_ops zmi_pool_xvmalloc_ops = {
	.name = "xvmalloc",
	.uses_pages = true,
	.create = xv_create,
	.destroy = xv_destroy,
	.malloc = xv_malloc,
	.free = xv_free,
	.map = xv_map,
	.unmap = xv_unmap,
	.read = xv_read,
	.write = xv_write,
	.obj_size = xv_obj_size,
	.compact = NULL,
	.stats = xv_stats,
	.nr_classes = NULL,
	.class_stats = NULL,
	.check = xv_check,
	.shrink = NULL,
	.set_compaction = xv_set_compaction,
};
