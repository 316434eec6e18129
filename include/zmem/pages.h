/*
 * zm_pages: the page allocator every other zmem layer gets memory from.
 *
 * One arena of virtual memory is reserved up front (MAP_NORESERVE: it costs
 * no memory until touched).  It is cut into pages of one size, a power of
 * two from 4 KiB to 64 KiB, named by page frame number (pfn): pfn N lives at
 * arena + N * page_size.  Runs of 2^order pages come from a buddy allocator;
 * single pages come from a per-thread cache that needs no lock in the common
 * case; zm_pages_alloc_bulk() fills an array of pages taking the lock once
 * per bounded chunk.  Free pages beyond a small reserve are given back to
 * the operating system (madvise), so the process's resident memory falls
 * when pages are freed.
 *
 * Every page has a small metadata record (struct zm_page_meta) that the
 * owner of an allocated page may use as it likes, like the kernel's
 * struct page.
 *
 * Errors follow zmem.h: 0 or a negative errno.  All functions are
 * thread-safe unless noted.
 */
#ifndef ZMEM_PAGES_H
#define ZMEM_PAGES_H

#include <stdbool.h>
#include <stddef.h>

#include <zmem/common.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A page frame number: index of a page in the arena. */
typedef uint32_t zm_pfn_t;

/* Page sizes the pages layer, the pools on it and the store accept: a
 * power of two in this range. */
#define ZM_PAGE_SIZE_MIN     4096u
#define ZM_PAGE_SIZE_MAX     65536u
#define ZM_PAGE_SIZE_DEFAULT 4096u

/* Largest order of zm_pages_alloc_order(): runs of up to 2^10 pages. */
#define ZM_PAGES_MAX_ORDER 10

struct zm_pages_config {
	size_t page_size;     /* power of two, ZM_PAGE_SIZE_MIN..MAX;
				 0 = ZM_PAGE_SIZE_DEFAULT */
	size_t arena_bytes;   /* virtual space to reserve; 0 = 4 GiB */
	size_t limit_pages;   /* most pages out of the allocator at once
	                         (in use or in per-thread caches); 0 = the arena */
	size_t reserve_pages; /* free pages kept resident before the rest go
	                         back to the OS (in each zone: up to zones
	                         times this in all);
	                         0 = default: 1/64 of the pages the zone has
	                         out, at least 8 and at most 1 MiB (256 pages
	                         of 4 KiB), so that it shrinks with the data;
	                         SIZE_MAX = never give memory back */
	unsigned cache_pages; /* bound on a per-thread cache's stack; 0 = default
	                         (256 KiB: 64 pages of 4 KiB, at least 8),
	                         1 = no caching (every call takes the lock).
	                         A thread that allocates runs holds as many
	                         set-aside pages again, at most 64, and a
	                         run block of up to 32 pages */
	int prefault;         /* make pages resident when they leave the
	                         allocator in batches (refills, bulk), one
	                         madvise per run instead of a page fault per
	                         page: for callers that write every page */
	unsigned zones;       /* buddy allocators the arena is cut into, each
	                         with its own lock; a thread takes pages from
	                         one (its home) while it has any.  0 = one
	                         per CPU (a power of two, at most 8) where
	                         each gets 128 MiB of the arena, else fewer;
	                         n = up to n (the power of two at or below,
	                         at most 8; fewer where zones, equal but the
	                         last, would have under 2^ZM_PAGES_MAX_ORDER
	                         pages or the last none);
	                         zm_pages_stats says how many */
};

/* Per-page metadata for the owner of an allocated page: its contents are
 * undefined when the page is allocated (the owner sets what it uses), and
 * the pages layer never touches it, so that an unused record costs no
 * resident memory. */
struct zm_page_meta {
	void *owner;
	uintptr_t priv[2];
};

struct zm_pages_stats {
	size_t page_size;
	size_t total_pages;   /* pages in the arena */
	size_t in_use;        /* allocated to callers */
	size_t free;          /* in the buddy allocator */
	size_t cached;        /* held in per-thread caches */
	size_t reserve;       /* free pages that are still resident */
	size_t resident;      /* in_use + cached + reserve: what the OS sees */
	size_t resident_max;  /* high-water mark of resident (with several
	                         zones, their own marks summed: an upper
	                         bound) */
	size_t limit_pages;
	uint64_t bulk_calls;      /* zm_pages_alloc_bulk() calls */
	uint64_t bulk_pages;      /* pages handed out by them */
	uint64_t refills;         /* per-thread cache refills (lock taken) */
	uint64_t drains;          /* per-thread cache drains (lock taken) */
	uint64_t limit_failures;  /* allocations refused by the limit */
	uint64_t trimmed_pages;   /* pages given back to the OS */
	uint64_t bad_frees;       /* frees refused as bad input */
	unsigned zones;           /* buddy allocators (zm_pages_config.zones) */
	uint64_t stolen_pages;    /* pages taken back from the caches of
	                             threads that were in no call, by trims */
	uint64_t prefaulted_pages; /* pages made resident by the layer in a
	                             caller's call (zm_pages_config.prefault):
	                             each costs the kernel a fault's work */
	uint64_t refilled_pages;  /* free pages made resident ahead of demand
	                             by a pool's worker (prefault) */
};

struct zm_pages;

/* Create an allocator.  cfg may be NULL for all defaults.  Returns 0 and
 * sets *out, or -EINVAL (bad page size, arena smaller than one page or
 * larger than 2^32 pages), -ENOMEM (the reservation failed).
 *
 * Cost: reserves address space only: the arena (arena_bytes, 4 GiB by
 * default), its per-page records (8 bytes a page, 8 MiB for 4 GiB) and
 * owners' records (24 bytes a page) and the free-page bitsets.  Records
 * are written as pages are first used, so an empty instance is 0-4 KiB
 * resident (at most 64 KiB; the zones' structures are a few hundred
 * bytes of heap).  Threads: none. */
ZM_API int zm_pages_create_sized(const struct zm_pages_config *cfg, size_t cfg_size,
				 struct zm_pages **out);
#define zm_pages_create(cfg, out) \
	zm_pages_create_sized((cfg), sizeof(struct zm_pages_config), (out))

/* Release the arena.  Pages still allocated are reported on stderr (as a
 * leak) and released with it.  No other thread may use pages afterwards.
 * Accepts NULL. */
ZM_API void zm_pages_destroy(struct zm_pages *pages);

/* One page, through the calling thread's cache.  Returns 0 and sets *pfn,
 * or -ENOMEM when the arena is exhausted or the limit is reached. */
ZM_API int zm_pages_alloc(struct zm_pages *pages, zm_pfn_t *pfn);

/* Free one page from zm_pages_alloc() or zm_pages_alloc_bulk().  Returns 0,
 * or -EINVAL when pfn is out of range, not allocated, part of a larger run
 * or already free (the page is left untouched). */
ZM_API int zm_pages_free(struct zm_pages *pages, zm_pfn_t pfn);

#ifdef ZMEM_ADVANCED
/* ---- advanced: particular pages and runs (the pool backends' calls) ---- */

/* The page pfn itself, if it is free in the buddy allocator (not in use,
 * not in a per-thread cache).  Returns 0, or -EBUSY if it is not free,
 * -ENOMEM at the limit, -EINVAL if out of range.  For callers that want a
 * page adjacent to one they hold.  With prefault on, also -EBUSY for a
 * page that is not resident while a zone (any) has 32 or more resident free
 * pages: a page elsewhere costs the caller a copy, this one a fault. */
ZM_API int zm_pages_alloc_at(struct zm_pages *pages, zm_pfn_t pfn);

/* The same, for a caller that will want the n - 1 pages after pfn too (1
 * <= n <= ZM_PAGES_RUN_MAX), as a zspage growing in place does: when pfn
 * is not resident and prefault is on, the free pages that follow it are
 * set aside in the calling thread's cache, as zm_pages_alloc_run() sets
 * a run's aside (take each with zm_pages_take_cached()), and made
 * resident with it in one call: one call for many faults.  Only away
 * from the limit, and at most as many as the set-aside room holds.  n = 1
 * is zm_pages_alloc_at(). */
ZM_API int zm_pages_alloc_at_run(struct zm_pages *pages, zm_pfn_t pfn, unsigned n);

/* Turn prefault off (0) or back on (1) for the calling thread, in every
 * instance; returns what it was (1, on, by default).  Off, the pages a
 * call hands this thread are not made resident in that call, runs and
 * set-aside pages included: its writes fault in the pages it touches.
 * For a caller that takes pages while it holds a lock others wait for
 * (zsmalloc's compactor): making a run of 32 pages resident there cost
 * more than the hold's own work. */
ZM_API int zm_pages_thread_prefault(int on);

/* The page pfn itself, if the calling thread freed it lately and its
 * cache still holds it (one of the ZM_PAGES_TAKE_DEPTH pages freed last),
 * or set it aside with zm_pages_alloc_run(), or it is the next page of
 * the thread's run block: no lock (and made resident as the prefault
 * setting asks).  0, or -ENOENT (the page is left where it is).  For callers that free a page and may want that very page
 * back soon, such as zsmalloc reusing a zspage's pages in place. */
#define ZM_PAGES_TAKE_DEPTH 8
ZM_API int zm_pages_take_cached(struct zm_pages *pages, zm_pfn_t pfn);

/* The first page of a run of n consecutive pages (1 <= n <=
 * ZM_PAGES_RUN_MAX); the n - 1 after it are set aside in the calling
 * thread's cache, where only zm_pages_take_cached() takes them, so that a
 * caller growing the run one page at a time (zsmalloc's zspages) takes no
 * lock per page.  Runs are carved from a block of up to ZM_PAGES_RUN_MAX
 * pages the thread takes at once.  A thread sets aside at most
 * ZM_PAGES_AHEAD_MAX pages (as many as its cache holds, if fewer); the
 * older ones go back to the free lists first, in place, where
 * zm_pages_alloc_at() finds them, and a run longer than that has its last
 * pages left in the block.  Pages set aside count as cached.
 * 0, -EINVAL or -ENOMEM (when no run is free: any single page, nothing
 * set aside). */
#define ZM_PAGES_AHEAD_MAX 64
#define ZM_PAGES_RUN_MAX 32
ZM_API int zm_pages_alloc_run(struct zm_pages *pages, unsigned n, zm_pfn_t *pfn);

/* What a pages instance spends on each page a caller holds, for a pool's
 * all-in accounting (meta_bytes): an 8-byte record, and a quarter byte
 * of its free-page bitsets (2 bits a page). */
#define ZM_PAGES_RECORD_BYTES 8
#define ZM_PAGES_META_BYTES(n) ((uint64_t)(n) * ZM_PAGES_RECORD_BYTES + (uint64_t)(n) / 4)

/* ---- advanced: giving memory back, for a pool's worker ---- */

/* The memory was just given back by the layer above (zsmalloc, after a
 * compaction episode): every zone's dirty free pages go back to the OS,
 * with the default reserve all of them but its recent demand and, while
 * zm_pages_trim_due is called, what the decay lets stay a few hundred ms
 * more (docs/pages.md), down to reserve_pages if one was asked for.
 * Takes the zones' locks one at a time; call without any.  Returns pages
 * given back. */
ZM_API size_t zm_pages_trim_idle(struct zm_pages *pages);
/* Each zone down to its recent demand, or to nothing if it had none, as
 * the decay of its free pages allows: for a caller that looks every so
 * often (zsmalloc's worker; the decay and the demand count only while
 * someone does); a few relaxed reads when there is nothing to do.
 * Returns pages given back. */
ZM_API size_t zm_pages_trim_due(struct zm_pages *pages);

/* Whether the instance has a limit below its arena (limit_pages), and
 * whether it keeps all its memory (reserve_pages SIZE_MAX): fixed at
 * creation, so a caller may ask once and keep the answer. */
ZM_API bool zm_pages_limited(const struct zm_pages *pages);
ZM_API bool zm_pages_keeps_memory(const struct zm_pages *pages);
#endif /* ZMEM_ADVANCED */

/* A run of 2^order contiguous pages (order 0..ZM_PAGES_MAX_ORDER), straight
 * from the buddy allocator.  Returns 0 and sets *pfn to the first page, or
 * -EINVAL (order too large), -ENOMEM. */
ZM_API int zm_pages_alloc_order(struct zm_pages *pages, unsigned order, zm_pfn_t *pfn);

/* Free a run from zm_pages_alloc_order(); order must be the one it was
 * allocated with.  Returns 0 or -EINVAL. */
ZM_API int zm_pages_free_order(struct zm_pages *pages, zm_pfn_t pfn, unsigned order);

/* Up to n single pages into pfns[], bypassing the per-thread cache; the
 * lock is taken once per chunk of at most 64 pages.  Returns how many pages
 * it got: fewer than n only when the arena or the limit ran out. */
ZM_API size_t zm_pages_alloc_bulk(struct zm_pages *pages, size_t n, zm_pfn_t *pfns);

/* Free n single pages.  Bad entries are skipped (and counted as bad
 * frees); returns 0, or -EINVAL if any entry was bad. */
ZM_API int zm_pages_free_bulk(struct zm_pages *pages, size_t n, const zm_pfn_t *pfns);

/* pfn <-> address, O(1).  zm_pages_pfn() of an address outside the arena
 * returns UINT32_MAX.  The arena is linear: zm_pages_addr(p, pfn) is
 * zm_pages_addr(p, 0) + pfn * page_size, so callers may cache the base. */
ZM_API void *zm_pages_addr(const struct zm_pages *pages, zm_pfn_t pfn);
ZM_API zm_pfn_t zm_pages_pfn(const struct zm_pages *pages, const void *addr);

/* The metadata record of a page (any pfn in range; NULL otherwise). */
ZM_API struct zm_page_meta *zm_pages_meta(const struct zm_pages *pages, zm_pfn_t pfn);

ZM_API size_t zm_pages_page_size(const struct zm_pages *pages);

/* Return the calling thread's cached pages to the allocator. */
ZM_API void zm_pages_flush_thread(struct zm_pages *pages);

/* Give every free page beyond the reserve back to the OS now (normally this
 * happens by itself, in batches, when pages are freed), and the page
 * records of free blocks of 2^ZM_PAGES_MAX_ORDER pages.  The pages that
 * other threads' caches hold are taken back first, from each thread not
 * in a call of this layer at that moment (where the kernel has
 * membarrier(2)).  Returns how many pages were given back. */
ZM_API size_t zm_pages_trim(struct zm_pages *pages);

/* Fill *st with a consistent snapshot.  0, or -EINVAL (NULL pages or st). */
ZM_API int zm_pages_stats_sized(struct zm_pages *pages, struct zm_pages_stats *st, size_t st_size);
#define zm_pages_stats(pages, st) \
	zm_pages_stats_sized((pages), (st), sizeof(struct zm_pages_stats))

/* Whole-structure checker: walks every free list and every page and checks
 * links, orders, alignment, buddy merging, counters and page states.
 * Returns 0, or -EUCLEAN after printing what is wrong.  Call it while no
 * other thread uses the allocator (per-thread caches are read unlocked). */
ZM_API int zm_pages_check(struct zm_pages *pages);

#ifdef __cplusplus
}
#endif
#endif
