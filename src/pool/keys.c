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

#include "base/os.h"
#include "pool/pool_internal.h"

static size_t round_up(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

int zm_pool_keys_init(struct zm_pool *pool, const struct zm_pool_config *cfg)
{
	size_t os_page = zm_os_page_size(), pages;

	if (!cfg->words)
		return cfg->nwords ? -EINVAL : 0;
	if (!cfg->nwords || cfg->nwords > ZM_POOL_MAX_KEYS) {
		zm_bad_input("zm_pool_create: %llu owner words is not 1..2^31",
			     (unsigned long long)cfg->nwords);
		return -EINVAL;
	}
	pool->words = cfg->words;
	pool->nwords = cfg->nwords;
	if (pool->ops->bind)
		return 0;
	pool->keys_bytes = round_up((size_t)cfg->nwords * sizeof(zm_handle_t), os_page);
	pages = pool->keys_bytes / os_page;
	pool->keys_map_bytes = round_up((pages + 63) / 64 * sizeof(uint64_t), os_page);
	pool->keys = zm_os_reserve(pool->keys_bytes, os_page);
	pool->keys_map = zm_os_reserve(pool->keys_map_bytes, os_page);
	if (!pool->keys || !pool->keys_map) {
		zm_pool_keys_fini(pool);
		return -ENOMEM;
	}
	return 0;
}

void zm_pool_keys_fini(struct zm_pool *pool)
{
	if (pool->keys)
		zm_os_release(pool->keys, pool->keys_bytes);
	if (pool->keys_map)
		zm_os_release(pool->keys_map, pool->keys_map_bytes);
	pool->keys = NULL;
	pool->keys_map = NULL;
}

uint64_t zm_pool_keys_meta(const struct zm_pool *pool)
{
	return __atomic_load_n(&pool->keys_touched, __ATOMIC_RELAXED) * zm_os_page_size();
}

/* Count the OS page of the key table under key as used (once). */
static void keys_touch(struct zm_pool *pool, uint64_t key)
{
	uint64_t page = key * sizeof(zm_handle_t) / zm_os_page_size();
	uint64_t bit = 1ull << (page % 64), *w = &pool->keys_map[page / 64];

	if (__atomic_load_n(w, __ATOMIC_RELAXED) & bit)
		return;
	if (!(__atomic_fetch_or(w, bit, __ATOMIC_RELAXED) & bit))
		__atomic_fetch_add(&pool->keys_touched, 1, __ATOMIC_RELAXED);
}

static bool key_ok(struct zm_pool *pool, uint64_t key, const char *fn)
{
	if (zm_likely(pool->words && key < pool->nwords))
		return true;
	zm_bad_input("%s: key %llu without owner words or beyond them (%llu)", fn,
		     (unsigned long long)key, (unsigned long long)pool->nwords);
	return false;
}

int zm_pool_bind(struct zm_pool *pool, zm_handle_t h, uint64_t key)
{
	uint64_t *w;

	if (zm_unlikely(!key_ok(pool, key, "zm_pool_bind") || !h))
		return -EINVAL;
	if (pool->ops->bind)
		return pool->ops->bind(pool, h, key);
	w = &pool->words[key];
	if (zm_unlikely(!zm_pool_obj_size(pool, h)))
		return -EINVAL;     /* a bad handle, for backends that can tell */
	if (zm_unlikely(__atomic_load_n(w, __ATOMIC_ACQUIRE) & 1)) {
		zm_bad_input("zm_pool_bind: key %llu holds an object already",
			     (unsigned long long)key);
		return -EINVAL;
	}
	keys_touch(pool, key);
	pool->keys[key] = h;
	__atomic_fetch_or(w, 1, __ATOMIC_RELEASE);
	return 0;
}

zm_handle_t zm_pool_key_handle(struct zm_pool *pool, uint64_t key)
{
	if (zm_unlikely(!pool->words || key >= pool->nwords))
		return 0;
	if (pool->ops->key_handle)
		return pool->ops->key_handle(pool, key);
	return __atomic_load_n(&pool->words[key], __ATOMIC_ACQUIRE) & 1 ? pool->keys[key] : 0;
}

int zm_pool_free_key(struct zm_pool *pool, uint64_t key)
{
	zm_handle_t h;

	if (zm_unlikely(!key_ok(pool, key, "zm_pool_free_key")))
		return -EINVAL;
	if (pool->ops->free_key)
		return pool->ops->free_key(pool, key);
	h = zm_pool_key_handle(pool, key);
	if (zm_unlikely(!h)) {
		zm_bad_input("zm_pool_free_key: key %llu holds nothing",
			     (unsigned long long)key);
		return -EINVAL;
	}
	pool->keys[key] = 0;
	__atomic_fetch_and(&pool->words[key], ~1ull, __ATOMIC_RELEASE);
	return zm_free(pool, h);
}
