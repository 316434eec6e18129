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
 *
 * The counters are kept per thread group (MB_SHARDS lines, a thread's
 * number picks one) and summed by stats: three atomic adds on one shared
 * line at every malloc and free held two threads to 0.1-0.4x of one
 * (zmem allocbench), far below what glibc itself does.  The peak is
 * sampled: every MB_PEAK_EVERY allocations of a thread it sums the lines.
 */
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
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

#define MB_SHARDS 16
#define MB_PEAK_EVERY 32

struct mb_pool {
	struct mb_shard {          /* atomic; a thread's may go negative */
		int64_t objects, chunk_bytes, slot_bytes;
	} __attribute__((aligned(64))) shard[MB_SHARDS];
	uint64_t fail;             /* atomic */
	uint64_t peak_bytes;       /* atomic: sampled (see above) */
};

static __thread unsigned mb_allocs;

static inline struct mb_shard *my_shard(struct mb_pool *m)
{
	return &m->shard[zmi_thread_number() % MB_SHARDS];
}

static int64_t sum(struct mb_pool *m, size_t off)
{
	int64_t n = 0;

	for (unsigned i = 0; i < MB_SHARDS; i++)
		n += __atomic_load_n((int64_t *)((char *)&m->shard[i] + off), __ATOMIC_RELAXED);
	return n;
}

static inline struct mb_pool *mb(struct zm_pool *pool) { return pool->priv; }

static struct mb_hdr *lookup(zm_handle_t h, const char *op)
{
	struct mb_hdr *hd = (struct mb_hdr *)(uintptr_t)h;

	if (zmi_unlikely(!h || (h & 7) || hd[-1].magic != MB_MAGIC)) {
		zmi_bad_input("malloc pool: %s of bad handle %#llx", op, (unsigned long long)h);
		return NULL;
	}
	return hd - 1;
}

static int mb_create(struct zm_pool *pool, const struct zm_pool_config *cfg)
{
	pool->priv = aligned_alloc(64, sizeof(struct mb_pool));
	if (!pool->priv)
		return -ENOMEM;
	memset(pool->priv, 0, sizeof(struct mb_pool));
	return 0;
}

static void mb_destroy(struct zm_pool *pool)
{
	free(pool->priv);
}

static zm_handle_t mb_malloc(struct zm_pool *pool, size_t size)
{
	struct mb_hdr *hd = malloc(sizeof(*hd) + size);
	struct mb_pool *m = mb(pool);
	struct mb_shard *sh;
	size_t usable;

	if (!hd) {
		__atomic_fetch_add(&m->fail, 1, __ATOMIC_RELAXED);
		errno = ENOMEM;
		return 0;
	}
	hd->magic = MB_MAGIC;
	hd->size = (uint32_t)size;
	usable = malloc_usable_size(hd);
	sh = my_shard(m);
	__atomic_fetch_add(&sh->objects, 1, __ATOMIC_RELAXED);
	/* the slot: what glibc gave beyond the header, rounding included */
	__atomic_fetch_add(&sh->slot_bytes, (int64_t)(usable - sizeof(*hd)), __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->chunk_bytes, (int64_t)(usable + GLIBC_CHUNK_HDR),
			   __ATOMIC_RELAXED);
	if (zmi_unlikely(++mb_allocs % MB_PEAK_EVERY == 0)) {
		uint64_t bytes = (uint64_t)sum(m, offsetof(struct mb_shard, chunk_bytes));
		uint64_t peak = __atomic_load_n(&m->peak_bytes, __ATOMIC_RELAXED);

		while (bytes > peak &&
		       !__atomic_compare_exchange_n(&m->peak_bytes, &peak, bytes, true,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	return (zm_handle_t)(uintptr_t)(hd + 1);
}

static int mb_free(struct zm_pool *pool, zm_handle_t h)
{
	struct mb_hdr *hd = lookup(h, "free");
	struct mb_shard *sh;
	size_t usable;

	if (!hd)
		return -EINVAL;
	hd->magic = MB_DEAD;
	usable = malloc_usable_size(hd);
	sh = my_shard(mb(pool));
	__atomic_fetch_sub(&sh->objects, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&sh->slot_bytes, (int64_t)(usable - sizeof(*hd)), __ATOMIC_RELAXED);
	__atomic_fetch_sub(&sh->chunk_bytes, (int64_t)(usable + GLIBC_CHUNK_HDR),
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
	return zmi_map_in_place(pool, h, (void *)(uintptr_t)h);
}

static void mb_unmap(struct zm_pool *pool, zm_handle_t h)
{
	zmi_unmap_slot(pool, h);
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
	uint64_t n = (uint64_t)sum(m, offsetof(struct mb_shard, objects));
	uint64_t chunks = (uint64_t)sum(m, offsetof(struct mb_shard, chunk_bytes));
	uint64_t peak = __atomic_load_n(&m->peak_bytes, __ATOMIC_RELAXED);

	if (chunks > peak)  /* the samples may have missed the top */
		__atomic_compare_exchange_n(&m->peak_bytes, &peak, chunks, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	st->objects = n;
	st->slot_bytes = (uint64_t)sum(m, offsetof(struct mb_shard, slot_bytes));
	st->meta_bytes = n * sizeof(struct mb_hdr) + sizeof(*m);
	st->pool_bytes = chunks - n * sizeof(struct mb_hdr);
	st->pool_pages = (st->pool_bytes + pool->page_size - 1) / pool->page_size;
	st->pages_max = (__atomic_load_n(&m->peak_bytes, __ATOMIC_RELAXED) +
			 pool->page_size - 1) / pool->page_size;
	st->malloc_fail = __atomic_load_n(&m->fail, __ATOMIC_RELAXED);
}

const struct zmi_pool_ops zmi_malloc_ops = {
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
