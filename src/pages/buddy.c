/*
 * The buddy allocator: free blocks of 2^order pages on per-order lists.
 *
 * A block of order k starts at a pfn that is a multiple of 2^k; its buddy is
 * the block at pfn ^ 2^k.  Freeing merges a block with its buddy while the
 * buddy is a free block of the same order.  Each order has two lists:
 * blocks that may hold resident ("dirty") pages and blocks known to be
 * given back to the OS ("clean").  Allocation prefers dirty blocks, which
 * are already backed by memory; trimming takes dirty blocks, gives their
 * memory back and returns them as clean.  Every free page carries an exact
 * PG_DIRTY flag, so that nr_dirty_free (the resident reserve) is exact;
 * the block flag is a conservative hint for finding them.
 *
 * Lists: see struct zmi_pages_pg (a link a page; single pages in bitsets).
 *
 * Every function here works in one zone (pages_internal.h), with its lock
 * held, but the bitsets' alloc and free.  The bitsets number a zone's
 * pages from its start.
 */
#include <string.h>

#include "base/os.h"
#include "pages/pages_internal.h"

/* ---- the sets of free single pages ---------------------------------- */

int zmi_pages_bitset_alloc(struct zmi_pages_bitset *b, uint32_t nbits)
{
	size_t os_page = zmi_os_page_size();
	size_t words = ((size_t)nbits + 63) / 64;

	b->nsum = (uint32_t)((words + 63) / 64);
	b->w_bytes = (words * sizeof(uint64_t) + os_page - 1) / os_page * os_page;
	b->sum_bytes = (b->nsum * sizeof(uint64_t) + os_page - 1) / os_page * os_page;
	b->w = zmi_os_reserve(b->w_bytes, os_page);
	b->sum = zmi_os_reserve(b->sum_bytes, os_page);
	b->lo = 0;
	if (!b->w || !b->sum) {
		zmi_pages_bitset_free(b);
		return -1;
	}
	return 0;
}

void zmi_pages_bitset_free(struct zmi_pages_bitset *b)
{
	if (b->w)
		zmi_os_release(b->w, b->w_bytes);
	if (b->sum)
		zmi_os_release(b->sum, b->sum_bytes);
	b->w = b->sum = NULL;
}

static void bitset_add(struct zmi_pages_bitset *b, zm_pfn_t pfn)
{
	uint32_t i = pfn / 64;

	b->w[i] |= 1ull << (pfn % 64);
	b->sum[i / 64] |= 1ull << (i % 64);
	if (i / 64 < b->lo)
		b->lo = i / 64;
}

static void bitset_del(struct zmi_pages_bitset *b, zm_pfn_t pfn)
{
	uint32_t i = pfn / 64;

	b->w[i] &= ~(1ull << (pfn % 64));
	if (!b->w[i])
		b->sum[i / 64] &= ~(1ull << (i % 64));
}

/* The lowest pfn in b: single pages are handed out lowest first, which
 * packs the pool toward the arena's start. */
static zm_pfn_t bitset_first(struct zmi_pages_bitset *b)
{
	for (; b->lo < b->nsum; b->lo++) {
		uint64_t s = b->sum[b->lo];

		if (s) {
			uint32_t i = b->lo * 64 + (uint32_t)__builtin_ctzll(s);

			return i * 64 + (uint32_t)__builtin_ctzll(b->w[i]);
		}
	}
	return ZM_PFN_NIL;
}

static zm_pfn_t bitset_next(const struct zmi_pages_bitset *b, zm_pfn_t pfn)
{
	uint32_t i = (pfn + 1) / 64;
	uint64_t w;

	if (pfn + 1 == 0 || i / 64 >= b->nsum)
		return ZM_PFN_NIL;
	w = b->w[i] & (~0ull << ((pfn + 1) % 64));
	while (!w) {
		/* the next non-zero word, by the summary */
		uint32_t s = (i + 1) / 64;
		uint64_t m;

		if (s >= b->nsum)
			return ZM_PFN_NIL;
		m = b->sum[s] & (~0ull << ((i + 1) % 64));
		while (!m) {
			if (++s >= b->nsum)
				return ZM_PFN_NIL;
			m = b->sum[s];
		}
		i = s * 64 + (uint32_t)__builtin_ctzll(m);
		w = b->w[i];
	}
	return i * 64 + (uint32_t)__builtin_ctzll(w);
}

/* ---- free lists ------------------------------------------------------ */

zm_pfn_t zmi_pages_buddy_first(struct zmi_pages_zone *z, unsigned order, int dirty)
{
	zm_pfn_t i;

	if (order)
		return z->area[order][dirty].head;
	i = bitset_first(&z->free0[dirty]);
	return i == ZM_PFN_NIL ? ZM_PFN_NIL : z->start + i;
}

zm_pfn_t zmi_pages_zone_next_single(const struct zmi_pages_zone *z, int d, zm_pfn_t pfn)
{
	zm_pfn_t i = bitset_next(&z->free0[d], pfn - z->start);

	return i == ZM_PFN_NIL ? ZM_PFN_NIL : z->start + i;
}

static void list_add(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn, unsigned order,
		     int dirty)
{
	struct zmi_pages_free_list *l = &z->area[order][dirty];
	struct zmi_pages_pg *pg = zmi_pages_pg_of(p, pfn);

	pg->state = PG_FREE_HEAD;
	pg->order = (uint8_t)order;
	pg->flags = (uint8_t)((pg->flags & PG_DIRTY) | (dirty ? PG_BLK_DIRTY : 0));
	if (order == 0) {
		bitset_add(&z->free0[dirty], pfn - z->start);
	} else {
		pg->link = l->head;
		zmi_pages_pg_of(p, pfn + 1)->link = ZM_PFN_NIL;
		if (l->head != ZM_PFN_NIL)
			zmi_pages_pg_of(p, l->head + 1)->link = pfn;
		l->head = pfn;
	}
	l->count++;
	z->nonempty |= 1u << (order * 2 + dirty);
}

static void list_del(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn)
{
	struct zmi_pages_pg *pg = zmi_pages_pg_of(p, pfn);
	int dirty = !!(pg->flags & PG_BLK_DIRTY);
	struct zmi_pages_free_list *l = &z->area[pg->order][dirty];

	ZM_ASSERT(pg->state == PG_FREE_HEAD && l->count > 0);
	if (pg->order == 0) {
		bitset_del(&z->free0[dirty], pfn - z->start);
	} else {
		zm_pfn_t next = pg->link, prev = zmi_pages_pg_of(p, pfn + 1)->link;

		if (prev != ZM_PFN_NIL)
			zmi_pages_pg_of(p, prev)->link = next;
		else
			l->head = next;
		if (next != ZM_PFN_NIL)
			zmi_pages_pg_of(p, next + 1)->link = prev;
	}
	if (--l->count == 0)
		z->nonempty &= ~(1u << (pg->order * 2 + dirty));
	pg->flags &= (uint8_t)~PG_BLK_DIRTY;
}

void zmi_pages_buddy_init(struct zm_pages *p, struct zmi_pages_zone *z)
{
	for (unsigned k = 0; k <= ZM_PAGES_MAX_ORDER; k++)
		for (int d = 0; d < 2; d++)
			z->area[k][d] = (struct zmi_pages_free_list){ ZM_PFN_NIL, 0 };
	z->nonempty = 0;
	/* every page free, none on a list yet: zone_grow puts them there */
	z->grow = z->start;
	z->nr_free = z->end - z->start;
}

/* Put the next block beyond the frontier on the clean lists: the largest
 * aligned one that fits (the largest order but at the zone's end).  Its
 * head's record is the first written in that block: the records of an
 * arena the process never used are never touched (a record line per
 * block; writing them all at create cost 4 MiB of a 4 GiB arena).  Zones
 * start on a boundary of the largest order, and the frontier moves by the
 * same blocks the lists would have held from the start, so a block below
 * it never has its buddy above it.  false when nothing is left. */
static bool frontier_grow(struct zm_pages *p, struct zmi_pages_zone *z)
{
	zm_pfn_t pfn = z->grow;
	unsigned k = ZM_PAGES_MAX_ORDER;

	if (pfn >= z->end)
		return false;
	while ((pfn & ((1u << k) - 1)) || (uint64_t)pfn + (1u << k) > z->end)
		k--;
	list_add(p, z, pfn, k, 0);
	z->grow = pfn + (1u << k);
	return true;
}

/* ---- bare blocks: free largest-order blocks whose records went back ---- */

static inline uint32_t bare_index(const struct zmi_pages_zone *z, zm_pfn_t pfn)
{
	return (pfn - z->start) >> ZM_PAGES_MAX_ORDER;
}

static inline bool is_bare(const struct zmi_pages_zone *z, zm_pfn_t pfn)
{
	uint32_t i = bare_index(z, pfn);

	return z->nbare && (z->bare[i / 64] >> (i % 64) & 1);
}

/* Bare block i back on the clean lists (its head's record written). */
static void bare_list(struct zm_pages *p, struct zmi_pages_zone *z, uint32_t i)
{
	z->bare[i / 64] &= ~(1ull << (i % 64));
	z->nbare--;
	list_add(p, z, z->start + ((zm_pfn_t)i << ZM_PAGES_MAX_ORDER), ZM_PAGES_MAX_ORDER, 0);
}

size_t zmi_pages_buddy_bare_take(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t *out,
				 size_t nout)
{
	size_t n = 0;

	while (n < nout && z->area[ZM_PAGES_MAX_ORDER][0].count) {
		zm_pfn_t pfn = zmi_pages_buddy_first(z, ZM_PAGES_MAX_ORDER, 0);

		list_del(p, z, pfn);
		zmi_pages_pg_of(p, pfn)->state = PG_ISOLATED;
		z->nr_free -= 1u << ZM_PAGES_MAX_ORDER;
		z->nr_isolated += 1u << ZM_PAGES_MAX_ORDER;
		out[n++] = pfn;
	}
	return n;
}

void zmi_pages_buddy_bare_set(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn,
			      bool zeroed)
{
	uint32_t i = bare_index(z, pfn);

	/* its records read zero again (or were never resident): a free tail
	 * each, like the pages beyond the frontier */
	/* zero where its record page went back (written, it would come back;
	 * even read, it maps the zero page, which mincore counts) */
	if (!zeroed)
		zmi_pages_pg_of(p, pfn)->word = 0;
	z->bare[i / 64] |= 1ull << (i % 64);
	z->nbare++;
	z->nr_isolated -= 1u << ZM_PAGES_MAX_ORDER;
	z->nr_free += 1u << ZM_PAGES_MAX_ORDER;
}

/* A block onto the lists when none is large enough there: a bare one
 * first (the lowest: memory the process used before), else the next
 * beyond the frontier. */
static bool zone_grow(struct zm_pages *p, struct zmi_pages_zone *z)
{
	if (z->nbare) {
		for (uint32_t w = 0;; w++)
			if (z->bare[w]) {
				bare_list(p, z, w * 64 + (uint32_t)__builtin_ctzll(z->bare[w]));
				return true;
			}
	}
	return frontier_grow(p, z);
}

/* Could a block of order >= order be found (on the lists, or grown)? */
static inline bool have_block(const struct zmi_pages_zone *z, unsigned order)
{
	return (z->nonempty >> (order * 2)) || z->nbare || z->grow < z->end;
}

/* n pages of z left the buddy (in nr_out already, if limited). */
static void taken(struct zmi_pages_zone *z, size_t n)
{
	size_t resident;

	z->nr_free -= n;
	zmi_pages_zone_add(&z->out, (long)n);
	resident = z->out + z->nr_dirty_free;
	/* read without the lock too (tcache.c: prefault_ahead) */
	if (resident > z->resident_max)
		__atomic_store_n(&z->resident_max, resident, __ATOMIC_RELAXED);
	/* the demand window (zmi_pages_zone_demand), looked at once every 256
	 * pages taken: a clock read on every bulk call cost it a third
	 * (pagebench, batches of 16); a zone taking fewer has no demand
	 * worth keeping */
	__atomic_store_n(&z->taken_total, z->taken_total + n, __ATOMIC_RELAXED);
	if ((z->taken_total - n) >> 8 != z->taken_total >> 8) {
		uint64_t now = zmi_pages_now();

		if (now - z->win_start_ns >= ZM_DEMAND_MS * 1000000ull) {
			__atomic_store_n(&z->demand, z->taken_total - z->win_taken0,
					 __ATOMIC_RELAXED);
			__atomic_store_n(&z->win_taken0, z->taken_total, __ATOMIC_RELAXED);
			__atomic_store_n(&z->win_start_ns, now, __ATOMIC_RELAXED);
		}
	}
}

bool zmi_pages_out_reserve(struct zm_pages *p, size_t n)
{
	size_t out;

	if (!p->limited)
		return true;
	out = __atomic_load_n(&p->nr_out, __ATOMIC_RELAXED);

	do {
		if (out + n > p->limit)
			return false;
	} while (!__atomic_compare_exchange_n(&p->nr_out, &out, out + n, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return true;
}

size_t zmi_pages_out_reserve_upto(struct zm_pages *p, size_t n)
{
	size_t out, k;

	if (!p->limited)
		return n;
	out = __atomic_load_n(&p->nr_out, __ATOMIC_RELAXED);

	do {
		k = out >= p->limit ? 0 : p->limit - out < n ? p->limit - out : n;
		if (!k)
			return 0;
	} while (!__atomic_compare_exchange_n(&p->nr_out, &out, out + k, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return k;
}

/* Smallest free block of order >= order, a dirty one first at each order;
 * removed from its list.  ZM_PFN_NIL if none.  The bitmap of non-empty
 * lists makes this one count-trailing-zeros instead of a scan. */
static zm_pfn_t find_block(struct zm_pages *p, struct zmi_pages_zone *z, unsigned order,
			   unsigned *found)
{
	uint32_t mask = z->nonempty >> (order * 2);
	unsigned bit, k, d;
	zm_pfn_t pfn;

	/* none that large on the lists: from beyond the frontier */
	while (!mask) {
		if (!zone_grow(p, z))
			return ZM_PFN_NIL;
		mask = z->nonempty >> (order * 2);
	}
	bit = (unsigned)__builtin_ctz(mask);
	k = order + bit / 2;
	/* at order k prefer the dirty list (bit 1) if it is non-empty */
	d = (mask >> (bit & ~1u)) & 2u ? 1 : 0;
	pfn = zmi_pages_buddy_first(z, k, (int)d);
	list_del(p, z, pfn);
	zmi_pages_pg_of(p, pfn)->flags |= (uint8_t)(d ? PG_BLK_DIRTY : 0);
	*found = k;
	return pfn;
}

/* Smallest dirty free block of order >= order, removed from its list;
 * ZM_PFN_NIL if none. */
static zm_pfn_t find_dirty_block(struct zm_pages *p, struct zmi_pages_zone *z, unsigned order,
				 unsigned *found)
{
	uint32_t mask = (z->nonempty & 0xAAAAAAAAu) >> (order * 2);
	zm_pfn_t pfn;

	if (!mask)
		return ZM_PFN_NIL;
	*found = order + (unsigned)__builtin_ctz(mask) / 2;
	pfn = zmi_pages_buddy_first(z, *found, 1);
	list_del(p, z, pfn);
	zmi_pages_pg_of(p, pfn)->flags |= PG_BLK_DIRTY;
	return pfn;
}

/* Split block [pfn, 2^k) down to order want, returning the upper halves to
 * the lists with the block's dirty hint. */
static void split(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn, unsigned k,
		  unsigned want)
{
	int dirty = !!(zmi_pages_pg_of(p, pfn)->flags & PG_BLK_DIRTY);

	while (k > want) {
		k--;
		list_add(p, z, pfn + (1u << k), k, dirty);
	}
	zmi_pages_pg_of(p, pfn)->flags &= (uint8_t)~PG_BLK_DIRTY;
}

/* Mark n pages from pfn as leaving the buddy in state st (order 0; for
 * PG_CACHED, PG_RESIDENT on those that were dirty), write
 * their pfns to out[] if out is not NULL; returns how many were dirty.
 * Works on locals only: byte stores through pg may alias anything, so
 * touching p->... in this loop would force reloads on every page. */
static size_t pages_out(struct zmi_pages_pg *pgs, zm_pfn_t pfn, uint32_t n, uint8_t st,
			zm_pfn_t *out)
{
	const uint32_t w = zmi_pages_pg_word(st);
	struct zmi_pages_pg *g = &pgs[pfn];
	size_t dirty = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint8_t d = g[i].flags & PG_DIRTY;

		dirty += d;
		g[i].word = w;
		/* a page for a thread's cache keeps "resident" (tcache.c) */
		if (st == PG_CACHED && d)
			g[i].flags = PG_RESIDENT;
	}
	if (out)
		for (uint32_t i = 0; i < n; i++)
			out[i] = pfn + i;
	return dirty;
}

zm_pfn_t zmi_pages_buddy_take_block(struct zm_pages *p, struct zmi_pages_zone *z, unsigned order,
				    bool *limited)
{
	unsigned k;
	zm_pfn_t pfn;

	/* a block first, then the limit: a reservation made for a zone
	 * that then has nothing is a moment in which another zone's
	 * taker sees the limit reached */
	if (!have_block(z, order))
		return ZM_PFN_NIL;
	if (!zmi_pages_out_reserve(p, (size_t)1 << order)) {
		z->limit_failures++;
		*limited = true;
		return ZM_PFN_NIL;
	}
	pfn = find_block(p, z, order, &k);
	if (pfn == ZM_PFN_NIL) {
		zmi_pages_out_release(p, (size_t)1 << order);
		return ZM_PFN_NIL;
	}
	split(p, z, pfn, k, order);
	zmi_pages_zone_add(&z->nr_dirty_free,
			   -(long)pages_out(p->pg, pfn, 1u << order, PG_ALLOC_TAIL, NULL));
	zmi_pages_pg_of(p, pfn)->state = PG_ALLOC;
	zmi_pages_pg_of(p, pfn)->order = (uint8_t)order;
	taken(z, (size_t)1 << order);
	return pfn;
}

size_t zmi_pages_buddy_take_pages(struct zm_pages *p, struct zmi_pages_zone *z, size_t n,
				  zm_pfn_t *out, uint8_t state, size_t *dirty, bool *limited)
{
	size_t got = 0, d = 0, cap, allowed;

	*dirty = 0;
	if (!z->nr_free)
		return 0;  /* dry: the caller tries the next zone */
	/* no more than the zone has (see zmi_pages_buddy_take_block) */
	cap = n < z->nr_free ? n : z->nr_free;
	allowed = zmi_pages_out_reserve_upto(p, cap);
	if (!allowed)
		z->limit_failures++;  /* refused; a smaller refill is not */
	while (got < allowed) {
		/* a whole line of page records while 8 or more pages are
		 * wanted: the thread that gets them writes their records
		 * without the lock (tcache.c), and two threads whose pages
		 * share a line of records would pass it back and forth on
		 * every page they take or give */
		unsigned k, want = 0,
			 line = allowed - got >= ZM_PG_PER_LINE ? ZM_PG_LINE_ORDER : 0;
		/* resident memory first, from any block: a clean page costs a
		 * page fault and a page more of the process's memory, while
		 * the dirty ones wait to be trimmed */
		zm_pfn_t pfn = find_dirty_block(p, z, line, &k);

		if (pfn == ZM_PFN_NIL && line)
			pfn = find_dirty_block(p, z, 0, &k);
		if (pfn == ZM_PFN_NIL)
			pfn = find_block(p, z, line, &k);
		if (pfn == ZM_PFN_NIL && line)
			pfn = find_block(p, z, 0, &k);

		if (pfn == ZM_PFN_NIL)
			break;
		/* Use the whole block if it fits, else the largest aligned
		 * part of it that does; the rest goes back to the lists. */
		while (want < k && ((size_t)2 << want) <= allowed - got)
			want++;
		split(p, z, pfn, k, want);
		d += pages_out(p->pg, pfn, 1u << want, state, out + got);
		got += 1u << want;
	}
	/* cut short by the limit (not by the zone running dry: then the
	 * caller tries the next zone) */
	if (allowed < cap && got == allowed)
		*limited = true;
	if (got < allowed)
		zmi_pages_out_release(p, allowed - got);
	zmi_pages_zone_add(&z->nr_dirty_free, -(long)d);
	*dirty = d;
	taken(z, got);
	return got;
}

void zmi_pages_buddy_give(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn,
			  unsigned order, bool dirty)
{
	uint32_t n = 1u << order;
	int blk_dirty = dirty;

	ZM_ASSERT(pfn >= z->start && pfn + n <= z->end);
	for (uint32_t i = 0; i < n; i++) {
		struct zmi_pages_pg *pg = zmi_pages_pg_of(p, pfn + i);

		pg->state = PG_FREE_TAIL;
		pg->order = 0;
		pg->flags = dirty ? PG_DIRTY : 0;
	}
	if (dirty)
		zmi_pages_zone_add(&z->nr_dirty_free, n);
	z->nr_free += n;

	while (order < ZM_PAGES_MAX_ORDER) {
		zm_pfn_t buddy = pfn ^ (1u << order);
		struct zmi_pages_pg *b;

		if (buddy >= z->end || buddy < z->start)
			break;
		b = zmi_pages_pg_of(p, buddy);
		if (zmi_pages_pg_state(b) != PG_FREE_HEAD || b->order != order)
			break;
		blk_dirty |= !!(b->flags & PG_BLK_DIRTY);
		list_del(p, z, buddy);
		b->state = PG_FREE_TAIL;
		b->order = 0;
		if (buddy < pfn)
			pfn = buddy;
		order++;
	}
	list_add(p, z, pfn, order, blk_dirty);
}

size_t zmi_pages_buddy_isolate_dirty(struct zm_pages *p, struct zmi_pages_zone *z, size_t max,
				     zm_pfn_t *out, size_t nout, size_t *cleaned_all)
{
	size_t pages = 0, nblk = 0;

	*cleaned_all = 0;
	/* Largest blocks first: fewest madvise calls, and the small dirty
	 * blocks are the ones allocation reuses first. */
	for (int k = ZM_PAGES_MAX_ORDER; k >= 0 && nblk < nout; k--) {
		while (nblk < nout && z->area[k][1].count) {
			zm_pfn_t pfn = zmi_pages_buddy_first(z, (unsigned)k, 1);
			unsigned order = (unsigned)k;
			uint32_t n, cleaned;

			list_del(p, z, pfn);
			/* a block larger than what is left to give back: keep
			 * the half with fewer dirty pages on the lists */
			while (order > 0 && (1u << order) > max - pages) {
				uint32_t half = 1u << --order, lo = 0, hi = 0;

				for (uint32_t i = 0; i < half; i++) {
					lo += zmi_pages_pg_of(p, pfn + i)->flags & PG_DIRTY;
					hi += zmi_pages_pg_of(p, pfn + half + i)->flags & PG_DIRTY;
				}
				if (hi > lo) {
					list_add(p, z, pfn, order, lo != 0);
					pfn += half;
				} else {
					list_add(p, z, pfn + half, order, hi != 0);
				}
			}
			n = 1u << order;
			zmi_pages_pg_of(p, pfn)->order = (uint8_t)order;
			cleaned = 0;
			for (uint32_t i = 0; i < n; i++) {
				struct zmi_pages_pg *pg = zmi_pages_pg_of(p, pfn + i);

				cleaned += pg->flags & PG_DIRTY;
				pg->flags &= (uint8_t)~PG_DIRTY;
			}
			zmi_pages_zone_add(&z->nr_dirty_free, -(long)cleaned);
			*cleaned_all += cleaned;
			zmi_pages_pg_of(p, pfn)->state = PG_ISOLATED;
			z->nr_free -= n;
			z->nr_isolated += n;
			out[nblk++] = pfn;
			pages += n;
			if (pages >= max)
				return nblk;
			if (order < (unsigned)k)
				break;  /* split: the rest of this order is smaller work */
		}
	}
	return nblk;
}

size_t zmi_pages_buddy_isolate_clean(struct zm_pages *p, struct zmi_pages_zone *z, size_t max,
				     unsigned min_order, zm_pfn_t *out, size_t nout)
{
	size_t pages = 0, nblk = 0;

	/* Smallest blocks of min_order or more first, so that the largest
	 * stay whole for the trims' bare blocks; beyond them the frontier
	 * and the bare blocks (clean, their records not written yet). */
	for (unsigned k = min_order; k <= ZM_PAGES_MAX_ORDER && nblk < nout && pages < max;) {
		zm_pfn_t pfn;
		unsigned order = k;

		if (!z->area[k][0].count) {
			if (k < ZM_PAGES_MAX_ORDER)
				k++;
			else if (zone_grow(p, z))
				k = min_order;  /* the frontier's last block may be smaller */
			else
				break;
			continue;
		}
		pfn = zmi_pages_buddy_first(z, k, 0);
		list_del(p, z, pfn);
		/* no more than is asked for, rounded up to a block of
		 * min_order */
		while (order > min_order && (1u << order) > max - pages) {
			order--;
			list_add(p, z, pfn + (1u << order), order, 0);
		}
		zmi_pages_pg_of(p, pfn)->order = (uint8_t)order;
		zmi_pages_pg_of(p, pfn)->state = PG_ISOLATED;
		z->nr_free -= 1u << order;
		z->nr_isolated += 1u << order;
		out[nblk++] = pfn;
		pages += 1u << order;
	}
	return nblk;
}

zm_pfn_t zmi_pages_buddy_take_at(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn,
				 bool resident_only, bool *dirty, bool *limited)
{
	return zmi_pages_buddy_take_at_as(p, z, pfn, resident_only, PG_ALLOC, dirty, limited);
}

zm_pfn_t zmi_pages_buddy_take_at_as(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn,
				    bool resident_only, uint8_t state, bool *dirty, bool *limited)
{
	zm_pfn_t head = ZM_PFN_NIL;
	unsigned k, order = 0;

	/* pages beyond the frontier and of bare blocks are clean */
	if (resident_only && (pfn >= z->grow || is_bare(z, pfn)))
		return ZM_PFN_NIL;
	/* a page of a bare block or beyond the frontier: its block onto the
	 * lists first */
	if (pfn < z->grow && is_bare(z, pfn))
		bare_list(p, z, bare_index(z, pfn));
	while (pfn >= z->grow && frontier_grow(p, z))
		;
	/* the free block containing pfn, if any: its head is pfn rounded
	 * down to some order k, and its order reaches past pfn */
	for (k = 0; k <= ZM_PAGES_MAX_ORDER; k++) {
		zm_pfn_t h = pfn & ~((1u << k) - 1);
		struct zmi_pages_pg *g;

		if (h < z->start)
			break;
		g = zmi_pages_pg_of(p, h);

		if (zmi_pages_pg_state(g) == PG_FREE_HEAD && h + (1u << g->order) > pfn) {
			head = h;
			order = g->order;
			break;
		}
	}
	/* resident_only: the page itself.  A block on a dirty list may
	 * hold pages never made resident (a dirty page merged with clean
	 * buddies keeps the hint), and judged by the block, a zspage grew in
	 * place into such pages, each made resident in an allocation's
	 * call, while the zone held resident ones free: after a mass free
	 * and its compaction, 15-23% of the pages made resident in calls
	 * (docs/results/2026-12-04-large-latency.md) */
	if (head == ZM_PFN_NIL || (resident_only && !(zmi_pages_pg_of(p, pfn)->flags & PG_DIRTY)))
		return ZM_PFN_NIL;
	if (!zmi_pages_out_reserve(p, 1)) {
		z->limit_failures++;
		*limited = true;
		return ZM_PFN_NIL;
	}
	{
		int blk = !!(zmi_pages_pg_of(p, head)->flags & PG_BLK_DIRTY);

		list_del(p, z, head);
		/* halve around pfn, returning the other halves */
		while (order > 0) {
			order--;
			if (pfn >= head + (1u << order)) {
				list_add(p, z, head, order, blk);
				head += 1u << order;
			} else {
				list_add(p, z, head + (1u << order), order, blk);
			}
		}
	}
	*dirty = pages_out(p->pg, pfn, 1, state, NULL) != 0;
	zmi_pages_zone_add(&z->nr_dirty_free, -(long)*dirty);
	taken(z, 1);
	return pfn;
}

zm_pfn_t zmi_pages_buddy_take_run(struct zm_pages *p, struct zmi_pages_zone *z, unsigned max_order,
				  unsigned min_order, bool dirty_only, unsigned *k, size_t *dirty)
{
	for (unsigned want = max_order + 1; want-- > min_order;) {
		unsigned found;
		zm_pfn_t pfn;

		uint32_t have = dirty_only ? z->nonempty & 0xAAAAAAAAu : z->nonempty;

		if (!(have >> (want * 2)) && (dirty_only || (z->grow >= z->end && !z->nbare)))
			continue;  /* no block that large here */
		if (!zmi_pages_out_reserve(p, (size_t)1 << want))
			continue;  /* a smaller block may still fit */
		pfn = dirty_only ? find_dirty_block(p, z, want, &found) :
				   find_block(p, z, want, &found);
		if (pfn == ZM_PFN_NIL) {
			zmi_pages_out_release(p, (size_t)1 << want);
			continue;
		}
		split(p, z, pfn, found, want);
		*dirty = pages_out(p->pg, pfn, 1u << want, PG_CACHED, NULL);
		zmi_pages_zone_add(&z->nr_dirty_free, -(long)*dirty);
		taken(z, (size_t)1 << want);
		*k = want;
		return pfn;
	}
	return ZM_PFN_NIL;
}

zm_pfn_t zmi_pages_buddy_take_spread(struct zm_pages *p, struct zmi_pages_zone *z, unsigned order,
				     bool *dirty, bool *limited)
{
	unsigned k;
	zm_pfn_t pfn;

	if (!z->nr_free)
		return ZM_PFN_NIL;  /* (see zmi_pages_buddy_take_block) */
	if (!zmi_pages_out_reserve(p, 1)) {
		z->limit_failures++;
		*limited = true;
		return ZM_PFN_NIL;
	}
	pfn = find_block(p, z, order, &k);
	if (pfn == ZM_PFN_NIL)
		pfn = find_block(p, z, 0, &k);   /* nothing that large: any page */
	if (pfn == ZM_PFN_NIL) {
		zmi_pages_out_release(p, 1);
		return ZM_PFN_NIL;
	}
	split(p, z, pfn, k, 0);
	*dirty = pages_out(p->pg, pfn, 1, PG_ALLOC, NULL) != 0;
	zmi_pages_zone_add(&z->nr_dirty_free, -(long)*dirty);
	taken(z, 1);
	return pfn;
}
