/*
 * Internals of the pages layer, shared by its files:
 *
 *   arena.c   create/destroy, pfn <-> address, stats, trim to the OS
 *   buddy.c   free lists of 2^order blocks: take, give (merge), isolate
 *   tcache.c  per-thread page caches: the single-page fast path
 *   bulk.c    zm_pages_alloc_bulk / zm_pages_free_bulk
 *   check.c   the whole-structure checker
 *
 * Zones.  The arena is cut into zones of 2^zone_shift pages (the last may
 * be shorter), each a buddy allocator of its own with its own lock, free
 * lists and counters; a block never spans two zones.  A thread's cache
 * takes its pages from one zone, its home (round robin as caches are
 * made), and another only when that one has none; a page goes back to the
 * zone it lies in.  One zone per CPU: two threads on one buddy spend
 * their time in its lock and passing its lines back and forth
 * (docs/results/2026-12-02-code-choices.md).
 *
 * Lock order (outer first):
 *
 *   tc_lock (global, tcache.c)  ->  zone[0].lock -> zone[1].lock -> ...
 *
 * tc_lock guards the registry of per-thread caches (which caches exist,
 * which instance owns each); it is taken only when a thread meets an
 * instance for the first time, when a thread exits and when an instance is
 * destroyed.  A zone's lock guards its free lists, its counters and the
 * state of every page of the zone that is not held by a caller or by a
 * per-thread cache.  Every path but stats, check and destroy holds one
 * zone lock at a time; those take them all, in zone order.  A page in a
 * per-thread cache belongs to that thread alone; a page allocated to a
 * caller belongs to the caller.
 *
 * Counting.  Each zone counts its own pages out of the buddy (`out`:
 * callers' and caches'), its resident high-water mark and its dirty free
 * pages, which it trims down to the reserve by itself, so that a thread
 * working in its home zone reads and writes no line of another's.  Only
 * a limit (limit_pages below the arena) needs a count for the instance:
 * then nr_out is one atomic counter that a taker reserves its pages in
 * before it takes them (zmi_pages_out_reserve), so the limit holds across
 * zones: a counter shared by every taker is a line two threads pass back
 * and forth (docs/results/2026-12-02-code-choices.md).
 */
#ifndef ZM_PAGES_INTERNAL_H
#define ZM_PAGES_INTERNAL_H

#define ZMEM_ADVANCED  /* the advanced tier of the headers */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/debug.h"
#include "base/lock.h"
#include "base/os.h"
#include <zmem/pages.h>

/* Pages moved under one lock acquisition by bulk calls, refills and
 * drains: 64 pages is 256 KiB at 4 KiB; a chunk costs a few microseconds at
 * most, so the lock is never held for long, and the lock cost (~20-40 ns
 * uncontended) is spread over enough pages to vanish. */
#define ZM_PAGES_CHUNK 64
/* Bulk requests below this many pages come from the thread's cache
 * (bulk.c): the crossover zmem pagebench shows (docs/pages.md). */
#ifndef ZM_BULK_CACHED
#define ZM_BULK_CACHED 16
#endif

/* Free resident pages are given back to the OS only once this many exceed
 * the reserve, so that madvise calls are batched; with the default reserve
 * the batch is a quarter of the zone's reserve, this at most and
 * ZM_MIN_DEFAULT at least. */
#define ZM_TRIM_BATCH 64
/* The default reserve scales with the data: a zone keeps resident at most
 * 1/2^ZM_RESERVE_SHIFT of the pages it has out (callers' and caches'), and
 * ZM_MIN_DEFAULT at least, up to the default's bytes, so that a small
 * pool after a mass free does not keep a fixed 1 MiB a zone beside its
 * live bytes; at 1/64 a zone reaches the full 256 pages at 64 MiB out
 * (docs/results/2026-12-02-code-choices.md).  An explicit reserve_pages is kept as given. */
#define ZM_RESERVE_SHIFT 6

#define ZM_DEFAULT_ARENA   ((size_t)4 << 30)
/* The defaults are bytes, turned into pages by the page size: 256 and 64
 * pages of 4 KiB.  Counted in pages they would keep 8 MiB in reserve and
 * 2 MiB in each thread's cache at 32 KiB pages (zmem serve --page-size
 * 32K): 0.8 MiB more resident after an nbdcopy of 58 MiB
 * (docs/serve.md).  At least ZM_MIN_DEFAULT pages either way. */
#define ZM_DEFAULT_RESERVE_BYTES ((size_t)1 << 20)
#define ZM_DEFAULT_CACHE_BYTES   ((size_t)256 << 10)
#define ZM_MIN_DEFAULT           8
/* A refill of a thread's cache from clean memory is made resident in one
 * call (prefault) only once its zone has held this much; before, each
 * page is made resident when it is handed out.  A pool holding a few
 * objects would otherwise keep a whole refill resident (32 pages, 128
 * KiB, for one object of 100 bytes: 1000 such pools, 128 MiB); beyond it
 * the batch saves a system call a page. */
#define ZM_PREFAULT_BATCH_BYTES  ((size_t)1 << 20)
/* A page taken from a thread's run block or set-aside pages that is not
 * resident is made resident with the pages of that block or run after it,
 * up to this many in all, in one call (past ZM_PREFAULT_BATCH_BYTES, as
 * above); so is one a zspage grows into in place (zm_pages_alloc_at_run).
 * A zspage growing page by page then pays one call for all its pages (32
 * at most, a run's), not one each, and an allocation that meets one is 1
 * in 32 of those that grow a zspage.  32, not 16 as first: while the
 * compactor works after a mass free, these calls are most of the slow
 * allocations, and half as many calls made fewer of them
 * (docs/results/2026-12-03-in-place.md). */
#ifndef ZM_PREFAULT_AHEAD
#define ZM_PREFAULT_AHEAD 32
#endif
#define ZM_MAX_CACHE       1024

#define ZM_PFN_NIL UINT32_MAX

/* Decay (arena.c, decay_trim): while a pool's worker calls
 * zm_pages_trim_due, the free pages a zone gains above what it keeps
 * (reserve, demand) are not given back at once but over
 * ZM_DECAY_EPOCHS epochs of ZM_DECAY_EPOCH_MS: at each epoch's turn the
 * pages gained in each of the last ZM_DECAY_EPOCHS epochs may stay
 * resident in the share decay_weight (arena.c) gives their age, falling from
 * all to none along a smoothstep (as jemalloc's dirty_decay_ms does).
 * After a mass free the churn that follows takes these pages again
 * instead of faulting clean ones in inside its allocations; nothing
 * taking them, all are gone 450 ms after the free, before the second at
 * which the memory given back is measured.  Figures:
 * docs/results/2026-12-05-trim-decay.md. */
#ifndef ZM_DECAY_EPOCH_MS
#define ZM_DECAY_EPOCH_MS 50
#endif
#define ZM_DECAY_EPOCHS 8

/* Test seam: when set, the pages layer's clock (demand windows, decay)
 * reads it instead of CLOCK_MONOTONIC_COARSE, so that tests of the
 * rules in time do not depend on the machine's speed. */
extern uint64_t (*zmi_pages_clock)(void);
static inline uint64_t zmi_pages_now(void)
{
	uint64_t (*f)(void) = __atomic_load_n(&zmi_pages_clock, __ATOMIC_RELAXED);

	return f ? f() : zmi_os_coarse_ns();
}

/* zm_pages_alloc_run carves runs from blocks of 2^run_order pages, at
 * most 2^ZM_RUN_ORDER: ZM_PAGES_RUN_MAX, zsmalloc's largest zspage by
 * default, 128 KiB at 4 KiB pages (fewer when the thread cache is
 * smaller; a block is as long as a run that needs more). */
#define ZM_RUN_ORDER 5
/* ... and only while the limit leaves room for this many blocks: a pool
 * limited to a few blocks' worth must not have them held in a thread's
 * cache (a limit failure also takes them back: zmi_pages_tcache_reclaim). */
#define ZM_RUN_LIMIT_ROOM 8
_Static_assert(1u << ZM_RUN_ORDER == ZM_PAGES_RUN_MAX, "run block size");

/* Page states.  0 is "tail of a free block" so that a fresh (zero) page
 * array describes free tails without being touched. */
enum {
	PG_FREE_TAIL = 0,  /* inside a free block, not its first page */
	PG_FREE_HEAD,      /* first page of a free block, on a free list */
	PG_ALLOC,          /* first page of a run handed to a caller */
	PG_ALLOC_TAIL,     /* other pages of that run */
	PG_CACHED,         /* in a per-thread cache */
	PG_ISOLATED,       /* first page of a block being given to the OS */
};

/* flags */
#define PG_DIRTY     1u  /* free page that may still be resident */
#define PG_BLK_DIRTY 2u  /* on a free-block head: block may hold dirty pages */
#define PG_RESIDENT  4u  /* a page in a thread's cache (tcache.c) whose
			    memory is resident: it needs no prefault when
			    handed out and goes back to the buddy dirty */

/* Internal per-page record, 8 bytes.  state, order and flags share one
 * word so that the bulk paths set all three with one store.
 *
 * Free lists: the head page of a free block of order >= 1 keeps the next
 * block's pfn in its link, and the block's second page (a free tail,
 * whose record is otherwise unused) keeps the previous block's: a doubly
 * linked list in one word a page.  Free single pages (order 0) have no
 * second page; they are kept in a bitmap per dirty hint instead
 * (struct zmi_pages_bitset, buddy.c): the record stays 8 bytes, not 12. */
struct zmi_pages_pg {
	uint32_t link;       /* see above; free block heads and their second pages */
	union {
		struct {
			uint8_t state;
			uint8_t order; /* of the block or run this page heads */
			uint8_t flags;
			uint8_t pad;
		};
		uint32_t word;
	};
};

/* Page records a cache line holds (and its order). */
#define ZM_PG_LINE_ORDER 3
#define ZM_PG_PER_LINE (1u << ZM_PG_LINE_ORDER)
_Static_assert(sizeof(struct zmi_pages_pg) << ZM_PG_LINE_ORDER == 64, "a line of records");

/* pages.h's ZM_PAGES_META_BYTES counts these records */
_Static_assert(sizeof(struct zmi_pages_pg) == ZM_PAGES_RECORD_BYTES, "the record pages.h counts");

/* A set of pfns, for the free single pages: a bit a page, and a summary
 * bit for each non-zero word; lo is a lower bound on the first non-zero
 * summary word.  Reserved address space, touched where pages are. */
struct zmi_pages_bitset {
	uint64_t *w, *sum;
	size_t w_bytes, sum_bytes;
	uint32_t nsum;       /* summary words */
	uint32_t lo;
};

/* A page's state byte is written without the lock by the thread that owns
 * the page (alloc/free through its cache: PG_ALLOC <-> PG_CACHED) while the
 * buddy, under the lock, may read it to see whether a neighbour is free.
 * Neither value it may see then is PG_FREE_HEAD, so the answer is right
 * either way; relaxed atomics make that race defined (plain moves on x86). */
static inline uint8_t zmi_pages_pg_state(const struct zmi_pages_pg *pg)
{
	return __atomic_load_n(&pg->state, __ATOMIC_RELAXED);
}

static inline void zmi_pages_pg_set_state(struct zmi_pages_pg *pg, uint8_t st)
{
	__atomic_store_n(&pg->state, st, __ATOMIC_RELAXED);
}

/* The word of a page in state st, order 0, no flags. */
static inline uint32_t zmi_pages_pg_word(uint8_t st)
{
	struct zmi_pages_pg g = { .state = st };

	return g.word;
}

struct zmi_pages_tcache;

struct zmi_pages_free_list {
	uint32_t head;
	uint32_t count;
};

/* One zone: a buddy allocator over pfns [start, end). */
struct zmi_pages_zone {
	zmi_lock_t lock;
	zm_pfn_t start, end;      /* immutable */
	struct zmi_pages_free_list area[ZM_PAGES_MAX_ORDER + 1][2]; /* [order][dirty];
					 order 0: counts only, the pages are in free0 */
	struct zmi_pages_bitset free0[2];  /* [dirty]: free single pages, bit pfn - start */
	uint32_t nonempty;        /* bit order*2+dirty: that list is not empty */
	zm_pfn_t grow;            /* the frontier: pages [grow, end) are free,
				     clean, on no list, their records never
				     written (zero); blocks go to the lists
				     from here as they are needed (buddy.c) */
	uint64_t *bare;           /* a bit a largest-order block below the
				     frontier: free, clean, on no list, its
				     page records given back to the OS (zero),
				     like the pages beyond the frontier; taken
				     before those (buddy.c) */
	uint32_t nbare;           /* blocks with their bit set */
	size_t nr_free;           /* pages in free blocks (not isolated) */
	size_t nr_dirty_free;     /* free pages flagged PG_DIRTY; written with
				     zmi_pages_zone_add (read without the lock) */
	size_t nr_isolated;       /* pages being given back to the OS */
	size_t out;               /* pages of this zone out of the buddy;
				     written with zmi_pages_zone_add (read
				     without the lock: zmi_pages_zone_reserve) */
	size_t resident_max;      /* high-water mark of out + nr_dirty_free;
				     atomic stores under the lock (read without
				     it: tcache.c, prefault_ahead) */
	bool trimming;            /* one trimmer at a time */
	/* demand: pages taken from the buddy in the last window of
	 * ZM_DEMAND_MS and in the current one (taken(), under the lock,
	 * atomic stores; read without it) */
	uint64_t taken_total;     /* lock */
	uint64_t win_start_ns, win_taken0; /* lock */
	size_t demand;            /* atomic stores under the lock */
	/* decay (arena.c, decay_trim), all under the lock: the dirty free
	 * pages gained in each of the last epochs, newest first; the
	 * current epoch's start; the dirty free pages after its turn's
	 * trim (what it gained since is nr_dirty_free beyond it); and
	 * what the older epochs allow since then (read without the lock) */
	size_t decay_added[ZM_DECAY_EPOCHS];
	uint64_t decay_epoch_ns;  /* atomic stores */
	size_t decay_mark;
	size_t decay_limit;       /* atomic stores */
	uint64_t bulk_calls, bulk_pages, refills, drains, limit_failures;
	uint64_t trimmed_pages;
	uint64_t refilled_pages;  /* made resident ahead (refill_zone) */
} __attribute__((aligned(64)));

/* Zones: at most this many, one per CPU (a power of two, fewer where the
 * last would be empty) ... */
#define ZM_MAX_ZONES 8
/* ... of at least 2^ZM_ZONE_MIN_SHIFT pages by default (128 MiB at 4 KiB:
 * an arena smaller than two of them has one zone, as before zones were
 * made); a caller asking for zones (zm_pages_config.zones) gets them down
 * to blocks of the largest order. */
#define ZM_ZONE_MIN_SHIFT 15

struct zm_pages {
	char *base;               /* arena start; immutable */
	size_t page_size;         /* immutable */
	unsigned page_shift;      /* immutable */
	uint32_t npages;          /* immutable */
	size_t arena_bytes;       /* immutable */
	struct zmi_pages_pg *pg;         /* per-page internal records */
	struct zm_page_meta *meta;/* per-page records for owners */
	size_t pg_bytes, meta_bytes;
	size_t limit;             /* immutable */
	size_t reserve;           /* immutable: dirty free pages each zone keeps
				     (SIZE_MAX: never trim); each zone the
				     whole reserve, not a share, or a thread
				     working in one zone trims too often; with
				     reserve_scales, at most this */
	bool reserve_scales;      /* immutable: the default reserve, scaled to
				     each zone's pages out (zmi_pages_zone_reserve) */
	unsigned cache_cap;       /* immutable */
	unsigned cache_batch;     /* immutable */
	bool prefault;            /* immutable */
	unsigned ahead_max;       /* immutable: pages a thread sets aside
				     (tcache.c), min(cache_cap, 64) */
	unsigned run_order;       /* immutable: its run block, 2^run_order
				     <= cache_cap, at most 32 pages */
	unsigned nzones;          /* immutable */
	unsigned zone_shift;      /* immutable: zone of pfn = pfn >> zone_shift */
	struct zmi_pages_zone *zone;     /* immutable pointer: nzones zones */
	bool limited;             /* immutable: limit < npages */

	/* Written by every zone's takers and givers when there is a limit:
	 * on a line of its own, away from the immutable fields above that
	 * every lock-free path reads. */
	size_t nr_out __attribute__((aligned(64))); /* atomic: pages out of the
				     buddy (callers + caches), if limited */
	uint64_t bad_frees;       /* atomic */
	uint64_t prefaulted;      /* atomic: pages zmi_pages_prefault made
				     resident */
	unsigned next_home;       /* atomic: the next cache's home zone */

	/* tc_lock */
	struct zmi_pages_tcache *caches; /* registry of this instance's caches */
	uint64_t stolen;          /* tc_lock: pages zmi_pages_tcache_steal took */
	uint64_t due_seen_ns;     /* atomic: the last zm_pages_trim_due call
				     (the demand counts only while someone
				     calls it: it is what gives it back) */
	uint64_t tc_bulk_calls, tc_bulk_pages; /* bulk calls served from
				     caches no longer registered (tcache.c) */
};

static inline struct zmi_pages_zone *zmi_pages_zone_of(const struct zm_pages *p, zm_pfn_t pfn)
{
	/* 64-bit: one zone over more than 2^31 pages has a shift of 32 */
	return &p->zone[(uint64_t)pfn >> p->zone_shift];
}

/* A zone counter that other threads read without its lock. */
static inline void zmi_pages_zone_add(size_t *ctr, long d)
{
	__atomic_store_n(ctr, *ctr + (size_t)d, __ATOMIC_RELAXED);
}

/* Does some zone hold n free resident (dirty) pages?  Read without the
 * locks: a hint.  Takers look for resident memory in every zone before
 * memory never touched (or trimmed) in their home zone: after a
 * compactor's thread frees pages they lie resident in their own zones,
 * and a thread whose home had none made clean ones resident inside its
 * calls while the other zone held thousands (allocbench --latency,
 * docs/results/2026-12-05-alloc-latency.md).  A page from another zone
 * costs its lock, once per refill or run; a fault costs 10-20 us. */
static inline bool zmi_pages_dirty_somewhere(const struct zm_pages *p, size_t n)
{
	for (unsigned z = 0; z < p->nzones; z++)
		if (__atomic_load_n(&p->zone[z].nr_dirty_free, __ATOMIC_RELAXED) >= n)
			return true;
	return false;
}

/* The zone a taker looking for resident pages starts from: its home,
 * unless another zone holds more than ZM_RESIDENT_SKEW times as many
 * free resident pages (then the one with most).  Read without the locks:
 * a hint.  A zone's count is of pages, but takers find them by block, and
 * a block on a dirty list may be mostly clean (a dirty page freed beside
 * clean buddies merges with them): after a mass free, a churning thread
 * whose home zone had 700-1,700 such pages made 32 clean ones resident in
 * refill after refill while the other zone, where the compactor had
 * freed whole zspages, held 12,000-18,000
 * (docs/results/2026-12-05-trim-decay.md). */
#ifndef ZM_RESIDENT_SKEW
#define ZM_RESIDENT_SKEW 4
#endif
static inline unsigned zmi_pages_resident_start(const struct zm_pages *p, unsigned home)
{
	size_t h = __atomic_load_n(&p->zone[home].nr_dirty_free, __ATOMIC_RELAXED), best = h;
	unsigned at = home;

	for (unsigned z = 0; z < p->nzones; z++) {
		size_t d = __atomic_load_n(&p->zone[z].nr_dirty_free, __ATOMIC_RELAXED);

		if (d > best) {
			best = d;
			at = z;
		}
	}
	return best > h * ZM_RESIDENT_SKEW ? at : home;
}

/* Pages out of the buddy, all zones: with every zone lock held (stats,
 * check, destroy). */
static inline size_t zmi_pages_nr_out_locked(const struct zm_pages *p)
{
	size_t n = 0;

	for (unsigned z = 0; z < p->nzones; z++)
		n += p->zone[z].out;
	return n;
}

/* With a limit: count n pages out of the buddy if the limit allows all of
 * them (true), or up to n of them (returns how many); and give pages back
 * to the count.  The limit holds across zones: nr_out never passes it.
 * Without one, they allow everything and count nothing. */
bool zmi_pages_out_reserve(struct zm_pages *p, size_t n);
size_t zmi_pages_out_reserve_upto(struct zm_pages *p, size_t n);
static inline void zmi_pages_out_release(struct zm_pages *p, size_t n)
{
	if (p->limited)
		__atomic_fetch_sub(&p->nr_out, n, __ATOMIC_RELAXED);
}

/* n pages of zone z came back from a caller or a cache (z's lock held). */
static inline void zmi_pages_zone_returned(struct zm_pages *p, struct zmi_pages_zone *z, size_t n)
{
	zmi_pages_zone_add(&z->out, -(long)n);
	zmi_pages_out_release(p, n);
}

/* Zone z's recent demand: the pages taken from it in the last complete
 * window of ZM_DEMAND_MS, or in the current one so far if that is more
 * (a churn that starts, as right after a mass free, asks for pages its
 * last window did not take: trimmed meanwhile, each came back as a fault
 * in one of its allocations, docs/results/2026-12-03-in-place.md), none
 * once two windows passed without a take
 * or without a call of zm_pages_trim_due (now: zmi_pages_now()), at
 * most half of its pages out.  Half, not an eighth as first: a pool
 * churning at full speed right after its compactor shrank it takes more
 * than an eighth of its pages in a window, and each page trimmed beyond
 * the cap came back as a fault in an allocation (allocbench --latency,
 * five pairs: p99.9 on/off 4.54-5.38 against 5.34-8.48, steady churn
 * 1.35-1.63 against 1.53-2.76); memory 1 s after a mass free is the
 * same, the demand having passed by then
 * (docs/results/2026-12-03-latency.md). */
#define ZM_DEMAND_MS 100
#ifndef ZM_DEMAND_CAP_SHIFT
#define ZM_DEMAND_CAP_SHIFT 1
#endif
static inline size_t zmi_pages_zone_demand(const struct zm_pages *p, const struct zmi_pages_zone *z,
					   uint64_t now)
{
	size_t d = __atomic_load_n(&z->demand, __ATOMIC_RELAXED);
	size_t out = __atomic_load_n(&z->out, __ATOMIC_RELAXED) >> ZM_DEMAND_CAP_SHIFT;
	const uint64_t two = 2 * ZM_DEMAND_MS * 1000000ull;

	uint64_t w0, t;

	/* none without a caller of zm_pages_trim_due lately: nothing
	 * would give the pages kept back once the demand has passed */
	if (now - __atomic_load_n(&z->win_start_ns, __ATOMIC_RELAXED) > two ||
	    now - __atomic_load_n(&p->due_seen_ns, __ATOMIC_RELAXED) > two)
		return 0;
	/* the current window so far: its start first, since taken_total
	 * only grows and read after it is not below it (where another
	 * thread's stores were seen out of order, nothing is counted rather
	 * than 2^64) */
	w0 = __atomic_load_n(&z->win_taken0, __ATOMIC_ACQUIRE);
	t = __atomic_load_n(&z->taken_total, __ATOMIC_RELAXED);
	if (t > w0 && t - w0 > d)
		d = (size_t)(t - w0);
	return d < out ? d : out;
}

/* The dirty free pages zone z keeps resident: the reserve, or with the
 * default one, 1/2^ZM_RESERVE_SHIFT of the zone's pages out (read
 * without the lock: a hint), between ZM_MIN_DEFAULT and the reserve, or
 * its recent demand if that is more. */
static inline size_t zmi_pages_zone_reserve(const struct zm_pages *p,
					    const struct zmi_pages_zone *z)
{
	size_t r, d;

	if (!p->reserve_scales)
		return p->reserve;
	r = __atomic_load_n(&z->out, __ATOMIC_RELAXED) >> ZM_RESERVE_SHIFT;
	r = r < ZM_MIN_DEFAULT ? ZM_MIN_DEFAULT : r > p->reserve ? p->reserve : r;
	d = zmi_pages_zone_demand(p, z, zmi_pages_now());
	return d > r ? d : r;
}

/* The pages beyond the reserve before a free trims: ZM_TRIM_BATCH, or a
 * quarter of a scaled reserve (ZM_MIN_DEFAULT at least). */
static inline size_t zmi_pages_trim_batch(const struct zm_pages *p, size_t reserve)
{
	size_t b = reserve / 4;

	if (!p->reserve_scales)
		return ZM_TRIM_BATCH;
	return b < ZM_MIN_DEFAULT ? ZM_MIN_DEFAULT : b > ZM_TRIM_BATCH ? ZM_TRIM_BATCH : b;
}

/* Lock every zone, in order (stats, check, destroy), and unlock them. */
void zmi_pages_zones_lock(struct zm_pages *p);
void zmi_pages_zones_unlock(struct zm_pages *p);

/* The zones a taker tries, from home: home, home + 1, ... (mod nzones). */
#define ZM_FOR_EACH_ZONE_FROM(p, home, i, z)                                  \
	for (unsigned i = 0; i < (p)->nzones &&                               \
	     ((z) = &(p)->zone[((home) + i) % (p)->nzones], 1); i++)

static inline struct zmi_pages_pg *zmi_pages_pg_of(const struct zm_pages *p, zm_pfn_t pfn)
{
	return &p->pg[pfn];
}

/* buddy.c; all with z->lock held (but alloc/free of the bitsets); each
 * works in zone z only, on pfns of z.  The takers count what they take in
 * nr_out (zmi_pages_out_reserve), the givers leave that to their callers. */
int zmi_pages_bitset_alloc(struct zmi_pages_bitset *b, uint32_t nbits);
void zmi_pages_bitset_free(struct zmi_pages_bitset *b);
/* The first block on list [order][dirty], ZM_PFN_NIL if it is empty. */
zm_pfn_t zmi_pages_buddy_first(struct zmi_pages_zone *z, unsigned order, int dirty);
/* The block after pfn on its list (order >= 1), ZM_PFN_NIL at the end;
 * and the one before it. */
static inline zm_pfn_t zmi_pages_buddy_next(const struct zm_pages *p, zm_pfn_t pfn)
{
	return p->pg[pfn].link;
}
static inline zm_pfn_t zmi_pages_buddy_prev(const struct zm_pages *p, zm_pfn_t pfn)
{
	return p->pg[pfn + 1].link;
}
/* The free single page after pfn (in pfn order) in zone z's bitset d, or
 * ZM_PFN_NIL. */
zm_pfn_t zmi_pages_zone_next_single(const struct zmi_pages_zone *z, int d, zm_pfn_t pfn);
void zmi_pages_buddy_init(struct zm_pages *p, struct zmi_pages_zone *z);
/* Take one block of 2^order pages; marks it PG_ALLOC (+tails).  Returns
 * ZM_PFN_NIL when no block is free (or the limit says no: *limited). */
zm_pfn_t zmi_pages_buddy_take_block(struct zm_pages *p, struct zmi_pages_zone *z, unsigned order,
				    bool *limited);
/* Take up to n single pages into out[], marking them with state; returns
 * how many (stops at the limit or when the zone is empty; *limited when
 * the limit cut it short, i.e. it got all the limit allowed, and less
 * than n).  *dirty: how many of them were dirty (still
 * resident: no need to prefault). */
size_t zmi_pages_buddy_take_pages(struct zm_pages *p, struct zmi_pages_zone *z, size_t n,
				  zm_pfn_t *out, uint8_t state, size_t *dirty, bool *limited);
/* A free block of 2^k pages, k from max_order down to min_order, the
 * largest there is (a dirty one, if dirty_only) and the limit allows, its
 * pages in state PG_CACHED (PG_RESIDENT those that were dirty); *k and
 * *dirty (how many) set.  ZM_PFN_NIL if none. */
zm_pfn_t zmi_pages_buddy_take_run(struct zm_pages *p, struct zmi_pages_zone *z, unsigned max_order,
				  unsigned min_order, bool dirty_only, unsigned *k, size_t *dirty);
/* The first page of a free block of order >= order (the rest stays free,
 * after it); any page if there is no such block.  ZM_PFN_NIL if none
 * (*limited: the limit said no).  *dirty: the page was dirty. */
zm_pfn_t zmi_pages_buddy_take_spread(struct zm_pages *p, struct zmi_pages_zone *z, unsigned order,
				     bool *dirty, bool *limited);
/* Take exactly page pfn (of zone z) if it lies in a free block, and with
 * resident_only if that block may hold resident pages; ZM_PFN_NIL if not
 * (*limited: the limit said no).  *dirty: the page was dirty. */
zm_pfn_t zmi_pages_buddy_take_at(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn,
				 bool resident_only, bool *dirty, bool *limited);
/* The same, the page leaving in state `state`: PG_ALLOC, or PG_CACHED for
 * a thread's cache (PG_RESIDENT if it was dirty). */
zm_pfn_t zmi_pages_buddy_take_at_as(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn,
				    bool resident_only, uint8_t state, bool *dirty, bool *limited);
/* Give back a block whose pages the caller owned; merges with free buddies.
 * dirty: the caller may have touched it.  nr_out is the caller's. */
void zmi_pages_buddy_give(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn,
			  unsigned order, bool dirty);
/* Largest-order clean blocks on the lists, taken off them for their page
 * records to go back to the OS (zmi_pages_buddy_bare_set once they have;
 * zeroed: the head's record went back too, else it is cleared): up to
 * nout of them into out[], isolated (nr_isolated); how many. */
size_t zmi_pages_buddy_bare_take(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t *out,
				 size_t nout);
void zmi_pages_buddy_bare_set(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn,
			      bool zeroed);

/* Remove clean blocks of min_order or more worth up to max pages (the
 * frontier's and bare blocks too) to be made resident; writes their heads
 * to out[] (up to nout) and returns how many blocks. */
size_t zmi_pages_buddy_isolate_clean(struct zm_pages *p, struct zmi_pages_zone *z, size_t max,
				     unsigned min_order, zm_pfn_t *out, size_t nout);
/* Remove dirty blocks worth up to max pages for trimming; writes their
 * heads to out[] (up to nout) and returns how many blocks; *cleaned: the
 * dirty pages among them (what trimming gives back). */
size_t zmi_pages_buddy_isolate_dirty(struct zm_pages *p, struct zmi_pages_zone *z, size_t max,
				     zm_pfn_t *out, size_t nout, size_t *cleaned);

/* arena.c: give zone z's dirty free pages beyond the reserve back to the
 * OS if they passed it by a batch (ZM_TRIM_BATCH).
 * Takes and drops z's lock; call without any.  Pages freed into a zone
 * are trimmed by the freer, from that zone. */
void zmi_pages_zone_maybe_trim(struct zm_pages *p, struct zmi_pages_zone *z);

/* zm_pages_trim_idle() and zm_pages_trim_due() (arena.c) are the
 * advanced tier's, include/zmem/pages.h. */

/* Prefault the pages in pfns[0..n) (without the lock; the caller owns
 * them), one madvise per run of adjacent pages.  Callers skip it when
 * every page was dirty: a dirty free page is one a caller held before,
 * so it was prefaulted or written then and is still resident (only
 * trimming, which makes it clean, gives it back to the OS); asking the
 * kernel again costs a system call per run for nothing. */
void zmi_pages_prefault(struct zm_pages *p, const zm_pfn_t *pfns, size_t n);
/* zm_pages_alloc_at_run took page pfn of zone z, the first of n wanted,
 * and it is not resident: make it resident, in one call with the free
 * pages that follow it in place, up to n - 1, which are set aside in the
 * calling thread's cache as a run's are (tcache.c).  No zone lock held. */
void zmi_pages_tcache_ahead_at(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn,
			       unsigned n);

/* bad input, counted (atomic) and reported */
int zmi_pages_bad_free(struct zm_pages *p, zm_pfn_t pfn, const char *why);

/* bulk.c: a bulk request from the zones, a lock per chunk; the pages got */
size_t zmi_pages_bulk_alloc(struct zm_pages *p, size_t n, zm_pfn_t *pfns);

/* tcache.c */
void zmi_pages_tcache_detach_all(struct zm_pages *p);
size_t zmi_pages_tcache_total(struct zm_pages *p);
/* The bulk calls and pages served from caches, and the pages stolen, for
 * stats. */
void zmi_pages_tcache_bulk_counts(struct zm_pages *p, uint64_t *calls, uint64_t *pages,
				  uint64_t *stolen);
int zmi_pages_tcache_check(struct zm_pages *p, size_t *ncached);
/* Give the calling thread's set-aside pages and run block back (takes
 * zone locks); true if there were any.  For a caller refused by the limit. */
bool zmi_pages_tcache_reclaim(struct zm_pages *p);
/* Take back the pages of the caches whose threads are not in a call of
 * the pages layer (tcache.c: stealing); counted in p->stolen. */
void zmi_pages_tcache_steal(struct zm_pages *p);
/* The calling thread's home zone in p (zone 0 without a cache). */
unsigned zmi_pages_home_zone(struct zm_pages *p);

#endif
