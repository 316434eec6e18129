/*
 * Bulk allocation (background §2): many single pages in one call.
 *
 * A separate entry point, so that the single-page fast path carries no
 * trace of it.  A request of ZM_BULK_CACHED pages or more bypasses the
 * per-thread caches and takes a zone's lock once per chunk of
 * ZM_PAGES_CHUNK pages (the calling thread's home zone first); within a
 * chunk, whole free blocks are cut into pages without touching the free
 * lists once per page.  A smaller one is served from the thread's cache
 * (zm_pages_alloc_bulk, in tcache.c beside the single-page path), as that
 * many single-page calls would be, without their calls: a lock taken for
 * two or four pages cost more than the cache (docs/pages.md).
 */
#include <errno.h>
#include <string.h>

#include "pages/pages_internal.h"

size_t zmi_pages_bulk_alloc(struct zm_pages *p, size_t n, zm_pfn_t *pfns)
{
	size_t got = 0;
	bool reclaimed = false, first = true;
	unsigned home, tried = 0;

	home = zmi_pages_home_zone(p);

	/* chunk by chunk from the home zone, then from the next ones as each
	 * runs dry */
	while (got < n && tried < p->nzones) {
		struct zmi_pages_zone *z = &p->zone[(home + tried) % p->nzones];
		size_t want = n - got < ZM_PAGES_CHUNK ? n - got : ZM_PAGES_CHUNK;
		size_t k, dirty;
		bool limited = false;

		zmi_lock(&z->lock);
		k = zmi_pages_buddy_take_pages(p, z, want, pfns + got, PG_ALLOC, &dirty, &limited);
		if (k && limited)
			z->limit_failures++;  /* cut short by the limit */
		if (first)
			z->bulk_calls++;
		first = false;
		z->bulk_pages += k;
		zmi_unlock(&z->lock);
		if (p->prefault && dirty < k)
			zmi_pages_prefault(p, pfns + got, k);
		got += k;
		if (limited && !reclaimed) {
			/* once more, with this thread's set-aside pages
			 * given back (if it had any) */
			reclaimed = true;
			if (zmi_pages_tcache_reclaim(p))
				continue;
		}
		if (limited)
			break;
		if (k < want)
			tried++;  /* this zone is empty: the next */
	}
	return got;
}

/* Is pfns[i] a valid single page to free?  (the lock of its zone held:
 * the caller checks the zone of the run's first page, and an aligned run
 * of at most 2^ZM_PAGES_MAX_ORDER pages never crosses into another) */
static bool freeable(struct zm_pages *p, zm_pfn_t pfn)
{
	struct zmi_pages_pg *pg;

	if (pfn >= p->npages)
		return false;
	pg = zmi_pages_pg_of(p, pfn);
	return pg->state == PG_ALLOC && pg->order == 0;
}

/* Length of the aligned run of consecutive valid pages starting at
 * pfns[i], as an order: pages that bulk allocation handed out together
 * usually come back together, and one block merges once instead of once
 * per page. */
static unsigned run_order(struct zm_pages *p, const zm_pfn_t *pfns, size_t i, size_t end)
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
	uint32_t touched = 0;  /* zones given to: trimmed once, at the end */
	int ret = 0;

	if (!p || (n && !pfns))
		return -EINVAL;

	/* a chunk at a time, under the lock of the zone of its first page;
	 * a page of another zone ends the chunk */
	for (size_t i = 0; i < n;) {
		size_t end = n - i < ZM_PAGES_CHUNK ? n : i + ZM_PAGES_CHUNK, given = 0;
		struct zmi_pages_zone *z;

		if (pfns[i] >= p->npages) {
			ret = zmi_pages_bad_free(p, pfns[i], "not an allocated single page");
			i++;
			continue;
		}
		z = zmi_pages_zone_of(p, pfns[i]);
		zmi_lock(&z->lock);
		while (i < end) {
			zm_pfn_t pfn = pfns[i];
			unsigned k;

			if (pfn < p->npages && zmi_pages_zone_of(p, pfn) != z)
				break;
			if (!freeable(p, pfn)) {
				ret = zmi_pages_bad_free(p, pfn, "not an allocated single page");
				i++;
				continue;
			}
			k = run_order(p, pfns, i, end);
			zmi_pages_buddy_give(p, z, pfn, k, true);
			given += (size_t)1 << k;
			i += (size_t)1 << k;
		}
		zmi_pages_zone_returned(p, z, given);
		zmi_unlock(&z->lock);
		touched |= 1u << (z - p->zone);
	}
	for (unsigned i = 0; i < p->nzones; i++)
		if (touched & (1u << i))
			zmi_pages_zone_maybe_trim(p, &p->zone[i]);
	return ret;
}
