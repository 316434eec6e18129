/*
 * The pool interface: backend by name, dispatch through the table of
 * operations, and the printed per-class table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool_internal.h"

static const struct zmi_pool_ops *const backends[] = {
	&zmi_zsmalloc_ops,
	&zmi_malloc_ops,
	&zmi_xvmalloc_ops,
	&zmi_xcfmalloc_ops,
	&zmi_zbud_ops,
};
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

const char *const *zm_pool_backends(void)
{
	static const char *names[NBACKENDS + 1];

	for (size_t i = 0; i < NBACKENDS; i++)
		names[i] = backends[i]->name;
	return names;
}

int zm_pool_create(const struct zm_pool_config *cfg, struct zm_pool **out)
{
	struct zm_pool_config c = { 0 };
	const struct zmi_pool_ops *ops = NULL;
	struct zm_pool *pool;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (cfg)
		c = *cfg;
	if (!c.allocator)
		c.allocator = "zsmalloc";
	for (size_t i = 0; i < NBACKENDS; i++)
		if (!strcmp(c.allocator, backends[i]->name))
			ops = backends[i];
	if (!ops) {
		zmi_bad_input("zm_pool_create: unknown allocator '%s'", c.allocator);
		return -EINVAL;
	}
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->ops = ops;
	pool->pages = c.pages;
	if (!pool->pages && ops->uses_pages) {
		/* zsmalloc writes every page it takes: prefault them */
		struct zm_pages_config pc = { .page_size = c.page_size,
					      .arena_bytes = c.arena_bytes,
					      .prefault = 1 };

		pc.limit_pages = c.limit_bytes / (c.page_size ? c.page_size : 4096);
		if (c.limit_bytes && !pc.limit_pages)
			pc.limit_pages = 1;
		rc = zm_pages_create(&pc, &pool->pages);
		if (rc) {
			free(pool);
			return rc;
		}
		pool->own_pages = true;
	}
	pool->page_size = pool->pages ? zm_pages_page_size(pool->pages)
				      : (c.page_size ? c.page_size : 4096);
	rc = zmi_pool_keys_init(pool, &c);
	if (!rc) {
		rc = ops->create(pool, &c);
		if (rc)
			zmi_pool_keys_fini(pool);
	}
	if (rc) {
		if (pool->own_pages)
			zm_pages_destroy(pool->pages);
		free(pool);
		return rc;
	}
	*out = pool;
	return 0;
}

void zm_pool_destroy(struct zm_pool *pool)
{
	struct zm_pool_stats st = { 0 };

	if (!pool)
		return;
	/* one message for every backend: objects still live are leaked */
	pool->ops->stats(pool, &st);
	if (st.objects)
		zmi_log("%s pool: destroyed with %llu live object(s), released with it",
		       pool->ops->name, (unsigned long long)st.objects);
	pool->ops->destroy(pool);
	zmi_pool_keys_fini(pool);
	if (pool->own_pages)
		zm_pages_destroy(pool->pages);
	free(pool);
}

zm_handle_t zm_pool_alloc(struct zm_pool *pool, size_t size)
{
	if (zmi_unlikely(size == 0 || size > pool->page_size)) {
		zmi_bad_input("zm_pool_alloc: size %zu is not 1..%zu", size, pool->page_size);
		errno = EINVAL;
		return 0;
	}
	return pool->ops->malloc(pool, size);
}

int zm_pool_free(struct zm_pool *pool, zm_handle_t h)
{
	return pool->ops->free(pool, h);
}

int zm_pool_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len)
{
	return pool->ops->write(pool, h, buf, len);
}

int zm_pool_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len)
{
	return pool->ops->read(pool, h, buf, len);
}

void *zm_pool_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode)
{
	if (zmi_unlikely(mode < ZM_MAP_RO || mode > ZM_MAP_RW)) {
		errno = EINVAL;
		return NULL;
	}
	return pool->ops->map(pool, h, mode);
}

void zm_pool_unmap(struct zm_pool *pool, zm_handle_t h)
{
	pool->ops->unmap(pool, h);
}

size_t zm_pool_obj_size(struct zm_pool *pool, zm_handle_t h)
{
	return pool->ops->obj_size(pool, h);
}

long zm_pool_compact(struct zm_pool *pool)
{
	return pool->ops->compact ? pool->ops->compact(pool) : -EOPNOTSUPP;
}

long zm_pool_shrink(struct zm_pool *pool, size_t bytes)
{
	return pool->ops->shrink ? pool->ops->shrink(pool, bytes) : -EOPNOTSUPP;
}

long zm_pool_min_moves(struct zm_pool *pool, size_t pages)
{
	return pool->ops->min_moves ? pool->ops->min_moves(pool, pages) : -EOPNOTSUPP;
}

int zm_pool_set_compaction(struct zm_pool *pool, enum zm_compact_policy policy)
{
	if (policy > ZM_COMPACT_RATIO)
		return -EINVAL;
	return pool->ops->set_compaction ? pool->ops->set_compaction(pool, policy)
					 : (policy == ZM_COMPACT_OFF ? 0 : -EOPNOTSUPP);
}

void zm_pool_stats(struct zm_pool *pool, struct zm_pool_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->allocator = pool->ops->name;
	st->page_size = pool->page_size;
	pool->ops->stats(pool, st);
	st->meta_bytes += zmi_pool_keys_meta(pool);
}

unsigned zm_pool_nr_classes(struct zm_pool *pool)
{
	return pool->ops->nr_classes ? pool->ops->nr_classes(pool) : 0;
}

int zm_pool_class_stats(struct zm_pool *pool, unsigned idx, struct zm_pool_class_stats *cs)
{
	memset(cs, 0, sizeof(*cs));
	if (!pool->ops->class_stats || idx >= zm_pool_nr_classes(pool))
		return -EINVAL;
	return pool->ops->class_stats(pool, idx, cs);
}

void zm_pool_print_classes(struct zm_pool *pool, FILE *f)
{
	unsigned n = zm_pool_nr_classes(pool);
	struct zm_pool_class_stats cs;

	fprintf(f, "%5s %5s %6s %6s %6s %6s %6s %6s %10s %10s %10s %5s %8s\n",
		"class", "size", "0%", "1-30%", "31-60", "61-90", "91-99", "100%",
		"obj_alloc", "obj_used", "pages", "ppz", "freeable");
	for (unsigned i = 0; i < n; i++) {
		uint64_t g[5] = { 0 };

		if (zm_pool_class_stats(pool, i, &cs) || !cs.pages_used)
			continue;
		for (int k = 1; k <= 3; k++)
			g[0] += cs.fullness[k];
		for (int k = 4; k <= 6; k++)
			g[1] += cs.fullness[k];
		for (int k = 7; k <= 9; k++)
			g[2] += cs.fullness[k];
		fprintf(f, "%5u %5u %6llu %6llu %6llu %6llu %6s %6llu %10llu %10llu %10llu %5u %8llu\n",
			i, cs.size, (unsigned long long)cs.fullness[0],
			(unsigned long long)g[0], (unsigned long long)g[1],
			(unsigned long long)g[2], "-", (unsigned long long)cs.fullness[10],
			(unsigned long long)cs.obj_allocated,
			(unsigned long long)cs.obj_used, (unsigned long long)cs.pages_used,
			cs.pages_per_zspage, (unsigned long long)cs.freeable);
	}
}

int zm_pool_check(struct zm_pool *pool)
{
	return pool->ops->check ? pool->ops->check(pool) : 0;
}

const char *zm_pool_backend(const struct zm_pool *pool)
{
	return pool->ops->name;
}

