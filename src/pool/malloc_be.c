/*
 * The "malloc" backend: every object one malloc() block.  The baseline a
 * userspace programmer would reach for, kept honest:
 *
 *   - each block carries an 8-byte header (magic + size) so that reads and
 *     writes can be bounds-checked and bad handles refused; it is counted
 *     as metadata;
 *   - pool_bytes is what glibc really spends on each block: its usable size
 *     plus glibc's own 8-byte chunk header (malloc_usable_size() + 8),
 *     minus our header.  Free chunks that glibc keeps but cannot return are
 *     not visible here; the churn benchmark measures them from the process
 *     resident size instead.
 *
 * Handles are the block's address.  Freed blocks get their magic changed,
 * so a double free is caught as long as glibc has not reused the block.
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool_internal.h"

#define MB_MAGIC 0x7a6d4d42u /* "zmMB" */
#define MB_DEAD  0x64656164u
#define GLIBC_CHUNK_HDR 8

struct mb_hdr {
	uint32_t magic;
	uint32_t size;
};

struct mb_pool {
	uint64_t objects, chunk_bytes, slot_bytes, fail; /* atomic */
	uint64_t peak_bytes;
};

static inline struct mb_pool *mb(struct zm_pool *pool) { return pool->priv; }

static struct mb_hdr *lookup(zm_handle_t h, const char *op)
{
	struct mb_hdr *hd = (struct mb_hdr *)(uintptr_t)h;

	if (zm_unlikely(!h || (h & 7) || hd[-1].magic != MB_MAGIC)) {
		zm_bad_input("malloc pool: %s of bad handle %#llx", op, (unsigned long long)h);
		return NULL;
	}
	return hd - 1;
}

static int mb_create(struct zm_pool *pool, const struct zm_pool_config *cfg)
{
	pool->priv = calloc(1, sizeof(struct mb_pool));
	return pool->priv ? 0 : -ENOMEM;
}

static void mb_destroy(struct zm_pool *pool)
{
	if (mb(pool)->objects)
		zm_log("malloc pool: destroyed with %llu live object(s), leaked",
		       (unsigned long long)mb(pool)->objects);
	free(pool->priv);
}

static zm_handle_t mb_malloc(struct zm_pool *pool, size_t size)
{
	struct mb_hdr *hd = malloc(sizeof(*hd) + size);
	struct mb_pool *m = mb(pool);
	uint64_t bytes;

	if (!hd) {
		__atomic_fetch_add(&m->fail, 1, __ATOMIC_RELAXED);
		errno = ENOMEM;
		return 0;
	}
	hd->magic = MB_MAGIC;
	hd->size = (uint32_t)size;
	__atomic_fetch_add(&m->objects, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&m->slot_bytes, size, __ATOMIC_RELAXED);
	bytes = __atomic_add_fetch(&m->chunk_bytes, malloc_usable_size(hd) + GLIBC_CHUNK_HDR,
				   __ATOMIC_RELAXED);
	if (bytes > __atomic_load_n(&m->peak_bytes, __ATOMIC_RELAXED))
		__atomic_store_n(&m->peak_bytes, bytes, __ATOMIC_RELAXED);
	return (zm_handle_t)(uintptr_t)(hd + 1);
}

static int mb_free(struct zm_pool *pool, zm_handle_t h)
{
	struct mb_hdr *hd = lookup(h, "free");
	struct mb_pool *m = mb(pool);

	if (!hd)
		return -EINVAL;
	hd->magic = MB_DEAD;
	__atomic_fetch_sub(&m->objects, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&m->slot_bytes, hd->size, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&m->chunk_bytes, malloc_usable_size(hd) + GLIBC_CHUNK_HDR,
			   __ATOMIC_RELAXED);
	free(hd);
	return 0;
}

static void *mb_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode)
{
	if (!lookup(h, "map")) {
		errno = EINVAL;
		return NULL;
	}
	return zm_map_in_place(pool, h, (void *)(uintptr_t)h);
}

static void mb_unmap(struct zm_pool *pool, zm_handle_t h)
{
	zm_unmap_in_place(pool, h, "malloc pool");
}

static int mb_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len)
{
	struct mb_hdr *hd = lookup(h, "read");

	if (!hd || len > hd->size)
		return -EINVAL;
	memcpy(buf, hd + 1, len);
	return 0;
}

static int mb_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len)
{
	struct mb_hdr *hd = lookup(h, "write");

	if (!hd || len > hd->size)
		return -EINVAL;
	memcpy(hd + 1, buf, len);
	return 0;
}

static size_t mb_obj_size(struct zm_pool *pool, zm_handle_t h)
{
	struct mb_hdr *hd = lookup(h, "size");

	return hd ? hd->size : 0;
}

static void mb_stats(struct zm_pool *pool, struct zm_pool_stats *st)
{
	struct mb_pool *m = mb(pool);
	uint64_t n = __atomic_load_n(&m->objects, __ATOMIC_RELAXED);
	uint64_t chunks = __atomic_load_n(&m->chunk_bytes, __ATOMIC_RELAXED);

	st->objects = n;
	st->slot_bytes = __atomic_load_n(&m->slot_bytes, __ATOMIC_RELAXED);
	st->meta_bytes = n * sizeof(struct mb_hdr) + sizeof(*m);
	st->pool_bytes = chunks - n * sizeof(struct mb_hdr);
	st->pool_pages = (st->pool_bytes + pool->page_size - 1) / pool->page_size;
	st->pages_max = (__atomic_load_n(&m->peak_bytes, __ATOMIC_RELAXED) +
			 pool->page_size - 1) / pool->page_size;
	st->malloc_fail = __atomic_load_n(&m->fail, __ATOMIC_RELAXED);
}

const struct zm_pool_ops zm_malloc_ops = {
	.name = "malloc",
	.uses_pages = false,
	.create = mb_create,
	.destroy = mb_destroy,
	.malloc = mb_malloc,
	.free = mb_free,
	.map = mb_map,
	.unmap = mb_unmap,
	.read = mb_read,
	.write = mb_write,
	.obj_size = mb_obj_size,
	.compact = NULL,
	.stats = mb_stats,
};
