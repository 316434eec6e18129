/*
 * zbud ("compression buddies", background §1): at most two objects per page.
 *
 * The simplest allocator for compressed pages, and the most predictable:
 * a page holds one object growing from its start (the "first" buddy) and
 * one growing from its end (the "last" buddy).  Sizes are rounded up to a
 * chunk of page_size / ZBUD_NCHUNKS bytes (16 at 4 KiB).  A page with one buddy in use
 * sits on the unbuddied list indexed by its free chunks; a new object of c
 * chunks takes the page on the first non-empty list from c upwards (the
 * best-fitting half-used page, found with one scan of a bitmap of the
 * non-empty lists), else a new page from the pages layer.  A page with
 * both buddies in use, or whose one object leaves no chunk free (a
 * page-sized object), is on list 0, "no room".  A page whose two buddies
 * are both free goes straight back to the pages layer.  No compaction: an
 * object never moves, so map() hands out the object in place.
 *
 * Per-page metadata lives out of line, in the page's struct zm_page_meta
 * (the pages layer's record for owners, zmem/pages.h): owner = this pool,
 * and in priv one word per buddy (generation, chunks) plus the list links
 * as pfns, 16 bytes.  The kernel's zbud kept a one-chunk header at the
 * start of the page instead; out of line, every chunk of the page holds
 * data and a page-sized object fits (docs/zbud.md measures the difference).
 *
 * Handles: pfn (bits 20..51, below the pool's id: pool_internal.h), bit 19
 * set (so no handle is 0), the buddy's generation (bits 1..18) and the
 * side (bit 0).  A
 * buddy's generation moves on each time it is freed, and stays with the
 * page record while the page is back in the pages layer, so a stale or
 * double-freed handle is refused; a foreign one fails the tag, the pfn
 * range or the owner check (and the pool's id, checked by pool.c).  A
 * handle carries the generation plus the pool's gen_base, and destroy
 * says how far the generations of the pool's pages went
 * (pool_internal.h): a pool that gets the id again, whose page records
 * start at 0 as this pool's did, makes other handles.
 *
 * Locking: one lock, zb->lock, protects the lists, the bitmap, the
 * counters and the records of the pool's pages.  Lock order:
 *
 *     zb->lock  ->  pages->lock (inside zm_pages calls)
 *
 * though in practice pages are allocated before and freed after the lock
 * is held, so that it never waits on the pages layer.  Reads, writes and
 * maps look the handle up under the lock and copy without it: the object
 * cannot move, and freeing it meanwhile is the caller's bug (pool.h).
 */
#include <errno.h>
#include <string.h>

#include "base/lock.h"
#include "pool/pool_internal.h"

/* Chunks per page: 256, 16 bytes at 4 KiB.  The kernel used 64 because
 * its in-page header took one chunk; out of line, a finer chunk costs only
 * list heads (256 x 4 bytes) and bitmap words (4), and it pairs objects the
 * coarse one rounds apart: on text compressing to 50% (objects around half
 * a page) overhead 1.18 against 1.48 at 64 chunks, the same on captured
 * process memory (1.36), no speed difference (docs/zbud.md).  1..8. */
#ifndef ZBUD_CHUNK_ORDER
#define ZBUD_CHUNK_ORDER 8
#endif
#define ZBUD_NCHUNKS (1u << ZBUD_CHUNK_ORDER)
#define ZBUD_MAPWORDS ((ZBUD_NCHUNKS + 63) / 64)

#define ZBUD_NIL UINT32_MAX        /* end of a list */
#define ZBUD_CHUNK_BITS 9          /* chunks of a buddy, 0..256; 0 = free */
#define ZBUD_CHUNK_MASK ((1u << ZBUD_CHUNK_BITS) - 1)
#define ZBUD_GEN_BITS 18           /* 256K frees of one buddy before a
				      stale handle could match again */
#define ZBUD_GEN_MASK ((1u << ZBUD_GEN_BITS) - 1)
#define ZBUD_H_SET (1ull << 19)    /* set in every handle */
#define ZBUD_H_PFN_SHIFT 20
_Static_assert(ZBUD_H_PFN_SHIFT + 32 <= ZMI_POOL_ID_SHIFT, "pfns below the pool's id");
#define ZBUD_POISON 0x6b           /* freed buddies, ZM_DEBUG builds */

enum { FIRST = 0, LAST = 1 };

/* A page's record, in zm_page_meta.priv; protected by zb->lock. */
struct zbud_rec {
	uint32_t bud[2];     /* per side: generation << 9 | chunks */
	uint32_t next, prev; /* list links, pfns */
};

_Static_assert(sizeof(struct zbud_rec) <= sizeof(((struct zm_page_meta *)0)->priv),
	       "zbud's page record must fit the pages layer's owner record");
_Static_assert(ZBUD_CHUNK_ORDER >= 1 && ZBUD_CHUNK_ORDER <= 8, "1..8");

struct zbud_pool {
	zmi_lock_t lock;
	struct zm_pages *pages;           /* immutable */
	char *base;                       /* immutable: address of pfn 0 */
	size_t page_size;                 /* immutable */
	unsigned page_shift, chunk_shift; /* immutable */
	uint32_t head[ZBUD_NCHUNKS];      /* lock: [0] no room, [k] k chunks free */
	uint64_t nonempty[ZBUD_MAPWORDS]; /* lock: bit k: head[k] != NIL, k >= 1 */
	uint64_t objects, chunks, npages, pages_max, huge; /* lock */
	uint32_t gen0;                    /* immutable: gen_base, added to the
					     generation in handles */
	uint32_t gen_top;                 /* lock: 1 + the largest generation
					     of a page given back */
	uint64_t fail;                    /* atomic */
};

static inline struct zbud_pool *zb_of(struct zm_pool *pool) { return pool->priv; }

static inline unsigned bud_chunks(uint32_t b) { return b & ZBUD_CHUNK_MASK; }
static inline uint32_t bud_gen(uint32_t b) { return b >> ZBUD_CHUNK_BITS; }
static inline uint32_t bud_make(uint32_t gen, unsigned chunks)
{
	return (gen & ZBUD_GEN_MASK) << ZBUD_CHUNK_BITS | chunks;
}

static inline struct zbud_rec *rec_of(struct zm_page_meta *m)
{
	return (struct zbud_rec *)(void *)m->priv;
}

static inline struct zbud_rec *rec(struct zbud_pool *zb, zm_pfn_t pfn)
{
	return rec_of(zm_pages_meta(zb->pages, pfn));
}

/* The list a page belongs on: its free chunks if one buddy is free, else
 * 0 (both in use, or one object filling the page). */
static inline unsigned list_of(const struct zbud_rec *r)
{
	unsigned a = bud_chunks(r->bud[FIRST]), b = bud_chunks(r->bud[LAST]);

	return a && b ? 0 : ZBUD_NCHUNKS - a - b;
}

static inline zm_handle_t handle_make(const struct zbud_pool *zb, zm_pfn_t pfn, uint32_t gen,
				      unsigned side)
{
	return (zm_handle_t)pfn << ZBUD_H_PFN_SHIFT | ZBUD_H_SET |
	       (zm_handle_t)((gen + zb->gen0) & ZBUD_GEN_MASK) << 1 | side;
}

/* A page leaves the pool: its generations count for gen_top. */
static void gen_note(struct zbud_pool *zb, const struct zbud_rec *r)
{
	for (unsigned side = FIRST; side <= LAST; side++)
		if (bud_gen(r->bud[side]) >= zb->gen_top)
			zb->gen_top = bud_gen(r->bud[side]) + 1;
}

/* ---- lists ---------------------------------------------------------- */

static void list_add(struct zbud_pool *zb, zm_pfn_t pfn, struct zbud_rec *r, unsigned k)
{
	uint32_t old = zb->head[k];

	r->prev = ZBUD_NIL;
	r->next = old;
	if (old != ZBUD_NIL)
		rec(zb, old)->prev = pfn;
	zb->head[k] = pfn;
	if (k)
		zb->nonempty[k / 64] |= 1ull << (k % 64);
}

static void list_del(struct zbud_pool *zb, zm_pfn_t pfn, struct zbud_rec *r, unsigned k)
{
	if (r->prev != ZBUD_NIL)
		rec(zb, r->prev)->next = r->next;
	else
		zb->head[k] = r->next;
	if (r->next != ZBUD_NIL)
		rec(zb, r->next)->prev = r->prev;
	if (k && zb->head[k] == ZBUD_NIL)
		zb->nonempty[k / 64] &= ~(1ull << (k % 64));
}

/* The first non-empty unbuddied list with at least c chunks free, or 0. */
static unsigned find_fit(const struct zbud_pool *zb, unsigned c)
{
	for (unsigned w = c / 64; w < ZBUD_MAPWORDS; w++) {
		uint64_t bits = zb->nonempty[w];

		if (w == c / 64)
			bits &= ~0ull << (c % 64);
		if (bits)
			return w * 64 + (unsigned)__builtin_ctzll(bits);
	}
	return 0;
}

/* ---- handle lookup --------------------------------------------------- */

struct zbud_obj {
	zm_pfn_t pfn;
	unsigned side;
	struct zbud_rec *r;
};

/* Under zb->lock: the object h names, or false (with a message in debug
 * builds) if h is 0, foreign, stale or already freed. */
static bool lookup(struct zbud_pool *zb, zm_handle_t h, struct zbud_obj *o, const char *op)
{
	struct zm_page_meta *m;
	uint32_t b;

	o->pfn = (zm_pfn_t)(h >> ZBUD_H_PFN_SHIFT);
	o->side = (unsigned)(h & 1);
	if (zmi_unlikely(!(h & ZBUD_H_SET) || h >= ZMI_HANDLE_LIMIT))
		goto bad;
	m = zm_pages_meta(zb->pages, o->pfn);
	if (zmi_unlikely(!m || m->owner != zb))
		goto bad;
	o->r = rec_of(m);
	b = o->r->bud[o->side];
	if (zmi_unlikely(!bud_chunks(b) || bud_gen(b) != (((h >> 1) - zb->gen0) & ZBUD_GEN_MASK)))
		goto bad;
	return true;
bad:
	zmi_bad_input("zbud pool: %s of bad handle %#llx", op, (unsigned long long)h);
	return false;
}

static inline size_t obj_bytes(const struct zbud_pool *zb, const struct zbud_obj *o)
{
	return (size_t)bud_chunks(o->r->bud[o->side]) << zb->chunk_shift;
}

static inline char *obj_addr(const struct zbud_pool *zb, const struct zbud_obj *o)
{
	char *page = zb->base + ((size_t)o->pfn << zb->page_shift);

	return o->side == FIRST ? page : page + zb->page_size - obj_bytes(zb, o);
}

/* ---- create / destroy -------------------------------------------------- */

static int zb_create(struct zm_pool *pool, const struct zm_pool_config *cfg)
{
	struct zbud_pool *zb = calloc(1, sizeof(*zb));

	if (!zb)
		return -ENOMEM;
	zmi_lock_init(&zb->lock);
	zb->pages = pool->pages;
	zb->base = zm_pages_addr(pool->pages, 0);
	zb->page_size = pool->page_size;
	zb->page_shift = (unsigned)__builtin_ctzll(pool->page_size);
	zb->chunk_shift = zb->page_shift - ZBUD_CHUNK_ORDER;
	zb->gen0 = (uint32_t)(pool->gen_base & ZBUD_GEN_MASK);
	for (unsigned k = 0; k < ZBUD_NCHUNKS; k++)
		zb->head[k] = ZBUD_NIL;
	pool->priv = zb;
	return 0;
}

static void zb_destroy(struct zm_pool *pool)
{
	struct zbud_pool *zb = zb_of(pool);

	for (unsigned k = 0; k < ZBUD_NCHUNKS; k++) {
		uint32_t pfn = zb->head[k];

		while (pfn != ZBUD_NIL) {
			struct zm_page_meta *m = zm_pages_meta(zb->pages, pfn);
			uint32_t next = rec_of(m)->next;

			gen_note(zb, rec_of(m));
			m->owner = NULL;
			zm_pages_free(zb->pages, pfn);
			pfn = next;
		}
	}
	pool->gen_span = zb->gen_top;
	zmi_lock_destroy(&zb->lock);
	free(zb);
}

/* ---- malloc / free ----------------------------------------------------- */

static zm_handle_t zb_malloc(struct zm_pool *pool, size_t size)
{
	struct zbud_pool *zb = zb_of(pool);
	unsigned c = (unsigned)((size + ((size_t)1 << zb->chunk_shift) - 1) >> zb->chunk_shift);
	struct zbud_rec *r;
	zm_pfn_t pfn;
	unsigned k, side;
	uint32_t gen;

	zmi_lock(&zb->lock);
	k = c < ZBUD_NCHUNKS ? find_fit(zb, c) : 0;
	if (k) {
		pfn = zb->head[k];
		r = rec(zb, pfn);
		list_del(zb, pfn, r, k);
		side = bud_chunks(r->bud[FIRST]) ? LAST : FIRST;
	} else {
		struct zm_page_meta *m;

		/* a new page, taken without the lock; a half-used page that
		 * appears meanwhile is simply not used this time */
		zmi_unlock(&zb->lock);
		if (zm_pages_alloc(zb->pages, &pfn)) {
			__atomic_fetch_add(&zb->fail, 1, __ATOMIC_RELAXED);
			errno = ENOMEM;
			return 0;
		}
		m = zm_pages_meta(zb->pages, pfn);
		zmi_lock(&zb->lock);
		/* keep the generations the record holds (ours from the page's
		 * last time in this pool, or anything): stale handles stay
		 * stale */
		r = rec_of(m);
		r->bud[FIRST] &= ~ZBUD_CHUNK_MASK;
		r->bud[LAST] &= ~ZBUD_CHUNK_MASK;
		m->owner = zb;
		side = FIRST;
		if (++zb->npages > zb->pages_max)
			zb->pages_max = zb->npages;
	}
	gen = bud_gen(r->bud[side]);
	r->bud[side] = bud_make(gen, c);
	list_add(zb, pfn, r, list_of(r));
	zb->objects++;
	zb->chunks += c;
	zb->huge += c == ZBUD_NCHUNKS;
	zmi_unlock(&zb->lock);
	return handle_make(zb, pfn, gen, side);
}

static int zb_free(struct zm_pool *pool, zm_handle_t h)
{
	struct zbud_pool *zb = zb_of(pool);
	struct zbud_obj o;
	bool release = false;
	unsigned c;

	zmi_lock(&zb->lock);
	if (!lookup(zb, h, &o, "free")) {
		zmi_unlock(&zb->lock);
		return -EINVAL;
	}
	c = bud_chunks(o.r->bud[o.side]);
	if (ZM_DEBUG >= 1)
		memset(obj_addr(zb, &o), ZBUD_POISON, obj_bytes(zb, &o));
	list_del(zb, o.pfn, o.r, list_of(o.r));
	o.r->bud[o.side] = bud_make(bud_gen(o.r->bud[o.side]) + 1, 0);
	if (!bud_chunks(o.r->bud[!o.side])) {
		gen_note(zb, o.r);
		zm_pages_meta(zb->pages, o.pfn)->owner = NULL;
		zb->npages--;
		release = true;
	} else {
		list_add(zb, o.pfn, o.r, list_of(o.r));
	}
	zb->objects--;
	zb->chunks -= c;
	zb->huge -= c == ZBUD_NCHUNKS;
	zmi_unlock(&zb->lock);
	if (release)
		zm_pages_free(zb->pages, o.pfn);
	return 0;
}

/* The unit of an object is its page: the object and its buddy, if any. */
static long zb_unit(struct zm_pool *pool, zm_handle_t h, zm_handle_t *out, size_t max,
		    size_t *pages)
{
	struct zbud_pool *zb = zb_of(pool);
	struct zbud_obj o;
	long n = 0;

	zmi_lock(&zb->lock);
	if (!lookup(zb, h, &o, "unit")) {
		zmi_unlock(&zb->lock);
		return -EINVAL;
	}
	for (unsigned side = FIRST; side <= LAST; side++) {
		uint32_t b = o.r->bud[side];

		if (!bud_chunks(b))
			continue;
		if ((size_t)n < max)
			out[n] = handle_make(zb, o.pfn, bud_gen(b), side);
		n++;
	}
	zmi_unlock(&zb->lock);
	*pages = 1;
	return n;
}

/* ---- access ------------------------------------------------------------ */

/* The object's address and slot size, or NULL for a bad handle. */
static char *locate(struct zbud_pool *zb, zm_handle_t h, size_t *bytes, const char *op)
{
	struct zbud_obj o;
	char *p = NULL;

	zmi_lock(&zb->lock);
	if (lookup(zb, h, &o, op)) {
		p = obj_addr(zb, &o);
		*bytes = obj_bytes(zb, &o);
	}
	zmi_unlock(&zb->lock);
	return p;
}

static void *zb_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode)
{
	size_t bytes;
	char *p = locate(zb_of(pool), h, &bytes, "map");

	if (!p) {
		errno = EINVAL;
		return NULL;
	}
	return zmi_pool_map_in_place(pool, h, p);
}

static void zb_unmap(struct zm_pool *pool, zm_handle_t h)
{
	zmi_pool_unmap_slot(pool, h);
}

static int zb_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len)
{
	size_t bytes;
	char *p = locate(zb_of(pool), h, &bytes, "read");

	if (!p || len > bytes)
		return -EINVAL;
	memcpy(buf, p, len);
	return 0;
}

static int zb_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len)
{
	size_t bytes;
	char *p = locate(zb_of(pool), h, &bytes, "write");

	if (!p || len > bytes)
		return -EINVAL;
	memcpy(p, buf, len);
	return 0;
}

static size_t zb_obj_size(struct zm_pool *pool, zm_handle_t h)
{
	size_t bytes = 0;

	return locate(zb_of(pool), h, &bytes, "size") ? bytes : 0;
}

/* No compaction: nothing to switch on, and "off" is what it already is. */
static int zb_set_compaction(struct zm_pool *pool, enum zm_compact_policy policy)
{
	return policy == ZM_COMPACT_OFF || policy == ZM_COMPACT_DEFAULT ? 0 : -EOPNOTSUPP;
}

/* ---- statistics and checker -------------------------------------------- */

/* Memory accounting, all-in:
 *   pool_bytes  pages held
 *   meta_bytes  per page held, the pages layer's internal record and its
 *               owner record (where zbud keeps its own), and the pool
 *               structure (list heads, bitmap, counters). */
static void zb_stats(struct zm_pool *pool, struct zm_pool_stats *st)
{
	struct zbud_pool *zb = zb_of(pool);

	zmi_lock(&zb->lock);
	st->objects = zb->objects;
	st->slot_bytes = zb->chunks << zb->chunk_shift;
	st->pool_pages = zb->npages;
	st->pages_max = zb->pages_max;
	st->huge_objects = zb->huge;
	zmi_unlock(&zb->lock);
	st->pool_bytes = st->pool_pages * zb->page_size;
	st->pages_meta_bytes = ZM_PAGES_META_BYTES(st->pool_pages);
	st->record_bytes = st->pool_pages * sizeof(struct zm_page_meta);
	st->meta_bytes = st->pages_meta_bytes + st->record_bytes + sizeof(*zb);
	st->malloc_fail = __atomic_load_n(&zb->fail, __ATOMIC_RELAXED);
}

/* One row per list: row 0 the pages with no room, row k the pages with one
 * buddy and k chunks free (size: k chunks, the largest object the row's
 * pages can still take). */
static unsigned zb_nr_classes(struct zm_pool *pool)
{
	return ZBUD_NCHUNKS;
}

static unsigned fullness_of(unsigned used)
{
	if (!used)
		return 0;
	if (used >= ZBUD_NCHUNKS)
		return 10;
	return 1 + used * 9 / ZBUD_NCHUNKS;
}

static int zb_class_stats(struct zm_pool *pool, unsigned idx, struct zm_pool_class_stats *cs)
{
	struct zbud_pool *zb = zb_of(pool);

	cs->size = idx << zb->chunk_shift;
	cs->pages_per_zspage = 1;
	cs->objs_per_zspage = 2;
	zmi_lock(&zb->lock);
	for (uint32_t pfn = zb->head[idx]; pfn != ZBUD_NIL; pfn = rec(zb, pfn)->next) {
		struct zbud_rec *r = rec(zb, pfn);
		unsigned a = bud_chunks(r->bud[FIRST]), b = bud_chunks(r->bud[LAST]);

		cs->fullness[fullness_of(a + b)]++;
		cs->pages_used++;
		cs->obj_used += (a != 0) + (b != 0);
	}
	zmi_unlock(&zb->lock);
	cs->obj_allocated = 2 * cs->pages_used;
	cs->freeable = 0;
	return 0;
}

#define BAD(...)                                        \
	do {                                            \
		zmi_log_error("zbud check: " __VA_ARGS__);     \
		bad++;                                  \
	} while (0)

/* Walk one list: links, owners, records, the page's list; add up. */
static unsigned check_list(struct zbud_pool *zb, unsigned k, uint64_t tot[4])
{
	uint32_t prev = ZBUD_NIL;
	unsigned bad = 0;
	uint64_t n = 0;

	for (uint32_t pfn = zb->head[k]; pfn != ZBUD_NIL && !bad; pfn = rec(zb, pfn)->next) {
		struct zm_page_meta *m = zm_pages_meta(zb->pages, pfn);
		struct zbud_rec *r;
		unsigned a, b;

		if (!m) {
			BAD("list %u: pfn %u out of range", k, pfn);
			break;
		}
		r = rec_of(m);
		a = bud_chunks(r->bud[FIRST]);
		b = bud_chunks(r->bud[LAST]);
		if (++n > zb->npages)
			BAD("list %u: more pages than the %llu held (a cycle?)", k,
			    (unsigned long long)zb->npages);
		if (m->owner != zb)
			BAD("list %u: page %u is not this pool's", k, pfn);
		if (r->prev != prev)
			BAD("list %u: page %u prev %u, expected %u", k, pfn, r->prev, prev);
		if (!a && !b)
			BAD("list %u: page %u has no buddy in use", k, pfn);
		if (a + b > ZBUD_NCHUNKS)
			BAD("page %u: buddies of %u + %u chunks overlap", pfn, a, b);
		else if (list_of(r) != k)
			BAD("page %u (%u + %u chunks) on list %u, not %u", pfn, a, b, k,
			    list_of(r));
		tot[0]++;
		tot[1] += (a != 0) + (b != 0);
		tot[2] += a + b;
		tot[3] += (a == ZBUD_NCHUNKS) + (b == ZBUD_NCHUNKS);
		prev = pfn;
	}
	return bad;
}

static int zb_check(struct zm_pool *pool)
{
	struct zbud_pool *zb = zb_of(pool);
	uint64_t tot[4] = { 0 }; /* pages, objects, chunks, huge */
	unsigned bad = 0;

	zmi_lock(&zb->lock);
	for (unsigned k = 0; k < ZBUD_NCHUNKS; k++) {
		bool set = zb->nonempty[k / 64] >> (k % 64) & 1;

		if (k && set != (zb->head[k] != ZBUD_NIL))
			BAD("bitmap bit %u is %d, list %s", k, set,
			    zb->head[k] != ZBUD_NIL ? "not empty" : "empty");
		if (!k && set)
			BAD("bitmap bit 0 is set");
		bad += check_list(zb, k, tot);
	}
	if (tot[0] != zb->npages)
		BAD("%llu pages on the lists, %llu counted", (unsigned long long)tot[0],
		    (unsigned long long)zb->npages);
	if (tot[1] != zb->objects)
		BAD("%llu objects in the pages, %llu counted", (unsigned long long)tot[1],
		    (unsigned long long)zb->objects);
	if (tot[2] != zb->chunks)
		BAD("%llu chunks in use, %llu counted", (unsigned long long)tot[2],
		    (unsigned long long)zb->chunks);
	if (tot[3] != zb->huge)
		BAD("%llu page-sized objects, %llu counted", (unsigned long long)tot[3],
		    (unsigned long long)zb->huge);
	if (zb->npages > zb->pages_max)
		BAD("%llu pages, above the high-water mark %llu",
		    (unsigned long long)zb->npages, (unsigned long long)zb->pages_max);
	zmi_unlock(&zb->lock);
	return bad ? -EUCLEAN : 0;
}

const struct zmi_pool_ops zmi_pool_zbud_ops = {
	.name = "zbud",
	.uses_pages = true,
	.create = zb_create,
	.destroy = zb_destroy,
	.malloc = zb_malloc,
	.free = zb_free,
	.map = zb_map,
	.unmap = zb_unmap,
	.read = zb_read,
	.write = zb_write,
	.obj_size = zb_obj_size,
	.compact = NULL,
	.stats = zb_stats,
	.nr_classes = zb_nr_classes,
	.class_stats = zb_class_stats,
	.check = zb_check,
	.shrink = NULL,
	.set_compaction = zb_set_compaction,
	.unit = zb_unit,
};
