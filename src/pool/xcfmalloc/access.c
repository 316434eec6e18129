/*
 * Reaching xcfmalloc objects: handle lookup, read/write, map/unmap.
 *
 * A handle is (descriptor index << 20) | (generation << 1) | 1.  Lookup
 * checks, under the pool lock, that the index was handed out, that the
 * descriptor is an object's first block and that the generations agree:
 * a stale, foreign or double-freed handle is refused (-EINVAL, and a
 * message in debug builds).  It then notes where the object's one or two
 * pieces lie and drops the lock: blocks in use never move (there is no
 * compaction) and the bytes copied are disjoint from every block header,
 * so the copy itself runs unlocked.
 *
 * An object in one block is mapped in place.  An object in two blocks is
 * copied through the thread's map buffer (background §1: the 2011 xcfmalloc
 * only copied; §3's modes): in on map unless write-only, back on unmap unless
 * read-only.
 *
 * The bytes an object can hold (obj_size) are its blocks' capacity less
 * their headers, capped at one page (the largest object).
 */
#include <errno.h>
#include <string.h>

#include "pool/xcfmalloc/xcfmalloc.h"

struct xcf_desc *xcf_lookup(struct xcf_pool *x, zm_handle_t h, const char *op)
{
	uint64_t idx = h >> XCF_H_IDX_SHIFT;
	struct xcf_desc *d;

	if (zmi_unlikely(!(h & 1) || idx == 0 || idx >= x->top))
		goto bad;
	d = xcf_desc(x, (uint32_t)idx);
	if (zmi_unlikely((d->off_flags & (XCF_USED | XCF_HEAD)) != (XCF_USED | XCF_HEAD) ||
			d->gen != ((h >> 1) & XCF_GEN_MASK)))
		goto bad;
	ZM_ASSERT(xcf_hdr(x, d)->desc == idx && xcf_hdr(x, d)->sentinel == XCF_SENTINEL);
	return d;
bad:
	zmi_bad_input("xcfmalloc: %s of bad handle %#llx (stale, foreign or freed)", op,
		     (unsigned long long)h);
	return NULL;
}

/* Where the object's bytes lie: 1 or 2 segments; 0 for a bad handle. */
static int segs(struct zm_pool *pool, zm_handle_t h, const char *op, char *seg[2],
		size_t len[2])
{
	struct xcf_pool *x = xcf_of(pool);
	struct xcf_desc *d;
	int n = 1;

	zmi_lock(&x->lock);
	d = xcf_lookup(x, h, op);
	if (zmi_unlikely(!d)) {
		zmi_unlock(&x->lock);
		return 0;
	}
	seg[0] = xcf_addr(x, d->pfn, xcf_off(d)) + XCF_HDR;
	len[0] = xcf_cap(d);
	len[1] = 0;
	if (d->next) {
		struct xcf_desc *e = xcf_desc(x, d->next);

		seg[1] = xcf_addr(x, e->pfn, xcf_off(e)) + XCF_HDR;
		len[1] = xcf_cap(e);
		if (len[0] + len[1] > x->page_size)
			len[1] = x->page_size - len[0];
		n = 2;
	}
	zmi_unlock(&x->lock);
	return n;
}

void *xcf_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode)
{
	struct zmi_pool_map_slot *s;
	char *seg[2], *buf;
	size_t len[2];
	int n = segs(pool, h, "map", seg, len);

	if (zmi_unlikely(!n)) {
		errno = EINVAL;
		return NULL;
	}
	if (n == 1)
		return zmi_pool_map_in_place(pool, h, seg[0]);
	s = zmi_pool_map_push(pool->page_size, &buf);
	if (zmi_unlikely(!s))
		return NULL;
	return zmi_pool_map_copy_in(s, pool, h, mode, buf, seg, len);
}

void xcf_unmap(struct zm_pool *pool, zm_handle_t h)
{
	zmi_pool_unmap_slot(pool, h);
}

/* Copy between buf and the object: into the object if `in`. */
static int copy(struct zm_pool *pool, zm_handle_t h, char *buf, size_t len, bool in,
		const char *op)
{
	char *seg[2];
	size_t l[2], first;
	int n = segs(pool, h, op, seg, l);

	if (zmi_unlikely(!n || len > l[0] + l[1]))
		return -EINVAL;
	first = len < l[0] ? len : l[0];
	if (in)
		memcpy(seg[0], buf, first);
	else
		memcpy(buf, seg[0], first);
	if (len > first) {
		if (in)
			memcpy(seg[1], buf + first, len - first);
		else
			memcpy(buf + first, seg[1], len - first);
	}
	return 0;
}

int xcf_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len)
{
	return copy(pool, h, buf, len, false, "read");
}

int xcf_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len)
{
	return copy(pool, h, (char *)buf, len, true, "write");
}

size_t xcf_obj_size(struct zm_pool *pool, zm_handle_t h)
{
	char *seg[2];
	size_t len[2];

	return segs(pool, h, "size", seg, len) ? len[0] + len[1] : 0;
}

int xcf_piece(struct zm_pool *pool, zm_handle_t h, unsigned piece, uint32_t *pfn,
	      unsigned *off, unsigned *nblk, uint32_t *desc)
{
	struct xcf_pool *x = xcf_of(pool);
	struct xcf_desc *d;
	uint32_t i;
	int rc = -EINVAL;

	h &= ZMI_HANDLE_LIMIT - 1;   /* tests pass the public handle */
	zmi_lock(&x->lock);
	d = xcf_lookup(x, h, "piece");
	if (d && piece <= 1) {
		i = piece ? d->next : (uint32_t)(h >> XCF_H_IDX_SHIFT);
		if (i) {
			d = xcf_desc(x, i);
			*pfn = d->pfn;
			*off = xcf_off(d);
			*nblk = d->nblk;
			*desc = i;
			rc = 0;
		}
	}
	zmi_unlock(&x->lock);
	return rc;
}
