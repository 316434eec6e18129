/*
 * xvmalloc handles and access to objects: lookup, map/unmap, read/write.
 *
 * A handle is pfn << 30 | tag << 13 | payload offset / 8 (xvmalloc/xvmalloc.h); the tag,
 * 17 bits, comes from a pool counter at each malloc and lives in the
 * block's header (or, for a raw page, in the page's record) until free.
 * Lookup refuses a handle unless: its page is in range and owned by this
 * pool; the header before the payload carries the magic, is live and
 * holds the same tag; the block ends inside the page; and its neighbours
 * agree (the next header points back at it and does not think it free,
 * the previous block ends where it starts).  A stale handle therefore
 * passes only if its offset again heads a live block whose tag came
 * around again (2^17 - 1 mallocs later) -- or if object data happens to
 * forge a header, its tag and a consistent neighbour.
 *
 * Objects never move and never span pages, so map returns a pointer into
 * the page and unmap only pops the thread's map slot; read/write copy
 * straight to or from the page.  The lock is held only to validate.
 */
#include <errno.h>
#include <string.h>

#include "pool/xvmalloc/xvmalloc.h"

static bool block_ok(struct xv_pool *xp, char *page, unsigned off, unsigned tag)
{
	struct xv_hdr *h = (struct xv_hdr *)(page + off);
	unsigned end;

	if (!xv_magic_ok(h) || xv_is_free(h) || xv_tag(h) != tag)
		return false;
	end = xv_end(off, h);
	if (h->size < XV_MIN_PAYLOAD || end > xp->page_size)
		return false;
	if (end < xp->page_size) {
		struct xv_hdr *n = (struct xv_hdr *)(page + end);

		if (!xv_magic_ok(n) || n->prev != off || (n->word & XV_PREV_FREE))
			return false;
	}
	if (off == 0)
		return h->prev == XV_NO_PREV;
	if (h->prev >= off || (h->prev & (XV_ALIGN - 1)))
		return false;
	return xv_end(h->prev, (struct xv_hdr *)(page + h->prev)) == off;
}

struct zm_page_meta *xv_lookup(struct zm_pool *pool, zm_handle_t h, const char *op,
			       uint64_t *loc, bool *raw)
{
	struct xv_pool *xp = xv_of(pool);
	zm_pfn_t pfn = xv_handle_pfn(h);
	unsigned tag = (unsigned)(h >> XV_H_OFF_BITS) & XV_TAG_MASK;
	unsigned off = xv_handle_off(h);
	struct zm_page_meta *m;

	if (zmi_unlikely(!tag))
		goto bad;
	m = zm_pages_meta(xp->pages, pfn);
	if (zmi_unlikely(!m || m->owner != pool))
		goto bad;
	if (off == 0) {
		if (zmi_unlikely((m->priv[0] & 3) != XV_PAGE_RAW ||
				((m->priv[0] >> 8) & XV_TAG_MASK) != tag))
			goto bad;
		*raw = true;
		*loc = xv_loc(pfn, 0);
		return m;
	}
	if (zmi_unlikely((m->priv[0] & 3) != XV_PAGE_BLOCKS || off >= xp->page_size ||
			!block_ok(xp, xv_page(xp, pfn), off - XV_HDR, tag)))
		goto bad;
	*raw = false;
	*loc = xv_loc(pfn, off - XV_HDR);
	return m;
bad:
	zmi_bad_input("xvmalloc: %s of bad handle %#llx (stale, foreign or freed)", op,
		     (unsigned long long)h);
	return NULL;
}

/* Validate h; its payload and slot size, or NULL. */
static char *payload(struct zm_pool *pool, zm_handle_t h, const char *op, size_t *size)
{
	struct xv_pool *xp = xv_of(pool);
	char *p = NULL;
	uint64_t loc;
	bool raw;

	zmi_lock(&xp->lock);
	if (xv_lookup(pool, h, op, &loc, &raw)) {
		if (raw) {
			p = xv_page(xp, xv_loc_pfn(loc));
			*size = xp->page_size;
		} else {
			struct xv_hdr *hd = xv_hdr_at(xp, loc);

			p = (char *)(hd + 1);
			*size = hd->size;
		}
	}
	zmi_unlock(&xp->lock);
	return p;
}

void *xv_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode)
{
	size_t size;
	char *p = payload(pool, h, "map", &size);

	if (!p) {
		errno = EINVAL;
		return NULL;
	}
	return zmi_pool_map_in_place(pool, h, p);
}

void xv_unmap(struct zm_pool *pool, zm_handle_t h)
{
	zmi_pool_unmap_slot(pool, h);
}

int xv_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len)
{
	size_t size;
	char *p = payload(pool, h, "read", &size);

	if (!p || len > size)
		return -EINVAL;
	memcpy(buf, p, len);
	return 0;
}

int xv_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len)
{
	size_t size;
	char *p = payload(pool, h, "write", &size);

	if (!p || len > size)
		return -EINVAL;
	memcpy(p, buf, len);
	return 0;
}

size_t xv_obj_size(struct zm_pool *pool, zm_handle_t h)
{
	size_t size = 0;

	return payload(pool, h, "size", &size) ? size : 0;
}
