/*
 * xvmalloc free lists: which list a size belongs to, the two-level
 * bitmaps, and finding a block that fits in O(1).
 *
 * Mapping (xvmalloc/xvmalloc.h): payload sizes below 256 get one list per 8 bytes; above,
 * each power of two [2^l, 2^(l+1)) is cut into 32 equal lists.  A free
 * block goes to the list holding its size (xv_list_of), so a list's blocks
 * range over one list width.  To find a block for a request, the request
 * is rounded up to the next list boundary (xv_list_search): every block in
 * that list and above fits, so the head of the first non-empty one is
 * taken without looking at its size -- two find-first-set instructions
 * on the bitmaps (xv_lists_find).  That search skips blocks in the
 * request's own list that would fit; before taking a new page, the head
 * of that list is tried too (one more comparison).  Lists are LIFO.
 * All functions here run under the pool lock.
 */
#include "pool/xvmalloc/xvmalloc.h"

unsigned xv_list_of(unsigned size)
{
	unsigned l, fl, sl;

	if (size < XV_LINEAR_MAX)
		return size >> XV_ALIGN_SHIFT;
	l = 31u - (unsigned)__builtin_clz(size);
	fl = l - (XV_SL_LOG2 + XV_ALIGN_SHIFT) + 1;
	sl = (size >> (l - XV_SL_LOG2)) - XV_SL;
	return fl < XV_FL ? fl * XV_SL + sl : XV_NLISTS;
}

unsigned xv_list_search(unsigned size)
{
	if (size >= XV_LINEAR_MAX) {
		unsigned l = 31u - (unsigned)__builtin_clz(size);

		size += (1u << (l - XV_SL_LOG2)) - 1;
	}
	return xv_list_of(size);
}

int xv_lists_find(const struct xv_lists *l, unsigned idx)
{
	unsigned fl = idx / XV_SL, sl = idx % XV_SL;
	uint32_t m;

	if (fl >= XV_FL)
		return -1;
	m = l->sl_map[fl] & (~0u << sl);
	if (m)
		return (int)(fl * XV_SL + (unsigned)__builtin_ctz(m));
	m = fl + 1 < 32 ? l->fl_map & (~0u << (fl + 1)) : 0;
	if (!m)
		return -1;
	fl = (unsigned)__builtin_ctz(m);
	ZM_ASSERT(l->sl_map[fl]);
	return (int)(fl * XV_SL + (unsigned)__builtin_ctz(l->sl_map[fl]));
}

void xv_lists_init(struct xv_lists *l)
{
	l->fl_map = 0;
	for (unsigned f = 0; f < XV_FL; f++)
		l->sl_map[f] = 0;
	for (unsigned i = 0; i < XV_NLISTS; i++)
		l->head[i] = XV_NIL;
}

void xv_list_insert(struct xv_pool *xp, uint64_t loc)
{
	struct xv_hdr *h = xv_hdr_at(xp, loc);
	unsigned i = xv_list_of(h->size);
	struct xv_links *k = xv_links_of(h);

	ZM_ASSERT(xv_is_free(h) && i < XV_NLISTS);
	k->prev = XV_NIL;
	k->next = xp->lists.head[i];
	if (k->next != XV_NIL)
		xv_links_of(xv_hdr_at(xp, k->next))->prev = loc;
	xp->lists.head[i] = loc;
	xp->lists.sl_map[i / XV_SL] |= 1u << (i % XV_SL);
	xp->lists.fl_map |= 1u << (i / XV_SL);
}

void xv_list_remove(struct xv_pool *xp, uint64_t loc)
{
	struct xv_hdr *h = xv_hdr_at(xp, loc);
	unsigned i = xv_list_of(h->size);
	struct xv_links *k = xv_links_of(h);

	ZM_ASSERT(xv_is_free(h) && i < XV_NLISTS);
	if (k->prev != XV_NIL)
		xv_links_of(xv_hdr_at(xp, k->prev))->next = k->next;
	else
		xp->lists.head[i] = k->next;
	if (k->next != XV_NIL)
		xv_links_of(xv_hdr_at(xp, k->next))->prev = k->prev;
	if (xp->lists.head[i] == XV_NIL) {
		xp->lists.sl_map[i / XV_SL] &= ~(1u << (i % XV_SL));
		if (!xp->lists.sl_map[i / XV_SL])
			xp->lists.fl_map &= ~(1u << (i / XV_SL));
	}
}

uint64_t xv_find(struct xv_pool *xp, unsigned size)
{
	int i = xv_lists_find(&xp->lists, xv_list_search(size));
	unsigned own;
	uint64_t loc;

	if (i >= 0)
		return xp->lists.head[i];
	/* the request's own list: its head may be large enough */
	own = xv_list_of(size);
	loc = own < XV_NLISTS ? xp->lists.head[own] : XV_NIL;
	if (loc != XV_NIL && xv_hdr_at(xp, loc)->size >= size)
		return loc;
	return XV_NIL;
}
