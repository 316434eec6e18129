/*
 * Owner words (pool.h): the calls, and the key table for backends that do
 * not keep object locations in the words themselves.
 *
 * A backend with bind/key_handle/free_key (zsmalloc) writes where the
 * object is into the word and needs nothing more.  For the others the
 * pool keeps key -> handle here, in reserved address space touched only
 * where keys are used, and sets bit 0 of the word while the key holds an
 * object: the caller pays 8 bytes of table per key instead of keeping the
 * handle itself, the same as before owner words existed.
 *
 * Concurrency: calls for one key are serialised by the caller (pool.h),
 * and these backends never move objects, so nothing else touches a key's
 * table entry; the word's bit 0 is changed with an atomic
 * read-modify-write, as the word is shared with the caller's bits.
 */
#include <errno.h>

#include "pool/pool_internal.h"

int zmi_pool_keys_init(struct zm_pool *pool, const struct zm_pool_config *cfg)
{
	if (!cfg->words)
		return cfg->nwords ? -EINVAL : 0;
	if (!cfg->nwords || cfg->nwords > ZM_POOL_MAX_KEYS) {
		zmi_bad_input("zm_pool_create: %llu owner words is not 1..2^29",
			     (unsigned long long)cfg->nwords);
		return -EINVAL;
	}
	pool->words = cfg->words;
	pool->nwords = cfg->nwords;
	if (pool->ops->bind)
		return 0;
	if (zmi_lazy_init(&pool->key_arr, cfg->nwords, sizeof(zm_handle_t)))
		return -ENOMEM;
	pool->keys = pool->key_arr.base;
	return 0;
}

void zmi_pool_keys_fini(struct zm_pool *pool)
{
	zmi_lazy_fini(&pool->key_arr);
	pool->keys = NULL;
}

uint64_t zmi_pool_keys_meta(const struct zm_pool *pool)
{
	return pool->keys ? zmi_lazy_bytes(&pool->key_arr) : 0;
}

static bool key_ok(struct zm_pool *pool, uint64_t key, const char *fn)
{
	if (zmi_unlikely(!pool))
		return false;
	if (zmi_likely(pool->words && key < pool->nwords))
		return true;
	zmi_bad_input("%s: key %llu without owner words or beyond them (%llu)", fn,
		     (unsigned long long)key, (unsigned long long)pool->nwords);
	return false;
}

int zm_pool_bind(struct zm_pool *pool, zm_handle_t h, uint64_t key)
{
	zm_handle_t raw;
	uint64_t *w;

	if (zmi_unlikely(!key_ok(pool, key, "zm_pool_bind") ||
			 !zmi_pool_own(pool, h, &raw, "zm_pool_bind") || !raw))
		return -EINVAL;
	if (pool->ops->bind)
		return pool->ops->bind(pool, raw, key);
	w = &pool->words[key];
	if (zmi_unlikely(!zm_pool_obj_size(pool, h)))
		return -EINVAL;     /* a bad handle, for backends that can tell */
	if (zmi_unlikely(__atomic_load_n(w, __ATOMIC_ACQUIRE) & 1)) {
		zmi_bad_input("zm_pool_bind: key %llu holds an object already",
			     (unsigned long long)key);
		return -EINVAL;
	}
	zmi_lazy_mark(&pool->key_arr, key);
	pool->keys[key] = h;
	__atomic_fetch_or(w, 1, __ATOMIC_RELEASE);
	return 0;
}

zm_handle_t zm_pool_key_handle(struct zm_pool *pool, uint64_t key)
{
	if (zmi_unlikely(!pool || !pool->words || key >= pool->nwords))
		return 0;
	if (pool->ops->key_handle)
		return zmi_pool_handle(pool, pool->ops->key_handle(pool, key));
	return __atomic_load_n(&pool->words[key], __ATOMIC_ACQUIRE) & 1 ? pool->keys[key] : 0;
}

int zm_pool_free_key(struct zm_pool *pool, uint64_t key)
{
	zm_handle_t h;

	if (zmi_unlikely(!key_ok(pool, key, "zm_pool_free_key")))
		return -EINVAL;
	if (pool->ops->free_key)
		return pool->ops->free_key(pool, key);
	h = zm_pool_key_handle(pool, key);
	if (zmi_unlikely(!h)) {
		zmi_bad_input("zm_pool_free_key: key %llu holds nothing",
			     (unsigned long long)key);
		return -EINVAL;
	}
	pool->keys[key] = 0;
	__atomic_fetch_and(&pool->words[key], ~1ull, __ATOMIC_RELEASE);
	return zm_pool_free(pool, h);
}

/* ---- one call a put, one a get ----------------------------------------
 * For backends without their own: the calls above, in the order that
 * keeps the key's object until the new one is written (a failed
 * allocation changes nothing). */

static int put_key_calls(struct zm_pool *pool, uint64_t key, const void *buf, size_t size)
{
	zm_handle_t h = zm_pool_alloc(pool, size);
	int rc;

	if (zmi_unlikely(!h))
		return errno == EINVAL ? -EINVAL : -ENOMEM;
	rc = zm_pool_write(pool, h, buf, size);
	if (!rc && zm_pool_key_handle(pool, key))
		rc = zm_pool_free_key(pool, key);
	if (!rc)
		rc = zm_pool_bind(pool, h, key);
	if (zmi_unlikely(rc)) {
		zm_pool_free(pool, h);
		return -EIO;
	}
	return 0;
}

static int get_key_calls(struct zm_pool *pool, uint64_t key, zm_pool_get_fn fn, void *arg)
{
	zm_handle_t h = zm_pool_key_handle(pool, key);
	const void *p;
	size_t len;
	int rc;

	if (zmi_unlikely(!h)) {
		zmi_bad_input("zm_pool_get_key: key %llu holds nothing", (unsigned long long)key);
		return -EINVAL;
	}
	len = zm_pool_obj_size(pool, h);
	p = zm_pool_map(pool, h, ZM_MAP_RO);
	if (zmi_unlikely(!p))
		return errno == EBUSY || errno == ENOMEM ? -errno : -EINVAL;
	rc = fn(arg, p, len);
	zm_pool_unmap(pool, h);
	return rc;
}

int zm_pool_put_key(struct zm_pool *pool, uint64_t key, const void *buf, size_t size)
{
	if (zmi_unlikely(!key_ok(pool, key, "zm_pool_put_key")))
		return -EINVAL;
	if (zmi_unlikely(!buf || size == 0 || size > pool->page_size)) {
		zmi_bad_input("zm_pool_put_key: no buffer, or size %zu is not 1..page size", size);
		return -EINVAL;
	}
	if (pool->ops->put_key)
		return pool->ops->put_key(pool, key, buf, size);
	return put_key_calls(pool, key, buf, size);
}

int zm_pool_get_key(struct zm_pool *pool, uint64_t key, zm_pool_get_fn fn, void *arg)
{
	if (zmi_unlikely(!key_ok(pool, key, "zm_pool_get_key") || !fn))
		return -EINVAL;
	if (pool->ops->get_key)
		return pool->ops->get_key(pool, key, fn, arg);
	return get_key_calls(pool, key, fn, arg);
}

void zm_pool_prefetch_key(struct zm_pool *pool, uint64_t key)
{
	if (zmi_likely(pool && key < pool->nwords) && pool->ops->prefetch_key)
		pool->ops->prefetch_key(pool, key);
}
