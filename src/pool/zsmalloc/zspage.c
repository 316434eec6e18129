/*
 * zspages: the pages of one class, their records, ids, fullness groups and
 * object addressing.
 *
 * Lazy population.  A new zspage takes its first page (the first page of
 * the zspage the class retired last, if the thread's cache still has it;
 * else the first of a run, zm_pages_alloc_run; a class's objects are
 * smaller than a page, so object 0 always lies in the first page) and the
 * rest one at a time as the bump index reaches them (zs_populate, under
 * the class lock).  Without this, every class keeps a
 * newest zspage that is on average half empty: with ~250 classes and
 * zspages of up to 4 pages that is ~1 MB, several percent of a 30 MB pool
 * (the kernel's 6%).  With it, the waste is at most the unused end of one
 * page per class.
 *
 * Addressing.  Object o of a class of size S starts at byte o*S of the
 * zspage; page o*S / page_size.  An object crossing into the next page is
 * reached in place if that page is the next one in memory and the pool
 * uses the CONTIG method, else through the two segments (copied by map).
 *
 * Fullness groups: 0 empty, 10 full, 1..9 partly used by tenths;
 * allocation takes from the fullest partly used group (zsmalloc/alloc.c), so
 * that zspages fill up and the emptiest drain, to be freed or compacted.
 */
#include <errno.h>
#include <stdlib.h>

#include "pool/zsmalloc/zsmalloc.h"

uint32_t zs_id_alloc(struct zs_pool *zp, struct zs_class *c)
{
	uint32_t id;

	if (zmi_unlikely(!c->nfree_ids)) {
		uint32_t first = zs_span_take(&zp->id_span[c->idx >> zp->cshift],
					      &zp->ids_used, ZS_MAX_ZSPAGES, ZS_ID_CHUNK);

		if (!first)
			return 0;
		for (uint32_t i = 0; i < ZS_ID_CHUNK; i++)
			zp->ztab[first + i] = (uintptr_t)(first + i + 1) << 32;
		c->free_ids = first;
		c->nfree_ids = ZS_ID_CHUNK;
	}
	id = c->free_ids;
	c->free_ids = (uint32_t)(zp->ztab[id] >> 32);
	c->nfree_ids--;
	return id;
}

void zs_id_free(struct zs_pool *zp, struct zs_class *c, uint32_t id)
{
	__atomic_store_n(&zp->ztab[id], (uintptr_t)c->free_ids << 32, __ATOMIC_RELEASE);
	c->free_ids = id;
	c->nfree_ids++;
}

/* Page i of zs is pfn: in the run, or (the first time it is not) the
 * pfns move to an array of their own.  Class lock held. */
static int set_pfn(struct zs_class *c, struct zspage *zs, unsigned i, zm_pfn_t pfn)
{
	zm_pfn_t *x = zs->pfnx;

	if (!x) {
		if (pfn == zs->first + i)
			return 0;
		x = malloc((size_t)c->pages * sizeof(*x));
		if (!x)
			return -ENOMEM;
		for (unsigned k = 0; k < i; k++)
			x[k] = zs->first + k;
		x[i] = pfn;
		/* readers see the same pfns for pages 0..i-1 either way */
		__atomic_store_n(&zs->pfnx, x, __ATOMIC_RELEASE);
		c->nsplit++;
		return 0;
	}
	x[i] = pfn;
	return 0;
}

int zs_populate_slow(struct zs_pool *zp, struct zs_class *c, struct zspage *zs,
		     unsigned obj)
{
	unsigned need = zs_pages_for(zp, c, (size_t)obj + 1);

	while (zs->npop < need) {
		/* CONTIG: the page after the last one, if it is free, so that
		 * objects crossing between them are reached in place; with
		 * the pages it may take after it (zm_pages_alloc_at_run) */
		zm_pfn_t next = zs_pfn(zs, zs->npop - 1u) + 1, pfn;
		unsigned more = c->pages - zs->npop;

		if (more > ZM_PAGES_RUN_MAX)
			more = ZM_PAGES_RUN_MAX;
		if (zp->span == ZM_SPAN_CONTIG && (zm_pages_take_cached(zp->pages, next) == 0 ||
						   zm_pages_alloc_at_run(zp->pages, next, more) == 0))
			pfn = next;
		else if (zm_pages_alloc(zp->pages, &pfn))
			return -ENOMEM;
		if (set_pfn(c, zs, zs->npop, pfn)) {
			zm_pages_free(zp->pages, pfn);
			return -ENOMEM;
		}
		zs->npop++;
		zs_count(&c->npages, 1);
	}
	return 0;
}

/* Give back n pages from first on (a run) with the bulk call. */
static __attribute__((noinline)) void free_run(struct zs_pool *zp, zm_pfn_t first, unsigned n)
{
	zm_pfn_t pfns[ZS_MAX_PAGES];

	for (unsigned i = 0; i < n; i++)
		pfns[i] = first + i;
	zm_pages_free_bulk(zp->pages, n, pfns);
}

struct zspage *zs_zspage_new(struct zs_pool *zp, struct zs_class *c)
{
	struct zspage *zs = c->spare;
	/* one page to start, grown in place by zs_populate (a class's
	 * objects are smaller than a page: object 0 lies in the first) */
	bool contig = zp->span == ZM_SPAN_CONTIG && c->pages > 1;
	zm_pfn_t pfn;
	int rc;

	ZM_ASSERT(zs_pages_for(zp, c, 1) == 1);
	if (zs) {
		/* the class's retired record, with its id: no malloc */
		c->spare = NULL;
	} else {
		zs = zs_record_get(zp, c);
		if (!zs)
			return NULL;
		zs->pfnx = NULL;
		zs->id = zs_id_alloc(zp, c);
		if (!zs->id) {
			zs_record_release(zp, zs_record_put(zp, c, zs));
			return NULL;
		}
	}
	/* the first page of the zspage this class retired last, if this
	 * thread's page cache still has it (its next pages likely too, for
	 * zs_populate: an object freed and allocated over and over then
	 * takes no lock of the pages layer); else one page (the common case)
	 * through the per-thread page cache */
	if (contig && c->reuse_pfn && zm_pages_take_cached(zp->pages, c->reuse_pfn - 1) == 0) {
		pfn = c->reuse_pfn - 1;
		rc = 0;
	} else if (contig) {
		/* the first page of a run as long as the zspage, the rest
		 * set aside in this thread's cache for zs_populate, which
		 * then takes each next page in place (objects crossing pages
		 * stay in place) and without the pages layer's lock */
		rc = zm_pages_alloc_run(zp->pages, c->pages < ZM_PAGES_RUN_MAX ? c->pages
					: ZM_PAGES_RUN_MAX, &pfn);
	} else {
		rc = zm_pages_alloc(zp->pages, &pfn);
	}
	if (rc) {  /* the limit or the arena ran out */
		c->spare = zs;
		return NULL;
	}
	zs->first = pfn;
	zs_set_magic(zs, ZS_MAGIC);
	zs->cls = c->idx;
	zs->inuse = 0;
	zs->free_head = ZS_NONE;
	zs->bump = 0;
	zs->group = ZS_GROUPS;  /* on no list yet */
	zs->npop = 1;
	zs->pass = 0;           /* a keeper of no pass (zsmalloc/compact.c) */
	/* atomic, as every access to it: lookups read it without the class
	 * lock (ThreadSanitizer caught this plain store racing one of them
	 * on a record reused from malloc) */
	__atomic_store_n(&zs->migrating, 0, __ATOMIC_RELAXED);
	zs->size = c->size;
	zs->next = zs->prev = NULL;
	zs_count(&c->npages, 1);
	__atomic_store_n(&zp->ztab[zs->id], (uintptr_t)zs, __ATOMIC_RELEASE);
	return zs;
}

void zs_zspage_retire(struct zs_pool *zp, struct zs_class *c, struct zspage *zs)
{
	if (c->mixed && zp->mhint[c->idx >> zp->cshift]) {
		struct zspage **hint = zp->mhint[c->idx >> zp->cshift]->zs;

		for (unsigned b = 0; b < ZS_MHOLE_BINS; b++)
			if (hint[b] == zs)
				hint[b] = NULL;
	}
	if (c->mixed && zs_mrec_of(zs)->ix) {
		free(zs_mrec_of(zs)->ix);
		zs_mrec_of(zs)->ix = NULL;
		__atomic_fetch_sub(&zp->mholes_bytes, zs_malloc_cost(sizeof(struct zs_mholes)),
				   __ATOMIC_RELAXED);
	}
	zs_count(&c->npages, -(int32_t)zs->npop);
	c->nsplit -= zs->pfnx != NULL;
	zs_set_magic(zs, 0);
}

/* Give back the pages of a retired zspage; the record becomes the class's
 * spare if it has none (takes the class lock), else it is freed. */
void zs_zspage_free(struct zs_pool *zp, struct zs_class *c, struct zspage *zs)
{
	zm_pfn_t *x = zs->pfnx, first = zs->first;
	unsigned n = zs->npop;
	uint32_t reuse = 0;

	/* a few pages go back through the per-thread cache, lock-free, the
	 * first last, so that it is on top for the class's next zspage */
	if (zmi_likely(!x)) {
		if (n <= 4) {
			for (unsigned i = n; i-- > 0;)
				zm_pages_free(zp->pages, first + i);
			reuse = n ? first + 1 : 0;
		} else {
			free_run(zp, first, n);
		}
	} else {
		if (n <= 4) {
			for (unsigned i = n; i-- > 0;)
				zm_pages_free(zp->pages, x[i]);
			reuse = n ? x[0] + 1 : 0;
		} else {
			zm_pages_free_bulk(zp->pages, n, x);
		}
		/* retired: no reader is left (zs_zspage_retire) */
		free(x);
		zs->pfnx = NULL;
	}
	zs->npop = 0;
	if (c) {
		void *empty = NULL;

		zmi_lock(&c->lock);
		c->reuse_pfn = reuse;
		if (!c->spare) {
			c->spare = zs;
		} else {
			zs_id_free(zp, c, zs->id);
			empty = zs_record_put(zp, c, zs);
		}
		zmi_unlock(&c->lock);
		zs_record_release(zp, empty);
	} else {
		/* the pool goes: its record pages too */
		zs_record_forget(zp, zs_class_of(zp, zs->cls), zs);
	}
}

struct zspage *zs_room_in(const struct zs_pool *zp, struct zs_class *c)
{
	for (unsigned g = ZS_GROUPS - 2; g >= 1; g--)
		for (struct zspage *zs = c->group[g]; zs; zs = zs->next)
			if (!zs->migrating && zs_fits_in_place(zp, c, zs))
				return zs;
	return NULL;
}

void zs_group_del(struct zs_class *c, struct zspage *zs)
{
	if (zs->prev)
		zs->prev->next = zs->next;
	else if (!(c->group[zs->group] = zs->next))
		c->gmask &= (uint16_t)~(1u << zs->group);
	if (zs->next)
		zs->next->prev = zs->prev;
	zs->next = zs->prev = NULL;
}

static void group_add(struct zs_class *c, struct zspage *zs, unsigned g)
{
	zs->group = (uint8_t)g;
	zs->prev = NULL;
	zs->next = c->group[g];
	if (zs->next)
		zs->next->prev = zs;
	c->group[g] = zs;
	c->gmask |= (uint16_t)(1u << g);
}

/* Move zs to group g; a new zspage has group ZS_GROUPS ("on no list"). */
void zs_group_move(struct zs_class *c, struct zspage *zs, unsigned g)
{
	if (zs->group < ZS_GROUPS)
		zs_group_del(c, zs);
	group_add(c, zs, g);
}
