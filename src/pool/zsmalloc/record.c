/*
 * zspage records in pages of the pool's own, so that they go back to the
 * OS when zspages go.
 *
 * A record (struct zspage and its back references) takes whole cache
 * lines, 64 to a few hundred bytes.  From malloc they would scatter over
 * the heap, and the survivors of a mass free hold most of its pages,
 * which malloc_trim cannot give back (docs/results/2026-12-02-memory-back.md).
 * Here they live in record
 * pages, one record size to a page (a bucket for every 64 bytes), cut
 * from one reservation of address space (256 bytes for each page of the
 * pages instance, 4 MiB to 4 GiB); an empty page goes back to the OS,
 * and after a compaction episode the records of the sparsest pages move
 * into the others, whose free slots can hold them, and those pages go
 * back too (zs_records_compact).
 *
 * A page's header holds its bucket, how many of its slots are used and a
 * bitmap of the free ones; a slot is found from a record by its address.
 * malloc keeps a pool's first four pages' worth of records (a pool of a
 * few objects does not pay a page for each record size: 10 objects cost
 * 11.6 KiB of metadata that way instead of 5.9), records larger than half
 * a page (pages over 64 KiB, or a zspage of hundreds of objects) and any
 * beyond the reservation; whether a record is malloc'd is told by its
 * address.  Compaction moves the malloc'd records of a bucket that has
 * pages into them.
 *
 * Moving a record.  Readers find a record through the zspage table
 * (ztab[id]) without a lock, publish a hazard on it and check that both
 * the handle slot and ztab[id] still name it (zsmalloc/access.c).  The mover
 * quiesces records as the object mover does zspages: it marks them
 * migrating (readers back off, frees wait: lock_obj), runs the heavy
 * barrier and leaves any a hazard names; it copies the others under the
 * class lock, relinks the copy in its fullness list and publishes it in
 * ztab; after a second barrier, once no hazard names the old copies, they
 * are freed.  A reader that took an old pointer before the publish fails
 * the ztab check and looks again.
 *
 * Locking: class lock -> bucket lock -> zp->rec.lock (chunks and free
 * pages); both are leaves, held for a few stores.  The compactor holds
 * compact_lock, then class locks as above.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/os.h"
#include "pool/zsmalloc/zsmalloc.h"

#define ZS_REC_PER_PAGE 256            /* reservation bytes per page of the arena */
#define ZS_REC_MIN ((size_t)4 << 20)   /* ... at least, */
#define ZS_REC_MAX ((size_t)4 << 30)   /* ... at most */
#define ZS_REC_BATCH  64               /* records quiesced together */
#define ZS_REC_FIRST  4                /* a pool's records malloc'd until
					  they would fill this many pages */

struct zs_rpage {
	struct zs_rpage *next, *prev;    /* bucket's avail list */
	uint16_t used, nslots;
	uint8_t bucket;
	bool avail;                      /* on the avail list */
	bool draining;                   /* the compactor empties it: on no
					    list, no record is put into it */
	uint64_t freemap[];              /* bit i: slot i is free */
};

static inline struct zs_rpage *rpage_of(const struct zs_pool *zp, const void *rec)
{
	return (struct zs_rpage *)((uintptr_t)rec & ~(uintptr_t)(zp->rec.page - 1));
}

/* The record size of bucket number f (of any shard). */
static inline size_t rec_size(unsigned f)
{
	return ((size_t)(f % ZS_REC_BUCKETS) + 1) * 64;
}

static inline unsigned bucket_of(size_t rsz)
{
	return (unsigned)(rsz / 64 - 1);
}

int zs_records_init(struct zs_pool *zp)
{
	struct zs_records *r = &zp->rec;
	struct zm_pages_stats ps;
	size_t words;

	r->page = zmi_os_page_size();
	words = (r->page / 64 + 63) / 64;
	r->hdr = (unsigned)((sizeof(struct zs_rpage) + words * 8 + 63) & ~(size_t)63);
	/* two records a page at least, and a bucket for each size */
	r->max = (unsigned)((r->page - r->hdr) / 2) & ~63u;
	if (r->max > rec_size(ZS_REC_BUCKETS - 1))
		r->max = (unsigned)rec_size(ZS_REC_BUCKETS - 1);
	zm_pages_stats(zp->pages, &ps);
	r->bytes = ps.total_pages < ZS_REC_MAX / ZS_REC_PER_PAGE ?
		   ps.total_pages * ZS_REC_PER_PAGE : ZS_REC_MAX;
	if (r->bytes < ZS_REC_MIN)
		r->bytes = ZS_REC_MIN;
	r->bytes &= ~(r->page - 1);
	r->keep = zm_pages_keeps_memory(zp->pages);
	zmi_lock_init(&r->lock);
	return 0;
}

void zs_records_fini(struct zs_pool *zp)
{
	struct zs_records *r = &zp->rec;

	if (r->base)
		zmi_os_release(r->base, r->bytes);
	free(r->freep);
	free(r->dirty);
	zmi_lock_destroy(&r->lock);
	for (unsigned sh = 0; sh < ZS_MAX_SHARDS; sh++) {
		if (!r->b[sh])
			continue;
		for (unsigned i = 0; i < ZS_REC_BUCKETS; i++)
			if (r->b[sh][i]) {
				zmi_lock_destroy(&r->b[sh][i]->lock);
				free(r->b[sh][i]);
			}
		free(r->b[sh]);
	}
}

/* A bucket's number: shard and size (a record page's `bucket`). */
#define ZS_NBUCKETS (ZS_MAX_SHARDS * ZS_REC_BUCKETS)
_Static_assert(ZS_NBUCKETS <= 256, "a bucket's number in a byte");

static inline unsigned bucket_no(const struct zs_pool *zp, const struct zs_class *c)
{
	return (unsigned)(c->idx >> zp->cshift) * ZS_REC_BUCKETS +
	       bucket_of(zs_record_alloc_size(c));
}

/* Bucket f, if a record of its shard and size was ever made (else NULL). */
static inline struct zs_rbucket *bucket(const struct zs_pool *zp, unsigned f)
{
	struct zs_rbucket **a = __atomic_load_n(&zp->rec.b[f / ZS_REC_BUCKETS], __ATOMIC_ACQUIRE);

	return a ? __atomic_load_n(&a[f % ZS_REC_BUCKETS], __ATOMIC_ACQUIRE) : NULL;
}

/* Bucket f, made if it is not yet; NULL without memory. */
static struct zs_rbucket *bucket_make(struct zs_pool *zp, unsigned f)
{
	struct zs_records *r = &zp->rec;
	struct zs_rbucket *b = bucket(zp, f), **a;

	if (zmi_likely(b))
		return b;
	zmi_lock(&r->lock);
	a = r->b[f / ZS_REC_BUCKETS];
	if (!a && (a = calloc(ZS_REC_BUCKETS, sizeof(*a))))
		__atomic_store_n(&r->b[f / ZS_REC_BUCKETS], a, __ATOMIC_RELEASE);
	if (a && !(b = a[f % ZS_REC_BUCKETS]) && (b = aligned_alloc(64, sizeof(*b)))) {
		memset(b, 0, sizeof(*b));
		zmi_lock_init(&b->lock);
		__atomic_store_n(&a[f % ZS_REC_BUCKETS], b, __ATOMIC_RELEASE);
	}
	zmi_unlock(&r->lock);
	return b;
}

/* Is rec in a record page (else malloc'd)? */
static inline bool in_pages(const struct zs_pool *zp, const void *rec)
{
	const char *base = __atomic_load_n(&zp->rec.base, __ATOMIC_ACQUIRE);

	return base && (size_t)((const char *)rec - base) < zp->rec.bytes;
}

/* A zeroed page for records: one given back before, else the next never
 * used (the reservation made with the first).  NULL when there is none
 * or no memory.  rec.lock taken. */
static struct zs_rpage *page_new(struct zs_pool *zp)
{
	struct zs_records *r = &zp->rec;
	char *pg = NULL;

	zmi_lock(&r->lock);
	if (r->ndirty || r->nfree) {
		/* resident ones first: no page fault */
		pg = r->ndirty ? r->dirty[--r->ndirty] : r->freep[--r->nfree];
		r->inuse++;
		goto out;
	}
	if (!r->base) {
		char *b = zmi_os_reserve(r->bytes, r->page);

		if (!b)
			goto out;
		r->next = b;
		__atomic_store_n(&r->base, b, __ATOMIC_RELEASE);
	}
	if (r->next == r->base + r->bytes)
		goto out;
	/* the free stack has room for every page cut so far: pushing one
	 * never allocates (zs_record_release) */
	if ((size_t)(r->next - r->base) / r->page + 1 > r->free_cap) {
		size_t cap = r->free_cap ? r->free_cap * 2 : 64;
		char **fp = realloc(r->freep, cap * sizeof(*fp)), **dp;

		if (!fp)
			goto out;
		r->freep = fp;
		if (!(dp = realloc(r->dirty, cap * sizeof(*dp))))
			goto out;
		r->dirty = dp;
		r->free_cap = cap;
	}
	pg = r->next;
	r->next += r->page;
	r->inuse++;
out:
	zmi_unlock(&r->lock);
	return (struct zs_rpage *)pg;
}

/* Empty record pages kept resident for the next records: 8, and an
 * eighth of the pages in use; beyond, they go back to the OS at once, and
 * all of them after compaction (zs_records_trim).  Kept so that a pool
 * filled, emptied and filled again does not fault each one back in
 * (docs/results/2026-12-02-code-choices.md). */
#define ZS_REC_KEEP 8

void zs_record_release(struct zs_pool *zp, void *page)
{
	struct zs_records *r = &zp->rec;
	bool keep;

	if (!page)
		return;
	zmi_lock(&r->lock);
	r->inuse--;
	keep = r->keep || r->ndirty < ZS_REC_KEEP + r->inuse / 8;
	if (keep)
		r->dirty[r->ndirty++] = page;
	zmi_unlock(&r->lock);
	if (keep)
		return;
	zmi_os_decommit(page, r->page);   /* reads as zero again */
	zmi_lock(&r->lock);
	r->freep[r->nfree++] = page;
	zmi_unlock(&r->lock);
}

/* Every empty record page kept resident back to the OS (unless the pages
 * instance keeps all its memory). */
static void zs_records_trim(struct zs_pool *zp)
{
	struct zs_records *r = &zp->rec;

	if (r->keep)
		return;
	for (;;) {
		char *pg = NULL;

		zmi_lock(&r->lock);
		if (r->ndirty)
			pg = r->dirty[--r->ndirty];
		zmi_unlock(&r->lock);
		if (!pg)
			break;
		zmi_os_decommit(pg, r->page);
		zmi_lock(&r->lock);
		r->freep[r->nfree++] = pg;
		zmi_unlock(&r->lock);
	}
}

static void avail_push(struct zs_rbucket *b, struct zs_rpage *pg)
{
	pg->prev = NULL;
	pg->next = b->avail;
	if (b->avail)
		b->avail->prev = pg;
	b->avail = pg;
	pg->avail = true;
}

static void avail_del(struct zs_rbucket *b, struct zs_rpage *pg)
{
	if (pg->prev)
		pg->prev->next = pg->next;
	else
		b->avail = pg->next;
	if (pg->next)
		pg->next->prev = pg->prev;
	pg->next = pg->prev = NULL;
	pg->avail = false;
}

/* A free slot of bucket bk, from its avail list or a new page; NULL
 * without memory.  b's lock held. */
static void *slot_get(struct zs_pool *zp, unsigned bk)
{
	struct zs_records *r = &zp->rec;
	struct zs_rbucket *b = bucket(zp, bk);
	struct zs_rpage *pg = b->avail;
	size_t rsz = rec_size(bk);
	unsigned w = 0, i;

	if (!pg) {
		unsigned n;

		if (!(pg = page_new(zp)))
			return NULL;
		n = (unsigned)((r->page - r->hdr) / rsz);
		pg->nslots = (uint16_t)n;
		pg->used = 0;
		pg->bucket = (uint8_t)bk;
		pg->draining = false;
		for (unsigned k = 0; k < n; k++)
			pg->freemap[k / 64] |= 1ull << (k % 64);
		zs_count(&b->npages, 1);
		avail_push(b, pg);
	}
	while (!pg->freemap[w])
		w++;
	i = w * 64 + (unsigned)__builtin_ctzll(pg->freemap[w]);
	pg->freemap[w] &= ~(1ull << (i % 64));
	pg->used++;
	b->used++;
	if (pg->used == pg->nslots)
		avail_del(b, pg);
	return (char *)pg + r->hdr + i * rsz;
}

/* Free the slot of rec in its page (b's lock held); the page if it is
 * left empty and should go back (no longer counted), else NULL.  An empty
 * page stays while its bucket has less than two pages of free slots in
 * all, so that a class making and dropping a zspage does not give back
 * and fault in a page each time; the compactor gives back the rest. */
static struct zs_rpage *slot_put(struct zs_pool *zp, struct zs_rbucket *b, void *rec)
{
	struct zs_rpage *pg = rpage_of(zp, rec);
	unsigned i = (unsigned)(((char *)rec - (char *)pg - zp->rec.hdr) / rec_size(pg->bucket));

	ZM_ASSERT(!(pg->freemap[i / 64] & (1ull << (i % 64))));
	pg->freemap[i / 64] |= 1ull << (i % 64);
	pg->used--;
	b->used--;
	if (pg->draining)
		return NULL;   /* the compactor's: it gives it back */
	if (!pg->used && (uint64_t)b->npages * pg->nslots - b->used > 2u * pg->nslots) {
		if (pg->avail)
			avail_del(b, pg);
		zs_count(&b->npages, -1);
		return pg;
	}
	if (!pg->avail)
		avail_push(b, pg);
	return NULL;
}

/* Does a new record of rsz bytes go to a page?  Once the pool's malloc'd
 * records would pass ZS_REC_FIRST pages, and from then on: a pool of a
 * few objects pays no page for each of its record sizes (a page's last
 * slots are empty on average half the time). */
static bool paged(struct zs_pool *zp, size_t rsz)
{
	struct zs_records *r = &zp->rec;
	size_t add = rsz + ZS_ALIGNED_ALLOC_COST;

	if (zmi_likely(__atomic_load_n(&r->paged, __ATOMIC_RELAXED)))
		return true;
	if (__atomic_add_fetch(&r->mallocd, add, __ATOMIC_RELAXED) <=
	    ZS_REC_FIRST * (r->page - r->hdr))
		return false;
	__atomic_store_n(&r->paged, true, __ATOMIC_RELAXED);
	return true;
}

struct zspage *zs_record_get(struct zs_pool *zp, struct zs_class *c)
{
	size_t rsz = zs_record_alloc_size(c);
	unsigned bk = bucket_no(zp, c);
	struct zs_rbucket *b;
	void *rec = NULL;

	if (zs_record_big(zp, c))
		return aligned_alloc(64, rsz);
	if (!(b = bucket_make(zp, bk)))
		return NULL;
	zmi_lock(&b->lock);
	if (paged(zp, rsz))
		rec = slot_get(zp, bk);
	if (!rec && (rec = aligned_alloc(64, rsz)))
		zs_count(&b->nmalloc, 1);
	zmi_unlock(&b->lock);
	return rec;
}

void *zs_record_put(struct zs_pool *zp, struct zs_class *c, struct zspage *zs)
{
	struct zs_rbucket *b;
	void *pg = NULL;

	if (zs_record_big(zp, c)) {
		free(zs);
		return NULL;
	}
	b = bucket(zp, bucket_no(zp, c));
	zmi_lock(&b->lock);
	if (in_pages(zp, zs)) {
		pg = slot_put(zp, b, zs);
	} else {
		zs_count(&b->nmalloc, -1);
		free(zs);
	}
	zmi_unlock(&b->lock);
	return pg;
}

void zs_record_forget(struct zs_pool *zp, struct zs_class *c, struct zspage *zs)
{
	if (zs && !in_pages(zp, zs))
		free(zs);
	(void)c;
}

uint64_t zs_record_bytes(struct zs_pool *zp)
{
	uint64_t n = 0;

	for (unsigned sh = 0; sh < ZS_MAX_SHARDS; sh++)
		if (__atomic_load_n(&zp->rec.b[sh], __ATOMIC_ACQUIRE))
			n += ZS_REC_BUCKETS * sizeof(struct zs_rbucket *);
	for (unsigned i = 0; i < ZS_NBUCKETS; i++) {
		struct zs_rbucket *b = bucket(zp, i);

		if (b)
			n += sizeof(*b) + (uint64_t)__atomic_load_n(&b->npages,
								    __ATOMIC_RELAXED) *
			     zp->rec.page + (uint64_t)__atomic_load_n(&b->nmalloc,
								      __ATOMIC_RELAXED) *
			     (rec_size(i) + ZS_ALIGNED_ALLOC_COST);
	}
	return n;
}

/* ---- compaction ------------------------------------------------------ */

static int by_used(const void *a, const void *b)
{
	const struct zs_rpage *x = *(struct zs_rpage *const *)a, *y = *(struct zs_rpage *const *)b;

	return (x->used > y->used) - (x->used < y->used);
}

/* The compactor's list of draining pages. */
struct drain {
	struct zs_rpage **v;
	size_t n, cap;
};

static size_t avail_count(struct zs_rbucket *b)
{
	size_t n = 0;

	for (struct zs_rpage *pg = b->avail; pg; pg = pg->next)
		n++;
	return n;
}

/* Mark the sparsest pages of bucket b draining (off the avail list) as
 * long as the other pages' free slots hold their records, and add them
 * to d.  The empty ones go back at the end (finish). */
static void plan_bucket(struct zs_rbucket *b, struct drain *d)
{
	struct zs_rpage **v = NULL;
	size_t n, room = 0, k;
	uint64_t free_slots = 0, moving = 0;

	/* room for the avail pages, made without the lock */
	for (;;) {
		zmi_lock(&b->lock);
		n = avail_count(b);
		if (n <= room)
			break;
		zmi_unlock(&b->lock);
		free(v);
		room = n + 8;
		v = malloc(room * sizeof(*v));
		if (v && d->cap - d->n < room) {
			struct zs_rpage **dv = realloc(d->v, (d->n + room) * sizeof(*dv));

			if (dv) {
				d->v = dv;
				d->cap = d->n + room;
			} else {
				free(v);
				v = NULL;
			}
		}
		if (!v)
			return;   /* without memory: this bucket another time */
	}
	if (!n) {  /* every page full: nothing to drain */
		zmi_unlock(&b->lock);
		free(v);
		return;
	}
	n = 0;
	for (struct zs_rpage *pg = b->avail; pg; pg = pg->next) {
		v[n++] = pg;
		free_slots += pg->nslots - pg->used;
	}
	qsort(v, n, sizeof(*v), by_used);
	for (k = 0; k < n; k++) {
		/* v[k] goes if the pages after it can take what is moving */
		uint64_t left = free_slots - (v[k]->nslots - v[k]->used);

		if (left < moving + v[k]->used)
			break;
		free_slots = left;
		moving += v[k]->used;
		avail_del(b, v[k]);
		v[k]->draining = true;
		d->v[d->n++] = v[k];
	}
	zmi_unlock(&b->lock);
	free(v);
}

static void set_migrating(struct zspage *zs, uint8_t v)
{
	__atomic_store_n(&zs->migrating, v, v ? __ATOMIC_SEQ_CST : __ATOMIC_RELEASE);
}

/* Should the compactor move zs (of class c, not big): it lies in a page
 * being drained, or it was malloc'd and its bucket has pages now. */
static inline bool to_move(const struct zs_pool *zp, const struct zs_class *c,
			   const struct zspage *zs)
{
	if (in_pages(zp, zs))
		return rpage_of(zp, zs)->draining;
	return __atomic_load_n(&bucket(zp, bucket_no(zp, c))->npages,
			       __ATOMIC_RELAXED) != 0;
}

/* Move class c's records out of draining pages (c's lock not held);
 * returns how many moved. */
static long move_class(struct zs_pool *zp, struct zs_class *c)
{
	long total = 0;

	for (;;) {
		struct zspage *batch[ZS_REC_BATCH], *old[ZS_REC_BATCH];
		unsigned nb = 0, no = 0;
		void *gone = NULL;

		zs_compact_lock(c);
		if (c->spare && to_move(zp, c, c->spare)) {
			/* a cache of one record: dropped, not moved */
			struct zspage *sp = c->spare;

			c->spare = NULL;
			zs_id_free(zp, c, sp->id);
			gone = zs_record_put(zp, c, sp);
		}
		for (unsigned g = 0; g < ZS_GROUPS && nb < ZS_REC_BATCH; g++)
			for (struct zspage *zs = c->group[g]; zs && nb < ZS_REC_BATCH;
			     zs = zs->next)
				if (!zs->migrating && to_move(zp, c, zs))
					batch[nb++] = zs;
		for (unsigned i = 0; i < nb; i++)
			set_migrating(batch[i], 1);
		zs_compact_unlock(c);
		zs_record_release(zp, gone);
		gone = NULL;
		if (!nb)
			break;
		zmi_pool_heavy_barrier();
		zs_compact_lock(c);
		for (unsigned i = 0, held = 0; i < nb; i++) {
			struct zspage *zs = batch[i], *nz = NULL;

			/* under one hold of the class lock as much as the object
			 * mover does (ZS_STEP_*): the batch stays marked while
			 * the lock is dropped between */
			if (held && (held >= ZS_STEP_OBJS ||
				     (held + 1) * zs_record_size(c) > ZS_STEP_BYTES)) {
				zs_compact_unlock(c);
				zs_compact_lock(c);
				held = 0;
			}
			held++;

			if (!zmi_pool_hazard_find(zs) && (nz = zs_record_get(zp, c)) &&
			    !in_pages(zp, nz)) {
				/* malloc'd again: no better (and no page to
				 * give back) */
				zs_record_put(zp, c, nz);
				nz = NULL;
			}
			if (!nz) {
				set_migrating(zs, 0);   /* mapped: left where it is */
				continue;
			}
			memcpy(nz, zs, zs_record_size(c));
			__atomic_store_n(&nz->migrating, 0, __ATOMIC_RELAXED);
			if (nz->prev)
				nz->prev->next = nz;
			else
				c->group[nz->group] = nz;
			if (nz->next)
				nz->next->prev = nz;
			/* a mixed class's open zspages are named by their records */
			for (unsigned f = 0; f < ZS_MIXED_OPEN; f++)
				if (c->front[f] == zs)
					c->front[f] = nz;
			if (c->hole == zs)
				c->hole = nz;
			if (c->mixed && zp->mhint[c->idx >> zp->cshift])
				for (unsigned b = 0; b < ZS_MHOLE_BINS; b++)
					if (zp->mhint[c->idx >> zp->cshift]->zs[b] == zs)
						zp->mhint[c->idx >> zp->cshift]->zs[b] = nz;
			__atomic_store_n(&zp->ztab[nz->id], (uintptr_t)nz, __ATOMIC_RELEASE);
			old[no++] = zs;
		}
		zs_compact_unlock(c);
		if (no) {
			/* no reader may still hold an old copy (it took the
			 * pointer before the publish: its ztab check fails) */
			zmi_pool_heavy_barrier();
			for (unsigned i = 0; i < no; i++)
				while (zmi_pool_hazard_find(old[i]))
					sched_yield();
			zs_compact_lock(c);
			for (unsigned i = 0; i < no; i++)
				zs_record_put(zp, c, old[i]);   /* draining: kept, or
								   malloc'd: freed */
			zs_compact_unlock(c);
		}
		total += no;
		zs_stat_add(&zp->records_moved, no);
		if (!no)
			break;  /* what is left is mapped: another time */
	}
	return total;
}

/* Draining pages: the empty ones go back, the others to their lists. */
static long finish(struct zs_pool *zp, struct drain *d)
{
	long freed = 0;

	for (size_t i = 0; i < d->n; i++) {
		struct zs_rpage *pg = d->v[i];
		struct zs_rbucket *b = bucket(zp, pg->bucket);
		bool empty;

		zmi_lock(&b->lock);
		pg->draining = false;
		empty = !pg->used;
		if (empty)
			zs_count(&b->npages, -1);
		else
			avail_push(b, pg);
		zmi_unlock(&b->lock);
		if (empty) {
			zs_record_release(zp, pg);
			freed++;
		}
	}
	return freed;
}

long zs_records_compact(struct zs_pool *zp)
{
	struct drain d = { NULL, 0, 0 };
	long freed;
	bool strays = false;

	for (unsigned i = 0; i < ZS_NBUCKETS; i++) {
		struct zs_rbucket *b = bucket(zp, i);

		if (!b)
			continue;
		if (__atomic_load_n(&b->npages, __ATOMIC_RELAXED))
			plan_bucket(b, &d);
		/* malloc'd records of a bucket that has pages: into them */
		zmi_lock(&b->lock);
		strays |= b->npages && b->nmalloc;
		zmi_unlock(&b->lock);
	}
	if (d.n || strays)
		ZS_FOR_EACH_CLASS_ALL(zp, c)
			if (!c->huge && !zs_record_big(zp, c))
				move_class(zp, c);
	freed = finish(zp, &d);
	free(d.v);
	return freed;
}

void zs_meta_compact(struct zs_pool *zp)
{
	/* a class left without zspages needs no spare record (with its id):
	 * after everything was freed they held a record page per size */
	ZS_FOR_EACH_CLASS_ALL(zp, c) {
		struct zspage *sp;
		void *gone = NULL;

		if (c->huge)
			continue;
		zs_compact_lock(c);
		sp = c->zspages ? NULL : c->spare;
		if (sp) {
			c->spare = NULL;
			zs_id_free(zp, c, sp->id);
			gone = zs_record_put(zp, c, sp);
		}
		zs_compact_unlock(c);
		zs_record_release(zp, gone);
	}
	zs_records_compact(zp);
	zs_records_trim(zp);
	zs_tables_trim(zp);
}
