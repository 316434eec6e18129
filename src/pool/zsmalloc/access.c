/*
 * Reaching zsmalloc objects: map/unmap, read/write, and the handle lookup
 * they share.
 *
 * Lookup: load the handle's slot (slots never handed out read as zero,
 * which no handle matches, so only the table's size is checked), check
 * its generation, find the zspage
 * by id, publish a hazard pointer to it, and load the slot and the
 * zspage table's entry again: if the slot changed, the object moved (or
 * was freed) in between; if the entry did, the record moved (zsmalloc/record.c):
 * retry.  If the
 * zspage is being migrated, back off until the compactor is done.  Until
 * the hazard is cleared the object stays where it is (pool_internal.h).
 *
 * An object inside one page, or in a zspage whose pages are contiguous,
 * is reached in place.  An object that straddles two pages is copied
 * through the thread's map buffer: in on map unless write-only, back on
 * unmap unless read-only (background §3).  read/write copy straight between
 * the caller's buffer and the page(s).
 */
#include <errno.h>
#include <string.h>

#include "pool/zsmalloc/zsmalloc.h"

__attribute__((noinline)) size_t zs_mixed_len(const struct zs_pool *zp,
					      const struct zspage *zs, unsigned obj)
{
	return zs_mhdr(zp, zs, obj)->len;
}

/* An owner key's handle: only "live" to match (zsmalloc/zsmalloc.h). */
static __attribute__((noinline)) struct zspage *
lookup_key(struct zs_pool *zp, zm_handle_t h, unsigned *obj, unsigned hz)
{
	return zs_lookup_as(zp, h, true, obj, hz);
}

static inline __attribute__((always_inline)) struct zspage *
lookup(struct zs_pool *zp, zm_handle_t h, unsigned *obj, unsigned hz)
{
	struct zspage *zs;

	if (zmi_unlikely(h & ZS_H_OWNER))
		zs = lookup_key(zp, h, obj, hz);
	else
		zs = zs_lookup_as(zp, h, false, obj, hz);
	if (zmi_unlikely(!zs))
		zmi_bad_input("zsmalloc: bad handle %#llx (stale, foreign or freed)",
			     (unsigned long long)h);
	return zs;
}

struct zspage *zs_lookup(struct zs_pool *zp, zm_handle_t h, unsigned *obj, unsigned hz)
{
	return lookup(zp, h, obj, hz);
}

void *zs_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode)
{
	struct zs_pool *zp = zs_of(pool);
	unsigned hz = zmi_pool_self.nmaps, obj;
	struct zmi_pool_map_slot *s;
	struct zspage *zs;
	char *seg[2], *buf;
	size_t len[2];

	if (zmi_unlikely(hz >= ZM_POOL_MAX_MAPS)) {
		errno = EBUSY;
		return NULL;
	}
	zs = lookup(zp, h, &obj, hz);
	if (zmi_unlikely(!zs)) {
		errno = EINVAL;
		return NULL;
	}
	if (zmi_likely(zs_obj_segs(zp, zs, obj, seg, len) == 1)) {
		/* in place: no buffer, so the push cannot fail */
		s = &zmi_pool_self.slot[hz];
		zmi_pool_self.nmaps = hz + 1;
		s->handle = h;
		s->pool = pool;
		s->copied = false;
		return seg[0];
	}
	s = zmi_pool_map_push(zp->page_size, &buf);
	if (zmi_unlikely(!s)) {
		zmi_pool_hazard_clear(hz);
		return NULL;
	}
	return zmi_pool_map_copy_in(s, pool, h, mode, buf, seg, len);
}

void zs_unmap(struct zm_pool *pool, zm_handle_t h)
{
	if (zmi_pool_unmap_slot(pool, h))
		zmi_pool_hazard_clear(zmi_pool_self.nmaps);
}

/* Copy between buf and the object: to the object if `in`. */
static int copy(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len, bool in)
{
	struct zs_pool *zp = zs_of(pool);
	struct zspage *zs;
	unsigned obj;
	char *seg[2];
	size_t l[2];
	int n;

	zs = lookup(zp, h, &obj, ZM_HAZARD_RW);
	if (zmi_unlikely(!zs))
		return -EINVAL;
	n = zs_obj_segs(zp, zs, obj, seg, l);
	/* the object's bytes: its slot, or a mixed zspage's object's length */
	if (zmi_unlikely(len > (n == 1 ? l[0] : l[0] + l[1]))) {
		zmi_pool_hazard_clear(ZM_HAZARD_RW);
		return -EINVAL;
	}
	if (n == 1 || len <= l[0])
		l[0] = len;
	if (in)
		memcpy(seg[0], buf, l[0]);
	else
		memcpy(buf, seg[0], l[0]);
	if (len > l[0]) {
		if (in)
			memcpy(seg[1], (char *)buf + l[0], len - l[0]);
		else
			memcpy((char *)buf + l[0], seg[1], len - l[0]);
	}
	zmi_pool_hazard_clear(ZM_HAZARD_RW);
	return 0;
}

int zs_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len)
{
	return copy(pool, h, buf, len, false);
}

int zs_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len)
{
	return copy(pool, h, (void *)buf, len, true);
}

/* zm_pool_get_key (pool.h): zs_map, the call and zs_unmap, with the
 * key's handle made here and no lookup of the map slot at the end. */
int zs_get_key(struct zm_pool *pool, uint64_t key, zm_pool_get_fn fn, void *arg)
{
	struct zs_pool *zp = zs_of(pool);
	unsigned hz = zmi_pool_self.nmaps, obj;
	struct zmi_pool_map_slot *s;
	struct zspage *zs;
	char *seg[2], *buf;
	size_t len[2];
	zm_handle_t h;
	int rc;

	if (zmi_unlikely(hz >= ZM_POOL_MAX_MAPS))
		return -EBUSY;
	/* key is below nowner (zm_pool_get_key checked it against the
	 * owner words, which nowner counts) and h is made with key_tag: of
	 * lookup_key's checks only the word's "live" bit is left, which
	 * zs_lookup_at's first look makes */
	h = zs_key_handle(zp, key);
	zs = zs_lookup_at(zp, h, (uint32_t)key | ZS_REF_OWNER, true, &obj, hz);
	if (zmi_unlikely(!zs)) {
		zmi_bad_input("zsmalloc: get of key %llu, which holds nothing",
			     (unsigned long long)key);
		return -EINVAL;
	}
	if (zmi_likely(zs_obj_segs(zp, zs, obj, seg, len) == 1)) {
		/* held as one of the thread's maps while fn runs */
		s = &zmi_pool_self.slot[hz];
		zmi_pool_self.nmaps = hz + 1;
		s->handle = h;
		s->pool = pool;
		s->copied = false;
		rc = fn(arg, seg[0], len[0]);
	} else {
		s = zmi_pool_map_push(zp->page_size, &buf);
		if (zmi_unlikely(!s)) {
			rc = errno == EBUSY ? -EBUSY : -ENOMEM;
			zmi_pool_hazard_clear(hz);
			return rc;
		}
		zmi_pool_map_copy_in(s, pool, h, ZM_MAP_RO, buf, seg, len);
		rc = fn(arg, buf, len[0] + len[1]);
	}
	zmi_pool_map_pop();
	zmi_pool_hazard_clear(hz);
	return rc;
}

/* zm_pool_prefetch_key (pool.h): the lines of the key's object, asked
 * for writing without waiting.  Under the hazard, as a lookup: the
 * zspage may not go meanwhile. */
void zs_prefetch_key(struct zm_pool *pool, uint64_t key)
{
	struct zs_pool *zp = zs_of(pool);
	uint64_t v = zs_load_ref(zp, (uint32_t)key | ZS_REF_OWNER);
	struct zspage *zs;
	unsigned obj;
	char *seg[2];
	size_t len[2];
	int n;

	if ((v & 3) != 1)
		return;   /* nothing, or a huge object (its own page) */
	zs = zs_lookup_at(zp, zs_key_handle(zp, key), (uint32_t)key | ZS_REF_OWNER, true, &obj,
		       ZM_HAZARD_RW);
	if (!zs)
		return;
	n = zs_obj_segs(zp, zs, obj, seg, len);
	for (int i = 0; i < n; i++)
		for (uintptr_t at = (uintptr_t)seg[i] & ~(uintptr_t)63;
		     at < (uintptr_t)seg[i] + len[i]; at += 64)
			__builtin_prefetch((const void *)at, 1);
	zmi_pool_hazard_clear(ZM_HAZARD_RW);
}

size_t zs_obj_size(struct zm_pool *pool, zm_handle_t h)
{
	struct zs_pool *zp = zs_of(pool);
	struct zspage *zs;
	unsigned obj;
	size_t n;

	zs = lookup(zp, h, &obj, ZM_HAZARD_RW);
	if (!zs)
		return 0;
	n = zs->size == ZS_GRANULE ? zs_mhdr(zp, zs, obj)->len : zs->size;
	zmi_pool_hazard_clear(ZM_HAZARD_RW);
	return n;
}
