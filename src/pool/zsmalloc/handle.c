/*
 * The handle table (and the zspage table beside it, zsmalloc/zspage.c): one
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
#include <stdlib.h>

#include "base/os.h"
#include "pool/zsmalloc/zsmalloc.h"

/* Pages of ZS_SPAN entries (a span is one: the tables give back whole
 * pages only where the system's page is 4 KiB). */
#define ZS_PGEN_BYTES ((size_t)ZS_MAX_HANDLES / ZS_SPAN * sizeof(uint32_t))

int zs_handles_init(struct zs_pool *zp, uint64_t gen_base)
{
	zp->slot = zmi_os_reserve((size_t)ZS_MAX_HANDLES * sizeof(uint64_t),
				 zmi_os_page_size());
	if (!zp->slot)
		return -ENOMEM;
	zp->slot_free.pgen = zmi_os_reserve(ZS_PGEN_BYTES, zmi_os_page_size());
	if (!zp->slot_free.pgen) {
		zmi_os_release(zp->slot, (size_t)ZS_MAX_HANDLES * sizeof(uint64_t));
		return -ENOMEM;
	}
	zp->slot_free.table = zp->slot;
	zp->slot_free.gen0 = gen_base * ZS_GEN_ONE & ZS_GEN_MASK;
	zp->key_tag = zp->slot_free.gen0 | 1;
	zp->id_free.table = (uint64_t *)zp->ztab;
	zmi_lock_init(&zp->slot_free.lock);
	zmi_lock_init(&zp->id_free.lock);
	/* slot 0 is never used (handle 0 means failure); chunks start on a
	 * cache line: the first is 8..15 */
	zp->slots_used = ZS_HANDLE_CHUNK;
	zp->ztab = zmi_os_reserve((size_t)ZS_MAX_ZSPAGES * sizeof(uintptr_t),
				 zmi_os_page_size());
	if (!zp->ztab) {
		zmi_os_release(zp->slot, (size_t)ZS_MAX_HANDLES * sizeof(uint64_t));
		zmi_os_release(zp->slot_free.pgen, ZS_PGEN_BYTES);
		return -ENOMEM;
	}
	zp->id_free.table = (uint64_t *)zp->ztab;
	zp->ids_used = ZS_ID_CHUNK;   /* id 0 means "none" */
	for (unsigned sh = 0; sh < ZS_MAX_SHARDS; sh++) {
		zmi_lock_init(&zp->slot_span[sh].lock);
		zmi_lock_init(&zp->id_span[sh].lock);
		zp->slot_span[sh].tf = &zp->slot_free;
		zp->id_span[sh].tf = &zp->id_free;
	}
	return 0;
}

void zs_handles_fini(struct zs_pool *zp)
{
	zmi_os_release(zp->slot, (size_t)ZS_MAX_HANDLES * sizeof(uint64_t));
	zmi_os_release(zp->ztab, (size_t)ZS_MAX_ZSPAGES * sizeof(uintptr_t));
	zmi_os_release(zp->slot_free.pgen, ZS_PGEN_BYTES);
	free(zp->slot_free.page);
	free(zp->id_free.page);
	zmi_lock_destroy(&zp->slot_free.lock);
	zmi_lock_destroy(&zp->id_free.lock);
}

/* A page of tf given back before, for a span: its first entry, or 0.
 * The handle table's slots start at the generation after the last one
 * they had (a stale handle of the page stays stale): the page is written
 * whole here, as its chunks are about to be. */
static uint32_t tfree_take(struct zs_tfree *tf)
{
	uint32_t pg = 0;

	zmi_lock(&tf->lock);
	if (tf->n) {
		pg = tf->page[tf->n - 1];
		__atomic_store_n(&tf->n, tf->n - 1, __ATOMIC_RELAXED);
	}
	zmi_unlock(&tf->lock);
	if (!pg)
		return 0;
	if (tf->pgen)
		for (uint32_t i = 0; i < ZS_SPAN; i++)
			__atomic_store_n(&tf->table[(size_t)pg * ZS_SPAN + i],
					 (uint64_t)tf->pgen[pg], __ATOMIC_RELAXED);
	return pg * ZS_SPAN;
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
	if (sp->end - sp->next < chunk && sp->tf && __atomic_load_n(&sp->tf->n, __ATOMIC_RELAXED) &&
	    (first = tfree_take(sp->tf)) != 0) {
		/* a page of the table given back before: used again first */
		sp->next = first;
		sp->end = first + ZS_SPAN;
		sp->fresh = false;  /* its slots hold their generations */
		first = 0;
	}
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
		sp->fresh = true;
	}
	first = sp->next;
	sp->next += chunk;
	/* never-used slots read 0: give them the pool's first generation,
	 * chunk by chunk as they are handed out (a whole span at once would
	 * make the table's page resident before its slots are used) */
	if (sp->fresh && sp->tf && sp->tf->gen0)
		for (uint32_t i = first; i < first + chunk; i++)
			__atomic_store_n(&sp->tf->table[i], slot_free_val(0, sp->tf->gen0),
					 __ATOMIC_RELAXED);
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
		/* the generation a slot has (the pool's first if never
		 * used, zs_span_take; a page of the table given back starts
		 * at its own, tfree_take) */
		for (uint32_t i = 0; i < ZS_HANDLE_CHUNK; i++)
			zs_store_slot(zp, first + i, slot_free_val(
				i + 1 < ZS_HANDLE_CHUNK ? first + i + 1 : 0,
				zs_load_slot(zp, first + i) & ZS_GEN_MASK));
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

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Every slot handed out (the first chunk never is) holds its generation,
 * but those of pages given back, whose next generation pgen holds: their
 * entries read 0 now.  A slot reading 0 otherwise was never handed out
 * (the rest of a fresh span: zs_span_take writes a chunk's generations as
 * it hands the chunk out) and counts for nothing; read as a generation it
 * would be gen0's furthest, and the id's next pool would start over. */
uint64_t zs_handles_span(struct zs_pool *zp)
{
	struct zs_tfree *tf = &zp->slot_free;
	uint32_t used = __atomic_load_n(&zp->slots_used, __ATOMIC_RELAXED), k = 0;
	uint64_t d = 0;   /* owner keys' handles carry gen0 itself */

	if (tf->n)
		qsort(tf->page, tf->n, sizeof(*tf->page), u32_cmp);
	for (uint32_t i = ZS_HANDLE_CHUNK; i < used; i++) {
		uint64_t v;

		if (k < tf->n && tf->page[k] == i / ZS_SPAN) {
			v = tf->pgen[tf->page[k++]];
			i = (i / ZS_SPAN + 1) * ZS_SPAN - 1;
		} else {
			v = zs_load_slot(zp, i);
			if (!v)
				continue;
		}
		if (zs_gen_delta(zp, v) > d)
			d = zs_gen_delta(zp, v);
	}
	return d / ZS_GEN_ONE + 1;
}

/* ---- giving back the tables' free pages ------------------------------ */

struct held {
	struct zs_class *c;
	uint32_t head, n;
};

static inline uint32_t ent_next(const struct zs_tfree *tf, uint32_t e)
{
	return (uint32_t)(__atomic_load_n(&tf->table[e], __ATOMIC_RELAXED) >> 32);
}

/* Entry e's next in its free list is next; a slot keeps its generation. */
static inline void ent_link(const struct zs_tfree *tf, uint32_t e, uint32_t next)
{
	uint64_t v = __atomic_load_n(&tf->table[e], __ATOMIC_RELAXED);

	__atomic_store_n(&tf->table[e], (uint64_t)next << 32 | (tf->pgen ? v & ZS_GEN_MASK : 0),
			 __ATOMIC_RELEASE);
}

/* One table (slots: the handle table, else the zspage table's ids). */
static long trim_table(struct zs_pool *zp, bool slots)
{
	struct zs_tfree *tf = slots ? &zp->slot_free : &zp->id_free;
	uint32_t used = __atomic_load_n(slots ? &zp->slots_used : &zp->ids_used,
					__ATOMIC_RELAXED);
	uint32_t npg = used / ZS_SPAN, nh = 0, dead = 0;
	uint16_t *cnt;
	struct held *h;
	long gone = 0;

	if (npg < 2)
		return 0;
	cnt = calloc(npg, sizeof(*cnt));
	h = malloc((size_t)zp->total * sizeof(*h));
	if (!cnt || !h)
		goto out;
	/* the free entries of every class, taken: no one else hands them
	 * out meanwhile (a class short of entries takes a new chunk) */
	ZS_FOR_EACH_CLASS_ALL(zp, c) {
		struct held *x = &h[nh++];

		zs_compact_lock(c);
		x->c = c;
		if (slots) {
			x->head = c->free_slots, x->n = c->nfree_slots;
			c->nfree_slots = 0;
		} else {
			x->head = c->free_ids, x->n = c->nfree_ids;
			c->nfree_ids = 0;
		}
		zs_compact_unlock(c);
		for (uint32_t k = 0, e = x->head; k < x->n; k++, e = ent_next(tf, e))
			if (e / ZS_SPAN < npg)
				cnt[e / ZS_SPAN]++;
	}
	for (uint32_t p = 0; p < npg; p++)
		dead += cnt[p] == ZS_SPAN;
	if (dead) {
		/* the lists without the entries of wholly free pages (each
		 * entry's next read before its predecessor is relinked) */
		for (uint32_t i = 0; i < nh; i++) {
			struct held *x = &h[i];
			uint32_t e = x->head, head = 0, tail = 0, n = 0;

			for (uint32_t k = 0; k < x->n; k++) {
				uint32_t next = ent_next(tf, e);

				if (e / ZS_SPAN >= npg || cnt[e / ZS_SPAN] != ZS_SPAN) {
					if (n)
						ent_link(tf, tail, e);
					else
						head = e;
					tail = e;
					n++;
				}
				e = next;
			}
			x->head = head;
			x->n = n;
		}
	}
	/* the pages: their next generation noted, given back, kept for spans */
	for (uint32_t p = 0; p < npg && dead; p++) {
		uint32_t *pp;

		if (cnt[p] != ZS_SPAN)
			continue;
		if (tf->pgen) {
			uint64_t g = 0;

			/* the furthest from the pool's first generation */
			for (uint32_t i = 0; i < ZS_SPAN; i++) {
				uint64_t d = zs_gen_delta(zp, tf->table[(size_t)p * ZS_SPAN + i]);

				g = d > g ? d : g;
			}
			tf->pgen[p] = (uint32_t)((tf->gen0 + g + ZS_GEN_ONE) & ZS_GEN_MASK);
		}
		zmi_os_decommit(&tf->table[(size_t)p * ZS_SPAN], ZS_SPAN * sizeof(uint64_t));
		zmi_lock(&tf->lock);
		if (tf->n == tf->cap) {
			uint32_t cap = tf->cap ? tf->cap * 2 : 64;

			pp = realloc(tf->page, cap * sizeof(*pp));
			if (pp) {
				tf->page = pp;
				tf->cap = cap;
			}
		}
		if (tf->n < tf->cap) {
			tf->page[tf->n] = p;
			__atomic_store_n(&tf->n, tf->n + 1, __ATOMIC_RELAXED);
			gone++;
		}
		zmi_unlock(&tf->lock);
	}
	/* the rest back to their classes, before what they freed meanwhile */
	for (uint32_t i = 0; i < nh; i++) {
		struct held *x = &h[i];
		struct zs_class *c = x->c;
		uint32_t tail = x->head;

		if (!x->n)
			continue;
		for (uint32_t k = 1; k < x->n; k++)
			tail = ent_next(tf, tail);
		zs_compact_lock(c);
		if (slots) {
			if (c->nfree_slots)
				ent_link(tf, tail, c->free_slots);
			c->free_slots = x->head;
			c->nfree_slots += x->n;
		} else {
			if (c->nfree_ids)
				ent_link(tf, tail, c->free_ids);
			c->free_ids = x->head;
			c->nfree_ids += x->n;
		}
		zs_compact_unlock(c);
	}
out:
	free(cnt);
	free(h);
	return gone;
}

long zs_tables_trim(struct zs_pool *zp)
{
	/* a span is one page of entries only with 4 KiB pages */
	if (zmi_os_page_size() != ZS_SPAN * sizeof(uint64_t))
		return 0;
	return trim_table(zp, true) + trim_table(zp, false);
}
