/*
 * put, get and the flushes.
 *
 * put:  compress into the thread's buffer (no lock held), behind the key
 *       header for an ephemeral page; apply the policies; allocate in the
 *       kind's pool, evicting ephemeral pages while there is no room
 *       (evict.c), and write; then, under the shard lock, replace the
 *       key's old page, if any, link the record and (ephemeral) put it at
 *       the head of the list.
 * get:  under the shard lock, find the record, decompress straight from
 *       the mapped object into the caller's buffer, then mark the page
 *       used, or remove it (exclusive gets).
 *
 * A put that fails removes the key's old page (tmem.h), so a get never
 * returns data its caller has overwritten.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/tbuf.h"
#include "tmem/tmem_internal.h"

/* Counters are written under the shard lock and read without it (the
 * mean policy, stats while others work): relaxed atomic stores. */
static inline void count(struct zmi_tmem_shard *sh, enum zmi_tmem_ctr c, int64_t d)
{
	__atomic_store_n(&sh->ctr[c], sh->ctr[c] + (uint64_t)d, __ATOMIC_RELAXED);
}

/* What a malloc-backend object costs against the budget, as that backend
 * counts it in pool_bytes: its own 8-byte header and the bytes in a
 * glibc chunk (8 bytes of header, rounded to 16, 32 at least). */
static inline uint64_t malloc_cost(size_t size)
{
	size_t c = (size + 16 + 15) & ~(size_t)15;

	return c < 32 ? 32 : c;
}

void zmi_tmem_remove(struct zmi_tmem_pool *p, struct zmi_tmem_shard *sh, struct zmi_tmem_obj *o,
		     struct zmi_tmem_page *pg, enum zmi_tmem_ctr why)
{
	struct zm_tmem *t = p->t;
	bool eph = p->kind == ZM_TMEM_EPHEMERAL;
	size_t size = pg->zlen + (eph ? TM_HDR : 0);

	zmi_tmem_page_unlink(sh, o, pg);
	if (eph) {
		zmi_tmem_lru_del(t, pg);
		pthread_rwlock_rdlock(&t->obj_lock);
		zm_pool_free(t->eph, pg->h);
		pthread_rwlock_unlock(&t->obj_lock);
	} else {
		zm_pool_free(t->pers, pg->h);
		__atomic_fetch_sub(&t->pers_bytes, pg->zlen, __ATOMIC_RELAXED);
	}
	if (!t->pages)
		__atomic_fetch_sub(&t->held, malloc_cost(size), __ATOMIC_RELAXED);
	count(sh, TC_PAGES, -1);
	count(sh, TC_ORIG, -(int64_t)pg->len);
	count(sh, TC_COMPR, -(int64_t)pg->zlen);
	if (why != TC_NR)
		count(sh, why, 1);
	free(pg);
}

/* Every page of o; returns how many (o is gone afterwards). */
static long remove_obj(struct zmi_tmem_pool *p, struct zmi_tmem_shard *sh, struct zmi_tmem_obj *o)
{
	uint32_t left = o->npages, b = 0;
	long n = 0;

	/* the last removal frees o: stop before touching it again */
	while (left) {
		struct zmi_tmem_page *pg = o->tab[b];

		if (!pg) {
			b++;
			continue;
		}
		left--;
		zmi_tmem_remove(p, sh, o, pg, TC_FLUSHED);
		n++;
	}
	return n;
}

long zmi_tmem_flush_all(struct zmi_tmem_pool *p)
{
	long n = 0;

	for (unsigned i = 0; i < ZM_TMEM_SHARDS; i++) {
		struct zmi_tmem_shard *sh = &p->shard[i];

		zmi_lock(&sh->lock);
		for (uint32_t b = 0; sh->nobjs && b < sh->nbuckets; )
			if (sh->tab[b])
				n += remove_obj(p, sh, sh->tab[b]);
			else
				b++;
		zmi_unlock(&sh->lock);
	}
	return n;
}

/* The mean compressed size of the pool's pages, above `over`?  Read
 * without the locks: a policy, not an invariant. */
static bool mean_above(struct zmi_tmem_pool *p, size_t over)
{
	uint64_t pages = 0, bytes = 0;

	for (unsigned i = 0; i < ZM_TMEM_SHARDS; i++) {
		pages += __atomic_load_n(&p->shard[i].ctr[TC_PAGES], __ATOMIC_RELAXED);
		bytes += __atomic_load_n(&p->shard[i].ctr[TC_COMPR], __ATOMIC_RELAXED);
	}
	return pages && bytes > pages * over;
}

/* Room in the persistent share for zlen more bytes?  Takes them if so.
 * The share bounds the persistent pool's pages; they are counted
 * (zm_pool_stats, which walks zsmalloc's classes) every TM_SHARE_EVERY
 * persistent puts, and again at once when the count says the share is
 * full but pages were flushed since.  Between counts the compressed
 * bytes, a lower bound of what the pages take, are checked too. */
static bool share_left(struct zm_tmem *t, size_t zlen)
{
	uint64_t tick = __atomic_add_fetch(&t->pers_tick, 1, __ATOMIC_RELAXED);
	uint64_t full;

	if (t->pers_cap >= t->budget) {
		/* no cap: the budget bounds them, and a put it refuses is
		 * refused_full, not a share spent */
		__atomic_add_fetch(&t->pers_bytes, zlen, __ATOMIC_RELAXED);
		return true;
	}
	full = __atomic_load_n(&t->pers_pool_bytes, __ATOMIC_RELAXED) >= t->pers_cap;
	if (tick % TM_SHARE_EVERY == 0 ||
	    (full && __atomic_load_n(&t->pers_bytes, __ATOMIC_RELAXED) <
		     __atomic_load_n(&t->pers_bytes_counted, __ATOMIC_RELAXED))) {
		struct zm_pool_stats st;
		uint64_t b = __atomic_load_n(&t->pers_bytes, __ATOMIC_RELAXED);

		if (!zm_pool_stats(t->pers, &st)) {
			__atomic_store_n(&t->pers_pool_bytes, st.pool_bytes, __ATOMIC_RELAXED);
			__atomic_store_n(&t->pers_bytes_counted, b, __ATOMIC_RELAXED);
			full = st.pool_bytes >= t->pers_cap;
		}
	}
	if (full)
		return false;
	if (__atomic_add_fetch(&t->pers_bytes, zlen, __ATOMIC_RELAXED) > t->pers_cap) {
		__atomic_fetch_sub(&t->pers_bytes, zlen, __ATOMIC_RELAXED);
		return false;
	}
	return true;
}

/* An object of size bytes holding buf, in the kind's pool; evicts
 * ephemeral pages while there is no room.  0 if there is none. */
static zm_handle_t place(struct zm_tmem *t, bool eph, const char *buf, size_t size)
{
	struct zm_pool *zp = eph ? t->eph : t->pers;
	uint64_t cost = t->pages ? 0 : malloc_cost(size);

	for (unsigned steps = 0;; steps++) {
		zm_handle_t h = 0;

		if (cost && __atomic_add_fetch(&t->held, cost, __ATOMIC_RELAXED) > t->budget) {
			__atomic_fetch_sub(&t->held, cost, __ATOMIC_RELAXED);
		} else {
			if (eph)
				pthread_rwlock_rdlock(&t->obj_lock);
			h = zm_pool_alloc(zp, size);
			if (h && zm_pool_write(zp, h, buf, size)) {
				zm_pool_free(zp, h);
				h = 0;
			}
			if (eph)
				pthread_rwlock_unlock(&t->obj_lock);
			if (h)
				return h;
			if (cost)
				__atomic_fetch_sub(&t->held, cost, __ATOMIC_RELAXED);
		}
		if (steps == TM_EVICT_STEPS || !zmi_tmem_evict(t))
			return 0;
	}
}

/* A put refused or failed: count it and remove the key's old page. */
static int refuse(struct zmi_tmem_pool *p, uint64_t oid, uint32_t index, int rc,
		  enum zmi_tmem_ctr why)
{
	struct zmi_tmem_shard *sh = zmi_tmem_shard_of(p, oid, index);
	struct zmi_tmem_obj *o;
	struct zmi_tmem_page *old;

	zmi_lock(&sh->lock);
	count(sh, TC_PUTS, 1);
	if (why != TC_NR)
		count(sh, why, 1);
	if (p->kind == ZM_TMEM_EPHEMERAL)
		count(sh, TC_DROPPED, 1);
	o = zmi_tmem_obj_find(sh, oid);
	old = o ? zmi_tmem_page_find(o, index) : NULL;
	if (old)
		zmi_tmem_remove(p, sh, o, old, TC_NR);
	zmi_unlock(&sh->lock);
	return rc;
}

int zm_tmem_put(struct zm_tmem *t, int pool, uint64_t oid, uint32_t index, const void *data,
		size_t len)
{
	struct zmi_tmem_pool *p = t ? zmi_tmem_pool_of(t, pool, "zm_tmem_put") : NULL;
	bool eph, raw = false;
	struct zmi_tmem_shard *sh;
	struct zmi_tmem_page *pg;
	struct zmi_tmem_obj *o;
	size_t zlen = 0, hl;
	zm_handle_t h;
	char *buf;
	int n;

	if (zmi_unlikely(!p || !data || !len || len > p->page_size)) {
		if (p)
			zmi_bad_input("zm_tmem_put: length %zu is not 1..%zu or no data", len,
				     p->page_size);
		return -EINVAL;
	}
	eph = p->kind == ZM_TMEM_EPHEMERAL;
	hl = eph ? TM_HDR : 0;
	buf = zmi_thread_buf(TM_HDR + p->page_size);
	if (zmi_unlikely(!buf))
		return refuse(p, oid, index, -ENOMEM, TC_NR);
	if (len <= TM_RAW_MAX) {
		raw = true;
	} else {
		size_t cap = len - 1 < p->max_zsize ? len - 1 : p->max_zsize;

		n = zm_codec_compress(p->t->codec, data, len, buf + hl, cap);
		if (n > 0)
			zlen = (size_t)n;
		else if (n == -ENOSPC && len <= p->max_zsize)
			raw = true;
		else if (n == -ENOSPC)
			return refuse(p, oid, index, -E2BIG, TC_REF_ZSIZE);
		else
			return refuse(p, oid, index, n == -ENOMEM ? -ENOMEM : -EIO, TC_NR);
	}
	if (raw) {
		if (len > p->max_zsize)
			return refuse(p, oid, index, -E2BIG, TC_REF_ZSIZE);
		memcpy(buf + hl, data, len);
		zlen = len;
	}
	if (zlen > p->max_mean_zsize && mean_above(p, p->max_mean_zsize))
		return refuse(p, oid, index, -E2BIG, TC_REF_MEAN);
	if (!eph && !share_left(t, zlen))
		return refuse(p, oid, index, -ENOSPC, TC_REF_SHARE);
	if (eph) {
		struct zmi_tmem_hdr key = { .oid = oid, .index = index, .pool = (uint32_t)p->id };

		memcpy(buf, &key, sizeof(key));
	}
	pg = malloc(sizeof(*pg));
	h = pg ? place(t, eph, buf, hl + zlen) : 0;
	if (zmi_unlikely(!h)) {
		if (!eph)
			__atomic_fetch_sub(&t->pers_bytes, zlen, __ATOMIC_RELAXED);
		free(pg);
		return refuse(p, oid, index, pg ? -ENOSPC : -ENOMEM, pg ? TC_REF_FULL : TC_NR);
	}
	pg->h = h;
	pg->index = index;
	pg->len = (uint32_t)len;
	pg->zlen = (uint32_t)zlen;
	pg->ref = 0;
	pg->raw = raw;

	sh = zmi_tmem_shard_of(p, oid, index);
	zmi_lock(&sh->lock);
	count(sh, TC_PUTS, 1);
	o = zmi_tmem_obj_find(sh, oid);
	if (o) {
		struct zmi_tmem_page *old = zmi_tmem_page_find(o, index);

		if (old)
			zmi_tmem_remove(p, sh, o, old, TC_NR);
	}
	if (zmi_unlikely(zmi_tmem_page_link(sh, oid, pg))) {
		/* no memory for the object's record: undo as zmi_tmem_remove would */
		if (eph)
			pthread_rwlock_rdlock(&t->obj_lock);
		zm_pool_free(p->zp, h);
		if (eph)
			pthread_rwlock_unlock(&t->obj_lock);
		else
			__atomic_fetch_sub(&t->pers_bytes, zlen, __ATOMIC_RELAXED);
		if (!t->pages)
			__atomic_fetch_sub(&t->held, malloc_cost(hl + zlen), __ATOMIC_RELAXED);
		if (eph)
			count(sh, TC_DROPPED, 1);
		zmi_unlock(&sh->lock);
		free(pg);
		return -ENOMEM;
	}
	count(sh, TC_STORED, 1);
	count(sh, TC_PAGES, 1);
	count(sh, TC_ORIG, (int64_t)len);
	count(sh, TC_COMPR, (int64_t)zlen);
	if (eph)
		zmi_tmem_lru_add(t, pg);
	zmi_unlock(&sh->lock);
	return 0;
}

int zm_tmem_get(struct zm_tmem *t, int pool, uint64_t oid, uint32_t index, void *buf,
		size_t cap)
{
	struct zmi_tmem_pool *p = t ? zmi_tmem_pool_of(t, pool, "zm_tmem_get") : NULL;
	struct zmi_tmem_shard *sh;
	struct zmi_tmem_page *pg;
	struct zmi_tmem_obj *o;
	size_t len, hl;
	const char *m;
	int rc = 0;

	if (zmi_unlikely(!p || !buf))
		return -EINVAL;
	hl = p->kind == ZM_TMEM_EPHEMERAL ? TM_HDR : 0;
	sh = zmi_tmem_shard_of(p, oid, index);
	zmi_lock(&sh->lock);
	count(sh, TC_GETS, 1);
	o = zmi_tmem_obj_find(sh, oid);
	pg = o ? zmi_tmem_page_find(o, index) : NULL;
	if (!pg) {
		zmi_unlock(&sh->lock);
		return -ENOENT;
	}
	len = pg->len;
	if (cap < len) {
		zmi_unlock(&sh->lock);
		return -ENOSPC;
	}
	m = zm_pool_map(p->zp, pg->h, ZM_MAP_RO);
	if (zmi_unlikely(!m)) {
		zmi_unlock(&sh->lock);
		return -ENOMEM;
	}
	if (pg->raw)
		memcpy(buf, m + hl, len);
	else
		rc = zm_codec_decompress(p->t->codec, m + hl, pg->zlen, buf, len);
	zm_pool_unmap(p->zp, pg->h);
	if (zmi_unlikely(rc)) {
		/* corrupt (or no memory for a workspace): never hand it out */
		if (rc == -EIO)
			zmi_tmem_remove(p, sh, o, pg, TC_NR);
		zmi_unlock(&sh->lock);
		return rc;
	}
	count(sh, TC_HITS, 1);
	if (p->exclusive)
		zmi_tmem_remove(p, sh, o, pg, TC_NR);
	else if (hl)
		__atomic_store_n(&pg->ref, 1, __ATOMIC_RELAXED);
	zmi_unlock(&sh->lock);
	return (int)len;
}

int zm_tmem_flush_page(struct zm_tmem *t, int pool, uint64_t oid, uint32_t index)
{
	struct zmi_tmem_pool *p = t ? zmi_tmem_pool_of(t, pool, "zm_tmem_flush_page") : NULL;
	struct zmi_tmem_shard *sh;
	struct zmi_tmem_page *pg;
	struct zmi_tmem_obj *o;

	if (zmi_unlikely(!p))
		return -EINVAL;
	sh = zmi_tmem_shard_of(p, oid, index);
	zmi_lock(&sh->lock);
	o = zmi_tmem_obj_find(sh, oid);
	pg = o ? zmi_tmem_page_find(o, index) : NULL;
	if (pg) {
		zmi_tmem_remove(p, sh, o, pg, TC_FLUSHED);
		count(sh, TC_FLUSH_PAGES, 1);
	}
	zmi_unlock(&sh->lock);
	return pg ? 0 : -ENOENT;
}

long zm_tmem_flush_object(struct zm_tmem *t, int pool, uint64_t oid)
{
	struct zmi_tmem_pool *p = t ? zmi_tmem_pool_of(t, pool, "zm_tmem_flush_object") : NULL;
	long n = 0;

	if (zmi_unlikely(!p))
		return -EINVAL;
	/* the object's runs may lie in any shard */
	for (unsigned i = 0; i < ZM_TMEM_SHARDS; i++) {
		struct zmi_tmem_shard *sh = &p->shard[i];
		struct zmi_tmem_obj *o;

		zmi_lock(&sh->lock);
		o = zmi_tmem_obj_find(sh, oid);
		if (o)
			n += remove_obj(p, sh, o);
		zmi_unlock(&sh->lock);
	}
	if (n)
		__atomic_fetch_add(&p->flush_objects, 1, __ATOMIC_RELAXED);
	return n;
}

long zm_tmem_flush_pool(struct zm_tmem *t, int pool)
{
	struct zmi_tmem_pool *p = t ? zmi_tmem_pool_of(t, pool, "zm_tmem_flush_pool") : NULL;

	return p ? zmi_tmem_flush_all(p) : -EINVAL;
}
