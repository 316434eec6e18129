/*
 * The handle table (and the zspage table beside it, zs_zspage.c): one
 * 8-byte slot per object, holding where the object
 * is (zspage id and object index; for a huge object its page and shard)
 * and a generation, so that a
 * stale or double-freed handle is recognised.  The table is reserved once
 * (ZS_MAX_HANDLES slots of address space, touched only as used).  Each
 * class keeps its own list of free slots under its lock and refills it by
 * ZS_HANDLE_CHUNK slots from its shard's span of the table, which takes
 * ZS_SPAN slots at a time with one atomic add on slots_used: no pool-wide
 * lock on malloc or free, and the lines of two shards' slots apart.
 */
#include <errno.h>

#include "base/os.h"
#include "pool/zsmalloc.h"

int zs_handles_init(struct zs_pool *zp)
{
	zp->slot = zmi_os_reserve((size_t)ZS_MAX_HANDLES * sizeof(uint64_t),
				 zmi_os_page_size());
	if (!zp->slot)
		return -ENOMEM;
	/* slot 0 is never used (handle 0 means failure); chunks start on a
	 * cache line: the first is 8..15 */
	zp->slots_used = ZS_HANDLE_CHUNK;
	zp->ztab = zmi_os_reserve((size_t)ZS_MAX_ZSPAGES * sizeof(uintptr_t),
				 zmi_os_page_size());
	if (!zp->ztab) {
		zmi_os_release(zp->slot, (size_t)ZS_MAX_HANDLES * sizeof(uint64_t));
		return -ENOMEM;
	}
	zp->ids_used = ZS_ID_CHUNK;   /* id 0 means "none" */
	for (unsigned sh = 0; sh < ZS_MAX_SHARDS; sh++) {
		zmi_lock_init(&zp->slot_span[sh].lock);
		zmi_lock_init(&zp->id_span[sh].lock);
	}
	return 0;
}

void zs_handles_fini(struct zs_pool *zp)
{
	zmi_os_release(zp->slot, (size_t)ZS_MAX_HANDLES * sizeof(uint64_t));
	zmi_os_release(zp->ztab, (size_t)ZS_MAX_ZSPAGES * sizeof(uintptr_t));
}

/* A free slot's value: next free slot, generation, not live, not huge. */
static inline uint64_t slot_free_val(uint32_t next, uint64_t gen)
{
	return ((uint64_t)next << 32) | gen;
}

uint32_t zs_span_take(struct zs_span *sp, uint32_t *used, uint32_t max, uint32_t chunk)
{
	uint32_t first = 0;

	zmi_lock(&sp->lock);
	if (sp->end - sp->next < chunk) {
		uint32_t at = __atomic_load_n(used, __ATOMIC_RELAXED), want;

		do {
			if (at > max - chunk)
				goto out;  /* the table is full: never wraps */
			/* a whole span, or near the table's end one
			 * chunk at a time */
			want = at <= max - ZS_SPAN ? ZS_SPAN : chunk;
		} while (!__atomic_compare_exchange_n(used, &at, at + want, true,
						      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
		sp->next = at;
		sp->end = at + want;
	}
	first = sp->next;
	sp->next += chunk;
out:
	zmi_unlock(&sp->lock);
	return first;
}

uint64_t zs_span_unused(struct zs_pool *zp, struct zs_span *spans)
{
	uint64_t n = 0;

	for (unsigned sh = 0; sh < zp->nshards; sh++) {
		zmi_lock(&spans[sh].lock);
		n += spans[sh].end - spans[sh].next;
		zmi_unlock(&spans[sh].lock);
	}
	return n;
}

uint32_t zs_slot_alloc(struct zs_pool *zp, struct zs_class *c)
{
	uint32_t idx;

	if (zmi_unlikely(!c->nfree_slots)) {
		uint32_t first = zs_span_take(&zp->slot_span[c->idx >> zp->cshift],
					      &zp->slots_used, ZS_MAX_HANDLES, ZS_HANDLE_CHUNK);

		if (!first)
			return 0;
		for (uint32_t i = 0; i < ZS_HANDLE_CHUNK; i++)
			zs_store_slot(zp, first + i, slot_free_val(
				i + 1 < ZS_HANDLE_CHUNK ? first + i + 1 : 0, 0));
		c->free_slots = first;
		c->nfree_slots = ZS_HANDLE_CHUNK;
	}
	idx = c->free_slots;
	c->free_slots = (uint32_t)(zs_load_slot(zp, idx) >> 32);
	c->nfree_slots--;
	return idx;
}

void zs_slot_free(struct zs_pool *zp, struct zs_class *c, uint32_t idx)
{
	uint64_t gen = ((zs_load_slot(zp, idx) & ZS_GEN_MASK) + ZS_GEN_ONE) & ZS_GEN_MASK;

	zs_store_slot(zp, idx, slot_free_val(c->nfree_slots ? c->free_slots : 0, gen));
	c->free_slots = idx;
	c->nfree_slots++;
}
