/*
 * xcfmalloc: create and destroy, malloc and free, and the table of
 * operations (see xcfmalloc/xcfmalloc.h for the design, docs/xcfmalloc.md for the
 * choices made where the 2011 xcfmalloc is silent).
 *
 * malloc: the object and its header need `need` blocks.  The first piece
 * is picked as a non-last piece (xcf_pick); if the block it gets is large
 * enough, the object lives there alone and the block is split to size;
 * otherwise the block is taken whole and the rest of the object goes to a
 * second, last piece, which is split to size.  Only the last block of an
 * object is ever split.
 *
 * free: bump the first descriptor's generation (the handle is dead),
 * free both blocks (each merges with its free neighbours), then trim the
 * whole free pages beyond the reserve.
 *
 * Lock order: xcf_pool.lock, then the pages layer's.
 */
#include <errno.h>
#include <stdlib.h>

#include "pool/xcfmalloc/xcfmalloc.h"

static int xcf_create(struct zm_pool *pool, const struct zm_pool_config *cfg)
{
	struct xcf_pool *x = calloc(1, sizeof(*x));
	int rc;

	if (!x)
		return -ENOMEM;
	zmi_lock_init(&x->lock);
	x->pages = pool->pages;
	x->page_size = pool->page_size;
	x->base = zm_pages_addr(pool->pages, 0);
	x->gen0 = (uint32_t)(pool->gen_base & XCF_GEN_MASK);
	rc = xcf_blocks_init(x);
	if (rc) {
		free(x);
		return rc;
	}
	pool->priv = x;
	return 0;
}

static void xcf_destroy(struct zm_pool *pool)
{
	struct xcf_pool *x = xcf_of(pool);

	pool->gen_span = xcf_blocks_fini(x);
	zmi_lock_destroy(&x->lock);
	free(x);
}

static zm_handle_t fail(struct xcf_pool *x)
{
	x->malloc_fail++;
	zmi_unlock(&x->lock);
	errno = ENOMEM;
	return 0;
}

static zm_handle_t xcf_malloc(struct zm_pool *pool, size_t size)
{
	struct xcf_pool *x = xcf_of(pool);
	unsigned need = xcf_blocks_for(size);
	struct xcf_desc *d;
	uint32_t a, b = 0;

	zmi_lock(&x->lock);
	if (zmi_unlikely(x->nunused + (x->cap - x->top) < XCF_DESC_PER_MALLOC))
		return fail(x);
	a = xcf_pick(x, need, false);
	if (zmi_unlikely(!a))
		return fail(x);
	d = xcf_desc(x, a);
	if (d->nblk >= need) {
		xcf_carve(x, a, need);
	} else {
		size_t rest = size - xcf_cap(d);

		xcf_use(x, a);
		b = xcf_pick(x, xcf_blocks_for(rest), true);
		if (zmi_unlikely(!b)) {
			xcf_free_block(x, a);
			xcf_trim(x);
			return fail(x);
		}
		xcf_carve(x, b, xcf_blocks_for(rest));
		x->spanning++;
		x->slot_bytes += (uint64_t)xcf_desc(x, b)->nblk << XCF_BLOCK_SHIFT;
	}
	d = xcf_desc(x, a);
	d->off_flags |= XCF_HEAD;
	d->next = b;
	x->objects++;
	x->slot_bytes += (uint64_t)d->nblk << XCF_BLOCK_SHIFT;
	zmi_unlock(&x->lock);
	return xcf_handle(a, d->gen);
}

static int xcf_free(struct zm_pool *pool, zm_handle_t h)
{
	struct xcf_pool *x = xcf_of(pool);
	struct xcf_desc *d;
	uint32_t a, b;

	zmi_lock(&x->lock);
	d = xcf_lookup(x, h, "free");
	if (!d) {
		zmi_unlock(&x->lock);
		return -EINVAL;
	}
	a = (uint32_t)(h >> XCF_H_IDX_SHIFT);
	b = d->next;
	d->gen = (d->gen + 1) & XCF_GEN_MASK;
	d->off_flags &= (uint16_t)~XCF_HEAD;
	x->objects--;
	x->slot_bytes -= (uint64_t)d->nblk << XCF_BLOCK_SHIFT;
	xcf_free_block(x, a);
	if (b) {
		x->spanning--;
		x->slot_bytes -= (uint64_t)xcf_desc(x, b)->nblk << XCF_BLOCK_SHIFT;
		xcf_free_block(x, b);
	}
	xcf_trim(x);
	zmi_unlock(&x->lock);
	return 0;
}

/* No compaction (the 2011 xcfmalloc planned it, never wrote it): switching it off,
 * or asking for the default, is all there is to do. */
static int xcf_set_compaction(struct zm_pool *pool, enum zm_compact_policy policy)
{
	return policy == ZM_COMPACT_OFF || policy == ZM_COMPACT_DEFAULT ? 0 : -EOPNOTSUPP;
}

const struct zmi_pool_ops zmi_pool_xcfmalloc_ops = {
	.name = "xcfmalloc",
	.uses_pages = true,
	.create = xcf_create,
	.destroy = xcf_destroy,
	.malloc = xcf_malloc,
	.free = xcf_free,
	.map = xcf_map,
	.unmap = xcf_unmap,
	.read = xcf_read,
	.write = xcf_write,
	.obj_size = xcf_obj_size,
	.compact = NULL,
	.stats = xcf_stats,
	.nr_classes = xcf_nr_classes,
	.class_stats = xcf_class_stats,
	.check = xcf_check,
	.shrink = NULL,
	.set_compaction = xcf_set_compaction,
};
