/*
 * The pool interface: backend by name, dispatch through the table of
 * operations, and the printed per-class table.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/abi.h"
#include "base/live.h"
#include "pool/pool_internal.h"

static const struct zmi_pool_ops *const backends[] = {
	&zmi_pool_zsmalloc_ops,
	&zmi_pool_malloc_ops,
	&zmi_pool_xvmalloc_ops,
	&zmi_pool_xcfmalloc_ops,
	&zmi_pool_zbud_ops,
};
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

const char *const *zm_pool_backends(void)
{
	static const char *names[NBACKENDS + 1];

	for (size_t i = 0; i < NBACKENDS; i++)
		names[i] = backends[i]->name;
	return names;
}

/* ---- pool ids ---------------------------------------------------------
 * Each live pool has an id in 1..ZM_POOL_MAX_POOLS, carried by its
 * handles.  Ids are handed out round robin, so a destroyed pool's id is
 * reused as late as possible, and each id's generation counter moves past
 * the generations its last pool used (pool_internal.h), so that the next
 * pool's handles differ from that pool's.  That holds between pools of
 * one backend only (another reads a handle in its own layout), so an id
 * goes to a pool of the backend its last pool had while such an id, or
 * one never used, is free.  ids_lock is a leaf lock. */
static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ids_used[ZMI_POOL_IDS / 64];   /* ids_lock; bit 0 reserved */
static unsigned ids_next = 1;                  /* ids_lock */
static uint64_t ids_gen[ZMI_POOL_IDS];         /* ids_lock: the next gen_base */
static const struct zmi_pool_ops *ids_ops[ZMI_POOL_IDS]; /* ids_lock: the backend
							    of its last pool */

/* The first free id from ids_next on, of ops' backend or never used
 * unless any; 0 if none.  ids_lock held. */
static unsigned id_find(const struct zmi_pool_ops *ops, bool any)
{
	unsigned i = ids_next;

	for (unsigned n = 0; n < ZMI_POOL_IDS - 1; n++, i = i % (ZMI_POOL_IDS - 1) + 1)
		if (!(ids_used[i / 64] & (1ull << (i % 64))) &&
		    (any || !ids_ops[i] || ids_ops[i] == ops))
			return i;
	return 0;
}

/* An id for pool (and its gen_base), or 0 when every id is in use. */
static unsigned id_take(struct zm_pool *pool)
{
	unsigned id;

	pthread_mutex_lock(&ids_lock);
	id = id_find(pool->ops, false);
	if (!id)
		id = id_find(pool->ops, true);
	if (id) {
		ids_used[id / 64] |= 1ull << (id % 64);
		ids_next = id % (ZMI_POOL_IDS - 1) + 1;
		ids_ops[id] = pool->ops;
	}
	pool->gen_base = ids_gen[id];
	pthread_mutex_unlock(&ids_lock);
	return id;
}

/* The id of a pool whose handles are gone: its next pool's generations
 * start past those its handles took. */
static void id_give(const struct zm_pool *pool)
{
	unsigned id = pool->id;

	pthread_mutex_lock(&ids_lock);
	ids_gen[id] = pool->gen_base + pool->gen_span;
	ids_used[id / 64] &= ~(1ull << (id % 64));
	pthread_mutex_unlock(&ids_lock);
}

/* The backend's own handle of h, or false (and a message) when h does not
 * carry this pool's id. */
static inline bool own(const struct zm_pool *pool, zm_handle_t h, zm_handle_t *raw,
		       const char *op)
{
	if (zmi_likely((h & ~(ZMI_HANDLE_LIMIT - 1)) == pool->id_bits)) {
		*raw = h & (ZMI_HANDLE_LIMIT - 1);
		return true;
	}
	zmi_bad_input("%s: handle %#llx is not of this %s pool (id %llu)", op,
		      (unsigned long long)h, pool->ops->name,
		      (unsigned long long)(pool->id_bits >> ZMI_POOL_ID_SHIFT));
	return false;
}

zm_handle_t zmi_pool_handle(const struct zm_pool *pool, zm_handle_t raw)
{
	ZM_ASSERT(raw < ZMI_HANDLE_LIMIT);
	return raw ? raw | pool->id_bits : 0;
}

bool zmi_pool_own(const struct zm_pool *pool, zm_handle_t h, zm_handle_t *raw, const char *op)
{
	return own(pool, h, raw, op);
}

/* ---- create and destroy ------------------------------------------------ */

static const struct zmi_pool_ops *backend_of(const char *name)
{
	for (size_t i = 0; i < NBACKENDS; i++)
		if (!strcmp(name, backends[i]->name))
			return backends[i];
	zmi_bad_input("zm_pool_create: unknown allocator '%s'", name);
	return NULL;
}

/* The compaction policies a backend takes, for zm_pool_create and
 * zm_pool_set_compaction alike (pool.h): the four of the enum on a
 * backend that compacts, OFF and DEFAULT on the others.  0, -EINVAL or
 * -EOPNOTSUPP. */
static int policy_ok(const struct zmi_pool_ops *ops, enum zm_compact_policy policy)
{
	if ((unsigned)policy > ZM_COMPACT_RATIO)
		return -EINVAL;
	if (!ops->compact && policy != ZM_COMPACT_OFF && policy != ZM_COMPACT_DEFAULT)
		return -EOPNOTSUPP;
	return 0;
}

/* The compaction settings of a config: the policy as above, percentages
 * 0..100, mixed_zspages -1, 0 or 1. */
static int compaction_ok(const struct zmi_pool_ops *ops, const struct zm_pool_config *c)
{
	int rc = policy_ok(ops, c->compact);

	if (!rc && (c->compact_watermark > 100 || c->compact_ratio > 100 ||
		    c->compact_target > 100 || c->mixed_zspages < -1 || c->mixed_zspages > 1))
		rc = -EINVAL;
	if (rc)
		zmi_bad_input("zm_pool_create: compaction settings %s on %s (policy %d, "
			      "watermark %u, ratio %u, target %u, mixed_zspages %d)",
			      rc == -EINVAL ? "out of range" : "not supported", ops->name,
			      (int)c->compact, c->compact_watermark, c->compact_ratio,
			      c->compact_target, c->mixed_zspages);
	return rc;
}

static int own_pages(struct zm_pool *pool, const struct zm_pool_config *c)
{
	/* zsmalloc writes every page it takes: prefault them */
	struct zm_pages_config pc = { .page_size = c->page_size,
				      .arena_bytes = c->arena_bytes,
				      .prefault = 1 };

	pc.limit_pages = c->limit_bytes / (c->page_size ? c->page_size : ZM_PAGE_SIZE_DEFAULT);
	if (c->limit_bytes && !pc.limit_pages)
		pc.limit_pages = 1;
	pool->own_pages = true;
	return zm_pages_create(&pc, &pool->pages);
}

int zm_pool_create_sized(const struct zm_pool_config *cfg, size_t cfg_size,
			 struct zm_pool **out)
{
	struct zm_pool_config c;
	struct zm_pool *pool;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = zmi_struct_in(&c, sizeof(c), cfg, cfg_size, ZMI_POOL_CONFIG_MIN);
	if (rc)
		return rc;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->ops = backend_of(c.allocator ? c.allocator : "zsmalloc");
	pool->id = id_take(pool);
	pool->id_bits = (uint64_t)pool->id << ZMI_POOL_ID_SHIFT;
	pool->pages = c.pages;
	if (!pool->ops)
		rc = -EINVAL;
	else if ((rc = compaction_ok(pool->ops, &c)))
		;
	else if (!pool->id)
		rc = -EMFILE;
	else if (!pool->pages && pool->ops->uses_pages)
		rc = own_pages(pool, &c);
	if (rc)
		goto fail;
	pool->page_size = pool->pages ? zm_pages_page_size(pool->pages)
				      : (c.page_size ? c.page_size : ZM_PAGE_SIZE_DEFAULT);
	rc = zmi_pool_keys_init(pool, &c);
	if (rc)
		goto fail;
	rc = pool->ops->create(pool, &c);
	if (rc) {
		zmi_pool_keys_fini(pool);
		goto fail;
	}
	zmi_live_add(pool, ZMI_LIVE_POOL);
	*out = pool;
	return 0;
fail:
	if (pool->own_pages)
		zm_pages_destroy(pool->pages);
	if (pool->id)
		id_give(pool);  /* gen_span 0: no handle was made */
	free(pool);
	return rc;
}

void zm_pool_destroy(struct zm_pool *pool)
{
	struct zm_pool_stats st = { 0 };

	if (!pool || !zmi_live_take(pool, ZMI_LIVE_POOL, "zm_pool_destroy"))
		return;   /* destroyed twice: a message in ZM_DEBUG builds */
	pool->ops->stats(pool, &st);
	if (st.objects)
		zmi_log("%s pool: destroyed with %llu live object(s), released with it",
			pool->ops->name, (unsigned long long)st.objects);
	pool->ops->destroy(pool);
	zmi_pool_keys_fini(pool);
	if (pool->own_pages)
		zm_pages_destroy(pool->pages);
	id_give(pool);  /* the backend's destroy set gen_span */
	zmi_live_free(pool, sizeof(*pool));
}

/* ---- objects ----------------------------------------------------------- */

zm_handle_t zm_pool_alloc(struct zm_pool *pool, size_t size)
{
	zm_handle_t raw;

	if (zmi_unlikely(!pool || size == 0 || size > pool->page_size)) {
		zmi_bad_input("zm_pool_alloc: no pool, or size %zu is not 1..page size", size);
		errno = EINVAL;
		return 0;
	}
	raw = pool->ops->malloc(pool, size);
	return zmi_pool_handle(pool, raw);
}

int zm_pool_free(struct zm_pool *pool, zm_handle_t h)
{
	zm_handle_t raw;

	if (zmi_unlikely(!pool || !own(pool, h, &raw, "zm_pool_free")))
		return -EINVAL;
	return pool->ops->free(pool, raw);
}

int zm_pool_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len)
{
	zm_handle_t raw;

	if (zmi_unlikely(!pool || !buf || !own(pool, h, &raw, "zm_pool_write")))
		return -EINVAL;
	return pool->ops->write(pool, raw, buf, len);
}

int zm_pool_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len)
{
	zm_handle_t raw;

	if (zmi_unlikely(!pool || !buf || !own(pool, h, &raw, "zm_pool_read")))
		return -EINVAL;
	return pool->ops->read(pool, raw, buf, len);
}

void *zm_pool_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode)
{
	zm_handle_t raw;

	if (zmi_unlikely(!pool || mode < ZM_MAP_RO || mode > ZM_MAP_RW ||
			 !own(pool, h, &raw, "zm_pool_map"))) {
		errno = EINVAL;
		return NULL;
	}
	return pool->ops->map(pool, raw, mode);
}

void zm_pool_unmap(struct zm_pool *pool, zm_handle_t h)
{
	zm_handle_t raw;

	if (zmi_likely(pool && own(pool, h, &raw, "zm_pool_unmap")))
		pool->ops->unmap(pool, raw);
}

size_t zm_pool_obj_size(struct zm_pool *pool, zm_handle_t h)
{
	zm_handle_t raw;

	if (zmi_unlikely(!pool || !own(pool, h, &raw, "zm_pool_obj_size")))
		return 0;
	return pool->ops->obj_size(pool, raw);
}

/* ---- the whole pool ---------------------------------------------------- */

long zm_pool_compact(struct zm_pool *pool)
{
	if (!pool)
		return -EINVAL;
	return pool->ops->compact ? pool->ops->compact(pool) : -EOPNOTSUPP;
}

long zm_pool_shrink(struct zm_pool *pool, size_t bytes)
{
	if (!pool)
		return -EINVAL;
	return pool->ops->shrink ? pool->ops->shrink(pool, bytes) : -EOPNOTSUPP;
}

long zm_pool_min_moves(struct zm_pool *pool, size_t pages)
{
	if (!pool)
		return -EINVAL;
	return pool->ops->min_moves ? pool->ops->min_moves(pool, pages) : -EOPNOTSUPP;
}

long zm_pool_unit(struct zm_pool *pool, zm_handle_t h, zm_handle_t *out, size_t max,
		  size_t *pages)
{
	zm_handle_t raw;
	long n;

	if (zmi_unlikely(!pool || (max && !out) || !pages))
		return -EINVAL;
	if (!pool->ops->unit)
		return -EOPNOTSUPP;
	if (zmi_unlikely(!own(pool, h, &raw, "zm_pool_unit")))
		return -EINVAL;
	n = pool->ops->unit(pool, raw, out, max, pages);
	for (long i = 0; i < n && (size_t)i < max; i++)
		out[i] = zmi_pool_handle(pool, out[i]);
	return n;
}

int zm_pool_set_compaction(struct zm_pool *pool, enum zm_compact_policy policy)
{
	int rc;

	if (!pool)
		return -EINVAL;
	rc = policy_ok(pool->ops, policy);
	if (rc || !pool->ops->set_compaction)
		return rc;   /* no compaction: off, or the default, is what there is */
	return pool->ops->set_compaction(pool, policy);
}

int zm_pool_stats_sized(struct zm_pool *pool, struct zm_pool_stats *out, size_t size)
{
	struct zm_pool_stats st = { 0 };

	if (!pool)
		return -EINVAL;
	st.allocator = pool->ops->name;
	st.page_size = pool->page_size;
	pool->ops->stats(pool, &st);
	st.meta_bytes += zmi_pool_keys_meta(pool);
	st.handle_bytes += zmi_pool_keys_meta(pool);
	return zmi_struct_out(out, size, ZMI_POOL_STATS_MIN, &st, sizeof(st));
}

unsigned zm_pool_nr_classes(struct zm_pool *pool)
{
	return pool && pool->ops->nr_classes ? pool->ops->nr_classes(pool) : 0;
}

int zm_pool_class_stats_sized(struct zm_pool *pool, unsigned idx,
			      struct zm_pool_class_stats *out, size_t size)
{
	struct zm_pool_class_stats cs = { 0 };
	int rc;

	if (!pool || !out || !pool->ops->class_stats || idx >= zm_pool_nr_classes(pool))
		return -EINVAL;
	rc = pool->ops->class_stats(pool, idx, &cs);
	if (rc)
		return rc;
	return zmi_struct_out(out, size, ZMI_POOL_CLASS_STATS_MIN, &cs, sizeof(cs));
}

/* The kernel zsmalloc's per-class table, classes in use only.  Narrow
 * (80 columns): its 91-99% column, always "-" here (the 10% buckets are
 * summed in threes), is left out, and a column widens past its header
 * only for a figure that needs it; wide: the kernel's layout whole.
 * zsmalloc's mixed zspages have a row of their own after the classes,
 * told by its size: classes grow in size, and the mixed row's size is
 * its granule, below the class before it. */
static void print_classes(struct zm_pool *pool, FILE *f, bool wide)
{
	/* column widths: fullness buckets, obj_alloc/obj_used, pages, ppz */
	const int wb = wide ? 6 : 5, wz = wide ? 6 : 3, wt = wide ? 6 : 4, wo = wide ? 10 : 9,
		  wp = wide ? 10 : 7, wq = wide ? 5 : 3;
	unsigned n = zm_pool_nr_classes(pool), granule = 0, prev = 0;
	struct zm_pool_class_stats cs;

	if (!pool || !f)
		return;
	fprintf(f, "%5s %5s %*s %*s %*s %*s ", "class", "size", wz, "0%", wb, "1-30%", wb,
		"31-60", wb, "61-90");
	if (wide)
		fprintf(f, "%*s ", wb, "91-99");
	fprintf(f, "%*s %*s %*s %*s %*s %8s\n", wt, "100%", wo, "obj_alloc", wo, "obj_used", wp,
		"pages", wq, "ppz", "freeable");
	for (unsigned i = 0; i < n; i++) {
		uint64_t g[3] = { 0 };
		bool mixed;
		char cls[16];

		if (zm_pool_class_stats(pool, i, &cs))
			continue;
		mixed = i && i == n - 1 && cs.size < prev;
		prev = cs.size;
		if (!cs.pages_used)
			continue;
		for (int k = 1; k <= 9; k++)
			g[(k - 1) / 3] += cs.fullness[k];
		snprintf(cls, sizeof(cls), mixed ? "mixed" : "%u", i);
		if (mixed)
			granule = cs.size;
		fprintf(f, "%5s %5u %*llu %*llu %*llu %*llu ", cls, cs.size, wz,
			(unsigned long long)cs.fullness[0], wb, (unsigned long long)g[0], wb,
			(unsigned long long)g[1], wb, (unsigned long long)g[2]);
		if (wide)
			fprintf(f, "%*s ", wb, "-");
		fprintf(f, "%*llu %*llu %*llu %*llu %*u %8llu\n", wt,
			(unsigned long long)cs.fullness[10], wo, (unsigned long long)cs.obj_allocated,
			wo, (unsigned long long)cs.obj_used, wp, (unsigned long long)cs.pages_used, wq,
			cs.pages_per_zspage, (unsigned long long)cs.freeable);
	}
	if (granule)
		fprintf(f, "mixed: zspages of objects of any size back to back; its obj_alloc\n"
			   "and obj_used count granules of %u bytes\n", granule);
}

void zm_pool_print_classes(struct zm_pool *pool, FILE *f)
{
	print_classes(pool, f, false);
}

void zm_pool_print_classes_wide(struct zm_pool *pool, FILE *f)
{
	print_classes(pool, f, true);
}

int zm_pool_check(struct zm_pool *pool)
{
	if (!pool)
		return -EINVAL;
	return pool->ops->check ? pool->ops->check(pool) : 0;
}

const char *zm_pool_backend(const struct zm_pool *pool)
{
	return pool ? pool->ops->name : NULL;
}

