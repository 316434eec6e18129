/*
 * Bulk allocation (SEEDS.md §2): many single pages in one call.
 *
 * A separate entry point, so that the single-page fast path carries no
 * trace of it.  It bypasses the per-thread caches and takes the lock once
 * per chunk of ZM_PAGES_CHUNK pages; within a chunk, whole free blocks are
 * cut into pages without touching the free lists once per page.
 */
#include <errno.h>
#include <string.h>

#include "pages/pages_internal.h"

size_t zm_pages_alloc_bulk(struct zm_pages *p, size_t n, zm_pfn_t *pfns)
{
	size_t got = 0;
	bool reclaimed = false;

	while (got < n) {
		size_t want = n - got < ZM_PAGES_CHUNK ? n - got : ZM_PAGES_CHUNK;
		size_t k, dirty;
		bool at_limit;

		zm_lock(&p->lock);
		k = zm_buddy_take_pages(p, want, pfns + got, PG_ALLOC, &dirty);
		at_limit = k < want && p->nr_out >= p->limit;
		if (k && at_limit)
			p->limit_failures++;  /* cut short by the limit */
		if (got == 0)
			p->bulk_calls++;
		p->bulk_pages += k;
		zm_unlock(&p->lock);
		if (p->prefault && dirty < k)
			zm_pages_prefault(p, pfns + got, k);
		got += k;
		if (at_limit && !reclaimed) {
			/* once more, with this thread's set-aside pages
			 * given back (if it had any) */
			reclaimed = true;
			if (zm_tcache_reclaim(p))
				continue;
		}
		if (k < want)
			break;
	}
	return got;
}

/* Is pfns[i] a valid single page to free?  (with p->lock held) */
static bool freeable(struct zm_pages *p, zm_pfn_t pfn)
{
	struct zm_pg *pg;

	if (pfn >= p->npages)
		return false;
	pg = zm_pg_of(p, pfn);
	return pg->state == PG_ALLOC && pg->order == 0;
}

/* Length of the aligned run of consecutive valid pages starting at
 * pfns[i], as an order: pages that bulk allocation handed out together
 * usually come back together, and one block merges once instead of once
 * per page. */
static unsigned run_order(struct zm_pages *p, const zm_pfn_t *pfns, size_t i,
			  size_t end)
{
	zm_pfn_t pfn = pfns[i];
	unsigned k = 0;

	while (k < ZM_PAGES_MAX_ORDER && !(pfn & ((2u << k) - 1)) &&
	       i + (2u << k) <= end) {
		for (uint32_t j = 1u << k; j < (2u << k); j++)
			if (pfns[i + j] != pfn + j || !freeable(p, pfn + j))
				return k;
		k++;
	}
	return k;
}

int zm_pages_free_bulk(struct zm_pages *p, size_t n, const zm_pfn_t *pfns)
{
	int ret = 0;
	bool trim = false;

	for (size_t i = 0; i < n;) {
		size_t end = n - i < ZM_PAGES_CHUNK ? n : i + ZM_PAGES_CHUNK;

		zm_lock(&p->lock);
		while (i < end) {
			zm_pfn_t pfn = pfns[i];
			unsigned k;

			if (!freeable(p, pfn)) {
				ret = zm_pages_bad_free(p, pfn, "not an allocated single page");
				i++;
				continue;
			}
			k = run_order(p, pfns, i, end);
			zm_buddy_give(p, pfn, k, true);
			p->nr_out -= (size_t)1 << k;
			i += (size_t)1 << k;
		}
		trim = zm_pages_trim_due(p);
		zm_unlock(&p->lock);
	}
	if (trim)
		zm_pages_trim_to(p, p->reserve);
	return ret;
}
