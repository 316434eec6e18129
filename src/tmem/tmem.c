/*
 * tmem instances and their pools: create, destroy, the pool table.
 *
 * A pool's id is generation << TM_SLOT_BITS | slot: a slot of the table
 * is reused, its generation moves on, so the id of a destroyed pool is
 * refused (until the generation wraps, after 2^25 pools in one slot).
 * The table's pointers are read without a lock; pools_lock serialises
 * creating and destroying, and a pool leaves the table under evict_lock
 * too, so that an evictor (which reaches pools through the keys in
 * objects) never finds one being destroyed.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/abi.h"
#include "base/live.h"
#include "tmem/tmem_internal.h"

#define TMI_CONFIG_MIN zmi_size_upto(struct zm_tmem_config, persistent_pct)
#define TMI_POOL_CONFIG_MIN zmi_size_upto(struct zm_tmem_pool_config, max_mean_zsize)
/* The smallest arena: room for per-thread page caches beside a small
 * budget (as the store gives its pool). */
#define TM_ARENA_MIN ((size_t)64 << 20)
/* A thread's page cache: budget / TM_CACHE_SHARE pages, within these
 * bounds (the pages layer's default is 64 at 4 KiB: at a small budget two
 * threads' caches held a quarter of it, and puts were refused for room
 * that sat in the other thread's cache). */
#define TM_CACHE_SHARE 128
#define TM_CACHE_MIN 8
#define TM_CACHE_MAX 64

struct zmi_tmem_pool *zmi_tmem_pool_of(struct zm_tmem *t, int id, const char *op)
{
	unsigned slot = (unsigned)id & (ZM_TMEM_MAX_POOLS - 1);
	struct zmi_tmem_pool *p = NULL;

	/* the generation first: a stale id never reads the record of the
	 * pool now in its slot, which another thread may be destroying */
	if (id > 0 && __atomic_load_n(&t->gen[slot], __ATOMIC_ACQUIRE) ==
		      (uint32_t)id >> TM_SLOT_BITS)
		p = __atomic_load_n(&t->pool[slot], __ATOMIC_ACQUIRE);
	if (zmi_likely(p && p->id == id))
		return p;
	if (op)
		zmi_bad_input("%s: no pool %d", op, id);
	return NULL;
}

static int make_pools(struct zm_tmem *t, const struct zm_tmem_config *c)
{
	struct zm_pool_config pc = { .allocator = c->allocator };
	struct zm_pages_config gc = { .page_size = t->page_size };
	size_t arena = t->budget + t->budget / 4;
	int rc;

	/* every backend but malloc takes its memory from pages: there the
	 * pages' limit is the budget; malloc's objects are counted (io.c) */
	if (strcmp(c->allocator ? c->allocator : "zsmalloc", "malloc")) {
		gc.arena_bytes = arena > TM_ARENA_MIN ? arena : TM_ARENA_MIN;
		gc.limit_pages = t->budget / t->page_size;
		/* pages in a thread's cache count against the limit and are
		 * no other thread's: at most 1/128 of the budget each */
		gc.cache_pages = (unsigned)(gc.limit_pages / TM_CACHE_SHARE);
		if (gc.cache_pages < TM_CACHE_MIN)
			gc.cache_pages = TM_CACHE_MIN;
		if (gc.cache_pages > TM_CACHE_MAX)
			gc.cache_pages = TM_CACHE_MAX;
		rc = zm_pages_create(&gc, &t->pages);
		if (rc)
			return rc;
		pc.pages = t->pages;
	}
	pc.page_size = t->page_size;
	rc = zm_pool_create(&pc, &t->eph);
	if (!rc)
		rc = zm_pool_create(&pc, &t->pers);
	return rc;
}

int zm_tmem_create_sized(const struct zm_tmem_config *ucfg, size_t cfg_size,
			 struct zm_tmem **out)
{
	struct zm_tmem_config c;
	struct zm_tmem *t;
	size_t ps;
	unsigned pct;
	zm_handle_t probe;
	size_t pages;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = zmi_struct_in(&c, sizeof(c), ucfg, cfg_size, TMI_CONFIG_MIN);
	if (rc)
		return rc;
	ps = c.page_size ? c.page_size : ZM_PAGE_SIZE_DEFAULT;
	pct = c.persistent_pct ? c.persistent_pct : TM_PERSISTENT_PCT;
	if (ps < ZM_PAGE_SIZE_MIN || ps > ZM_PAGE_SIZE_MAX || (ps & (ps - 1)) || pct > 100) {
		zmi_bad_input("zm_tmem_create: page size %zu or persistent_pct %u out of range",
			     ps, pct);
		return -EINVAL;
	}
	/* the pages layer numbers pages with 32 bits (and the arena is a
	 * quarter larger than the budget) */
	if (c.budget_bytes / ps > (UINT32_MAX / 5) * 4) {
		zmi_bad_input("zm_tmem_create: budget %zu beyond 2^32 pages", c.budget_bytes);
		return -EINVAL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	zmi_live_add(t, ZMI_LIVE_TMEM);   /* before any failure destroys it */
	t->page_size = ps;
	t->budget = c.budget_bytes ? c.budget_bytes : TM_DEFAULT_BUDGET;
	if (t->budget < ps)
		t->budget = ps;
	/* budget * pct / 100, exact (at 100: the budget) and without overflow */
	t->pers_cap = (uint64_t)t->budget / 100 * pct + (uint64_t)t->budget % 100 * pct / 100;
	pthread_mutex_init(&t->pools_lock, NULL);
	pthread_mutex_init(&t->evict_lock, NULL);
	{
		pthread_rwlockattr_t ra;

		pthread_rwlockattr_init(&ra);
		pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&t->obj_lock, &ra);
		pthread_rwlockattr_destroy(&ra);
	}
	zmi_lock_init(&t->lru_lock);
	t->lru.lru_next = t->lru.lru_prev = &t->lru;
	rc = zm_codec_create(c.codec, c.codec_level, &t->codec);
	if (!rc)
		rc = make_pools(t, &c);
	if (rc) {
		zm_tmem_destroy(t);
		return rc;
	}
	/* does the backend have units?  ask it about an object of its own */
	probe = zm_pool_alloc(t->eph, 1);
	t->units = probe && zm_pool_unit(t->eph, probe, NULL, 0, &pages) > 0;
	if (probe)
		zm_pool_free(t->eph, probe);
	t->evicts = !t->units ? "object" :
		    !strcmp(zm_pool_backend(t->eph), "zbud") ? "page" : "zspage";
	*out = t;
	return 0;
}

void zm_tmem_destroy(struct zm_tmem *t)
{
	if (!t || !zmi_live_take(t, ZMI_LIVE_TMEM, "zm_tmem_destroy"))
		return;   /* destroyed twice: a message in ZM_DEBUG builds */
	for (unsigned i = 0; i < ZM_TMEM_MAX_POOLS; i++)
		if (t->pool[i])
			zm_tmem_pool_destroy(t, t->pool[i]->id);
	zm_pool_destroy(t->eph);
	zm_pool_destroy(t->pers);
	zm_pages_destroy(t->pages);
	zm_codec_destroy(t->codec);
	pthread_rwlock_destroy(&t->obj_lock);
	pthread_mutex_destroy(&t->evict_lock);
	pthread_mutex_destroy(&t->pools_lock);
	free(t->ubuf);
	free(t->kbuf);
	zmi_live_free(t, sizeof(*t));
}

static int check_pool_config(const struct zm_tmem *t, struct zm_tmem_pool_config *c)
{
	if (c->kind != ZM_TMEM_EPHEMERAL && c->kind != ZM_TMEM_PERSISTENT)
		return -EINVAL;
	if (!c->page_size)
		c->page_size = t->page_size;
	if (c->page_size < 512 || c->page_size > t->page_size ||
	    (c->page_size & (c->page_size - 1)))
		return -EINVAL;
	if (c->exclusive_gets && c->kind == ZM_TMEM_PERSISTENT)
		return -EINVAL;
	if (!c->max_zsize)
		c->max_zsize = c->page_size / 8 * 7;
	/* an object fits a backend page, an ephemeral one with its key */
	if (c->max_zsize > c->page_size ||
	    (c->kind == ZM_TMEM_EPHEMERAL && c->max_zsize > t->page_size - TM_HDR))
		return -EINVAL;
	if (!c->max_mean_zsize)
		c->max_mean_zsize = c->page_size / 8 * 5;
	return 0;
}

int zm_tmem_pool_create_sized(struct zm_tmem *t, const struct zm_tmem_pool_config *ucfg,
			      size_t cfg_size)
{
	struct zm_tmem_pool_config c;
	struct zmi_tmem_pool *p;
	unsigned slot;
	uint32_t gen;
	int rc;

	if (!t || !ucfg)
		return -EINVAL;
	rc = zmi_struct_in(&c, sizeof(c), ucfg, cfg_size, TMI_POOL_CONFIG_MIN);
	if (!rc)
		rc = check_pool_config(t, &c);
	if (rc) {
		zmi_bad_input("zm_tmem_pool_create: bad config (kind %d, page size %zu, "
			     "max_zsize %zu)", (int)ucfg->kind, ucfg->page_size, ucfg->max_zsize);
		return rc;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->t = t;
	p->kind = c.kind;
	p->exclusive = c.exclusive_gets != 0;
	p->page_size = c.page_size;
	p->max_zsize = c.max_zsize;
	p->max_mean_zsize = c.max_mean_zsize;
	p->zp = c.kind == ZM_TMEM_EPHEMERAL ? t->eph : t->pers;
	for (unsigned i = 0; i < ZM_TMEM_SHARDS; i++)
		zmi_lock_init(&p->shard[i].lock);
	pthread_mutex_lock(&t->pools_lock);
	for (slot = 0; slot < ZM_TMEM_MAX_POOLS && t->pool[slot]; slot++)
		;
	if (slot == ZM_TMEM_MAX_POOLS) {
		pthread_mutex_unlock(&t->pools_lock);
		free(p);
		return -EMFILE;
	}
	/* ids stay positive ints: the generation wraps below 2^25 */
	gen = (t->gen[slot] + 1) & ((1u << (31 - TM_SLOT_BITS)) - 1);
	p->id = (int)((gen ? gen : 1) << TM_SLOT_BITS | slot);
	__atomic_store_n(&t->pool[slot], p, __ATOMIC_RELEASE);
	__atomic_store_n(&t->gen[slot], gen ? gen : 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&t->pools_lock);
	return p->id;
}

int zm_tmem_pool_destroy(struct zm_tmem *t, int pool)
{
	struct zmi_tmem_pool *p;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->pools_lock);
	p = zmi_tmem_pool_of(t, pool, "zm_tmem_pool_destroy");
	if (!p) {
		pthread_mutex_unlock(&t->pools_lock);
		return -EINVAL;
	}
	pthread_mutex_lock(&t->evict_lock);
	__atomic_store_n(&t->pool[pool & (ZM_TMEM_MAX_POOLS - 1)], NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&t->evict_lock);
	/* out of the table: only this call reaches p now; zmi_tmem_remove takes
	 * the shard locks as it goes, which costs nothing here.  pools_lock
	 * stays held until its counters are in the instance's totals, so
	 * that stats never see them missing. */
	zmi_tmem_flush_all(p);
	for (unsigned i = 0; i < ZM_TMEM_SHARDS; i++) {
		for (unsigned k = 0; k < TC_NR; k++)
			t->gone[k] += p->shard[i].ctr[k];
		zmi_tmem_shard_free(&p->shard[i]);
		zmi_lock_destroy(&p->shard[i].lock);
	}
	t->gone_flush_objects += p->flush_objects;
	pthread_mutex_unlock(&t->pools_lock);
	free(p);
	return 0;
}
