/*
 * Per-thread page caches: the single-page fast path.
 *
 * Each thread keeps, per zm_pages instance it uses, a small stack of free
 * pfns.  zm_pages_alloc() pops from it and zm_pages_free() pushes onto it
 * without any lock or atomic read-modify-write.  An empty cache is
 * refilled from its home zone (pages_internal.h), and a full one drained
 * (each page to its own zone), by cache_batch pages under a zone lock in
 * one acquisition; a cache never holds more than cache_cap pages, so the
 * pages a thread may hoard are bounded.
 *
 * Finding the cache: a thread-local list of the thread's caches, most
 * recently used first; the common case (one instance) is one load and one
 * compare.
 *
 * Runs.  zm_pages_alloc_run() hands out the first page of a run of n
 * consecutive pages and sets the other n - 1 aside in the thread's cache
 * (`ahead`, oldest first), apart from the stack, so that zm_pages_alloc()
 * never gives them to someone else: a caller growing a run page by page
 * (a zspage populating, zsmalloc/zspage.c) takes each next page with
 * zm_pages_take_cached(), without the lock.  Runs are carved from a block
 * the thread takes whole (`run_next` .. `run_end`; 2^run_order pages, or
 * as many as the run if it is longer), so that the lock is taken once per
 * block and not once per run: per run, the lock is what two threads
 * making zspages fast wait on (docs/results/2026-12-02-code-choices.md).  At most ahead_max pages of a run are set
 * aside; a longer run keeps its next pages in the block, where
 * zm_pages_take_cached() takes the block's next page too.
 * What is left of a block too short for the next run, and the older half
 * of the set-aside pages when there are more than ahead_max, go back to
 * the free lists in place (a zspage that grows later takes its next page
 * there with zm_pages_alloc_at), not onto the stack, which they would
 * overflow into drains and trims.
 * Blocks are cut from resident memory first (zmi_pages_buddy_take_run).  Both
 * sizes follow the cache's (cache_cap, a byte budget): a block of 32 and
 * 64 set-aside pages at 4 KiB, 8 and 8 at 32 KiB.  All of these pages are in state PG_CACHED
 * and count as cached; PG_RESIDENT tells which are resident (taken from
 * dirty blocks, or freed by a caller), for prefault and for the dirty
 * flag they go back with.
 *
 * Lifetime.  A cache is allocated by its thread and registered with its
 * instance (p->caches) under the global tc_lock.  When the thread exits,
 * a pthread key destructor returns every cached page to its instance and
 * frees the caches.  When an instance is destroyed, its caches are detached
 * (owner set to NULL) under tc_lock; the owning threads free detached
 * caches the next time they walk their list.
 *
 * Taking back an idle thread's cache.  A thread that freed many pages and
 * then went quiet (or never calls again) would keep up to cache_cap of
 * them resident for good; zmi_pages_tcache_steal, run by the trims, takes the
 * pages of every cache whose owner is not in a call of this file at that
 * moment.  The owner's side is two plain stores and a load a call: `in`
 * is 1 while it is in one (tc_try_enter, tc_leave), and it reads `steal`
 * after setting in.  The stealer sets steal on each cache, runs
 * membarrier(2) once (every running thread passes a barrier: for each
 * owner, either its in = 1 is visible to the stealer, or its load sees
 * steal set), then reads each in: 0, the stack is the stealer's until
 * it clears steal; 1, that cache is left alone.  An owner that finds
 * steal set leaves (in = 0) and waits for it to clear; the
 * stealer holds it for one give-back of at most cache_cap pages.  The
 * run block and the set-aside pages go too (a zspage that grows later
 * takes its next page from the free lists, zm_pages_alloc_at, as when
 * they were given back for room).  Where the kernel refuses membarrier,
 * nothing is stolen.
 *
 * Lock order: tc_lock -> a zone lock (one at a time).  `count` and `owner` are read by other
 * threads (stats, destroy) with relaxed atomics; only the owning thread
 * writes count.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/os.h"
#include "base/worker.h"
#include "pages/pages_internal.h"

struct zmi_pages_tcache {
	struct zm_pages *owner;       /* NULL once detached; atomic */
	struct zmi_pages_tcache *tnext;      /* the thread's list; owner thread only */
	struct zmi_pages_tcache *rnext, *rprev; /* owner's registry; tc_lock */
	unsigned count;               /* pages held; atomic, owner thread writes
					 (and a stealer, while steal is set
					 and in is 0) */
	unsigned in;                  /* 1 while the owner is in a call;
					 owner writes (release), stealers read */
	unsigned steal;               /* set while a stealer may take the
					 stack; written under tc_lock */
	unsigned cap;
	unsigned home;                /* the zone refills and runs come from */
	unsigned nahead;              /* pages set aside; like count */
	uint64_t bulk_calls, bulk_pages; /* small bulk calls served here; like
					    count (folded into the instance's
					    when the cache is unregistered) */
	zm_pfn_t run_next, run_end;   /* the block runs are carved from */
	unsigned run_left;            /* run_end - run_next, for other
					 threads: written like count */
	zm_pfn_t ahead[ZM_PAGES_AHEAD_MAX]; /* set aside, oldest first */
	zm_pfn_t pfns[];
};

static pthread_mutex_t tc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;
static __thread struct zmi_pages_tcache *tls_caches __attribute__((tls_model("initial-exec")));

static void tc_thread_exit(void *unused);

/* fork: tc_lock is held across it, so the child finds the registry
 * whole.  The child keeps the forking thread's caches; the other threads'
 * stay registered with their instances, their pages counted as cached
 * (stats, destroy's leak report), and nothing ever waits for them: an
 * instance's destroy detaches them, and they are never freed (their
 * threads do not exist in the child; a few hundred bytes each). */
static void tc_fork_prepare(void)
{
	pthread_mutex_lock(&tc_lock);
}

static void tc_fork_release(void)
{
	pthread_mutex_unlock(&tc_lock);
}

static void tc_key_init(void)
{
	pthread_key_create(&tc_key, tc_thread_exit);
	zmi_fork_hook(tc_fork_prepare, tc_fork_release, tc_fork_release);
}

static inline struct zm_pages *tc_owner(struct zmi_pages_tcache *tc)
{
	return __atomic_load_n(&tc->owner, __ATOMIC_ACQUIRE);
}

static inline void tc_set_count(struct zmi_pages_tcache *tc, unsigned n)
{
	__atomic_store_n(&tc->count, n, __ATOMIC_RELAXED);
}

/* The owner's side of stealing (above).  tc_try_enter at the start of
 * each call that touches the stack: false if a stealer is at work, when
 * the caller leaves through tc_wait_steal and starts again (the fast
 * paths do so in a tail call, so that they save no registers); tc_enter
 * where that does not matter; tc_leave at the end; tc_enter_nested
 * where a call may come from inside another (it enters only if not in
 * one). */
static inline bool tc_try_enter(struct zmi_pages_tcache *tc)
{
	ZM_ASSERT(!__atomic_load_n(&tc->in, __ATOMIC_RELAXED));
	__atomic_store_n(&tc->in, 1, __ATOMIC_RELAXED);
	/* the store before the load, as the compiler emits them; the
	 * stealer's membarrier orders them on the CPU */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return zmi_likely(!__atomic_load_n(&tc->steal, __ATOMIC_ACQUIRE));
}

static inline void tc_leave(struct zmi_pages_tcache *tc)
{
	__atomic_store_n(&tc->in, 0, __ATOMIC_RELEASE);
}

static __attribute__((noinline)) void tc_wait_steal(struct zmi_pages_tcache *tc)
{
	tc_leave(tc);
	while (__atomic_load_n(&tc->steal, __ATOMIC_ACQUIRE))
		sched_yield();
}

static inline void tc_enter(struct zmi_pages_tcache *tc)
{
	while (!tc_try_enter(tc))
		tc_wait_steal(tc);
}

static inline bool tc_enter_nested(struct zmi_pages_tcache *tc)
{
	if (__atomic_load_n(&tc->in, __ATOMIC_RELAXED))
		return false;
	tc_enter(tc);
	return true;
}

/* A cached page goes to its caller: resident when the pool wants that
 * (prefault), if it is not already (PG_RESIDENT). */
static inline void cached_out(struct zm_pages *p, zm_pfn_t pfn)
{
	struct zmi_pages_pg *g = zmi_pages_pg_of(p, pfn);
	bool resident = g->flags & PG_RESIDENT;

	g->flags = 0;
	zmi_pages_pg_set_state(g, PG_ALLOC);
	if (zmi_unlikely(!resident) && p->prefault)
		zmi_pages_prefault(p, &pfn, 1);
}

static void registry_unlink(struct zm_pages *p, struct zmi_pages_tcache *tc)
{
	p->tc_bulk_calls += tc->bulk_calls;
	p->tc_bulk_pages += tc->bulk_pages;
	if (tc->rprev)
		tc->rprev->rnext = tc->rnext;
	else
		p->caches = tc->rnext;
	if (tc->rnext)
		tc->rnext->rprev = tc->rprev;
	tc->rnext = tc->rprev = NULL;
}

/* Is cached page pfn resident (it goes back to the buddy dirty)? */
static inline bool cached_resident(const struct zm_pages *p, zm_pfn_t pfn)
{
	return zmi_pages_pg_of(p, pfn)->flags & PG_RESIDENT;
}

/* Page pfn, just taken from tc's run block or set-aside pages (tc
 * entered), leaves for its caller: if it is not resident, make it and
 * the pages of tc that follow it in memory (the block's next ones, or the
 * set-aside pages of its run) resident in one call, ZM_PREFAULT_AHEAD at
 * most, and mark them so (their records are tc's while it holds them). */
static void prefault_ahead(struct zm_pages *p, struct zmi_pages_tcache *tc, zm_pfn_t pfn)
{
	zm_pfn_t run[ZM_PREFAULT_AHEAD];
	unsigned n = 0;

	if (!p->prefault || cached_resident(p, pfn) ||
	    __atomic_load_n(&zmi_pages_zone_of(p, pfn)->resident_max, __ATOMIC_RELAXED) <
		    (ZM_PREFAULT_BATCH_BYTES >> p->page_shift))
		return;
	run[n++] = pfn;
	if (pfn + 1 == tc->run_next) {
		while (n < ZM_PREFAULT_AHEAD && pfn + n < tc->run_end)
			run[n] = pfn + n, n++;
	} else {
		/* a run's set-aside pages are in order, oldest run first */
		for (unsigned i = 0; i < tc->nahead && n < ZM_PREFAULT_AHEAD; i++)
			if (tc->ahead[i] == pfn + n)
				run[n] = pfn + n, n++;
	}
	for (unsigned i = 1; i < n; i++)
		if (cached_resident(p, run[i]))
			n = i;  /* up to the first that is resident already */
	zmi_pages_prefault(p, run, n);
	for (unsigned i = 0; i < n; i++)
		zmi_pages_pg_of(p, run[i])->flags |= PG_RESIDENT;
}

/* Cached pages [a, a + len) of zone z back to its buddy (z's lock held),
 * dirty if resident: each stretch alike in residency as the fewest
 * aligned blocks that cover it, one zmi_pages_buddy_give each, not one a page,
 * to keep the lock short: pages given back together are mostly
 * neighbours (a zspage's run, the rest of a run block). */
static void give_range(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t a, unsigned len)
{
	while (len) {
		bool res = cached_resident(p, a);
		unsigned n = 1;

		while (n < len && cached_resident(p, a + n) == res)
			n++;
		len -= n;
		while (n) {
			unsigned k = (unsigned)__builtin_ctz(a | (1u << ZM_PAGES_MAX_ORDER));

			while ((1u << k) > n)
				k--;
			zmi_pages_buddy_give(p, z, a, k, res);
			a += 1u << k;
			n -= 1u << k;
		}
	}
}

/* Cached pages back to the buddy, each to its zone (taking the zones'
 * locks, one at a time), runs of neighbours through give_range, and
 * counted back.  drain: count a drain (in the first zone); trim: then
 * trim the zones given to, as far as the reserve says (not on the run
 * path, which zsmalloc takes with a class lock held, nor at thread exit,
 * under tc_lock). */
static void cached_give_all(struct zm_pages *p, const zm_pfn_t *pfns, unsigned n, bool drain,
			    bool trim)
{
	unsigned i = 0;

	while (i < n) {
		struct zmi_pages_zone *z = zmi_pages_zone_of(p, pfns[i]);
		unsigned from = i;

		zmi_lock(&z->lock);
		z->drains += drain;
		drain = false;
		while (i < n && zmi_pages_zone_of(p, pfns[i]) == z) {
			zm_pfn_t a = pfns[i];
			unsigned len = 1;

			while (i + len < n && pfns[i + len] == a + len && a + len < z->end)
				len++;
			give_range(p, z, a, len);
			i += len;
		}
		/* counted back under the lock: stats, holding every zone's,
		 * see a page free or out, never both */
		zmi_pages_zone_returned(p, z, i - from);
		zmi_unlock(&z->lock);
		if (trim)
			zmi_pages_zone_maybe_trim(p, z);
	}
}

/* Sort pfns[0..n) ascending (n is a batch: at most a cache's worth; the
 * pages of a batch are mostly in order already, where this is one pass). */
static void sort_pfns(zm_pfn_t *pfns, unsigned n)
{
	for (unsigned i = 1; i < n; i++) {
		zm_pfn_t v = pfns[i];
		unsigned j = i;

		for (; j > 0 && pfns[j - 1] > v; j--)
			pfns[j] = pfns[j - 1];
		pfns[j] = v;
	}
}

/* Give `n` pages from the top of the cache back to the buddy, sorted:
 * neighbours go back as blocks, and each zone's pages together; trim:
 * then trim those zones (not under tc_lock: madvise calls there would
 * stall every thread meeting an instance, exiting or reading stats). */
static void tc_give_back(struct zm_pages *p, struct zmi_pages_tcache *tc, unsigned n, bool drain,
			 bool trim)
{
	unsigned top = tc->count;

	sort_pfns(tc->pfns + top - n, n);
	cached_give_all(p, tc->pfns + top - n, n, drain, trim);
	tc_set_count(tc, top - n);
}

static inline void tc_set_nahead(struct zmi_pages_tcache *tc, unsigned n)
{
	__atomic_store_n(&tc->nahead, n, __ATOMIC_RELAXED);
}

/* Pages left in the run block, as other threads (stats) see it. */
static inline unsigned tc_run_left(const struct zmi_pages_tcache *tc)
{
	return __atomic_load_n(&tc->run_left, __ATOMIC_RELAXED);
}

/* The owner moves the run block's start (and end); run_left follows. */
static inline void tc_set_run(struct zmi_pages_tcache *tc, zm_pfn_t next, zm_pfn_t end)
{
	tc->run_next = next;
	tc->run_end = end;
	__atomic_store_n(&tc->run_left, end - next, __ATOMIC_RELAXED);
}

/* The `n` oldest set-aside pages back to the free lists, in place. */
static void ahead_give_oldest(struct zm_pages *p, struct zmi_pages_tcache *tc, unsigned n)
{
	cached_give_all(p, tc->ahead, n, false, false);
	memmove(tc->ahead, tc->ahead + n, (tc->nahead - n) * sizeof(zm_pfn_t));
	tc_set_nahead(tc, tc->nahead - n);
}

/* The rest of the run block back to the free lists (a block lies in
 * one zone). */
static void block_give_back(struct zm_pages *p, struct zmi_pages_tcache *tc)
{
	unsigned n = tc->run_end - tc->run_next;

	if (n) {
		struct zmi_pages_zone *z = zmi_pages_zone_of(p, tc->run_next);

		zmi_lock(&z->lock);
		give_range(p, z, tc->run_next, n);
		zmi_pages_zone_returned(p, z, n);
		zmi_unlock(&z->lock);
	}
	tc_set_run(tc, tc->run_end, tc->run_end);
}

/* Every set-aside page and the run block back. */
static void ahead_give_back(struct zm_pages *p, struct zmi_pages_tcache *tc)
{
	ahead_give_oldest(p, tc, tc->nahead);
	block_give_back(p, tc);
}

/* The calling thread's cache for p, if it has one (not made here). */
static struct zmi_pages_tcache *tc_find(struct zm_pages *p)
{
	struct zmi_pages_tcache *tc = tls_caches;

	while (tc && tc_owner(tc) != p)
		tc = tc->tnext;
	return tc;
}

bool zmi_pages_tcache_reclaim(struct zm_pages *p)
{
	struct zmi_pages_tcache *tc = tc_find(p);
	bool in, some;

	if (!tc)
		return false;
	in = tc_enter_nested(tc);
	some = tc->count || tc->nahead || tc_run_left(tc);
	/* the stack too: at a small limit, a refill's batch was most of
	 * it, and a run cannot be cut from pages held one by one */
	if (tc->count)
		tc_give_back(p, tc, tc->count, false, false);
	if (some)
		ahead_give_back(p, tc);
	if (in)
		tc_leave(tc);
	return some;
}

unsigned zmi_pages_home_zone(struct zm_pages *p)
{
	struct zmi_pages_tcache *tc = tc_find(p);

	return tc ? tc->home : 0;
}

/* Thread exit: return every cached page, free every cache. */
static void tc_thread_exit(void *unused)
{
	struct zmi_pages_tcache *tc = tls_caches, *next;

	pthread_mutex_lock(&tc_lock);
	for (; tc; tc = next) {
		struct zm_pages *p = tc_owner(tc);

		next = tc->tnext;
		if (p) {
			tc_give_back(p, tc, tc->count, false, false);
			ahead_give_back(p, tc);
			registry_unlink(p, tc);
		}
		free(tc);
	}
	tls_caches = NULL;
	pthread_mutex_unlock(&tc_lock);
}

/* Slow lookup: walk the thread's list, dropping detached caches, moving
 * the match to the front, or creating a cache.  NULL if caching is off or
 * memory is short (the caller then takes the locked path). */
static struct zmi_pages_tcache *tc_lookup(struct zm_pages *p)
{
	struct zmi_pages_tcache **link = &tls_caches, *tc;

	if (p->cache_cap <= 1)
		return NULL;
	while ((tc = *link) != NULL) {
		struct zm_pages *o = tc_owner(tc);

		if (!o) {
			*link = tc->tnext;
			free(tc);
			continue;
		}
		if (o == p) {
			*link = tc->tnext;
			tc->tnext = tls_caches;
			tls_caches = tc;
			return tc;
		}
		link = &tc->tnext;
	}
	pthread_once(&tc_once, tc_key_init);
	tc = calloc(1, sizeof(*tc) + p->cache_cap * sizeof(zm_pfn_t));
	if (!tc)
		return NULL;
	tc->owner = p;
	tc->cap = p->cache_cap;
	tc->home = __atomic_fetch_add(&p->next_home, 1, __ATOMIC_RELAXED) % p->nzones;
	pthread_mutex_lock(&tc_lock);
	tc->rnext = p->caches;
	if (p->caches)
		p->caches->rprev = tc;
	p->caches = tc;
	pthread_mutex_unlock(&tc_lock);
	tc->tnext = tls_caches;
	tls_caches = tc;
	pthread_setspecific(tc_key, tc);  /* any non-NULL value arms exit */
	return tc;
}

static inline struct zmi_pages_tcache *tc_get(struct zm_pages *p)
{
	struct zmi_pages_tcache *tc = tls_caches;

	if (zmi_likely(tc && tc_owner(tc) == p))
		return tc;
	return tc_lookup(p);
}

/* ---- the locked path, used when a cache is empty/full or absent ------ */

static __attribute__((noinline)) int alloc_locked(struct zm_pages *p, struct zmi_pages_tcache *tc, zm_pfn_t *pfn)
{
	size_t got = 0, dirty = 0;
	struct zmi_pages_zone *z;
	bool limited = false, batch = true;

	/* resident pages first, the home zone's, else the next zone's that
	 * has some (no more than it has: clean ones in the batch would be
	 * made resident here, zmi_pages_dirty_somewhere); then the home zone,
	 * else the next that has pages */
	for (int pass = p->prefault && zmi_pages_dirty_somewhere(p, 1) ? 0 : 1; pass < 2 && !got;
	     pass++) {
		unsigned home = tc ? tc->home : 0;

		/* resident pages: from the zone that has by far the most
		 * (zmi_pages_resident_start), if not home */
		ZM_FOR_EACH_ZONE_FROM(p, pass ? home : zmi_pages_resident_start(p, home), i, z) {
			size_t want = tc ? p->cache_batch : 1;

			if (pass == 0 && !__atomic_load_n(&z->nr_dirty_free, __ATOMIC_RELAXED))
				continue;
			zmi_lock(&z->lock);
			if (pass == 0 && want > z->nr_dirty_free)
				want = z->nr_dirty_free;
			if (!want) {
				zmi_unlock(&z->lock);
				continue;
			}
			if (tc) {
				batch = z->resident_max >= (ZM_PREFAULT_BATCH_BYTES >> p->page_shift);
				got = zmi_pages_buddy_take_pages(p, z, want, tc->pfns, PG_CACHED,
								 &dirty, &limited);
				z->refills += got != 0;  /* a dry zone tried is no refill */
				tc_set_count(tc, (unsigned)got);
			} else {
				got = zmi_pages_buddy_take_pages(p, z, 1, pfn, PG_ALLOC, &dirty,
								 &limited);
			}
			zmi_unlock(&z->lock);
			if (got || limited)
				break;
		}
		if (limited)
			break;
	}
	if (!got && tc && zmi_pages_tcache_reclaim(p))
		return alloc_locked(p, tc, pfn);  /* at the limit: once more */
	if (!got)
		return -ENOMEM;
	/* a small zone's refill: each page made resident when handed out
	 * (cached_out), not the whole batch now */
	if (p->prefault && dirty < got && batch) {
		zmi_pages_prefault(p, tc ? tc->pfns : pfn, got);
		for (size_t i = 0; tc && i < got; i++)
			zmi_pages_pg_of(p, tc->pfns[i])->flags = PG_RESIDENT;
	}
	if (tc) {
		tc_set_count(tc, tc->count - 1);
		*pfn = tc->pfns[tc->count];
		cached_out(p, *pfn);
	}
	return 0;
}

/* zm_pages_alloc's ways out of its fast path, apart so that it calls
 * them only in tail position: an empty stack, and a stealer at work. */
static __attribute__((noinline)) int alloc_refill(struct zm_pages *p, struct zmi_pages_tcache *tc,
						  zm_pfn_t *pfn)
{
	int rc = alloc_locked(p, tc, pfn);

	tc_leave(tc);
	return rc;
}

static __attribute__((noinline)) int alloc_wait(struct zm_pages *p, struct zmi_pages_tcache *tc,
						zm_pfn_t *pfn)
{
	tc_wait_steal(tc);
	return zm_pages_alloc(p, pfn);
}

int zm_pages_alloc(struct zm_pages *p, zm_pfn_t *pfn)
{
	struct zmi_pages_tcache *tc;
	unsigned n;

	if (zmi_unlikely(!p || !pfn))
		return -EINVAL;
	tc = tc_get(p);
	if (zmi_unlikely(!tc))
		return alloc_locked(p, NULL, pfn);
	if (zmi_unlikely(!tc_try_enter(tc)))
		return alloc_wait(p, tc, pfn);
	if (zmi_likely((n = tc->count) != 0)) {
		zm_pfn_t got = tc->pfns[n - 1];

		tc_set_count(tc, n - 1);
		tc_leave(tc);  /* the page is off the stack: its record is ours */
		cached_out(p, got);
		*pfn = got;
		return 0;
	}
	return alloc_refill(p, tc, pfn);
}

/* Count a small bulk call served by the cache (stats). */
static inline void bulk_count(struct zmi_pages_tcache *tc, size_t got)
{
	__atomic_store_n(&tc->bulk_calls, tc->bulk_calls + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&tc->bulk_pages, tc->bulk_pages + got, __ATOMIC_RELAXED);
}

/* A small bulk request that the cache cannot fill at once: what it has,
 * then refills (and their top pages) as zm_pages_alloc would take them;
 * without a cache, the zones (bulk.c). */
static __attribute__((noinline)) size_t bulk_slow(struct zm_pages *p, size_t n, zm_pfn_t *pfns)
{
	struct zmi_pages_tcache *tc;
	size_t got = 0;

	if (!p || (n && !pfns))
		return 0;
	if (!(tc = tc_get(p)))
		return zmi_pages_bulk_alloc(p, n, pfns);
	tc_enter(tc);
	while (got < n) {
		unsigned c = tc->count;

		if (!c) {
			if (alloc_locked(p, tc, &pfns[got]))
				break;
			got++;
			continue;
		}
		for (; c && got < n; got++) {
			pfns[got] = tc->pfns[--c];
			cached_out(p, pfns[got]);
		}
		tc_set_count(tc, c);
	}
	bulk_count(tc, got);
	tc_leave(tc);
	return got;
}

/* The fast path's rare prefault, apart so that the fast path calls
 * nothing but in tail position (and saves no registers). */
static __attribute__((noinline)) size_t bulk_prefault(struct zm_pages *p, zm_pfn_t *pfns,
						      size_t n)
{
	zmi_pages_prefault(p, pfns, n);
	return n;
}

static __attribute__((noinline)) size_t bulk_wait(struct zm_pages *p, struct zmi_pages_tcache *tc,
						  size_t n, zm_pfn_t *pfns)
{
	tc_wait_steal(tc);
	return bulk_slow(p, n, pfns);
}

/* Bulk allocation: a request of ZM_BULK_CACHED pages or more goes to the
 * zones (bulk.c), a lock per chunk; a smaller one that the thread's cache
 * holds is served from it as that many single-page calls would be,
 * without their calls; the rest take bulk_slow. */
size_t zm_pages_alloc_bulk(struct zm_pages *p, size_t n, zm_pfn_t *pfns)
{
	struct zmi_pages_tcache *tc = tls_caches;
	unsigned c;

	if (zmi_likely(n < ZM_BULK_CACHED && tc && pfns && p && tc_owner(tc) == p &&
		       __atomic_load_n(&tc->count, __ATOMIC_RELAXED) >= n)) {
		struct zmi_pages_pg *pg = p->pg;  /* the records' stores alias p */
		const zm_pfn_t *top;
		unsigned all = PG_RESIDENT;  /* the flags all pages have */

		if (zmi_unlikely(!tc_try_enter(tc)))
			return bulk_wait(p, tc, n, pfns);
		if (zmi_unlikely((c = tc->count) < n)) {  /* stolen meanwhile */
			tc_leave(tc);
			return bulk_slow(p, n, pfns);
		}
		top = &tc->pfns[c];

		/* cached_out's work, the newest first as single pages would
		 * go; the prefault (rare) left for after the loop, so that the
		 * loop calls nothing */
		for (size_t i = 0; i < n; i++) {
			zm_pfn_t pfn = *--top;
			struct zmi_pages_pg *g = &pg[pfn];

			pfns[i] = pfn;
			all &= g->flags;
			g->flags = 0;
			zmi_pages_pg_set_state(g, PG_ALLOC);
		}
		tc_set_count(tc, c - (unsigned)n);
		bulk_count(tc, n);
		tc_leave(tc);
		if (zmi_unlikely(!all) && p->prefault)
			return bulk_prefault(p, pfns, n);
		return n;
	}
	if (n >= ZM_BULK_CACHED)
		return zmi_likely(p && pfns) ? zmi_pages_bulk_alloc(p, n, pfns) : 0;
	return bulk_slow(p, n, pfns);
}

void zmi_pages_tcache_bulk_counts(struct zm_pages *p, uint64_t *calls, uint64_t *pages,
				  uint64_t *stolen)
{
	pthread_mutex_lock(&tc_lock);
	*stolen = p->stolen;
	*calls = p->tc_bulk_calls;
	*pages = p->tc_bulk_pages;
	for (struct zmi_pages_tcache *tc = p->caches; tc; tc = tc->rnext) {
		*calls += __atomic_load_n(&tc->bulk_calls, __ATOMIC_RELAXED);
		*pages += __atomic_load_n(&tc->bulk_pages, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&tc_lock);
}

/* Remove pfn from the newest `depth` of the n entries of a (kept in
 * order: the newest stay on top); false if it is not there. */
static bool remove_newest(zm_pfn_t *a, unsigned n, unsigned depth, zm_pfn_t pfn)
{
	for (unsigned i = n; i > 0 && i + depth > n; i--) {
		if (a[i - 1] != pfn)
			continue;
		memmove(&a[i - 1], &a[i], (n - i) * sizeof(zm_pfn_t));
		return true;
	}
	return false;
}

int zm_pages_take_cached(struct zm_pages *p, zm_pfn_t pfn)
{
	struct zmi_pages_tcache *tc;

	if (!p)
		return -EINVAL;
	tc = tc_get(p);
	if (!tc)
		return -ENOENT;
	tc_enter(tc);
	if (remove_newest(tc->pfns, tc->count, ZM_PAGES_TAKE_DEPTH, pfn))
		tc_set_count(tc, tc->count - 1);
	/* the next page of the run block: a run longer than what could be
	 * set aside grows into it (zm_pages_alloc_run) */
	else if (pfn == tc->run_next && tc->run_next < tc->run_end) {
		tc_set_run(tc, pfn + 1, tc->run_end);
		prefault_ahead(p, tc, pfn);
	/* set aside by zm_pages_alloc_run: newest first, the likely ones */
	} else if (remove_newest(tc->ahead, tc->nahead, tc->nahead, pfn)) {
		tc_set_nahead(tc, tc->nahead - 1);
		prefault_ahead(p, tc, pfn);
	} else {
		pfn = ZM_PFN_NIL;
	}
	tc_leave(tc);
	if (pfn == ZM_PFN_NIL)
		return -ENOENT;
	cached_out(p, pfn);
	return 0;
}

/* A zspage growing in place (zm_pages_alloc_at_run) into memory the
 * trims gave back would pay one call a page, each in an allocation of its
 * own: while the compactor's episode after a mass free ran, such single
 * pages were most of the slow allocations (allocbench --latency,
 * docs/results/2026-12-03-in-place.md).  So the free pages that follow
 * pfn in place, as many as the caller said it will want, are set aside
 * as a run's (the caller takes each next with zm_pages_take_cached), at
 * most ZM_PREFAULT_AHEAD in all and as many as the thread's set-aside
 * room holds, and made resident with pfn in one call.  Not near a limit
 * (pages set aside there are pages refused to others), and not in a zone
 * that never held ZM_PREFAULT_BATCH_BYTES (prefault_ahead's rule). */
void zmi_pages_tcache_ahead_at(struct zm_pages *p, struct zmi_pages_zone *z, zm_pfn_t pfn,
			       unsigned n)
{
	zm_pfn_t run[ZM_PREFAULT_AHEAD];
	struct zmi_pages_tcache *tc = NULL;
	unsigned got = 1, room = 0;

	run[0] = pfn;
	if (n > 1 && !p->limited &&
	    __atomic_load_n(&z->resident_max, __ATOMIC_RELAXED) >=
		    (ZM_PREFAULT_BATCH_BYTES >> p->page_shift))
		tc = tc_get(p);
	if (!tc) {
		zmi_pages_prefault(p, run, 1);
		return;
	}
	tc_enter(tc);
	room = p->ahead_max - tc->nahead;
	if (room > n - 1)
		room = n - 1;
	if (room > ZM_PREFAULT_AHEAD - 1)
		room = ZM_PREFAULT_AHEAD - 1;
	if (room) {
		bool dirty, limited = false;

		zmi_lock(&z->lock);
		while (got <= room && pfn + got < z->end &&
		       zmi_pages_buddy_take_at_as(p, z, pfn + got, false, PG_CACHED, &dirty,
						  &limited) != ZM_PFN_NIL) {
			run[got] = pfn + got;
			got++;
		}
		zmi_unlock(&z->lock);
	}
	/* oldest first: after the runs set aside before */
	for (unsigned i = 1; i < got; i++)
		tc->ahead[tc->nahead + i - 1] = run[i];
	tc_set_nahead(tc, tc->nahead + got - 1);
	zmi_pages_prefault(p, run, got);
	for (unsigned i = 1; i < got; i++)
		zmi_pages_pg_of(p, run[i])->flags |= PG_RESIDENT;
	tc_leave(tc);
}

/* Without a cache (caching off, or no memory for one), near the limit, or
 * with no free block large enough: the first page of a free block of
 * ZM_PAGES_RUN_MAX pages or more (any page if there is none), the rest
 * left free for zm_pages_alloc_at().  The largest run's size, whatever
 * this run needs: with each run asking for its own, a short one would
 * start right after a long one's first page, on the page that one needs
 * next. */
static int alloc_run_locked(struct zm_pages *p, unsigned order, zm_pfn_t *pfn)
{
	zm_pfn_t got = ZM_PFN_NIL;
	struct zmi_pages_zone *z;
	bool dirty = false, limited = false;

	ZM_FOR_EACH_ZONE_FROM(p, zmi_pages_home_zone(p), i, z) {
		zmi_lock(&z->lock);
		got = zmi_pages_buddy_take_spread(p, z, order, &dirty, &limited);
		zmi_unlock(&z->lock);
		if (got != ZM_PFN_NIL || limited)
			break;
	}
	if (got == ZM_PFN_NIL && zmi_pages_tcache_reclaim(p))
		return alloc_run_locked(p, order, pfn);  /* at the limit: once more */
	if (got == ZM_PFN_NIL)
		return -ENOMEM;
	if (p->prefault && !dirty)
		zmi_pages_prefault(p, &got, 1);
	*pfn = got;
	return 0;
}

int zm_pages_alloc_run(struct zm_pages *p, unsigned n, zm_pfn_t *pfn)
{
	struct zmi_pages_tcache *tc;
	unsigned order = 0, k, keep;

	if (!p || !pfn)
		return -EINVAL;

	if (n == 0 || n > ZM_PAGES_RUN_MAX)
		return -EINVAL;
	while ((1u << order) < n)
		order++;
	tc = tc_get(p);
	if (!tc)
		return alloc_run_locked(p, ZM_RUN_ORDER, pfn);
	tc_enter(tc);
	/* No trimming on this path: zsmalloc calls it with a class lock
	 * held, and a trim is madvise calls.  Pages it gives back are
	 * trimmed by the next free that finds the reserve exceeded. */
	if (tc->run_end - tc->run_next < n) {
		zm_pfn_t blk = ZM_PFN_NIL;
		size_t dirty;
		bool one = false;

		/* what is left of the block goes back in place, where it
		 * merges with its neighbours (not onto the stack: it would
		 * overflow it into drains, trims and faults) */
		block_give_back(p, tc);
		/* not near the limit: there, pages set aside would be pages
		 * refused to others */
		if (!p->limited || __atomic_load_n(&p->nr_out, __ATOMIC_RELAXED) +
		    ((size_t)ZM_RUN_LIMIT_ROOM << p->run_order) <= p->limit) {
			unsigned maxo = order > p->run_order ? order : p->run_order;
			struct zmi_pages_zone *z;

			/* resident memory first; when what is resident is
			 * there but in pieces too small for the run, one of
			 * its pages (the run given up: its objects that
			 * straddle pages are reached by copy) rather than
			 * memory the process never touched, which a steady
			 * churn would keep faulting in.  The home zone
			 * first, then the next that has a resident run or
			 * resident pages (zmi_pages_dirty_somewhere), and only
			 * then memory that is not resident, the home
			 * zone's first. */
			ZM_FOR_EACH_ZONE_FROM(p, zmi_pages_resident_start(p, tc->home), i, z) {
				/* (a block on a dirty list may be mostly
				 * clean: a zone without n resident pages is
				 * passed over, the home zone too) */
				if (__atomic_load_n(&z->nr_dirty_free, __ATOMIC_RELAXED) < n)
					continue;
				zmi_lock(&z->lock);
				blk = zmi_pages_buddy_take_run(p, z, maxo, order, true, &k, &dirty);
				if (blk == ZM_PFN_NIL && z->nr_dirty_free >= n)
					one = true;
				zmi_unlock(&z->lock);
				if (blk != ZM_PFN_NIL || one)
					break;
			}
			if (blk == ZM_PFN_NIL && !one)
				ZM_FOR_EACH_ZONE_FROM(p, tc->home, i, z) {
					zmi_lock(&z->lock);
					blk = zmi_pages_buddy_take_run(p, z, maxo, order, false, &k,
								       &dirty);
					zmi_unlock(&z->lock);
					if (blk != ZM_PFN_NIL)
						break;
				}
		}
		if (one || blk == ZM_PFN_NIL)
			tc_leave(tc);
		if (one)  /* through the stack, resident pages first */
			return zm_pages_alloc(p, pfn);
		if (blk == ZM_PFN_NIL)  /* the first page of a free block, or any */
			return alloc_run_locked(p, ZM_RUN_ORDER, pfn);
		tc_set_run(tc, blk, blk + (1u << k));
	}
	*pfn = tc->run_next;
	/* set the rest aside (as much as there is room for: the pages after
	 * that stay in the block); when full, the oldest half goes back to
	 * the free lists, in place: a zspage that grows later finds its
	 * next page there with zm_pages_alloc_at */
	keep = n - 1 < p->ahead_max ? n - 1 : p->ahead_max;
	if (tc->nahead + keep > p->ahead_max) {
		unsigned out = tc->nahead + keep - p->ahead_max + p->ahead_max / 2;

		ahead_give_oldest(p, tc, out < tc->nahead ? out : tc->nahead);
	}
	/* the block first, then the set-aside count: a reader of both
	 * (stats) may miss these pages for a moment, never count them twice */
	tc_set_run(tc, tc->run_next + keep + 1, tc->run_end);
	for (unsigned i = 1; i <= keep; i++)
		tc->ahead[tc->nahead + i - 1] = *pfn + i;
	tc_set_nahead(tc, tc->nahead + keep);
	prefault_ahead(p, tc, *pfn);
	tc_leave(tc);
	cached_out(p, *pfn);
	return 0;
}

/* zm_pages_free with the cache entered (or a stealer at work, then it
 * waits and enters) and full: half of it back to the zones first. */
static __attribute__((noinline)) int free_slow(struct zm_pages *p, struct zmi_pages_tcache *tc,
					       struct zmi_pages_pg *pg, zm_pfn_t pfn)
{
	if (__atomic_load_n(&tc->steal, __ATOMIC_ACQUIRE)) {
		tc_wait_steal(tc);
		tc_enter(tc);
	}
	if (tc->count == tc->cap)
		tc_give_back(p, tc, p->cache_batch, true, true);
	pg->flags = PG_RESIDENT;
	zmi_pages_pg_set_state(pg, PG_CACHED);
	tc->pfns[tc->count] = pfn;
	tc_set_count(tc, tc->count + 1);
	tc_leave(tc);
	return 0;
}

int zm_pages_free(struct zm_pages *p, zm_pfn_t pfn)
{
	struct zmi_pages_tcache *tc;
	struct zmi_pages_pg *pg;

	if (zmi_unlikely(!p))
		return -EINVAL;
	if (zmi_unlikely(pfn >= p->npages))
		return zmi_pages_bad_free(p, pfn, "pfn out of range");
	pg = zmi_pages_pg_of(p, pfn);
	if (zmi_unlikely(zmi_pages_pg_state(pg) != PG_ALLOC || pg->order != 0))
		return zmi_pages_bad_free(p, pfn, zmi_pages_pg_state(pg) == PG_ALLOC ?
					 "page heads a run of order > 0" :
					 "not an allocated page");
	tc = tc_get(p);
	/* near the limit, a page kept in this thread's cache is one other
	 * threads are refused: it goes straight back to its zone */
	if (zmi_unlikely(p->limited) &&
	    __atomic_load_n(&p->nr_out, __ATOMIC_RELAXED) +
	    ((size_t)ZM_RUN_LIMIT_ROOM << p->run_order) > p->limit)
		tc = NULL;
	/* a caller's page is taken as resident (written) */
	if (zmi_likely(tc)) {
		if (zmi_unlikely(!tc_try_enter(tc)) || zmi_unlikely(tc->count == tc->cap))
			return free_slow(p, tc, pg, pfn);
		pg->flags = PG_RESIDENT;
		zmi_pages_pg_set_state(pg, PG_CACHED);
		tc->pfns[tc->count] = pfn;
		tc_set_count(tc, tc->count + 1);
		tc_leave(tc);
	} else {
		struct zmi_pages_zone *z = zmi_pages_zone_of(p, pfn);

		zmi_lock(&z->lock);
		zmi_pages_buddy_give(p, z, pfn, 0, true);
		zmi_pages_zone_returned(p, z, 1);
		zmi_unlock(&z->lock);
		zmi_pages_zone_maybe_trim(p, z);
	}
	return 0;
}

void zm_pages_flush_thread(struct zm_pages *p)
{
	struct zmi_pages_tcache *tc;

	if (!p)
		return;
	tc = tc_find(p);
	if (!tc)
		return;
	tc_enter(tc);
	if (tc->count)
		tc_give_back(p, tc, tc->count, false, false);
	ahead_give_back(p, tc);
	tc_leave(tc);
	for (unsigned z = 0; z < p->nzones; z++)
		zmi_pages_zone_maybe_trim(p, &p->zone[z]);
}

void zmi_pages_tcache_steal(struct zm_pages *p)
{
	struct zmi_pages_tcache *tc;
	size_t taken = 0;
	bool any = false;

	pthread_mutex_lock(&tc_lock);
	for (tc = p->caches; tc; tc = tc->rnext) {
		if (__atomic_load_n(&tc->count, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&tc->nahead, __ATOMIC_RELAXED) || tc_run_left(tc)) {
			__atomic_store_n(&tc->steal, 1, __ATOMIC_RELAXED);
			any = true;
		}
	}
	if (any && zmi_os_membarrier() != 0)
		any = false;  /* no barrier: take nothing, only clear the flags */
	for (tc = p->caches; tc; tc = tc->rnext) {
		if (!__atomic_load_n(&tc->steal, __ATOMIC_RELAXED))
			continue;
		if (any && !__atomic_load_n(&tc->in, __ATOMIC_ACQUIRE)) {
			taken += tc->count + tc->nahead + tc_run_left(tc);
			if (tc->count)
				tc_give_back(p, tc, tc->count, false, false);
			ahead_give_back(p, tc);
		}
		__atomic_store_n(&tc->steal, 0, __ATOMIC_RELEASE);
	}
	p->stolen += taken;
	pthread_mutex_unlock(&tc_lock);
}

/* ---- for destroy, stats and the checker ----------------------------- */

void zmi_pages_tcache_detach_all(struct zm_pages *p)
{
	pthread_mutex_lock(&tc_lock);
	while (p->caches) {
		struct zmi_pages_tcache *tc = p->caches;

		registry_unlink(p, tc);
		/* Keep the count for the leak report, then let go. */
		__atomic_store_n(&tc->owner, NULL, __ATOMIC_RELEASE);
		/* its pages stay out: the arena goes away with them */
	}
	pthread_mutex_unlock(&tc_lock);
}

size_t zmi_pages_tcache_total(struct zm_pages *p)
{
	size_t n = 0;

	pthread_mutex_lock(&tc_lock);
	for (struct zmi_pages_tcache *tc = p->caches; tc; tc = tc->rnext)
		n += __atomic_load_n(&tc->count, __ATOMIC_RELAXED) +
		     __atomic_load_n(&tc->nahead, __ATOMIC_RELAXED) + tc_run_left(tc);
	pthread_mutex_unlock(&tc_lock);
	return n;
}

/* Is pfn a page in state cached?  Else say so, naming where it was held. */
static int check_cached(struct zm_pages *p, zm_pfn_t pfn, const char *where)
{
	if (pfn < p->npages && zmi_pages_pg_of(p, pfn)->state == PG_CACHED)
		return 0;
	zmi_log_error("check: %s pfn %u is not in state cached", where, pfn);
	return 1;
}

/* How many of n held pages to look at: at most max, else say so. */
static unsigned check_count(unsigned n, unsigned max, const char *what, int *bad)
{
	if (n <= max)
		return n;
	zmi_log_error("check: thread cache holds %u %s, more than %u", n, what, max);
	*bad = 1;
	return max;
}

int zmi_pages_tcache_check(struct zm_pages *p, size_t *ncached)
{
	int bad = 0;

	*ncached = 0;
	pthread_mutex_lock(&tc_lock);
	for (struct zmi_pages_tcache *tc = p->caches; tc; tc = tc->rnext) {
		unsigned n = check_count(__atomic_load_n(&tc->count, __ATOMIC_RELAXED), tc->cap,
					 "cached pages", &bad);

		for (unsigned i = 0; i < n; i++)
			bad |= check_cached(p, tc->pfns[i], "cached");
		*ncached += n;
		n = check_count(__atomic_load_n(&tc->nahead, __ATOMIC_RELAXED), p->ahead_max,
				"set-aside pages", &bad);
		for (unsigned i = 0; i < n; i++)
			bad |= check_cached(p, tc->ahead[i], "set-aside");
		*ncached += n;
		for (zm_pfn_t pfn = tc->run_next; pfn < tc->run_end; pfn++)
			bad |= check_cached(p, pfn, "run-block");
		*ncached += tc->run_end - tc->run_next;
	}
	pthread_mutex_unlock(&tc_lock);
	return bad ? -EUCLEAN : 0;
}
