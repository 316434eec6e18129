/*
 * Reaching zsmalloc objects: map/unmap, read/write, and the handle lookup
 * they share.
 *
 * Lookup: load the handle's slot, check its generation, find the zspage
 * from the pfn (the page's owner), pin the zspage, and load the slot again:
 * if it changed, the object moved (or was freed) in between, so unpin and
 * retry.  The compactor moves nothing out of a pinned zspage, so between
 * lookup and unpin the object stays where it is.  (Pins are a full-barrier
 * atomic add, which orders the second load after it.)
 *
 * An object inside one page, or in a zspage whose pages are contiguous,
 * is reached in place.  An object that straddles two pages is copied
 * through the thread's map buffer: in on map unless write-only, back on
 * unmap unless read-only (SEEDS.md §3).  read/write copy straight between
 * the caller's buffer and the page(s).
 */
#include <errno.h>
#include <string.h>

#include "pool/zsmalloc.h"

struct zspage *zs_lookup_pin(struct zs_pool *zp, zm_handle_t h, unsigned *obj)
{
	uint64_t idx = h >> 16;

	if (zm_unlikely(!(h & 1) || idx == 0 ||
			idx >= __atomic_load_n(&zp->slots_used, __ATOMIC_RELAXED)))
		goto bad;
	for (;;) {
		uint64_t v = zs_load_slot(zp, (uint32_t)idx);
		struct zspage *zs;

		if (zm_unlikely((v & ZS_TAG_MASK) != (h & ZS_TAG_MASK)))
			goto bad;
		zs = zs_by_id(zp, zs_slot_id(v));
		if (zm_unlikely(!zs))
			goto bad;
		__atomic_fetch_add(&zs->pins, 1, __ATOMIC_SEQ_CST);
		if (zm_likely(zs_load_slot(zp, (uint32_t)idx) == v)) {
#if ZM_DEBUG >= 1
			ZM_ASSERT(zs->magic == ZS_MAGIC);
#endif
			*obj = zs_slot_obj(v);
			return zs;
		}
		zs_unpin(zs);
	}
bad:
	zm_bad_input("zsmalloc: bad handle %#llx (stale, foreign or freed)",
		     (unsigned long long)h);
	return NULL;
}

void *zs_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode)
{
	struct zs_pool *zp = zs_of(pool);
	struct zm_map_slot *s;
	struct zs_class *c;
	struct zspage *zs;
	unsigned obj;
	char *seg[2], *buf;
	size_t len[2];

	zs = zs_lookup_pin(zp, h, &obj);
	if (zm_unlikely(!zs)) {
		errno = EINVAL;
		return NULL;
	}
	c = &zp->classes[zs->cls];
	if (zm_likely(zs_obj_segs(zp, c, zs, obj, seg, len) == 1)) {
		s = zm_map_push(0, NULL);
		if (zm_unlikely(!s))
			goto fail;
		s->handle = h;
		s->pool = pool;
		s->cookie = zs;
		s->copied = false;
		return seg[0];
	}
	s = zm_map_push(zp->page_size, &buf);
	if (zm_unlikely(!s))
		goto fail;
	s->handle = h;
	s->pool = pool;
	s->cookie = zs;
	s->copied = true;
	s->buf = buf;
	s->mode = mode;
	s->seg[0] = seg[0], s->seg[1] = seg[1];
	s->len[0] = len[0], s->len[1] = len[1];
	if (mode & ZM_MAP_RO) {
		memcpy(buf, seg[0], len[0]);
		memcpy(buf + len[0], seg[1], len[1]);
	}
	return buf;
fail:
	zs_unpin(zs);
	return NULL;
}

void zs_unmap(struct zm_pool *pool, zm_handle_t h)
{
	struct zm_map_slot *s = zm_map_top(pool, h);

	if (zm_unlikely(!s)) {
		zm_bad_input("zsmalloc: unmap of %#llx, which is not this thread's "
			     "last map", (unsigned long long)h);
		return;
	}
	if (s->copied && (s->mode & ZM_MAP_WO)) {
		memcpy(s->seg[0], s->buf, s->len[0]);
		memcpy(s->seg[1], s->buf + s->len[0], s->len[1]);
	}
	zs_unpin(s->cookie);
	zm_map_pop();
}

int zs_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len)
{
	struct zs_pool *zp = zs_of(pool);
	struct zspage *zs;
	unsigned obj;
	char *seg[2];
	size_t l[2];

	zs = zs_lookup_pin(zp, h, &obj);
	if (zm_unlikely(!zs))
		return -EINVAL;
	if (zm_unlikely(len > zp->classes[zs->cls].size)) {
		zs_unpin(zs);
		return -EINVAL;
	}
	if (zs_obj_segs(zp, &zp->classes[zs->cls], zs, obj, seg, l) == 1 || len <= l[0]) {
		memcpy(buf, seg[0], len);
	} else {
		memcpy(buf, seg[0], l[0]);
		memcpy((char *)buf + l[0], seg[1], len - l[0]);
	}
	zs_unpin(zs);
	return 0;
}

int zs_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len)
{
	struct zs_pool *zp = zs_of(pool);
	struct zspage *zs;
	unsigned obj;
	char *seg[2];
	size_t l[2];

	zs = zs_lookup_pin(zp, h, &obj);
	if (zm_unlikely(!zs))
		return -EINVAL;
	if (zm_unlikely(len > zp->classes[zs->cls].size)) {
		zs_unpin(zs);
		return -EINVAL;
	}
	if (zs_obj_segs(zp, &zp->classes[zs->cls], zs, obj, seg, l) == 1 || len <= l[0]) {
		memcpy(seg[0], buf, len);
	} else {
		memcpy(seg[0], buf, l[0]);
		memcpy(seg[1], (const char *)buf + l[0], len - l[0]);
	}
	zs_unpin(zs);
	return 0;
}

size_t zs_obj_size(struct zm_pool *pool, zm_handle_t h)
{
	struct zs_pool *zp = zs_of(pool);
	struct zspage *zs;
	unsigned obj;
	size_t n;

	zs = zs_lookup_pin(zp, h, &obj);
	if (!zs)
		return 0;
	n = zp->classes[zs->cls].size;
	zs_unpin(zs);
	return n;
}
