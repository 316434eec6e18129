/*
 * zsmalloc statistics, the per-class table and the whole-structure
 * checker.
 *
 * Memory accounting, all-in:
 *   pool_bytes  pages held by zspages
 *   meta_bytes  handle slots handed out (8 bytes each, free ones included;
 *               none for objects bound to owner words, pool.h), zspage
 *               records (header, first pfn, 4-byte back references, as
 *               malloc rounds them; the pfn arrays of zspages not in one
 *               run) and their table entries (none for huge objects,
 *               zsmalloc/huge.c),
 *               the pages layer's 8-byte record of every page held (and its
 *               free-page bitsets, a quarter byte a page), and
 *               the classes made.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/zsmalloc/zsmalloc.h"

void zs_stats(struct zm_pool *pool, struct zm_pool_stats *st)
{
	struct zs_pool *zp = zs_of(pool);
	uint64_t pages = 0, meta = 0, rec = 0;
	unsigned nclass = 0;

	ZS_FOR_EACH_CLASS_ALL(zp, c) {
		nclass++;
		zmi_lock(&c->lock);
		st->objects += c->used;
		/* a mixed zspage's objects: their granules, headers included */
		st->slot_bytes += c->mixed ? zs_mixed_live(c) * ZS_GRANULE :
			(uint64_t)c->used * c->size;
		st->zspages += c->zspages;
		pages += c->npages;
		if (c->huge)
			st->huge_objects += c->used;  /* no records */
		else
			/* records in record pages: counted below, by page */
			rec += (zs_record_big(zp, c) ? ((uint64_t)c->zspages + !!c->spare) *
				(zs_record_alloc_size(c) + ZS_ALIGNED_ALLOC_COST) : 0) +
				(uint64_t)c->nsplit * zs_malloc_cost(c->pages * sizeof(zm_pfn_t));
		zmi_unlock(&c->lock);
	}
	st->pool_pages = pages;
	st->pool_bytes = pages * zp->page_size;
	/* the tables' entries handed to classes (the rest of each shard's
	 * span is address space never written); the spans read first: a
	 * span that takes more from its table in between then counts in
	 * full (over by at most a span), never the other way round */
	{
		uint64_t slots_unused = zs_span_unused(zp, zp->slot_span);
		uint64_t ids_unused = zs_span_unused(zp, zp->id_span);

		/* less the tables' pages given back (zs_tables_trim) */
		st->handle_bytes = ((uint64_t)__atomic_load_n(&zp->slots_used, __ATOMIC_RELAXED) -
				    slots_unused - zs_tfree_entries(&zp->slot_free)) *
				   sizeof(uint64_t);
		rec += ((uint64_t)__atomic_load_n(&zp->ids_used, __ATOMIC_RELAXED) -
			ids_unused - zs_tfree_entries(&zp->id_free)) * sizeof(uintptr_t);
	}
	rec += zs_record_bytes(zp);
	rec += __atomic_load_n(&zp->mholes_bytes, __ATOMIC_RELAXED);
	st->record_bytes = rec;
	st->pages_meta_bytes = ZM_PAGES_META_BYTES(pages);
	meta += st->handle_bytes + rec + st->pages_meta_bytes;
	for (unsigned sh = 0; sh < zp->nshards; sh++)
		if (__atomic_load_n(&zp->shard[sh], __ATOMIC_ACQUIRE))
			meta += (zp->nclasses + 1) * sizeof(struct zs_class *);
	meta += nclass * sizeof(struct zs_class) + (zp->nclasses + 1) * sizeof(struct zs_proto) +
		zp->nidx * sizeof(uint16_t) +
		sizeof(*zp);
	st->meta_bytes = meta;
	st->malloc_fail = __atomic_load_n(&zp->malloc_fail, __ATOMIC_RELAXED);
	/* without compact_lock (zs_stat_add): a running episode holds it */
	st->compactions = __atomic_load_n(&zp->compactions, __ATOMIC_RELAXED);
	st->pages_compacted = __atomic_load_n(&zp->pages_compacted, __ATOMIC_RELAXED);
	st->objects_moved = __atomic_load_n(&zp->objects_moved, __ATOMIC_RELAXED);
	st->compact_ns = __atomic_load_n(&zp->compact_ns, __ATOMIC_RELAXED);
}

int zs_class_stats(struct zm_pool *pool, unsigned idx, struct zm_pool_class_stats *cs)
{
	struct zs_pool *zp = zs_of(pool);
	uint64_t free_objs;

	if (idx >= zp->nclasses + zp->mixed)
		return -EINVAL;
	cs->size = zp->proto[idx].size;
	cs->pages_per_zspage = zp->proto[idx].pages;
	cs->objs_per_zspage = zp->proto[idx].objs;
	for (unsigned k = 0; k < zp->nshards; k++) {
		struct zs_class *c = idx == zp->nclasses ? zs_mixed_at(zp, k) :
				     zs_class_at(zp, (k << zp->cshift) + idx);

		if (!c)
			continue;
		zmi_lock(&c->lock);
		for (unsigned g = 0; g < ZS_GROUPS; g++)
			for (struct zspage *zs = c->group[g]; zs; zs = zs->next)
				cs->fullness[g]++;
		if (c->huge)  /* each object a full one-page zspage, no record */
			cs->fullness[ZS_GROUPS - 1] += c->zspages;
		cs->pages_used += c->npages;
		cs->obj_allocated += c->zspages * c->objs;
		/* the mixed row counts granules (of 8 bytes, its "size") */
		cs->obj_used += c->mixed ? zs_mixed_live(c) : c->used;
		zmi_unlock(&c->lock);
	}
	free_objs = cs->obj_allocated - cs->obj_used;
	/* zspages that compaction could empty: the free slots hold that many */
	cs->freeable = cs->objs_per_zspage ?
		       (free_objs / cs->objs_per_zspage) * cs->pages_per_zspage : 0;
	return 0;
}


#if ZM_DEBUG >= 2
/* Do the bytes of free object o of zs still hold zs_put_obj's poison? */
static bool poisoned(const struct zs_pool *zp, const struct zspage *zs, unsigned o)
{
	char *seg[2];
	size_t len[2];
	int n = zs_obj_segs(zp, zs, o, seg, len);

	for (int k = 0; k < n; k++)
		for (size_t b = 0; b < len[k]; b++)
			if ((unsigned char)seg[k][b] != 0x6b)
				return false;
	return true;
}
#endif

static int check_zspage(struct zs_pool *zp, struct zs_class *c, struct zspage *zs,
			unsigned g, uint8_t *seen)
{
	unsigned nfree = 0;
	int bad = 0;

#if ZM_DEBUG >= 1
	if (zs->magic != ZS_MAGIC)
		ZM_CHECK_FAIL("check: zspage %p of class %u has bad magic", (void *)zs, c->size);
#endif
	if (zs->group != g || zs_group_of(c, zs->inuse) != g)
		ZM_CHECK_FAIL("check: zspage %p in group %u with %u/%u used", (void *)zs, g,
		     zs->inuse, c->objs);
	if (zs->inuse == 0)
		ZM_CHECK_FAIL("check: empty zspage %p kept in class %u", (void *)zs, c->size);
	if (zs->bump > c->objs || zs->inuse > zs->bump)
		ZM_CHECK_FAIL("check: zspage %p bump %u inuse %u objs %u", (void *)zs, zs->bump,
		     zs->inuse, c->objs);
	if (zs_by_id(zp, zs->id) != zs)
		ZM_CHECK_FAIL("check: zspage %p: its id %u names another record", (void *)zs, zs->id);
	if (zs->npop > c->pages || (zs->bump && zs->npop !=
	    (unsigned)((((size_t)zs->bump) * c->size - 1) >> zp->shift) + 1))
		ZM_CHECK_FAIL("check: zspage %p: %u pages populated for bump %u", (void *)zs,
		     zs->npop, zs->bump);
	for (unsigned i = 0; i < c->objs; i++)
		seen[i] = i >= zs->bump;   /* never used: free */
	/* the whole chain even past a poison failure: stopping there left
	 * the rest of the free objects looking live, and named their links
	 * as handle slots that do not point back */
	for (unsigned o = zs->free_head; o != ZS_NONE; o = zs_backref(zs, c)[o]) {
		if (o >= zs->bump || seen[o]) {
			ZM_CHECK_FAIL("check: zspage %p free chain bad at object %u", (void *)zs, o);
			break;
		}
		seen[o] = 1;
		nfree++;
#if ZM_DEBUG >= 2
		if (!poisoned(zp, zs, o))
			ZM_CHECK_FAIL("check: free object %u of zspage %p (class %u) was "
				      "written after it was freed", o, (void *)zs, c->size);
#endif
	}
	if (nfree + zs->inuse != zs->bump)
		ZM_CHECK_FAIL("check: zspage %p: %u free in chain + %u used != bump %u",
		     (void *)zs, nfree, zs->inuse, zs->bump);
	for (unsigned o = 0; o < zs->bump; o++) {
		uint64_t v;

		if (seen[o])
			continue;
		v = zs_load_ref(zp, zs_backref(zs, c)[o]);
		if (!(v & 1) || zs_slot_id(v) != zs->id || zs_slot_obj(v) != o)
			ZM_CHECK_FAIL("check: object %u of zspage %p: handle slot %#x does not "
			     "point back", o, (void *)zs, zs_backref(zs, c)[o]);
	}
	return bad;
}

/* A mixed zspage: its headers walked from granule 0 to the bump, each
 * object live whose word names it, the counters against them, free
 * objects' bytes still poisoned. */
static int check_mixed(struct zs_pool *zp, struct zs_class *m, struct zspage *zs, unsigned g)
{
	unsigned objs = 0, placed = 0, at = 0, live = 0;
	uint64_t dead[(ZS_MIXED_MAX_GRANULES + 1) / 64];   /* free headers */
	const struct zs_mholes *mh = zs_mrec_of(zs)->ix;
	/* the largest class's slot: larger objects are huge */
	size_t max = zp->nclasses > 1 ? zp->proto[zp->nclasses - 2].size : zp->page_size;
	int bad = 0;

#if ZM_DEBUG >= 1
	if (zs->magic != ZS_MAGIC)
		ZM_CHECK_FAIL("check: mixed zspage %p has bad magic", (void *)zs);
#endif
	if (zs->group != g || zs_mixed_group_of(m, zs) != g)
		ZM_CHECK_FAIL("check: mixed zspage %p in group %u with %u of %u objects live",
			      (void *)zs, g, zs->inuse, zs->placed);
	if (zs->inuse == 0)
		ZM_CHECK_FAIL("check: empty mixed zspage %p kept", (void *)zs);
	if (zs->bump > m->objs || zs->inuse > zs->placed)
		ZM_CHECK_FAIL("check: mixed zspage %p bump %u of %u granules, %u of %u "
			      "objects live", (void *)zs, zs->bump, m->objs, zs->inuse, zs->placed);
	if (zs_by_id(zp, zs->id) != zs)
		ZM_CHECK_FAIL("check: zspage %p: its id %u names another record", (void *)zs, zs->id);
	if (zs->npop > m->pages || zs->npop != zs_pages_for(zp, m, zs->bump ? zs->bump : 1))
		ZM_CHECK_FAIL("check: mixed zspage %p: %u pages populated for bump %u",
			      (void *)zs, zs->npop, zs->bump);
	if (bad)
		return bad;   /* the walk below would read past its pages */
	memset(dead, 0, ((size_t)zs->bump + 64) / 64 * 8);
	while (at < zs->bump) {
		const struct zs_mhdr *hd = zs_mhdr(zp, zs, at);
		unsigned n = zs_mgran(hd->len);

		if (hd->len == 0 || hd->len > max || at + n > zs->bump ||
		    (!(hd->ref & ZS_REF_OWNER) ? hd->ref >= ZS_MAX_HANDLES :
		     (hd->ref & ~ZS_REF_OWNER) >= zp->nowner)) {
			ZM_CHECK_FAIL("check: mixed zspage %p: bad header at granule %u "
				      "(length %u, back reference %#x, bump %u)", (void *)zs, at,
				      hd->len, hd->ref, zs->bump);
			return bad;
		}
		placed++;
		if (zs_mhdr_live(zp, zs, hd, at)) {
			objs++;
			live += n;
		} else {
			dead[at / 64] |= 1ull << (at % 64);
#if ZM_DEBUG >= 2
			if (!poisoned(zp, zs, at))
				ZM_CHECK_FAIL("check: free object at granule %u of mixed zspage "
					      "%p was written after it was freed", at, (void *)zs);
#endif
		}
		at = zs_mnext(zp, at, hd->len);
	}
	if (objs != zs->inuse || placed != zs->placed || live != zs_mrec_of(zs)->live)
		ZM_CHECK_FAIL("check: mixed zspage %p: %u objects placed, %u live of %u "
			      "granules; counters %u/%u/%u", (void *)zs, placed, objs, live,
			      zs->placed, zs->inuse, zs_mrec_of(zs)->live);
	/* the hole index: each list's holes free headers, each once, each
	 * at least as long as its list's smallest (an allocation takes a
	 * list's head unseen) */
	for (unsigned b = 0; mh && b < ZS_MHOLE_BINS; b++) {
		unsigned n = 0;

		if (!(mh->mask >> b & 1))
			continue;
		for (unsigned h = mh->head[b]; h != ZS_NONE; h = zs_mhdr(zp, zs, h)->ref) {
			const struct zs_mhdr *hd;
			unsigned end;

			if (h >= zs->bump || !(dead[h / 64] >> (h % 64) & 1) || ++n > placed) {
				ZM_CHECK_FAIL("check: mixed zspage %p: hole list %u names granule "
					      "%u, not a free header", (void *)zs, b, h);
				break;
			}
			dead[h / 64] &= ~(1ull << (h % 64));   /* once */
			hd = zs_mhdr(zp, zs, h);
			end = zs_mnext(zp, h, hd->len);
			if ((end < zs->bump ? end : zs->bump) - h < zs_mhole_min(b))
				ZM_CHECK_FAIL("check: mixed zspage %p: hole at granule %u of %u "
					      "granules on list %u", (void *)zs, h,
					      (end < zs->bump ? end : zs->bump) - h, b);
		}
	}
	return bad;
}

/* A shard's mixed class: its zspages against its counters, its open
 * zspages among them. */
static int check_mixed_class(struct zs_pool *zp, struct zs_class *m)
{
	uint64_t n = 0, used = 0, gran = 0, nplaced = 0, pages = 0, split = 0;
	bool found[ZS_MIXED_OPEN];
	int bad = 0;

	for (unsigned i = 0; i < ZS_MIXED_OPEN; i++) {
		found[i] = !m->front[i];
		for (unsigned k = 0; k < i; k++)
			if (m->front[i] && m->front[i] == m->front[k])
				ZM_CHECK_FAIL("check: mixed class: zspage %p open twice",
					      (void *)m->front[i]);
	}
	for (unsigned g = 0; g < ZS_GROUPS; g++) {
		for (struct zspage *zs = m->group[g]; zs; zs = zs->next) {
			if (zs->next && zs->next->prev != zs)
				ZM_CHECK_FAIL("check: mixed class group %u: broken links", g);
			if (check_mixed(zp, m, zs, g))
				bad = 1;
			for (unsigned i = 0; i < ZS_MIXED_OPEN; i++)
				found[i] |= zs == m->front[i];
			used += zs->inuse;
			gran += zs->bump;
			nplaced += zs->placed;
			pages += zs->npop;
			split += zs->pfnx != NULL;
			n++;
		}
		if (!!m->group[g] != !!(m->gmask & (1u << g)))
			ZM_CHECK_FAIL("check: mixed class group %u: bitmap says %d", g,
				      !!(m->gmask & (1u << g)));
	}
	for (unsigned i = 0; i < ZS_MIXED_OPEN; i++)
		if (!found[i])
			ZM_CHECK_FAIL("check: mixed class: open zspage %p is on no list",
				      (void *)m->front[i]);
	if (split != m->nsplit)
		ZM_CHECK_FAIL("check: mixed class: %llu zspages with pfn arrays, counter %u",
			      (unsigned long long)split, m->nsplit);
	if (n != m->zspages || used != m->used || gran != m->mgran || nplaced != m->mplaced ||
	    pages != m->npages)
		ZM_CHECK_FAIL("check: mixed class: %llu zspages/%llu used/%llu granules/%llu "
			      "placed/%llu pages, counters %u/%u/%u/%u/%u", (unsigned long long)n,
			      (unsigned long long)used, (unsigned long long)gran,
			      (unsigned long long)nplaced, (unsigned long long)pages, m->zspages,
			      m->used, m->mgran, m->mplaced, m->npages);
	return bad;
}

/* The zspages of class c on its fullness lists, against its counters. */
static int check_class(struct zs_pool *zp, struct zs_class *c, uint8_t *seen)
{
	uint64_t n = 0, used = 0, pages = 0, split = 0;
	int bad = 0;

	for (unsigned g = 0; g < ZS_GROUPS; g++) {
		for (struct zspage *zs = c->group[g]; zs; zs = zs->next) {
			if (zs->next && zs->next->prev != zs)
				ZM_CHECK_FAIL("check: class %u group %u: broken links", c->size, g);
			if (check_zspage(zp, c, zs, g, seen))
				bad = 1;
			used += zs->inuse;
			pages += zs->npop;
			split += zs->pfnx != NULL;
			n++;
		}
		if (!!c->group[g] != !!(c->gmask & (1u << g)))
			ZM_CHECK_FAIL("check: class %u group %u: bitmap says %d", c->size, g,
			     !!(c->gmask & (1u << g)));
	}
	if (split != c->nsplit)
		ZM_CHECK_FAIL("check: class %u: %llu zspages with pfn arrays, counter %u",
			      c->size, (unsigned long long)split, c->nsplit);
	if (n != c->zspages || used != c->used || pages != c->npages)
		ZM_CHECK_FAIL("check: class %u: %llu zspages/%llu used, counters %llu/%llu",
		     c->size, (unsigned long long)n, (unsigned long long)used,
		     (unsigned long long)c->zspages, (unsigned long long)c->used);
	return bad;
}

/* The class's free handle slots are free. */
static int check_free_slots(struct zs_pool *zp, struct zs_class *c)
{
	uint32_t s = c->free_slots;
	int bad = 0;

	for (uint32_t k = 0; k < c->nfree_slots; k++) {
		uint64_t v = zs_load_slot(zp, s);

		if (v & 1) {
			ZM_CHECK_FAIL("check: class %u: free handle slot %u is live", c->size, s);
			break;
		}
		s = (uint32_t)(v >> 32);
	}
	return bad;
}

int zs_check(struct zm_pool *pool)
{
	struct zs_pool *zp = zs_of(pool);
	uint8_t *seen = malloc(65536);
	struct zm_pages_stats ps;
	uint64_t *pfns;
	int bad = 0;

	zm_pages_stats(zp->pages, &ps);
	pfns = calloc(ps.total_pages / 64 + 1, sizeof(*pfns));
	if (!seen || !pfns) {
		free(seen);
		free(pfns);
		return -ENOMEM;
	}
	ZS_FOR_EACH_CLASS_ALL(zp, c) {
		zmi_lock(&c->lock);
		if (c->mixed ? check_mixed_class(zp, c) :
		    c->huge ? zs_huge_check(zp, c, pfns, ps.total_pages) :
			      check_class(zp, c, seen))
			bad = 1;
		if (check_free_slots(zp, c))
			bad = 1;
		zmi_unlock(&c->lock);
	}
	free(seen);
	free(pfns);
	return bad ? -EUCLEAN : 0;
}
